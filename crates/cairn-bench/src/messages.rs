//! A synthetic `Messages(id, user_id, message_text)` table for the SQL benchmarks, written as a
//! Parquet file that Cairn and DuckDB both load: chirp-like texts of 4–24 words drawn from a
//! fixed vocabulary, deterministic for a seed.

use crate::bigfun::SplitMix;
use arrow::array::{Int64Array, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;

const VOCABULARY: &[&str] = &[
    "love",
    "hate",
    "like",
    "my",
    "the",
    "new",
    "old",
    "phone",
    "screen",
    "battery",
    "signal",
    "Galaxy",
    "Kindle",
    "Surface",
    "Nexus",
    "Lumia",
    "XPeria",
    "iPhone",
    "tablet",
    "laptop",
    "is",
    "was",
    "great",
    "terrible",
    "fast",
    "slow",
    "at",
    "home",
    "work",
    "today",
    "again",
    "speed",
    "camera",
    "voice",
    "service",
    "plan",
    "network",
    "shortcut",
    "customization",
    "wireless",
    "platform",
    "touchscreen",
    "3G",
    "4G",
    "reachability",
    "OMG",
    "wow",
    "ugh",
];

const BATCH_ROWS: i64 = 65_536;

/// Writes `rows` messages to `path` (Parquet, ids 0..rows).
pub fn write_messages(path: &Path, rows: i64, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("user_id", DataType::Int64, false),
        Field::new("message_text", DataType::Utf8, false),
    ]));
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let tmp = path.with_extension("parquet.tmp");
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(&tmp)?,
        schema.clone(),
        Some(properties),
    )?;
    let mut start = 0;
    while start < rows {
        let end = (start + BATCH_ROWS).min(rows);
        let mut texts = StringBuilder::new();
        let mut users = Vec::with_capacity((end - start) as usize);
        for id in start..end {
            let mut rng = SplitMix::new(seed, id as u64);
            users.push(rng.range(0, rows / 10));
            let words = rng.range(4, 24);
            let mut text = String::new();
            for i in 0..words {
                if i > 0 {
                    text.push(' ');
                }
                text.push_str(rng.pick(VOCABULARY));
            }
            texts.append_value(&text);
        }
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(start..end)),
                Arc::new(Int64Array::from(users)),
                Arc::new(texts.finish()),
            ],
        )?;
        writer.write(&batch)?;
        start = end;
    }
    writer.close()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
