//! mlx5's side of the provider interface ([`crate::provider`]'s traits):
//! the context open, and for each object its create, its lifecycle hooks
//! and its driver.
#![allow(unsafe_code)] // `unsafe impl` of the create traits; each says why

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rverbs_uapi::mlx5_abi::{mlx5_ib_create_cq, mlx5_ib_create_cq_resp};
use zerocopy::IntoBytes;

use super::{parse_ucontext_resp, ucontext_request, Context, Cq, FinishError, PendingCq, QpShared, UCONTEXT_RESP_LEN};
use crate::cmd::cq::CqCreated;
use crate::cmd::device::{self as dev, ContextInfo};
use crate::provider::{imm_to_net, CqOps, CqPoll, CqRef, ProviderOps, ResizeError};
use crate::sys::UverbsFd;
use crate::wr::Wc;
use crate::{Errno, Error, Result};

impl ProviderOps for Context {
    /// Sends the `alloc_ucontext` request and reads the answer (UAR
    /// geometry, limits, CQE version) to allocate the UAR pages.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)> {
        let req = ucontext_request();
        let mut drv_out = [0u8; UCONTEXT_RESP_LEN];
        let info = dev::get_context(fd, req.as_bytes(), &mut drv_out)?;
        let m = Context::finish(fd, &parse_ucontext_resp(&drv_out))?;
        Ok((info, m))
    }
}

/// What lives as long as an mlx5 kernel CQ: the CQ number names the CQ in
/// clean requests.
#[derive(Debug)]
pub struct Mlx5CqState {
    ctx: Context,
    cqn: u32,
}

// SAFETY: the driver data names the pending CQ's buffer and doorbell
// record, which `PendingCq` owns and which pass to the `Cq` at finish.
unsafe impl CqOps for Context {
    type Cq = Mlx5Cq;
    type CqState = Mlx5CqState;
    type CqPending = PendingCq;
    type CqUdata = mlx5_ib_create_cq;
    type CqResp = mlx5_ib_create_cq_resp;
    type CqCleanQp = Arc<QpShared>;
    /// The HCA writes the buffer until the kernel destroy.
    const CQ_PARKS: bool = true;
    /// The arm sequence number follows the events read.
    const CQ_COUNTS_EVENTS: bool = true;

    /// The buffer and doorbell record, allocated first.
    fn cq_prepare(&self, cqe: u32) -> Result<(PendingCq, mlx5_ib_create_cq, u32)> {
        let (pending, udata) = Context::cq_prepare(self, cqe)?;
        if let Some(page) = pending.uar_index_attr() {
            return Err(Error::check("ibv_create_cq", Errno::EOPNOTSUPP).with_message(format!(
                "the CQ's UAR page id {page} needs MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX, which rverbs does not send"
            )));
        }
        let cqe = pending.core_cqe();
        Ok((pending, udata, cqe))
    }

    fn cq_finish(
        &self,
        _fd: &Arc<UverbsFd>,
        pending: PendingCq,
        resp: &mlx5_ib_create_cq_resp,
        created: &CqCreated,
    ) -> std::result::Result<(Mlx5CqState, Mlx5Cq), (Error, PendingCq)> {
        match Context::cq_finish(self, pending, resp.as_bytes(), created.cqe) {
            Ok(cq) => Ok((Mlx5CqState { ctx: self.clone(), cqn: cq.cqn() }, Mlx5Cq { cq, synced: 0 })),
            Err(FinishError { error, pending }) => Err((error, *pending)),
        }
    }

    /// Nobody polls the CQ again; before the destroy, as the CQN may be
    /// reused right after it.
    fn cq_destroying(s: &Mlx5CqState) {
        s.ctx.cq_destroyed(s.cqn);
    }

    /// A parked driver (no owner any more) is cleaned now; a live one is out
    /// of reach (polled through `&mut` without a lock), so the clean is
    /// requested and runs at its next poll, before it reads any entry.
    fn cq_clean_qp(s: &Mlx5CqState, parked: Option<&mut Mlx5Cq>, qp: &Arc<QpShared>) {
        match parked {
            Some(d) => d.cq.clean_qp(qp),
            None => s.ctx.request_clean(s.cqn, qp),
        }
    }
}

/// An mlx5 CQ's driver. `synced`: the channel events already folded into
/// the arm sequence number (rdma-core's `mlx5_cq_event`, run by
/// `ibv_get_cq_event`).
#[derive(Debug)]
pub struct Mlx5Cq {
    cq: Cq,
    synced: u32,
}

// Every poll is one call out of the dispatch: inlined, mlx5's decode would
// make each caller's frame fit it. The C library's entries swap the
// immediate back to network order after the usual decode (the defaults).
impl CqPoll for Mlx5Cq {
    #[inline(never)]
    fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// [`Cq::poll_one`], the one-entry path without the slice's length test.
    #[inline(never)]
    fn poll_one(&mut self, w: &mut Wc) -> bool {
        self.cq.poll_one(w)
    }

    #[inline(never)]
    fn poll_uninit(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        self.cq.poll_uninit(out)
    }

    /// Decoded as usual, then each immediate back to network order.
    #[inline(never)]
    fn poll_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        let len = out.len();
        let n = self.cq.poll_uninit(out).min(len);
        let done = &mut out[..n];
        // SAFETY: `poll_uninit` initialised the first `n` entries, and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        imm_to_net(unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) });
        n
    }

    /// Polled into a local `Wc` ([`Cq::poll_one`]), an immediate swapped.
    #[cold]
    #[inline(never)]
    fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        let mut got = Wc::default();
        if !self.cq.poll_one(&mut got) {
            return None;
        }
        imm_to_net(std::slice::from_mut(&mut got));
        Some(w.write(got))
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.cq.is_empty()
    }

    /// No syscall: the arm word into the doorbell record and a store to the
    /// UAR arm register, with a sequence number that counts the events read
    /// for this CQ so far.
    #[inline(never)]
    fn arm(&mut self, k: CqRef<'_>, solicited_only: bool) -> Result<()> {
        let seen = k.events.load(Ordering::Acquire);
        // At most one event per arm, so this is 0 or 1 in practice.
        for _ in 0..seen.wrapping_sub(self.synced) {
            self.cq.on_event();
        }
        self.synced = seen;
        self.cq.arm(solicited_only);
        Ok(())
    }

    fn resize(&mut self, _: CqRef<'_>, _: u32) -> std::result::Result<u32, ResizeError> {
        Err(ResizeError::Kept(
            Error::check("ibv_resize_cq", Errno::EOPNOTSUPP)
                .with_message("resizing a CQ is not supported by the rverbs mlx5 provider; create a larger one"),
        ))
    }

    /// The cleans requested while it was polled run before it is parked.
    fn on_park(&mut self) {
        self.cq.apply_cleans();
    }
}
