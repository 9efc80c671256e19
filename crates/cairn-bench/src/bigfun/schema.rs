//! The BigFUN datasets' declared types (BIGFUN.md §1), as Cairn types for the generator's
//! tests and benchmarks; the same declarations as SQL live in bench/bigfun/ddl.sql.

use cairn_model::{DataType, DatasetType, Field, RecordType};

/// The Cairn DDL creating the three datasets (AsterixDB style, open types as in the paper's
/// AsterixSchema variant).
pub const DDL: &str = include_str!("../../../../bench/bigfun/ddl.sql");

fn open_record(fields: Vec<Field>) -> RecordType {
    RecordType { fields, open: true }
}

fn string_multiset() -> DataType {
    DataType::Multiset(Box::new(DataType::String))
}

/// GleambookUserType, keyed by `id`.
pub fn gleambook_users_type() -> DatasetType {
    let employment = open_record(vec![
        Field::new("organization_name", DataType::String),
        Field::new("start_date", DataType::Date),
        Field::optional("end_date", DataType::Date),
    ]);
    let record = open_record(vec![
        Field::new("id", DataType::Int64),
        Field::new("alias", DataType::String),
        Field::new("name", DataType::String),
        Field::new("user_since", DataType::DateTime),
        Field::new("friend_ids", DataType::Multiset(Box::new(DataType::Int64))),
        Field::new(
            "employment",
            DataType::List(Box::new(DataType::Object(employment))),
        ),
    ]);
    // A fixed declaration: distinct names, and the key is a required int64.
    DatasetType::new(record, vec!["id".into()]).expect("GleambookUserType is valid")
}

/// GleambookMessageType, keyed by `message_id`.
pub fn gleambook_messages_type() -> DatasetType {
    let record = open_record(vec![
        Field::new("message_id", DataType::Int64),
        Field::new("author_id", DataType::Int64),
        Field::optional("in_response_to", DataType::Int64),
        Field::new("sender_location", DataType::Point),
        Field::new("send_time", DataType::DateTime),
        Field::new("message", DataType::String),
    ]);
    // A fixed declaration: distinct names, and the key is a required int64.
    DatasetType::new(record, vec!["message_id".into()]).expect("GleambookMessageType is valid")
}

/// ChirpMessageType, keyed by `chirpid`.
pub fn chirp_messages_type() -> DatasetType {
    let user = open_record(vec![
        Field::new("screen_name", DataType::String),
        Field::new("lang", DataType::String),
        Field::new("friends_count", DataType::Int32),
        Field::new("statuses_count", DataType::Int32),
        Field::new("name", DataType::String),
        Field::new("followers_count", DataType::Int32),
    ]);
    let record = open_record(vec![
        Field::new("chirpid", DataType::Int64),
        Field::new("user", DataType::Object(user)),
        Field::new("sender_location", DataType::Point),
        Field::new("send_time", DataType::DateTime),
        Field::new("referred_topics", string_multiset()),
        Field::new("message_text", DataType::String),
    ]);
    // A fixed declaration: distinct names, and the key is a required int64.
    DatasetType::new(record, vec!["chirpid".into()]).expect("ChirpMessageType is valid")
}

/// The three datasets by name, with their types.
pub fn datasets() -> [(&'static str, DatasetType); 3] {
    [
        ("GleambookUsers", gleambook_users_type()),
        ("GleambookMessages", gleambook_messages_type()),
        ("ChirpMessages", chirp_messages_type()),
    ]
}
