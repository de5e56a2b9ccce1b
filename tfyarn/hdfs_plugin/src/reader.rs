//! Random-access reads, with read-ahead once reads turn sequential.
//!
//! TensorFlow reads a TFRecord file in 256 KiB calls at increasing offsets; one
//! DataNode request per call would pay a round trip each time. So when a read
//! starts where the previous one ended, or is a file's first read and starts at
//! byte 0, a background task streams the rest of the file (hdfs-native
//! pipelines the DataNode's packets) into a channel, and reads take their bytes
//! from it. A read elsewhere (a seek: an index footer, one tensor of a
//! checkpoint) drops the stream and is served by one ranged request.
//!
//! The read-ahead is bounded in bytes, per open file. hdfs-native reads ahead
//! within whatever range it is asked for (up to 100 packets), so the task asks
//! for the file in ranges of the read-ahead's size: about twice the read-ahead
//! is held per file, however large the file. Before, it asked for the whole
//! rest of the file: ~45 MiB per open file, and `TFRecordDataset` with
//! `num_parallel_reads=4` keeps 12 open. Bounded, the packet buffers are freed
//! and reused while a pass runs (see recycle.rs).
//!
//! Why a first read at byte 0 streams at once: `TFRecordDataset` with
//! `num_parallel_reads` opens the next files of its interleave early, reads
//! their first chunk, and comes back to them a whole file later. Streaming from
//! that first read has their data buffered by then; starting at the second
//! read made the interleave wait 15-40 ms for a DataNode's first packet at
//! every round of files (measured: 4 rounds, 0.14 s of a 1.3 s pass).

use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use futures::StreamExt;
use hdfs_native::file::FileReader;
use hdfs_native::HdfsError;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

use crate::client::{block_on, mapped, runtime, timeout};
use crate::errors::{TfError, TfResult};
use crate::ffi::Code;
use crate::uri::Uri;

