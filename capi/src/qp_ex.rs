//! Extended QPs: the `create_qp_ex` op (`ibv_create_qp_ex`),
//! `ibv_qp_to_qp_ex`, and the `ibv_wr_*` ops of `ibv_qp_ex` (`wr_start`,
//! the builders `wr_send`, `wr_send_imm`, `wr_rdma_write(_imm)`,
//! `wr_rdma_read`, `wr_atomic_cmp_swp`, `wr_atomic_fetch_add`, the setters
//! `wr_set_sge(_list)`, `wr_set_inline_data(_list)`, `wr_set_ud_addr`, then
//! `wr_complete` or `wr_abort`).
//!
//! A builder appends a request (its `wr_id` and `wr_flags` read from the
//! `ibv_qp_ex` fields the caller set), a setter completes the last one, as
//! rdma-core's rxe does; `wr_complete` posts them, `wr_abort` drops them.
//! The requests wait in a per-QP batch allocated at creation for the send
//! queue's depth (SGEs and inline bytes included: inline data is copied when
//! set, so the caller may reuse its buffer at once): no allocation after
//! `create_qp_ex`. Errors of builders and setters are remembered and
//! returned by `wr_complete` (ENOSPC: queue, SGE or inline space exceeded;
//! EINVAL: a setter with no request, a UD request without an address).
//!
//! `wr_complete` posts the batch in chunks of 16 requests, one doorbell
//! each, like `post_send`.

use core::ffi::{c_int, c_void};

use rverbs::{QpCap, RemoteAddr, SendFlags, SendOp, SendWr, Sge, UdDest};

use crate::abi::{ibv_ah, ibv_context, ibv_data_buf, ibv_qp, ibv_qp_ex, ibv_qp_init_attr, ibv_qp_init_attr_ex};
use crate::abi::{ibv_sge, Slot};
use crate::errno::{set_errno, EINVAL, ENOSPC, EOPNOTSUPP};
use crate::export::symver;
use crate::qp::{post_errno, Qp, CHUNK, MAX_SGE};
use crate::spin::SpinLock;

/// `IBV_QP_INIT_ATTR_PD`.
const INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
const INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `IBV_QP_EX_WITH_*` this library builds.
const WITH_RDMA_WRITE: u64 = 1 << 0;
const WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
const WITH_SEND: u64 = 1 << 2;
const WITH_SEND_WITH_IMM: u64 = 1 << 3;
const WITH_RDMA_READ: u64 = 1 << 4;
const WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
const WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
const WITH_LOCAL_INV: u64 = 1 << 7;
const WITH_BIND_MW: u64 = 1 << 8;
const WITH_SEND_WITH_INV: u64 = 1 << 9;
const WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// The send ops a QP type may ask for: rdma-core 44's rxe sets (44 has
/// no `IBV_QP_EX_WITH_FLUSH`, bit 11: it came with 45), less
/// SEND_WITH_INV on UC (rverbs invalidates remotely on RC only). Atomic write is accepted whatever the kernel, as
/// rdma-core's rxe: 6.1's completes it with an error.
fn supported_send_ops(qp_type: u32) -> Option<u64> {
    let uc = WITH_RDMA_WRITE | WITH_RDMA_WRITE_WITH_IMM | WITH_SEND | WITH_SEND_WITH_IMM;
    let rc_only = WITH_RDMA_READ | WITH_ATOMIC_CMP_AND_SWP | WITH_ATOMIC_FETCH_AND_ADD | WITH_LOCAL_INV;
    match qp_type {
        2 => Some(uc | rc_only | WITH_BIND_MW | WITH_SEND_WITH_INV | WITH_ATOMIC_WRITE),
        3 => Some(uc | WITH_BIND_MW),
        4 => Some(WITH_SEND | WITH_SEND_WITH_IMM),
        _ => None,
    }
}

/// One request built by `wr_*`, waiting for `wr_complete`.
#[derive(Clone, Copy)]
struct Pending {
    wr_id: u64,
    flags: SendFlags,
    op: SendOp,
    /// SGEs in this request's slot of [`WrBatch::sges`].
    nsge: usize,
    /// Inline bytes in this request's slot of [`WrBatch::inline`], when set.
    inline: Option<usize>,
    ud: Option<UdDest<'static>>,
}

