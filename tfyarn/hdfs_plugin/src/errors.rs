//! hdfs-native errors as TensorFlow status codes, with the path in the message.

use hdfs_native::HdfsError;

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

/// Map a client error of `op` on `uri` (`namenode` names the client's target).
pub fn map_error(op: &str, uri: &str, err: &HdfsError) -> TfError {
    let (code, detail) = classify(err);
    let hint = match code {
        Code::NotFound => "",
        Code::PermissionDenied => {
            " Ask the owner to grant access (hdfs dfs -chmod/-chown/-setfacl) or run as a user who has it (HADOOP_USER_NAME without Kerberos)."
        }
        Code::Unauthenticated => {
            if std::env::var_os("HADOOP_TOKEN_FILE_LOCATION").is_some() {
                " In a YARN container only the delegation tokens obtained at submission exist: name this NameNode at submission (--hdfs_namenodes hdfs://HOST:PORT)."
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
