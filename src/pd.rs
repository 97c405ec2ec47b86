//! Protection domains (`ibv_pd`).

use std::sync::Arc;

use rverbs_providers::cmd::pd as cmd;
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;

use crate::Context;

/// A protection domain: MRs, QPs, SRQs and AHs live in one, and only objects
/// of the same PD can work together. Cheap to clone; children keep it alive
/// and it is deallocated when the last handle goes.
///
/// `Send + Sync`: it is a kernel handle; deallocation happens once, in `Drop`
/// of the shared inner value.
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

#[derive(Debug)]
pub(crate) struct PdInner {
    ctx: Context,
    handle: u32,
    live: bool,
}

impl PdInner {
    /// The kernel dealloc, once; if the kernel refuses, the PD stays live
    /// (a later call tries again).
    pub(crate) fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::dealloc_pd(self.ctx.fd(), self.handle).inspect_err(|_| self.live = true)?;
        debug!(handle = self.handle, "PD deallocated");
        Ok(())
    }
}

impl Drop for PdInner {
    /// Inlined into the drop glue: after an explicit dealloc it is one
    /// load and a branch, no call.
    #[inline]
    fn drop(&mut self) {
        if self.live {
            self.destroy_on_drop();
        }
    }
}

impl PdInner {
    /// [`Drop`]'s dealloc of a PD still live: the last handle went.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "PD dealloc failed");
        }
    }
}

impl Context {
    /// Allocates a protection domain: `IB_USER_VERBS_CMD_ALLOC_PD` through
    /// `INVOKE_WRITE` (the kernel has no native method on 6.1/6.12).
    #[doc(alias = "ibv_alloc_pd")]
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let _span = verb_span!("ibv_alloc_pd");
        // mlx5 answers its PD number (`mlx5_ib_alloc_pd_resp`, 4 bytes);
        // nothing rverbs posts needs it, so it is ignored. rxe answers nothing.
        let mut drv = [0u8; 8];
        let handle = cmd::alloc_pd(self.fd(), &mut drv)?;
        debug!(handle, "PD allocated");
        Ok(ProtectionDomain { inner: Arc::new(PdInner { ctx: self.clone(), handle, live: true }) })
    }
}

impl ProtectionDomain {
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// True when both are handles of one PD.
    pub fn same_as(&self, other: &ProtectionDomain) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Deallocates the PD now, reporting the kernel's answer
    /// (`UVERBS_METHOD_PD_DESTROY`, `ibv_dealloc_pd`).
    ///
    /// # Errors
    /// `EBUSY` while other handles or objects of the PD (MRs, QPs, SRQs,
    /// AHs) still hold it, as `ibv_dealloc_pd` and rverbs' other destroys
    /// answer; the PD then goes with the last of them.
    #[doc(alias = "ibv_dealloc_pd")]
    pub fn dealloc(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => inner.destroy(),
            Err(_) => Err(Error::check("ibv_dealloc_pd", Errno::EBUSY).with_message(
                "objects of this PD (or other handles of it) still hold it; it goes with the last of them",
            )),
        }
    }
}
