//! The statements Cairn parses itself, before DataFusion sees a statement: AsterixDB-style DDL
//! (`CREATE TYPE`, `CREATE DATASET`), `DROP TYPE/DATASET`, `SHOW`, `DESCRIBE`, `COPY ... FROM`,
//! `INSERT/UPSERT INTO d <JSON objects>`, and `UPSERT INTO d VALUES/SELECT` (rewritten to the
//! `INSERT OR REPLACE INTO` DataFusion plans as an upsert). Anything else is left to DataFusion.

use crate::error::{EngineError, Result};
use crate::script::ScriptStatement;
use cairn_storage::DatasetOptions;

/// A type as written in a `CREATE TYPE` declaration, before named types are resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    /// A built-in type (`int64`, `point`, ...) or a type created with `CREATE TYPE`.
    Named(String),
    List(Box<TypeExpr>),
    Multiset(Box<TypeExpr>),
    Object(ObjectTypeExpr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ObjectTypeExpr {
    /// AsterixDB's default: an object type is open unless declared `CLOSED`.
    pub open: bool,
    pub fields: Vec<FieldExpr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldExpr {
    pub name: String,
    pub data_type: TypeExpr,
    pub optional: bool,
}

/// A statement handled by Cairn rather than DataFusion.
#[derive(Debug, Clone, PartialEq)]
pub enum CairnStatement {
    CreateType {
        name: String,
        if_not_exists: bool,
        object: ObjectTypeExpr,
    },
    CreateDataset {
        name: String,
        if_not_exists: bool,
        type_name: String,
        primary_key: Vec<String>,
        layout: DatasetOptions,
    },
    DropType {
        name: String,
        if_exists: bool,
    },
    DropDataset {
        name: String,
        if_exists: bool,
    },
    ShowDatasets,
    ShowTypes,
    Describe {
        name: String,
    },
    /// `INSERT INTO d {..}, {..}` or `[{..}, ..]`; `upsert` for `UPSERT INTO`.
    InsertJson {
        dataset: String,
        upsert: bool,
        json: String,
    },
    Copy {
        dataset: String,
        paths: Vec<String>,
        format: Option<String>,
    },
    /// `CREATE INDEX name ON d(f[, g]) [TYPE kind] [INCLUDE (h, ..)]`.
    CreateIndex {
        name: String,
        dataset: String,
        if_not_exists: bool,
        fields: Vec<String>,
        kind: IndexKindSyntax,
        include: Vec<String>,
    },
    /// `DROP INDEX d.name` (AsterixDB) or `DROP INDEX name ON d`.
    DropIndex {
        dataset: String,
        name: String,
        if_exists: bool,
    },
    /// `SHOW INDEXES [ON d]`.
    ShowIndexes {
        dataset: Option<String>,
    },
    /// `ANALYZE [DATASET | TABLE] d`.
    Analyze {
        dataset: String,
    },
    /// `CREATE FEED [IF NOT EXISTS] f WITH (name = value, ...)`.
    CreateFeed {
        name: String,
        if_not_exists: bool,
        options: Vec<(String, String)>,
    },
    /// `CONNECT FEED f TO DATASET d [APPLY FUNCTION query]`.
    ConnectFeed {
        name: String,
        dataset: String,
        /// The query each batch runs through, reading it as the table `input`.
        function: Option<String>,
    },
    /// `DISCONNECT FEED f FROM DATASET d`.
    DisconnectFeed {
        name: String,
        dataset: String,
    },
    StartFeed {
        name: String,
    },
    StopFeed {
        name: String,
    },
    DropFeed {
        name: String,
        if_exists: bool,
    },
    ShowFeeds,
    /// A statement DataFusion plans once rewritten (`UPSERT` → `INSERT OR REPLACE`).
    Rewritten(String),
}

/// The index kinds `CREATE INDEX ... TYPE` names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IndexKindSyntax {
    Btree,
    Rtree,
    Keyword,
    Ngram(u32),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    QuotedIdent(String),
    Number(String),
    Str(String),
    Punct(char),
}

struct Lexer<'a> {
    statement: &'a ScriptStatement<'a>,
    text: &'a str,
    offset: usize,
}

/// A token and the byte offset where it starts in the statement.
type Spanned = (Token, usize);

