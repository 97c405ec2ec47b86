//! The extended verbs of rverbs' `libibverbs.so.1`, called as a C program
//! calls them (the library `dlopen`ed, every object reached through the
//! `verbs.h` layouts and op pointers): `ibv_create_cq_ex` with
//! `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll` and the `ibv_wc_read_*`
//! readers, and `ibv_create_qp_ex` with the `ibv_wr_*` API (write, send with
//! immediate and inline data, read into an SGE list, compare-and-swap,
//! fetch-and-add, abort, and the errors `wr_complete` reports), between two
//! RC QPs of one device; and `ibv_resize_cq` and `ibv_rereg_mr` on them.
//! Between two UD QPs: `wr_set_ud_addr`, then `ibv_init_ah_from_wc` and
//! `ibv_create_ah_from_wc` from the received completion and GRH (the reply
//! goes back through that AH), and their EINVAL/EPROTONOSUPPORT bad flows;
//! then a datagram to a multicast group (`ibv_attach_mcast`, `ibv_detach_mcast`). rdma-core's tools do not reach most of these
//! (`ibv_rc_pingpong -N` uses `wr_send`/`wr_set_sge` only: `c_pingpong.rs`).
//!
//! Without a uverbs device the test prints `skipped: ...` and passes, unless
//! `RVERBS_REQUIRE_DEVICE=1`.

mod common;

use core::ffi::{c_char, c_int, c_void};
use std::ffi::CString;
use std::time::Instant;

use common::*;
use ibverbs::abi::*;
use nix::libc;

const SONAME: &str = "libibverbs.so.1";

/// `IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC`.
const ACCESS_ALL: c_int = 1 | 2 | 4 | 8;
/// `IBV_SEND_SIGNALED`.
const SIGNALED: u32 = 2;
/// `IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const PD_AND_SEND_OPS: u32 = 1 | 1 << 6;
/// `IBV_QP_EX_WITH_RDMA_WRITE` … `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
const SEND_OPS: u64 = 0x7f;
/// `IBV_WC_STANDARD_FLAGS`.
const WC_STANDARD: u64 = 0x7f;
const ENOENT: c_int = libc::ENOENT;

/// The exported functions the test calls, from the `dlopen`ed library.
struct Lib {
    get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    close_device: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    reg_mr: unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr,
    dereg_mr: unsafe extern "C" fn(*mut ibv_mr) -> c_int,
    create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    qp_to_qp_ex: unsafe extern "C" fn(*mut ibv_qp) -> *mut ibv_qp_ex,
    query_gid: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut [u8; 16]) -> c_int,
    resize_cq: unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int,
    rereg_mr: unsafe extern "C" fn(*mut ibv_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int,
    create_ah: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah,
    destroy_ah: unsafe extern "C" fn(*mut ibv_ah) -> c_int,
    init_ah_from_wc: unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_wc, *mut ibv_grh, *mut ibv_ah_attr) -> c_int,
    attach_mcast: unsafe extern "C" fn(*mut ibv_qp, *const [u8; 16], u16) -> c_int,
    detach_mcast: unsafe extern "C" fn(*mut ibv_qp, *const [u8; 16], u16) -> c_int,
    create_ah_from_wc: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_wc, *mut ibv_grh, u8) -> *mut ibv_ah,
    create_srq: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq,
    modify_srq: unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr, c_int) -> c_int,
    query_srq: unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr) -> c_int,
    destroy_srq: unsafe extern "C" fn(*mut ibv_srq) -> c_int,
    create_comp_channel: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel,
    destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    get_cq_event: unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int,
    ack_cq_events: unsafe extern "C" fn(*mut ibv_cq, u32),
    get_async_event: unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int,
    ack_async_event: unsafe extern "C" fn(*mut ibv_async_event),
    fork_init: unsafe extern "C" fn() -> c_int,
    is_fork_initialized: unsafe extern "C" fn() -> u32,
}

/// # Safety
/// `T` is the C type of the function `name`.
unsafe fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let n = CString::new(name).unwrap();
    // SAFETY: `h` is a live handle, `n` NUL-terminated.
    let p = unsafe { libc::dlsym(h, n.as_ptr()) };
    assert!(!p.is_null(), "{name} is not exported");
    // SAFETY: the caller's contract: `T` is a function pointer type of `name`.
    unsafe { core::mem::transmute_copy(&p) }
}

fn load(dir: &std::path::Path) -> Lib {
    let path = CString::new(dir.join(SONAME).to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; the library has no constructors that
    // need more than the loader.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {}", path.to_string_lossy());
    // SAFETY: each type is that name's C prototype in verbs.h 44.
    unsafe {
        Lib {
            get_device_list: sym(h, "ibv_get_device_list"),
            open_device: sym(h, "ibv_open_device"),
            close_device: sym(h, "ibv_close_device"),
            alloc_pd: sym(h, "ibv_alloc_pd"),
            dealloc_pd: sym(h, "ibv_dealloc_pd"),
            reg_mr: sym(h, "ibv_reg_mr"),
            dereg_mr: sym(h, "ibv_dereg_mr"),
            create_qp: sym(h, "ibv_create_qp"),
            modify_qp: sym(h, "ibv_modify_qp"),
            destroy_qp: sym(h, "ibv_destroy_qp"),
            destroy_cq: sym(h, "ibv_destroy_cq"),
            qp_to_qp_ex: sym(h, "ibv_qp_to_qp_ex"),
            query_gid: sym(h, "ibv_query_gid"),
            resize_cq: sym(h, "ibv_resize_cq"),
            rereg_mr: sym(h, "ibv_rereg_mr"),
            create_ah: sym(h, "ibv_create_ah"),
            destroy_ah: sym(h, "ibv_destroy_ah"),
            init_ah_from_wc: sym(h, "ibv_init_ah_from_wc"),
            create_ah_from_wc: sym(h, "ibv_create_ah_from_wc"),
            attach_mcast: sym(h, "ibv_attach_mcast"),
            detach_mcast: sym(h, "ibv_detach_mcast"),
            create_srq: sym(h, "ibv_create_srq"),
            modify_srq: sym(h, "ibv_modify_srq"),
            query_srq: sym(h, "ibv_query_srq"),
            destroy_srq: sym(h, "ibv_destroy_srq"),
            create_comp_channel: sym(h, "ibv_create_comp_channel"),
            destroy_comp_channel: sym(h, "ibv_destroy_comp_channel"),
            get_cq_event: sym(h, "ibv_get_cq_event"),
            ack_cq_events: sym(h, "ibv_ack_cq_events"),
            get_async_event: sym(h, "ibv_get_async_event"),
            ack_async_event: sym(h, "ibv_ack_async_event"),
            fork_init: sym(h, "ibv_fork_init"),
            is_fork_initialized: sym(h, "ibv_is_fork_initialized"),
        }
    }
}

/// This thread's `write()` count so far (`syscw` of `/proc/thread-self/io`):
/// rxe's doorbell is one `write()` on the uverbs fd.
fn syscw() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("task I/O accounting");
    io.lines().find_map(|l| l.strip_prefix("syscw: ")).and_then(|v| v.trim().parse().ok()).expect("syscw")
}

fn errno() -> c_int {
    nix::errno::Errno::last_raw()
}

/// `verbs_get_ctx(ctx)`: the `verbs_context` 320 bytes before.
///
/// # Safety
/// `c` is a context of the library.
unsafe fn vctx<'a>(c: *mut ibv_context) -> &'a verbs_context {
    // SAFETY: the caller's contract (the layout `verbs.h` documents).
    unsafe { &*c.byte_sub(core::mem::offset_of!(verbs_context, context)).cast::<verbs_context>() }
}

type CreateCqEx = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
type CreateQpEx = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

fn cq_attr(wc_flags: u64) -> ibv_cq_init_attr_ex {
    ibv_cq_init_attr_ex {
        cqe: 32,
        cq_context: core::ptr::null_mut(),
        channel: core::ptr::null_mut(),
        comp_vector: 0,
        wc_flags,
        comp_mask: 0,
        flags: 0,
        parent_domain: core::ptr::null_mut(),
    }
}

fn qp_attr_ex(pd: *mut ibv_pd, cq: *mut ibv_cq, send_ops: u64) -> ibv_qp_init_attr_ex {
    ibv_qp_init_attr_ex {
        qp_context: core::ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: core::ptr::null_mut(),
        cap: ibv_qp_cap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 32 },
        qp_type: 2,
        sq_sig_all: 0,
        comp_mask: PD_AND_SEND_OPS,
        pd,
        xrcd: core::ptr::null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: core::ptr::null_mut(),
        rx_hash_conf: [0; 3],
        source_qpn: 0,
        send_ops_flags: send_ops,
    }
}

/// RESET → INIT → RTR → RTS towards `dest` (a QP of the same device, found
/// through the GID at `sgid`).
///
/// # Safety
/// `qp` is a live QP of `lib`.
unsafe fn connect(lib: &Lib, qp: *mut ibv_qp, dest: u32, gid: [u8; 16], sgid: u8) {
    // SAFETY: `ibv_qp_attr` is plain integers: all-zero is a valid value.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = 1; // INIT
    a.port_num = 1;
    a.qp_access_flags = ACCESS_ALL as u32;
    // STATE | ACCESS_FLAGS | PKEY_INDEX | PORT
    // SAFETY: a live QP, the caller's attr.
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, 1 | 8 | 16 | 32) }, 0, "to INIT");
    a.qp_state = 2; // RTR
    a.path_mtu = 3; // 1024
    a.dest_qp_num = dest;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = sgid;
    a.ah_attr.grh.hop_limit = 1;
    // STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER
    let m = 1 | 128 | 256 | (1 << 20) | 4096 | (1 << 17) | (1 << 15);
    // SAFETY: as above.
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, m) }, 0, "to RTR");
    a.qp_state = 3; // RTS
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    // STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC
    let m = 1 | 512 | 1024 | 2048 | (1 << 16) | (1 << 13);
    // SAFETY: as above.
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, m) }, 0, "to RTS");
}

/// What one completion said, through the `ibv_wc_read_*` readers.
#[derive(Debug, PartialEq)]
struct Done {
    wr_id: u64,
    status: u32,
    opcode: u32,
    byte_len: u32,
    imm: u32,
    qp_num: u32,
    wc_flags: u32,
}

/// # Safety
/// `cq` is a live CQ inside a polling span.
unsafe fn read(cq: *mut ibv_cq_ex) -> Done {
    // SAFETY: the caller's contract; the op pointers are the library's.
    unsafe {
        let c = &*cq;
        let f = |s: Slot| core::mem::transmute::<Slot, unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>(s);
        Done {
            wr_id: c.wr_id,
            status: c.status,
            opcode: f(c.read_opcode)(cq),
            byte_len: f(c.read_byte_len)(cq),
            imm: u32::from_be(f(c.read_imm_data)(cq)),
            qp_num: f(c.read_qp_num)(cq),
            wc_flags: f(c.read_wc_flags)(cq),
        }
    }
}

/// `n` completions of `cq`, by `ibv_start_poll` / `ibv_next_poll` /
/// `ibv_end_poll` spans.
///
/// # Safety
/// `cq` is a live CQ of the library.
unsafe fn poll(cq: *mut ibv_cq_ex, n: usize) -> Vec<Done> {
    type Start = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
    type Next = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
    type End = unsafe extern "C" fn(*mut ibv_cq_ex);
    // SAFETY: the caller's contract; the op pointers are the library's.
    let (start, next, end) = unsafe {
        let c = &*cq;
        (
            core::mem::transmute::<Slot, Start>(c.start_poll),
            core::mem::transmute::<Slot, Next>(c.next_poll),
            core::mem::transmute::<Slot, End>(c.end_poll),
        )
    };
    let mut out = Vec::new();
    let t0 = Instant::now();
    while out.len() < n {
        assert!(t0.elapsed() < DEADLINE, "only {} of {n} completions: {out:?}", out.len());
        let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: a live CQ; spans are opened and closed by the rules.
        let r = unsafe { start(cq, &mut attr) };
        if r == ENOENT {
            std::thread::yield_now();
            continue;
        }
        assert_eq!(r, 0, "start_poll");
        loop {
            // SAFETY: inside the span.
            out.push(unsafe { read(cq) });
            // SAFETY: inside the span.
            let r = unsafe { next(cq) };
            if r == ENOENT {
                break;
            }
            assert_eq!(r, 0, "next_poll");
        }
        // SAFETY: ends the span `start` opened.
        unsafe { end(cq) };
    }
    out
}

