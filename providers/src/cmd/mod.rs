//! One function per uverbs method, grouped by kernel object (the analog of
//! libibverbs' `cmd_*.c`). Each issues exactly one command: the native ioctl
//! method when the kernel has it, else the write command (through
//! `INVOKE_WRITE`, else `write()`), and maps the errno into an [`Error`]
//! that names the verb.
//!
//! [`Error`]: crate::Error

pub mod device;

use crate::sys::CmdPath;

/// Records which path a control-path command took.
pub(crate) fn traced(verb: &'static str, path: CmdPath) {
    tracing::debug!(verb, path = ?path, "uverbs command");
}
