//! Memory windows (`ibv_mw`): remote access to a range of a memory region,
//! granted by a bind and revoked by an invalidation, both through a send
//! queue, without re-registering the region.
//!
//! Type 1 windows are bound with [`QueuePair::bind_mw`] (`ibv_bind_mw`) and
//! unbound by a zero-length bind; type 2 windows are bound by a
//! [`SendWr::bind_mw`] request posted like any other and revoked by
//! [`SendWr::local_inv`], by the peer's [`SendWr::send_inv`], or by
//! deallocating the window. A window's bind is checked against the region
//! and the PD here, and the device checks the keys: a stale key fails the
//! bind (`MW_BIND_ERR`) or the peer's access (`REM_ACCESS_ERR`), never
//! memory. The region must have [`AccessFlags::MW_BIND`]; a window may give
//! peers access the region itself does not (that is the point), so what a
//! region with `MW_BIND` may be written by is what `REMOTE_WRITE` would
//! allow: owned regions are only ever copied in and out, and `reg_mr`'s
//! contract covers caller memory.
//!
//! Windows bound to a region must be deallocated or invalidated before the
//! region is: rxe refuses to deregister a region with bound windows, and
//! rverbs then leaks the region's memory rather than free pages the device
//! may still write ([`MemoryRegion`]'s `Drop`).

use std::sync::atomic::{AtomicU32, Ordering};

use rverbs_providers::cmd::mw as cmd;
use rverbs_providers::wr::{inc_rkey, MwBind};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_verbs_values::{IB_MW_TYPE_1, IB_MW_TYPE_2};
use tracing::debug;

use crate::{AccessFlags, MemoryRegion, PostError, ProtectionDomain, QueuePair, SendFlags, SendWr};

/// `enum ibv_mw_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound by `ibv_bind_mw`, on any QP of the PD.
    Type1,
    /// `IBV_MW_TYPE_2`: bound by a `BIND_MW` work request, to one QP.
    Type2,
}

impl MwType {
    /// The kernel's number (`IB_MW_TYPE_*`).
    pub fn raw(self) -> u32 {
        match self {
            MwType::Type1 => IB_MW_TYPE_1,
            MwType::Type2 => IB_MW_TYPE_2,
        }
    }

    /// The type of kernel number `raw`, if it is one.
    pub fn from_raw(raw: u32) -> Option<MwType> {
        match raw {
            IB_MW_TYPE_1 => Some(MwType::Type1),
            IB_MW_TYPE_2 => Some(MwType::Type2),
            _ => None,
        }
    }
}

/// The access a window may grant: the remote ones.
const WINDOW_ACCESS: AccessFlags =
    AccessFlags::REMOTE_READ.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_ATOMIC);

/// A memory window of a protection domain. `Send + Sync`; deallocated on
/// drop (which also revokes its binding).
#[derive(Debug)]
pub struct MemoryWindow {
    pd: ProtectionDomain,
    handle: u32,
    mw_type: MwType,
    /// The key peers use: the allocation's, then each `bind_mw`'s.
    rkey: AtomicU32,
    live: bool,
}

impl ProtectionDomain {
    /// Allocates a memory window: `IB_USER_VERBS_CMD_ALLOC_MW` through
    /// `INVOKE_WRITE`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` from a device without windows of `mw_type`.
    #[doc(alias = "ibv_alloc_mw")]
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<MemoryWindow> {
        let _span = verb_span!("ibv_alloc_mw");
        let (handle, rkey) = cmd::alloc_mw(self.context().fd(), self.handle(), mw_type.raw() as u8)?;
        debug!(handle, rkey, ?mw_type, "MW allocated");
        Ok(MemoryWindow { pd: self.clone(), handle, mw_type, rkey: AtomicU32::new(rkey), live: true })
    }
}

impl MemoryWindow {
    /// The PD it belongs to.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// Its type.
    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }
    /// The key peers use: the allocation's until [`QueuePair::bind_mw`]
    /// gives it a new one (`ibv_mw.rkey`). A type 2 bind posted with
    /// [`SendWr::bind_mw`] does not change it: that key is the
    /// [`MwBind::new_rkey`] of the request, as in libibverbs.
    pub fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Relaxed)
    }

    /// What binding this window to `len` bytes of `mr` from `offset` with
    /// `access` takes (`struct ibv_mw_bind_info`), with the next key
    /// (`ibv_inc_rkey` of [`rkey`](Self::rkey)). `len` 0 unbinds a type 1
    /// window.
    ///
    /// # Errors
    /// `EINVAL` when the range is outside the region, the region lacks
    /// `MW_BIND` or is of another PD, or `access` asks for more than the
    /// remote rights (`ZERO_BASED` included: rxe cannot bind zero-based).
    pub fn bind_info(&self, mr: &MemoryRegion, offset: usize, len: usize, access: AccessFlags) -> Result<MwBind> {
        const VERB: &str = "ibv_bind_mw";
        let bad = |msg: String| Err(Error::check(VERB, Errno::EINVAL).with_message(msg));
        if !matches!(offset.checked_add(len), Some(end) if end <= mr.len()) {
            return bad(format!("range {offset}+{len} is outside the {}-byte region", mr.len()));
        }
        if !mr.access().contains(AccessFlags::MW_BIND) {
            return bad("the region was registered without MW_BIND".into());
        }
        if !mr.pd().same_as(&self.pd) {
            return bad("the region and the window are of different PDs".into());
        }
        if !WINDOW_ACCESS.contains(access) {
            return bad(format!("a window grants REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC only, not {access:?}"));
        }
        Ok(MwBind {
            mw_rkey: self.rkey(),
            new_rkey: inc_rkey(self.rkey()),
            mr_lkey: mr.lkey(),
            addr: mr.addr() + offset as u64,
            length: len as u64,
            access: access.bits(),
        })
    }

    /// Deallocates the window now (`UVERBS_METHOD_MW_DESTROY`), revoking
    /// its binding, and reports the kernel's answer.
    #[doc(alias = "ibv_dealloc_mw")]
    pub fn dealloc(mut self) -> Result<()> {
        self.destroy()
    }

    /// The kernel dealloc, once; if the kernel refuses, the window stays
    /// live (a later call tries again).
    pub(crate) fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::dealloc_mw(self.pd.context().fd(), self.handle).inspect_err(|_| self.live = true)?;
        debug!(handle = self.handle, "MW deallocated");
        Ok(())
    }
}

impl Drop for MemoryWindow {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "MW dealloc failed");
        }
    }
}

impl QueuePair {
    /// Binds `mw` as `bind` says (from [`MemoryWindow::bind_info`]) through
    /// this QP's send queue (`ibv_bind_mw`: one `BIND_MW` request, then the
    /// doorbell); the window's [`rkey`](MemoryWindow::rkey) becomes
    /// `bind.new_rkey` at once, as in libibverbs (if the completion reports
    /// an error, the bind did not happen and the old key still holds).
    /// `flags`: `SIGNALED` for a completion, `FENCE`. Returns the new key.
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send); `bind` must be of `mw`'s current key.
    #[doc(alias = "ibv_bind_mw")]
    pub fn bind_mw(
        &mut self,
        mw: &MemoryWindow,
        wr_id: u64,
        bind: MwBind,
        flags: SendFlags,
    ) -> std::result::Result<u32, PostError> {
        let wr = SendWr { flags, ..SendWr::bind_mw(wr_id, bind) };
        self.post_send(&[wr])?;
        mw.rkey.store(bind.new_rkey, Ordering::Relaxed);
        Ok(bind.new_rkey)
    }
}
