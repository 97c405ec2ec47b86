//! mlx5 QPs: queue sizing (rdma-core `verbs.c mlx5_calc_wq_size` and
//! friends), the buffer (receive queue first, send queue after it), the
//! state the send half, receive half and CQs share ([`QpShared`]), and the
//! two-phase create ([`PendingQp`] → [`Qp`]).
//!
//! Unsafe code (allowed below): the per-slot work-request-id arrays are
//! indexed without bounds checks on the data path (each array has
//! `mask + 1` entries, every index is masked).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use rverbs_uapi::ib_verbs_values::{IB_QPS_ERR, IB_QPS_INIT, IB_QPS_RESET, IB_QPS_RTS};
use rverbs_uapi::mlx5_abi::{mlx5_ib_create_qp, mlx5_ib_create_qp_resp, MLX5_QP_FLAG_UAR_PAGE_INDEX};

use crate::mlx5::mem::{DbRec, DmaBuf};
use crate::mlx5::mmio::{Mmio, UarMmio};
use crate::mlx5::recv::RecvQueue;
use crate::mlx5::seg::{DS, WQEBB};
use crate::mlx5::send::SendQueue;
use crate::mlx5::srq::SrqShared;
use crate::mlx5::table::{IdLease, Registry, NO_UIDX};
use crate::mlx5::uar::{RegInfo, UarReg};
use crate::mlx5::{parse, Context, DeviceInfo};
use crate::{Errno, Error, Result};

/// QP transport, as far as the provider cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// Queue capacities (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send work requests outstanding.
    pub max_send_wr: u32,
    /// Receive work requests outstanding.
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Inline bytes per send request.
    pub max_inline_data: u32,
}

/// What a QP is created with.
#[derive(Clone, Debug)]
pub struct QpPrepareArgs {
    /// Transport.
    pub qp_type: QpType,
    /// Requested capacities.
    pub caps: QpCaps,
    /// The SRQ it receives from (then it has no receive queue).
    pub srq: Option<Arc<SrqShared>>,
    /// `sq_sig_all`: every send WQE generates a completion.
    pub sq_sig_all: bool,
}

impl QpPrepareArgs {
    /// Whether the QP receives from an SRQ.
    pub fn has_srq(&self) -> bool {
        self.srq.is_some()
    }
}

/// Control segment + the largest operation part, per transport (rdma-core
/// `_sq_overhead` without bind-MW / local-invalidate, which this provider
/// does not post): RC ctrl+raddr+atomic, UC ctrl+raddr, UD ctrl+datagram.
pub fn sq_overhead(t: QpType) -> u32 {
    match t {
        QpType::Rc => 16 + 16 + 16,
        QpType::Uc => 16 + 16,
        QpType::Ud => 16 + 48,
    }
}

/// The geometry of a QP's buffer and the resulting capacities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpSizes {
    /// Send queue length in 64-byte WQEBBs (power of two, or 0).
    pub sq_wqe_cnt: u32,
    /// Bytes one send work request may take (multiple of 64).
    pub sq_wqe_size: u32,
    /// Send requests that may be outstanding.
    pub sq_max_post: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// Inline bytes per send request.
    pub max_inline: u32,
    /// Receive WQEs (power of two, or 0).
    pub rq_wqe_cnt: u32,
    /// log2 of the receive WQE stride.
    pub rq_wqe_shift: u32,
    /// Receive requests that may be outstanding.
    pub rq_max_post: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Offset of the send queue in the buffer (= receive queue bytes).
    pub sq_offset: usize,
    /// Bytes of the buffer in use (receive queue + send queue).
    pub buf_len: usize,
}

impl QpSizes {
    /// The capacities the QP really has.
    pub fn caps(&self) -> QpCaps {
        QpCaps {
            max_send_wr: self.sq_max_post,
            max_recv_wr: self.rq_max_post,
            max_send_sge: self.max_send_sge,
            max_recv_sge: self.max_recv_sge,
            max_inline_data: self.max_inline,
        }
    }
}

fn einval(msg: String) -> Error {
    Error::check("ibv_create_qp", Errno::EINVAL).with_message(msg)
}

