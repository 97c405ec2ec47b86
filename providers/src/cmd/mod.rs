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

use crate::sys::CmdPath;
use crate::Errno;

/// Records which path a control-path command took.
pub(crate) fn traced(verb: &'static str, path: CmdPath) {
    tracing::debug!(verb, path = ?path, "uverbs command");
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
