//! mlx5 shared receive queues (rdma-core `srq.c`, the classic free-list
//! scheme; providers.md §B.7).
//!
//! Every SRQ WQE starts with a 16-byte `mlx5_wqe_srq_next_seg` whose
//! `next_wqe_index` links the WQEs into a list. Software posts at `head`
//! and follows the link; the HCA consumes the posted WQEs in the same
//! order, counting them against the doorbell-record counter. A completed
//! WQE (its index is the CQE's `wqe_counter`) is linked after `tail`.
//! `head == tail` means full: the tail WQE is never posted, so the link of
//! the last posted WQE always names a WQE software still owns.
//!
//! Unsafe code (allowed below): the SRQ buffer is DMA memory the HCA
//! reads; it is written through raw pointers only, under the list lock.
#![allow(unsafe_code)]

use core::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rverbs_uapi::mlx5_abi::{mlx5_ib_create_srq, mlx5_ib_create_srq_resp};

use crate::mlx5::barrier;
use crate::mlx5::mem::{DbRec, DmaBuf};
use crate::mlx5::qp::FinishError;
use crate::mlx5::seg::{DataSeg, SrqNextSeg, DS, SRQ_NEXT_WQE_INDEX};
use crate::mlx5::table::{IdLease, NO_UIDX};
use crate::mlx5::{parse, Context};
use crate::wr::{PostError, PostErrorKind, RecvWr};
use crate::{Errno, Error, Result};

/// Geometry of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqSizes {
    /// WQEs in the buffer (power of two); one is always the free-list tail.
    pub nwqes: u32,
    /// log2 of the WQE stride.
    pub wqe_shift: u32,
    /// SGEs per request.
    pub max_gs: u32,
}

impl SrqSizes {
    /// Requests that may be outstanding (`nwqes - 1`).
    pub fn max_wr(&self) -> u32 {
        self.nwqes - 1
    }
}

/// rdma-core `mlx5_alloc_srq_buf` without the wait queue: stride
/// `roundup_pow2(max(32, 16 + 16 * max_sge))`, `nwqes = roundup_pow2(max_wr + 1)`.
pub fn srq_sizes(max_wr: u32, max_sge: u32, max_srq_recv_wr: u32, max_rq_desc_sz: u16) -> Result<SrqSizes> {
    let einval = |m: String| Error::check("ibv_create_srq", Errno::EINVAL).with_message(m);
    if max_wr == 0 || max_wr > max_srq_recv_wr {
        return Err(einval(format!("{max_wr} SRQ work requests; the device takes 1..={max_srq_recv_wr}")));
    }
    if max_sge > u32::from(max_rq_desc_sz) / DS as u32 {
        return Err(einval(format!("{max_sge} SGEs is more than the device takes")));
    }
    let stride = (DS as u32 + max_sge * DS as u32).max(32).next_power_of_two();
    let nwqes = (max_wr + 1).next_power_of_two();
    if nwqes > 0x1_0000 {
        return Err(einval(format!("{max_wr} SRQ work requests is more than 16-bit WQE indexes reach")));
    }
    Ok(SrqSizes { nwqes, wqe_shift: stride.trailing_zeros(), max_gs: (stride - DS as u32) / DS as u32 })
}

#[derive(Debug)]
struct List {
    head: u32,
    tail: u32,
    counter: u32,
}

/// What an SRQ's poster and the CQs that complete its WQEs share.
#[derive(Debug)]
pub struct SrqShared {
    srqn: AtomicU32,
    uidx: u32,
    sizes: SrqSizes,
    wrid: Box<[AtomicU64]>,
    list: Mutex<List>,
    db: DbRec,
    buf: DmaBuf,
    _uidx: Option<IdLease>,
}

