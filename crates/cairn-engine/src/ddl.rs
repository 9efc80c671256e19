//! Turning declarations into Cairn types: AsterixDB-style type expressions resolved against the
//! catalog, and SQL `CREATE TABLE` column definitions, onto the same [`DatasetType`].

use crate::cairn_syntax::{ObjectTypeExpr, TypeExpr};
use crate::catalog::Catalog;
use crate::error::{EngineError, Result};
use cairn_model::{DataType, DatasetType, Field, RecordType};
use cairn_storage::DatasetOptions;
use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, ColumnOption, CreateTable, CreateTableOptions, DataType as SqlType, Expr,
    SqlOption, TableConstraint, Value as SqlValue,
};

/// The built-in type a name denotes, in AsterixDB's spelling or SQL's (case-insensitive).
/// `float` is 32-bit as in AsterixDB; SQL users write `DOUBLE` for 64-bit.
pub fn builtin_type(name: &str) -> Option<DataType> {
    Some(match name.to_ascii_lowercase().as_str() {
        "boolean" | "bool" => DataType::Boolean,
        "tinyint" | "int8" => DataType::Int8,
        "smallint" | "int16" | "int2" => DataType::Int16,
        "int" | "integer" | "int32" | "int4" => DataType::Int32,
        "bigint" | "int64" => DataType::Int64,
        "float" | "real" | "float4" => DataType::Float,
        "double" | "double precision" | "float8" => DataType::Double,
        "string" | "varchar" | "text" | "char" | "character varying" | "character" => {
            DataType::String
        }
        "binary" | "bytea" | "blob" | "varbinary" => DataType::Binary,
        "date" => DataType::Date,
        "time" => DataType::Time,
        "datetime" | "timestamp" => DataType::DateTime,
        "duration" | "interval" => DataType::Duration,
        "uuid" => DataType::Uuid,
        "point" => DataType::Point,
        "rectangle" => DataType::Rectangle,
        "circle" => DataType::Circle,
        _ => return None,
    })
}

/// Resolves a declared type: built-in names first, then types created with `CREATE TYPE`.
pub fn resolve_type(catalog: &Catalog, expr: &TypeExpr) -> Result<DataType> {
    Ok(match expr {
        TypeExpr::Named(name) => match builtin_type(name) {
            Some(data_type) => data_type,
            None => DataType::Object(
                catalog
                    .record_type(name)
                    .ok_or_else(|| EngineError::UnknownType(name.clone()))?,
            ),
        },
        TypeExpr::List(item) => DataType::List(Box::new(resolve_type(catalog, item)?)),
        TypeExpr::Multiset(item) => DataType::Multiset(Box::new(resolve_type(catalog, item)?)),
        TypeExpr::Object(object) => DataType::Object(resolve_object(catalog, object)?),
    })
}