/// Sizes a QP's queues exactly as rdma-core does (providers.md §B.4),
/// minus the bind-MW overhead.
pub fn qp_sizes(dev: &DeviceInfo, qp_type: QpType, caps: &QpCaps, has_srq: bool) -> Result<QpSizes> {
    let mut s = QpSizes::default();
    // Send queue.
    if caps.max_send_wr > 0 {
        let ov = sq_overhead(qp_type);
        let desc = u32::from(dev.max_sq_desc_sz);
        let max_gather = desc.saturating_sub(ov) / DS as u32;
        if caps.max_send_sge > max_gather {
            return Err(einval(format!("{} send SGEs, the device takes at most {max_gather}", caps.max_send_sge)));
        }
        let inl = if caps.max_inline_data > 0 {
            ov.checked_add(caps.max_inline_data.saturating_add(4 + 15) & !15)
                .ok_or_else(|| einval("inline size overflows".into()))?
        } else {
            0
        };
        let size = (ov + caps.max_send_sge * DS as u32).max(inl);
        if size > desc {
            return Err(einval(format!("a send WQE of {size} bytes exceeds the device's {desc}")));
        }
        let wqe_size = size.div_ceil(WQEBB as u32) * WQEBB as u32;
        if caps.max_send_wr > 0x7fff_ffff / desc.max(1) {
            return Err(einval(format!("{} send work requests is too many", caps.max_send_wr)));
        }
        let wq_size = (caps.max_send_wr * wqe_size).next_power_of_two();
        s.sq_wqe_cnt = wq_size / WQEBB as u32;
        if s.sq_wqe_cnt > dev.max_send_wqebb {
            return Err(einval(format!(
                "{} send WQEBBs needed, the device has at most {}",
                s.sq_wqe_cnt, dev.max_send_wqebb
            )));
        }
        s.sq_wqe_size = wqe_size;
        s.sq_max_post = wq_size / wqe_size;
        s.max_send_sge = caps.max_send_sge;
        s.max_inline = wqe_size - ov - 4;
    }
    // Receive queue (none with an SRQ: the kernel forces it to 0 as well).
    if caps.max_recv_wr > 0 && !has_srq {
        if caps.max_recv_wr > dev.max_recv_wr {
            return Err(einval(format!(
                "{} receive work requests, the device takes at most {}",
                caps.max_recv_wr, dev.max_recv_wr
            )));
        }
        let size = DS as u32 * caps.max_recv_sge.max(1);
        if size > u32::from(dev.max_rq_desc_sz) {
            return Err(einval(format!("{} receive SGEs is more than the device takes", caps.max_recv_sge)));
        }
        let stride = size.next_power_of_two();
        let wq_size = (caps.max_recv_wr.next_power_of_two() * stride).max(WQEBB as u32);
        s.rq_wqe_cnt = wq_size / stride;
        s.rq_wqe_shift = stride.trailing_zeros();
        s.rq_max_post = s.rq_wqe_cnt;
        s.max_recv_sge = stride / DS as u32;
    }
    s.sq_offset = (s.rq_wqe_cnt as usize) << s.rq_wqe_shift;
    s.buf_len = s.sq_offset + s.sq_wqe_cnt as usize * WQEBB;
    Ok(s)
}

/// The send-queue bookkeeping the CQ needs: per WQEBB slot, the wr_id and
/// the request counter just past the request that starts there (`end`,
/// its `head + 1`); and
/// `tail`, the request counter up to which send requests have retired.
/// `tail` is the `end` word of an extra slot in front of the array, so that
/// a CQ reaches it at a fixed offset from the slot array it already holds.
///
/// The request counters are 64-bit and never start over, not even when
/// the QP goes through RESET (only the WQEBB counter the device sees does):
/// a poller that read a slot of the old epoch and stores its `end`
/// after the reset stores a value no greater than the count at the reset,
/// which can only make a poster see less room than it has, never more
/// (docs/MEMORY_ORDERING.md, audit M2).
#[derive(Debug)]
pub struct SqShared {
    /// `mask + 2` entries: `[0].end` is [`tail`](Self::tail) (`[0].wrid` is
    /// unused), `[1..]` the slots.
    slots: Box<[SqSlot]>,
    /// Mask of the slot arrays (`sq_wqe_cnt - 1`; 0 with no send queue).
    pub(crate) mask: u32,
}

