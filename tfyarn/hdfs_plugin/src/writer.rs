//! Writable files: appends are buffered, `flush` hands them to the client,
//! `sync` makes them durable on the DataNodes and counted in the file's listed
//! length (hsync), `close` completes the file.
//!
//! What a reader sees: a file being written is under construction on the
//! NameNode; its listed length (stat) is as of the last `sync`, but its bytes
//! read only as far as its completed blocks until it is closed: the NameNode's
//! block list leaves the block being written out of the file's length, and
//! hdfs-native (this plugin's reader too), unlike Hadoop's Java client, does
//! not ask a DataNode for the rest. TensorFlow's checkpoints and `checkpoint`
//! index are written to temporary names and renamed when closed, so a writer
//! killed mid-write leaves only a temporary file, never a complete-looking one.

use std::sync::Mutex;

use bytes::Bytes;
use hdfs_native::file::FileWriter;
use hdfs_native::{Client, WriteOptions};

use crate::client::block_on;
use crate::errors::{TfError, TfResult};
use crate::ffi::Code;
use crate::uri::Uri;

/// Appends are gathered up to this size before they go to the client: TF
/// writes records of a few bytes to kilobytes, and each crossing costs.
const BUFFER: usize = 4 << 20;

pub struct Writer {
    uri: Uri,
    state: Mutex<State>,
}

struct State {
    inner: Option<FileWriter>,
    buf: Vec<u8>,
    pos: u64,
}

impl Writer {
    /// A new (or truncated) file.
    pub fn create(client: &Client, uri: &Uri) -> TfResult<Writer> {
        let opts = WriteOptions::default().overwrite(true).create_parent(false);
        let inner = block_on("create", uri, client.create(&uri.path, opts))?;
        Ok(Writer::new(uri, inner, 0))
    }

    /// Append to `uri`, creating it empty if missing.
    pub fn append(client: &Client, uri: &Uri) -> TfResult<Writer> {
        match block_on("stat", uri, client.get_file_info(&uri.path)) {
            Ok(st) if st.isdir => {
                Err(TfError::new(Code::FailedPrecondition, format!("cannot append to {uri}: it is a directory")))
            }
            Ok(st) => {
                let inner = block_on("append", uri, client.append(&uri.path))?;
                Ok(Writer::new(uri, inner, st.length as u64))
            }
            Err(e) if e.code == Code::NotFound => Writer::create(client, uri),
            Err(e) => Err(e),
        }
    }

    fn new(uri: &Uri, inner: FileWriter, pos: u64) -> Writer {
        Writer { uri: uri.clone(), state: Mutex::new(State { inner: Some(inner), buf: Vec::new(), pos }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self, data: &[u8]) -> TfResult<()> {
        let mut st = self.lock();
        if st.inner.is_none() {
            return Err(self.closed("append"));
        }
        st.buf.extend_from_slice(data);
        st.pos += data.len() as u64;
        if st.buf.len() >= BUFFER {
            self.push(&mut st)?;
        }
        Ok(())
    }

    pub fn tell(&self) -> u64 {
        self.lock().pos
    }

    fn push(&self, st: &mut State) -> TfResult<()> {
        if st.buf.is_empty() {
            return Ok(());
        }
        let data = Bytes::from(std::mem::take(&mut st.buf));
        let Some(w) = st.inner.as_mut() else { return Err(self.closed("write")) };
        block_on("write", &self.uri, w.write_bytes(data)).map(|_| ())
    }

    pub fn flush(&self) -> TfResult<()> {
        let mut st = self.lock();
        self.push(&mut st)
    }

    pub fn sync(&self) -> TfResult<()> {
        let mut st = self.lock();
        self.push(&mut st)?;
        let Some(w) = st.inner.as_mut() else { return Err(self.closed("sync")) };
        block_on("sync", &self.uri, w.hsync())
    }

    pub fn close(&self) -> TfResult<()> {
        let mut st = self.lock();
        if st.inner.is_none() {
            return Ok(());
        }
        let pushed = self.push(&mut st);
        let mut w = st.inner.take().unwrap();
        let closed = block_on("close", &self.uri, w.close());
        pushed.and(closed)
    }

    fn closed(&self, op: &str) -> TfError {
        TfError::new(Code::FailedPrecondition, format!("HDFS {op} of {}: the file is closed", self.uri))
    }
}

impl Drop for Writer {
    /// TensorFlow destroyed the file without closing it: close it, as the
    /// POSIX filesystem does, rather than leave it under construction.
    fn drop(&mut self) {
        let _ = self.close();
    }
}
