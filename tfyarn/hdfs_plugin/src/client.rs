//! One hdfs-native client per NameNode (or name service, or ViewFS cluster),
//! one tokio runtime for all of them, and a deadline on every call.

use std::collections::HashMap;
use std::future::Future;
use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hdfs_native::{Client, ClientBuilder, HdfsError};
use tokio::runtime::Runtime;

use crate::errors::{map_error, TfError, TfResult};
use crate::failover::{self, NameService};
use crate::ffi::Code;
use crate::site::Site;
use crate::uri::Uri;

/// Seconds a call may take (`TFYARN_HDFS_TIMEOUT`, as tfyarn.data reads it).
const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tfyarn-hdfs")
            .enable_all()
            .build()
            .expect("cannot start the HDFS plugin's I/O threads")
    })
}

pub fn timeout() -> Duration {
    static T: OnceLock<Duration> = OnceLock::new();
    *T.get_or_init(|| {
        let secs = std::env::var("TFYARN_HDFS_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .unwrap_or(DEFAULT_TIMEOUT_SECS);
        Duration::from_secs_f64(secs)
    })
}

/// Run `fut` on the plugin's runtime, giving up after the deadline. The
/// future is dropped at the deadline, so nothing stays blocked behind it.
pub fn block_on<T>(op: &str, uri: &Uri, fut: impl Future<Output = Result<T, HdfsError>>) -> TfResult<T> {
    let limit = timeout();
    match runtime().block_on(async { tokio::time::timeout(limit, fut).await }) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(mapped(op, uri, &e)),
        Err(_) => Err(TfError::new(
            Code::DeadlineExceeded,
            format!(
                "HDFS {op} of {uri} did not answer within {:.0} s: {}; raise TFYARN_HDFS_TIMEOUT for a slow cluster.",
                limit.as_secs_f64(),
                unanswered(uri),
            ),
        )),
    }
}

/// A client error of `op` on `uri` as TensorFlow's, naming the client's name services.
pub fn mapped(op: &str, uri: &Uri, err: &HdfsError) -> TfError {
    map_error(op, &uri.to_string(), err, &entry_of(uri).map(|e| e.services).unwrap_or_default())
}

/// Who did not answer in time, and what to check, for a deadline's message.
fn unanswered(uri: &Uri) -> String {
    let services = entry_of(uri).map(|e| e.services).unwrap_or_default();
    if !services.is_empty() {
        return format!(
            "no NameNode of {} answered (down, standby, or on a host that drops connections). {}",
            failover::describe(&services),
            failover::what_to_check(&services)
        );
    }
    format!(
        "the NameNode for {} is unreachable or overloaded. Check the address and that HDFS is running (`tfyarn cluster status` for the local cluster)",
        if uri.authority.is_empty() { "fs.defaultFS".to_string() } else { uri.prefix() },
    )
}

type Key = (String, String, String);

/// A client and the name services it talks to.
#[derive(Clone)]
struct Entry {
    client: Arc<Client>,
    services: Arc<[NameService]>,
}

fn clients() -> std::sync::MutexGuard<'static, HashMap<Key, Entry>> {
    static CLIENTS: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    CLIENTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

fn key_of(uri: &Uri) -> Key {
    let conf_dir = std::env::var("HADOOP_CONF_DIR").unwrap_or_default();
    (uri.scheme.clone(), uri.authority.clone(), conf_dir)
}

/// Whether `uri`'s client talks to an HA name service (it fails over).
pub fn on_name_service(uri: &Uri) -> bool {
    entry_of(uri).is_some_and(|e| !e.services.is_empty())
}

fn entry_of(uri: &Uri) -> Option<Entry> {
    clients().get(&key_of(uri)).cloned()
}

/// The client for `uri`'s scheme and authority (cached with the config dir,
/// so `hdfs:///` follows a changed HADOOP_CONF_DIR as tfyarn.data does), with
/// the failover settings of [`failover`] for its target.
pub fn client_for(uri: &Uri) -> TfResult<Arc<Client>> {
    let key = key_of(uri);
    let mut cache = clients();
    if let Some(e) = cache.get(&key) {
        return Ok(Arc::clone(&e.client));
    }
    let url = token_url(uri);
    let site = Site::from_env();
    let services = failover::name_services(&uri.scheme, &uri.authority, &site);
    let options = failover::client_options(&services, &site);
    let _guard = runtime().enter();
    let client = ClientBuilder::new()
        .with_url(url.clone())
        .with_config(options)
        .with_io_runtime(runtime().handle().clone())
        .build()
        .map_err(|e| {
            TfError::new(
                Code::FailedPrecondition,
                format!(
                    "cannot set up an HDFS client for {url} (for {uri}): {e}. Check HADOOP_CONF_DIR (core-site.xml fs.defaultFS, hdfs-site.xml) or put the NameNode in the URL (hdfs://host:port/path)."
                ),
            )
        })?;
    let client = Arc::new(client);
    cache.insert(key, Entry { client: Arc::clone(&client), services: services.into() });
    Ok(client)
}

/// In a YARN container, the NameNode named the way its delegation token is.
///
/// hdfs-native finds a token only by the exact service `ip:port` Hadoop gave
/// it, so `hdfs://nn.example.com:8020` (or a fs.defaultFS spelled so) finds
/// none (tried on a secure local cluster: a NameNode named by host name
/// found no token). Same rule as `tfyarn.data.fs.hdfs.token_url`:
/// only with `HADOOP_TOKEN_FILE_LOCATION` set, only `hdfs://host:port`.
pub fn token_url(uri: &Uri) -> String {
    let plain = if uri.authority.is_empty() { format!("{}:///", uri.scheme) } else { uri.prefix() };
    if std::env::var_os("HADOOP_TOKEN_FILE_LOCATION").is_none() || uri.scheme != "hdfs" {
        return plain;
    }
    let authority = if uri.authority.is_empty() {
        match Site::from_env().default_fs().and_then(Uri::parse) {
            Some(d) if d.scheme == "hdfs" => d.authority,
            _ => return plain,
        }
    } else {
        uri.authority.clone()
    };
    let Some((host, port)) = authority.rsplit_once(':') else { return plain };
    if port.parse::<u16>().is_err() {
        return plain;
    }
    match (host, port.parse::<u16>().unwrap()).to_socket_addrs().ok().and_then(|mut a| a.find(|x| x.is_ipv4())) {
        Some(addr) => format!("hdfs://{}:{}", addr.ip(), port),
        None => plain,
    }
}