/// The receive-queue bookkeeping: per slot the wr_id and request counter
/// of the receive posted there, and the counter up to which receives have
/// completed; counted as the send queue's ([`SqShared`]).
#[derive(Debug)]
pub struct RqShared {
    slots: Box<[SqSlot]>,
    /// `rq_wqe_cnt - 1`.
    pub(crate) mask: u32,
    /// `head + 1` of the last receive completed (written by the polling
    /// CQ, Release).
    pub(crate) tail: AtomicU64,
}

/// How far [`SqShared::tail`] lies before [`SqShared::slots_ptr`], in bytes.
pub(crate) const TAIL_OFFSET: usize = core::mem::size_of::<SqSlot>() - core::mem::offset_of!(SqSlot, end);

/// Per slot of a work queue: the wr_id and, as `end`, the request counter
/// just past the request starting there (its `head + 1`: what the queue's
/// `tail` becomes when it retires, stored as is with no add on the poll
/// path). One 16-byte entry: one cache line holds four.
#[derive(Debug, Default)]
pub struct SqSlot {
    pub(crate) wrid: AtomicU64,
    pub(crate) end: AtomicU64,
}

fn slots<T: Default>(n: u32) -> Box<[T]> {
    (0..n.max(1)).map(|_| T::default()).collect()
}

impl SqShared {
    fn new(cnt: u32) -> SqShared {
        let mask = cnt.saturating_sub(1);
        SqShared { slots: (0..mask as usize + 2).map(|_| SqSlot::default()).collect(), mask }
    }
    /// `head + 1` of the last send request retired (written by the polling
    /// CQ, Release): the `end` word just before the first slot
    /// ([`TAIL_OFFSET`] bytes before [`slots_ptr`](Self::slots_ptr)).
    #[inline(always)]
    pub(crate) fn tail(&self) -> &AtomicU64 {
        // SAFETY: the array has `mask + 2 >= 2` entries.
        &unsafe { self.slots.get_unchecked(0) }.end
    }
    /// Slot `idx` (masked).
    #[inline(always)]
    pub(crate) fn slot(&self, idx: u32) -> &SqSlot {
        // SAFETY: the array has `mask + 2` entries, the slots from 1 on,
        // and the index is masked.
        unsafe { self.slots.get_unchecked(1 + (idx & self.mask) as usize) }
    }
    /// The first slot (`mask + 1` of them), for a data path that indexes
    /// them itself; [`tail`](Self::tail) is [`TAIL_OFFSET`] bytes before
    /// it. Derived from the whole array: a pointer taken from `&slots[1]`
    /// may only reach that one entry.
    #[inline(always)]
    pub(crate) fn slots_ptr(&self) -> *const SqSlot {
        // SAFETY: entry 1 of an array of at least 2.
        unsafe { self.slots.as_ptr().add(1) }
    }
    /// The wr_id of slot `idx` (masked).
    #[cfg(test)]
    pub(crate) fn wrid(&self, idx: u32) -> &AtomicU64 {
        &self.slot(idx).wrid
    }
}

impl RqShared {
    fn new(cnt: u32) -> RqShared {
        RqShared { slots: slots(cnt), mask: cnt.saturating_sub(1), tail: AtomicU64::new(0) }
    }
    /// Slot `idx` (masked).
    #[inline(always)]
    pub(crate) fn slot(&self, idx: u32) -> &SqSlot {
        // SAFETY: the array has `mask + 1` entries (at least 1) and the
        // index is masked.
        unsafe { self.slots.get_unchecked((idx & self.mask) as usize) }
    }
}

/// What the send half, the receive half and the CQs share about one QP.
/// Registered in the context under [`rsn`](Self::rsn) so CQs find it; owns
/// the queue buffer and the doorbell record, so they live as long as
/// anything can still reach them.
#[derive(Debug)]
pub struct QpShared {
    rsn: u32,
    qpn: u32,
    uidx: u32,
    qp_type: QpType,
    /// `epoch << 8 | state` (`enum ibv_qp_state`); the epoch moves on every
    /// transition to RESET, which resets the queue indices.
    state: AtomicU32,
    pub(crate) sq: SqShared,
    pub(crate) rq: RqShared,
    pub(crate) srq: Option<Arc<SrqShared>>,
    pub(crate) db: DbRec,
    pub(crate) buf: DmaBuf,
    sizes: QpSizes,
    reg: Option<UarReg>,
    _uidx: Option<IdLease>,
    /// The context's registry it is entered in (weak: the registry holds
    /// the QP), for the QP's own removal and clean checks.
    registry: Weak<Registry>,
}