impl SrqShared {
    /// SRQ number (0 until created).
    pub fn srqn(&self) -> u32 {
        self.srqn.load(Ordering::Relaxed)
    }
    /// User index ([`NO_UIDX`] with CQE version 0).
    pub fn uidx(&self) -> u32 {
        self.uidx
    }
    /// Geometry.
    pub fn sizes(&self) -> &SrqSizes {
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

    fn wqe(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < nwqes` (masked), so the WQE lies in the buffer.
        unsafe { self.buf.ptr().add(((i & (self.sizes.nwqes - 1)) as usize) << self.sizes.wqe_shift) }
    }

    fn set_next(&self, i: u32, next: u32) {
        // SAFETY: the next-index field of WQE `i` (in the buffer); a plain
        // big-endian u16 store, done under the list lock.
        unsafe {
            ptr::write_unaligned(self.wqe(i).add(SRQ_NEXT_WQE_INDEX).cast::<[u8; 2]>(), (next as u16).to_be_bytes())
        }
    }

    fn next(&self, i: u32) -> u32 {
        // SAFETY: as in `set_next`, a read of a field only software writes.
        u32::from(u16::from_be_bytes(unsafe {
            ptr::read_unaligned(self.wqe(i).add(SRQ_NEXT_WQE_INDEX).cast::<[u8; 2]>())
        }))
    }

    /// The wr_id of WQE `i`.
    #[inline]
    pub(crate) fn wrid(&self, i: u32) -> u64 {
        self.wrid[(i & (self.sizes.nwqes - 1)) as usize].load(Ordering::Relaxed)
    }

    /// A completion retired WQE `i`: link it after the tail
    /// (`mlx5_free_srq_wqe`, classic form).
    pub(crate) fn free(&self, i: u32) {
        let i = i & (self.sizes.nwqes - 1);
        let mut l = self.list.lock().unwrap_or_else(|p| p.into_inner());
        self.set_next(l.tail, i);
        l.tail = i;
    }

    /// Posts `wrs` (see [`Srq::post`]).
    fn post(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut l = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = 0u32;
        let mut failed = None;
        for (index, wr) in wrs.iter().enumerate() {
            if wr.sgl.len() > self.sizes.max_gs as usize {
                failed = Some(PostError {
                    index,
                    kind: PostErrorKind::TooManySge { given: wr.sgl.len(), max: self.sizes.max_gs },
                });
                break;
            }
            let total: u64 = wr.sgl.iter().map(|s| u64::from(s.length)).sum();
            if total > u64::from(u32::MAX) {
                failed = Some(PostError { index, kind: PostErrorKind::TooLong });
                break;
            }
            if l.head == l.tail {
                failed = Some(PostError { index, kind: PostErrorKind::QueueFull });
                break;
            }
            let i = l.head;
            // Masked like `wqe(i)` (the list only ever holds masked indices).
            self.wrid[(i & (self.sizes.nwqes - 1)) as usize].store(wr.wr_id, Ordering::Relaxed);
            let next = self.next(i);
            // SAFETY: WQE `i` is the list head, owned by software (the HCA
            // only consumes WQEs counted by the doorbell record); the data
            // segments follow the 16-byte next segment, `max_gs` of them, and
            // at most `wr.sgl.len() <= max_gs` are written (checked above).
            unsafe {
                let scat = self.wqe(i).add(DS).cast::<DataSeg>();
                let mut j = 0;
                for s in wr.sgl {
                    // A byte count of 0 is believed to mean 2 GiB to the HCA
                    // (MLX5.md, item 10): skipped, as the RQ does.
                    if s.length != 0 {
                        ptr::write(scat.add(j), DataSeg::new(s.length, s.lkey, s.addr));
                        j += 1;
                    }
                }
                if j < self.sizes.max_gs as usize {
                    ptr::write(scat.add(j), DataSeg::terminator());
                }
            }
            l.head = next;
            n += 1;
        }
        if n > 0 {
            l.counter = l.counter.wrapping_add(n);
            // The WQEs before the counter that publishes them.
            barrier::to_device();
            // A 16-bit counter (rdma-core's `uint16_t srq->counter`), like the
            // RQ's and SQ's: the upper half of the word is reserved.
            self.db.store(0, l.counter & 0xffff);
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// An SRQ between the driver data and the kernel's answer; drop it if the
/// kernel create fails.
#[derive(Debug)]
pub struct PendingSrq {
    shared: SrqShared,
    udata: mlx5_ib_create_srq,
}

impl PendingSrq {
    /// The geometry.
    pub fn sizes(&self) -> &SrqSizes {
        &self.shared.sizes
    }
    /// `max_wr` for the core create-SRQ command (`nwqes - 1`, so the kernel
    /// computes the same buffer size).
    pub fn core_max_wr(&self) -> u32 {
        self.shared.sizes.max_wr()
    }
    /// `max_sge` for the core command.
    pub fn core_max_sge(&self) -> u32 {
        self.shared.sizes.max_gs
    }
    /// The driver data.
    pub fn udata(&self) -> &mlx5_ib_create_srq {
        &self.udata
    }
}

/// A created SRQ: its poster half. CQs reach the rest through the context.
#[derive(Debug)]
pub struct Srq {
    shared: Arc<SrqShared>,
}

impl Srq {
    /// The shared state (pass it in [`crate::mlx5::QpPrepareArgs::srq`]).
    pub fn shared(&self) -> &Arc<SrqShared> {
        &self.shared
    }
    /// SRQ number.
    pub fn srqn(&self) -> u32 {
        self.shared.srqn()
    }
    /// Posts receive requests (no syscall, no MMIO). Same error rule as
    /// QP receives; [`PostErrorKind::QueueFull`] when every WQE but the
    /// free-list tail is posted.
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.shared.post(wrs)
    }
}

impl Context {
    /// Phase one of create-SRQ: the buffer with its WQEs linked 0 → 1 → …,
    /// the doorbell record, a user index (CQE version 1); returns them with
    /// the driver data. Use [`PendingSrq::core_max_wr`] /
    /// [`core_max_sge`](PendingSrq::core_max_sge) in the core command.
    ///
    /// Crate-internal in spirit, as [`Context::qp_prepare`].
    pub(crate) fn srq_prepare(&self, max_wr: u32, max_sge: u32) -> Result<(PendingSrq, mlx5_ib_create_srq)> {
        const VERB: &str = "ibv_create_srq";
        let dev = self.device();
        let sizes = srq_sizes(max_wr, max_sge, dev.max_srq_recv_wr, dev.max_rq_desc_sz)?;
        let buf = DmaBuf::new(VERB, (sizes.nwqes as usize) << sizes.wqe_shift)?;
        let db = self.dbrecs().alloc(VERB)?;
        let uidx = if dev.cqe_version >= 1 { Some(self.uidx_alloc().alloc(VERB)?) } else { None };
        let uidx_v = uidx.as_ref().map_or(NO_UIDX, IdLease::id);
        let shared = SrqShared {
            srqn: AtomicU32::new(0),
            uidx: uidx_v,
            sizes,
            wrid: (0..sizes.nwqes).map(|_| AtomicU64::new(0)).collect(),
            list: Mutex::new(List { head: 0, tail: sizes.nwqes - 1, counter: 0 }),
            db,
            buf,
            _uidx: uidx,
        };
        for i in 0..sizes.nwqes - 1 {
            // SAFETY: WQE `i` of our fresh buffer; nothing else sees it yet.
            unsafe { ptr::write(shared.wqe(i).cast::<SrqNextSeg>(), SrqNextSeg::new((i + 1) as u16)) };
        }
        let udata = mlx5_ib_create_srq {
            buf_addr: shared.buf.addr(),
            db_addr: shared.db.addr(),
            flags: 0,
            uidx: uidx_v,
            ..Default::default()
        };
        Ok((PendingSrq { shared, udata }, udata))
    }

    /// Phase two: the kernel created the SRQ and answered `drv_out`
    /// (`mlx5_ib_create_srq_resp`).
    pub(crate) fn srq_finish(&self, pending: PendingSrq, drv_out: &[u8]) -> Result<Srq, FinishError<PendingSrq>> {
        let resp: mlx5_ib_create_srq_resp = match parse("ibv_create_srq", drv_out) {
            Ok(r) => r,
            Err(error) => return Err(FinishError { error, pending: Box::new(pending) }),
        };
        pending.shared.srqn.store(resp.srqn, Ordering::Relaxed);
        let shared = Arc::new(pending.shared);
        self.registry().insert_srq(resp.srqn, shared.clone());
        tracing::debug!(srqn = resp.srqn, sizes = ?shared.sizes, "mlx5 SRQ ready");
        Ok(Srq { shared })
    }

    /// After the kernel destroyed SRQ `srqn`: forgets it at once (the
    /// number may be reused right after). Its memory stays with its driver
    /// and is freed when that and the last QP reference go.
    ///
    /// Crate-internal in spirit: called before the kernel destroy, it lets
    /// the SRQ's memory go while the HCA may still use it.
    pub(crate) fn srqn_destroyed(&self, srqn: u32) {
        self.registry().remove_srq(srqn);
    }
}
