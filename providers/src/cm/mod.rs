//! One function per RDMA CM (ucma) command, the analog of the command half
//! of librdmacm's `cma.c`. Each builds the command's body, issues it with
//! one `write()` on the [`UcmaFd`], names it in `tracing` (field `cmd`:
//! the `RDMA_USER_CM_CMD_*` name without its prefix; `verb`: the
//! librdmacm call), and turns the errno into an [`Error`] that names the
//! call and says what to do.
//!
//! The commands go on the wire exactly as librdmacm sends them on kernels
//! with AF_IB support (every kernel since 3.11): BIND, RESOLVE_ADDR and
//! QUERY, never the legacy BIND_IP, RESOLVE_IP and QUERY_ROUTE
//! (`shared/reference/rdmacm.md` §A.3).
//!
//! [`Error`]: crate::Error
//! [`UcmaFd`]: crate::sys::ucma::UcmaFd

mod addr;
mod conn;
mod id;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use addr::{bind, query_addr, query_gid, query_path, resolve_addr, resolve_route, sockaddr_of, to_cm_addr, CmAddr};
pub use conn::{
    accept, connect, disconnect, establish, init_qp_attr, join_mcast, leave_mcast, listen, notify, reject, set_option,
};
pub use id::{create_id, destroy_id, get_event, migrate_id};

use crate::sys::ucma::{Command, UcmaFd};
use crate::Errno;

/// Issues `c` and records it: a debug event naming the command (`cmd`),
/// the librdmacm call (`verb`) and the kernel id, or its errno.
pub(crate) fn issue(fd: &UcmaFd, name: &'static str, verb: &'static str, id: u32, c: Command<'_>) -> Result<(), Errno> {
    match fd.command(c) {
        Ok(()) => {
            tracing::debug!(cmd = name, verb, id, "rdma_cm command");
            Ok(())
        }
        Err(e) => {
            tracing::debug!(cmd = name, verb, id, errno = ?e, "rdma_cm command failed");
            Err(e)
        }
    }
}

/// The sentence for an errno every command can get.
pub(crate) fn common_explanation(e: Errno) -> Option<&'static str> {
    Some(match e {
        Errno::ENOENT => "the kernel has no such CM id on this event channel (destroyed, or migrated away)",
        Errno::ENODEV => "no RDMA device serves this address (the id is bound to none yet)",
        Errno::ENOSPC => "the response buffer was too small for the kernel",
        Errno::ENOMEM => "the kernel ran out of memory",
        Errno::EACCES => "the event channel was opened by a process with other credentials",
        _ => return None,
    })
}