/// The `ibv_qp_ex` ops, typed.
struct Wr {
    x: *mut ibv_qp_ex,
}

macro_rules! op {
    ($self:ident.$f:ident($($a:expr),*) as fn($($t:ty),*) $(-> $r:ty)?) => {{
        // SAFETY: a live QP; the slot holds the library's function of this C type.
        unsafe {
            let f = core::mem::transmute::<Slot, unsafe extern "C" fn(*mut ibv_qp_ex $(, $t)*) $(-> $r)?>((*$self.x).$f);
            f($self.x $(, $a)*)
        }
    }};
}

impl Wr {
    fn next(&self, wr_id: u64, flags: u32) {
        // SAFETY: the fields a C caller sets before each builder.
        unsafe {
            (*self.x).wr_id = wr_id;
            (*self.x).wr_flags = flags;
        }
    }
    fn start(&self) {
        op!(self.wr_start() as fn())
    }
    fn complete(&self) -> c_int {
        op!(self.wr_complete() as fn() -> c_int)
    }
    fn abort(&self) {
        op!(self.wr_abort() as fn())
    }
    fn send(&self) {
        op!(self.wr_send() as fn())
    }
    fn send_imm(&self, imm: u32) {
        op!(self.wr_send_imm(imm.to_be()) as fn(u32))
    }
    fn rdma_write(&self, rkey: u32, addr: u64) {
        op!(self.wr_rdma_write(rkey, addr) as fn(u32, u64))
    }
    fn rdma_read(&self, rkey: u32, addr: u64) {
        op!(self.wr_rdma_read(rkey, addr) as fn(u32, u64))
    }
    fn cas(&self, rkey: u32, addr: u64, compare: u64, swap: u64) {
        op!(self.wr_atomic_cmp_swp(rkey, addr, compare, swap) as fn(u32, u64, u64, u64))
    }
    fn faa(&self, rkey: u32, addr: u64, add: u64) {
        op!(self.wr_atomic_fetch_add(rkey, addr, add) as fn(u32, u64, u64))
    }
    fn sge(&self, lkey: u32, addr: u64, len: u32) {
        op!(self.wr_set_sge(lkey, addr, len) as fn(u32, u64, u32))
    }
    fn sge_list(&self, l: &[ibv_sge]) {
        op!(self.wr_set_sge_list(l.len(), l.as_ptr()) as fn(usize, *const ibv_sge))
    }
    fn inline(&self, d: &[u8]) {
        op!(self.wr_set_inline_data(d.as_ptr() as *mut c_void, d.len()) as fn(*mut c_void, usize))
    }
    fn ud_addr(&self, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
        op!(self.wr_set_ud_addr(ah, qpn, qkey) as fn(*mut ibv_ah, u32, u32))
    }
    fn bind_mw(&self, mw: *mut ibv_mw, rkey: u32, info: &ibv_mw_bind_info) {
        op!(self.wr_bind_mw(mw, rkey, info as *const ibv_mw_bind_info) as fn(*mut ibv_mw, u32, *const ibv_mw_bind_info))
    }
    fn local_inv(&self, rkey: u32) {
        op!(self.wr_local_inv(rkey) as fn(u32))
    }
    fn inline_list(&self, l: &[ibv_data_buf]) {
        op!(self.wr_set_inline_data_list(l.len(), l.as_ptr()) as fn(usize, *const ibv_data_buf))
    }
}

/// Posts one receive of `len` bytes at `addr`.
///
/// # Safety
/// `ctx` and `qp` are live objects of the library.
unsafe fn post_recv(ctx: *mut ibv_context, qp: *mut ibv_qp, wr_id: u64, addr: u64, len: u32, lkey: u32) {
    type PostRecv = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
    let mut sge = ibv_sge { addr, length: len, lkey };
    let mut wr = ibv_recv_wr { wr_id, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
    let mut bad = core::ptr::null_mut();
    // SAFETY: the caller's contract; `ops.post_recv` is the library's.
    let r = unsafe { core::mem::transmute::<Slot, PostRecv>((*ctx).ops.post_recv)(qp, &mut wr, &mut bad) };
    assert_eq!(r, 0, "post_recv");
}

/// An RC QP on `cq` (receiving from `srq` when it is not NULL), with room
/// for `depth` sends and receives, every send signaled, connected to itself.
///
/// # Safety
/// `pd`, `cq` and `srq` (or NULL) are live objects of `o`'s library.
unsafe fn self_connected_rc(
    o: &Opened,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    depth: u32,
) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        qp_context: core::ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: srq.cast(),
        cap: ibv_qp_cap {
            max_send_wr: depth,
            max_recv_wr: if srq.is_null() { depth } else { 0 },
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: 2,
        sq_sig_all: 1,
    };
    // SAFETY: the caller's contract.
    unsafe {
        let qp = (o.lib.create_qp)(pd, &mut init);
        assert!(!qp.is_null(), "create_qp: errno {}", errno());
        connect(&o.lib, qp, (*qp).qp_num, o.gid, o.sgid);
        qp
    }
}

/// A signaled SEND of one SGE, followed by `next`.
fn send_wr(wr_id: u64, sge: *mut ibv_sge, next: *mut ibv_send_wr) -> ibv_send_wr {
    ibv_send_wr {
        wr_id,
        next,
        sg_list: sge,
        num_sge: 1,
        opcode: 2, // IBV_WR_SEND
        send_flags: SIGNALED,
        imm_data: 0,
        wr: [0; 4],
        qp_type: 0,
        bind_mw: [0; 6],
    }
}

/// The first device opened through the library, its RoCE GID, and the
/// extended constructors of its `verbs_context`.
struct Opened {
    lib: Lib,
    ctx: *mut ibv_context,
    gid: [u8; 16],
    sgid: u8,
    create_cq_ex: CreateCqEx,
    create_qp_ex: CreateQpEx,
}

/// True (after checking that the device refuses a hand-connected RC QP)
/// when the test device is iWARP: the tests that connect QPs by hand
/// (`ibv_modify_qp` to RTR with an address) are `n/a` there.
fn hand_connected_na() -> bool {
    let why = "the test connects RC QPs by hand; iWARP QPs connect through the CM only";
    test_device().is_some_and(|d| not_on_iwarp(&d, why, refuses_rc_by_hand))
}

/// [`Opened`], or `None` after a permitted skip (no device, no library).
fn open_first_device() -> Option<Opened> {
    let dev = test_device();
    if !need(dev.is_some(), "no uverbs device") {
        return None;
    }
    let Some(dir) = lib_dir() else {
        need(false, "rverbs' libibverbs.so.1 was not built or installed");
        return None;
    };
    let dev = dev.unwrap();
    let sgid = dev.open().expect("open").default_sgid_index(1).expect("a RoCE GID");
    let lib = load(&dir);
    // SAFETY: the C API by its contract: the list and the device are the
    // library's, `gid` outlives the query, and the op slots hold the
    // library's functions of these C types.
    unsafe {
        let mut n = 0;
        let list = (lib.get_device_list)(&mut n);
        let d = (0..n as usize)
            .map(|i| *list.add(i))
            .find(|&d| std::ffi::CStr::from_ptr((*d).name.as_ptr() as *const c_char).to_str() == Ok(dev.name()))
            .expect("the device is listed");
        let ctx = (lib.open_device)(d);
        assert!(!ctx.is_null());
        let mut gid = [0u8; 16];
        assert_eq!((lib.query_gid)(ctx, 1, c_int::from(sgid), &mut gid), 0);
        let v = vctx(ctx);
        let create_cq_ex = core::mem::transmute::<Slot, CreateCqEx>(v.ops_a[24]);
        let create_qp_ex = core::mem::transmute::<Slot, CreateQpEx>(v.ops_b[1]);
        Some(Opened { lib, ctx, gid, sgid, create_cq_ex, create_qp_ex })
    }
}

