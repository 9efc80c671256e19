//! A component file's bytes as the Parquet reader asks for them: slices of a read-only memory
//! map of the file, or positional reads where the file cannot be mapped, counting every byte
//! served.
//!
//! A scan of a warm component through positional reads spends about a fifth of its time in the
//! kernel copying page-cache pages into freshly zeroed buffers (bench/results/mapped-reads/).
//! A mapped file hands out slices of the page cache itself: the copy, the zeroing and the
//! system call per chunk are gone, and compressed pages are decompressed straight from the map.

use crate::component::ReadCaches;
use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// An open component file (safe to share across threads; clones share the map or handle).
#[derive(Clone)]
pub(crate) struct ComponentFile {
    bytes: FileBytes,
    len: u64,
    pub(crate) caches: Arc<ReadCaches>,
}

#[derive(Clone)]
enum FileBytes {
    /// The whole file mapped read-only; slices of it keep the map alive.
    Mapped(Bytes),
    /// Read with positional reads: an empty file (which cannot be mapped) or a failed map.
    Read(Arc<File>),
}

impl ComponentFile {
    /// Opens the component file at `path`, mapping it when it can.
    pub(crate) fn open(path: &Path, caches: Arc<ReadCaches>) -> std::io::Result<ComponentFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        // SAFETY: a component file is written completely and made durable before any reader
        // opens it, and nothing writes to it afterwards: merges write new files, and a
        // replaced file is only unlinked, which leaves an existing map intact. The database
        // directory's lock keeps other Cairn processes out. Only a process outside Cairn that
        // truncated the file could change the mapped bytes, as it could corrupt any file.
        let mapped = (len > 0)
            .then(|| unsafe { memmap2::Mmap::map(&file) })
            .and_then(|map| match map {
                Ok(map) => Some(map),
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "reading the component without a memory map");
                    None
                }
            });
        let bytes = match mapped {
            Some(map) => FileBytes::Mapped(Bytes::from_owner(map)),
            None => FileBytes::Read(Arc::new(file)),
        };
        Ok(ComponentFile { bytes, len, caches })
    }

    fn count_read(&self, bytes: usize) {
        self.caches
            .bytes_read
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

impl Length for ComponentFile {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A byte stream over a component file from some position on.
pub(crate) struct PositionalRead {
    source: ComponentFile,
    position: u64,
}

impl Read for PositionalRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match &self.source.bytes {
            FileBytes::Mapped(map) => {
                let start = (self.position as usize).min(map.len());
                let n = buf.len().min(map.len() - start);
                buf[..n].copy_from_slice(&map[start..start + n]);
                n
            }
            FileBytes::Read(file) => file.read_at(buf, self.position)?,
        };
        self.position += n as u64;
        self.source.count_read(n);
        Ok(n)
    }
}

impl ChunkReader for ComponentFile {
    type T = PositionalRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PositionalRead> {
        Ok(PositionalRead {
            source: self.clone(),
            position: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = match &self.bytes {
            FileBytes::Mapped(map) => {
                let end = start
                    .checked_add(length as u64)
                    .filter(|&end| end <= self.len);
                let Some(end) = end else {
                    return Err(ParquetError::EOF(format!(
                        "{length} bytes at {start} run past the end of a {}-byte file",
                        self.len
                    )));
                };
                map.slice(start as usize..end as usize)
            }
            FileBytes::Read(file) => {
                let mut buffer = vec![0u8; length];
                file.read_exact_at(&mut buffer, start)?;
                Bytes::from(buffer)
            }
        };
        self.count_read(length);
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component file holding `content`, opened, with the directory that keeps it.
    fn file_holding(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, ComponentFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.parquet");
        std::fs::write(&path, content).unwrap();
        let caches = Arc::new(ReadCaches::new(1 << 20, 1 << 20));
        let file = ComponentFile::open(&path, caches).unwrap();
        (dir, path, file)
    }

    #[test]
    fn serves_the_files_bytes_and_rejects_ranges_past_its_end() {
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, _path, file) = file_holding(&content);
        assert!(matches!(file.bytes, FileBytes::Mapped(_)));
        assert_eq!(file.len(), 10_000);
        assert_eq!(file.get_bytes(100, 50).unwrap(), content[100..150]);
        assert_eq!(file.get_bytes(9_990, 10).unwrap(), content[9_990..]);
        assert!(file.get_bytes(9_990, 11).is_err());
        assert!(file.get_bytes(u64::MAX, 2).is_err());
        let mut streamed = Vec::new();
        file.get_read(9_000)
            .unwrap()
            .read_to_end(&mut streamed)
            .unwrap();
        assert_eq!(streamed, content[9_000..]);
        assert_eq!(
            file.caches.bytes_read.load(Ordering::Relaxed),
            50 + 10 + 1_000
        );
    }

    #[test]
    fn an_empty_file_is_read_without_a_map() {
        let (_dir, _path, file) = file_holding(b"");
        assert!(matches!(file.bytes, FileBytes::Read(_)));
        assert!(file.get_bytes(0, 1).is_err());
        assert_eq!(file.get_bytes(0, 0).unwrap().len(), 0);
    }

    #[test]
    fn a_mapped_file_outlives_its_unlinking() {
        let (_dir, path, file) = file_holding(b"merged away");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.get_bytes(0, 6).unwrap(), &b"merged"[..]);
    }
}