/// The requests between `wr_start` and `wr_complete`, with room for a
/// whole send queue of them, allocated once.
pub(crate) struct WrBatch {
    pending: Vec<Pending>,
    /// Most requests one batch holds: the send queue's depth.
    depth: usize,
    sges: Vec<Sge<'static>>,
    inline: Vec<u8>,
    sge_per: usize,
    inline_per: usize,
    /// The first error of a builder or setter since `wr_start`.
    err: c_int,
}

impl WrBatch {
    /// The batch of a QP not created by `create_qp_ex` (`NO_BATCH`).
    const fn none() -> Self {
        WrBatch {
            pending: Vec::new(),
            depth: 0,
            sges: Vec::new(),
            inline: Vec::new(),
            sge_per: 0,
            inline_per: 0,
            err: 0,
        }
    }

    fn for_cap(cap: &QpCap) -> Self {
        let depth = cap.max_send_wr as usize;
        let sge_per = (cap.max_send_sge as usize).clamp(1, MAX_SGE);
        let inline_per = cap.max_inline_data as usize;
        WrBatch {
            pending: Vec::with_capacity(depth),
            depth,
            sges: vec![Sge::new(0, 0, 0); depth * sge_per],
            inline: vec![0; depth * inline_per],
            sge_per,
            inline_per,
            err: 0,
        }
    }

    fn fail(&mut self, e: c_int) {
        if self.err == 0 {
            self.err = e;
        }
    }

    /// The last request, for a setter (EINVAL when there is none).
    fn last(&mut self) -> Option<(usize, &mut Pending)> {
        if self.err != 0 {
            return None;
        }
        let i = self.pending.len().checked_sub(1);
        match i {
            Some(i) => Some((i, &mut self.pending[i])),
            None => {
                self.err = EINVAL;
                None
            }
        }
    }

    fn reset(&mut self) {
        self.pending.clear();
        self.err = 0;
    }
}

/// `ibv_qp` extended with no `ibv_wr_*` ops (a QP from `ibv_create_qp`;
/// [`set_send_ops`] adds those `ibv_create_qp_ex` asks for).
#[inline]
pub(crate) fn no_ops(qp_base: ibv_qp) -> ibv_qp_ex {
    let null = core::ptr::null();
    ibv_qp_ex {
        qp_base,
        comp_mask: 0,
        wr_id: 0,
        wr_flags: 0,
        wr_atomic_cmp_swp: null,
        wr_atomic_fetch_add: null,
        wr_bind_mw: null,
        wr_local_inv: null,
        wr_rdma_read: null,
        wr_rdma_write: null,
        wr_rdma_write_imm: null,
        wr_send: null,
        wr_send_imm: null,
        wr_send_inv: null,
        wr_send_tso: null,
        wr_set_ud_addr: null,
        wr_set_xrc_srqn: null,
        wr_set_inline_data: null,
        wr_set_inline_data_list: null,
        wr_set_sge: null,
        wr_set_sge_list: null,
        wr_start: null,
        wr_complete: null,
        wr_abort: null,
        wr_atomic_write: null,
    }
}

