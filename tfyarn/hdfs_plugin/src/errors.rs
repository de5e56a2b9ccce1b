//! hdfs-native errors as TensorFlow status codes, with the path in the message.

use hdfs_native::HdfsError;

use crate::failover::{self, NameService};
use crate::ffi::Code;

#[derive(Debug)]
pub struct TfError {
    pub code: Code,
    pub message: String,
}

pub type TfResult<T> = Result<T, TfError>;

impl TfError {
    pub fn new(code: Code, message: impl Into<String>) -> TfError {
        TfError { code, message: message.into() }
    }
}

/// Map a client error of `op` on `uri`; `services` are the name services the
/// client talks to (empty for `host:port`), named when none of their
/// NameNodes served the call.
pub fn map_error(op: &str, uri: &str, err: &HdfsError, services: &[NameService]) -> TfError {
    let (code, detail) = classify(err);
    let standby = detail.starts_with("StandbyException");
    let unreachable = standby || (code == Code::Unavailable && matches!(err, HdfsError::IOError(_)));
    if unreachable && !services.is_empty() {
        let why = if standby { "all are standby" } else { "none could be reached" };
        return TfError::new(
            code,
            format!(
                "HDFS {op} of {uri} failed: no NameNode of {} served it: {why} ({detail}). {}.",
                failover::describe(services),
                failover::what_to_check(services)
            ),
        );
    }
    if standby {
        return TfError::new(
            code,
            format!(
                "HDFS {op} of {uri} failed: {detail}. That NameNode is a standby: name the HA name service instead (hdfs://<nameservice>/..., dfs.nameservices in hdfs-site.xml) so the client finds the active NameNode, or check which is active with `hdfs haadmin -getAllServiceState`."
            ),
        );
    }
    let hint = match code {
        Code::NotFound => "",
        Code::PermissionDenied => {
            " Ask the owner to grant access (hdfs dfs -chmod/-chown/-setfacl) or run as a user who has it (HADOOP_USER_NAME without Kerberos)."
        }
        Code::Unauthenticated => {
            if std::env::var_os("HADOOP_TOKEN_FILE_LOCATION").is_some() {
                " In a YARN container only the delegation tokens obtained at submission exist: name this NameNode at submission (--hdfs_namenodes hdfs://HOST:PORT, or hdfs://NAMESERVICE for an HA pair)."
            } else {
                " Run `kinit` (or check KRB5_CONFIG and that the KDC runs), then retry."
            }
        }
        Code::Unavailable => {
            " Check the host and port in the URL or fs.defaultFS in $HADOOP_CONF_DIR/core-site.xml, and that HDFS is running (`tfyarn cluster status` for the local cluster)."
        }
        Code::ResourceExhausted => {
            " Free room under that directory or ask an HDFS administrator for more (hdfs dfs -count -q -h DIR)."
        }
        _ => "",
    };
    TfError::new(code, format!("HDFS {op} of {uri} failed: {detail}.{hint}"))
}

fn classify(err: &HdfsError) -> (Code, String) {
    match err {
        HdfsError::FileNotFound(_) => (Code::NotFound, "no such file or directory".into()),
        HdfsError::AlreadyExists(p) => (Code::AlreadyExists, format!("already exists: {p}")),
        HdfsError::IsADirectoryError(_) => (Code::FailedPrecondition, "is a directory".into()),
        HdfsError::InvalidPath(p) => (Code::FailedPrecondition, format!("invalid path {p}")),
        HdfsError::InvalidArgument(m) => (Code::InvalidArgument, m.clone()),
        HdfsError::UrlParseError(e) => (Code::InvalidArgument, format!("bad URL: {e}")),
        HdfsError::ChecksumError => (Code::DataLoss, "checksums did not match".into()),
        HdfsError::BlocksNotFound(p) => (Code::DataLoss, format!("no live replica of a block of {p}")),
        HdfsError::IOError(e) => (io_code(e), format!("I/O error: {e}")),
        HdfsError::RPCError(class, msg) | HdfsError::FatalRPCError(class, msg) => {
            let short = class.rsplit('.').next().unwrap_or(class);
            // The NameNode appends its Java stack trace: keep the first line.
            let first = msg.lines().next().unwrap_or("").trim();
            (rpc_code(short, first), format!("{short}: {first}"))
        }
        HdfsError::SASLError(m) => (Code::Unauthenticated, format!("SASL: {m}")),
        HdfsError::GSSAPIError(..) | HdfsError::NoSASLMechanism => (Code::Unauthenticated, err.to_string()),
        HdfsError::UnsupportedFeature(m) => (Code::Unimplemented, m.clone()),
        HdfsError::DataTransferError(m) => (Code::Unavailable, format!("data transfer: {m}")),
        other => (Code::Unknown, other.to_string()),
    }
}

