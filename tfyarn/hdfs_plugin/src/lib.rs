//! tfyarn's TensorFlow filesystem plugin for `hdfs://` and `viewfs://`, on the
//! hdfs-native client (no JVM, no libhdfs). TensorFlow loads it with
//! `tf.experimental.register_filesystem_plugin(path)` and calls `TF_InitPlugin`.

mod client;
mod errors;
mod failover;
mod ffi;
mod lost_call;
mod ops;
mod reader;
mod recycle;
mod site;
mod uri;
mod writer;

use ffi::*;

#[global_allocator]
static ALLOCATOR: recycle::Recycling = recycle::Recycling::new();

const SCHEMES: [&str; 2] = ["hdfs", "viewfs"];

/// # Safety
/// Called by TensorFlow with a valid, zeroed `TF_FilesystemPluginInfo`.
#[no_mangle]
pub unsafe extern "C" fn TF_InitPlugin(info: *mut TF_FilesystemPluginInfo) {
    if !resolve_set_status() {
        eprintln!("tfyarn hdfs plugin: TF_SetStatus not found in the process; is TensorFlow loaded?");
        return;
    }
    let info = &mut *info;
    info.plugin_memory_allocate = Some(plugin_allocate);
    info.plugin_memory_free = Some(plugin_free);
    info.num_schemes = SCHEMES.len();
    let ops = libc::calloc(SCHEMES.len(), std::mem::size_of::<TF_FilesystemPluginOps>()) as *mut TF_FilesystemPluginOps;
    for (i, scheme) in SCHEMES.iter().enumerate() {
        ops.add(i).write(plugin_ops(scheme));
    }
    info.ops = ops;
}

fn plugin_ops(scheme: &str) -> TF_FilesystemPluginOps {
    TF_FilesystemPluginOps {
        scheme: c_string(scheme),
        filesystem_ops_abi: 0,
        filesystem_ops_api: 0,
        filesystem_ops_size: std::mem::size_of::<TF_FilesystemOps>(),
        filesystem_ops: boxed_c(ops::filesystem_ops()),
        random_access_file_ops_abi: 0,
        random_access_file_ops_api: 0,
        random_access_file_ops_size: std::mem::size_of::<TF_RandomAccessFileOps>(),
        random_access_file_ops: boxed_c(ops::random_access_file_ops()),
        writable_file_ops_abi: 0,
        writable_file_ops_api: 0,
        writable_file_ops_size: std::mem::size_of::<TF_WritableFileOps>(),
        writable_file_ops: boxed_c(ops::writable_file_ops()),
        read_only_memory_region_ops_abi: 0,
        read_only_memory_region_ops_api: 0,
        read_only_memory_region_ops_size: std::mem::size_of::<TF_ReadOnlyMemoryRegionOps>(),
        read_only_memory_region_ops: boxed_c(ops::memory_region_ops()),
    }
}
