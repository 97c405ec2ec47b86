//! mlx5's side of the provider interface ([`crate::provider`]'s traits):
//! the context open, and for each object its create, its lifecycle hooks
//! and its driver.
#![allow(unsafe_code)] // `unsafe impl` of the create traits; each says why

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::{ib_uverbs_qp_cap, IB_UVERBS_GID_TYPE_ROCE_V2};
use rverbs_uapi::ib_user_verbs::ib_uverbs_ah_attr;
use rverbs_uapi::ib_verbs_values::IB_LINK_LAYER_ETHERNET;
use rverbs_uapi::mlx5_abi::{
    mlx5_ib_create_ah_resp, mlx5_ib_create_cq, mlx5_ib_create_cq_resp, mlx5_ib_create_qp, mlx5_ib_create_qp_resp,
    mlx5_ib_create_srq, mlx5_ib_create_srq_resp,
};
use zerocopy::IntoBytes;

use super::{
    parse_ucontext_resp, ucontext_request, Ah, AhAttr, Context, Cq, FinishError, Grh, PendingCq, PendingQp, PendingSrq,
    Qp, QpCaps, QpPrepareArgs, QpShared, RecvQueue, SendQueue, Srq, SrqShared, UarMmio, UCONTEXT_RESP_LEN,
};
use crate::cmd::cq::CqCreated;
use crate::cmd::device::{self as device, ContextInfo};
use crate::cmd::qp::QpCreated;
use crate::cmd::srq::SrqCreated;
use crate::provider::{
    imm_to_net, qp_type_unsupported, AhCreate, AhOps, CqOps, CqPoll, CqRef, ProviderOps, QpCreate, QpOps, RecvPost,
    ResizeError, SendPost, SrqOps,
};
use crate::qp_state::{QpState, QpType};
use crate::sys::UverbsFd;
use crate::wr::{PostError, RecvWr, SendWr, Wc};
use crate::{Errno, Error, Result};

