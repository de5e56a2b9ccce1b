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
//!
//! A NameNode failover in the middle of a call (see `lost_call.rs`): on an HA
//! name service a new file's writer keeps the bytes it was given (up to
//! [`KEEP`]) and, when create, addBlock or complete is lost mid-call, writes
//! the file anew through the NameNode that took over: delete what the lost
//! call left (a file under construction by this very client would refuse a
//! new create), create, write the bytes again. TensorFlow's small files
//! (checkpoint index and state, the `checkpoint` file, summaries' first
//! bytes) survive a failover this way; a file beyond KEEP fails as before.
//! So does a file whose addBlock or complete the NameNode answered with
//! `RetriableException` (`lost_call.rs`); a create so answered is sent again
//! on a single NameNode too.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hdfs_native::file::FileWriter;
use hdfs_native::{Client, WriteOptions};

use crate::client::{block_on, on_name_service};
use crate::errors::{TfError, TfResult};
use crate::ffi::Code;
use crate::lost_call::{asked_again, lost_mid_call, settle, AGAIN, ASKED_AGAIN};
use crate::uri::Uri;

/// Appends are gathered up to this size before they go to the client: TF
/// writes records of a few bytes to kilobytes, and each crossing costs.
const BUFFER: usize = 4 << 20;
/// The most a new file's writer keeps to write it again after a failover.
pub const KEEP: usize = 64 << 20;

pub struct Writer {
    uri: Uri,
    client: Arc<Client>,
    state: Mutex<State>,
}

struct State {
    inner: Option<FileWriter>,
    buf: Vec<u8>,
    pos: u64,
    /// Every byte since the file was created (None: not kept, see KEEP).
    kept: Option<Vec<u8>>,
    rewrites: u32,
}

impl Writer {
    /// A new (or truncated) file.
    pub fn create(client: &Arc<Client>, uri: &Uri) -> TfResult<Writer> {
        let keep = on_name_service(uri);
        let mut asked = 0;
        let inner = loop {
            match open_new(client, uri) {
                Err(e) if keep && lost_mid_call(&e) => {
                    settle();
                    let _ = block_on("delete", uri, client.delete(&uri.path, false));
                    break open_new(client, uri)?;
                }
                Err(e) if asked_again(&e) && asked < ASKED_AGAIN => {
                    asked += 1;
                    settle();
                }
                other => break other?,
            }
        };
        let writer = Writer::new(client, uri, inner, 0);
        if keep {
            writer.lock().kept = Some(Vec::new());
        }
        Ok(writer)
    }

    /// Append to `uri`, creating it empty if missing.
    pub fn append(client: &Arc<Client>, uri: &Uri) -> TfResult<Writer> {
        match block_on("stat", uri, client.get_file_info(&uri.path)) {
            Ok(st) if st.isdir => {
                Err(TfError::new(Code::FailedPrecondition, format!("cannot append to {uri}: it is a directory")))
            }
            Ok(st) => {
                let inner = block_on("append", uri, client.append(&uri.path))?;
                Ok(Writer::new(client, uri, inner, st.length as u64))
            }
            Err(e) if e.code == Code::NotFound => Writer::create(client, uri),
            Err(e) => Err(e),
        }
    }

    fn new(client: &Arc<Client>, uri: &Uri, inner: FileWriter, pos: u64) -> Writer {
        let state = State { inner: Some(inner), buf: Vec::new(), pos, kept: None, rewrites: 0 };
        Writer { uri: uri.clone(), client: Arc::clone(client), state: Mutex::new(state) }
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
        let within = st.pos as usize <= KEEP;
        match st.kept.as_mut() {
            Some(kept) if within => kept.extend_from_slice(data),
            Some(_) => st.kept = None,
            None => {}
        }
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
        match block_on("write", &self.uri, w.write_bytes(data)) {
            Ok(_) => Ok(()),
            Err(e) => self.rewrite(st, e),
        }
    }

    /// After `e`, write the file anew from the kept bytes (see the module's
    /// docs); `e` itself when that is not possible.
    fn rewrite(&self, st: &mut State, e: TfError) -> TfResult<()> {
        let again = if asked_again(&e) { ASKED_AGAIN } else { AGAIN };
        if !(lost_mid_call(&e) || asked_again(&e)) || st.rewrites >= again {
            return Err(e);
        }
        let Some(kept) = st.kept.clone() else { return Err(e) };
        st.rewrites += 1;
        settle();
        st.inner = None;
        let _ = block_on("delete", &self.uri, self.client.delete(&self.uri.path, false));
        let mut w = open_new(&self.client, &self.uri)?;
        if let Err(again) = block_on("write", &self.uri, w.write_bytes(Bytes::from(kept))) {
            return self.rewrite(st, again);
        }
        st.buf.clear();
        st.inner = Some(w);
        Ok(())
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
        self.push(&mut st)?;
        loop {
            let Some(mut w) = st.inner.take() else { return Err(self.closed("close")) };
            match block_on("close", &self.uri, w.close()) {
                Ok(()) => return Ok(()),
                Err(e) => self.rewrite(&mut st, e)?,
            }
        }
    }

    fn closed(&self, op: &str) -> TfError {
        TfError::new(Code::FailedPrecondition, format!("HDFS {op} of {}: the file is closed", self.uri))
    }
}

/// A new (or truncated) file's writer.
fn open_new(client: &Client, uri: &Uri) -> TfResult<FileWriter> {
    let opts = WriteOptions::default().overwrite(true).create_parent(false);
    block_on("create", uri, client.create(&uri.path, opts))
}

impl Drop for Writer {
    /// TensorFlow destroyed the file without closing it: close it, as the
    /// POSIX filesystem does, rather than leave it under construction.
    fn drop(&mut self) {
        let _ = self.close();
    }
}