/// Resolves an object type's fields into a record type.
pub fn resolve_object(catalog: &Catalog, object: &ObjectTypeExpr) -> Result<RecordType> {
    let fields = object
        .fields
        .iter()
        .map(|field| {
            Ok(Field {
                name: field.name.clone(),
                data_type: resolve_type(catalog, &field.data_type)?,
                optional: field.optional,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordType::new(fields, object.open)?)
}

/// What a SQL `CREATE TABLE` declares.
#[derive(Debug)]
pub struct TableDeclaration {
    pub name: String,
    pub dataset_type: DatasetType,
    pub layout: DatasetOptions,
    pub if_not_exists: bool,
}

/// Maps `CREATE TABLE name (col TYPE [NOT NULL] [PRIMARY KEY], ..., [PRIMARY KEY (a, b)])
/// [WITH (partitions = n, open = true)] [PARTITION BY (a)]` onto a dataset type. Columns are
/// optional unless `NOT NULL` or part of the key; the record type is closed unless
/// `open = true`; records are placed by the hash of the PARTITION BY fields (a subset of the
/// primary key), or of the whole key without it.
pub fn table_declaration(create: &CreateTable) -> Result<TableDeclaration> {
    let name = match create.name.0.as_slice() {
        [part] => part
            .as_ident()
            .map(|ident| ident.value.clone())
            .ok_or_else(|| EngineError::Invalid(format!("invalid table name {}", create.name)))?,
        _ => {
            return Err(EngineError::Invalid(format!(
                "table name {} must be a single identifier (datasets live in one namespace)",
                create.name
            )));
        }
    };
    if create.query.is_some() || create.like.is_some() || create.or_replace {
        return Err(EngineError::Invalid(format!(
            "CREATE TABLE {name}: AS SELECT, LIKE and OR REPLACE are not supported; create the \
             table, then INSERT INTO {name} SELECT ..."
        )));
    }
    let mut primary_key = Vec::new();
    let mut fields = Vec::with_capacity(create.columns.len());
    for column in &create.columns {
        let column_name = column.name.value.clone();
        let data_type = sql_type(&column.data_type, &column_name)?;
        let mut required = false;
        for option in &column.options {
            match &option.option {
                ColumnOption::NotNull => required = true,
                ColumnOption::Null => {}
                ColumnOption::PrimaryKey(_) => {
                    required = true;
                    primary_key.push(column_name.clone());
                }
                other => {
                    return Err(EngineError::Invalid(format!(
                        "CREATE TABLE {name}: column option `{other}` on {column_name} is not \
                         supported (supported: NOT NULL, NULL, PRIMARY KEY)"
                    )));
                }
            }
        }
        fields.push(Field {
            name: column_name,
            data_type,
            optional: !required,
        });
    }
    for constraint in &create.constraints {
        match constraint {
            TableConstraint::PrimaryKey(key) => {
                if !primary_key.is_empty() {
                    return Err(EngineError::Invalid(format!(
                        "CREATE TABLE {name}: the primary key is declared twice"
                    )));
                }
                for column in &key.columns {
                    let column_name = column.column.expr.to_string();
                    let column_name = column_name.trim_matches('"').to_string();
                    match fields.iter_mut().find(|f| f.name == column_name) {
                        Some(field) => field.optional = false,
                        None => {
                            return Err(EngineError::Invalid(format!(
                                "CREATE TABLE {name}: primary key column {column_name} is not a \
                                 column of the table"
                            )));
                        }
                    }
                    primary_key.push(column_name);
                }
            }
            other => {
                return Err(EngineError::Invalid(format!(
                    "CREATE TABLE {name}: constraint `{other}` is not supported"
                )));
            }
        }
    }
    if primary_key.is_empty() {
        return Err(EngineError::Invalid(format!(
            "CREATE TABLE {name}: a table needs a PRIMARY KEY (on a column or as PRIMARY KEY (a, b))"
        )));
    }
    let (layout, open) = table_options(&name, &create.table_options)?;
    let partition_key = match &create.partition_by {
        Some(expr) => partition_fields(&name, expr)?,
        None => Vec::new(),
    };
    let record = RecordType::new(fields, open)?;
    Ok(TableDeclaration {
        dataset_type: DatasetType::new(record, primary_key)?.with_partition_key(partition_key)?,
        name,
        layout,
        if_not_exists: create.if_not_exists,
    })
}

/// The column names of `PARTITION BY a` or `PARTITION BY (a, b)`.
fn partition_fields(table: &str, expr: &Expr) -> Result<Vec<String>> {
    let items: Vec<&Expr> = match expr {
        Expr::Tuple(items) => items.iter().collect(),
        Expr::Nested(inner) => vec![inner.as_ref()],
        single => vec![single],
    };
    items
        .into_iter()
        .map(|item| match item {
            Expr::Identifier(ident) => Ok(ident.value.clone()),
            other => Err(EngineError::Invalid(format!(
                "CREATE TABLE {table}: PARTITION BY takes primary-key column names, got `{other}`"
            ))),
        })
        .collect()
}

/// The layout and openness `WITH (partitions = n, page_rows = n, open = true)` declares.
fn table_options(table: &str, options: &CreateTableOptions) -> Result<(DatasetOptions, bool)> {
    let options: &[SqlOption] = match options {
        CreateTableOptions::None => &[],
        CreateTableOptions::With(options) => options,
        _ => {
            return Err(EngineError::Invalid(format!(
                "CREATE TABLE {table}: write options as WITH (partitions = n, page_rows = n, open = true)"
            )));
        }
    };
    let (mut layout, mut open) = (DatasetOptions::default(), false);
    for option in options {
        let SqlOption::KeyValue { key, value } = option else {
            return Err(EngineError::Invalid(format!(
                "CREATE TABLE {table}: option `{option}` is not of the form name = value"
            )));
        };
        let literal = match value {
            Expr::Value(v) => Some(&v.value),
            _ => None,
        };
        let name = key.value.to_ascii_lowercase();
        match (layout.setting_mut(&name), literal) {
            (Some(setting), Some(SqlValue::Number(n, _))) => {
                *setting = Some(n.parse::<u32>().map_err(|_| {
                    EngineError::Invalid(format!(
                        "CREATE TABLE {table}: {name} must be a positive integer, got {n}"
                    ))
                })?);
            }
            (None, Some(SqlValue::Boolean(b))) if name == "open" => open = *b,
            _ => {
                return Err(EngineError::Invalid(format!(
                    "CREATE TABLE {table}: unknown or malformed option `{option}` (known: {} \
                     as integers, open = true|false)",
                    DatasetOptions::NAMES
                )));
            }
        }
    }
    Ok((layout, open))
}

/// A SQL column type as a Cairn type; `column` names the column in errors.
fn sql_type(sql: &SqlType, column: &str) -> Result<DataType> {
    let unsupported = || {
        EngineError::Invalid(format!(
            "column {column}: type {sql} is not supported (see docs/sql.md for the type list)"
        ))
    };
    Ok(match sql {
        SqlType::Array(ArrayElemTypeDef::SquareBracket(item, _))
        | SqlType::Array(ArrayElemTypeDef::AngleBracket(item))
        | SqlType::Array(ArrayElemTypeDef::Parenthesis(item)) => {
            DataType::List(Box::new(sql_type(item, column)?))
        }
        SqlType::Struct(struct_fields, _) => {
            let fields = struct_fields
                .iter()
                .map(|f| {
                    let name = f
                        .field_name
                        .as_ref()
                        .map(|n| n.value.clone())
                        .ok_or_else(|| {
                            EngineError::Invalid(format!(
                                "column {column}: a STRUCT field needs a name"
                            ))
                        })?;
                    Ok(Field::optional(name, sql_type(&f.field_type, column)?))
                })
                .collect::<Result<Vec<_>>>()?;
            DataType::Object(RecordType::new(fields, false)?)
        }
        other => {
            let spelled = other.to_string();
            let base = spelled.split('(').next().unwrap_or(&spelled).trim();
            builtin_type(base).ok_or_else(unsupported)?
        }
    })
}