impl ProviderOps for Context {
    /// Sends the `alloc_ucontext` request and reads the answer (UAR
    /// geometry, limits, CQE version) to allocate the UAR pages.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)> {
        let req = ucontext_request();
        let mut drv_out = [0u8; UCONTEXT_RESP_LEN];
        let info = device::get_context(fd, req.as_bytes(), &mut drv_out)?;
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
    /// Boxed: the provider enums carry it by value (every CQ's driver is
    /// the size of the largest provider's), and mlx5's is 248 bytes.
    type Cq = Box<Mlx5Cq>;
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
    ) -> std::result::Result<(Mlx5CqState, Box<Mlx5Cq>), (Error, PendingCq)> {
        match Context::cq_finish(self, pending, resp.as_bytes(), created.cqe) {
            Ok(cq) => Ok((Mlx5CqState { ctx: self.clone(), cqn: cq.cqn() }, Box::new(Mlx5Cq { cq, synced: 0 }))),
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
    fn cq_clean_qp(s: &Mlx5CqState, parked: Option<&mut Box<Mlx5Cq>>, qp: &Arc<QpShared>) {
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
// Boxed (`CqOps::Cq`): one load more per call, on a call that is out of
// line anyway.
impl CqPoll for Box<Mlx5Cq> {
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

    /// [`Cq::poll_one_uninit`], an immediate swapped.
    #[inline(never)]
    fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        let w = self.cq.poll_one_uninit(w)?;
        imm_to_net(std::slice::from_mut(w));
        Some(w)
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

/// What lives as long as an mlx5 kernel SRQ: its registry entry (removed
/// right after the kernel destroy) and the state QPs receive through.
#[derive(Debug)]
pub struct Mlx5SrqState {
    ctx: Context,
    shared: Arc<SrqShared>,
}

// SAFETY: the driver data names the pending SRQ's buffer and doorbell
// record, which `PendingSrq` owns and which pass to the `Srq` at finish.
unsafe impl SrqOps for Context {
    type Srq = Srq;
    type SrqState = Mlx5SrqState;
    type SrqPending = PendingSrq;
    type SrqUdata = mlx5_ib_create_srq;
    type SrqResp = mlx5_ib_create_srq_resp;
    /// The HCA reads and writes the buffer until the kernel destroy.
    const SRQ_PARKS: bool = true;

    /// Buffer, doorbell record and user index first; the core command asks
    /// for exactly the geometry they have.
    fn srq_prepare(&self, max_wr: u32, max_sge: u32) -> Result<(PendingSrq, mlx5_ib_create_srq, u32, u32)> {
        let (pending, udata) = Context::srq_prepare(self, max_wr, max_sge)?;
        let (wr, sge) = (pending.core_max_wr(), pending.core_max_sge());
        Ok((pending, udata, wr, sge))
    }

    /// The SRQ has what the provider's queue holds (rdma-core reports the same).
    fn srq_finish(
        &self,
        _fd: &Arc<UverbsFd>,
        pending: PendingSrq,
        resp: &mlx5_ib_create_srq_resp,
        _created: &SrqCreated,
    ) -> std::result::Result<(Mlx5SrqState, Srq, u32, u32), (Error, PendingSrq)> {
        let (wr, sge) = (pending.core_max_wr(), pending.core_max_sge());
        match Context::srq_finish(self, pending, resp.as_bytes()) {
            Ok(srq) => Ok((Mlx5SrqState { ctx: self.clone(), shared: srq.shared().clone() }, srq, wr, sge)),
            Err(FinishError { error, pending }) => Err((error, *pending)),
        }
    }

    /// Out of the registry right after the kernel destroy.
    fn srq_destroyed(s: &Mlx5SrqState) {
        s.ctx.srqn_destroyed(s.shared.srqn());
    }
}

impl RecvPost for Srq {
    #[inline(always)]
    fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        Srq::post(self, wrs)
    }
}

/// What lives as long as an mlx5 kernel QP: the shared QP state, which owns
/// the queue memory and is registered in the context until the kernel
/// destroy, so the send and receive halves may be dropped at any time.
#[derive(Debug)]
pub struct Mlx5QpState {
    /// Reaches the context's registry itself (one pointer here, so every
    /// provider's kernel QP stays small).
    qp: Arc<QpShared>,
}

// SAFETY: the driver data names the pending QP's buffer and doorbell
// record, which `PendingQp` owns and which pass to the QP's shared state at
// finish (kept by `Mlx5QpState`).
unsafe impl QpOps for Context {
    /// Boxed, as the CQ's driver: 240 bytes that the provider enums would
    /// otherwise carry for every provider's QP.
    type Send = Box<SendQueue<UarMmio>>;
    /// Boxed too: its 64 bytes would make every provider's `QueuePair` over
    /// 128 bytes, moved with a `memcpy` call (rxe's and siw's are 32).
    type Recv = Box<RecvQueue>;
    type QpState = Mlx5QpState;
    type QpPending = PendingQp;
    type QpUdata = mlx5_ib_create_qp;
    type QpResp = mlx5_ib_create_qp_resp;

    /// The queues sized and allocated first; the core command then carries
    /// the capacities they have.
    fn qp_prepare<C: ?Sized, S: ?Sized>(
        &self,
        a: &QpCreate<C, S>,
        srq: Option<&Mlx5SrqState>,
    ) -> Result<(PendingQp, mlx5_ib_create_qp, ib_uverbs_qp_cap)> {
        let qp_type = match a.qp_type {
            QpType::Rc => super::QpType::Rc,
            QpType::Uc => super::QpType::Uc,
            QpType::Ud => super::QpType::Ud,
            other => return Err(qp_type_unsupported("mlx5", other)),
        };
        let prep = QpPrepareArgs {
            qp_type,
            caps: caps_of(a.cap),
            srq: srq.map(|s| s.shared.clone()),
            sq_sig_all: a.sq_sig_all,
        };
        let (pending, udata) = Context::qp_prepare(self, &prep)?;
        let cap = cap_of(pending.core_caps());
        Ok((pending, udata, cap))
    }

    /// The QP has the provider's capacities, not the kernel's echo of the
    /// request.
    fn qp_finish<C: ?Sized, S: ?Sized>(
        &self,
        _fd: &Arc<UverbsFd>,
        pending: PendingQp,
        resp: &mlx5_ib_create_qp_resp,
        created: &QpCreated,
        _a: &QpCreate<C, S>,
    ) -> std::result::Result<(Mlx5QpState, Self::Send, Option<Self::Recv>, ib_uverbs_qp_cap), (Error, PendingQp)> {
        let cap = cap_of(pending.caps());
        match Context::qp_finish(self, pending, resp.as_bytes(), created.qpn) {
            Ok(q) => {
                let state = Mlx5QpState { qp: q.shared().clone() };
                let Qp { sq, rq, .. } = q;
                Ok((state, Box::new(sq), rq.map(Box::new), cap))
            }
            Err(FinishError { error, pending }) => Err((error, *pending)),
        }
    }

    /// RESET → INIT is refused with `EBUSY` until the CQs have run the
    /// clean owed from the last move to RESET.
    fn qp_before_modify(s: &Mlx5QpState, from: QpState, to: Option<QpState>) -> Result<()> {
        if from == QpState::Reset
            && to == Some(QpState::Init)
            && s.qp.registry().is_some_and(|r| r.clean_pending(&s.qp))
        {
            return Err(Error::check("ibv_modify_qp", Errno::EBUSY).with_message(
                "on mlx5 the completions this QP left before its move to RESET are removed when its CQs are next \
                 polled, and that has not happened yet: poll its CQs once (an empty slice is enough), then retry",
            ));
        }
        Ok(())
    }

    /// The provider learns the new state (sends need RTS, receives INIT;
    /// RESET starts the queue indices over).
    fn qp_after_modify(s: &Mlx5QpState, to: QpState) {
        s.qp.on_state_change(to as u8);
    }

    fn qp_clean_key(s: &Mlx5QpState) -> Option<&Arc<QpShared>> {
        Some(&s.qp)
    }

    /// It leaves the registry; its memory goes with the last reference.
    fn qp_destroyed(s: &Mlx5QpState) {
        s.qp.leave_registry();
    }

    /// The memory is leaked, never freed under the HCA: it stays registered,
    /// and this reference is never released, not even when the context goes.
    fn qp_destroy_failed(s: &Mlx5QpState) {
        std::mem::forget(s.qp.clone());
    }
}

fn caps_of(c: ib_uverbs_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_of(c: QpCaps) -> ib_uverbs_qp_cap {
    ib_uverbs_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

impl SendPost for Box<SendQueue<UarMmio>> {
    #[inline(always)]
    unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded (the queue's `post` has the same contract).
        unsafe { SendQueue::post(self, wrs) }
    }

    /// Kept out of line, so that an inlined one-request post carries only
    /// the other providers' ring code.
    #[inline(never)]
    unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { SendQueue::post(self, core::slice::from_ref(wr)) }
    }
}

/// Kept out of line (a call of its own: a few instructions more per mlx5
/// post): inlined next to rxe's one-SGE path, its loop made every post of
/// either provider save six registers first.
impl RecvPost for Box<RecvQueue> {
    #[inline(never)]
    fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        RecvQueue::post(self, wrs)
    }
}

impl AhOps for Context {
    /// RoCE v1 or v2 goes into the address vector.
    const AH_NEEDS_GID_TYPE: bool = true;
    /// The address vector, under a number of the context's AH table.
    type Ah = Ah;
    type AhResp = mlx5_ib_create_ah_resp;

    /// An address vector with the MAC the kernel resolved.
    fn ah_finish(&self, fd: &Arc<UverbsFd>, a: &AhCreate, resp: &mlx5_ib_create_ah_resp) -> Result<(Ah, u32)> {
        let ah = self.ah_create(&ah_attr(fd, a)?, resp.as_bytes())?;
        let num = ah.ah_num();
        Ok((ah, num))
    }
}

/// What mlx5 builds its address vector from: the address plus the port's
/// link layer (RoCE or InfiniBand) and, on RoCE, the source GID's type
/// (v2: UDP encapsulation; the flow label picks the UDP source port).
fn ah_attr(fd: &UverbsFd, a: &AhCreate) -> Result<AhAttr> {
    let attr = &a.attr;
    let sgid_type = a.sgid_type;
    let is_eth = match a.ethernet {
        Some(e) => e,
        None => u32::from(device::query_port(fd, attr.port_num)?.legacy_resp.link_layer) == IB_LINK_LAYER_ETHERNET,
    };
    let roce_v2 = if is_eth && attr.is_global != 0 {
        match sgid_type {
            Some(t) => t == IB_UVERBS_GID_TYPE_ROCE_V2,
            None => device::query_gid_entry(fd, attr.port_num, attr.grh.sgid_index.into())?
                .is_some_and(|e| e.gid_type == IB_UVERBS_GID_TYPE_ROCE_V2),
        }
    } else {
        false
    };
    Ok(ah_attr_of(attr, is_eth, roce_v2))
}

fn ah_attr_of(attr: &ib_uverbs_ah_attr, is_eth: bool, roce_v2: bool) -> AhAttr {
    let g = &attr.grh;
    AhAttr {
        is_eth,
        roce_v2,
        dlid: attr.dlid,
        sl: attr.sl,
        src_path_bits: attr.src_path_bits,
        static_rate: attr.static_rate,
        grh: (attr.is_global != 0).then_some(Grh {
            dgid: g.dgid,
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rverbs_uapi::ib_user_verbs::ib_uverbs_global_route;

    #[test]
    fn mlx5_address_from_ah_attr() {
        let mut dgid = [0u8; 16];
        dgid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        let a = ib_uverbs_ah_attr {
            grh: ib_uverbs_global_route {
                dgid,
                flow_label: 0x12345,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x20,
                reserved: 0,
            },
            dlid: 0,
            sl: 3,
            src_path_bits: 0,
            static_rate: 2,
            is_global: 1,
            port_num: 1,
            reserved: 0,
        };
        let m = ah_attr_of(&a, true, true);
        assert!(m.is_eth && m.roce_v2);
        assert_eq!((m.sl, m.static_rate, m.dlid), (3, 2, 0));
        let g = m.grh.unwrap();
        assert_eq!(g.dgid, dgid);
        assert_eq!((g.flow_label, g.sgid_index, g.hop_limit, g.traffic_class), (0x12345, 3, 64, 0x20));
        let ib = ib_uverbs_ah_attr { dlid: 0x17, src_path_bits: 1, is_global: 0, ..a };
        let m = ah_attr_of(&ib, false, false);
        assert_eq!((m.dlid, m.src_path_bits, m.grh), (0x17, 1, None));
        assert!(!m.is_eth && !m.roce_v2);
    }
}
