//! `LD_PRELOAD` library that serves the fake ConnectX-5's device node
//! (`/dev/infiniband/uverbs9`, see the `rverbs-mlx5-fake` crate) to any
//! process: rdma-core's libibverbs + libmlx5, `ibv_devinfo`, rverbs.
//!
//! It interposes libc's `open*`, `close`, `write`, `ioctl`, `mmap*`, and the
//! `stat` family: calls on the node's path or on an fd it handed out go to
//! the fake kernel; everything else goes on to libc (`dlsym(RTLD_NEXT)`).
//! The fd a process gets is a real eventfd, so its number is its own. For
//! the test program, [`rverbs_fake_mlx5_take_log`] hands out the fake
//! kernel's record as JSON.
//!
//! Test support only: nothing published links it.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use nix::libc;
use rverbs_mlx5_fake::kernel;

/// Fds below this bound can be fake; the flag says which are.
const MAX_FD: usize = 4096;
static FAKE: [AtomicBool; MAX_FD] = [const { AtomicBool::new(false) }; MAX_FD];

fn is_fake(fd: c_int) -> bool {
    usize::try_from(fd).is_ok_and(|i| i < MAX_FD && FAKE[i].load(Ordering::Acquire))
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// libc's own definition of `name`, the next one after ours.
fn next(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT with a NUL-terminated name; dlsym has no other
    // requirement and returns null when the symbol is missing.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    assert!(!p.is_null(), "fake-mlx5 preload: libc has no {name:?}");
    p
}

/// Declares `$f`: libc's `$name`, looked up once.
macro_rules! real {
    ($f:ident, $name:literal, fn($($a:ty),*) -> $r:ty) => {
        fn $f() -> unsafe extern "C" fn($($a),*) -> $r {
            static P: OnceLock<usize> = OnceLock::new();
            let p = *P.get_or_init(|| next($name) as usize);
            // SAFETY: `p` is libc's definition of the symbol of that name,
            // whose C prototype is the one declared here.
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($a),*) -> $r>(p) }
        }
    };
}

real!(real_open, c"open", fn(*const c_char, c_int, c_uint) -> c_int);
real!(real_openat, c"openat", fn(c_int, *const c_char, c_int, c_uint) -> c_int);
real!(real_close, c"close", fn(c_int) -> c_int);
real!(real_write, c"write", fn(c_int, *const c_void, usize) -> isize);
real!(real_ioctl, c"ioctl", fn(c_int, c_ulong, *mut c_void) -> c_int);
real!(real_mmap, c"mmap", fn(*mut c_void, usize, c_int, c_int, c_int, libc::off_t) -> *mut c_void);
real!(real_fstat, c"fstat", fn(c_int, *mut libc::stat) -> c_int);
real!(real_stat, c"stat", fn(*const c_char, *mut libc::stat) -> c_int);
real!(real_fstatat, c"fstatat", fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int);
real!(real_statx, c"statx", fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int);

/// Whether `path` names the fake node.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn is_node(path: *const c_char) -> bool {
    // SAFETY: the caller's contract.
    !path.is_null() && unsafe { CStr::from_ptr(path) }.to_bytes() == rverbs_mlx5_fake::DEV_PATH.as_bytes()
}

/// Whether an `*at` call names the fake node: by its path, or an empty
/// path with `AT_EMPTY_PATH` on one of its fds.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn names_node(dirfd: c_int, path: *const c_char, flags: c_int) -> bool {
    // SAFETY: the caller's contract.
    let empty = !path.is_null() && unsafe { *path } == 0 && flags & libc::AT_EMPTY_PATH != 0;
    // SAFETY: as above.
    let by_path = unsafe { is_node(path) };
    by_path || (empty && is_fake(dirfd))
}

/// Opens the fake node: a new context on a new eventfd.
fn open_node() -> c_int {
    // SAFETY: no pointers; a non-negative result is a new fd.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return -1;
    }
    if fd as usize >= MAX_FD {
        // SAFETY: `fd` is ours, just made.
        unsafe { real_close()(fd) };
        set_errno(libc::EMFILE);
        return -1;
    }
    kernel::lock().open(fd);
    FAKE[fd as usize].store(true, Ordering::Release);
    fd
}

fn node_stat(st: &mut libc::stat) {
    // SAFETY: `libc::stat` is plain data; all zeroes is a valid value.
    *st = unsafe { std::mem::zeroed() };
    st.st_mode = libc::S_IFCHR | 0o666;
    st.st_rdev = libc::makedev(rverbs_mlx5_fake::DEV_MAJOR, rverbs_mlx5_fake::DEV_MINOR);
    st.st_nlink = 1;
    st.st_blksize = 4096;
    st.st_ino = 0x5eed;
}

fn node_statx(st: &mut libc::statx) {
    // SAFETY: `libc::statx` is plain data; all zeroes is a valid value.
    *st = unsafe { std::mem::zeroed() };
    st.stx_mask = libc::STATX_BASIC_STATS;
    st.stx_mode = (libc::S_IFCHR | 0o666) as u16;
    st.stx_rdev_major = rverbs_mlx5_fake::DEV_MAJOR;
    st.stx_rdev_minor = rverbs_mlx5_fake::DEV_MINOR;
    st.stx_nlink = 1;
    st.stx_blksize = 4096;
    st.stx_ino = 0x5eed;
}

