//! The write-ahead log's on-disk format, shared by the writer and the replay reader.
//!
//! A WAL is a sequence of segment files `wal-<first LSN, 20 digits>.log`. Each holds frames:
//!
//! ```text
//! frame   := payload_len: u32 LE | crc32c(payload): u32 LE | payload
//! payload := lsn: u64 LE | dataset_id: u64 LE | body
//! body    := varint(op_count) | op*
//! op      := kind: u8 (1 insert, 2 upsert, 3 delete, 4 upsert as JSON)
//!            | varint(partition) | record, key, or varint(length) | JSON text
//! ```
//!
//! Records and keys use cairn-model's binary codec. A feed's records are logged as the JSON text
//! they arrived as (kind 4), which costs a copy where encoding would cost a walk of every value;
//! recovery decodes the text as the feed did. One frame is one atomic write batch: a frame
//! whose length or checksum does not hold is a torn write that was never acknowledged.

use cairn_model::binary::{Reader, encode_key, encode_record, put_varint};
use cairn_model::{Key, Record};

pub const FRAME_HEADER_BYTES: usize = 8;
const PAYLOAD_PREFIX_BYTES: usize = 16;

/// One logged write.
#[derive(Debug, Clone, PartialEq)]
pub enum LoggedOp {
    Insert(Record),
    Upsert(Record),
    Delete(Key),
    /// An upsert of the record this JSON text holds, already checked against the dataset.
    UpsertJson(String),
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedBatch {
    pub lsn: u64,
    pub dataset_id: u64,
    pub ops: Vec<(u32, LoggedOp)>,
}

/// Encodes the body of a batch (everything after the LSN and dataset id).
pub fn encode_body(ops: &[(u32, &LoggedOp)]) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 * ops.len());
    put_varint(&mut body, ops.len() as u64);
    for (partition, op) in ops {
        let kind = match op {
            LoggedOp::Insert(_) => 1,
            LoggedOp::Upsert(_) => 2,
            LoggedOp::Delete(_) => 3,
            LoggedOp::UpsertJson(_) => JSON_UPSERT_KIND,
        };
        body.push(kind);
        put_varint(&mut body, *partition as u64);
        match op {
            LoggedOp::Insert(record) | LoggedOp::Upsert(record) => encode_record(&mut body, record),
            LoggedOp::Delete(key) => encode_key(&mut body, key),
            LoggedOp::UpsertJson(text) => put_json_text(&mut body, text),
        }
    }
    body
}

const JSON_UPSERT_KIND: u8 = 4;

fn put_json_text(body: &mut Vec<u8>, text: &str) {
    put_varint(body, text.len() as u64);
    body.extend_from_slice(text.as_bytes());
}

/// Encodes the body of a batch of JSON upserts, `(partition, text)` in batch order: the same
/// bytes as [`encode_body`] on [`LoggedOp::UpsertJson`] ops, without building them.
pub fn encode_json_upserts(upserts: &[(u32, &str)]) -> Vec<u8> {
    let text_bytes: usize = upserts.iter().map(|(_, text)| text.len()).sum();
    let mut body = Vec::with_capacity(text_bytes + 12 * upserts.len() + 10);
    put_varint(&mut body, upserts.len() as u64);
    for &(partition, text) in upserts {
        body.push(JSON_UPSERT_KIND);
        put_varint(&mut body, partition as u64);
        put_json_text(&mut body, text);
    }
    body
}

/// Appends a whole frame for (lsn, dataset_id, body) to `out`.
pub fn append_frame(out: &mut Vec<u8>, lsn: u64, dataset_id: u64, body: &[u8]) {
    let mut prefix = [0u8; PAYLOAD_PREFIX_BYTES];
    prefix[..8].copy_from_slice(&lsn.to_le_bytes());
    prefix[8..].copy_from_slice(&dataset_id.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&prefix), body);
    let payload_len = (PAYLOAD_PREFIX_BYTES + body.len()) as u32;
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&prefix);
    out.extend_from_slice(body);
}

/// Size of the frame that `append_frame` writes for a body of `body_len` bytes.
pub fn frame_len(body_len: usize) -> usize {
    FRAME_HEADER_BYTES + PAYLOAD_PREFIX_BYTES + body_len
}

/// Result of reading frames from the start of a segment.
pub struct SegmentContents {
    pub batches: Vec<LoggedBatch>,
    /// Bytes from the start that hold whole, valid frames.
    pub valid_len: usize,
    /// Why reading stopped before the end of the data, if it did.
    pub stopped_because: Option<String>,
}

