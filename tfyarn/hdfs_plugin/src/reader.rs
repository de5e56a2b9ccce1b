//! Random-access reads, with read-ahead once reads turn sequential.
//!
//! TensorFlow reads a TFRecord file in 256 KiB calls at increasing offsets; one
//! DataNode request per call would pay a round trip each time. So when a read
//! starts where the previous one ended, a background task streams the rest of
//! the file (hdfs-native pipelines the DataNode's 64 KiB packets) into a
//! bounded channel, and reads take their bytes from it. A read elsewhere (a
//! seek: an index footer, one tensor of a checkpoint) drops the stream and is
//! served by one ranged request.

use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use futures::StreamExt;
use hdfs_native::file::FileReader;
use hdfs_native::HdfsError;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::client::{block_on, runtime, timeout};
use crate::errors::{map_error, TfError, TfResult};
use crate::ffi::Code;
use crate::uri::Uri;

/// Packets (about 64 KiB each) buffered ahead of the reader: ~16 MiB, a few
/// hundred milliseconds of TensorFlow's consumption at the speeds measured.
fn readahead_packets() -> usize {
    std::env::var("TFYARN_HDFS_READAHEAD_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map(|mb| (mb * 16).max(1))
        .unwrap_or(256)
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
    rx: mpsc::Receiver<Result<Bytes, HdfsError>>,
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
        let sequential = offset == state.next;
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
        let (tx, rx) = mpsc::channel(readahead_packets());
        let mut stream = self.file.read_range_stream(offset as usize, (self.len - offset) as usize);
        let task = runtime().spawn(async move {
            while let Some(item) = stream.next().await {
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    break;
                }
            }
        });
        Prefetch { pos: offset, cur: Bytes::new(), rx, task }
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
        // Usually the stream is ahead: take a packet without entering the runtime.
        if let Ok(item) = p.rx.try_recv() {
            return item.map_err(|e| map_error("read", &self.uri.to_string(), &e));
        }
        let limit = timeout();
        let got = runtime().block_on(async { tokio::time::timeout(limit, p.rx.recv()).await });
        match got {
            Ok(Some(Ok(bytes))) => Ok(bytes),
            Ok(Some(Err(e))) => Err(map_error("read", &self.uri.to_string(), &e)),
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