#[test]
fn cq_ex_polling_wr_api_resize_and_rereg_between_two_rc_qps() {
    if hand_connected_na() {
        return;
    }
    let Some(Opened { lib, ctx, gid, sgid, create_cq_ex, create_qp_ex }) = open_first_device() else { return };
    // SAFETY: the whole test drives the C API by its contract: every pointer
    // passed is a live object of the library or a buffer of this test that
    // outlives the requests using it.
    unsafe {
        // Bad flows answer NULL with EOPNOTSUPP, as rdma-core 44's rxe.
        let mut bad = cq_attr(WC_STANDARD | 1 << 7); // COMPLETION_TIMESTAMP
        assert!(create_cq_ex(ctx, &mut bad).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "a timestamp CQ");

        let mut ca = cq_attr(WC_STANDARD);
        let (cq_a, cq_b) = (create_cq_ex(ctx, &mut ca), create_cq_ex(ctx, &mut ca));
        assert!(!cq_a.is_null() && !cq_b.is_null(), "create_cq_ex: errno {}", errno());
        assert!((*cq_a).cq.cqe >= 32);
        let pd = (lib.alloc_pd)(ctx);
        assert!(!pd.is_null());

        let mut qa = qp_attr_ex(pd, cq_a.cast(), SEND_OPS | 1 << 10); // TSO
        assert!(create_qp_ex(ctx, &mut qa).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "send ops rverbs does not post");
        // Bit 11 (rdma-core 45's IBV_QP_EX_WITH_FLUSH) is no send op of 44.
        let mut qa = qp_attr_ex(pd, cq_a.cast(), SEND_OPS | 1 << 11);
        assert!(create_qp_ex(ctx, &mut qa).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "a send op rdma-core 44 does not define");
        // A QP of ibv_create_qp has no ibv_qp_ex to give.
        let mut plain = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq_a.cast(),
            recv_cq: cq_a.cast(),
            srq: core::ptr::null_mut(),
            cap: qa.cap,
            qp_type: 2,
            sq_sig_all: 0,
        };
        let p = (lib.create_qp)(pd, &mut plain);
        assert!(!p.is_null());
        assert!((lib.qp_to_qp_ex)(p).is_null());
        assert_eq!((lib.destroy_qp)(p), 0);

        let mut qa = qp_attr_ex(pd, cq_a.cast(), SEND_OPS);
        let mut qb = qp_attr_ex(pd, cq_b.cast(), SEND_OPS);
        let (a, b) = (create_qp_ex(ctx, &mut qa), create_qp_ex(ctx, &mut qb));
        assert!(!a.is_null() && !b.is_null(), "create_qp_ex: errno {}", errno());
        assert!(qa.cap.max_inline_data >= 32, "caps written back: {}", qa.cap.max_inline_data);
        let x = (lib.qp_to_qp_ex)(a);
        assert_eq!(x, a.cast(), "ibv_qp_to_qp_ex of an extended QP is the QP");
        connect(&lib, a, (*b).qp_num, gid, sgid);
        connect(&lib, b, (*a).qp_num, gid, sgid);

        // A's buffer: 0..64 write source, 64..128 read target (two SGEs),
        // 128..136 CAS result, 136..144 FAA result. B's: 0..64 write target,
        // 64..128 read source, 128 the atomic word, 256.. the receive.
        let mut buf_a = vec![0u8; 4096];
        let mut buf_b = vec![0u8; 4096];
        for (i, x) in buf_a[..64].iter_mut().enumerate() {
            *x = i as u8 ^ 0x5a;
        }
        for (i, x) in buf_b[64..128].iter_mut().enumerate() {
            *x = i as u8 ^ 0xa5;
        }
        buf_b[128..136].copy_from_slice(&7u64.to_ne_bytes());
        let mr_a = (lib.reg_mr)(pd, buf_a.as_mut_ptr().cast(), buf_a.len(), ACCESS_ALL);
        let mr_b = (lib.reg_mr)(pd, buf_b.as_mut_ptr().cast(), buf_b.len(), ACCESS_ALL);
        assert!(!mr_a.is_null() && !mr_b.is_null());
        let (la, lb, rb) = ((*mr_a).lkey, (*mr_b).lkey, (*mr_b).rkey);
        let (pa, pb) = (buf_a.as_ptr() as u64, buf_b.as_ptr() as u64);
        post_recv(ctx, b, 900, pb + 256, 64, lb);

        let w = Wr { x };
        let inline_msg = *b"inline, copied when set";
        let mut scratch = inline_msg;
        w.start();
        w.next(1, SIGNALED);
        w.rdma_write(rb, pb);
        w.sge(la, pa, 64);
        w.next(2, SIGNALED);
        w.send_imm(0x1234_5678);
        w.inline(&scratch);
        scratch.fill(0); // the library copied it already
        w.next(3, SIGNALED);
        w.rdma_read(rb, pb + 64);
        w.sge_list(&[ibv_sge { addr: pa + 64, length: 24, lkey: la }, ibv_sge { addr: pa + 88, length: 40, lkey: la }]);
        w.next(4, SIGNALED);
        w.cas(rb, pb + 128, 7, 11);
        w.sge(la, pa + 128, 8);
        w.next(5, SIGNALED);
        w.faa(rb, pb + 128, 100);
        w.sge(la, pa + 136, 8);
        let before = syscw();
        assert_eq!(w.complete(), 0);
        assert_eq!(syscw() - before, 1, "one doorbell (write) for the five requests");

        let sent = poll(cq_a, 5);
        let expect = |wr_id, opcode, byte_len| Done {
            wr_id,
            status: 0,
            opcode,
            byte_len,
            imm: 0,
            qp_num: (*a).qp_num,
            wc_flags: 0,
        };
        // IBV_WC_RDMA_WRITE 1, SEND 0, RDMA_READ 2, COMP_SWAP 3, FETCH_ADD 4.
        let want = [expect(1, 1, 64), expect(2, 0, 23), expect(3, 2, 64), expect(4, 3, 8), expect(5, 4, 8)];
        for (got, want) in sent.iter().zip(&want) {
            assert_eq!((got.wr_id, got.status, got.opcode), (want.wr_id, want.status, want.opcode), "{sent:?}");
            assert_eq!(got.qp_num, want.qp_num, "{sent:?}");
        }
        let mut got = poll(cq_b, 1);
        // IBV_WC_WITH_IMM 2 (rxe also sets IBV_WC_GRH 1 on RoCE).
        assert_eq!(got[0].wc_flags & 2, 2, "{got:?}");
        got[0].wc_flags &= !1;
        // IBV_WC_RECV 128.
        let want = Done {
            wr_id: 900,
            status: 0,
            opcode: 128,
            byte_len: 23,
            imm: 0x1234_5678,
            qp_num: (*b).qp_num,
            wc_flags: 2,
        };
        assert_eq!(got, [want]);
        assert_eq!(&buf_b[..64], &buf_a[..64], "RDMA write");
        assert_eq!(&buf_b[256..256 + 23], &inline_msg, "inline send");
        assert_eq!(&buf_a[64..128], &buf_b[64..128], "RDMA read into two SGEs");
        assert_eq!(u64::from_ne_bytes(buf_a[128..136].try_into().unwrap()), 7, "CAS returns the old word");
        assert_eq!(u64::from_ne_bytes(buf_a[136..144].try_into().unwrap()), 11, "FAA returns the swapped word");
        assert_eq!(u64::from_ne_bytes(buf_b[128..136].try_into().unwrap()), 111, "CAS then FAA");

        // ibv_post_send of a three-request list: one doorbell, all complete.
        let mut sg = [0u64, 8, 16].map(|o| ibv_sge { addr: pa + o, length: 8, lkey: la });
        let mut list: Vec<ibv_send_wr> = (0..3)
            .map(|i| ibv_send_wr {
                wr_id: 20 + i as u64,
                next: core::ptr::null_mut(),
                sg_list: &mut sg[i],
                num_sge: 1,
                opcode: 0, // IBV_WR_RDMA_WRITE
                send_flags: SIGNALED,
                imm_data: 0,
                wr: [pb + 1024 + 8 * i as u64, u64::from(rb), 0, 0],
                qp_type: 0,
                bind_mw: [0; 6],
            })
            .collect();
        let (l0, l1, l2) = (&mut list[0] as *mut ibv_send_wr, &mut list[1] as *mut _, &mut list[2] as *mut _);
        (*l0).next = l1;
        (*l1).next = l2;
        type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
        let post_send = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        let mut bad_wr = core::ptr::null_mut();
        let before = syscw();
        assert_eq!(post_send(a, l0, &mut bad_wr), 0);
        assert_eq!(syscw() - before, 1, "one doorbell (write) for the list");
        assert_eq!(poll(cq_a, 3).iter().map(|d| (d.wr_id, d.status)).collect::<Vec<_>>(), [(20, 0), (21, 0), (22, 0)]);
        assert_eq!(&buf_b[1024..1048], &buf_a[..24], "the list's writes");
        // A malformed request in the middle: the one before it is posted,
        // `*bad_wr` names it, the one after is not posted.
        (*l1).opcode = 99;
        assert_eq!(post_send(a, l0, &mut bad_wr), libc::EINVAL);
        assert_eq!(bad_wr, l1);
        assert_eq!(poll(cq_a, 1).iter().map(|d| d.wr_id).collect::<Vec<_>>(), [20]);

        // ibv_resize_cq: `cq->cqe` follows, the CQ keeps working (below).
        assert_eq!((lib.resize_cq)(cq_a.cast(), 128), 0);
        assert!((*cq_a).cq.cqe >= 128, "cq->cqe after resize: {}", (*cq_a).cq.cqe);
        assert_eq!((lib.resize_cq)(cq_a.cast(), 0), libc::EINVAL);
        // ibv_rereg_mr: rdma-core 44's input checks (-1, EINVAL), a PD
        // change refused (-4, EOPNOTSUPP, as rdma-core on rxe), and an access
        // change done, or refused by a kernel without rereg for rxe.
        let null: *mut c_void = core::ptr::null_mut();
        for (flags, access) in [(8, 0), (1, 0), (0, ACCESS_ALL)] {
            assert_eq!((lib.rereg_mr)(mr_a, flags, null.cast(), null, 0, access), -1, "flags {flags}");
            assert_eq!(errno(), libc::EINVAL, "flags {flags}");
        }
        assert_eq!((lib.rereg_mr)(mr_a, 2, pd, null, 0, 0), -4);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let r = (lib.rereg_mr)(mr_a, 4, null.cast(), null, 0, ACCESS_ALL);
        println!("ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS): {r}, errno {}", if r == 0 { 0 } else { errno() });
        assert!(r == 0 || (r == -4 && errno() == libc::EOPNOTSUPP), "rereg access: {r}, errno {}", errno());
        let la = (*mr_a).lkey; // the keys may have changed

        // wr_abort posts nothing; the empty CQ answers ENOENT.
        w.start();
        w.next(6, SIGNALED);
        w.send();
        w.sge(la, pa, 8);
        w.abort();
        // A plain send and an inline list then complete, and nothing else.
        post_recv(ctx, b, 901, pb + 256, 64, lb);
        w.start();
        w.next(7, SIGNALED);
        w.send();
        let parts = [
            ibv_data_buf { addr: pa as *mut c_void, length: 4 },
            ibv_data_buf { addr: (pa + 8) as *mut c_void, length: 4 },
        ];
        w.inline_list(&parts);
        assert_eq!(w.complete(), 0);
        assert_eq!(
            poll(cq_a, 1).iter().map(|d| d.wr_id).collect::<Vec<_>>(),
            [7],
            "the aborted request was not posted"
        );
        let got = poll(cq_b, 1);
        assert_eq!((got[0].wr_id, got[0].byte_len), (901, 8));
        assert_eq!(&buf_b[256..260], &buf_a[0..4]);
        assert_eq!(&buf_b[260..264], &buf_a[8..12]);
        // The MR's (maybe new) lkey still gathers, through the resized CQ.
        w.start();
        w.next(10, SIGNALED);
        w.rdma_write(rb, pb + 512);
        w.sge(la, pa, 32);
        assert_eq!(w.complete(), 0);
        let d = poll(cq_a, 1);
        assert_eq!((d[0].wr_id, d[0].status, d[0].opcode), (10, 0, 1), "{d:?}");
        assert_eq!(&buf_b[512..544], &buf_a[..32]);
        let mut pa_attr = ibv_poll_cq_attr { comp_mask: 0 };
        let start = core::mem::transmute::<Slot, unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>(
            (*cq_a).start_poll,
        );
        assert_eq!(start(cq_a, &mut pa_attr), ENOENT, "an empty CQ");
        assert_eq!(errno(), ENOENT);

        // Errors are remembered and returned by wr_complete; nothing is posted.
        w.start();
        w.next(8, SIGNALED);
        w.send();
        w.inline(&[0u8; 4096]);
        assert_eq!(w.complete(), libc::ENOSPC, "inline data beyond max_inline_data");
        w.start();
        w.sge(la, pa, 8);
        assert_eq!(w.complete(), libc::EINVAL, "a setter before any builder");
        w.start();
        w.next(9, SIGNALED);
        w.send();
        w.sge_list(&vec![ibv_sge { addr: pa, length: 1, lkey: la }; qa.cap.max_send_sge as usize + 1]);
        assert_eq!(w.complete(), libc::ENOSPC, "more SGEs than max_send_sge");
        w.start();
        for i in 0..=qa.cap.max_send_wr {
            w.next(100 + u64::from(i), 0);
            w.send();
        }
        assert_eq!(w.complete(), libc::ENOSPC, "more requests than the send queue holds");
        assert_eq!(start(cq_a, &mut pa_attr), ENOENT, "nothing was posted by the failed batches");

        for q in [a, b] {
            assert_eq!((lib.destroy_qp)(q), 0);
        }
        for m in [mr_a, mr_b] {
            assert_eq!((lib.dereg_mr)(m), 0);
        }
        for c in [cq_a, cq_b] {
            assert_eq!((lib.destroy_cq)(c.cast()), 0);
        }
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `ibv_poll_cq` through the context's op, until `n` completions.
///
/// # Safety
/// `ctx` and `cq` are live objects of the library.
unsafe fn poll_wc(ctx: *mut ibv_context, cq: *mut ibv_cq, n: usize) -> Vec<ibv_wc> {
    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    // SAFETY: the caller's contract; `ops.poll_cq` is the library's.
    let poll = unsafe { core::mem::transmute::<Slot, PollCq>((*ctx).ops.poll_cq) };
    let mut out = Vec::new();
    let t0 = Instant::now();
    while out.len() < n {
        assert!(t0.elapsed() < DEADLINE, "only {} of {n} completions", out.len());
        // SAFETY: `ibv_wc` is plain integers.
        let mut wc: ibv_wc = unsafe { core::mem::zeroed() };
        // SAFETY: a live CQ, room for one completion.
        match unsafe { poll(cq, 1, &mut wc) } {
            0 => std::thread::yield_now(),
            1 => out.push(wc),
            r => panic!("ibv_poll_cq: {r}"),
        }
    }
    out
}

/// RESET → INIT → RTR → RTS for a UD QP.
///
/// # Safety
/// `qp` is a live UD QP of `lib`.
unsafe fn ud_ready(lib: &Lib, qp: *mut ibv_qp, qkey: u32) {
    // SAFETY: `ibv_qp_attr` is plain integers.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = 1;
    a.port_num = 1;
    a.qkey = qkey;
    // SAFETY: a live QP, the caller's attr. STATE | PKEY_INDEX | PORT | QKEY
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, 1 | 16 | 32 | 64) }, 0, "UD to INIT");
    a.qp_state = 2;
    // SAFETY: as above.
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, 1) }, 0, "UD to RTR");
    a.qp_state = 3;
    // SAFETY: as above. STATE | SQ_PSN
    assert_eq!(unsafe { (lib.modify_qp)(qp, &mut a, 1 | (1 << 16)) }, 0, "UD to RTS");
}