impl<'a> Lexer<'a> {
    fn new(statement: &'a ScriptStatement<'a>) -> Self {
        Lexer {
            statement,
            text: statement.text,
            offset: 0,
        }
    }

    /// Script line and column of a byte offset within the statement.
    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let newlines = before.matches('\n').count();
        let last_line = before.rsplit('\n').next().unwrap_or("");
        let column = last_line.chars().count() + 1;
        if newlines == 0 {
            (self.statement.line, self.statement.column + column - 1)
        } else {
            (self.statement.line + newlines, column)
        }
    }

    fn error_at(&self, offset: usize, message: impl Into<String>) -> EngineError {
        let (line, column) = self.position(offset);
        EngineError::Syntax {
            line,
            column,
            message: message.into(),
        }
    }

    fn skip_blanks(&mut self) {
        loop {
            let rest = &self.text[self.offset..];
            let trimmed = rest.trim_start();
            self.offset += rest.len() - trimmed.len();
            if trimmed.starts_with("--") {
                self.offset += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if trimmed.starts_with("/*") {
                self.offset += trimmed.find("*/").map_or(trimmed.len(), |end| end + 2);
            } else {
                return;
            }
        }
    }

    /// The next token, or None at the end of the statement.
    fn next(&mut self) -> Result<Option<Spanned>> {
        self.skip_blanks();
        let start = self.offset;
        let rest = &self.text[start..];
        let Some(first) = rest.chars().next() else {
            return Ok(None);
        };
        let token = if first.is_alphabetic() || first == '_' {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            self.offset += end;
            Token::Word(rest[..end].to_string())
        } else if first.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            self.offset += end;
            Token::Number(rest[..end].to_string())
        } else if matches!(first, '\'' | '"' | '`') {
            let (value, len) = self.quoted(rest, first, start)?;
            self.offset += len;
            if first == '\'' {
                Token::Str(value)
            } else {
                Token::QuotedIdent(value)
            }
        } else {
            self.offset += first.len_utf8();
            Token::Punct(first)
        };
        Ok(Some((token, start)))
    }

    /// A quoted literal at the start of `rest`: its unescaped value and its length in bytes.
    fn quoted(&self, rest: &str, quote: char, start: usize) -> Result<(String, usize)> {
        let mut value = String::new();
        let mut chars = rest.char_indices().skip(1).peekable();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                if chars.peek().map(|&(_, n)| n) == Some(quote) {
                    chars.next();
                    value.push(quote);
                    continue;
                }
                return Ok((value, i + c.len_utf8()));
            }
            value.push(c);
        }
        Err(self.error_at(start, format!("unterminated literal starting with {quote}")))
    }

    fn peek(&mut self) -> Result<Option<Spanned>> {
        let saved = self.offset;
        let token = self.next();
        self.offset = saved;
        token
    }

    fn describe(token: &Option<Spanned>) -> String {
        match token {
            None => "end of statement".to_string(),
            Some((Token::Word(w), _)) => format!("`{w}`"),
            Some((Token::QuotedIdent(w), _)) => format!("identifier `{w}`"),
            Some((Token::Number(n), _)) => format!("number {n}"),
            Some((Token::Str(s), _)) => format!("string '{s}'"),
            Some((Token::Punct(c), _)) => format!("`{c}`"),
        }
    }

    fn unexpected(&self, token: &Option<Spanned>, expected: &str) -> EngineError {
        let offset = token.as_ref().map_or(self.text.len(), |(_, o)| *o);
        self.error_at(
            offset,
            format!("expected {expected}, found {}", Self::describe(token)),
        )
    }

    /// Consumes the keyword if it comes next (case-insensitive).
    fn eat_keyword(&mut self, keyword: &str) -> Result<bool> {
        if let Some((Token::Word(w), _)) = self.peek()?
            && w.eq_ignore_ascii_case(keyword)
        {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<()> {
        let token = self.next()?;
        match &token {
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case(keyword) => Ok(()),
            _ => Err(self.unexpected(&token, &keyword.to_ascii_uppercase())),
        }
    }

    fn eat_punct(&mut self, punct: char) -> Result<bool> {
        if let Some((Token::Punct(c), _)) = self.peek()?
            && c == punct
        {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect_punct(&mut self, punct: char) -> Result<()> {
        let token = self.next()?;
        match &token {
            Some((Token::Punct(c), _)) if *c == punct => Ok(()),
            _ => Err(self.unexpected(&token, &format!("`{punct}`"))),
        }
    }

    fn identifier(&mut self, what: &str) -> Result<String> {
        let token = self.next()?;
        match token {
            Some((Token::Word(w) | Token::QuotedIdent(w), _)) => Ok(w),
            _ => Err(self.unexpected(&token, what)),
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let token = self.next()?;
        match token {
            Some((Token::Str(s), _)) => Ok(s),
            _ => Err(self.unexpected(&token, what)),
        }
    }

    /// The rest of the statement as written, for a clause in another language (a query).
    fn rest(&mut self, what: &str) -> Result<String> {
        self.skip_blanks();
        let rest = self.text[self.offset..].trim_end();
        if rest.is_empty() {
            return Err(self.error_at(self.offset, format!("expected {what}")));
        }
        self.offset = self.text.len();
        Ok(rest.to_string())
    }

    fn expect_end(&mut self) -> Result<()> {
        let token = self.next()?;
        match token {
            None => Ok(()),
            _ => Err(self.unexpected(&token, "end of statement")),
        }
    }

    fn if_exists(&mut self) -> Result<bool> {
        if self.eat_keyword("IF")? {
            self.expect_keyword("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn if_not_exists(&mut self) -> Result<bool> {
        if self.eat_keyword("IF")? {
            self.expect_keyword("NOT")?;
            self.expect_keyword("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Parses `statement` if it is one Cairn handles; `Ok(None)` leaves it to DataFusion.
pub fn parse_cairn_statement(statement: &ScriptStatement<'_>) -> Result<Option<CairnStatement>> {
    let mut lexer = Lexer::new(statement);
    let first = match lexer.next()? {
        Some((Token::Word(w), _)) => w.to_ascii_uppercase(),
        _ => return Ok(None),
    };
    let second = match lexer.peek()? {
        Some((Token::Word(w), _)) => w.to_ascii_uppercase(),
        _ => String::new(),
    };
    let parsed = match (first.as_str(), second.as_str()) {
        ("CREATE", "TYPE") => {
            lexer.next()?;
            let if_not_exists = lexer.if_not_exists()?;
            let name = lexer.identifier("a type name")?;
            lexer.expect_keyword("AS")?;
            let open = if lexer.eat_keyword("CLOSED")? {
                false
            } else {
                lexer.eat_keyword("OPEN")?;
                true
            };
            lexer.expect_punct('{')?;
            let object = object_body(&mut lexer, open)?;
            lexer.expect_end()?;
            CairnStatement::CreateType {
                name,
                if_not_exists,
                object,
            }
        }
        ("CREATE", "DATASET") => {
            lexer.next()?;
            create_dataset(&mut lexer)?
        }
        ("DROP", "TYPE") | ("DROP", "DATASET") => {
            lexer.next()?;
            let if_exists = lexer.if_exists()?;
            let name = lexer.identifier("a name")?;
            lexer.expect_end()?;
            if second == "TYPE" {
                CairnStatement::DropType { name, if_exists }
            } else {
                CairnStatement::DropDataset { name, if_exists }
            }
        }
        ("CREATE", "INDEX") => {
            lexer.next()?;
            create_index(&mut lexer)?
        }
        ("DROP", "INDEX") => {
            lexer.next()?;
            let if_exists = lexer.if_exists()?;
            let first_name = lexer.identifier("an index name")?;
            let (dataset, name) = if lexer.eat_punct('.')? {
                (first_name, lexer.identifier("an index name")?)
            } else {
                lexer.expect_keyword("ON")?;
                (lexer.identifier("a dataset name")?, first_name)
            };
            lexer.expect_end()?;
            CairnStatement::DropIndex {
                dataset,
                name,
                if_exists,
            }
        }
        ("ANALYZE", _) => {
            if second == "DATASET" || second == "TABLE" {
                lexer.next()?;
            }
            let dataset = lexer.identifier("a dataset name")?;
            lexer.expect_end()?;
            CairnStatement::Analyze { dataset }
        }
        ("CREATE", "FEED") => {
            lexer.next()?;
            let if_not_exists = lexer.if_not_exists()?;
            let name = lexer.identifier("a feed name")?;
            lexer.expect_keyword("WITH")?;
            let options = option_list(&mut lexer)?;
            lexer.expect_end()?;
            CairnStatement::CreateFeed {
                name,
                if_not_exists,
                options,
            }
        }
        ("CONNECT", "FEED") | ("DISCONNECT", "FEED") => {
            lexer.next()?;
            let name = lexer.identifier("a feed name")?;
            lexer.expect_keyword(if first == "CONNECT" { "TO" } else { "FROM" })?;
            if !lexer.eat_keyword("DATASET")? {
                lexer.eat_keyword("TABLE")?;
            }
            let dataset = lexer.identifier("a dataset name")?;
            if first == "CONNECT" {
                let function = if lexer.eat_keyword("APPLY")? {
                    lexer.expect_keyword("FUNCTION")?;
                    Some(lexer.rest("a query over `input` (SELECT ... FROM input)")?)
                } else {
                    lexer.expect_end()?;
                    None
                };
                CairnStatement::ConnectFeed {
                    name,
                    dataset,
                    function,
                }
            } else {
                lexer.expect_end()?;
                CairnStatement::DisconnectFeed { name, dataset }
            }
        }
        ("START", "FEED") | ("STOP", "FEED") => {
            lexer.next()?;
            let name = lexer.identifier("a feed name")?;
            lexer.expect_end()?;
            if first == "START" {
                CairnStatement::StartFeed { name }
            } else {
                CairnStatement::StopFeed { name }
            }
        }
        ("DROP", "FEED") => {
            lexer.next()?;
            let if_exists = lexer.if_exists()?;
            let name = lexer.identifier("a feed name")?;
            lexer.expect_end()?;
            CairnStatement::DropFeed { name, if_exists }
        }
        ("SHOW", "FEEDS") => {
            lexer.next()?;
            lexer.expect_end()?;
            CairnStatement::ShowFeeds
        }
        ("SHOW", "INDEXES") => {
            lexer.next()?;
            let dataset = if lexer.eat_keyword("ON")? {
                Some(lexer.identifier("a dataset name")?)
            } else {
                None
            };
            lexer.expect_end()?;
            CairnStatement::ShowIndexes { dataset }
        }
        ("SHOW", "DATASETS") | ("SHOW", "TYPES") => {
            lexer.next()?;
            lexer.expect_end()?;
            if second == "TYPES" {
                CairnStatement::ShowTypes
            } else {
                CairnStatement::ShowDatasets
            }
        }
        ("DESCRIBE" | "DESC", _) => {
            if second == "DATASET" || second == "TABLE" || second == "TYPE" {
                lexer.next()?;
            }
            let name = lexer.identifier("a dataset or type name")?;
            lexer.expect_end()?;
            CairnStatement::Describe { name }
        }
        ("COPY", _) => {
            let dataset = lexer.identifier("a dataset name")?;
            if !lexer.eat_keyword("FROM")? {
                return Ok(None); // COPY ... TO is DataFusion's
            }
            copy_from(&mut lexer, dataset)?
        }
        ("INSERT" | "UPSERT", "INTO") => {
            lexer.next()?;
            let dataset = lexer.identifier("a dataset name")?;
            let rest = lexer.offset;
            let json_follows = match lexer.next()? {
                Some((Token::Punct('{' | '['), _)) => true,
                Some((Token::Punct('('), _)) => {
                    matches!(lexer.next()?, Some((Token::Punct('{' | '['), _)))
                }
                _ => false,
            };
            if json_follows {
                CairnStatement::InsertJson {
                    dataset,
                    upsert: first == "UPSERT",
                    json: statement.text[rest..].trim().to_string(),
                }
            } else if first == "UPSERT" {
                // `UPSERT` is AsterixDB's spelling of SQLite's `INSERT OR REPLACE`, which
                // DataFusion plans as a replacing insert.
                let keyword_end = statement.text.len() - statement.text.trim_start().len() + 6;
                CairnStatement::Rewritten(format!(
                    "INSERT OR REPLACE{}",
                    &statement.text[keyword_end..]
                ))
            } else {
                return Ok(None);
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(parsed))
}

/// `(name = value, ...)`: values are quoted strings, numbers or bare words, kept as text for
/// the statement to check.
fn option_list(lexer: &mut Lexer<'_>) -> Result<Vec<(String, String)>> {
    lexer.expect_punct('(')?;
    let mut options = Vec::new();
    loop {
        let name = lexer.identifier("an option name")?;
        lexer.expect_punct('=')?;
        let value = lexer.next()?;
        let value = match value {
            Some((Token::Str(v) | Token::Number(v) | Token::Word(v), _)) => v,
            other => return Err(lexer.unexpected(&other, "an option value")),
        };
        options.push((name, value));
        if !lexer.eat_punct(',')? {
            break;
        }
    }
    lexer.expect_punct(')')?;
    Ok(options)
}

/// `name(Type) PRIMARY KEY f[, g] [WITH (partitions = n, page_rows = n)]`, after
/// `CREATE DATASET`.
fn create_dataset(lexer: &mut Lexer<'_>) -> Result<CairnStatement> {
    let if_not_exists = lexer.if_not_exists()?;
    let name = lexer.identifier("a dataset name")?;
    lexer.expect_punct('(')?;
    let type_name = lexer.identifier("the dataset's type name")?;
    lexer.expect_punct(')')?;
    lexer.expect_keyword("PRIMARY")?;
    lexer.expect_keyword("KEY")?;
    let mut primary_key = vec![lexer.identifier("a primary key field")?];
    while lexer.eat_punct(',')? {
        primary_key.push(lexer.identifier("a primary key field")?);
    }
    let mut layout = DatasetOptions::default();
    if lexer.eat_keyword("WITH")? {
        lexer.expect_punct('(')?;
        loop {
            let (option, offset) = match lexer.next()? {
                Some((Token::Word(w), offset)) => (w, offset),
                other => return Err(lexer.unexpected(&other, "an option name")),
            };
            lexer.expect_punct('=')?;
            let value = lexer.next()?;
            let name = option.to_ascii_lowercase();
            let Some(setting) = layout.setting_mut(&name) else {
                return Err(lexer.error_at(
                    offset,
                    format!(
                        "unknown dataset option `{option}` (known: {})",
                        DatasetOptions::NAMES
                    ),
                ));
            };
            let Some((Token::Number(n), at)) = &value else {
                return Err(lexer.unexpected(&value, &format!("a number for {name}")));
            };
            *setting = Some(n.parse::<u32>().map_err(|_| {
                lexer.error_at(*at, format!("{name} must be a positive integer, got {n}"))
            })?);
            if !lexer.eat_punct(',')? {
                break;
            }
        }
        lexer.expect_punct(')')?;
    }
    lexer.expect_end()?;
    Ok(CairnStatement::CreateDataset {
        name,
        if_not_exists,
        type_name,
        primary_key,
        layout,
    })
}

/// A field name or a dotted path into nested objects (`user.screen_name`).
fn field_path(lexer: &mut Lexer<'_>, what: &str) -> Result<String> {
    let mut path = lexer.identifier(what)?;
    while lexer.eat_punct('.')? {
        path.push('.');
        path.push_str(&lexer.identifier("a nested field name")?);
    }
    Ok(path)
}

/// `[IF NOT EXISTS] name ON d(f[, g]) [TYPE BTREE|RTREE|KEYWORD|NGRAM(k)] [INCLUDE (h, ..)]`,
/// after `CREATE INDEX`.
fn create_index(lexer: &mut Lexer<'_>) -> Result<CairnStatement> {
    let if_not_exists = lexer.if_not_exists()?;
    let name = lexer.identifier("an index name")?;
    lexer.expect_keyword("ON")?;
    let dataset = lexer.identifier("a dataset name")?;
    lexer.expect_punct('(')?;
    let mut fields = vec![field_path(lexer, "an indexed field")?];
    while lexer.eat_punct(',')? {
        fields.push(field_path(lexer, "an indexed field")?);
    }
    lexer.expect_punct(')')?;
    let mut kind = IndexKindSyntax::Btree;
    if lexer.eat_keyword("TYPE")? {
        let token = lexer.next()?;
        kind = match &token {
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("BTREE") => IndexKindSyntax::Btree,
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("RTREE") => IndexKindSyntax::Rtree,
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("KEYWORD") => {
                IndexKindSyntax::Keyword
            }
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("NGRAM") => {
                lexer.expect_punct('(')?;
                let gram = lexer.next()?;
                let k = match &gram {
                    Some((Token::Number(n), at)) => n
                        .parse::<u32>()
                        .ok()
                        .filter(|k| (1..=8).contains(k))
                        .ok_or_else(|| {
                            lexer.error_at(*at, format!("NGRAM length must be 1 to 8, got {n}"))
                        })?,
                    _ => return Err(lexer.unexpected(&gram, "a gram length")),
                };
                lexer.expect_punct(')')?;
                IndexKindSyntax::Ngram(k)
            }
            _ => return Err(lexer.unexpected(&token, "BTREE, RTREE, KEYWORD or NGRAM(k)")),
        };
    }
    let mut include = Vec::new();
    if lexer.eat_keyword("INCLUDE")? {
        lexer.expect_punct('(')?;
        include.push(field_path(lexer, "an included field")?);
        while lexer.eat_punct(',')? {
            include.push(field_path(lexer, "an included field")?);
        }
        lexer.expect_punct(')')?;
    }
    lexer.expect_end()?;
    Ok(CairnStatement::CreateIndex {
        name,
        dataset,
        if_not_exists,
        fields,
        kind,
        include,
    })
}

/// `'path' [, 'path'] [WITH (format = json|csv|parquet)]`, after `COPY d FROM`.
fn copy_from(lexer: &mut Lexer<'_>, dataset: String) -> Result<CairnStatement> {
    let mut paths = vec![lexer.string("a quoted file path")?];
    while lexer.eat_punct(',')? {
        paths.push(lexer.string("a quoted file path")?);
    }
    let mut format = None;
    if lexer.eat_keyword("WITH")? {
        lexer.expect_punct('(')?;
        let (option, offset) = match lexer.next()? {
            Some((Token::Word(w), offset)) => (w, offset),
            other => return Err(lexer.unexpected(&other, "an option name")),
        };
        if !option.eq_ignore_ascii_case("format") {
            return Err(lexer.error_at(
                offset,
                format!("unknown COPY option `{option}` (known: format)"),
            ));
        }
        lexer.expect_punct('=')?;
        format = Some(match lexer.next()? {
            Some((Token::Word(w) | Token::Str(w), _)) => w,
            other => return Err(lexer.unexpected(&other, "json, csv or parquet")),
        });
        lexer.expect_punct(')')?;
    }
    lexer.expect_end()?;
    Ok(CairnStatement::Copy {
        dataset,
        paths,
        format,
    })
}

/// The fields of an object type up to its closing `}` (the `{` is consumed).
fn object_body(lexer: &mut Lexer<'_>, open: bool) -> Result<ObjectTypeExpr> {
    let mut fields = Vec::new();
    if !lexer.eat_punct('}')? {
        loop {
            let name = lexer.identifier("a field name")?;
            lexer.expect_punct(':')?;
            let data_type = type_expr(lexer)?;
            let optional = lexer.eat_punct('?')?;
            fields.push(FieldExpr {
                name,
                data_type,
                optional,
            });
            if lexer.eat_punct('}')? {
                break;
            }
            lexer.expect_punct(',')?;
        }
    }
    Ok(ObjectTypeExpr { open, fields })
}

/// A field's type: a name, `[T]`, `{{T}}`, or an inline object `{ ... }`.
fn type_expr(lexer: &mut Lexer<'_>) -> Result<TypeExpr> {
    let token = lexer.next()?;
    Ok(match token {
        Some((Token::Word(w) | Token::QuotedIdent(w), _)) => {
            if w.eq_ignore_ascii_case("OPEN") || w.eq_ignore_ascii_case("CLOSED") {
                lexer.expect_punct('{')?;
                TypeExpr::Object(object_body(lexer, w.eq_ignore_ascii_case("OPEN"))?)
            } else {
                TypeExpr::Named(w)
            }
        }
        Some((Token::Punct('['), _)) => {
            let item = type_expr(lexer)?;
            lexer.expect_punct(']')?;
            TypeExpr::List(Box::new(item))
        }
        Some((Token::Punct('{'), _)) => {
            if lexer.eat_punct('{')? {
                let item = type_expr(lexer)?;
                lexer.expect_punct('}')?;
                lexer.expect_punct('}')?;
                TypeExpr::Multiset(Box::new(item))
            } else {
                TypeExpr::Object(object_body(lexer, true)?)
            }
        }
        other => return Err(lexer.unexpected(&other, "a type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::split_statements;

    fn parse(text: &str) -> Result<Option<CairnStatement>> {
        let statements = split_statements(text);
        parse_cairn_statement(&statements[0])
    }

    fn named(name: &str) -> TypeExpr {
        TypeExpr::Named(name.to_string())
    }

    #[test]
    fn create_type_with_nested_lists_multisets_and_objects() {
        let parsed = parse(
            "CREATE TYPE T AS CLOSED { id: int64, tags: {{ string }}, emp: [Emp]?, \
             loc: { x: double, y: double }}",
        )
        .unwrap()
        .unwrap();
        let CairnStatement::CreateType { name, object, .. } = parsed else {
            panic!("not a CREATE TYPE: {parsed:?}");
        };
        assert_eq!(name, "T");
        assert!(!object.open);
        let types: Vec<_> = object
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.optional))
            .collect();
        assert_eq!(
            types,
            [
                ("id", false),
                ("tags", false),
                ("emp", true),
                ("loc", false)
            ]
        );
        assert_eq!(
            object.fields[1].data_type,
            TypeExpr::Multiset(Box::new(named("string")))
        );
        assert_eq!(
            object.fields[2].data_type,
            TypeExpr::List(Box::new(named("Emp")))
        );
        assert!(
            matches!(&object.fields[3].data_type, TypeExpr::Object(o) if o.open && o.fields.len() == 2)
        );
    }

    #[test]
    fn create_dataset_with_composite_key_and_partitions() {
        assert_eq!(
            parse("create dataset if not exists D(T) primary key a, b with (partitions = 8)")
                .unwrap(),
            Some(CairnStatement::CreateDataset {
                name: "D".into(),
                if_not_exists: true,
                type_name: "T".into(),
                primary_key: vec!["a".into(), "b".into()],
                layout: DatasetOptions {
                    partitions: Some(8),
                    page_rows: None,
                },
            })
        );
    }

    #[test]
    fn create_dataset_with_page_rows() {
        let parsed =
            parse("CREATE DATASET D(T) PRIMARY KEY id WITH (page_rows = 4096, partitions = 2)");
        let Ok(Some(CairnStatement::CreateDataset { layout, .. })) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(
            layout,
            DatasetOptions {
                partitions: Some(2),
                page_rows: Some(4096),
            }
        );
        let error =
            parse("CREATE DATASET D(T) PRIMARY KEY id WITH (page_rows = 'big')").unwrap_err();
        assert!(
            error.to_string().contains("a number for page_rows"),
            "{error}"
        );
        let error = parse("CREATE DATASET D(T) PRIMARY KEY id WITH (page_rows = -1)").unwrap_err();
        assert!(error.to_string().contains("page_rows"), "{error}");
    }

    #[test]
    fn json_inserts_and_upsert_rewrite() {
        assert_eq!(
            parse("UPSERT INTO D [{\"id\": 1}]").unwrap(),
            Some(CairnStatement::InsertJson {
                dataset: "D".into(),
                upsert: true,
                json: "[{\"id\": 1}]".into()
            })
        );
        assert_eq!(
            parse("upsert INTO D VALUES (1, 'a')").unwrap(),
            Some(CairnStatement::Rewritten(
                "INSERT OR REPLACE INTO D VALUES (1, 'a')".into()
            ))
        );
        assert_eq!(parse("INSERT INTO D VALUES (1)").unwrap(), None);
        assert_eq!(parse("SELECT 1").unwrap(), None);
    }

    #[test]
    fn errors_name_line_and_column() {
        let error = parse("SELECT 1;\nCREATE TYPE T AS { id int64 }")
            .map(|_| ())
            .and_then(|_| {
                let statements = split_statements("SELECT 1;\nCREATE TYPE T AS { id int64 }");
                parse_cairn_statement(&statements[1]).map(|_| ())
            })
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "syntax error at line 2, column 23: expected `:`, found `int64`"
        );
        let error = parse("CREATE DATASET D(T) PRIMARY KEY id WITH (shards = 2)").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("unknown dataset option `shards`"),
            "{error}"
        );
    }
}
