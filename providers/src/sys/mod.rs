//! The only place in rverbs that makes syscalls on the uverbs fd: opening it,
//! `RDMA_VERBS_IOCTL`, the legacy `write()` commands and `mmap()`; plus the
//! RDMA netlink socket used by discovery and the connection manager's fd
//! (`ucma`).

pub mod event;
pub mod ioctl;
pub mod netlink;
mod prepared;
pub(crate) mod raw;
mod shared_pages;
pub mod ucma;
#[cfg(any(test, feature = "ucma-mock"))]
pub mod ucma_mock;
pub mod write;

#[cfg(test)]
mod fallback_tests;

use std::fs::OpenOptions;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once};

use nix::errno::Errno;
use rverbs_uapi::ib_user_ioctl_cmds::{
    UVERBS_ATTR_CORE_IN, UVERBS_ATTR_CORE_OUT, UVERBS_ATTR_WRITE_CMD, UVERBS_METHOD_INVOKE_WRITE, UVERBS_OBJECT_DEVICE,
};
use rverbs_uapi::ib_user_verbs::IB_USER_VERBS_CMD_FLAG_EXTENDED;

pub use ioctl::{AttrSlot, IoctlCmd};
pub use prepared::SendDoorbellFrame;
pub(crate) use prepared::SmallWrite;
pub(crate) use shared_pages::SharedPages;

/// Which kernel interface carried a command; recorded in tracing events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmdPath {
    /// A native `RDMA_VERBS_IOCTL` method.
    Ioctl,
    /// A write command sent through the ioctl `DEVICE/INVOKE_WRITE` method.
    InvokeWrite,
    /// The legacy `write()` syscall.
    Write,
}

/// An open `/dev/infiniband/uverbsN`, with the kernel's driver id and what we
/// learned about which interfaces the kernel supports.
///
/// Fallback rules are rdma-core's (`libibverbs/cmd_fallback.c`): `ENOTTY`
/// from any ioctl turns ioctl off for this fd; `EPROTONOSUPPORT` turns off
/// only that method. Write commands go through `INVOKE_WRITE` while the
/// kernel has it, `write()` otherwise.
///
/// Issuing a raw command (`try_ioctl`, `ioctl`, `write_cmd*`) is
/// crate-private: a command can name any memory of the process (REG_MR's
/// range, mlx5's queue buffers in a create's driver data), so outside this
/// crate commands go through [`crate::cmd`], whose memory-naming functions
/// are `unsafe`, or [`crate::provider`].
///
/// # fork
/// The fd remembers the process that opened it. A child made by `fork()`
/// inherits the fd, and with it the parent's kernel objects: the command
/// functions that destroy objects ([`crate::cmd`]'s `destroy_*`,
/// `dealloc_pd`, `dereg_mr`) do nothing in another process
/// ([`in_forked_child`](Self::in_forked_child)), so a child dropping the
/// objects it inherited leaves the parent's alone. Nothing else is
/// refused: a child must not use the parent's objects (as with
/// libibverbs), but may open the device again for its own.
#[derive(Debug)]
pub struct UverbsFd {
    fd: OwnedFd,
    /// `getpid()` of the opener.
    opener: u32,
    driver_id: u32,
    no_ioctl: AtomicBool,
    no_invoke_write: AtomicBool,
    unsupported: Mutex<Vec<(u16, u16)>>,
    /// `unsupported` is not empty: until then a command takes no lock to
    /// learn that its method is not in it (~40 instructions per command).
    any_unsupported: AtomicBool,
}

/// This process's id, from a cache: one `getpid()` per process, not one
/// per destroy command (a ping-pong made eleven). A `pthread_atfork`
/// child handler, registered with the first call, empties the cache in
/// every child that glibc's `fork()` makes (also `std::process::Command`'s
/// fork, which execs anyway), so the child asks the kernel again. A child
/// made by a raw `clone` syscall, which runs no atfork handlers, would see
/// its parent's id and destroy the parent's objects on drop; such a child
/// must not touch the parent's RDMA objects at all (see [`UverbsFd`]).
#[inline]
pub fn current_pid() -> u32 {
    // A cached id means the handler is registered: it is cached only
    // after the registration succeeded (`FORK_SAFE`).
    let cached = PID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    current_pid_slow()
}

