//! Extended CQs: the `create_cq_ex` op (`ibv_create_cq_ex`) and the
//! `ibv_cq_ex` ops the `verbs.h` inlines call: `ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll` and the `ibv_wc_read_*` readers.
//!
//! Every CQ `ibv_create_cq_ex` makes has these ops set (rdma-core's
//! rxe sets the readers only for the `wc_flags` asked for; a caller reading
//! a field it did not ask for gets its value here instead of a NULL call).
//! `start_poll` takes the CQ's `polling` flag and `end_poll` (or an empty
//! `start_poll`) releases it, as rxe's provider holds its CQ lock over the
//! span; each poll locks the rverbs CQ once, as `ibv_poll_cq` does. No
//! syscall, no allocation.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::{ibv_context, ibv_cq, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_poll_cq_attr, ibv_wc, Slot};
use crate::cq::Cq;
use crate::errno::{set_errno, EINVAL, EOPNOTSUPP};

/// `IBV_WC_EX_WITH_BYTE_LEN` … `IBV_WC_EX_WITH_DLID_PATH_BITS`
/// (`IBV_WC_STANDARD_FLAGS`): what rxe supports and this library reads.
const WC_STANDARD_FLAGS: u64 = 0x7f;
/// `IBV_CQ_INIT_ATTR_MASK_FLAGS`.
const CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
/// `IBV_CQ_INIT_ATTR_MASK_PD`.
const CQ_INIT_ATTR_MASK_PD: u32 = 2;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a hint; the only flag accepted).
const CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;

/// The current completion before the first poll.
pub(crate) const NO_WC: ibv_wc = ibv_wc {
    wr_id: 0,
    status: 0,
    opcode: 0,
    vendor_err: 0,
    byte_len: 0,
    imm_data: 0,
    qp_num: 0,
    src_qp: 0,
    wc_flags: 0,
    pkey_index: 0,
    slid: 0,
    sl: 0,
    dlid_path_bits: 0,
};

/// `ibv_cq` as an `ibv_cq_ex` with no polling ops (NULL): what
/// `ibv_create_cq` makes, as rdma-core's providers leave a plain CQ's ops
/// unset. [`set_ops`] adds them for `ibv_create_cq_ex`. (Writing the 13
/// function pointers into every CQ cost about 30 instructions per
/// `ibv_create_cq` in the scale bench, issue 35.)
pub(crate) fn without_ops(cq: ibv_cq) -> ibv_cq_ex {
    let none = core::ptr::null();
    ibv_cq_ex {
        cq,
        comp_mask: 0,
        status: 0,
        wr_id: 0,
        start_poll: none,
        next_poll: none,
        end_poll: none,
        read_opcode: none,
        read_vendor_err: none,
        read_byte_len: none,
        read_imm_data: none,
        read_qp_num: none,
        read_src_qp: none,
        read_wc_flags: none,
        read_slid: none,
        read_sl: none,
        read_dlid_path_bits: none,
        read_completion_ts: none,
        read_cvlan: none,
        read_flow_tag: none,
        read_tm_info: none,
        read_completion_wallclock_ns: none,
    }
}

/// Gives a CQ this library's polling ops (the standard `wc_flags` ones;
/// the others stay NULL).
///
/// # Safety
/// `p` is a CQ `crate::cq::create` just made, not yet handed out.
unsafe fn set_ops(p: *mut ibv_cq_ex) {
    // SAFETY: by the contract, a live `ibv_cq_ex` no one else reaches yet.
    let q = unsafe { &mut *p };
    q.start_poll = start_poll as Slot;
    q.next_poll = next_poll as Slot;
    q.end_poll = end_poll as Slot;
    q.read_opcode = read_opcode as Slot;
    q.read_vendor_err = read_vendor_err as Slot;
    q.read_byte_len = read_byte_len as Slot;
    q.read_imm_data = read_imm_data as Slot;
    q.read_qp_num = read_qp_num as Slot;
    q.read_src_qp = read_src_qp as Slot;
    q.read_wc_flags = read_wc_flags as Slot;
    q.read_slid = read_slid as Slot;
    q.read_sl = read_sl as Slot;
    q.read_dlid_path_bits = read_dlid_path_bits as Slot;
}

