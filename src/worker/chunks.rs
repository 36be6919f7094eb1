//! Synchronous adapters between the engine (which reads and writes `std::io`) and chunks in the
//! database, for use on engine threads: [`ChunkReader`] reads a dataset chunk by chunk,
//! [`ResultWriter`] stores the anonymized CSV chunk by chunk under the job's lease, on a thread of
//! its own. The reader holds one chunk; the writer at most one being filled and
//! [`CHUNKS_IN_FLIGHT`] waiting to be stored.

use std::io::{self, Read, Write};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use deid_engine::CancelFlag;
use tokio::runtime::Handle;

use crate::job::id::{DatasetId, JobId};
use crate::store::{CHUNK_BYTES, Store};

/// Whose chunks a [`ChunkReader`] reads.
#[derive(Debug)]
enum Source {
    /// A dataset's CSV.
    Dataset(DatasetId),
    /// A job's result CSV.
    Result(JobId),
}

/// Reads a stored dataset's (or result's) bytes. Must not be used on a tokio worker thread.
#[derive(Debug)]
pub struct ChunkReader {
    store: Store,
    handle: Handle,
    source: Source,
    chunk_count: i64,
    next: i64,
    buf: Vec<u8>,
    pos: usize,
    cancel: Option<CancelFlag>,
}

impl ChunkReader {
    /// A reader over chunks `0..chunk_count` of job `job_id`'s result CSV.
    pub fn result(store: Store, handle: Handle, job_id: JobId, chunk_count: i64) -> ChunkReader {
        ChunkReader {
            source: Source::Result(job_id),
            ..ChunkReader::new(store, handle, DatasetId::from(""), chunk_count)
        }
    }

    /// The same reader, failing at its next chunk once `cancel` is raised (the reading stops
    /// with the request or job that asked for it).
    pub fn cancellable(mut self, cancel: CancelFlag) -> ChunkReader {
        self.cancel = Some(cancel);
        self
    }

    /// A reader over chunks `0..chunk_count` of `dataset_id`.
    pub fn new(
        store: Store,
        handle: Handle,
        dataset_id: DatasetId,
        chunk_count: i64,
    ) -> ChunkReader {
        ChunkReader {
            store,
            handle,
            source: Source::Dataset(dataset_id),
            chunk_count,
            next: 0,
            buf: Vec::new(),
            pos: 0,
            cancel: None,
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.buf.len() {
            if self.next >= self.chunk_count {
                return Ok(0);
            }
            if self.cancel.as_ref().is_some_and(CancelFlag::is_cancelled) {
                return Err(io::Error::other("cancelled"));
            }
            let chunk = match &self.source {
                Source::Dataset(id) => self
                    .handle
                    .block_on(self.store.dataset_chunk(id, self.next)),
                Source::Result(id) => self.handle.block_on(self.store.result_chunk(id, self.next)),
            };
            let chunk = chunk.map_err(io::Error::other)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "chunk {} of the stored CSV is missing (was it deleted?)",
                        self.next
                    ),
                )
            })?;
            self.buf = chunk;
            self.pos = 0;
            self.next += 1;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// How many full chunks may wait for the storing thread before `write` blocks: enough to keep
/// the writer busy while one chunk is stored, and a bound on the memory held.
const CHUNKS_IN_FLIGHT: usize = 2;

/// Writes a job's result CSV into `result_chunks`, fenced by the lease: once the lease is lost
/// every write fails with `ErrorKind::PermissionDenied`. Full chunks are stored on a thread of
/// their own ("result-chunks"), so producing the CSV and storing it overlap; at most
/// [`CHUNKS_IN_FLIGHT`] chunks wait for it.
#[derive(Debug)]
pub struct ResultWriter {
    buf: Vec<u8>,
    chunks: i64,
    sender: Option<SyncSender<(i64, Vec<u8>)>>,
    storer: Option<JoinHandle<io::Result<()>>>,
}

impl ResultWriter {
    /// A writer for `job_id` held by `owner`.
    pub fn new(store: Store, handle: Handle, job_id: JobId, owner: String) -> ResultWriter {
        let (sender, receiver) = sync_channel::<(i64, Vec<u8>)>(CHUNKS_IN_FLIGHT);
        let storer = std::thread::Builder::new()
            .name("result-chunks".into())
            .spawn(move || {
                for (index, chunk) in receiver {
                    let ok = handle
                        .block_on(store.insert_result_chunk(&job_id, &owner, index, &chunk))
                        .map_err(io::Error::other)?;
                    if !ok {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            "the job's lease was lost",
                        ));
                    }
                }
                Ok(())
            });
        let (sender, storer) = match storer {
            Ok(storer) => (Some(sender), Some(storer)),
            // No thread: every write fails with the reason (see `send`).
            Err(_) => (None, None),
        };
        ResultWriter {
            buf: Vec::with_capacity(CHUNK_BYTES),
            chunks: 0,
            sender,
            storer,
        }
    }

    /// The storing thread's outcome, once it has stopped.
    fn join(&mut self) -> io::Result<()> {
        self.sender = None;
        match self.storer.take() {
            Some(storer) => storer
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the chunk-storing thread panicked"))),
            None => Ok(()),
        }
    }

    /// Hands the buffered bytes to the storing thread as the next chunk.
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES));
        let sent = match &self.sender {
            Some(sender) => sender.send((self.chunks, chunk)).is_ok(),
            None => false,
        };
        if !sent {
            // The thread stopped on an error (or never started): report why.
            self.join()?;
            return Err(io::Error::other(
                "the result chunks can no longer be stored",
            ));
        }
        self.chunks += 1;
        Ok(())
    }

    /// Stores the last chunk, waits until every chunk is stored and returns their number.
    pub fn finish(mut self) -> io::Result<i64> {
        self.send()?;
        self.join()?;
        Ok(self.chunks)
    }
}

impl Drop for ResultWriter {
    fn drop(&mut self) {
        // An abandoned writer (an error upstream) still waits for the chunk being stored, so no
        // store runs on after the job has moved on; the outcome no longer matters.
        let _ = self.join();
    }
}

impl Write for ResultWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK_BYTES - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Chunks are stored when full or on `finish`; flushing early would create small chunks.
        Ok(())
    }
}
