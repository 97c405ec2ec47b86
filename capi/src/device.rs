//! The device list: `ibv_get_device_list`, `ibv_free_device_list`,
//! `ibv_get_device_name`/`_guid`/`_index`, and the sysfs helpers
//! (`ibv_get_sysfs_path`, `ibv_read_sysfs_file`).
//!
//! Each device found is a process-lifetime [`Dev`] (never freed, like
//! rdma-core's, which keeps a device as long as a context may name it): a
//! second `ibv_get_device_list` returns the same pointers for the same
//! devices. The C part (`verbs_device`, 712 bytes, `ops` NULL) comes first,
//! so an `ibv_device *` is a `*const Dev`.

use core::ffi::{c_char, c_int};
use std::sync::Mutex;

use crate::abi::{ibv_device, verbs_device};
use crate::errno::{self, set_errno, EINVAL, ENOMEM};
use crate::export::symver;

/// One device: the C `verbs_device` first, then what rverbs knows.
#[repr(C)]
pub(crate) struct Dev {
    pub vdev: verbs_device,
    pub dev: rverbs::Device,
    /// The kernel's device index (RDMA netlink), -1 when unknown.
    pub index: i32,
}

/// A registered device (leaked, so the pointer stays valid forever).
struct DevPtr(*const Dev);
// SAFETY: a `Dev` is never written after registration (the C fields are
// plain data readers may share) and is never freed, so its address may be
// held by any thread.
unsafe impl Send for DevPtr {}

static REGISTRY: Mutex<Vec<DevPtr>> = Mutex::new(Vec::new());

/// Copies `s` into a C `char` array, truncated, NUL-terminated.
fn c_str_into(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

/// `enum ibv_node_type` of a node type (`IBV_NODE_UNKNOWN` = -1).
fn node_type(t: rverbs::NodeType) -> u32 {
    use rverbs::NodeType::*;
    match t {
        Ca => 1,
        Switch => 2,
        Router => 3,
        Rnic => 4,
        Usnic => 5,
        UsnicUdp => 6,
        Unspecified => 7,
        _ => u32::MAX,
    }
}

/// `enum ibv_transport_type` (`IBV_TRANSPORT_UNKNOWN` = -1).
fn transport_type(t: rverbs::Transport) -> u32 {
    use rverbs::Transport::*;
    match t {
        Ib => 0,
        Iwarp => 1,
        Usnic => 2,
        UsnicUdp => 3,
        Unspecified => 4,
        _ => u32::MAX,
    }
}

fn new_dev(dev: rverbs::Device, index: i32) -> Box<Dev> {
    // SAFETY: `verbs_device` is plain C data (integers, arrays, raw
    // pointers): all-zero is a valid value of every field.
    let mut vdev: verbs_device = unsafe { core::mem::zeroed() };
    let d = &mut vdev.device;
    d.node_type = node_type(dev.node_type());
    d.transport_type = transport_type(dev.transport());
    c_str_into(&mut d.name, dev.name());
    c_str_into(&mut d.dev_name, dev.uverbs_name());
    c_str_into(&mut d.dev_path, &dev.verbs_sysfs_path().to_string_lossy());
    c_str_into(&mut d.ibdev_path, &dev.sysfs_path().to_string_lossy());
    vdev.refcount = 1;
    Box::new(Dev { vdev, dev, index })
}

/// Device indexes by name, from RDMA netlink (empty when it is unavailable).
fn netlink_indexes() -> Vec<(String, u32)> {
    let Ok(mut nl) = rverbs_providers::sys::netlink::RdmaNetlink::open() else {
        return Vec::new();
    };
    nl.devices().map(|v| v.into_iter().map(|d| (d.name, d.index)).collect()).unwrap_or_default()
}

/// The registered devices matching the system's current ones, registering new ones.
fn current_devices() -> rverbs::Result<Vec<*const Dev>> {
    let found = rverbs::devices()?;
    let indexes = netlink_indexes();
    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::with_capacity(found.len());
    for dev in found {
        let same = |p: *const Dev| {
            // SAFETY: registered devices are never freed (see `DevPtr`).
            let d = unsafe { &(*p).dev };
            d.name() == dev.name() && d.uverbs_name() == dev.uverbs_name()
        };
        let known = reg.iter().map(|p| p.0).find(|&p| same(p));
        let p = match known {
            Some(p) => p,
            None => {
                let index = indexes.iter().find(|(n, _)| n == dev.name()).map_or(-1, |&(_, i)| i as i32);
                let p = Box::into_raw(new_dev(dev, index)).cast_const();
                reg.push(DevPtr(p));
                p
            }
        };
        out.push(p);
    }
    Ok(out)
}

/// `struct ibv_device **ibv_get_device_list(int *num_devices)`: a
/// NULL-terminated array the caller frees with `ibv_free_device_list`;
/// NULL with errno on failure (no uverbs at all is a list of 0, as in
/// rdma-core when sysfs has no devices).
unsafe extern "C" fn get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let devs = match current_devices() {
        Ok(d) => d,
        Err(e) if e.errno() == Some(nix::errno::Errno::ENOENT) => Vec::new(),
        Err(e) => {
            set_errno(errno::of(&e));
            return core::ptr::null_mut();
        }
    };
    if !num_devices.is_null() {
        // SAFETY: a non-NULL `num_devices` points at an int (the C contract).
        unsafe { *num_devices = devs.len() as c_int };
    }
    let mut list: Vec<*mut ibv_device> = devs.iter().map(|&d| d.cast_mut().cast::<ibv_device>()).collect();
    list.push(core::ptr::null_mut());
    if list.capacity() == 0 {
        set_errno(ENOMEM);
        return core::ptr::null_mut();
    }
    Box::into_raw(list.into_boxed_slice()).cast()
}
symver!(get_device_list, ibv_get_device_list, "IBVERBS_1.1");