impl QpShared {
    /// The registry it was entered in, unless its context is gone.
    pub(crate) fn registry(&self) -> Option<Arc<Registry>> {
        self.registry.upgrade()
    }

    /// After the kernel destroyed the QP, the context forgets it (its send
    /// and receive halves live in separate objects, so there is no whole
    /// [`Qp`] to hand back). Its memory goes when the last half, CQ cache
    /// and clean request holding it goes. False if it was not the
    /// registered QP (or the context is gone).
    ///
    /// Crate-internal in spirit: called before the kernel destroy, it lets
    /// the QP's memory go while the HCA may still use it.
    pub(crate) fn leave_registry(self: &Arc<Self>) -> bool {
        self.registry().is_some_and(|r| r.remove_qp_if(self))
    }
    /// The resource number CQEs name this QP by (user index, or QPN with
    /// CQE version 0).
    pub fn rsn(&self) -> u32 {
        self.rsn
    }
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// User index ([`NO_UIDX`] with CQE version 0).
    pub fn uidx(&self) -> u32 {
        self.uidx
    }
    /// Transport.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }
    /// Queue geometry.
    pub fn sizes(&self) -> &QpSizes {
        &self.sizes
    }
    /// Buffer address given to the kernel.
    pub fn buf_addr(&self) -> u64 {
        self.buf.addr()
    }
    /// Doorbell record address given to the kernel.
    pub fn db_addr(&self) -> u64 {
        self.db.addr()
    }
    /// The register this QP rings, if assigned.
    pub fn reg(&self) -> Option<RegInfo> {
        self.reg.as_ref().map(UarReg::info)
    }
    /// The SRQ it receives from.
    pub fn srq(&self) -> Option<&Arc<SrqShared>> {
        self.srq.as_ref()
    }

    /// The state word (`epoch << 8 | state`).
    #[inline(always)]
    pub(crate) fn state_word(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// The current `enum ibv_qp_state`.
    pub fn state(&self) -> u8 {
        self.state_word() as u8
    }

    /// Tells the provider the QP moved to `new_state` (`enum ibv_qp_state`)
    /// after a successful MODIFY_QP. Sends need RTS or later, receives INIT
    /// or later. A move to RESET starts a new epoch: the posters start the
    /// device's WQE counters over at 0 and re-base their request counts
    /// (rdma-core `mlx5_init_qp_indices`), and the doorbell record is
    /// cleared (`db = 0`); the caller also cleans the QP's completions out
    /// of its CQs ([`crate::mlx5::Cq::clean_qp`]) before the QP leaves
    /// RESET. The retire counters are left alone: see [`SqShared`].
    ///
    /// Crate-internal in spirit: it clears the doorbell record the HCA
    /// reads, and starts a new epoch only the MODIFY_QP it follows makes
    /// right.
    pub(crate) fn on_state_change(&self, new_state: u8) {
        if u32::from(new_state) == IB_QPS_RESET {
            self.db.store(0, 0);
            self.db.store(1, 0);
            let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(((w >> 8).wrapping_add(1) << 8) | u32::from(new_state))
            });
        } else {
            let _ = self
                .state
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| Some((w & !0xff) | u32::from(new_state)));
        }
    }
}

/// Whether a state accepts sends (RTS, SQD, SQE, ERR: posts in ERR are
/// flushed by the device).
#[inline(always)]
pub(crate) fn send_ok(state: u8) -> bool {
    (IB_QPS_RTS..=IB_QPS_ERR).contains(&u32::from(state))
}

/// Whether a state accepts receives (INIT or later).
#[inline(always)]
pub(crate) fn recv_ok(state: u8) -> bool {
    (IB_QPS_INIT..=IB_QPS_ERR).contains(&u32::from(state))
}

