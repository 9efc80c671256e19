//! Grouping the small batches of a selective scan before they cross from the thread reading
//! them to the thread running the plan, so that the consumer is woken once per group rather
//! than once per row group.
//!
//! A full scan filtered inside storage yields one batch per row group that has passing rows:
//! BigFUN's Q14-M (974 of 5 M messages pass a one-day `send_time` window) sent 294 batches of
//! about three rows. Each send woke the consumer waiting on the channel, and on two cores the
//! context switches were a fifth of the query's CPU. Batches are held until they make a full
//! batch or until the first held row has waited [`HANDOFF_DELAY_MAX`], so a `LIMIT` above
//! a selective scan still gets its first rows within about a millisecond of their reading.

use arrow::array::RecordBatch;
use arrow::compute::BatchCoalescer;
use arrow::error::ArrowError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a held row waits for more rows before it is handed on. Reading a row group of
/// a selective scan takes tens of microseconds, so a millisecond gathers dozens of them.
pub(crate) const HANDOFF_DELAY_MAX: Duration = Duration::from_millis(1);

/// Batches of this many rows or more are handed on as they come: they are worth a wake-up.
pub(crate) const HANDOFF_PASS_ROWS: usize = 1_024;

/// Small batches being held for one hand-off.
pub(crate) struct BatchHandoff {
    /// Rows a group aims for (the session's batch size).
    target_rows: usize,
    held: Option<Held>,
}

struct Held {
    rows: BatchCoalescer,
    since: Instant,
}

impl BatchHandoff {
    pub(crate) fn new(target_rows: usize) -> BatchHandoff {
        BatchHandoff {
            target_rows: target_rows.max(1),
            held: None,
        }
    }

    /// Takes `batch`; returns the batches to hand on now, in order (none while it holds).
    pub(crate) fn push(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>, ArrowError> {
        self.push_at(batch, Instant::now())
    }

    /// [`Self::push`] with the clock read once by the caller: rows that arrive with this
    /// batch have waited no time at all, however long the thread is descheduled while copying
    /// them, and tests can replay arrivals at chosen instants.
    fn push_at(
        &mut self,
        batch: RecordBatch,
        now: Instant,
    ) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut ready = Vec::new();
        // Storage may return a column as text in one row group and as character counts in
        // another: rows of another schema close the group held. So does a large batch, which
        // then passes as it is rather than being copied into groups.
        let same_schema = self.held.as_ref().is_none_or(|held| {
            let schema = held.rows.schema();
            Arc::ptr_eq(&schema, &batch.schema()) || schema == batch.schema()
        });
        let passes = batch.num_rows() >= HANDOFF_PASS_ROWS;
        if passes || !same_schema {
            ready.extend(self.finish()?);
        }
        if passes {
            ready.push(batch);
            return Ok(ready);
        }
        let held = self.held.get_or_insert_with(|| Held {
            rows: BatchCoalescer::new(batch.schema(), self.target_rows),
            since: now,
        });
        held.rows.push_batch(batch)?;
        let completed = ready.len();
        while let Some(full) = held.rows.next_completed_batch() {
            ready.push(full);
        }
        if ready.len() > completed {
            // What stays held came with this batch.
            held.since = now;
        }
        if held.rows.is_empty() {
            self.held = None;
        } else if now.duration_since(held.since) >= HANDOFF_DELAY_MAX {
            ready.extend(self.finish()?);
        }
        Ok(ready)
    }

