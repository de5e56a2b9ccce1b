//! The C entry points TensorFlow calls, each a thin shell: parse the path,
//! call the client, set the status. A panic becomes an INTERNAL status
//! instead of unwinding into TensorFlow.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use hdfs_native::client::FileStatus;

use crate::client::{block_on, client_for, on_name_service};
use crate::errors::{TfError, TfResult};
use crate::ffi::*;
use crate::lost_call::made_good;
use crate::reader::Reader;
use crate::uri::{translate, Uri};
use crate::writer::Writer;

fn run<T>(status: *mut TF_Status, f: impl FnOnce() -> TfResult<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => {
            set_status(status, Code::Ok, "");
            Some(v)
        }
        Ok(Err(e)) => {
            set_status(status, e.code, &e.message);
            None
        }
        Err(_) => {
            set_status(status, Code::Internal, "tfyarn HDFS plugin: internal error (a panic; details on stderr)");
            None
        }
    }
}

unsafe fn uri_arg(p: *const c_char) -> TfResult<Uri> {
    let s = CStr::from_ptr(p).to_string_lossy();
    Uri::parse(&s).ok_or_else(|| TfError::new(Code::FailedPrecondition, format!("not an hdfs:// or viewfs:// URI: {s}")))
}

fn stat_of(uri: &Uri) -> TfResult<FileStatus> {
    let client = client_for(uri)?;
    block_on("stat", uri, client.get_file_info(&uri.path))
}

