//! TensorFlow's modular filesystem C API, written out by hand from
//! `tensorflow/c/experimental/filesystem/filesystem_interface.h` (TF 2.21; the
//! ABI is frozen at 0 for 2.x) and `tensorflow/c/tf_file_statistics.h`.
//!
//! The plugin does not link against libtensorflow_framework: `TF_SetStatus` is
//! looked up in the already loaded library when TensorFlow calls
//! `TF_InitPlugin`, so one build serves any TF 2.x wheel.
#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

/// Opaque `TF_Status`.
#[repr(C)]
pub struct TF_Status {
    _private: [u8; 0],
}

#[repr(C)]
pub struct TF_RandomAccessFile {
    pub plugin_file: *mut c_void,
}

#[repr(C)]
pub struct TF_WritableFile {
    pub plugin_file: *mut c_void,
}

#[repr(C)]
pub struct TF_ReadOnlyMemoryRegion {
    pub plugin_memory_region: *mut c_void,
}

#[repr(C)]
pub struct TF_Filesystem {
    pub plugin_filesystem: *mut c_void,
}

#[repr(C)]
pub struct TF_FileStatistics {
    pub length: i64,
    pub mtime_nsec: i64,
    pub is_directory: bool,
}

/// A function-table slot this plugin leaves to TensorFlow's default (null).
/// Every function pointer has the same size, so one type does for all of them.
pub type Unset = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct TF_RandomAccessFileOps {
    pub cleanup: Option<unsafe extern "C" fn(*mut TF_RandomAccessFile)>,
    pub read: Option<
        unsafe extern "C" fn(*const TF_RandomAccessFile, u64, usize, *mut c_char, *mut TF_Status) -> i64,
    >,
}

#[repr(C)]
pub struct TF_WritableFileOps {
    pub cleanup: Option<unsafe extern "C" fn(*mut TF_WritableFile)>,
    pub append: Option<unsafe extern "C" fn(*const TF_WritableFile, *const c_char, usize, *mut TF_Status)>,
    pub tell: Option<unsafe extern "C" fn(*const TF_WritableFile, *mut TF_Status) -> i64>,
    pub flush: Option<unsafe extern "C" fn(*const TF_WritableFile, *mut TF_Status)>,
    pub sync: Option<unsafe extern "C" fn(*const TF_WritableFile, *mut TF_Status)>,
    pub close: Option<unsafe extern "C" fn(*const TF_WritableFile, *mut TF_Status)>,
}

#[repr(C)]
pub struct TF_ReadOnlyMemoryRegionOps {
    pub cleanup: Option<unsafe extern "C" fn(*mut TF_ReadOnlyMemoryRegion)>,
    pub data: Option<unsafe extern "C" fn(*const TF_ReadOnlyMemoryRegion) -> *const c_void>,
    pub length: Option<unsafe extern "C" fn(*const TF_ReadOnlyMemoryRegion) -> u64>,
}

type FsPath = unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_Status);

/// `TF_FilesystemOps`, all 33 slots in the header's order.
#[repr(C)]
pub struct TF_FilesystemOps {
    pub init: Option<unsafe extern "C" fn(*mut TF_Filesystem, *mut TF_Status)>,
    pub cleanup: Option<unsafe extern "C" fn(*mut TF_Filesystem)>,
    pub new_random_access_file: Option<
        unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_RandomAccessFile, *mut TF_Status),
    >,
    pub new_writable_file:
        Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_WritableFile, *mut TF_Status)>,
    pub new_appendable_file:
        Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_WritableFile, *mut TF_Status)>,
    pub new_read_only_memory_region_from_file: Option<
        unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_ReadOnlyMemoryRegion, *mut TF_Status),
    >,
    pub create_dir: Option<FsPath>,
    pub recursively_create_dir: Option<FsPath>,
    pub delete_file: Option<FsPath>,
    pub delete_dir: Option<FsPath>,
    pub delete_recursively: Option<
        unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut u64, *mut u64, *mut TF_Status),
    >,
    pub rename_file:
        Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *const c_char, *mut TF_Status)>,
    pub copy_file: Unset,
    pub path_exists: Option<FsPath>,
    pub paths_exist: Unset,
    pub stat: Option<
        unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_FileStatistics, *mut TF_Status),
    >,
    pub is_directory: Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_Status) -> bool>,
    pub get_file_size: Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut TF_Status) -> i64>,
    pub translate_name: Option<unsafe extern "C" fn(*const TF_Filesystem, *const c_char) -> *mut c_char>,
    pub get_children: Option<
        unsafe extern "C" fn(*const TF_Filesystem, *const c_char, *mut *mut *mut c_char, *mut TF_Status) -> c_int,
    >,
    /// Left unset on purpose: TensorFlow's default glob (get_children +
    /// is_directory) then matches exactly as it does on every other filesystem.
    pub get_matching_paths: Unset,
    pub flush_caches: Unset,
    pub start_transaction: Unset,
    pub end_transaction: Unset,
    pub add_to_transaction: Unset,
    pub get_transaction_for_path: Unset,
    pub get_or_start_transaction_for_path: Unset,
    pub decode_transaction_token: Unset,
    pub get_filesystem_configuration: Unset,
    pub set_filesystem_configuration: Unset,
    pub get_filesystem_configuration_option: Unset,
    pub set_filesystem_configuration_option: Unset,
    pub get_filesystem_configuration_keys: Unset,
}