    /// The rows still held, as one batch (none when nothing is held).
    pub(crate) fn finish(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        let Some(mut held) = self.held.take() else {
            return Ok(None);
        };
        held.rows.finish_buffered_batch()?;
        let batch = held.rows.next_completed_batch();
        debug_assert!(held.rows.is_empty(), "a finished group leaves nothing held");
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn ints(first: i64, rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let values = Int64Array::from_iter_values(first..first + rows as i64);
        RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap()
    }

    /// Pushes at a fixed instant, so that only the tests that advance the clock see delays.
    fn push(handoff: &mut BatchHandoff, batch: RecordBatch, at: Instant) -> Vec<RecordBatch> {
        handoff.push_at(batch, at).unwrap()
    }

    fn values(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn small_batches_are_handed_on_together_in_order() {
        let mut handoff = BatchHandoff::new(100);
        let start = Instant::now();
        let mut out = Vec::new();
        for i in 0..30 {
            out.extend(push(&mut handoff, ints(i * 3, 3), start));
        }
        out.extend(handoff.finish().unwrap());
        assert_eq!(out.len(), 1, "{} hand-offs for 90 rows", out.len());
        assert_eq!(values(&out), (0..90).collect::<Vec<_>>());
        assert!(handoff.finish().unwrap().is_none());
    }

    #[test]
    fn a_full_group_goes_at_once_and_large_batches_pass_through() {
        let mut handoff = BatchHandoff::new(10);
        let start = Instant::now();
        assert!(push(&mut handoff, ints(0, 6), start).is_empty());
        let second = push(&mut handoff, ints(6, 6), start);
        assert_eq!(values(&second), (0..10).collect::<Vec<_>>());
        // Two rows are still held: they go first, then the large batch as it came.
        let third = push(&mut handoff, ints(12, HANDOFF_PASS_ROWS), start);
        assert_eq!(third.len(), 2);
        assert_eq!(third[1].num_rows(), HANDOFF_PASS_ROWS);
        let mut all = second;
        all.extend(third);
        all.extend(handoff.finish().unwrap());
        assert_eq!(
            values(&all),
            (0..12 + HANDOFF_PASS_ROWS as i64).collect::<Vec<_>>()
        );
        let mut idle = BatchHandoff::new(10);
        let passed = push(&mut idle, ints(0, HANDOFF_PASS_ROWS), start);
        assert_eq!(passed.len(), 1);
        assert_eq!(passed[0].num_rows(), HANDOFF_PASS_ROWS);
    }

    #[test]
    fn rows_held_past_the_delay_are_handed_on_with_the_next_batch() {
        let mut handoff = BatchHandoff::new(1_000);
        let start = Instant::now();
        assert!(push(&mut handoff, ints(0, 2), start).is_empty());
        let just_before = start + HANDOFF_DELAY_MAX - Duration::from_micros(1);
        assert!(push(&mut handoff, ints(2, 2), just_before).is_empty());
        let out = push(&mut handoff, ints(4, 2), start + HANDOFF_DELAY_MAX);
        assert_eq!(values(&out), vec![0, 1, 2, 3, 4, 5]);
        assert!(handoff.finish().unwrap().is_none());
    }

    #[test]
    fn rows_left_over_from_a_full_group_wait_from_their_own_arrival() {
        let mut handoff = BatchHandoff::new(10);
        let start = Instant::now();
        assert!(push(&mut handoff, ints(0, 9), start).is_empty());
        let later = start + HANDOFF_DELAY_MAX * 2;
        let out = push(&mut handoff, ints(9, 6), later);
        assert_eq!(values(&out), (0..10).collect::<Vec<_>>());
        // The five left over arrived at `later`: they are held until a delay after it.
        assert!(push(&mut handoff, ints(15, 1), later + HANDOFF_DELAY_MAX / 2).is_empty());
        let rest = handoff.finish().unwrap().unwrap();
        assert_eq!(values(&[rest]), (10..16).collect::<Vec<_>>());
    }

    #[test]
    fn a_batch_of_another_schema_closes_the_group_held() {
        let mut handoff = BatchHandoff::new(100);
        let start = Instant::now();
        assert!(push(&mut handoff, ints(0, 2), start).is_empty());
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Utf8, false)]));
        let text =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["a"]))]).unwrap();
        let out = push(&mut handoff, text, start);
        assert_eq!(out.len(), 1);
        assert_eq!(values(&out), vec![0, 1]);
        let rest = handoff.finish().unwrap().unwrap();
        assert_eq!(rest.column(0).as_string::<i32>().value(0), "a");
        assert_eq!(rest.column(0).len(), 1);
    }
}