fn io_code(e: &std::io::Error) -> Code {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => Code::NotFound,
        PermissionDenied => Code::PermissionDenied,
        TimedOut => Code::DeadlineExceeded,
        _ => Code::Unavailable,
    }
}

fn rpc_code(class: &str, message: &str) -> Code {
    match class {
        "FileNotFoundException" if message.contains("not a file") => Code::FailedPrecondition,
        "FileNotFoundException" => Code::NotFound,
        "AccessControlException" => Code::PermissionDenied,
        "FileAlreadyExistsException" if message.contains("directory") => Code::FailedPrecondition,
        "FileAlreadyExistsException" => Code::AlreadyExists,
        "ParentNotDirectoryException" | "PathIsNotEmptyDirectoryException" | "PathIsNotDirectoryException" => {
            Code::FailedPrecondition
        }
        "AlreadyBeingCreatedException" | "RecoveryInProgressException" | "LeaseExpiredException" => {
            Code::FailedPrecondition
        }
        "DSQuotaExceededException" | "NSQuotaExceededException" | "QuotaExceededException" => {
            Code::ResourceExhausted
        }
        "SafeModeException" | "StandbyException" | "RetriableException" => Code::Unavailable,
        "InvalidPathException" => Code::InvalidArgument,
        "SecretManager$InvalidToken" | "InvalidToken" => Code::Unauthenticated,
        _ if message.contains("does not exist") => Code::NotFound,
        _ => Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::NameNode;

    fn ns1() -> Vec<NameService> {
        let nn = |id: &str, address: &str| NameNode { id: id.into(), address: address.into() };
        vec![NameService { name: "ns1".into(), namenodes: vec![nn("nn1", "a:8020"), nn("nn2", "b:8020")] }]
    }

    #[test]
    fn a_service_none_of_whose_namenodes_answered_is_named() {
        let refused = HdfsError::IOError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let e = map_error("stat", "hdfs://ns1/x", &refused, &ns1());
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.message.contains("no NameNode of the name service ns1 (nn1 at a:8020, nn2 at b:8020)"), "{}", e.message);
        assert!(e.message.contains("none could be reached"), "{}", e.message);
        assert!(e.message.contains("hdfs haadmin -ns ns1 -getAllServiceState"), "{}", e.message);
        let standby = HdfsError::RPCError(
            "org.apache.hadoop.ipc.StandbyException".into(),
            "Operation category READ is not supported in state standby\n\tat org.X(X.java:1)".into(),
        );
        let e = map_error("list", "hdfs://ns1/x", &standby, &ns1());
        assert!(e.message.contains("all are standby (StandbyException: Operation category READ"), "{}", e.message);
        assert!(!e.message.contains("X.java"), "{}", e.message);
        // A standby named by host:port: name the service instead.
        let e = map_error("list", "hdfs://h:8020/x", &standby, &[]);
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.message.contains("hdfs://<nameservice>/"), "{}", e.message);
        // A single NameNode keeps its message.
        let e = map_error("stat", "hdfs://h:1/x", &refused, &[]);
        assert!(e.message.contains("Check the host and port in the URL"), "{}", e.message);
    }
}
