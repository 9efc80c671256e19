//! Column chunks read whole, one positional read per run of adjacent chunks, and served to the
//! Parquet reader from memory.
//!
//! Without a page index the Parquet reader walks a column chunk page by page and decodes each
//! page header from a byte stream; over a file that stream costs a system call per few bytes.
//! A scan that reads whole row groups knows every byte range it needs from the footer, so it
//! reads them up front instead.

use bytes::{Buf, Bytes};
use parquet::file::reader::{ChunkReader, Length};
use std::io::Read;

/// Chunks separated by at most this many bytes are read together: reading a little unwanted
/// data costs less than another system call.
const COALESCE_GAP_BYTES: u64 = 64 << 10;

/// A file's byte ranges held in memory, in front of the file itself (for anything outside
/// them, such as a read the caller did not foresee).
pub struct BufferedChunks<R> {
    source: R,
    /// (first byte, bytes), sorted and disjoint.
    chunks: Vec<(u64, Bytes)>,
}

impl<R: ChunkReader> BufferedChunks<R> {
    /// Reads `ranges` ((first byte, length) pairs, in any order) from `source`.
    pub fn read(
        source: R,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> parquet::errors::Result<Self> {
        let mut ranges: Vec<(u64, u64)> = ranges.into_iter().filter(|(_, len)| *len > 0).collect();
        ranges.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (start, len) in ranges {
            let end = start + len;
            match runs.last_mut() {
                Some((run_start, run_end)) if start <= *run_end + COALESCE_GAP_BYTES => {
                    *run_end = (*run_end).max(end);
                    debug_assert!(*run_start <= start);
                }
                _ => runs.push((start, end)),
            }
        }
        let chunks = runs
            .into_iter()
            .map(|(start, end)| Ok((start, source.get_bytes(start, (end - start) as usize)?)))
            .collect::<parquet::errors::Result<_>>()?;
        Ok(BufferedChunks { source, chunks })
    }

    /// A source that reads everything from the file.
    pub fn unbuffered(source: R) -> Self {
        BufferedChunks {
            source,
            chunks: Vec::new(),
        }
    }

    /// The held bytes from `start` to the end of the chunk holding it.
    fn held_from(&self, start: u64) -> Option<Bytes> {
        let index = self.chunks.partition_point(|(first, _)| *first <= start);
        let (first, bytes) = self.chunks.get(index.checked_sub(1)?)?;
        let offset = (start - first) as usize;
        (offset < bytes.len()).then(|| bytes.slice(offset..))
    }
}

impl<R: Length> Length for BufferedChunks<R> {
    fn len(&self) -> u64 {
        self.source.len()
    }
}

/// A reader over held bytes or, outside them, over the file.
pub enum ChunkRead<T> {
    Held(bytes::buf::Reader<Bytes>),
    File(T),
}

impl<T: Read> Read for ChunkRead<T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ChunkRead::Held(held) => held.read(buf),
            ChunkRead::File(file) => file.read(buf),
        }
    }
}

impl<R: ChunkReader> ChunkReader for BufferedChunks<R> {
    type T = ChunkRead<R::T>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self.held_from(start) {
            Some(bytes) => ChunkRead::Held(bytes.reader()),
            None => ChunkRead::File(self.source.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self.held_from(start) {
            Some(bytes) if bytes.len() >= length => Ok(bytes.slice(..length)),
            _ => self.source.get_bytes(start, length),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_ranges_are_served_from_memory_and_the_rest_from_the_source() {
        let file = Bytes::from((0..=255u8).cycle().take(300_000).collect::<Vec<u8>>());
        let buffered =
            BufferedChunks::read(file.clone(), [(100, 50), (10, 20), (200_000, 10)]).unwrap();
        // 10..30 and 100..150 are one read (gap under the limit); 200,000.. another.
        assert_eq!(buffered.chunks.len(), 2);
        assert_eq!(buffered.chunks[0].0, 10);
        assert_eq!(buffered.chunks[0].1.len(), 140);
        for (start, length) in [
            (10, 20),
            (120, 30),
            (200_005, 5),
            (5, 10),
            (150, 8),
            (250_000, 100),
        ] {
            assert_eq!(
                buffered.get_bytes(start, length).unwrap(),
                file.slice(start as usize..start as usize + length),
                "bytes at {start}"
            );
            let mut read = Vec::new();
            buffered
                .get_read(start)
                .unwrap()
                .take(length as u64)
                .read_to_end(&mut read)
                .unwrap();
            assert_eq!(
                read,
                file.slice(start as usize..start as usize + length),
                "read at {start}"
            );
        }
    }
}