#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: `path` is the caller's C string (open's contract).
    if unsafe { is_node(path) } {
        return open_node();
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_open()(path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded unchanged.
    unsafe { open(path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded (the fortified open has no mode).
    unsafe { open(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { open(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: `path` is the caller's C string; the node's path is absolute,
    // so `dirfd` does not matter for it.
    if unsafe { is_node(path) } {
        return open_node();
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_openat()(dirfd, path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded unchanged.
    unsafe { openat(dirfd, path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { openat(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { openat(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if is_fake(fd) {
        FAKE[fd as usize].store(false, Ordering::Release);
        let mut k = kernel::lock();
        k.close(fd);
        if let Some(path) = std::env::var_os(rverbs_mlx5_fake::ENV_RECORD) {
            let log = k.take_log();
            drop(k);
            if let Ok(json) = serde_json_line(&log) {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
                    let _ = f.write_all(json.as_bytes());
                }
            }
        }
    }
    // SAFETY: forwarded unchanged (a fake fd is a real eventfd to close).
    unsafe { real_close()(fd) }
}

fn serde_json_line(s: &rverbs_mlx5_fake::record::Snapshot) -> Result<String, String> {
    rverbs_mlx5_fake::record::to_json(s).map(|mut j| {
        j.push('\n');
        j
    })
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    if is_fake(fd) {
        if buf.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        // SAFETY: write's contract: `buf` holds `count` readable bytes.
        let cmd = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
        // SAFETY: the command's response pointer is the caller's, valid for
        // the lengths its header gives (the uverbs ABI's contract).
        return match unsafe { kernel::lock().write(fd, cmd) } {
            Ok(n) => n as isize,
            Err(e) => {
                set_errno(e as c_int);
                -1
            }
        };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_write()(fd, buf, count) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if is_fake(fd) {
        // SAFETY: the uverbs ABI's contract for RDMA_VERBS_IOCTL's argument.
        return match unsafe { kernel::lock().ioctl_call(fd, request, arg.cast()) } {
            Ok(()) => 0,
            Err(e) => {
                set_errno(e as c_int);
                -1
            }
        };
    }
    // SAFETY: forwarded unchanged (every ioctl request takes at most one
    // pointer-sized argument).
    unsafe { real_ioctl()(fd, request, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    if is_fake(fd) {
        // SAFETY: no pointers.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut k = kernel::lock();
        let (command, index) = match k.mmap_check(fd, offset as u64, len, page) {
            Ok(ci) => ci,
            Err(e) => {
                let pgoff = offset as u64 / page as u64;
                k.mmap_done(fd, (pgoff >> 8) as u32 & 0xff, pgoff as u32 & 0xff, len, 0, e as i32);
                set_errno(e as c_int);
                return libc::MAP_FAILED;
            }
        };
        // A UAR page: anonymous shared memory the test reads the doorbells
        // and BlueFlame copies from.
        // SAFETY: an anonymous mapping at a place of the kernel's choosing.
        let p = unsafe {
            real_mmap()(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let errno = if p == libc::MAP_FAILED { libc::ENOMEM } else { 0 };
        k.mmap_done(fd, command, index, len, p as u64, errno);
        if errno != 0 {
            set_errno(errno);
        }
        return p;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_mmap()(addr, len, prot, flags, fd, offset) }
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    // SAFETY: forwarded unchanged.
    unsafe { mmap(addr, len, prot, flags, fd, offset) }
}

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    if is_fake(fd) && !st.is_null() {
        // SAFETY: fstat's contract: `st` is writable.
        node_stat(unsafe { &mut *st });
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_fstat()(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded (the same struct on 64-bit Linux).
    unsafe { fstat(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded (the versioned entry of older binaries).
    unsafe { fstat(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded.
    unsafe { fstat(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: `path` is the caller's C string.
    if unsafe { is_node(path) } && !st.is_null() {
        // SAFETY: stat's contract: `st` is writable.
        node_stat(unsafe { &mut *st });
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_stat()(path, st) }
}

#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded.
    unsafe { stat(path, st) }
}

#[no_mangle]
pub unsafe extern "C" fn __xstat(_ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded.
    unsafe { stat(path, st) }
}

#[no_mangle]
pub unsafe extern "C" fn __xstat64(_ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarded.
    unsafe { stat(path, st) }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: `path` is the caller's C string.
    if unsafe { names_node(dirfd, path, flags) } && !st.is_null() {
        // SAFETY: fstatat's contract: `st` is writable.
        node_stat(unsafe { &mut *st });
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_fstatat()(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { fstatat(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    st: *mut libc::statx,
) -> c_int {
    // SAFETY: `path` is the caller's C string.
    if unsafe { names_node(dirfd, path, flags) } && !st.is_null() {
        // SAFETY: statx's contract: `st` is writable.
        node_statx(unsafe { &mut *st });
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real_statx()(dirfd, path, flags, mask, st) }
}

/// The fake kernel's record since the last call, as a JSON string the
/// caller frees with [`rverbs_fake_mlx5_free`]; null if it cannot be made.
#[no_mangle]
pub extern "C" fn rverbs_fake_mlx5_take_log() -> *mut c_char {
    let log = kernel::lock().take_log();
    match rverbs_mlx5_fake::record::to_json(&log).ok().and_then(|j| CString::new(j).ok()) {
        Some(c) => c.into_raw(),
        None => std::ptr::null_mut(),
    }
}

/// Frees a string from [`rverbs_fake_mlx5_take_log`].
#[no_mangle]
pub unsafe extern "C" fn rverbs_fake_mlx5_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: `s` came from `CString::into_raw` in take_log (the
        // function's contract).
        drop(unsafe { CString::from_raw(s) });
    }
}

// Keep `c_long` in use for targets where off_t is c_long (documentation
// of the mmap prototype above).
const _: () = assert!(std::mem::size_of::<libc::off_t>() == std::mem::size_of::<c_long>());