/// `void ibv_free_device_list(struct ibv_device **list)`.
unsafe extern "C" fn free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: `list` came from `get_device_list`: a NULL-terminated array.
    while !unsafe { *list.add(n) }.is_null() {
        n += 1;
    }
    // SAFETY: it was a boxed slice of `n + 1` entries (the devices and the
    // NULL), leaked by `get_device_list`; the caller hands ownership back.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(list, n + 1)) });
}
symver!(free_device_list, ibv_free_device_list, "IBVERBS_1.1");

/// The `Dev` behind an `ibv_device *` from our list.
///
/// # Safety
/// `d` is NULL or a pointer `ibv_get_device_list` returned.
pub(crate) unsafe fn dev<'a>(d: *const ibv_device) -> Option<&'a Dev> {
    // SAFETY: by the contract, a non-NULL `d` is a registered, never-freed `Dev`
    // (its first field is the `ibv_device`).
    unsafe { d.cast::<Dev>().as_ref() }
}

/// `const char *ibv_get_device_name(struct ibv_device *device)`.
unsafe extern "C" fn get_device_name(d: *mut ibv_device) -> *const c_char {
    // SAFETY: the C contract: `d` is a device of our list.
    match unsafe { dev(d) } {
        Some(d) => d.vdev.device.name.as_ptr(),
        None => {
            set_errno(EINVAL);
            core::ptr::null()
        }
    }
}
symver!(get_device_name, ibv_get_device_name, "IBVERBS_1.1");

/// `__be64 ibv_get_device_guid(struct ibv_device *device)`: the node GUID
/// in network byte order.
unsafe extern "C" fn get_device_guid(d: *mut ibv_device) -> u64 {
    // SAFETY: the C contract: `d` is a device of our list.
    unsafe { dev(d) }.map_or(0, |d| u64::from_ne_bytes(d.dev.node_guid().0))
}
symver!(get_device_guid, ibv_get_device_guid, "IBVERBS_1.1");

/// `int ibv_get_device_index(struct ibv_device *device)`: the kernel's
/// device index, -1 when RDMA netlink could not say.
unsafe extern "C" fn get_device_index(d: *mut ibv_device) -> c_int {
    // SAFETY: the C contract: `d` is a device of our list.
    unsafe { dev(d) }.map_or(-1, |d| d.index)
}
symver!(get_device_index, ibv_get_device_index, "IBVERBS_1.9");

/// `int ibv_get_sysfs_path(char *buf, size_t size)`: "/sys".
unsafe extern "C" fn get_sysfs_path(buf: *mut c_char, size: usize) -> c_int {
    const SYS: &[u8] = b"/sys\0";
    if buf.is_null() || size == 0 {
        return -1;
    }
    let n = SYS.len().min(size);
    // SAFETY: the caller's `buf` holds `size` bytes; we write `n <= size`.
    unsafe {
        core::ptr::copy_nonoverlapping(SYS.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n - 1) = 0;
    }
    0
}
symver!(get_sysfs_path, ibv_get_sysfs_path, "IBVERBS_1.0");

/// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
/// size_t size)`: reads `dir/file` into `buf`, strips one trailing newline,
/// NUL-terminates; returns the length read, -1 on error (errno set).
unsafe extern "C" fn read_sysfs_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: usize) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        set_errno(EINVAL);
        return -1;
    }
    // SAFETY: `dir` and `file` are NUL-terminated strings (the C contract).
    let (dir, file) = unsafe { (core::ffi::CStr::from_ptr(dir), core::ffi::CStr::from_ptr(file)) };
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(dir.to_bytes()))
        .join(std::ffi::OsStr::from_bytes(file.to_bytes()));
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(nix::libc::EIO));
            return -1;
        }
    };
    // As rdma-core: one read() of at most `size` bytes; a trailing newline
    // becomes the NUL, else a NUL follows, else (no room) -1.
    let mut len = data.len().min(size);
    // SAFETY: `buf` holds `size` bytes (the C contract).
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    out[..len].copy_from_slice(&data[..len]);
    if len > 0 {
        if out[len - 1] == b'\n' {
            len -= 1;
            out[len] = 0;
        } else if len < size {
            out[len] = 0;
        } else {
            return -1;
        }
    }
    len as c_int
}
symver!(read_sysfs_file, ibv_read_sysfs_file, "IBVERBS_1.0");
