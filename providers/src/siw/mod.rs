//! The siw (soft-iWARP) provider: the kernel allocates every ring and we
//! map it (rdmacm.md §B.2); driver data is output only, but for
//! `GET_CONTEXT`'s, which must have room.
//!
//! siw differs from rxe where iWARP does: RC QPs only, connected only
//! through the connection manager (a user modify to RTS fails); no UD, no
//! address handles, no atomics, no immediate data, no memory windows (such
//! requests are refused at post with `OpcodeNotSupported`); no CQ resize.
//! Its rings have no index words: each entry carries its owner in its
//! `flags` (`SIW_WQE_VALID`), see [`datapath`].
//!
//! Control-path hooks are in `provider`; the fast path in [`datapath`];
//! the entry layouts, request checks and completion decoding in [`wqe`].
//!
//! The rings are crate-internal: their entries are the kernel's memory.
//! Outside the crate a queue can post and poll, nothing else:
//!
//! ```compile_fail
//! fn f<D: rverbs_providers::siw::Doorbell>(s: &rverbs_providers::siw::SendQueue<D>) {
//!     let _ = s.ring();
//! }
//! ```

pub mod datapath;
// Completing what the kernel leaves in a QP in ERROR.
pub(crate) mod flush;
#[cfg(any(test, feature = "mock"))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod mock;
#[cfg(test)]
mod proptests;
// The provider interface's implementation.
mod provider;
// A ring's entries are shared with the kernel: crate-internal.
pub(crate) mod ring;
#[cfg(test)]
mod tests;
pub mod wqe;

pub use datapath::{CqRing, Doorbell, RecvQueue, SendQueue};
pub(crate) use provider::Context;
pub use provider::UverbsDoorbell;
pub use wqe::SendLimits;