/// Decodes frames until the data ends or a frame is torn or corrupt.
pub fn read_segment(data: &[u8]) -> SegmentContents {
    let mut batches = Vec::new();
    let mut offset = 0usize;
    let stop = |offset: usize, why: String, batches: Vec<LoggedBatch>| SegmentContents {
        batches,
        valid_len: offset,
        stopped_because: Some(why),
    };
    while offset < data.len() {
        if data[offset..].iter().all(|&b| b == 0) {
            // The writer zero-fills ahead of its frames: an all-zero rest is unused space.
            break;
        }
        if data.len() - offset < FRAME_HEADER_BYTES {
            return stop(
                offset,
                format!("partial frame header at byte {offset}"),
                batches,
            );
        }
        let len = u32::from_le_bytes(data[offset..offset + 4].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(data[offset + 4..offset + 8].try_into().unwrap_or_default());
        let start = offset + FRAME_HEADER_BYTES;
        let Some(end) = start.checked_add(len as usize).filter(|&e| e <= data.len()) else {
            return stop(
                offset,
                format!("frame at byte {offset} runs past the end"),
                batches,
            );
        };
        let payload = &data[start..end];
        if (len as usize) < PAYLOAD_PREFIX_BYTES || crc32c::crc32c(payload) != crc {
            return stop(
                offset,
                format!("checksum mismatch in frame at byte {offset}"),
                batches,
            );
        }
        match decode_payload(payload) {
            Ok(batch) => batches.push(batch),
            Err(why) => {
                return stop(
                    offset,
                    format!("undecodable frame at byte {offset}: {why}"),
                    batches,
                );
            }
        }
        offset = end;
    }
    SegmentContents {
        batches,
        valid_len: offset,
        stopped_because: None,
    }
}

fn decode_payload(payload: &[u8]) -> Result<LoggedBatch, String> {
    let mut reader = Reader::new(payload);
    let lsn = u64::from_le_bytes(reader.array().map_err(|e| e.to_string())?);
    let dataset_id = u64::from_le_bytes(reader.array().map_err(|e| e.to_string())?);
    let count = reader.varint().map_err(|e| e.to_string())?;
    if count > payload.len() as u64 {
        return Err(format!("op count {count} exceeds frame size"));
    }
    let mut ops = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let kind = reader.u8().map_err(|e| e.to_string())?;
        let partition = reader.varint().map_err(|e| e.to_string())?;
        let partition = u32::try_from(partition).map_err(|_| "partition out of range")?;
        let op = match kind {
            1 => LoggedOp::Insert(reader.record().map_err(|e| e.to_string())?),
            2 => LoggedOp::Upsert(reader.record().map_err(|e| e.to_string())?),
            3 => LoggedOp::Delete(reader.key().map_err(|e| e.to_string())?),
            JSON_UPSERT_KIND => {
                let len = reader.varint().map_err(|e| e.to_string())?;
                let len = usize::try_from(len).map_err(|_| "JSON text length out of range")?;
                let text = reader.take(len).map_err(|e| e.to_string())?;
                let text = std::str::from_utf8(text).map_err(|e| format!("JSON text: {e}"))?;
                LoggedOp::UpsertJson(text.to_string())
            }
            other => return Err(format!("unknown op kind {other}")),
        };
        ops.push((partition, op));
    }
    if !reader.is_empty() {
        return Err("trailing bytes after the last op".to_string());
    }
    Ok(LoggedBatch {
        lsn,
        dataset_id,
        ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_model::Value;

    #[test]
    fn json_upserts_encode_as_their_ops_and_read_back() {
        let texts = [r#"{"id":1}"#, r#"{"id":2,"name":"é"}"#];
        let body = encode_json_upserts(&[(3, texts[0]), (0, texts[1])]);
        let ops: Vec<LoggedOp> = texts
            .iter()
            .map(|t| LoggedOp::UpsertJson(t.to_string()))
            .collect();
        assert_eq!(body, encode_body(&[(3, &ops[0]), (0, &ops[1])]));
        let mut log = Vec::new();
        append_frame(&mut log, 5, 1, &body);
        let read = read_segment(&log);
        assert_eq!(
            read.batches[0].ops,
            vec![(3, ops[0].clone()), (0, ops[1].clone())]
        );
    }

    #[test]
    fn frames_round_trip_and_torn_tails_stop_reading() {
        let op_a = LoggedOp::Upsert(Record::new(vec![Value::Int(1), Value::String("a".into())]));
        let op_b = LoggedOp::Delete(Key::int(9));
        let mut log = Vec::new();
        append_frame(&mut log, 1, 7, &encode_body(&[(0, &op_a), (3, &op_b)]));
        let first_len = log.len();
        append_frame(&mut log, 2, 7, &encode_body(&[(1, &op_b)]));
        let whole = read_segment(&log);
        assert_eq!(whole.batches.len(), 2);
        assert_eq!(whole.batches[0].ops, vec![(0, op_a), (3, op_b.clone())]);
        assert!(whole.stopped_because.is_none());
        for cut in first_len..log.len() {
            let torn = read_segment(&log[..cut]);
            assert_eq!(torn.batches.len(), 1);
            assert_eq!(torn.valid_len, first_len);
        }
        let mut flipped = log.clone();
        flipped[first_len + 20] ^= 1;
        let corrupt = read_segment(&flipped);
        assert_eq!(corrupt.valid_len, first_len);
        assert!(corrupt.stopped_because.unwrap().contains("checksum"));
    }

    #[test]
    fn a_zero_filled_tail_is_a_clean_end_but_a_torn_frame_before_it_is_not() {
        let mut log = Vec::new();
        append_frame(
            &mut log,
            1,
            7,
            &encode_body(&[(0, &LoggedOp::Delete(Key::int(1)))]),
        );
        let first_len = log.len();
        append_frame(
            &mut log,
            2,
            7,
            &encode_body(&[(0, &LoggedOp::Delete(Key::int(2)))]),
        );
        let frames_len = log.len();
        log.resize(frames_len + 4096, 0);
        let clean = read_segment(&log);
        assert_eq!(clean.batches.len(), 2);
        assert_eq!(clean.valid_len, frames_len);
        assert!(clean.stopped_because.is_none());
        // A write torn after the second frame's header leaves the fill's zeros in its payload.
        log[first_len + FRAME_HEADER_BYTES..frames_len].fill(0);
        let torn = read_segment(&log);
        assert_eq!(torn.batches.len(), 1);
        assert_eq!(torn.valid_len, first_len);
        assert!(torn.stopped_because.is_some());
    }
}