/// A QP between the driver data being built and the kernel's answer: it
/// owns the buffer, the doorbell record, the user index and the register.
/// Dropping it (the kernel create failed) frees them all.
#[derive(Debug)]
pub struct PendingQp {
    pub(crate) args: QpPrepareArgs,
    pub(crate) sizes: QpSizes,
    pub(crate) buf: DmaBuf,
    pub(crate) db: DbRec,
    pub(crate) uidx: Option<IdLease>,
    pub(crate) reg: Option<UarReg>,
    pub(crate) udata: mlx5_ib_create_qp,
}

impl PendingQp {
    /// The geometry chosen.
    pub fn sizes(&self) -> &QpSizes {
        &self.sizes
    }
    /// The capacities the QP will have (report these to the user).
    pub fn caps(&self) -> QpCaps {
        self.sizes.caps()
    }
    /// The capacities for the core create-QP command: the requested ones
    /// with `max_inline_data` replaced by what the WQE size allows, as
    /// rdma-core sends them; `max_recv_wr`/`max_recv_sge` are 0 with an SRQ.
    pub fn core_caps(&self) -> QpCaps {
        let mut c = self.args.caps;
        if c.max_send_wr > 0 {
            c.max_inline_data = self.sizes.max_inline;
        }
        if self.args.srq.is_some() {
            c.max_recv_wr = 0;
            c.max_recv_sge = 0;
        }
        c
    }
    /// The driver data of the create command (also returned by `qp_prepare`).
    pub fn udata(&self) -> &mlx5_ib_create_qp {
        &self.udata
    }
    /// The user index in the driver data.
    pub fn uidx(&self) -> u32 {
        self.udata.uidx
    }
}

/// Why `Context::qp_finish` failed, with the pending QP handed back: the
/// kernel object exists, so destroy it first, then drop `pending`.
#[derive(Debug)]
pub struct FinishError<P> {
    /// What went wrong.
    pub error: Error,
    /// The allocations; drop them only after the kernel destroy.
    pub pending: Box<P>,
}

impl<P> std::fmt::Display for FinishError<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// A created mlx5 QP: its send half, its receive half (absent with an
/// SRQ) and the shared state. Generic over the doorbell seam.
#[derive(Debug)]
pub struct Qp<M: Mmio = UarMmio> {
    /// Send queue.
    pub sq: SendQueue<M>,
    /// Receive queue; `None` with an SRQ or `max_recv_wr == 0`.
    pub rq: Option<RecvQueue>,
    shared: Arc<QpShared>,
}

impl<M: Mmio> Qp<M> {
    /// The shared state (registered with the context).
    pub fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.shared.qpn
    }
    /// See [`QpShared::on_state_change`].
    #[cfg(any(test, feature = "mock"))]
    pub(crate) fn on_state_change(&self, new_state: u8) {
        self.shared.on_state_change(new_state)
    }
    /// The two halves, for two threads.
    pub fn split(&mut self) -> (&mut SendQueue<M>, Option<&mut RecvQueue>) {
        (&mut self.sq, self.rq.as_mut())
    }
}

impl Context {
    /// Phase one of create-QP: sizes the queues, allocates the buffer
    /// (receive queue at 0, send queue after it), the doorbell record, a
    /// user index (CQE version 1) and, with dynamic UARs, a doorbell
    /// register; returns them with the driver data (`mlx5_ib_create_qp`)
    /// for the kernel command. Put [`PendingQp::core_caps`] into the core
    /// command. If the kernel create fails, drop the pending QP.
    ///
    /// Crate-internal in spirit: the pending QP owns memory a kernel QP
    /// made from its driver data would use, and dropping it frees that.
    pub(crate) fn qp_prepare(&self, args: &QpPrepareArgs) -> Result<(PendingQp, mlx5_ib_create_qp)> {
        const VERB: &str = "ibv_create_qp";
        let dev = self.device();
        let sizes = qp_sizes(dev, args.qp_type, &args.caps, args.srq.is_some())?;
        let buf = DmaBuf::new(VERB, sizes.buf_len)?;
        let db = self.dbrecs().alloc(VERB)?;
        let uidx = if dev.cqe_version >= 1 { Some(self.uidx_alloc().alloc(VERB)?) } else { None };
        let reg = self.uars().qp_reg()?;
        let mut udata = mlx5_ib_create_qp {
            buf_addr: buf.addr(),
            db_addr: db.addr(),
            sq_wqe_count: sizes.sq_wqe_cnt,
            rq_wqe_count: sizes.rq_wqe_cnt,
            rq_wqe_shift: sizes.rq_wqe_shift,
            uidx: uidx.as_ref().map_or(NO_UIDX, IdLease::id),
            ..Default::default()
        };
        if let Some(r) = &reg {
            udata.flags |= MLX5_QP_FLAG_UAR_PAGE_INDEX;
            udata.bfreg_index = r.info().uar_index;
        }
        let pending = PendingQp { args: args.clone(), sizes, buf, db, uidx, reg, udata };
        Ok((pending, udata))
    }