/// Fills in the `ibv_wr_*` ops that `ops` (`IBV_QP_EX_WITH_*`) asks for,
/// and the setters and batch ops every extended QP has. Out of line: most
/// QPs come from `ibv_create_qp`, whose create should not carry it.
#[inline(never)]
pub(crate) fn set_send_ops(x: &mut ibv_qp_ex, ops: u64) {
    let null = core::ptr::null();
    let pick = |bit: u64, f: Slot| if ops & bit != 0 { f } else { null };
    x.wr_rdma_write = pick(WITH_RDMA_WRITE, wr_rdma_write as Slot);
    x.wr_rdma_write_imm = pick(WITH_RDMA_WRITE_WITH_IMM, wr_rdma_write_imm as Slot);
    x.wr_send = pick(WITH_SEND, wr_send as Slot);
    x.wr_send_imm = pick(WITH_SEND_WITH_IMM, wr_send_imm as Slot);
    x.wr_rdma_read = pick(WITH_RDMA_READ, wr_rdma_read as Slot);
    x.wr_atomic_cmp_swp = pick(WITH_ATOMIC_CMP_AND_SWP, wr_atomic_cmp_swp as Slot);
    x.wr_atomic_fetch_add = pick(WITH_ATOMIC_FETCH_AND_ADD, wr_atomic_fetch_add as Slot);
    x.wr_local_inv = pick(WITH_LOCAL_INV, wr_local_inv as Slot);
    x.wr_bind_mw = pick(WITH_BIND_MW, wr_bind_mw as Slot);
    x.wr_send_inv = pick(WITH_SEND_WITH_INV, wr_send_inv as Slot);
    x.wr_atomic_write = pick(WITH_ATOMIC_WRITE, wr_atomic_write as Slot);
    x.wr_set_ud_addr = wr_set_ud_addr as Slot;
    x.wr_set_inline_data = wr_set_inline_data as Slot;
    x.wr_set_inline_data_list = wr_set_inline_data_list as Slot;
    x.wr_set_sge = wr_set_sge as Slot;
    x.wr_set_sge_list = wr_set_sge_list as Slot;
    x.wr_start = wr_start as Slot;
    x.wr_complete = wr_complete as Slot;
    x.wr_abort = wr_abort as Slot;
}

/// The batch of a QP created by `create_qp_ex`. Out of line: most QPs have
/// none.
#[inline(never)]
pub(crate) fn batch_for(cap: &QpCap) -> Box<SpinLock<WrBatch>> {
    Box::new(SpinLock::new(WrBatch::for_cap(cap)))
}

/// What [`batch`] locks for a QP without a batch of its own: empty (depth
/// 0), so every request is refused. Never reached from C, whose QPs from
/// `ibv_create_qp` have no `ibv_wr_*` ops to call.
static NO_BATCH: SpinLock<WrBatch> = SpinLock::new(WrBatch::none());

/// The `create_qp_ex` op (`ibv_create_qp_ex`; the inline calls
/// `ibv_create_qp` itself when `comp_mask` is just `IBV_QP_INIT_ATTR_PD`).
/// NULL with EOPNOTSUPP for XRC domains, RSS, TSO, create flags and send
/// ops rverbs does not post; EINVAL without a PD.
pub(crate) unsafe extern "C" fn create_qp_ex(
    _context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: the C contract: `attr` is the caller's struct.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let m = a.comp_mask;
    let ops = if m & INIT_ATTR_SEND_OPS_FLAGS != 0 { a.send_ops_flags } else { 0 };
    if m & !(INIT_ATTR_PD | INIT_ATTR_CREATE_FLAGS | INIT_ATTR_SEND_OPS_FLAGS) != 0
        || (m & INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0)
        || supported_send_ops(a.qp_type).is_none_or(|s| ops & !s != 0)
    {
        set_errno(EOPNOTSUPP);
        return core::ptr::null_mut();
    }
    if m & INIT_ATTR_PD == 0 || a.pd.is_null() {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    }
    // SAFETY: the first 64 bytes of an `ibv_qp_init_attr_ex` are an
    // `ibv_qp_init_attr` (the same fields at the same offsets).
    unsafe { crate::qp::create(a.pd, attr.cast::<ibv_qp_init_attr>(), Some(ops)) }
}

/// `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)`: the QP's
/// `ibv_qp_ex` when `ibv_create_qp_ex` created it, else NULL (errno
/// untouched), as rdma-core 44.
unsafe extern "C" fn qp_to_qp_ex(p: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: the C contract: NULL or a live QP of ours.
    match unsafe { crate::qp::qp(p) } {
        Some(q) if q.batch.is_some() => p.cast(),
        _ => core::ptr::null_mut(),
    }
}
symver!(qp_to_qp_ex, ibv_qp_to_qp_ex, "IBVERBS_1.6");

/// The QP of an `ibv_qp_ex *` and its batch, locked.
///
/// # Safety
/// `p` is a live QP of ours.
unsafe fn batch<'a>(p: *mut ibv_qp_ex) -> (&'a Qp, crate::spin::SpinGuard<'a, WrBatch>) {
    // SAFETY: the caller's contract: a live QP, whose `ibv_qp` is the
    // `ibv_qp_ex`'s first field.
    let q = unsafe { crate::qp::qp(p.cast()).unwrap_unchecked() };
    (q, q.batch.as_deref().unwrap_or(&NO_BATCH).lock())
}