/// Whether `uri` is there now (a NotFound is `false`, other errors are errors).
fn exists(uri: &Uri) -> TfResult<bool> {
    match stat_of(uri) {
        Ok(_) => Ok(true),
        Err(e) if e.code == Code::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// mkdirs, sent again after a failover lost it (a directory that exists is a success).
fn mkdirs(uri: &Uri, parents: bool) -> TfResult<()> {
    let client = client_for(uri)?;
    made_good(on_name_service(uri), || block_on("mkdir", uri, client.mkdirs(&uri.path, 0o755, parents)), |_| Ok(None))
}

/// delete (of a path just seen); a failover that lost the call is made good
/// by looking: gone means deleted. `false`: nothing was there to delete.
fn delete(op: &str, uri: &Uri, recursive: bool) -> TfResult<bool> {
    let client = client_for(uri)?;
    made_good(
        on_name_service(uri),
        || block_on(op, uri, client.delete(&uri.path, recursive)),
        |_| Ok(if exists(uri)? { None } else { Some(true) }),
    )
}

fn not_found(op: &str, uri: &Uri) -> TfError {
    TfError::new(Code::NotFound, format!("HDFS {op} of {uri} failed: no such file or directory."))
}

// ---- filesystem ----

unsafe extern "C" fn init(fs: *mut TF_Filesystem, status: *mut TF_Status) {
    (*fs).plugin_filesystem = std::ptr::null_mut();
    set_status(status, Code::Ok, "");
}

unsafe extern "C" fn cleanup(_fs: *mut TF_Filesystem) {}

unsafe extern "C" fn new_random_access_file(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    file: *mut TF_RandomAccessFile,
    status: *mut TF_Status,
) {
    if let Some(reader) = run(status, || {
        let uri = uri_arg(path)?;
        Reader::open(&*client_for(&uri)?, &uri)
    }) {
        (*file).plugin_file = Box::into_raw(Box::new(reader)) as *mut c_void;
    }
}

unsafe extern "C" fn new_writable_file(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    file: *mut TF_WritableFile,
    status: *mut TF_Status,
) {
    if let Some(w) = run(status, || {
        let uri = uri_arg(path)?;
        Writer::create(&client_for(&uri)?, &uri)
    }) {
        (*file).plugin_file = Box::into_raw(Box::new(w)) as *mut c_void;
    }
}

unsafe extern "C" fn new_appendable_file(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    file: *mut TF_WritableFile,
    status: *mut TF_Status,
) {
    if let Some(w) = run(status, || {
        let uri = uri_arg(path)?;
        Writer::append(&client_for(&uri)?, &uri)
    }) {
        (*file).plugin_file = Box::into_raw(Box::new(w)) as *mut c_void;
    }
}

unsafe extern "C" fn new_read_only_memory_region_from_file(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    region: *mut TF_ReadOnlyMemoryRegion,
    status: *mut TF_Status,
) {
    if let Some(data) = run(status, || {
        let uri = uri_arg(path)?;
        let reader = Reader::open(&*client_for(&uri)?, &uri)?;
        if reader.len() == 0 {
            return Err(TfError::new(Code::InvalidArgument, format!("{uri} is empty: nothing to map")));
        }
        let mut data = vec![0u8; reader.len() as usize];
        reader.read(0, &mut data)?;
        Ok(data)
    }) {
        (*region).plugin_memory_region = Box::into_raw(Box::new(data)) as *mut c_void;
    }
}

unsafe extern "C" fn create_dir(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) {
    run(status, || {
        let uri = uri_arg(path)?;
        if exists(&uri)? {
            return Err(TfError::new(Code::AlreadyExists, format!("cannot create directory {uri}: it exists")));
        }
        mkdirs(&uri, false)
    });
}

unsafe extern "C" fn recursively_create_dir(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) {
    run(status, || {
        mkdirs(&uri_arg(path)?, true)
    });
}

unsafe extern "C" fn delete_file(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) {
    run(status, || {
        let uri = uri_arg(path)?;
        if stat_of(&uri)?.isdir {
            return Err(TfError::new(Code::FailedPrecondition, format!("cannot delete {uri} as a file: it is a directory")));
        }
        if delete("delete", &uri, false)? {
            Ok(())
        } else {
            Err(not_found("delete", &uri))
        }
    });
}

unsafe extern "C" fn delete_dir(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) {
    run(status, || {
        let uri = uri_arg(path)?;
        if !stat_of(&uri)?.isdir {
            return Err(TfError::new(Code::FailedPrecondition, format!("cannot delete {uri} as a directory: it is a file")));
        }
        if delete("rmdir", &uri, false)? {
            Ok(())
        } else {
            Err(not_found("rmdir", &uri))
        }
    });
}

unsafe extern "C" fn delete_recursively(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    undeleted_files: *mut u64,
    undeleted_dirs: *mut u64,
    status: *mut TF_Status,
) {
    *undeleted_files = 0;
    *undeleted_dirs = 0;
    let done = run(status, || {
        let uri = uri_arg(path)?;
        if !stat_of(&uri)?.isdir {
            // As on local disk: a recursive delete is for directories.
            return Err(TfError::new(Code::FailedPrecondition, format!("cannot delete {uri} recursively: not a directory")));
        }
        if delete("delete", &uri, true)? {
            Ok(())
        } else {
            Err(not_found("delete", &uri))
        }
    });
    if done.is_none() {
        *undeleted_dirs = 1;
    }
}

unsafe extern "C" fn rename_file(_fs: *const TF_Filesystem, src: *const c_char, dst: *const c_char, status: *mut TF_Status) {
    run(status, || {
        let (s, d) = (uri_arg(src)?, uri_arg(dst)?);
        if s.prefix() != d.prefix() {
            return Err(TfError::new(
                Code::Unimplemented,
                format!("cannot rename {s} to {d}: HDFS renames only within one filesystem; copy instead"),
            ));
        }
        let client = client_for(&s)?;
        // Replaces an existing dst atomically (HDFS rename2 with OVERWRITE).
        // After a failover lost it: the source gone and the destination there
        // means the lost call renamed it; the source there, send it again.
        made_good(
            on_name_service(&s),
            || block_on("rename", &s, client.rename(&s.path, &d.path, true)),
            |lost| match (exists(&s)?, exists(&d)?) {
                (true, _) => Ok(None),
                (false, true) => Ok(Some(())),
                (false, false) => Err(lost),
            },
        )
    });
}

unsafe extern "C" fn path_exists(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) {
    run(status, || stat_of(&uri_arg(path)?).map(|_| ()));
}

unsafe extern "C" fn stat(_fs: *const TF_Filesystem, path: *const c_char, stats: *mut TF_FileStatistics, status: *mut TF_Status) {
    if let Some(st) = run(status, || stat_of(&uri_arg(path)?)) {
        (*stats).length = st.length as i64;
        (*stats).mtime_nsec = (st.modification_time as i64).saturating_mul(1_000_000);
        (*stats).is_directory = st.isdir;
    }
}

unsafe extern "C" fn is_directory(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) -> bool {
    run(status, || stat_of(&uri_arg(path)?).map(|s| s.isdir)).unwrap_or(false)
}

unsafe extern "C" fn get_file_size(_fs: *const TF_Filesystem, path: *const c_char, status: *mut TF_Status) -> i64 {
    run(status, || {
        let uri = uri_arg(path)?;
        let st = stat_of(&uri)?;
        if st.isdir {
            return Err(TfError::new(Code::FailedPrecondition, format!("{uri} is a directory: it has no size")));
        }
        Ok(st.length as i64)
    })
    .unwrap_or(-1)
}

unsafe extern "C" fn translate_name(_fs: *const TF_Filesystem, uri: *const c_char) -> *mut c_char {
    c_string(&translate(&CStr::from_ptr(uri).to_string_lossy()))
}

unsafe extern "C" fn get_children(
    _fs: *const TF_Filesystem,
    path: *const c_char,
    entries: *mut *mut *mut c_char,
    status: *mut TF_Status,
) -> c_int {
    let names = run(status, || {
        let uri = uri_arg(path)?;
        let client = client_for(&uri)?;
        let listing = block_on("list", &uri, client.list_status(&uri.path, false))?;
        let base = uri.path.trim_end_matches('/');
        if listing.len() == 1 && listing[0].path.trim_end_matches('/') == base && !listing[0].isdir {
            return Err(TfError::new(Code::FailedPrecondition, format!("cannot list {uri}: it is a file")));
        }
        Ok(listing.into_iter().map(|s| s.path.rsplit('/').next().unwrap_or("").to_string()).collect::<Vec<_>>())
    });
    match names {
        Some(names) => {
            let array = libc::malloc(std::mem::size_of::<*mut c_char>() * names.len().max(1)) as *mut *mut c_char;
            for (i, name) in names.iter().enumerate() {
                *array.add(i) = c_string(name);
            }
            *entries = array;
            names.len() as c_int
        }
        None => -1,
    }
}

pub fn filesystem_ops() -> TF_FilesystemOps {
    TF_FilesystemOps {
        init: Some(init),
        cleanup: Some(cleanup),
        new_random_access_file: Some(new_random_access_file),
        new_writable_file: Some(new_writable_file),
        new_appendable_file: Some(new_appendable_file),
        new_read_only_memory_region_from_file: Some(new_read_only_memory_region_from_file),
        create_dir: Some(create_dir),
        recursively_create_dir: Some(recursively_create_dir),
        delete_file: Some(delete_file),
        delete_dir: Some(delete_dir),
        delete_recursively: Some(delete_recursively),
        rename_file: Some(rename_file),
        copy_file: None,
        path_exists: Some(path_exists),
        paths_exist: None,
        stat: Some(stat),
        is_directory: Some(is_directory),
        get_file_size: Some(get_file_size),
        translate_name: Some(translate_name),
        get_children: Some(get_children),
        get_matching_paths: None,
        flush_caches: None,
        start_transaction: None,
        end_transaction: None,
        add_to_transaction: None,
        get_transaction_for_path: None,
        get_or_start_transaction_for_path: None,
        decode_transaction_token: None,
        get_filesystem_configuration: None,
        set_filesystem_configuration: None,
        get_filesystem_configuration_option: None,
        set_filesystem_configuration_option: None,
        get_filesystem_configuration_keys: None,
    }
}

// ---- random access files ----

unsafe extern "C" fn raf_cleanup(file: *mut TF_RandomAccessFile) {
    if !(*file).plugin_file.is_null() {
        drop(Box::from_raw((*file).plugin_file as *mut Reader));
        (*file).plugin_file = std::ptr::null_mut();
    }
}

unsafe extern "C" fn raf_read(
    file: *const TF_RandomAccessFile,
    offset: u64,
    n: usize,
    buffer: *mut c_char,
    status: *mut TF_Status,
) -> i64 {
    let reader = &*((*file).plugin_file as *const Reader);
    let buf = std::slice::from_raw_parts_mut(buffer as *mut u8, n);
    match run(status, || reader.read(offset, buf)) {
        Some(got) => {
            if got < n {
                set_status(status, Code::OutOfRange, "read fewer bytes than requested (end of file)");
            }
            got as i64
        }
        None => -1,
    }
}

pub fn random_access_file_ops() -> TF_RandomAccessFileOps {
    TF_RandomAccessFileOps { cleanup: Some(raf_cleanup), read: Some(raf_read) }
}

// ---- writable files ----

unsafe fn writer<'a>(file: *const TF_WritableFile) -> &'a Writer {
    &*((*file).plugin_file as *const Writer)
}

unsafe extern "C" fn wf_cleanup(file: *mut TF_WritableFile) {
    if !(*file).plugin_file.is_null() {
        drop(Box::from_raw((*file).plugin_file as *mut Writer));
        (*file).plugin_file = std::ptr::null_mut();
    }
}

unsafe extern "C" fn wf_append(file: *const TF_WritableFile, buffer: *const c_char, n: usize, status: *mut TF_Status) {
    let data = std::slice::from_raw_parts(buffer as *const u8, n);
    run(status, || writer(file).write(data));
}

unsafe extern "C" fn wf_tell(file: *const TF_WritableFile, status: *mut TF_Status) -> i64 {
    run(status, || Ok(writer(file).tell() as i64)).unwrap_or(-1)
}

unsafe extern "C" fn wf_flush(file: *const TF_WritableFile, status: *mut TF_Status) {
    run(status, || writer(file).flush());
}

unsafe extern "C" fn wf_sync(file: *const TF_WritableFile, status: *mut TF_Status) {
    run(status, || writer(file).sync());
}

unsafe extern "C" fn wf_close(file: *const TF_WritableFile, status: *mut TF_Status) {
    run(status, || writer(file).close());
}

pub fn writable_file_ops() -> TF_WritableFileOps {
    TF_WritableFileOps {
        cleanup: Some(wf_cleanup),
        append: Some(wf_append),
        tell: Some(wf_tell),
        flush: Some(wf_flush),
        sync: Some(wf_sync),
        close: Some(wf_close),
    }
}

// ---- read-only memory regions (the whole file, read once) ----

unsafe extern "C" fn region_cleanup(region: *mut TF_ReadOnlyMemoryRegion) {
    if !(*region).plugin_memory_region.is_null() {
        drop(Box::from_raw((*region).plugin_memory_region as *mut Vec<u8>));
        (*region).plugin_memory_region = std::ptr::null_mut();
    }
}

unsafe extern "C" fn region_data(region: *const TF_ReadOnlyMemoryRegion) -> *const c_void {
    (*((*region).plugin_memory_region as *const Vec<u8>)).as_ptr() as *const c_void
}

unsafe extern "C" fn region_length(region: *const TF_ReadOnlyMemoryRegion) -> u64 {
    (*((*region).plugin_memory_region as *const Vec<u8>)).len() as u64
}

pub fn memory_region_ops() -> TF_ReadOnlyMemoryRegionOps {
    TF_ReadOnlyMemoryRegionOps { cleanup: Some(region_cleanup), data: Some(region_data), length: Some(region_length) }
}
