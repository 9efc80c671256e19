//! Measures how fast the Parquet reader decodes an INT64 column under the layouts a component
//! may give it (plain LZ4, plain uncompressed, DELTA_BINARY_PACKED), in Cairn's TPC-H page and
//! row-group sizes: the numbers behind `column_encodings.rs`'s choice of deltas
//! (bench/results/delta-integers/). Run with
//! `cargo run --release -p cairn-storage --example integer_decoding`.

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::WriterProperties;
use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Rows of the column: one hash partition of TPC-H SF 1's lineitem.
const ROWS: usize = 1_500_000;
/// Cairn's TPC-H datasets: pages of 1,024 rows in row groups of 16,384.
const PAGE_ROWS: usize = 1_024;
const ROW_GROUP_ROWS: usize = 16_384;
const TIMED_READS: usize = 7;

/// A xorshift generator: the same columns on every run.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Sorted keys, each repeated 1–7 times with gaps of 1–7 between them (one partition's
/// `l_orderkey`), and ids drawn from 1..=10,000 (`l_suppkey`).
fn columns() -> Vec<(&'static str, Vec<i64>)> {
    let mut random = Xorshift(12_345);
    let mut sorted = Vec::with_capacity(ROWS);
    let mut key = 1i64;
    while sorted.len() < ROWS {
        let repeats = 1 + random.next() % 7;
        sorted.extend(std::iter::repeat_n(key, repeats as usize));
        key += 1 + (random.next() % 7) as i64;
    }
    sorted.truncate(ROWS);
    let ids = (0..ROWS)
        .map(|_| 1 + (random.next() % 10_000) as i64)
        .collect();
    vec![("sorted keys", sorted), ("ids 1..=10000", ids)]
}

fn write(values: &[i64], encoding: Encoding, compression: Compression) -> Result<Bytes> {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let column: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
    let batch = RecordBatch::try_new(schema.clone(), vec![column])?;
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_encoding(encoding)
        .set_compression(compression)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_write_batch_size(64)
        .build();
    let mut file = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut file, schema, Some(props))?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(Bytes::from(file))
}

/// Median milliseconds of reading every row of `file`.
fn read_millis(file: &Bytes) -> Result<f64> {
    let mut times = Vec::with_capacity(TIMED_READS);
    for _ in 0..TIMED_READS {
        let began = Instant::now();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file.clone())?
            .with_batch_size(8_192)
            .build()?;
        let mut rows = 0;
        for batch in reader {
            rows += batch?.num_rows();
        }
        if rows != ROWS {
            return Err(format!("read {rows} rows of {ROWS}").into());
        }
        times.push(began.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[TIMED_READS / 2])
}

fn main() -> Result<()> {
    println!("| column | layout | file MB | read ms (median of {TIMED_READS}) | ns a value |");
    println!("|---|---|---:|---:|---:|");
    for (name, values) in columns() {
        for (layout, encoding, compression) in [
            ("plain, LZ4", Encoding::PLAIN, Compression::LZ4_RAW),
            (
                "plain, uncompressed",
                Encoding::PLAIN,
                Compression::UNCOMPRESSED,
            ),
            (
                "delta, uncompressed",
                Encoding::DELTA_BINARY_PACKED,
                Compression::UNCOMPRESSED,
            ),
        ] {
            let file = write(&values, encoding, compression)?;
            let millis = read_millis(&file)?;
            println!(
                "| {name} | {layout} | {:.2} | {millis:.2} | {:.2} |",
                file.len() as f64 / 1e6,
                millis * 1e6 / ROWS as f64
            );
        }
    }
    Ok(())
}