/// Appends a request of `op` with the `wr_id` and `wr_flags` the caller
/// set in the `ibv_qp_ex`.
///
/// # Safety
/// `p` is a live QP of ours.
unsafe fn build(p: *mut ibv_qp_ex, op: SendOp) {
    // SAFETY: the caller's contract; the C fields were written by the caller
    // before this call.
    let (wr_id, flags) = unsafe { ((*p).wr_id, SendFlags::from_bits_truncate((*p).wr_flags)) };
    // SAFETY: the caller's contract.
    let (_, mut b) = unsafe { batch(p) };
    if b.err != 0 {
        return;
    }
    if b.pending.len() == b.depth {
        b.fail(ENOSPC);
        return;
    }
    b.pending.push(Pending { wr_id, flags, op, nsge: 0, inline: None, ud: None });
}

/// `void wr_start(struct ibv_qp_ex *)`.
unsafe extern "C" fn wr_start(p: *mut ibv_qp_ex) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { batch(p) }.1.reset();
}

/// `void wr_abort(struct ibv_qp_ex *)`: drops the requests built.
unsafe extern "C" fn wr_abort(p: *mut ibv_qp_ex) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { batch(p) }.1.reset();
}

/// `int wr_complete(struct ibv_qp_ex *)`: posts the requests built since
/// `wr_start`; 0, or the first builder/setter error (nothing posted), or
/// the errno of the first request the queue refused (those before it are
/// posted).
unsafe extern "C" fn wr_complete(p: *mut ibv_qp_ex) -> c_int {
    // SAFETY: the C contract: a live QP of ours.
    let (q, mut b) = unsafe { batch(p) };
    let r = if b.err != 0 { b.err } else { post_all(q, &b) };
    b.reset();
    r
}

/// Posts the batch in chunks of [`CHUNK`] requests, one doorbell each.
fn post_all(q: &Qp, b: &WrBatch) -> c_int {
    if q.qp_type() == 4 && b.pending.iter().any(|w| w.ud.is_none()) {
        return EINVAL; // a UD request without `wr_set_ud_addr`: post none
    }
    let mut g = q.inner.lock();
    for (c, chunk) in b.pending.chunks(CHUNK).enumerate() {
        let mut inline_sge = [Sge::new(0, 0, 0); CHUNK];
        for (k, w) in chunk.iter().enumerate() {
            if let Some(n) = w.inline {
                let at = b.inline[(c * CHUNK + k) * b.inline_per..].as_ptr() as u64;
                inline_sge[k] = Sge::new(at, n as u32, 0);
            }
        }
        let mut wrs = [const { core::mem::MaybeUninit::<SendWr<'_>>::uninit() }; CHUNK];
        for (k, w) in chunk.iter().enumerate() {
            let i = c * CHUNK + k;
            let (sgl, flags) = match w.inline {
                Some(n) => (&inline_sge[k..k + usize::from(n > 0)], w.flags | SendFlags::INLINE),
                None => (&b.sges[i * b.sge_per..i * b.sge_per + w.nsge], w.flags),
            };
            wrs[k].write(SendWr { wr_id: w.wr_id, op: w.op, flags, sgl, ud: w.ud });
        }
        // SAFETY: the first `chunk.len()` entries were written above.
        let list = unsafe { core::slice::from_raw_parts(wrs.as_ptr().cast::<SendWr<'_>>(), chunk.len()) };
        // SAFETY: an INLINE request's one SGE names bytes of this batch's
        // `inline` buffer, alive and unchanged (the batch is locked) for the
        // call; the others are checked against registrations by the device.
        if let Err(e) = unsafe { g.post_send_unchecked(list) } {
            return post_errno(&e.kind);
        }
    }
    0
}

/// `void wr_send(struct ibv_qp_ex *)`.
unsafe extern "C" fn wr_send(p: *mut ibv_qp_ex) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::Send) }
}

/// `void wr_send_imm(struct ibv_qp_ex *, __be32 imm_data)`.
unsafe extern "C" fn wr_send_imm(p: *mut ibv_qp_ex, imm: u32) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::SendWithImm(u32::from_be(imm))) }
}

