//! Deletion vectors: per component, the rows superseded or deleted since it was written, and
//! their file format.
//!
//! File format (`c<component>.dv<generation>`): magic `CDV1`, crc32c of the body (u32 LE), then
//! the body, a portable serialized roaring bitmap of row numbers. A new generation is written
//! whenever the manifest is replaced with changed deletions; files are never modified in place.

use crate::error::{Result, StorageError};
use roaring::RoaringTreemap;
use std::path::Path;

const MAGIC: &[u8; 4] = b"CDV1";

pub fn write_deletions(path: &Path, deleted: &RoaringTreemap) -> Result<()> {
    let mut body = Vec::with_capacity(deleted.serialized_size());
    deleted
        .serialize_into(&mut body)
        .map_err(|e| StorageError::io(path, e))?;
    let mut data = Vec::with_capacity(body.len() + 8);
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    data.extend_from_slice(&body);
    let file = std::fs::File::create(path).map_err(|e| StorageError::io(path, e))?;
    use std::io::Write;
    let mut file = file;
    file.write_all(&data)
        .and_then(|_| file.sync_all())
        .map_err(|e| StorageError::io(path, e))
}

pub fn read_deletions(path: &Path) -> Result<RoaringTreemap> {
    let data = std::fs::read(path).map_err(|e| StorageError::io(path, e))?;
    if data.len() < 8 || &data[..4] != MAGIC {
        return Err(StorageError::corrupt(
            path,
            "not a deletion vector (bad magic)",
        ));
    }
    let crc = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    let body = &data[8..];
    if crc32c::crc32c(body) != crc {
        return Err(StorageError::corrupt(
            path,
            "deletion vector checksum mismatch",
        ));
    }
    RoaringTreemap::deserialize_from(body)
        .map_err(|e| StorageError::corrupt(path, format!("undecodable deletion vector: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.dv1");
        let deleted: RoaringTreemap = [1u64, 5, 1 << 33].into_iter().collect();
        write_deletions(&path, &deleted).unwrap();
        assert_eq!(read_deletions(&path).unwrap(), deleted);
        let mut data = std::fs::read(&path).unwrap();
        let last = data.len() - 1;
        data[last] ^= 1;
        std::fs::write(&path, data).unwrap();
        let err = read_deletions(&path).unwrap_err().to_string();
        assert!(err.contains("c1.dv1") && err.contains("checksum"), "{err}");
    }
}