/// The `create_cq_ex` op (`ibv_create_cq_ex`): NULL with EOPNOTSUPP for
/// `wc_flags` beyond the standard ones (timestamps, ...), a parent domain
/// or flags other than `SINGLE_THREADED`, as rdma-core 44's rxe.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: the C contract: `attr` is the caller's struct.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let flags = if a.comp_mask & CQ_INIT_ATTR_MASK_FLAGS != 0 { a.flags } else { 0 };
    if a.wc_flags & !WC_STANDARD_FLAGS != 0
        || a.comp_mask & !(CQ_INIT_ATTR_MASK_FLAGS | CQ_INIT_ATTR_MASK_PD) != 0
        || (a.comp_mask & CQ_INIT_ATTR_MASK_PD != 0 && !a.parent_domain.is_null())
        || flags & !CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        set_errno(EOPNOTSUPP);
        return core::ptr::null_mut();
    }
    let (Ok(cqe), Ok(vector)) = (c_int::try_from(a.cqe), c_int::try_from(a.comp_vector)) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    // SAFETY: the C contract of `ibv_create_cq_ex` is that of `ibv_create_cq`.
    let p: *mut ibv_cq_ex = unsafe { crate::cq::create(context, cqe, a.cq_context, a.channel, vector, true) }.cast();
    if !p.is_null() {
        // SAFETY: a CQ `create` just made; the caller has not seen it yet.
        unsafe { set_ops(p) };
    }
    p
}

/// The state of an `ibv_start_poll` … `ibv_end_poll` span, after an
/// extended CQ's `ibv_cq_ex` in its slot (`crate::cq::CqSlot`).
pub(crate) struct Span {
    /// The thread holding the polling span, from a successful `start_poll`
    /// to its `end_poll` (rdma-core's providers hold the CQ lock over the
    /// same span), as [`me`]; 0 when none does.
    polling: AtomicUsize,
    /// The current completion of the span: written by `start_poll` and
    /// `next_poll`, read by the `ibv_wc_read_*` ops, only by the thread
    /// holding `polling`.
    cur: UnsafeCell<ibv_wc>,
}

impl Span {
    /// No span open, no completion current.
    pub(crate) const fn new() -> Span {
        Span { polling: AtomicUsize::new(0), cur: UnsafeCell::new(NO_WC) }
    }
}

/// # Safety
/// `p` is a live CQ of this library from `ibv_create_cq_ex`.
unsafe fn cq_of<'a>(p: *mut ibv_cq_ex) -> (&'a Cq, &'a Span) {
    // SAFETY: by the contract; its `ibv_cq` is the `ibv_cq_ex`'s first field.
    unsafe { (crate::cq::cq(p.cast()).unwrap_unchecked(), crate::cq::span(p)) }
}

/// Polls one completion into the span's current one; ENOENT when empty.
///
/// # Safety
/// `p` is a live CQ whose `polling` flag the caller holds.
unsafe fn advance(p: *mut ibv_cq_ex) -> c_int {
    // SAFETY: the caller's contract.
    let (q, span) = unsafe { cq_of(p) };
    let w = q.inner.lock().poll_one();
    let Some(w) = w else {
        set_errno(nix::libc::ENOENT);
        return nix::libc::ENOENT;
    };
    let w = crate::cq::wc_to_c(&w);
    // SAFETY: the `polling` holder is the only writer and reader of `cur`;
    // `status` and `wr_id` are the C fields `ibv_start_poll`'s caller reads
    // after this call returns.
    unsafe {
        span.cur.get().write(w);
        (*p).status = w.status;
        (*p).wr_id = w.wr_id;
    }
    0
}

thread_local! {
    /// Its address names the calling thread while it lives (never 0).
    static ME: u8 = const { 0 };
}

/// The calling thread, as the polling span's owner.
pub(crate) fn me() -> usize {
    ME.with(|m| core::ptr::from_ref(m).addr())
}

/// `int start_poll(struct ibv_cq_ex *, struct ibv_poll_cq_attr *)`: 0 with
/// the first completion current, ENOENT (errno too) when the CQ is empty,
/// EINVAL for a non-zero `attr->comp_mask`. Waits while another thread's
/// span is open; a second `start_poll` of the owner starts over.
unsafe extern "C" fn start_poll(p: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: the C contract: `attr` is NULL or the caller's struct.
    if unsafe { attr.as_ref() }.is_some_and(|a| a.comp_mask != 0) {
        set_errno(EINVAL);
        return EINVAL;
    }
    // SAFETY: the C contract: a live CQ of ours.
    let span = unsafe { crate::cq::span(p) };
    let me = me();
    while let Err(owner) = span.polling.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
        if owner == me {
            break;
        }
        std::thread::yield_now();
    }
    // SAFETY: this thread holds `polling` now.
    let r = unsafe { advance(p) };
    if r != 0 {
        span.polling.store(0, Ordering::Release);
    }
    r
}