const _: () = assert!(std::mem::size_of::<TF_FilesystemOps>() == 33 * std::mem::size_of::<usize>());
const _: () = assert!(std::mem::size_of::<TF_WritableFileOps>() == 6 * std::mem::size_of::<usize>());

#[repr(C)]
pub struct TF_FilesystemPluginOps {
    pub scheme: *mut c_char,
    pub filesystem_ops_abi: c_int,
    pub filesystem_ops_api: c_int,
    pub filesystem_ops_size: usize,
    pub filesystem_ops: *mut TF_FilesystemOps,
    pub random_access_file_ops_abi: c_int,
    pub random_access_file_ops_api: c_int,
    pub random_access_file_ops_size: usize,
    pub random_access_file_ops: *mut TF_RandomAccessFileOps,
    pub writable_file_ops_abi: c_int,
    pub writable_file_ops_api: c_int,
    pub writable_file_ops_size: usize,
    pub writable_file_ops: *mut TF_WritableFileOps,
    pub read_only_memory_region_ops_abi: c_int,
    pub read_only_memory_region_ops_api: c_int,
    pub read_only_memory_region_ops_size: usize,
    pub read_only_memory_region_ops: *mut TF_ReadOnlyMemoryRegionOps,
}

#[repr(C)]
pub struct TF_FilesystemPluginInfo {
    pub num_schemes: usize,
    pub ops: *mut TF_FilesystemPluginOps,
    pub plugin_memory_allocate: Option<unsafe extern "C" fn(usize) -> *mut c_void>,
    pub plugin_memory_free: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// `TF_Code` (the gRPC status codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

type SetStatusFn = unsafe extern "C" fn(*mut TF_Status, c_int, *const c_char);

static SET_STATUS: OnceLock<Option<SetStatusFn>> = OnceLock::new();

/// Find `TF_SetStatus` in the process (TensorFlow is loaded: it is calling us).
pub fn resolve_set_status() -> bool {
    SET_STATUS
        .get_or_init(|| unsafe {
            let name = b"TF_SetStatus\0".as_ptr() as *const c_char;
            let mut sym = libc::dlsym(libc::RTLD_DEFAULT, name);
            if sym.is_null() {
                // Python loads TensorFlow's libraries with RTLD_LOCAL: ask the
                // library itself (already loaded, so RTLD_NOLOAD finds it).
                for lib in [&b"libtensorflow_framework.so.2\0"[..], &b"libtensorflow_cc.so.2\0"[..]] {
                    let handle = libc::dlopen(lib.as_ptr() as *const c_char, libc::RTLD_NOW | libc::RTLD_NOLOAD);
                    if !handle.is_null() {
                        sym = libc::dlsym(handle, name);
                        if !sym.is_null() {
                            break;
                        }
                    }
                }
            }
            if sym.is_null() {
                None
            } else {
                Some(std::mem::transmute::<*mut c_void, SetStatusFn>(sym))
            }
        })
        .is_some()
}

/// Set `status` (TensorFlow owns it; never null).
pub fn set_status(status: *mut TF_Status, code: Code, message: &str) {
    if let Some(Some(f)) = SET_STATUS.get() {
        let msg = CString::new(message.replace('\0', " ")).unwrap_or_default();
        unsafe { f(status, code as c_int, msg.as_ptr()) }
    }
}

/// Memory handed to TensorFlow is freed with `plugin_memory_free` (= free).
pub unsafe extern "C" fn plugin_allocate(size: usize) -> *mut c_void {
    libc::malloc(size)
}

pub unsafe extern "C" fn plugin_free(ptr: *mut c_void) {
    libc::free(ptr)
}

/// A malloc'ed, NUL-terminated copy of `s`.
pub fn c_string(s: &str) -> *mut c_char {
    let bytes = s.as_bytes();
    unsafe {
        let p = libc::malloc(bytes.len() + 1) as *mut u8;
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *p.add(bytes.len()) = 0;
        p as *mut c_char
    }
}

/// A malloc'ed copy of `value` (TensorFlow copies and frees the ops tables).
pub fn boxed_c<T>(value: T) -> *mut T {
    unsafe {
        let p = libc::malloc(std::mem::size_of::<T>()) as *mut T;
        p.write(value);
        p
    }
}