    /// Phase two: the kernel created QP `qpn` and answered `drv_out`
    /// (`mlx5_ib_create_qp_resp`). Registers the QP for its CQs and maps
    /// its doorbell register. On error the pending QP comes back: destroy
    /// the kernel QP, then drop it.
    pub(crate) fn qp_finish(&self, pending: PendingQp, drv_out: &[u8], qpn: u32) -> Result<Qp, FinishError<PendingQp>> {
        self.qp_finish_with(pending, drv_out, qpn, |reg, page| UarMmio::new(page, reg.offset, reg.bf_half.max(8) * 2))
    }

    /// [`qp_finish`](Self::qp_finish) with the doorbell seam supplied by the
    /// caller (tests, the HCA model, benchmarks): `mmio` gets the register's
    /// place and its UAR page.
    pub(crate) fn qp_finish_with<M: Mmio>(
        &self,
        pending: PendingQp,
        drv_out: &[u8],
        qpn: u32,
        mmio: impl FnOnce(&RegInfo, &Arc<crate::mlx5::uar::UarPage>) -> M,
    ) -> Result<Qp<M>, FinishError<PendingQp>> {
        const VERB: &str = "ibv_create_qp";
        let resp: mlx5_ib_create_qp_resp = match parse(VERB, drv_out) {
            Ok(r) => r,
            Err(error) => return Err(FinishError { error, pending: Box::new(pending) }),
        };
        let PendingQp { args, sizes, buf, db, uidx, reg, udata } = pending;
        let reg = match reg {
            Some(r) => r,
            None => match self.uars().static_reg(resp.bfreg_index) {
                Ok(r) => r,
                Err(error) => {
                    let pending = PendingQp { args, sizes, buf, db, uidx, reg: None, udata };
                    return Err(FinishError { error, pending: Box::new(pending) });
                }
            },
        };
        let info = reg.info();
        let m = mmio(&info, reg.page());
        let uidx_v = uidx.as_ref().map_or(NO_UIDX, IdLease::id);
        let rsn = if uidx.is_some() { uidx_v } else { qpn };
        let shared = Arc::new(QpShared {
            rsn,
            qpn,
            uidx: uidx_v,
            qp_type: args.qp_type,
            state: AtomicU32::new(IB_QPS_RESET),
            sq: SqShared::new(sizes.sq_wqe_cnt),
            rq: RqShared::new(sizes.rq_wqe_cnt),
            srq: args.srq.clone(),
            db,
            buf,
            sizes,
            reg: Some(reg),
            _uidx: uidx,
            registry: Arc::downgrade(self.registry()),
        });
        if let Err(error) = self.registry().insert_qp(rsn, shared.clone()) {
            // Hand the allocations back: nothing else holds `shared` yet.
            return match Arc::try_unwrap(shared) {
                Ok(s) => Err(FinishError { error, pending: Box::new(s.into_pending(args, udata)) }),
                Err(_) => unreachable!("the registry refused it, so we hold the only reference"),
            };
        }
        let sq =
            SendQueue::new(shared.clone(), m, (info.bf_half, info.bf_copy), args.sq_sig_all, self.ah_table().clone());
        let rq = (sizes.rq_wqe_cnt > 0).then(|| RecvQueue::new(shared.clone()));
        tracing::debug!(qpn, rsn, ?sizes, uar = info.uar_index, bf = info.bf_half != 0, "mlx5 QP ready");
        Ok(Qp { sq, rq, shared })
    }
}

impl QpShared {
    fn into_pending(self, args: QpPrepareArgs, udata: mlx5_ib_create_qp) -> PendingQp {
        let QpShared { db, buf, sizes, reg, _uidx, .. } = self;
        PendingQp { args, sizes, buf, db, uidx: _uidx, reg, udata }
    }
}