#[test]
fn ud_reply_through_an_ah_from_the_received_completion() {
    let dev = test_device();
    if !need(dev.is_some(), "no uverbs device") {
        return;
    }
    if dev.as_ref().is_some_and(|d| not_on_iwarp(d, "no UD on iWARP", refuses_ud)) {
        return;
    }
    let Some(dir) = lib_dir() else {
        need(false, "rverbs' libibverbs.so.1 was not built or installed");
        return;
    };
    let dev = dev.unwrap();
    let sgid = dev.open().expect("open").default_sgid_index(1).expect("a RoCE GID");
    let lib = load(&dir);
    const QKEY: u32 = 0x1111_2222;
    // SAFETY: as in the RC test: the C API driven by its contract.
    unsafe {
        let mut n = 0;
        let list = (lib.get_device_list)(&mut n);
        let d = (0..n as usize)
            .map(|i| *list.add(i))
            .find(|&d| std::ffi::CStr::from_ptr((*d).name.as_ptr() as *const c_char).to_str() == Ok(dev.name()))
            .expect("the device is listed");
        let ctx = (lib.open_device)(d);
        let mut gid = [0u8; 16];
        assert_eq!((lib.query_gid)(ctx, 1, c_int::from(sgid), &mut gid), 0);
        let v = vctx(ctx);
        let create_cq_ex = core::mem::transmute::<Slot, CreateCqEx>(v.ops_a[24]);
        let create_qp_ex = core::mem::transmute::<Slot, CreateQpEx>(v.ops_b[1]);
        let mut ca = cq_attr(WC_STANDARD);
        let (cq_a, cq_b) = (create_cq_ex(ctx, &mut ca), create_cq_ex(ctx, &mut ca));
        let pd = (lib.alloc_pd)(ctx);
        // UD: IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM.
        let mut bad = qp_attr_ex(pd, cq_a.cast(), SEND_OPS);
        bad.qp_type = 4;
        assert!(create_qp_ex(ctx, &mut bad).is_null(), "RDMA ops on a UD QP");
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let mut qa = qp_attr_ex(pd, cq_a.cast(), 4 | 8);
        qa.qp_type = 4;
        let mut qb = qp_attr_ex(pd, cq_b.cast(), 4 | 8);
        qb.qp_type = 4;
        let (a, b) = (create_qp_ex(ctx, &mut qa), create_qp_ex(ctx, &mut qb));
        assert!(!a.is_null() && !b.is_null(), "UD create_qp_ex: errno {}", errno());
        ud_ready(&lib, a, QKEY);
        ud_ready(&lib, b, QKEY);
        let mut buf_a = vec![0u8; 4096];
        let mut buf_b = vec![0u8; 4096];
        buf_a[..16].copy_from_slice(b"ud, a to b .....");
        buf_b[1024..1040].copy_from_slice(b"ud, b back to a.");
        let mr_a = (lib.reg_mr)(pd, buf_a.as_mut_ptr().cast(), buf_a.len(), 1);
        let mr_b = (lib.reg_mr)(pd, buf_b.as_mut_ptr().cast(), buf_b.len(), 1);
        let (la, lb) = ((*mr_a).lkey, (*mr_b).lkey);
        let (pa, pb) = (buf_a.as_ptr() as u64, buf_b.as_ptr() as u64);

        let mut attr = ibv_ah_attr {
            grh: ibv_global_route { dgid: gid, flow_label: 0, sgid_index: sgid, hop_limit: 1, traffic_class: 0 },
            dlid: 0,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: 1,
        };
        let ah_ab = (lib.create_ah)(pd, &mut attr);
        assert!(!ah_ab.is_null(), "create_ah: errno {}", errno());
        post_recv(ctx, b, 50, pb, 128, lb); // 40 bytes of GRH area, then the payload
        let w = Wr { x: (lib.qp_to_qp_ex)(a) };
        w.start();
        w.next(1, SIGNALED);
        w.send_imm((*a).qp_num);
        w.ud_addr(ah_ab, (*b).qp_num, QKEY);
        w.sge(la, pa, 16);
        assert_eq!(w.complete(), 0);
        // A UD request without an address is refused by wr_complete.
        w.start();
        w.next(2, SIGNALED);
        w.send();
        w.sge(la, pa, 16);
        assert_eq!(w.complete(), libc::EINVAL, "UD send without wr_set_ud_addr");

        let sent = poll_wc(ctx, cq_a.cast(), 1);
        assert_eq!((sent[0].wr_id, sent[0].status), (1, 0));
        let mut got = poll_wc(ctx, cq_b.cast(), 1);
        let wc = &mut got[0];
        assert_eq!((wc.wr_id, wc.status, wc.byte_len), (50, 0, 40 + 16), "{:?}", (wc.wr_id, wc.status, wc.byte_len));
        assert_eq!(wc.wc_flags & 1, 1, "IBV_WC_GRH on a RoCE UD receive");
        assert_eq!(u32::from_be(wc.imm_data), (*a).qp_num);
        assert_eq!(wc.src_qp, (*a).qp_num);
        assert_eq!(&buf_b[40..56], &buf_a[..16]);

        println!("GRH area of the receive: {:02x?}", &buf_b[..40]);
        let grh = buf_b.as_mut_ptr().cast::<ibv_grh>();
        let mut back: ibv_ah_attr = core::mem::zeroed();
        assert_eq!((lib.init_ah_from_wc)(ctx, 1, wc, grh, &mut back), 0, "init_ah_from_wc: errno {}", errno());
        assert_eq!(back.is_global, 1);
        assert_eq!(back.port_num, 1);
        assert_eq!(back.grh.dgid, gid, "the sender's GID (this device's own)");
        assert_eq!(back.grh.sgid_index, sgid, "the local GID the packet was sent to");
        assert_eq!(back.dlid, wc.slid);
        let ah_ba = (lib.create_ah_from_wc)(pd, wc, grh, 1);
        assert!(!ah_ba.is_null(), "create_ah_from_wc: errno {}", errno());

        post_recv(ctx, a, 60, pa + 1024, 128, la);
        let w = Wr { x: (lib.qp_to_qp_ex)(b) };
        w.start();
        w.next(3, SIGNALED);
        w.send();
        w.ud_addr(ah_ba, u32::from_be(wc.imm_data), QKEY);
        w.sge(lb, pb + 1024, 16);
        assert_eq!(w.complete(), 0);
        assert_eq!(poll_wc(ctx, cq_b.cast(), 1)[0].status, 0);
        let r = poll_wc(ctx, cq_a.cast(), 1);
        assert_eq!((r[0].wr_id, r[0].status, r[0].src_qp), (60, 0, (*b).qp_num));
        assert_eq!(&buf_a[1024 + 40..1024 + 56], &buf_b[1024..1040], "the reply through the AH from the completion");

        // Bad flows, as rdma-core 44: a multicast destination GID (EINVAL),
        // a header that is neither IPv6 nor IPv4 (EPROTONOSUPPORT).
        let mut fake = [0u8; 40];
        fake[0] = 0x60; // IPv6
        fake[6] = 17; // UDP: RoCE v2
        fake[24] = 0xff; // dgid ff..: multicast
        let fake_grh = fake.as_mut_ptr().cast::<ibv_grh>();
        assert_eq!((lib.init_ah_from_wc)(ctx, 1, wc, fake_grh, &mut back), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert!((lib.create_ah_from_wc)(pd, wc, fake_grh, 1).is_null());
        assert_eq!(errno(), libc::EINVAL);
        let mut junk = [0u8; 40];
        let junk_grh = junk.as_mut_ptr().cast::<ibv_grh>();
        assert_eq!((lib.init_ah_from_wc)(ctx, 1, wc, junk_grh, &mut back), -1);
        assert_eq!(errno(), libc::EPROTONOSUPPORT);
        // Without IBV_WC_GRH the GRH area is not looked at (but for the flow label).
        wc.wc_flags &= !1;
        assert_eq!((lib.init_ah_from_wc)(ctx, 1, wc, junk_grh, &mut back), 0);
        assert_eq!(back.is_global, 0);

        // Multicast: b joins an IPv4 group (the host's IP membership by a
        // UDP socket, as on RoCE the kernel's attach programs only the
        // link-layer filter; then `ibv_attach_mcast`), a sends to it.
        let ip = std::net::Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]);
        let group_ip = std::net::Ipv4Addr::new(239, 8, 8, 8);
        let member = std::net::UdpSocket::bind((ip, 0)).unwrap();
        member.join_multicast_v4(&group_ip, &ip).unwrap();
        let group = group_ip.to_ipv6_mapped().octets();
        assert_eq!((lib.attach_mcast)(b, &group, 0), 0, "attach_mcast: errno {}", errno());
        assert_eq!((lib.attach_mcast)(b, &group, 0), 0, "a second attach of the same group");
        assert_eq!((lib.destroy_qp)(b), libc::EBUSY, "rdma-core 44: no destroy of a QP in a group");
        attr.grh.dgid = group;
        let ah_mc = (lib.create_ah)(pd, &mut attr);
        assert!(!ah_mc.is_null(), "create_ah to the group: errno {}", errno());
        buf_a[2048..2064].copy_from_slice(b"ud, a to group..");
        post_recv(ctx, b, 70, pb + 2048, 128, lb);
        let w = Wr { x: (lib.qp_to_qp_ex)(a) };
        w.start();
        w.next(4, SIGNALED);
        w.send();
        w.ud_addr(ah_mc, 0xff_ffff, QKEY);
        w.sge(la, pa + 2048, 16);
        assert_eq!(w.complete(), 0);
        assert_eq!(poll_wc(ctx, cq_a.cast(), 1)[0].status, 0);
        let r = poll_wc(ctx, cq_b.cast(), 1);
        assert_eq!((r[0].wr_id, r[0].status, r[0].src_qp), (70, 0, (*a).qp_num));
        assert_eq!(&buf_b[2048 + 40..2048 + 56], &buf_a[2048..2064], "the datagram sent to the group");
        assert_eq!((lib.detach_mcast)(b, &group, 0), 0, "detach_mcast: errno {}", errno());
        assert_eq!((lib.detach_mcast)(b, &group, 0), libc::EINVAL, "a detach of a group the QP left");
        assert_eq!((lib.attach_mcast)(b, &gid, 0), libc::EINVAL, "a unicast GID");
        assert_eq!((lib.attach_mcast)(b, core::ptr::null(), 0), libc::EINVAL, "no GID");
        drop(member);

        for ah in [ah_ab, ah_ba, ah_mc] {
            assert_eq!((lib.destroy_ah)(ah), 0);
        }
        for q in [a, b] {
            assert_eq!((lib.destroy_qp)(q), 0);
        }
        for m in [mr_a, mr_b] {
            assert_eq!((lib.dereg_mr)(m), 0);
        }
        for c in [cq_a, cq_b] {
            assert_eq!((lib.destroy_cq)(c.cast()), 0);
        }
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `IBV_QP_EX_WITH_LOCAL_INV | BIND_MW | SEND_WITH_INV`.
const MW_OPS: u64 = 1 << 7 | 1 << 8 | 1 << 9;
/// `IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND`: remote access only through windows.
const MW_TARGET: c_int = 1 | 16;
/// `IBV_ACCESS_REMOTE_WRITE`.
const REMOTE_WRITE: u32 = 2;
/// `IBV_WC_RDMA_WRITE`, `IBV_WC_BIND_MW`, `IBV_WC_LOCAL_INV`; `IBV_WC_REM_ACCESS_ERR`.
const WC_RDMA_WRITE: u32 = 1;
const WC_BIND_MW: u32 = 5;
const WC_LOCAL_INV: u32 = 6;
const WC_REM_ACCESS_ERR: u32 = 10;

/// Memory windows the way pyverbs' `MWTest` and C programs use them: the
/// context's `alloc_mw`/`bind_mw`/`dealloc_mw` ops (what the `verbs.h`
/// inlines call), a type 1 window bound by `ibv_bind_mw` (its `rkey` field
/// moves on), a type 2 window bound by an `IBV_WR_BIND_MW` request through
/// `ibv_post_send` and another by `wr_bind_mw`, each opened to the peer's
/// RDMA WRITE and closed again (a zero-length type 1 bind, `wr_local_inv`,
/// `IBV_WR_LOCAL_INV`), the peer's write then failing with REM_ACCESS_ERR;
/// `ibv_dealloc_pd` answers EBUSY while windows exist.
#[test]
fn memory_windows_through_the_c_abi() {
    if hand_connected_na() {
        return;
    }
    let Some(Opened { lib, ctx, gid, sgid, create_cq_ex, create_qp_ex }) = open_first_device() else { return };
    type AllocMw = unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mw;
    type BindMw = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;
    type DeallocMw = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    // SAFETY: the test drives the C API by its contract: every pointer passed
    // is a live object of the library or a buffer of this test that outlives
    // the requests using it.
    unsafe {
        let ops = &(*ctx).ops;
        assert!(!ops.alloc_mw.is_null(), "alloc_mw is set (the inline answers EOPNOTSUPP when it is NULL)");
        let alloc_mw = core::mem::transmute::<Slot, AllocMw>(ops.alloc_mw);
        let bind_mw = core::mem::transmute::<Slot, BindMw>(ops.bind_mw);
        let dealloc_mw = core::mem::transmute::<Slot, DeallocMw>(ops.dealloc_mw);
        let post_send = core::mem::transmute::<Slot, PostSend>(ops.post_send);

        let mut ca = cq_attr(WC_STANDARD);
        let (cq_a, cq_b) = (create_cq_ex(ctx, &mut ca), create_cq_ex(ctx, &mut ca));
        let pd = (lib.alloc_pd)(ctx);
        let mut qa = qp_attr_ex(pd, cq_a.cast(), SEND_OPS | MW_OPS);
        let mut qb = qp_attr_ex(pd, cq_b.cast(), SEND_OPS | MW_OPS);
        let (a, b) = (create_qp_ex(ctx, &mut qa), create_qp_ex(ctx, &mut qb));
        assert!(!a.is_null() && !b.is_null(), "create_qp_ex with the MW ops: errno {}", errno());
        connect(&lib, a, (*b).qp_num, gid, sgid);
        connect(&lib, b, (*a).qp_num, gid, sgid);
        let (wa, wb) = (Wr { x: (lib.qp_to_qp_ex)(a) }, Wr { x: (lib.qp_to_qp_ex)(b) });
        assert!(!(*wb.x).wr_bind_mw.is_null() && !(*wb.x).wr_local_inv.is_null() && !(*wb.x).wr_send_inv.is_null());

        let mut buf_a = vec![0u8; 4096];
        let mut buf_b = vec![0u8; 4096];
        let mr_a = (lib.reg_mr)(pd, buf_a.as_mut_ptr().cast(), buf_a.len(), ACCESS_ALL);
        let mr_b = (lib.reg_mr)(pd, buf_b.as_mut_ptr().cast(), buf_b.len(), MW_TARGET);
        assert!(!mr_a.is_null() && !mr_b.is_null(), "reg_mr with MW_BIND: errno {}", errno());
        let (la, pa, pb) = ((*mr_a).lkey, buf_a.as_ptr() as u64, buf_b.as_ptr() as u64);
        let info = ibv_mw_bind_info { mr: mr_b, addr: pb, length: 256, mw_access_flags: REMOTE_WRITE };
        // A writes 32 bytes of `fill` through `rkey`; the completion's status.
        let mut write = |rkey: u32, fill: u8| -> u32 {
            buf_a[..32].fill(fill);
            wa.start();
            wa.next(50, SIGNALED);
            wa.rdma_write(rkey, pb);
            wa.sge(la, pa, 32);
            assert_eq!(wa.complete(), 0);
            let d = poll(cq_a, 1);
            if d[0].status == 0 {
                assert_eq!((d[0].wr_id, d[0].opcode), (50, WC_RDMA_WRITE));
            }
            d[0].status
        };

        assert!(alloc_mw(pd, 3).is_null(), "a window of type 3");
        assert_eq!(errno(), libc::EINVAL);
        let mw1 = alloc_mw(pd, 1);
        assert!(!mw1.is_null(), "alloc_mw type 1: errno {}", errno());
        assert_eq!(((*mw1).context, (*mw1).pd, (*mw1).mw_type), (ctx, pd, 1));
        assert_eq!((lib.dealloc_pd)(pd), libc::EBUSY, "a window holds the PD");

        // Type 1, ibv_bind_mw: the window's key moves on; A's write lands.
        let first = (*mw1).rkey;
        let mut bind = ibv_mw_bind { wr_id: 60, send_flags: SIGNALED, bind_info: info };
        assert_eq!(bind_mw(b, mw1, &mut bind), 0);
        assert_eq!((*mw1).rkey, (first & !0xff) | (first.wrapping_add(1) & 0xff), "ibv_inc_rkey");
        let d = poll(cq_b, 1);
        assert_eq!((d[0].wr_id, d[0].status, d[0].opcode), (60, 0, WC_BIND_MW), "{d:?}");
        assert_eq!(write((*mw1).rkey, 0x61), 0, "a write through the type 1 window");
        assert_eq!(&buf_b[..32], &[0x61; 32]);
        // rxe refuses to deregister an MR a window is bound to (EINVAL, on
        // 6.1 and 6.12): the MR stays usable, and the dereg once the window
        // is unbound (below) is the one that frees it (audit-2 N4: it used to
        // free the MR at the refusal, so that dereg was a double free).
        assert_eq!((lib.dereg_mr)(mr_b), libc::EINVAL, "an MR with a bound window");
        assert_eq!(write((*mw1).rkey, 0x62), 0, "the window and its MR still work");
        assert_eq!(&buf_b[..32], &[0x62; 32]);
        let key1 = (*mw1).rkey;
        // A zero-length bind closes it (pyverbs' invalidate_mw_type1).
        let mut unbind = ibv_mw_bind {
            wr_id: 61,
            send_flags: SIGNALED,
            bind_info: ibv_mw_bind_info { length: 0, mw_access_flags: 0, ..info },
        };
        assert_eq!(bind_mw(b, mw1, &mut unbind), 0);
        assert_eq!(poll(cq_b, 1)[0].status, 0);
        let mut zero_based = ibv_mw_bind {
            wr_id: 62,
            send_flags: SIGNALED,
            bind_info: ibv_mw_bind_info { mw_access_flags: REMOTE_WRITE | 0x20, ..info },
        };
        assert_eq!(bind_mw(b, mw1, &mut zero_based), libc::EINVAL, "a zero-based bind");

        // Type 2 through ibv_post_send (IBV_WR_BIND_MW), then IBV_WR_LOCAL_INV.
        let mw2 = alloc_mw(pd, 2);
        assert!(!mw2.is_null());
        let key2 = (*mw2).rkey.wrapping_add(1) & 0xff | (*mw2).rkey & !0xff;
        let mut wr = ibv_send_wr {
            wr_id: 70,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
            opcode: 8, // IBV_WR_BIND_MW
            send_flags: SIGNALED,
            imm_data: 0,
            wr: [0; 4],
            qp_type: 0,
            bind_mw: [mw2 as u64, u64::from(key2), mr_b as u64, pb, 256, u64::from(REMOTE_WRITE)],
        };
        let mut bad_wr = core::ptr::null_mut();
        assert_eq!(post_send(b, &mut wr, &mut bad_wr), 0);
        let d = poll(cq_b, 1);
        assert_eq!((d[0].wr_id, d[0].status, d[0].opcode), (70, 0, WC_BIND_MW), "{d:?}");
        assert_eq!(write(key2, 0x72), 0, "a write through the type 2 window");
        assert_eq!(&buf_b[..32], &[0x72; 32]);
        wr = ibv_send_wr { wr_id: 71, opcode: 7, imm_data: key2, bind_mw: [0; 6], ..wr }; // IBV_WR_LOCAL_INV
        assert_eq!(post_send(b, &mut wr, &mut bad_wr), 0);
        let d = poll(cq_b, 1);
        assert_eq!((d[0].wr_id, d[0].status, d[0].opcode), (71, 0, WC_LOCAL_INV), "{d:?}");

        // A third window, bound by wr_bind_mw and closed by wr_local_inv.
        let mw3 = alloc_mw(pd, 2);
        let key3 = (*mw3).rkey.wrapping_add(1) & 0xff | (*mw3).rkey & !0xff;
        wb.start();
        wb.next(80, SIGNALED);
        wb.bind_mw(mw3, key3, &info);
        assert_eq!(wb.complete(), 0);
        assert_eq!(poll(cq_b, 1)[0].opcode, WC_BIND_MW);
        assert_eq!(write(key3, 0x83), 0, "a write through the wr_bind_mw window");
        assert_eq!(&buf_b[..32], &[0x83; 32]);
        wb.start();
        wb.next(81, SIGNALED);
        wb.local_inv(key3);
        assert_eq!(wb.complete(), 0);
        assert_eq!(poll(cq_b, 1)[0].opcode, WC_LOCAL_INV);

        // Every closed window now refuses A (the first refusal puts the QPs
        // in error: one check is all this pair can make; the others are in
        // tests/memory_window.rs).
        let _ = (key1, key2);
        assert_eq!(write(key3, 0xee), WC_REM_ACCESS_ERR, "a write through an invalidated window");
        assert_eq!(&buf_b[..32], &[0x83; 32], "the refused write changed nothing");

        for m in [mw1, mw2, mw3] {
            assert_eq!(dealloc_mw(m), 0);
        }
        for q in [a, b] {
            assert_eq!((lib.destroy_qp)(q), 0);
        }
        for m in [mr_a, mr_b] {
            assert_eq!((lib.dereg_mr)(m), 0);
        }
        for c in [cq_a, cq_b] {
            assert_eq!((lib.destroy_cq)(c.cast()), 0);
        }
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// Raw pointers of the C API shared by the threads of one test (the
/// library's objects are thread-safe by the C contract).
#[derive(Clone, Copy)]
struct Shared<T>(T);
// SAFETY: the wrapped values are pointers to the library's thread-safe
// objects and to buffers that outlive the threads.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

/// The C API is thread-safe: four threads post one-request RDMA WRITEs to
/// one QP while two others poll its CQ, through the context's ops (as C
/// programs call `ibv_post_send`/`ibv_poll_cq`). The posts and polls race
/// for the QP's and the CQ's locks, so both the one-request fast paths and
/// the paths taken while another thread holds the lock run; every request
/// completes exactly once, successfully, and a full queue answers ENOMEM
/// (the poster retries) rather than losing or doubling a request.
///
/// The posters keep at most `WINDOW` requests unpolled: rxe frees a send
/// queue slot when it writes the request's completion, not when that is
/// polled, so posters that outran the pollers would overrun the CQ, whose
/// extra completions rxe drops (the verbs contract: the CQ must hold every
/// completion not yet polled). Without the window this test lost
/// completions on 6.12 about once in eight runs.
#[test]
fn threads_post_and_poll_one_qp_and_one_cq_at_once() {
    if hand_connected_na() {
        return;
    }
    let Some(Opened { lib, ctx, gid, sgid, create_cq_ex, .. }) = open_first_device() else { return };
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    const POSTERS: u64 = 4;
    const PER_POSTER: u64 = 300;
    const TOTAL: usize = (POSTERS * PER_POSTER) as usize;
    // Requests posted and not yet polled, at most (the CQ holds 256; each
    // poster may pass the check at once, so 4 more).
    const WINDOW: usize = 128;
    // SAFETY: the test drives the C API by its contract: every pointer passed
    // is a live object of the library or a buffer of this test that outlives
    // the requests using it (the threads are joined before anything goes).
    unsafe {
        let ops = &(*ctx).ops;
        let post_send = core::mem::transmute::<Slot, PostSend>(ops.post_send);
        let poll_cq = core::mem::transmute::<Slot, PollCq>(ops.poll_cq);
        let mut ca = cq_attr(WC_STANDARD);
        ca.cqe = 256;
        let (cq_a, cq_b) = (create_cq_ex(ctx, &mut ca), create_cq_ex(ctx, &mut ca));
        assert!(!cq_a.is_null() && !cq_b.is_null(), "create_cq_ex: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        let init = |cq: *mut ibv_cq_ex| ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq.cast(),
            recv_cq: cq.cast(),
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap { max_send_wr: 32, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: 2,
            sq_sig_all: 0,
        };
        let (mut ia, mut ib) = (init(cq_a), init(cq_b));
        let (a, b) = ((lib.create_qp)(pd, &mut ia), (lib.create_qp)(pd, &mut ib));
        assert!(!a.is_null() && !b.is_null(), "create_qp: errno {}", errno());
        connect(&lib, a, (*b).qp_num, gid, sgid);
        connect(&lib, b, (*a).qp_num, gid, sgid);
        let mut buf_a = vec![0x3cu8; 4096];
        let mut buf_b = vec![0u8; 4096];
        let mr_a = (lib.reg_mr)(pd, buf_a.as_mut_ptr().cast(), buf_a.len(), ACCESS_ALL);
        let mr_b = (lib.reg_mr)(pd, buf_b.as_mut_ptr().cast(), buf_b.len(), ACCESS_ALL);
        assert!(!mr_a.is_null() && !mr_b.is_null());
        let (la, rb, pa, pb) = ((*mr_a).lkey, (*mr_b).rkey, buf_a.as_ptr() as u64, buf_b.as_ptr() as u64);

        let (qp, cq) = (Shared(a), Shared(cq_a.cast::<ibv_cq>()));
        let done = std::sync::atomic::AtomicUsize::new(0);
        let posted = std::sync::atomic::AtomicUsize::new(0);
        let seen: Vec<Vec<ibv_wc>> = std::thread::scope(|s| {
            for t in 0..POSTERS {
                let (done, posted) = (&done, &posted);
                s.spawn(move || {
                    let qp = qp;
                    for i in 0..PER_POSTER {
                        let t0 = Instant::now();
                        // Saturating: a completion may be polled before its poster counts it.
                        let unpolled = || {
                            let d = done.load(std::sync::atomic::Ordering::Relaxed);
                            posted.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(d)
                        };
                        while unpolled() >= WINDOW {
                            assert!(t0.elapsed() < DEADLINE, "the completions stopped");
                            std::thread::yield_now();
                        }
                        let off = (t * 16 + i % 16) * 8;
                        let mut sge = ibv_sge { addr: pa + off, length: 8, lkey: la };
                        let mut wr = ibv_send_wr {
                            wr_id: t << 32 | i,
                            next: core::ptr::null_mut(),
                            sg_list: &mut sge,
                            num_sge: 1,
                            opcode: 0, // IBV_WR_RDMA_WRITE
                            send_flags: SIGNALED,
                            imm_data: 0,
                            wr: [pb + off, u64::from(rb), 0, 0],
                            qp_type: 0,
                            bind_mw: [0; 6],
                        };
                        let t0 = Instant::now();
                        loop {
                            let mut bad = core::ptr::null_mut();
                            // SAFETY: a live QP; `wr` and its SGE outlive the call.
                            match post_send(qp.0, &mut wr, &mut bad) {
                                0 => {
                                    posted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    break;
                                }
                                libc::ENOMEM => {
                                    // The send queue is full: the pollers free it.
                                    assert_eq!(bad, &mut wr as *mut ibv_send_wr, "bad_wr names the request");
                                    assert!(t0.elapsed() < DEADLINE, "the queue stayed full");
                                    std::thread::yield_now();
                                }
                                e => panic!("ibv_post_send: {e}"),
                            }
                        }
                    }
                });
            }
            let pollers: Vec<_> = (0..2)
                .map(|_| {
                    let done = &done;
                    s.spawn(move || {
                        let cq = cq;
                        let mut got = Vec::new();
                        let t0 = Instant::now();
                        while done.load(std::sync::atomic::Ordering::Relaxed) < TOTAL {
                            assert!(
                                t0.elapsed() < DEADLINE,
                                "{} of {TOTAL} completions",
                                done.load(std::sync::atomic::Ordering::Relaxed)
                            );
                            // SAFETY: `ibv_wc` is plain integers.
                            let mut wc: [ibv_wc; 4] = core::mem::zeroed();
                            // SAFETY: a live CQ, room for four completions.
                            let n = poll_cq(cq.0, 4, wc.as_mut_ptr());
                            assert!((0..=4).contains(&n), "ibv_poll_cq: {n}");
                            if n == 0 {
                                std::thread::yield_now();
                                continue;
                            }
                            got.extend_from_slice(&wc[..n as usize]);
                            done.fetch_add(n as usize, std::sync::atomic::Ordering::Relaxed);
                        }
                        got
                    })
                })
                .collect();
            pollers.into_iter().map(|p| p.join().expect("poller")).collect()
        });
        let mut ids: Vec<u64> = seen.iter().flatten().map(|w| w.wr_id).collect();
        assert!(seen.iter().flatten().all(|w| w.status == 0 && w.opcode == WC_RDMA_WRITE), "all succeeded");
        ids.sort_unstable();
        let want: Vec<u64> = (0..POSTERS).flat_map(|t| (0..PER_POSTER).map(move |i| t << 32 | i)).collect();
        assert_eq!(ids, want, "every request completed exactly once");
        assert_eq!(&buf_b[..POSTERS as usize * 128], &buf_a[..POSTERS as usize * 128], "the writes landed");
        // Nothing more: an empty CQ polls 0.
        // SAFETY: `ibv_wc` is plain integers; a live CQ.
        let mut wc: ibv_wc = core::mem::zeroed();
        assert_eq!(poll_cq(cq_a.cast(), 1, &mut wc), 0);

        for qp in [a, b] {
            assert_eq!((lib.destroy_qp)(qp), 0);
        }
        assert_eq!((lib.dereg_mr)(mr_a), 0);
        assert_eq!((lib.dereg_mr)(mr_b), 0);
        for cq in [cq_a, cq_b] {
            assert_eq!((lib.destroy_cq)(cq.cast()), 0);
        }
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `ibv_modify_srq` and `ibv_query_srq` (which go through the SRQ's
/// control handle, not its post lock) from a second thread while this one
/// posts to the SRQ through the `post_srq_recv` op, then their bad flows:
/// a limit at the SRQ's size (EINVAL), a resize (EOPNOTSUPP), an unknown
/// mask bit (EINVAL); and `ibv_destroy_srq`.
#[test]
fn srq_limit_and_query_beside_posts() {
    let Some(Opened { lib, ctx, .. }) = open_first_device() else { return };
    type PostSrqRecv = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
    const SRQ_MAX_WR: c_int = 1;
    const SRQ_LIMIT: c_int = 2;
    // SAFETY: the C API by its contract: live objects of the library, and
    // buffers of this test that outlive every call using them.
    unsafe {
        let pd = (lib.alloc_pd)(ctx);
        assert!(!pd.is_null());
        let mut init = ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ibv_srq_attr { max_wr: 64, max_sge: 1, srq_limit: 0 },
        };
        let srq = (lib.create_srq)(pd, &mut init);
        assert!(!srq.is_null(), "create_srq: errno {}", errno());
        let max_wr = init.attr.max_wr;
        assert!(max_wr >= 64, "the size written back: {max_wr}");
        let post = core::mem::transmute::<Slot, PostSrqRecv>((*ctx).ops.post_srq_recv);
        let mut buf = vec![0u8; 64 * 8];
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let (addr, lkey) = (buf.as_ptr() as u64, (*mr).lkey);
        let srq_s = Shared(srq);
        let l = &lib;
        let limits = std::thread::scope(|s| {
            let control = s.spawn(move || {
                let srq = srq_s;
                (1..=8u32)
                    .map(|limit| {
                        let mut a = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: limit };
                        assert_eq!((l.modify_srq)(srq.0, &mut a, SRQ_LIMIT), 0, "modify_srq: limit {limit}");
                        let mut q = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: 0 };
                        assert_eq!((l.query_srq)(srq.0, &mut q), 0);
                        // 6.1's rxe reports its ring's usable size here (127 for 64
                        // asked), 6.12's what create answered: the kernel's figure.
                        assert!(q.max_wr >= max_wr && q.max_sge == 1, "query_srq: {} / {}", q.max_wr, q.max_sge);
                        q.srq_limit
                    })
                    .collect::<Vec<_>>()
            });
            for i in 0..32u64 {
                let mut sge = ibv_sge { addr: addr + (i % 8) * 64, length: 64, lkey };
                let mut wr = ibv_recv_wr { wr_id: i, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
                let mut bad = core::ptr::null_mut();
                assert_eq!(post(srq, &mut wr, &mut bad), 0, "post_srq_recv {i}");
            }
            control.join().unwrap()
        });
        assert_eq!(limits, (1..=8).collect::<Vec<u32>>(), "each query saw the limit just set");
        let mut a = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: max_wr };
        assert_eq!((lib.modify_srq)(srq, &mut a, SRQ_LIMIT), libc::EINVAL, "a limit at the SRQ's size");
        let mut a = ibv_srq_attr { max_wr: max_wr * 2, max_sge: 0, srq_limit: 0 };
        assert_eq!((lib.modify_srq)(srq, &mut a, SRQ_MAX_WR), libc::EOPNOTSUPP, "a resize");
        assert_eq!((lib.modify_srq)(srq, &mut a, 4), libc::EINVAL, "an unknown mask bit");
        let mut q = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: 0 };
        assert_eq!((lib.query_srq)(srq, &mut q), 0);
        assert_eq!(q.srq_limit, 8, "the bad flows left the limit alone");
        assert_eq!((lib.destroy_srq)(srq), 0);
        assert_eq!((lib.dereg_mr)(mr), 0);
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// Two threads create and destroy QPs at the same time, one with (send A,
/// receive B), the other with (send B, receive A): creating takes both CQs'
/// locks, so in argument order each thread could hold one and spin on the
/// other forever (audit-2 N3). They must all finish.
#[test]
fn threads_create_qps_with_swapped_cqs() {
    let Some(Opened { lib, ctx, create_cq_ex, .. }) = open_first_device() else { return };
    const ROUNDS: usize = 5000;
    // SAFETY: the test drives the C API by its contract: every pointer is a
    // live object of the library until the threads are joined and the
    // objects destroyed, in that order.
    unsafe {
        let mut ca = cq_attr(WC_STANDARD);
        ca.cqe = 16;
        let (cq_a, cq_b) = (create_cq_ex(ctx, &mut ca), create_cq_ex(ctx, &mut ca));
        assert!(!cq_a.is_null() && !cq_b.is_null(), "create_cq_ex: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        assert!(!pd.is_null());
        let (lib_r, pd_u, a_u, b_u) = (&lib, pd as usize, cq_a as usize, cq_b as usize);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            for (send, recv) in [(a_u, b_u), (b_u, a_u)] {
                let done = done_tx.clone();
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut init = ibv_qp_init_attr {
                            qp_context: core::ptr::null_mut(),
                            send_cq: send as *mut ibv_cq,
                            recv_cq: recv as *mut ibv_cq,
                            srq: core::ptr::null_mut(),
                            cap: ibv_qp_cap {
                                max_send_wr: 4,
                                max_recv_wr: 4,
                                max_send_sge: 1,
                                max_recv_sge: 1,
                                max_inline_data: 0,
                            },
                            qp_type: 2,
                            sq_sig_all: 0,
                        };
                        let qp = (lib_r.create_qp)(pd_u as *mut ibv_pd, &mut init);
                        assert!(!qp.is_null(), "create_qp: errno {}", errno());
                        assert_eq!((lib_r.destroy_qp)(qp), 0);
                    }
                    done.send(()).unwrap();
                });
            }
            drop(done_tx);
            // A deadlock shows as threads that never finish: say so and end
            // the test binary with a failure instead of hanging until the
            // guest's timeout (the scope would wait for the stuck threads).
            for _ in 0..2 {
                if done_rx.recv_timeout(std::time::Duration::from_secs(120)).is_err() {
                    eprintln!(
                        "threads_create_qps_with_swapped_cqs: two threads creating QPs with swapped CQs deadlocked"
                    );
                    std::process::exit(101);
                }
            }
        });
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.destroy_cq)(cq_a.cast()), 0);
        assert_eq!((lib.destroy_cq)(cq_b.cast()), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `IBV_EVENT_SRQ_LIMIT_REACHED`.
const SRQ_LIMIT_REACHED: u32 = 15;

/// Runs `f` on another thread and gives its result, or ends the test
/// binary with a failure after `secs` seconds: a verb that hangs fails the
/// test instead of stalling the guest until its timeout.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("{what}: no answer in {secs} s");
            std::process::exit(101);
        }
    }
}