/// Whether the calling thread holds `p`'s span: the other span ops of a
/// thread that holds none (an `end_poll` after a `start_poll` that
/// answered ENOENT is a common bug) must leave another's span alone
/// (audit-2 N6).
///
/// # Safety
/// `p` is a live CQ of ours.
unsafe fn owns_span(p: *mut ibv_cq_ex) -> bool {
    // SAFETY: the caller's contract.
    unsafe { crate::cq::span(p) }.polling.load(Ordering::Relaxed) == me()
}

/// `int next_poll(struct ibv_cq_ex *)`: 0 with the next completion
/// current, or ENOENT; the span stays open until `end_poll`. EINVAL from
/// a thread that holds no span.
unsafe extern "C" fn next_poll(p: *mut ibv_cq_ex) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    if !unsafe { owns_span(p) } {
        set_errno(EINVAL);
        return EINVAL;
    }
    // SAFETY: this thread holds the span.
    unsafe { advance(p) }
}

/// `void end_poll(struct ibv_cq_ex *)`: ends the calling thread's span;
/// nothing when it holds none.
unsafe extern "C" fn end_poll(p: *mut ibv_cq_ex) {
    // SAFETY: the C contract: a live CQ of ours.
    let span = unsafe { crate::cq::span(p) };
    let _ = span.polling.compare_exchange(me(), 0, Ordering::Release, Ordering::Relaxed);
}

/// The span's current completion; all zero for a thread that holds no
/// span (it must not read `cur` while the owner writes it).
///
/// # Safety
/// `p` is a live CQ of ours.
unsafe fn cur(p: *mut ibv_cq_ex) -> ibv_wc {
    // SAFETY: the caller's contract.
    if !unsafe { owns_span(p) } {
        return NO_WC;
    }
    // SAFETY: only the span's owner, this thread, touches `cur` now.
    unsafe { crate::cq::span(p).cur.get().read() }
}

macro_rules! reader {
    ($(#[$m:meta])* $name:ident -> $t:ty, |$w:ident| $e:expr) => {
        $(#[$m])*
        unsafe extern "C" fn $name(p: *mut ibv_cq_ex) -> $t {
            // SAFETY: the C contract: a live CQ of ours.
            let $w = unsafe { cur(p) };
            $e
        }
    };
}

reader!(
    /// `enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *)`.
    read_opcode -> u32, |w| w.opcode
);
reader!(
    /// `uint32_t read_vendor_err(struct ibv_cq_ex *)`.
    read_vendor_err -> u32, |w| w.vendor_err
);
reader!(
    /// `uint32_t read_byte_len(struct ibv_cq_ex *)`.
    read_byte_len -> u32, |w| w.byte_len
);
reader!(
    /// `__be32 read_imm_data(struct ibv_cq_ex *)`: network order.
    read_imm_data -> u32, |w| w.imm_data
);
reader!(
    /// `uint32_t read_qp_num(struct ibv_cq_ex *)`.
    read_qp_num -> u32, |w| w.qp_num
);
reader!(
    /// `uint32_t read_src_qp(struct ibv_cq_ex *)`.
    read_src_qp -> u32, |w| w.src_qp
);
reader!(
    /// `unsigned int read_wc_flags(struct ibv_cq_ex *)`: `IBV_WC_GRH`, ...
    read_wc_flags -> u32, |w| w.wc_flags
);
reader!(
    /// `uint32_t read_slid(struct ibv_cq_ex *)`.
    read_slid -> u32, |w| w.slid.into()
);
reader!(
    /// `uint8_t read_sl(struct ibv_cq_ex *)`.
    read_sl -> u8, |w| w.sl
);
reader!(
    /// `uint8_t read_dlid_path_bits(struct ibv_cq_ex *)`.
    read_dlid_path_bits -> u8, |w| w.dlid_path_bits
);
