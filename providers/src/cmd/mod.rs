//! One function per uverbs method, grouped by kernel object (the analog of
//! libibverbs' `cmd_*.c`). Each issues exactly one command: the native ioctl
//! method when the kernel has it, else the write command (through
//! `INVOKE_WRITE`, else `write()`), and maps the errno into an [`Error`]
//! that names the verb.
//!
//! [`Error`]: crate::Error

pub mod ah;
pub mod cq;
pub mod device;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod qp;
pub mod srq;

use std::os::fd::{FromRawFd, OwnedFd};

use crate::sys::{CmdPath, IoctlCmd, UverbsFd};
use crate::{Errno, Error, Result};

/// Records which path a control-path command took.
#[inline]
pub(crate) fn traced(verb: &'static str, path: CmdPath) {
    tracing::debug!(verb, path = ?path, "uverbs command");
}

/// The destroy method of an object whose destruction answers nothing (PD,
/// MR, MW, AH): its ioctl method and handle attribute, and the legacy write
/// command with its request (one handle) for kernels without the method.
pub(crate) struct Destroy<'a> {
    /// The `ibv_*` call it serves, for errors and traces.
    pub verb: &'static str,
    /// `UVERBS_OBJECT_*`.
    pub object: u16,
    /// `UVERBS_METHOD_*_DESTROY`.
    pub method: u16,
    /// `UVERBS_ATTR_DESTROY_*_HANDLE`.
    pub handle_attr: u16,
    /// `IB_USER_VERBS_CMD_*` of the write fallback.
    pub write_cmd: u32,
    /// Its request, holding the same handle.
    pub write_req: &'a [u8],
}

/// Destroys object `handle`: the ioctl method, else the write command. In a
/// forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub(crate) fn destroy_object(fd: &UverbsFd, handle: u32, d: &Destroy<'_>) -> Result<()> {
    if fd.skip_destroy_in_child(d.verb, handle) {
        return Ok(());
    }
    let mut cmd = IoctlCmd::new(d.object, d.method);
    cmd.in_obj(d.handle_attr, handle);
    if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(d.verb, e))? {
        traced(d.verb, CmdPath::Ioctl);
        return Ok(());
    }
    let path = fd.write_cmd(d.write_cmd, d.write_req, &mut [], &[], &mut []).map_err(|e| Error::os(d.verb, e))?;
    traced(d.verb, path);
    Ok(())
}

/// Wraps an fd the kernel just created for us (a new `UVERBS_ATTR_FD`, the
/// `async_fd` of GET_CONTEXT, a completion channel).
pub(crate) fn owned_fd(raw: u64) -> Result<OwnedFd, Errno> {
    let fd = i32::try_from(raw as i64).map_err(|_| Errno::EBADF)?;
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    // SAFETY: the kernel installed `fd` in our table as this command's result
    // and nothing else owns it yet, so taking ownership is sound.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