/// rdma-core's destroy/acknowledge contract (audit-2 N1): `ibv_destroy_srq`
/// and `ibv_destroy_cq` return only after the async and completion events
/// handed out for the object are acknowledged, and the event names the
/// object until then. An RC QP connected to itself takes its receives from
/// an SRQ armed at 6 of 8: three SENDs raise SRQ_LIMIT_REACHED and a
/// completion event; another thread acknowledges each 300 ms after the
/// destroy started. Before the fix the destroys returned at once (and the
/// acknowledgements wrote freed memory).
#[test]
fn destroys_wait_until_the_events_are_acknowledged() {
    if hand_connected_na() {
        return;
    }
    let Some(o) = open_first_device() else { return };
    let Opened { lib, ctx, create_cq_ex, .. } = &o;
    let (ctx, create_cq_ex) = (*ctx, *create_cq_ex);
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    type PostSrqRecv = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
    type ReqNotify = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
    const SRQ_LIMIT: c_int = 2;
    // SAFETY: the C API by its contract: live objects of the library, and
    // buffers of this test that outlive every request using them; the
    // acknowledging threads are joined before the test returns.
    unsafe {
        let chan = (lib.create_comp_channel)(ctx);
        assert!(!chan.is_null(), "create_comp_channel: errno {}", errno());
        let mut ca = cq_attr(WC_STANDARD);
        ca.channel = chan;
        let cq = create_cq_ex(ctx, &mut ca).cast::<ibv_cq>();
        assert!(!cq.is_null(), "create_cq_ex: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        let mut si = ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ibv_srq_attr { max_wr: 16, max_sge: 1, srq_limit: 0 },
        };
        let srq = (lib.create_srq)(pd, &mut si);
        assert!(!srq.is_null(), "create_srq: errno {}", errno());
        let qp = self_connected_rc(&o, pd, cq, srq, 8);
        let mut buf = vec![0u8; 8 * 64];
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let (addr, lkey) = (buf.as_ptr() as u64, (*mr).lkey);
        let post_srq = core::mem::transmute::<Slot, PostSrqRecv>((*ctx).ops.post_srq_recv);
        for i in 0..8u64 {
            let mut sge = ibv_sge { addr: addr + i * 64, length: 64, lkey };
            let mut wr = ibv_recv_wr { wr_id: i, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
            let mut bad = core::ptr::null_mut();
            assert_eq!(post_srq(srq, &mut wr, &mut bad), 0, "post_srq_recv {i}");
        }
        let mut a = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: 6 };
        assert_eq!((lib.modify_srq)(srq, &mut a, SRQ_LIMIT), 0, "arm the SRQ limit");
        let req_notify = core::mem::transmute::<Slot, ReqNotify>((*ctx).ops.req_notify_cq);
        assert_eq!(req_notify(cq, 0), 0);
        let post_send = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        for i in 0..3u64 {
            let mut sge = ibv_sge { addr, length: 8, lkey };
            let mut wr = send_wr(100 + i, &mut sge, core::ptr::null_mut());
            let mut bad = core::ptr::null_mut();
            assert_eq!(post_send(qp, &mut wr, &mut bad), 0, "post_send {i}");
        }
        let wcs = poll_wc(ctx, cq, 6);
        assert!(wcs.iter().all(|w| w.status == 0), "{:?}", wcs.iter().map(|w| w.status).collect::<Vec<_>>());

        let (chan_u, ctx_u) = (chan as usize, ctx as usize);
        let (get_cq_event, get_async_event) = (lib.get_cq_event, lib.get_async_event);
        let (ack_cq_events, ack_async_event) = (lib.ack_cq_events, lib.ack_async_event);
        let (got_cq, cq_ctx) = within(30, "ibv_get_cq_event", move || {
            let (mut c, mut cc) = (core::ptr::null_mut(), core::ptr::null_mut());
            let r = get_cq_event(chan_u as *mut ibv_comp_channel, &mut c, &mut cc);
            assert_eq!(r, 0, "get_cq_event: errno {}", errno());
            (c as usize, cc as usize)
        });
        assert_eq!((got_cq, cq_ctx), (cq as usize, 0), "the completion event names the CQ");
        let ev = within(30, "ibv_get_async_event", move || {
            let mut ev = ibv_async_event { element: core::ptr::null_mut(), event_type: u32::MAX };
            assert_eq!(get_async_event(ctx_u as *mut ibv_context, &mut ev), 0, "errno {}", errno());
            (ev.element as usize, ev.event_type)
        });
        assert_eq!(ev, (srq as usize, SRQ_LIMIT_REACHED), "the SRQ limit event names the SRQ");

        assert_eq!((lib.destroy_qp)(qp), 0, "no event of the QP to wait for");
        // Each destroy starts with its event handed out and unacknowledged;
        // a thread acknowledges it 300 ms later and notes when.
        let acked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ack_later = |ack: Box<dyn FnOnce() + Send>| {
            let acked = acked.clone();
            acked.store(false, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                acked.store(true, std::sync::atomic::Ordering::SeqCst);
                ack();
            })
        };
        let (srq_u, cq_u) = (srq as usize, cq as usize);
        let ack_srq = ack_later(Box::new(move || {
            let mut e = ibv_async_event { element: srq_u as *mut c_void, event_type: SRQ_LIMIT_REACHED };
            ack_async_event(&mut e);
            // rdma-core's counter, which the destroy waits for, is visible
            // to C: 1 here, read before the destroy can free the SRQ.
            assert_eq!((*(srq_u as *mut ibv_srq)).events_completed, 1);
        }));
        assert_eq!((lib.destroy_srq)(srq), 0);
        assert!(acked.load(std::sync::atomic::Ordering::SeqCst), "ibv_destroy_srq returned before the event's ack");
        ack_srq.join().unwrap();
        let ack_cq = ack_later(Box::new(move || ack_cq_events(cq_u as *mut ibv_cq, 1)));
        assert_eq!((lib.destroy_cq)(cq), 0);
        assert!(acked.load(std::sync::atomic::Ordering::SeqCst), "ibv_destroy_cq returned before the event's ack");
        ack_cq.join().unwrap();
        assert_eq!((lib.destroy_comp_channel)(chan), 0);
        assert_eq!((lib.dereg_mr)(mr), 0);
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// The async fd is blocking, as libibverbs opens it, and a caller that sets
/// `O_NONBLOCK` on it gets EAGAIN from `ibv_get_async_event` at once when
/// no event is queued (it slept for good before).
#[test]
fn async_fd_is_blocking_and_honours_o_nonblock() {
    let Some(Opened { lib, ctx, .. }) = open_first_device() else { return };
    // SAFETY: a live context of the library; fcntl on its async fd.
    unsafe {
        let fd = (*ctx).async_fd;
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(fl & libc::O_NONBLOCK, 0, "ibv_open_device's async fd is blocking");
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
        let (ctx_u, get_async_event) = (ctx as usize, lib.get_async_event);
        let r = within(30, "ibv_get_async_event on an O_NONBLOCK fd", move || {
            let mut ev = ibv_async_event { element: core::ptr::null_mut(), event_type: u32::MAX };
            (get_async_event(ctx_u as *mut ibv_context, &mut ev), errno())
        });
        assert_eq!(r, (-1, libc::EAGAIN));
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// A failed rxe doorbell `write()` (audit-2 N2): the requests are in the
/// ring all the same and the kernel takes them at the next doorbell, so
/// `ibv_post_send` returns the doorbell's errno and leaves `*bad_wr`
/// alone, as rdma-core's rxe does; a caller that reposted from `*bad_wr`
/// would send a request twice. The doorbell fails with EACCES in a thread
/// whose credentials changed after the device was opened (the kernel's
/// `ib_safe_file_access`; here a raw `setgroups`, which changes only the
/// calling thread's): one request alone and a list of two from there, one
/// more from this thread, and every SEND completes exactly once. Before
/// the fix: EINVAL, and `*bad_wr` named a request that was posted.
#[test]
fn a_failed_doorbell_leaves_bad_wr_alone() {
    if hand_connected_na() {
        return;
    }
    let Some(o) = open_first_device() else { return };
    let Opened { lib, ctx, create_cq_ex, .. } = &o;
    let (ctx, create_cq_ex) = (*ctx, *create_cq_ex);
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    // SAFETY: the C API by its contract: live objects of the library, and
    // buffers of this test that outlive every request using them.
    unsafe {
        let mut ca = cq_attr(WC_STANDARD);
        let cq = create_cq_ex(ctx, &mut ca).cast::<ibv_cq>();
        assert!(!cq.is_null(), "create_cq_ex: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        let qp = self_connected_rc(&o, pd, cq, core::ptr::null_mut(), 8);
        let mut buf = vec![0u8; 8 * 64];
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let (addr, lkey) = (buf.as_ptr() as u64, (*mr).lkey);
        for i in 0..4u64 {
            post_recv(ctx, qp, 50 + i, addr + 64 + i * 64, 64, lkey);
        }
        let post_send = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        let send = |wr_id: u64, sge: &mut ibv_sge, next: *mut ibv_send_wr| send_wr(wr_id, sge, next);
        let (qp_u, addr_u) = (qp as usize, addr);
        let (r_one, r_list) = std::thread::scope(|s| {
            s.spawn(move || {
                // A new credential for this thread only (the raw syscall,
                // not glibc's, which would change every thread's).
                assert_eq!(libc::syscall(libc::SYS_setgroups, 0usize, core::ptr::null::<libc::gid_t>()), 0);
                let qp = qp_u as *mut ibv_qp;
                let mut sentinel = send(0, &mut ibv_sge { addr: 0, length: 0, lkey: 0 }, core::ptr::null_mut());
                let sentinel: *mut ibv_send_wr = &mut sentinel;
                let mut sge = ibv_sge { addr: addr_u, length: 8, lkey };
                let mut one = send(1, &mut sge, core::ptr::null_mut());
                let mut bad = sentinel;
                let r_one = (post_send(qp, &mut one, &mut bad), bad == sentinel);
                let (mut s3, mut s4) = (sge, sge);
                let mut four = send(4, &mut s4, core::ptr::null_mut());
                let mut three = send(3, &mut s3, &mut four);
                let mut bad = sentinel;
                let r_list = (post_send(qp, &mut three, &mut bad), bad == sentinel);
                (r_one, r_list)
            })
            .join()
            .unwrap()
        });
        assert_eq!(r_one, (libc::EACCES, true), "one request: the doorbell's errno, *bad_wr alone");
        assert_eq!(r_list, (libc::EACCES, true), "a list: the doorbell's errno, *bad_wr alone");
        let mut sge = ibv_sge { addr, length: 8, lkey };
        let mut two = send(2, &mut sge, core::ptr::null_mut());
        let mut bad = core::ptr::null_mut();
        assert_eq!(post_send(qp, &mut two, &mut bad), 0, "this thread's doorbell works");
        let wcs = poll_wc(ctx, cq, 8);
        let mut sends: Vec<u64> = wcs.iter().filter(|w| w.opcode == 0).map(|w| w.wr_id).collect();
        sends.sort_unstable();
        assert_eq!(
            sends,
            [1, 2, 3, 4],
            "every SEND completed once: {:?}",
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>()
        );
        assert!(wcs.iter().all(|w| w.status == 0));
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(poll_wc_now(ctx, cq).is_none(), "no completion twice");
        assert_eq!((lib.destroy_qp)(qp), 0);
        assert_eq!((lib.dereg_mr)(mr), 0);
        assert_eq!((lib.destroy_cq)(cq), 0);
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// One completion if there is one now.
///
/// # Safety
/// `ctx` and `cq` are live objects of the library.
unsafe fn poll_wc_now(ctx: *mut ibv_context, cq: *mut ibv_cq) -> Option<ibv_wc> {
    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    // SAFETY: the caller's contract; `ibv_wc` is plain integers.
    unsafe {
        let poll = core::mem::transmute::<Slot, PollCq>((*ctx).ops.poll_cq);
        let mut wc: ibv_wc = core::mem::zeroed();
        (poll(cq, 1, &mut wc) == 1).then_some(wc)
    }
}

/// `ibv_end_poll` and `ibv_next_poll` from a thread that holds no polling
/// span leave another thread's span alone (audit-2 N6): an `end_poll`
/// after a `start_poll` that answered ENOENT is a common bug, and it used
/// to release whoever held the span, so two threads then wrote the current
/// completion at once. Thread B opens a span over two completions; this
/// thread's stray `end_poll` and `next_poll` must not touch it: a third
/// thread's `start_poll` still waits, and B's `next_poll` still finds the
/// second completion.
#[test]
fn a_stray_end_poll_leaves_another_threads_span_alone() {
    if hand_connected_na() {
        return;
    }
    let Some(o) = open_first_device() else { return };
    let Opened { lib, ctx, create_cq_ex, .. } = &o;
    let (ctx, create_cq_ex) = (*ctx, *create_cq_ex);
    type Start = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
    type Next = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
    type End = unsafe extern "C" fn(*mut ibv_cq_ex);
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    // SAFETY: the C API by its contract: live objects of the library and
    // buffers of this test that outlive the requests; threads are joined
    // before anything is destroyed.
    unsafe {
        let mut ca = cq_attr(WC_STANDARD);
        let cq = create_cq_ex(ctx, &mut ca);
        assert!(!cq.is_null(), "create_cq_ex: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        let qp = self_connected_rc(&o, pd, cq.cast(), core::ptr::null_mut(), 4);
        let mut buf = vec![0u8; 256];
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let (addr, lkey) = (buf.as_ptr() as u64, (*mr).lkey);
        post_recv(ctx, qp, 7, addr + 128, 64, lkey);
        let mut sge = ibv_sge { addr, length: 8, lkey };
        let mut wr = send_wr(8, &mut sge, core::ptr::null_mut());
        let mut bad = core::ptr::null_mut();
        let post_send = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        assert_eq!(post_send(qp, &mut wr, &mut bad), 0);
        let c = &*cq;
        let (start, next, end) = (
            core::mem::transmute::<Slot, Start>(c.start_poll),
            core::mem::transmute::<Slot, Next>(c.next_poll),
            core::mem::transmute::<Slot, End>(c.end_poll),
        );
        let cq_u = cq as usize;
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
        let third_in = AtomicBool::new(false);
        std::thread::scope(|s| {
            let b = s.spawn(move || {
                let cq = cq_u as *mut ibv_cq_ex;
                let t0 = Instant::now();
                let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
                let first = loop {
                    match start(cq, &mut attr) {
                        0 => break (*cq).wr_id,
                        ENOENT if t0.elapsed() < DEADLINE => std::thread::sleep(std::time::Duration::from_millis(10)),
                        r => panic!("start_poll: {r}"),
                    }
                };
                opened_tx.send(()).unwrap();
                close_rx.recv().unwrap();
                let r = loop {
                    match next(cq) {
                        ENOENT if t0.elapsed() < DEADLINE => std::thread::sleep(std::time::Duration::from_millis(10)),
                        r => break r,
                    }
                };
                let second = (*cq).wr_id;
                end(cq);
                (first, r, second)
            });
            opened_rx.recv().unwrap();
            // The stray calls of a thread that holds no span.
            end(cq);
            assert_eq!(next(cq), libc::EINVAL, "next_poll without a span");
            let third = s.spawn(|| {
                let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
                let r = start(cq_u as *mut ibv_cq_ex, &mut attr);
                third_in.store(true, SeqCst);
                if r == 0 {
                    end(cq_u as *mut ibv_cq_ex);
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(!third_in.load(SeqCst), "a third thread entered B's span after a stray end_poll");
            close_tx.send(()).unwrap();
            let (first, r, second) = b.join().unwrap();
            third.join().unwrap();
            let mut ids = [first, second];
            ids.sort_unstable();
            assert_eq!((r, ids), (0, [7, 8]), "B's span kept both completions");
        });
        assert_eq!((lib.destroy_qp)(qp), 0);
        assert_eq!((lib.dereg_mr)(mr), 0);
        assert_eq!((lib.destroy_cq)(cq.cast()), 0);
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `ibv_fork_init` and `ibv_is_fork_initialized` answer from the kernel's
/// RDMA netlink `COPY_ON_FORK` (audit-2 N7), as rdma-core 44 does: both
/// kernels of the matrix (5.13 and later) copy pinned pages on fork, so
/// the status is `IBV_FORK_UNNEEDED` before and after a successful
/// `ibv_fork_init` (older kernels: ENOSYS and DISABLED, the unit test in
/// capi/src/misc.rs).
#[test]
fn fork_answers_come_from_the_kernels_copy_on_fork() {
    let Some(Opened { lib, ctx, .. }) = open_first_device() else { return };
    let cof = rverbs::c_support::copy_on_fork().expect("RDMA netlink SYS_GET");
    assert!(cof, "6.1 and 6.12 report RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK");
    // SAFETY: the functions take no arguments; the context is live.
    unsafe {
        assert_eq!((lib.is_fork_initialized)(), 2, "IBV_FORK_UNNEEDED");
        assert_eq!((lib.fork_init)(), 0);
        assert_eq!((lib.is_fork_initialized)(), 2, "still UNNEEDED, as rdma-core's");
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `IBV_EVENT_QP_LAST_WQE_REACHED`.
const QP_LAST_WQE_REACHED: u32 = 16;

/// The teardown a C consumer crashed in: a QP that takes its receives
/// from an SRQ is moved to ERR, and rxe (6.12) raises QP_LAST_WQE_REACHED
/// for it while `ibv_destroy_qp` may already run. The
/// event must name the QP (it came out with `element == NULL` once the QP
/// had left the handle table), and the destroy must wait for its ack.
#[test]
fn last_wqe_reached_names_the_qp_until_acknowledged() {
    if hand_connected_na() {
        return;
    }
    let Some(o) = open_first_device() else { return };
    let Opened { lib, ctx, create_cq_ex, .. } = &o;
    let (ctx, create_cq_ex) = (*ctx, *create_cq_ex);
    // SAFETY: the C API by its contract: live objects of the library; the
    // acknowledging thread is joined before the test returns.
    unsafe {
        let mut ca = cq_attr(WC_STANDARD);
        let cq = create_cq_ex(ctx, &mut ca).cast::<ibv_cq>();
        let pd = (lib.alloc_pd)(ctx);
        let mut si = ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ibv_srq_attr { max_wr: 16, max_sge: 1, srq_limit: 0 },
        };
        let srq = (lib.create_srq)(pd, &mut si);
        assert!(!cq.is_null() && !srq.is_null());
        let qp = self_connected_rc(&o, pd, cq, srq, 4);
        let mut a: ibv_qp_attr = core::mem::zeroed();
        a.qp_state = 6; // ERR
        assert_eq!((lib.modify_qp)(qp, &mut a, 1), 0, "to ERR");
        // 6.12's rxe raises the event from its responder right after the
        // move; 6.1's raises none (checked for 3 s). The 30 s bound is a
        // hang detector, not a time limit.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let raises = !release.starts_with("6.1.");
        let mut pfd = libc::pollfd { fd: (*ctx).async_fd, events: libc::POLLIN, revents: 0 };
        let ready = libc::poll(&mut pfd, 1, if raises { 30_000 } else { 3_000 });
        if !raises {
            assert_eq!(ready, 0, "{release}: rxe raised an async event on the move to ERR");
            assert_eq!((lib.destroy_qp)(qp), 0);
            assert_eq!((lib.destroy_srq)(srq), 0);
            assert_eq!((lib.destroy_cq)(cq), 0);
            assert_eq!((lib.dealloc_pd)(pd), 0);
            assert_eq!((lib.close_device)(ctx), 0);
            return;
        }
        assert_eq!(ready, 1, "{release}: no QP_LAST_WQE_REACHED in 30 s");
        let mut ev = ibv_async_event { element: core::ptr::null_mut(), event_type: u32::MAX };
        assert_eq!((lib.get_async_event)(ctx, &mut ev), 0, "errno {}", errno());
        let ev = (ev.element as usize, ev.event_type);
        assert_eq!(ev, (qp as usize, QP_LAST_WQE_REACHED), "the event names the QP");
        let acked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (acked2, qp_u, ack_async_event) = (acked.clone(), qp as usize, lib.ack_async_event);
        let acker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            acked2.store(true, std::sync::atomic::Ordering::SeqCst);
            let mut e = ibv_async_event { element: qp_u as *mut c_void, event_type: QP_LAST_WQE_REACHED };
            ack_async_event(&mut e);
        });
        assert_eq!((lib.destroy_qp)(qp), 0);
        assert!(acked.load(std::sync::atomic::Ordering::SeqCst), "ibv_destroy_qp returned before the event's ack");
        acker.join().unwrap();
        assert_eq!((lib.destroy_srq)(srq), 0);
        assert_eq!((lib.destroy_cq)(cq), 0);
        assert_eq!((lib.dealloc_pd)(pd), 0);
        assert_eq!((lib.close_device)(ctx), 0);
    }
}

/// `ibv_poll_cq`'s arguments (the library's `poll_cq` op). An empty CQ
/// answers 0 whatever `num` and the array are, and writes nothing, as
/// rdma-core's providers do (the busy poller's empty poll tests nothing
/// else). With a completion ready, a negative `num` or a NULL array is
/// `-EINVAL` and `num == 0` is 0, each taking nothing; then a poll of one
/// and a poll of four take the two completions (a SEND to itself and its
/// receive), and the CQ answers 0 again. The ready half connects
/// an RC QP by hand: rxe0 only (siw0 runs the empty half).
#[test]
fn poll_cq_arguments_on_an_empty_cq_and_a_ready_one() {
    let Some(o) = open_first_device() else { return };
    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    const MARK: u64 = 0x5eed_5eed_5eed_5eed;
    let null = core::ptr::null_mut::<ibv_wc>();
    // SAFETY: the test drives the C API by its contract: every pointer passed
    // is a live object of the library or a buffer of this test that outlives
    // the requests using it; `ibv_wc` is plain integers.
    unsafe {
        let ctx = o.ctx;
        let poll = core::mem::transmute::<Slot, PollCq>((*ctx).ops.poll_cq);
        let post_send = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        let cq = (o.create_cq_ex)(ctx, &mut cq_attr(0)).cast::<ibv_cq>();
        assert!(!cq.is_null(), "create_cq_ex: errno {}", errno());
        let mut wc: [ibv_wc; 4] = core::mem::zeroed();
        wc[0].wr_id = MARK;
        for (num, arr) in [(1, wc.as_mut_ptr()), (4, wc.as_mut_ptr()), (0, wc.as_mut_ptr()), (-1, wc.as_mut_ptr())]
            .into_iter()
            .chain([(1, null), (4, null), (-1, null)])
        {
            assert_eq!(poll(cq, num, arr), 0, "an empty CQ, num {num}, array {arr:?}");
        }
        assert_eq!(wc[0].wr_id, MARK, "an empty poll writes nothing");

        if !hand_connected_na() {
            let pd = (o.lib.alloc_pd)(ctx);
            let mut buf = vec![0x5au8; 64];
            let mr = (o.lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
            assert!(!pd.is_null() && !mr.is_null());
            let qp = self_connected_rc(&o, pd, cq, core::ptr::null_mut(), 4);
            let addr = buf.as_mut_ptr() as u64;
            post_recv(ctx, qp, 1, addr + 32, 16, (*mr).lkey);
            let mut sge = ibv_sge { addr, length: 16, lkey: (*mr).lkey };
            let mut wr = send_wr(2, &mut sge, core::ptr::null_mut());
            let mut bad = core::ptr::null_mut();
            assert_eq!(post_send(qp, &mut wr, &mut bad), 0, "post_send");
            // Ready once a negative `num` is refused (while empty it is 0).
            let t0 = Instant::now();
            while poll(cq, -1, wc.as_mut_ptr()) == 0 {
                assert!(t0.elapsed() < DEADLINE, "no completion");
                std::thread::yield_now();
            }
            assert_eq!(poll(cq, -1, wc.as_mut_ptr()), -libc::EINVAL, "num -1 with a completion ready");
            assert_eq!(poll(cq, 1, null), -libc::EINVAL, "a NULL array of one with a completion ready");
            assert_eq!(poll(cq, 4, null), -libc::EINVAL, "a NULL array of four with a completion ready");
            assert_eq!(poll(cq, 0, wc.as_mut_ptr()), 0, "num 0 takes nothing");
            assert_eq!(wc[0].wr_id, MARK, "the refused polls wrote nothing");
            assert_eq!(poll(cq, 1, wc.as_mut_ptr()), 1, "one of one");
            let mut got = vec![wc[0]];
            while got.len() < 2 {
                assert!(t0.elapsed() < DEADLINE, "only {} of 2 completions", got.len());
                let n = poll(cq, 4, wc.as_mut_ptr());
                assert!((0..=1).contains(&n), "ibv_poll_cq of four: {n}");
                got.extend_from_slice(&wc[..n as usize]);
            }
            let mut ids: Vec<(u64, u32)> = got.iter().map(|w| (w.wr_id, w.status)).collect();
            ids.sort_unstable();
            assert_eq!(ids, [(1, 0), (2, 0)], "the receive and the SEND, each once, both successful");
            assert_eq!(poll(cq, -1, wc.as_mut_ptr()), 0, "empty again");
            assert_eq!(poll(cq, 1, null), 0, "empty again");
            assert_eq!((o.lib.destroy_qp)(qp), 0);
            assert_eq!((o.lib.dereg_mr)(mr), 0);
            assert_eq!((o.lib.dealloc_pd)(pd), 0);
        }
        assert_eq!((o.lib.destroy_cq)(cq), 0);
        assert_eq!((o.lib.close_device)(ctx), 0);
    }
}
