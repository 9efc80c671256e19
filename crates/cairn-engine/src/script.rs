//! Splitting a script into statements at top-level semicolons, remembering where each statement
//! starts so that errors can name its line and column in the script.

/// One statement of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptStatement<'a> {
    /// The statement's text, without the terminating semicolon.
    pub text: &'a str,
    /// 1-based line and column (in characters) of the statement's first character.
    pub line: usize,
    pub column: usize,
}

impl ScriptStatement<'_> {
    /// `(line, column)` of the statement's own text (1-based) in script coordinates.
    pub fn in_script(&self, line: usize, column: usize) -> (usize, usize) {
        let line = line.max(1);
        let column = if line == 1 {
            self.column + column.max(1) - 1
        } else {
            column.max(1)
        };
        (self.line + line - 1, column)
    }
}

/// Splits `script` at semicolons outside strings, quoted identifiers, comments and brackets
/// (JSON object literals contain no statement separators). Statements holding only blanks and
/// comments are dropped.
pub fn split_statements(script: &str) -> Vec<ScriptStatement<'_>> {
    let mut statements = Vec::new();
    let mut chars = script.char_indices().peekable();
    let (mut line, mut column) = (1usize, 1usize);
    // Start of the current statement's first significant character, if one was seen.
    let mut start: Option<(usize, usize, usize)> = None;
    let mut depth = 0usize;
    let advance = |c: char, line: &mut usize, column: &mut usize| {
        if c == '\n' {
            *line += 1;
            *column = 1;
        } else {
            *column += 1;
        }
    };
    while let Some((offset, c)) = chars.next() {
        let here = (offset, line, column);
        advance(c, &mut line, &mut column);
        match c {
            '-' if chars.peek().map(|&(_, n)| n) == Some('-') => {
                for (_, n) in chars.by_ref() {
                    advance(n, &mut line, &mut column);
                    if n == '\n' {
                        break;
                    }
                }
                continue;
            }
            '/' if chars.peek().map(|&(_, n)| n) == Some('*') => {
                let mut previous = '\0';
                for (_, n) in chars.by_ref() {
                    advance(n, &mut line, &mut column);
                    if previous == '*' && n == '/' {
                        break;
                    }
                    previous = n;
                }
                continue;
            }
            ';' if depth == 0 => {
                if let Some((begin, l, col)) = start.take() {
                    statements.push(ScriptStatement {
                        text: script[begin..offset].trim_end(),
                        line: l,
                        column: col,
                    });
                }
                continue;
            }
            _ => {}
        }
        if c.is_whitespace() {
            continue;
        }
        start.get_or_insert(here);
        match c {
            '\'' | '"' | '`' => {
                // SQL doubles a quote to escape it; JSON strings use backslashes. Either way the
                // literal ends at an unescaped closing quote.
                let mut escaped = false;
                while let Some((_, n)) = chars.next() {
                    advance(n, &mut line, &mut column);
                    if escaped {
                        escaped = false;
                    } else if n == '\\' && c == '"' {
                        escaped = true;
                    } else if n == c {
                        if chars.peek().map(|&(_, m)| m) == Some(c) {
                            chars.next();
                            column += 1;
                        } else {
                            break;
                        }
                    }
                }
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if let Some((begin, l, col)) = start {
        statements.push(ScriptStatement {
            text: script[begin..].trim_end(),
            line: l,
            column: col,
        });
    }
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<(&str, usize, usize)> {
        split_statements(script)
            .into_iter()
            .map(|s| (s.text, s.line, s.column))
            .collect()
    }

    #[test]
    fn splits_at_top_level_semicolons_with_positions() {
        assert_eq!(
            texts("SELECT 1;\n  SELECT ';' , \"a;b\";\nINSERT INTO D {\"t\": \"x;y\"}"),
            vec![
                ("SELECT 1", 1, 1),
                ("SELECT ';' , \"a;b\"", 2, 3),
                ("INSERT INTO D {\"t\": \"x;y\"}", 3, 1),
            ]
        );
    }

    #[test]
    fn comments_and_empty_statements_are_dropped() {
        assert_eq!(
            texts("-- a; comment\n;; /* b; */ SELECT 2 -- c;\n;"),
            vec![("SELECT 2 -- c;", 2, 13)]
        );
    }

    #[test]
    fn escaped_quotes_do_not_end_literals() {
        assert_eq!(
            texts("SELECT 'it''s; fine'; INSERT INTO D {\"q\": \"say \\\"hi;\\\"\"}"),
            vec![
                ("SELECT 'it''s; fine'", 1, 1),
                ("INSERT INTO D {\"q\": \"say \\\"hi;\\\"\"}", 1, 23)
            ]
        );
    }

    #[test]
    fn positions_in_a_statement_map_to_the_script() {
        let statements = split_statements("SELECT 1;\n   SELECT 2\n  FROM t");
        // The statement's first line starts at column 4 of line 2; its later lines are the
        // script's lines.
        assert_eq!(statements[1].in_script(1, 8), (2, 11));
        assert_eq!(statements[1].in_script(2, 3), (3, 3));
        assert_eq!(statements[0].in_script(1, 1), (1, 1));
    }
}