/// `void wr_send_inv(struct ibv_qp_ex *, uint32_t invalidate_rkey)`.
unsafe extern "C" fn wr_send_inv(p: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::SendWithInv(rkey)) }
}

/// `void wr_local_inv(struct ibv_qp_ex *, uint32_t invalidate_rkey)`.
unsafe extern "C" fn wr_local_inv(p: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::LocalInv(rkey)) }
}

/// `void wr_bind_mw(struct ibv_qp_ex *, struct ibv_mw *, uint32_t rkey,
/// const struct ibv_mw_bind_info *)`: the window gets `rkey` (the caller's
/// choice, usually `ibv_inc_rkey(mw->rkey)`); a zero-based bind fails the
/// batch with EINVAL at `wr_complete`.
unsafe extern "C" fn wr_bind_mw(
    p: *mut ibv_qp_ex,
    mw: *mut crate::abi::ibv_mw,
    rkey: u32,
    info: *const crate::abi::ibv_mw_bind_info,
) {
    // SAFETY: the C contract: `info` is the caller's struct, `mw` and
    // `info.mr` live objects of ours (the MR may be NULL).
    let bind = unsafe { info.as_ref().and_then(|i| crate::mw::bind_of(mw, rkey, i)) };
    match bind {
        // SAFETY: the C contract: a live QP of ours.
        Some(b) => unsafe { build(p, SendOp::BindMw(b)) },
        // SAFETY: as above.
        None => unsafe { batch(p) }.1.fail(EINVAL),
    }
}

/// `void wr_rdma_write(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr)`.
unsafe extern "C" fn wr_rdma_write(p: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::RdmaWrite(RemoteAddr { addr, rkey })) }
}

/// `void wr_rdma_write_imm(struct ibv_qp_ex *, uint32_t rkey, uint64_t
/// remote_addr, __be32 imm_data)`.
unsafe extern "C" fn wr_rdma_write_imm(p: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::RdmaWriteWithImm(RemoteAddr { addr, rkey }, u32::from_be(imm))) }
}

/// `void wr_rdma_read(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr)`.
unsafe extern "C" fn wr_rdma_read(p: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::RdmaRead(RemoteAddr { addr, rkey })) }
}

/// `void wr_atomic_cmp_swp(struct ibv_qp_ex *, uint32_t rkey, uint64_t
/// remote_addr, uint64_t compare, uint64_t swap)`.
unsafe extern "C" fn wr_atomic_cmp_swp(p: *mut ibv_qp_ex, rkey: u32, addr: u64, compare: u64, swap: u64) {
    let op = SendOp::AtomicCmpAndSwp { remote: RemoteAddr { addr, rkey }, compare, swap };
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, op) }
}

/// `void wr_atomic_fetch_add(struct ibv_qp_ex *, uint32_t rkey, uint64_t
/// remote_addr, uint64_t add)`.
unsafe extern "C" fn wr_atomic_fetch_add(p: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::AtomicFetchAndAdd { remote: RemoteAddr { addr, rkey }, add }) }
}

/// `void wr_atomic_write(struct ibv_qp_ex *, uint32_t rkey, uint64_t
/// remote_addr, const void *atomic_wire_ptr)`: the 8 bytes at
/// `atomic_wire_ptr` are copied now (as rxe copies them into the WQE).
unsafe extern "C" fn wr_atomic_write(p: *mut ibv_qp_ex, rkey: u32, addr: u64, wire: *const u8) {
    // SAFETY: the C contract: `atomic_wire_ptr` names 8 readable bytes.
    let value = unsafe { wire.cast::<[u8; 8]>().read_unaligned() };
    // SAFETY: the C contract: a live QP of ours.
    unsafe { build(p, SendOp::AtomicWrite { remote: RemoteAddr { addr, rkey }, value }) }
}

/// `void wr_set_sge(struct ibv_qp_ex *, uint32_t lkey, uint64_t addr,
/// uint32_t length)`: the last request's one SGE (none when `length` is 0,
/// as rxe).
unsafe extern "C" fn wr_set_sge(p: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: the C contract: a live QP of ours.
    let (_, mut b) = unsafe { batch(p) };
    let per = b.sge_per;
    let Some((i, w)) = b.last() else { return };
    w.inline = None;
    w.nsge = usize::from(length > 0);
    b.sges[i * per] = Sge::new(addr, length, lkey);
}