/// [`current_pid`] with nothing cached: the handler registered (once), the
/// kernel asked.
#[cold]
#[inline(never)]
fn current_pid_slow() -> u32 {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // pthread_atfork's only failure is ENOMEM, after which the cache is
        // never filled (`FORK_SAFE` stays false) and every call asks the kernel.
        // SAFETY: `forget_pid` is an `extern "C" fn()` that only stores to an atomic (async-signal-safe, as a
        // child handler must be); pthread_atfork copies the pointers and has no other requirement.
        let rc = unsafe { nix::libc::pthread_atfork(None, None, Some(forget_pid)) };
        FORK_SAFE.store(rc == 0, Ordering::Release);
    });
    let cached = PID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let pid = std::process::id();
    if FORK_SAFE.load(Ordering::Acquire) {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// The cache of [`current_pid`]; 0: unknown.
static PID: AtomicU32 = AtomicU32::new(0);
/// Whether the atfork handler that empties [`PID`] is registered.
static FORK_SAFE: AtomicBool = AtomicBool::new(false);

/// `pthread_atfork`'s child handler: the child's id is not the parent's.
extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

impl UverbsFd {
    /// Opens a uverbs char device `O_RDWR|O_CLOEXEC` (read-write because
    /// providers mmap it) and checks that it is a character device and, when
    /// `expect_rdev` is given, that it is the one sysfs named.
    pub fn open(path: &Path, driver_id: u32, expect_rdev: Option<(u32, u32)>) -> Result<Self, Errno> {
        // std opens with O_CLOEXEC always.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)))?;
        let meta = file.metadata().map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(5)))?;
        if !meta.file_type().is_char_device() {
            return Err(Errno::ENOTTY);
        }
        if let Some((maj, min)) = expect_rdev {
            let rdev = meta.rdev();
            if (nix::sys::stat::major(rdev) as u32, nix::sys::stat::minor(rdev) as u32) != (maj, min) {
                return Err(Errno::ENODEV);
            }
        }
        Ok(UverbsFd {
            fd: OwnedFd::from(file),
            opener: current_pid(),
            driver_id,
            no_ioctl: AtomicBool::new(false),
            no_invoke_write: AtomicBool::new(false),
            unsupported: Mutex::new(Vec::new()),
            any_unsupported: AtomicBool::new(false),
        })
    }

    /// The kernel driver id put in every ioctl header (`RDMA_DRIVER_*`).
    pub fn driver_id(&self) -> u32 {
        self.driver_id
    }

    /// Whether this process is not the one that opened the fd: a child
    /// forked after the open, whose kernel objects on this fd are the
    /// parent's. No syscall ([`current_pid`]).
    #[inline]
    pub fn in_forked_child(&self) -> bool {
        current_pid() != self.opener
    }

    /// For the destroy commands: `true` (and a debug event) when `verb` on
    /// object `handle` must be skipped because this is a forked child; the
    /// caller then returns `Ok` without a syscall.
    #[inline]
    pub fn skip_destroy_in_child(&self, verb: &'static str, handle: u32) -> bool {
        let pid = current_pid();
        if pid == self.opener {
            return false;
        }
        self.note_skipped_destroy(verb, handle, pid);
        true
    }

    /// The debug event of a destroy skipped in a forked child.
    #[cold]
    #[inline(never)]
    fn note_skipped_destroy(&self, verb: &'static str, handle: u32, pid: u32) {
        tracing::debug!(
            verb,
            handle,
            pid,
            opener = self.opener,
            "forked child: the object is the parent's, not destroyed"
        );
    }

    #[inline]
    fn method_unsupported(&self, obj: u16, meth: u16) -> bool {
        self.no_ioctl.load(Ordering::Relaxed)
            || (self.any_unsupported.load(Ordering::Acquire) && self.listed_unsupported(obj, meth))
    }

    /// Whether an earlier `EPROTONOSUPPORT` listed this method (rare: only
    /// once some method was refused).
    #[cold]
    #[inline(never)]
    fn listed_unsupported(&self, obj: u16, meth: u16) -> bool {
        self.unsupported.lock().map(|v| v.contains(&(obj, meth))).unwrap_or(false)
    }

    fn note_failure(&self, obj: u16, meth: u16, e: Errno) -> bool {
        match e {
            Errno::ENOTTY => {
                tracing::debug!("uverbs ioctl: ENOTTY, using write() from now on");
                self.no_ioctl.store(true, Ordering::Relaxed);
                true
            }
            Errno::EPROTONOSUPPORT => {
                tracing::debug!(object = obj, method = meth, "uverbs ioctl: method not supported, falling back");
                if let Ok(mut v) = self.unsupported.lock() {
                    v.push((obj, meth));
                    self.any_unsupported.store(true, Ordering::Release);
                }
                true
            }
            _ => false,
        }
    }

    /// Issues a native ioctl method. `Ok(false)` means the kernel lacks ioctl
    /// or this method (now remembered) and the caller should fall back to the
    /// write form; `Ok(true)` is success.
    #[inline]
    pub(crate) fn try_ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<bool, Errno> {
        if self.method_unsupported(cmd.object_id(), cmd.method_id()) {
            return Ok(false);
        }
        match cmd.execute(self.fd.as_fd(), self.driver_id) {
            Ok(()) => {
                // One load when tracing is off: the event's fields are built
                // out of line.
                if tracing::level_enabled!(tracing::Level::TRACE) {
                    self.trace_ok(cmd);
                }
                Ok(true)
            }
            Err(e) => self.ioctl_failed(cmd.object_id(), cmd.method_id(), e),
        }
    }

    /// The trace event of a command that succeeded.
    #[cold]
    #[inline(never)]
    fn trace_ok(&self, cmd: &mut IoctlCmd<'_>) {
        let (obj, meth) = (cmd.object_id(), cmd.method_id());
        tracing::trace!(
            object = obj,
            method = meth,
            path = ?CmdPath::Ioctl,
            // INVOKE_WRITE: the write command it carried (its UVERBS_ATTR_WRITE_CMD).
            write_cmd = (obj == UVERBS_OBJECT_DEVICE && meth == UVERBS_METHOD_INVOKE_WRITE)
                .then(|| {
                    let attrs = cmd.finish(self.driver_id).ok()?.get(24..)?;
                    let id = |a: &&[u8]| u16::from_le_bytes([a[0], a[1]]);
                    let a = attrs.chunks_exact(16).find(|a| id(a) == UVERBS_ATTR_WRITE_CMD)?;
                    Some(u64::from_le_bytes(a[8..16].try_into().unwrap_or_default()))
                })
                .flatten(),
            "uverbs command ok"
        );
    }

    /// A failed ioctl: `Ok(false)` when the caller should fall back to the
    /// write form (no ioctl, or not this method), else the errno.
    #[cold]
    #[inline(never)]
    fn ioctl_failed(&self, obj: u16, meth: u16, e: Errno) -> Result<bool, Errno> {
        if self.note_failure(obj, meth, e) {
            return Ok(false);
        }
        tracing::debug!(object = obj, method = meth, errno = ?e, "uverbs ioctl failed");
        Err(e)
    }

    /// Issues a native ioctl method that has no write form.
    pub(crate) fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        match self.try_ioctl(cmd)? {
            true => Ok(()),
            false => Err(Errno::EOPNOTSUPP),
        }
    }

    /// Sends write command `command` (an `IB_USER_VERBS_CMD_*`, non-extended):
    /// through `INVOKE_WRITE` when the kernel has it, else with `write()`.
    /// `core_in` is the core request struct including its leading `response`
    /// field when the command has a response; `core_out` the core response;
    /// `drv_in`/`drv_out` the provider's udata.
    pub(crate) fn write_cmd(
        &self,
        command: u32,
        core_in: &[u8],
        core_out: &mut [u8],
        drv_in: &[u8],
        drv_out: &mut [u8],
    ) -> Result<CmdPath, Errno> {
        self.command(command, false, core_in, core_out, drv_in, drv_out)
    }

    /// Same as [`write_cmd`](Self::write_cmd) for an extended command
    /// (`IB_USER_VERBS_EX_CMD_*`); `core_in` has no `response` field.
    pub(crate) fn write_cmd_ex(
        &self,
        command: u32,
        core_in: &[u8],
        core_out: &mut [u8],
        drv_in: &[u8],
        drv_out: &mut [u8],
    ) -> Result<CmdPath, Errno> {
        self.command(command, true, core_in, core_out, drv_in, drv_out)
    }

    fn command(
        &self,
        command: u32,
        ex: bool,
        core_in: &[u8],
        core_out: &mut [u8],
        drv_in: &[u8],
        drv_out: &mut [u8],
    ) -> Result<CmdPath, Errno> {
        if !self.no_invoke_write.load(Ordering::Relaxed) {
            match self.invoke_write(command, ex, core_in, core_out, drv_in, drv_out) {
                Ok(true) => return Ok(CmdPath::InvokeWrite),
                Ok(false) => self.no_invoke_write.store(true, Ordering::Relaxed),
                Err(e) => return Err(e),
            }
        }
        self.legacy_write(command, ex, core_in, core_out, drv_in, drv_out)?;
        Ok(CmdPath::Write)
    }

    fn invoke_write(
        &self,
        command: u32,
        ex: bool,
        core_in: &[u8],
        core_out: &mut [u8],
        drv_in: &[u8],
        drv_out: &mut [u8],
    ) -> Result<bool, Errno> {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
        let cmd_id = if ex { IB_USER_VERBS_CMD_FLAG_EXTENDED | command } else { command };
        cmd.in_const(UVERBS_ATTR_WRITE_CMD, u64::from(cmd_id));
        if !core_in.is_empty() {
            cmd.in_bytes(UVERBS_ATTR_CORE_IN, core_in);
        }
        if !core_out.is_empty() {
            cmd.out_bytes(UVERBS_ATTR_CORE_OUT, core_out);
        }
        cmd.uhw(drv_in, drv_out);
        self.try_ioctl(&mut cmd)
    }

    fn legacy_write(
        &self,
        command: u32,
        ex: bool,
        core_in: &[u8],
        core_out: &mut [u8],
        drv_in: &[u8],
        drv_out: &mut [u8],
    ) -> Result<(), Errno> {
        let mut resp = vec![0u8; core_out.len() + drv_out.len()];
        let frame = if ex {
            write::frame_ex(command, core_in, drv_in, resp.as_mut_ptr() as u64, core_out.len(), drv_out.len())
        } else {
            write::frame(command, core_in, drv_in, resp.as_mut_ptr() as u64, resp.len())
        };
        let n = nix::unistd::write(self.fd.as_fd(), &frame)?;
        if n != frame.len() {
            return Err(Errno::EIO);
        }
        tracing::trace!(command, ex, path = ?CmdPath::Write, "uverbs command ok");
        let (c, d) = resp.split_at(core_out.len());
        core_out.copy_from_slice(c);
        drv_out.copy_from_slice(d);
        Ok(())
    }

    /// rxe's send doorbell: a legacy `write()` of `IB_USER_VERBS_CMD_POST_SEND`
    /// with `wr_count = 0` for the QP with kernel handle `qp_handle`, which
    /// makes the kernel run the QP's requester over the WQEs already in the
    /// shared send queue (`uverbs-abi.md` §8, providers.md §A.4). Data path:
    /// no allocation, one syscall of a frame built on the stack
    /// ([`SendDoorbellFrame`]); `wqe_size` is 128, what rdma-core sends
    /// (`sizeof(struct ibv_send_wr)`; the kernel needs at least 56).
    /// The `write()` is the raw syscall (`sys/raw.rs`), not libc's wrapper.
    #[inline]
    pub fn ring_send_doorbell(&self, qp_handle: u32) -> Result<(), Errno> {
        let frame = SendDoorbellFrame::new(qp_handle);
        let bytes = frame.bytes();
        // With `wr_count` 0 the kernel reads only the frame and writes the
        // 4-byte response it names.
        // SAFETY: `bytes` is 32 readable bytes; its one address is the
        // frame's response word, a static the kernel may write.
        let n = unsafe { raw::write(self.fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n == bytes.len() as isize {
            return Ok(());
        }
        Err(syscall_error(n))
    }

    /// Maps `len` bytes of the device at `offset` shared and read-write, as
    /// providers do for queues (rxe) and UAR pages (mlx5). The mapping never
    /// hands out references to its interior.
    ///
    /// Not `MADV_DONTFORK`, like rdma-core's providers (`rxe.c`,
    /// `mlx5_mmap`), because fork cannot hurt the parent here: these are
    /// `MAP_SHARED` mappings of kernel or device memory (rxe: the queue's
    /// `vmalloc` pages, `rxe_mmap`; mlx5: UAR pages, `rdma_user_mmap_io`),
    /// never copied on write, so the parent keeps the very pages the kernel
    /// uses; the kernel expects such mappings to be duplicated into
    /// children (`rdma_umap_open`, `rxe_vma_open` take a reference for the
    /// child's copy). A child that drops them unmaps its own copy only.
    pub fn mmap(&self, offset: u64, len: usize) -> std::io::Result<memmap2::MmapRaw> {
        memmap2::MmapOptions::new().offset(offset).len(len).map_raw(self.fd.as_raw_fd())
    }
}

/// The error of a raw syscall ([`raw`]) that returned `n`, not the length
/// asked for: `-errno`, or `EIO` for a short transfer.
#[cold]
#[inline(never)]
pub(crate) fn syscall_error(n: isize) -> Errno {
    if n < 0 {
        Errno::from_raw(-n as i32)
    } else {
        Errno::EIO
    }
}

impl AsFd for UverbsFd {
    #[inline]
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