/// Bytes buffered ahead of the reader per open file: 4 MiB by default, tens
/// of milliseconds of TensorFlow's consumption at the speeds measured, far
/// longer than a DataNode takes to start the next range.
fn readahead_bytes() -> u64 {
    std::env::var("TFYARN_HDFS_READAHEAD_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|mb| mb.max(1) << 20)
        .unwrap_or(4 << 20)
}

/// The read-ahead is counted in KiB: the semaphore's permits are u32.
fn kib(bytes: u64) -> u32 {
    bytes.div_ceil(1024).min(u32::MAX as u64) as u32
}

/// The read-ahead a packet takes while buffered (KiB): the task acquires it
/// and the reader gives it back, so both must count it the same way. A packet
/// larger than the whole read-ahead takes all of it.
fn share(packet: &Bytes, window: u32) -> u32 {
    kib(packet.len() as u64).min(window)
}

/// A forward skip this short is read through rather than restarting the stream.
const SKIP_THROUGH: u64 = 1 << 20;

pub struct Reader {
    uri: Uri,
    file: Arc<FileReader>,
    len: u64,
    state: Mutex<State>,
}

struct State {
    /// Where the last read ended (`u64::MAX` before the first read).
    next: u64,
    stream: Option<Prefetch>,
}

struct Prefetch {
    /// File offset of the first byte of `cur`.
    pos: u64,
    cur: Bytes,
    /// Read-ahead held by `cur` (KiB), given back when the next packet is taken.
    held: u32,
    /// Read-ahead not in use (KiB): the task waits for it before passing on a packet.
    room: Arc<Semaphore>,
    /// The whole read-ahead (KiB).
    window: u32,
    rx: mpsc::UnboundedReceiver<Result<Bytes, HdfsError>>,
    task: JoinHandle<()>,
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reader {
    pub fn open(client: &hdfs_native::Client, uri: &Uri) -> TfResult<Reader> {
        let file = block_on("open", uri, client.read(&uri.path))?;
        let len = file.file_length() as u64;
        Ok(Reader { uri: uri.clone(), file: Arc::new(file), len, state: Mutex::new(State { next: u64::MAX, stream: None }) })
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Fill `buf` from `offset`; fewer bytes only at the end of the file.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> TfResult<usize> {
        if offset >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(self.len - offset) as usize;
        let buf = &mut buf[..want];
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // `next` is u64::MAX before the first read: a scan starts at byte 0.
        let sequential = offset == state.next || (state.next == u64::MAX && offset == 0);
        state.next = offset + want as u64;
        let usable = matches!(&state.stream, Some(p) if offset >= p.pos && offset - p.pos <= SKIP_THROUGH);
        if !usable {
            state.stream = None;
            if !sequential {
                drop(state);
                return self.read_direct(offset, buf);
            }
            state.stream = Some(self.start(offset));
        }
        let p = state.stream.as_mut().unwrap();
        match self.take(p, offset, buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                state.stream = None;
                Err(e)
            }
        }
    }

    fn read_direct(&self, offset: u64, buf: &mut [u8]) -> TfResult<usize> {
        let n = buf.len();
        block_on("read", &self.uri, self.file.read_range_buf(buf, offset as usize))?;
        Ok(n)
    }

    fn start(&self, offset: u64) -> Prefetch {
        let window = readahead_bytes();
        let window_kib = kib(window);
        let room = Arc::new(Semaphore::new(window_kib as usize));
        let (tx, rx) = mpsc::unbounded_channel();
        let (file, len, task_room) = (Arc::clone(&self.file), self.len, Arc::clone(&room));
        let task = runtime().spawn(async move {
            let mut pos = offset;
            while pos < len {
                let n = window.min(len - pos);
                let mut stream = file.read_range_stream(pos as usize, n as usize);
                while let Some(item) = stream.next().await {
                    let failed = item.is_err();
                    if let Ok(bytes) = &item {
                        match task_room.acquire_many(share(bytes, window_kib)).await {
                            Ok(permit) => permit.forget(),
                            Err(_) => return,
                        }
                    }
                    if tx.send(item).is_err() || failed {
                        return;
                    }
                }
                pos += n;
            }
        });
        Prefetch { pos: offset, cur: Bytes::new(), held: 0, room, window: window_kib, rx, task }
    }

    fn take(&self, p: &mut Prefetch, offset: u64, buf: &mut [u8]) -> TfResult<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            if p.cur.is_empty() {
                p.cur = self.next_packet(p)?;
            }
            // Skip forward to `offset` (reads that left a small gap).
            if p.pos < offset {
                let skip = ((offset - p.pos) as usize).min(p.cur.len());
                p.cur.advance(skip);
                p.pos += skip as u64;
                continue;
            }
            let k = p.cur.len().min(buf.len() - filled);
            buf[filled..filled + k].copy_from_slice(&p.cur[..k]);
            p.cur.advance(k);
            p.pos += k as u64;
            filled += k;
        }
        Ok(filled)
    }

    fn next_packet(&self, p: &mut Prefetch) -> TfResult<Bytes> {
        p.room.add_permits(std::mem::take(&mut p.held) as usize);
        let bytes = self.receive(p)?;
        p.held = share(&bytes, p.window);
        Ok(bytes)
    }

    fn receive(&self, p: &mut Prefetch) -> TfResult<Bytes> {
        // Usually the stream is ahead: take a packet without entering the runtime.
        if let Ok(item) = p.rx.try_recv() {
            return item.map_err(|e| mapped("read", &self.uri, &e));
        }
        let limit = timeout();
        let got = runtime().block_on(async { tokio::time::timeout(limit, p.rx.recv()).await });
        match got {
            Ok(Some(Ok(bytes))) => Ok(bytes),
            Ok(Some(Err(e))) => Err(mapped("read", &self.uri, &e)),
            Ok(None) => Err(TfError::new(
                Code::DataLoss,
                format!("HDFS read of {} ended at byte {} of {}: the file is shorter than when it was opened", self.uri, p.pos, self.len),
            )),
            Err(_) => Err(TfError::new(
                Code::DeadlineExceeded,
                format!("HDFS read of {} got no data within {:.0} s at byte {}: a DataNode is unreachable or overloaded; raise TFYARN_HDFS_TIMEOUT for a slow cluster", self.uri, limit.as_secs_f64(), p.pos),
            )),
        }
    }
}
