//! Record types shared by this crate's unit tests.

use crate::types::{DataType, Field, RecordType};

/// An open user-like type: keyed `id`, a datetime, a multiset, a list of open nested objects,
/// and optional scalars; with `extra` appended after them.
pub fn nested_record_type(extra: Vec<Field>) -> RecordType {
    let job = RecordType::new(
        vec![
            Field::new("org", DataType::String),
            Field::new("start", DataType::Date),
            Field::optional("end", DataType::Date),
        ],
        true,
    )
    .unwrap();
    let mut fields = vec![
        Field::new("id", DataType::Int64),
        Field::new("since", DataType::DateTime),
        Field::new("friends", DataType::Multiset(Box::new(DataType::Int64))),
        Field::new("jobs", DataType::List(Box::new(DataType::Object(job)))),
        Field::optional("small", DataType::Int8),
        Field::optional("ratio", DataType::Double),
    ];
    fields.extend(extra);
    RecordType::new(fields, true).unwrap()
}