/// `void wr_set_sge_list(struct ibv_qp_ex *, size_t num_sge, const struct
/// ibv_sge *)`: ENOSPC beyond the QP's `max_send_sge`.
unsafe extern "C" fn wr_set_sge_list(p: *mut ibv_qp_ex, num: usize, list: *const ibv_sge) {
    // SAFETY: the C contract: a live QP of ours.
    let (_, mut b) = unsafe { batch(p) };
    let per = b.sge_per;
    let Some((i, w)) = b.last() else { return };
    if num > per {
        b.fail(ENOSPC);
        return;
    }
    w.inline = None;
    w.nsge = num;
    for k in 0..num {
        // SAFETY: the C contract: `list` holds `num` entries.
        let s = unsafe { list.add(k).read() };
        b.sges[i * per + k] = Sge::new(s.addr, s.length, s.lkey);
    }
}

/// Copies `bufs` into the last request's inline slot; ENOSPC beyond the
/// QP's `max_inline_data`.
///
/// # Safety
/// `p` is a live QP of ours; each `(addr, len)` names `len` readable bytes.
unsafe fn set_inline(p: *mut ibv_qp_ex, bufs: impl Iterator<Item = (*const u8, usize)> + Clone) {
    // SAFETY: the caller's contract.
    let (_, mut b) = unsafe { batch(p) };
    let per = b.inline_per;
    let Some((i, _)) = b.last() else { return };
    let total = bufs.clone().try_fold(0usize, |t, (_, n)| t.checked_add(n));
    let Some(total) = total.filter(|&t| t <= per) else {
        b.fail(ENOSPC);
        return;
    };
    let mut at = i * per;
    for (addr, n) in bufs {
        if n > 0 {
            let dst = b.inline[at..at + n].as_mut_ptr();
            // Copied without a `&[u8]`: the bytes may be an MR the device writes.
            // SAFETY: `addr` holds `n` readable bytes (the caller's contract), not
            // this batch's buffer; `dst` has `n` bytes (the total checked above).
            unsafe { core::ptr::copy_nonoverlapping(addr, dst, n) };
            at += n;
        }
    }
    b.pending[i].inline = Some(total);
    b.pending[i].nsge = 0;
}

/// `void wr_set_inline_data(struct ibv_qp_ex *, void *addr, size_t length)`.
unsafe extern "C" fn wr_set_inline_data(p: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    // SAFETY: the C contract: `addr` holds `length` readable bytes.
    unsafe { set_inline(p, core::iter::once((addr.cast_const().cast::<u8>(), length))) }
}

/// `void wr_set_inline_data_list(struct ibv_qp_ex *, size_t num_buf, const
/// struct ibv_data_buf *)`.
unsafe extern "C" fn wr_set_inline_data_list(p: *mut ibv_qp_ex, num: usize, list: *const ibv_data_buf) {
    let bufs = (0..num).map(|k| {
        // SAFETY: the C contract: `list` holds `num` entries.
        let d = unsafe { list.add(k).read() };
        (d.addr.cast_const().cast::<u8>(), d.length)
    });
    // SAFETY: the C contract: each buffer holds `length` readable bytes.
    unsafe { set_inline(p, bufs) }
}

/// `void wr_set_ud_addr(struct ibv_qp_ex *, struct ibv_ah *, uint32_t
/// remote_qpn, uint32_t remote_qkey)`.
unsafe extern "C" fn wr_set_ud_addr(p: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    // SAFETY: the C contract: `ah` is a live AH of ours.
    let ah_num = unsafe { crate::ah::ah(ah) }.map(|a| a.inner.ah_num());
    // SAFETY: the C contract: a live QP of ours.
    let (_, mut b) = unsafe { batch(p) };
    let Some(ah_num) = ah_num else {
        b.fail(EINVAL);
        return;
    };
    if let Some((_, w)) = b.last() {
        w.ud = Some(UdDest::new(ah_num, qpn, qkey));
    }
}
