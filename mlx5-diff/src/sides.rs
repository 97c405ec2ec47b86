//! The same set-up and work requests through each library: rdma-core's
//! libibverbs + libmlx5 ([`CLib`]) and rverbs ([`RLib`]). Both register
//! the one [`Shared`] buffer, so addresses and (with the fake kernel's
//! per-context numbering) keys and queue numbers are equal on both sides.

use std::os::fd::AsRawFd;

use rverbs::{
    AccessFlags, AhAttr, CompletionQueue, Gid, GlobalRoute, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState,
    QpType, QueuePair, RecvWr, SendFlags, SendOp, SendWr, Sge, SharedReceiveQueue, SrqAttr,
};

use crate::ibv::{self, Ibverbs};
use crate::scenario::{Kind, Op, Rwr, Setup, Wr};

/// Access of the shared region: local write, remote write/read/atomic.
pub const ACCESS: u32 = 0xf;
/// The peer the QP is connected to (RC/UC) or sends to (UD).
pub const REMOTE_QPN: u32 = 0x0fe1;
pub const QKEY: u32 = 0x1111_1111;
/// A peer's GID (an IPv4-mapped documentation address).
/// A flow label: RoCE v2's UDP source port derives from it (both libraries
/// pick a random port when it is 0).
const FLOW_LABEL: u32 = 0x1_2345;
const DGID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10];

/// A completion as both libraries report it, in one byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcView {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data in host order, or the invalidated rkey.
    pub imm: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// The memory both libraries register (64 KiB, page-aligned, zeroed).
pub struct Shared {
    map: memmap2::MmapMut,
}

impl Shared {
    pub fn new() -> Shared {
        Shared { map: memmap2::MmapMut::map_anon(64 << 10).expect("64 KiB of anonymous memory") }
    }
    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn ptr(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
}

/// One library's objects for a scenario.
pub trait Lib {
    /// The fd of its context on the device node (how the fake kernel knows it).
    fn cmd_fd(&self) -> i32;
    /// `Err((errno, index of the refused request))`.
    fn post_send(&mut self, wrs: &[Wr], shared: &Shared) -> Result<(), (i32, usize)>;
    fn post_recv(&mut self, wrs: &[Rwr], shared: &Shared, srq: bool) -> Result<(), (i32, usize)>;
    fn poll(&mut self, max: usize) -> Vec<WcView>;
    fn arm(&mut self, solicited: bool) -> Result<(), i32>;
}

fn qpt(kind: Kind) -> u32 {
    match kind {
        Kind::Rc => 2,
        Kind::Uc => 3,
        Kind::Ud => 4,
    }
}

// IBV_QP_* attribute masks.
const STATE: u32 = 1;
const ACCESS_FLAGS: u32 = 1 << 3;
const PKEY_INDEX: u32 = 1 << 4;
const PORT: u32 = 1 << 5;
const QKEY_M: u32 = 1 << 6;
const AV: u32 = 1 << 7;
const PATH_MTU: u32 = 1 << 8;
const TIMEOUT: u32 = 1 << 9;
const RETRY_CNT: u32 = 1 << 10;
const RNR_RETRY: u32 = 1 << 11;
const RQ_PSN: u32 = 1 << 12;
const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
const MIN_RNR_TIMER: u32 = 1 << 15;
const SQ_PSN: u32 = 1 << 16;
const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
const DEST_QPN: u32 = 1 << 20;

/// The three modifies to RTS, as (state, mask) with the attribute values
/// fixed below; the same on both sides.
fn transitions(kind: Kind) -> [(u8, u32); 3] {
    match kind {
        Kind::Rc => [
            (1, STATE | PKEY_INDEX | PORT | ACCESS_FLAGS),
            (2, STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER),
            (3, STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC),
        ],
        Kind::Uc => [
            (1, STATE | PKEY_INDEX | PORT | ACCESS_FLAGS),
            (2, STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN),
            (3, STATE | SQ_PSN),
        ],
        Kind::Ud => [(1, STATE | PKEY_INDEX | PORT | QKEY_M), (2, STATE), (3, STATE | SQ_PSN)],
    }
}

// ---------------------------------------------------------------- rdma-core

/// rdma-core's libibverbs + libmlx5, through `dlopen`.
pub struct CLib<'a> {
    b: CBase<'a>,
    srq: *mut ibv::ibv_srq,
    qp: *mut ibv::ibv_qp,
    ah: *mut ibv::ibv_ah,
    kind: Kind,
}

fn c_ah_attr(sgid_index: u8) -> ibv::ibv_ah_attr {
    // SAFETY: plain C data; all zeroes is valid.
    let mut a: ibv::ibv_ah_attr = unsafe { std::mem::zeroed() };
    a.grh.dgid = DGID;
    a.grh.sgid_index = sgid_index;
    a.grh.hop_limit = 64;
    a.grh.flow_label = FLOW_LABEL;
    a.is_global = 1;
    a.port_num = 1;
    a
}

fn errno_of(what: &str) -> String {
    format!("{what}: {}", nix::errno::Errno::last())
}

impl<'a> CLib<'a> {
    /// Opens the fake device and builds `setup`'s objects on `shared`.
    pub fn open(ibv: &'a Ibverbs, setup: &Setup, shared: &mut Shared) -> Result<CLib<'a>, String> {
        let b = CBase::open(ibv, setup.cqe, shared)?;
        let mut c =
            CLib { b, srq: std::ptr::null_mut(), qp: std::ptr::null_mut(), ah: std::ptr::null_mut(), kind: setup.kind };
        let (pd, cq) = (c.b.pd, c.b.cq);
        // SAFETY: every call gets live objects of this library, made above
        // in order; failures return NULL or an error, checked.
        unsafe {
            if let Some((max_wr, max_sge)) = setup.srq {
                let mut a = ibv::ibv_srq_init_attr {
                    srq_context: std::ptr::null_mut(),
                    attr: ibv::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
                };
                c.srq = (ibv.ibv_create_srq)(pd, &mut a);
                if c.srq.is_null() {
                    return Err(errno_of("ibv_create_srq"));
                }
            }
            let mut init = ibv::ibv_qp_init_attr {
                qp_context: std::ptr::null_mut(),
                send_cq: cq,
                recv_cq: cq,
                srq: c.srq.cast(),
                cap: ibv::ibv_qp_cap {
                    max_send_wr: setup.send_wr,
                    max_recv_wr: if c.srq.is_null() { setup.recv_wr } else { 0 },
                    max_send_sge: setup.send_sge,
                    max_recv_sge: if c.srq.is_null() { setup.recv_sge } else { 0 },
                    max_inline_data: setup.inline,
                },
                qp_type: qpt(setup.kind),
                sq_sig_all: setup.sig_all.into(),
            };
            c.qp = (ibv.ibv_create_qp)(pd, &mut init);
            if c.qp.is_null() {
                return Err(errno_of("ibv_create_qp"));
            }
            c_to_rts(ibv, c.qp, setup)?;
            if setup.kind == Kind::Ud {
                let mut a = c_ah_attr(setup.sgid_index);
                c.ah = (ibv.ibv_create_ah)(pd, &mut a);
                if c.ah.is_null() {
                    return Err(errno_of("ibv_create_ah"));
                }
            }
        }
        Ok(c)
    }
}

/// `qp` through INIT and RTR to RTS with `setup`'s attributes (the same
/// on both sides).
///
/// # Safety
/// `qp` is a live QP of `ibv`.
pub unsafe fn c_to_rts(ibv: &Ibverbs, qp: *mut ibv::ibv_qp, setup: &Setup) -> Result<(), String> {
    for (state, mask) in transitions(setup.kind) {
        // SAFETY: plain C data; all zeroes is valid.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = u32::from(state);
        a.port_num = 1;
        a.qkey = QKEY;
        a.qp_access_flags = 0xe;
        a.path_mtu = 3;
        a.dest_qp_num = REMOTE_QPN;
        a.rq_psn = 0x100;
        a.sq_psn = 0x200;
        a.max_dest_rd_atomic = 4;
        a.max_rd_atomic = 4;
        a.min_rnr_timer = 12;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.ah_attr = c_ah_attr(setup.sgid_index);
        // SAFETY: the caller's live QP; the attributes live across the call.
        let rc = unsafe { (ibv.ibv_modify_qp)(qp, &mut a, mask as i32) };
        if rc != 0 {
            return Err(format!("ibv_modify_qp to state {state}: {rc}"));
        }
    }
    Ok(())
}

impl Drop for CLib<'_> {
    fn drop(&mut self) {
        // SAFETY: each object is this library's, destroyed once, children
        // before parents.
        unsafe {
            if !self.ah.is_null() {
                (self.b.ibv.ibv_destroy_ah)(self.ah);
            }
            if !self.qp.is_null() {
                (self.b.ibv.ibv_destroy_qp)(self.qp);
            }
            if !self.srq.is_null() {
                (self.b.ibv.ibv_destroy_srq)(self.srq);
            }
        }
        // `b` drops next: its CQ, MR, PD and context.
    }
}

/// rdma-core's objects every set-up here starts with: the fake device's
/// context, a PD, an MR on the shared buffer and one CQ of `cqe` entries.
pub struct CBase<'a> {
    pub ibv: &'a Ibverbs,
    pub ctx: *mut ibv::ibv_context,
    pub pd: *mut ibv::ibv_pd,
    pub mr: *mut ibv::ibv_mr,
    pub cq: *mut ibv::ibv_cq,
}

impl<'a> CBase<'a> {
    pub fn open(ibv: &'a Ibverbs, cqe: u32, shared: &mut Shared) -> Result<CBase<'a>, String> {
        let ctx = ibv.open_device_by_name(rverbs_mlx5_fake::IBDEV)?;
        let mut b = CBase { ibv, ctx, pd: std::ptr::null_mut(), mr: std::ptr::null_mut(), cq: std::ptr::null_mut() };
        // SAFETY: every call gets live objects of this library, made above
        // in order; failures return NULL, checked (what was made is
        // destroyed by `drop`).
        unsafe {
            b.pd = (ibv.ibv_alloc_pd)(ctx);
            if b.pd.is_null() {
                return Err(errno_of("ibv_alloc_pd"));
            }
            b.mr = (ibv.ibv_reg_mr)(b.pd, shared.ptr().cast(), shared.len(), ACCESS as i32);
            if b.mr.is_null() {
                return Err(errno_of("ibv_reg_mr"));
            }
            b.cq = (ibv.ibv_create_cq)(ctx, cqe as i32, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if b.cq.is_null() {
                return Err(errno_of("ibv_create_cq"));
            }
        }
        Ok(b)
    }
}

impl Drop for CBase<'_> {
    fn drop(&mut self) {
        // SAFETY: each object is this library's, destroyed once, children
        // before parents (their users dropped theirs first).
        unsafe {
            if !self.cq.is_null() {
                (self.ibv.ibv_destroy_cq)(self.cq);
            }
            if !self.mr.is_null() {
                (self.ibv.ibv_dereg_mr)(self.mr);
            }
            if !self.pd.is_null() {
                (self.ibv.ibv_dealloc_pd)(self.pd);
            }
            (self.ibv.ibv_close_device)(self.ctx);
        }
    }
}

fn c_opcode(op: Op) -> u32 {
    // enum ibv_wr_opcode
    match op {
        Op::Write => 0,
        Op::WriteImm => 1,
        Op::Send => 2,
        Op::SendImm => 3,
        Op::Read => 4,
        Op::Cas => 5,
        Op::Faa => 6,
        Op::SendInv => 9,
    }
}

impl CLib<'_> {
    /// Each request's SGE list (offsets into `shared`) with the region's key.
    fn sges<'w>(&self, lists: impl Iterator<Item = &'w [(u32, u32)]>, shared: &Shared) -> Vec<Vec<ibv::ibv_sge>> {
        // SAFETY: `mr` is live while self is.
        let lkey = unsafe { (*self.b.mr).lkey };
        lists
            .map(|l| {
                l.iter()
                    .map(|&(off, len)| ibv::ibv_sge { addr: shared.addr() + u64::from(off), length: len, lkey })
                    .collect()
            })
            .collect()
    }
}

impl Lib for CLib<'_> {
    fn cmd_fd(&self) -> i32 {
        // SAFETY: `ctx` is live while self is.
        unsafe { (*self.b.ctx).cmd_fd }
    }

    fn post_send(&mut self, wrs: &[Wr], shared: &Shared) -> Result<(), (i32, usize)> {
        let mut sges = self.sges(wrs.iter().map(|w| &w.sges[..]), shared);
        // SAFETY: plain C data; all zeroes is valid.
        let mut list: Vec<ibv::ibv_send_wr> = wrs.iter().map(|_| unsafe { std::mem::zeroed() }).collect();
        for (i, w) in wrs.iter().enumerate() {
            let c = &mut list[i];
            c.wr_id = w.wr_id;
            c.sg_list = sges[i].as_mut_ptr();
            c.num_sge = sges[i].len() as i32;
            c.opcode = c_opcode(w.op);
            c.send_flags = u32::from(w.fence)
                | (u32::from(w.signaled) << 1)
                | (u32::from(w.solicited) << 2)
                | (u32::from(w.inline) << 3);
            c.imm_data = match w.op {
                Op::SendInv => w.rkey,
                _ => w.imm.to_be(),
            };
            match w.op {
                Op::Cas | Op::Faa => {
                    c.wr[0] = w.raddr;
                    c.wr[1] = w.compare_or_add();
                    c.wr[2] = w.swap_add;
                    c.wr[3] = u64::from(w.rkey);
                }
                _ if self.kind == Kind::Ud => {
                    c.wr[0] = self.ah as u64;
                    c.wr[1] = u64::from(REMOTE_QPN) | (u64::from(QKEY) << 32);
                }
                _ => {
                    c.wr[0] = w.raddr;
                    c.wr[1] = u64::from(w.rkey);
                }
            }
        }
        for i in 1..list.len() {
            let next: *mut ibv::ibv_send_wr = &mut list[i];
            list[i - 1].next = next;
        }
        // SAFETY: a live QP; the list and its SGEs live across the call;
        // SGEs point into the registered shared buffer.
        match unsafe { self.b.ibv.post_send(self.qp, list.as_mut_ptr()) } {
            Ok(()) => Ok(()),
            Err((rc, bad)) => {
                let idx = list.iter().position(|w| std::ptr::eq(w, bad)).unwrap_or(usize::MAX);
                Err((rc, idx))
            }
        }
    }

    fn post_recv(&mut self, wrs: &[Rwr], shared: &Shared, srq: bool) -> Result<(), (i32, usize)> {
        let mut sges = self.sges(wrs.iter().map(|w| &w.sges[..]), shared);
        let mut list: Vec<ibv::ibv_recv_wr> = wrs
            .iter()
            .enumerate()
            .map(|(i, w)| ibv::ibv_recv_wr {
                wr_id: w.wr_id,
                next: std::ptr::null_mut(),
                sg_list: sges[i].as_mut_ptr(),
                num_sge: sges[i].len() as i32,
            })
            .collect();
        for i in 1..list.len() {
            let next: *mut ibv::ibv_recv_wr = &mut list[i];
            list[i - 1].next = next;
        }
        // SAFETY: a live QP or SRQ; the list lives across the call.
        let r = unsafe {
            if srq {
                self.b.ibv.post_srq_recv(self.srq, list.as_mut_ptr())
            } else {
                self.b.ibv.post_recv(self.qp, list.as_mut_ptr())
            }
        };
        r.map_err(|(rc, bad)| (rc, list.iter().position(|w| std::ptr::eq(w, bad)).unwrap_or(usize::MAX)))
    }

    fn poll(&mut self, max: usize) -> Vec<WcView> {
        // SAFETY: plain C data; all zeroes is valid.
        let mut wc: Vec<ibv::ibv_wc> = (0..max).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: a live CQ.
        let n = unsafe { self.b.ibv.poll_cq(self.b.cq, &mut wc) };
        wc.truncate(n.max(0) as usize);
        wc.iter()
            .map(|w| {
                // IBV_WC_WITH_IMM 2, IBV_WC_WITH_INV 8
                let imm = if w.wc_flags & 2 != 0 { u32::from_be(w.imm_data) } else { w.imm_data };
                WcView {
                    wr_id: w.wr_id,
                    status: w.status,
                    opcode: w.opcode,
                    vendor_err: w.vendor_err,
                    byte_len: w.byte_len,
                    imm,
                    qp_num: w.qp_num,
                    src_qp: w.src_qp,
                    wc_flags: w.wc_flags,
                    pkey_index: w.pkey_index,
                    slid: w.slid,
                    sl: w.sl,
                    dlid_path_bits: w.dlid_path_bits,
                }
            })
            .collect()
    }

    fn arm(&mut self, solicited: bool) -> Result<(), i32> {
        // SAFETY: a live CQ.
        match unsafe { self.b.ibv.req_notify_cq(self.b.cq, solicited) } {
            0 => Ok(()),
            rc => Err(rc),
        }
    }
}

impl Wr {
    /// CAS: the compare value; FAA: the addend.
    pub fn compare_or_add(&self) -> u64 {
        if self.op == Op::Faa {
            self.swap_add
        } else {
            self.compare
        }
    }
}

// ---------------------------------------------------------------- rverbs

/// rverbs on the same device.
pub struct RLib {
    // Field order is drop order: children first.
    ah: Option<rverbs::AddressHandle>,
    qp: QueuePair,
    srq: Option<SharedReceiveQueue>,
    b: RBase,
    kind: Kind,
}

/// [`CBase`] through rverbs.
pub struct RBase {
    // Field order is drop order: children first.
    pub cq: CompletionQueue,
    pub mr: rverbs::MemoryRegion,
    pub pd: rverbs::ProtectionDomain,
    pub ctx: rverbs::Context,
}

impl RBase {
    pub fn open(cqe: u32, sysfs: &std::path::Path, shared: &mut Shared) -> Result<RBase, String> {
        let devs = rverbs::Sysfs::at(sysfs, "/dev/infiniband").devices().map_err(r_err("devices"))?;
        let dev = devs.into_iter().find(|d| d.name() == rverbs_mlx5_fake::IBDEV).ok_or("rverbs finds no mlx5_9")?;
        let ctx = dev.open().map_err(r_err("open"))?;
        let pd = ctx.alloc_pd().map_err(r_err("alloc_pd"))?;
        // SAFETY: the shared buffer outlives every scenario's objects (main
        // keeps it for the whole run) and nothing else frees it.
        let mr = unsafe { pd.reg_mr(shared.ptr(), shared.len(), AccessFlags::from_bits_retain(ACCESS)) }
            .map_err(r_err("reg_mr"))?;
        let cq = ctx.create_cq(cqe).map_err(r_err("create_cq"))?;
        Ok(RBase { cq, mr, pd, ctx })
    }
}

/// An rverbs error as `what: error`.
pub fn r_err(what: &'static str) -> impl Fn(rverbs::Error) -> String {
    move |err| format!("{what}: {err}")
}

fn r_ah_attr(sgid_index: u8) -> AhAttr {
    AhAttr {
        port_num: 1,
        grh: Some(GlobalRoute {
            dgid: Gid(DGID),
            sgid_index,
            hop_limit: 64,
            flow_label: FLOW_LABEL,
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl RLib {
    pub fn open(setup: &Setup, sysfs: &std::path::Path, shared: &mut Shared) -> Result<RLib, String> {
        let e = r_err;
        let b = RBase::open(setup.cqe, sysfs, shared)?;
        let (pd, cq) = (&b.pd, &b.cq);
        let srq = match setup.srq {
            Some((max_wr, max_sge)) => {
                Some(pd.create_srq(&SrqAttr { max_wr, max_sge, srq_limit: 0 }).map_err(e("create_srq"))?)
            }
            None => None,
        };
        let qp_type = match setup.kind {
            Kind::Rc => QpType::Rc,
            Kind::Uc => QpType::Uc,
            Kind::Ud => QpType::Ud,
        };
        let mut init = QpInitAttr::new(qp_type, cq);
        init.srq = srq.as_ref();
        init.sq_sig_all = setup.sig_all;
        init.cap = QpCap {
            max_send_wr: setup.send_wr,
            max_recv_wr: if srq.is_some() { 0 } else { setup.recv_wr },
            max_send_sge: setup.send_sge,
            max_recv_sge: if srq.is_some() { 0 } else { setup.recv_sge },
            max_inline_data: setup.inline,
        };
        let qp = pd.create_qp(&init).map_err(e("create_qp"))?;
        r_to_rts(&qp, setup)?;
        let ah = if setup.kind == Kind::Ud {
            Some(pd.create_ah(&r_ah_attr(setup.sgid_index)).map_err(e("create_ah"))?)
        } else {
            None
        };
        Ok(RLib { ah, qp, srq, b, kind: setup.kind })
    }
}

/// As [`c_to_rts`], through rverbs.
pub fn r_to_rts(qp: &QueuePair, setup: &Setup) -> Result<(), String> {
    for (state, mask) in transitions(setup.kind) {
        let a = QpAttr {
            qp_state: [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts][state as usize],
            port_num: 1,
            qkey: QKEY,
            qp_access_flags: AccessFlags::from_bits_retain(0xe),
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: REMOTE_QPN,
            rq_psn: 0x100,
            sq_psn: 0x200,
            max_dest_rd_atomic: 4,
            max_rd_atomic: 4,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            ah_attr: r_ah_attr(setup.sgid_index),
            ..Default::default()
        };
        qp.modify(&a, QpAttrMask::from_bits_retain(mask)).map_err(|err| format!("modify_qp: {err}"))?;
    }
    Ok(())
}

fn r_op(w: &Wr) -> SendOp {
    let remote = rverbs::RemoteAddr { addr: w.raddr, rkey: w.rkey };
    match w.op {
        Op::Send => SendOp::Send,
        Op::SendImm => SendOp::SendWithImm(w.imm),
        Op::SendInv => SendOp::SendWithInv(w.rkey),
        Op::Write => SendOp::RdmaWrite(remote),
        Op::WriteImm => SendOp::RdmaWriteWithImm(remote, w.imm),
        Op::Read => SendOp::RdmaRead(remote),
        Op::Cas => SendOp::AtomicCmpAndSwp { remote, compare: w.compare, swap: w.swap_add },
        Op::Faa => SendOp::AtomicFetchAndAdd { remote, add: w.swap_add },
    }
}

/// Each request's SGE list (offsets into `shared`) with key `lkey`.
fn r_sges<'w>(lkey: u32, lists: impl Iterator<Item = &'w [(u32, u32)]>, shared: &Shared) -> Vec<Vec<Sge<'static>>> {
    lists.map(|l| l.iter().map(|&(off, len)| Sge::new(shared.addr() + u64::from(off), len, lkey)).collect()).collect()
}

fn flags(w: &Wr) -> SendFlags {
    let mut f = SendFlags::empty();
    f.set(SendFlags::FENCE, w.fence);
    f.set(SendFlags::SIGNALED, w.signaled);
    f.set(SendFlags::SOLICITED, w.solicited);
    f.set(SendFlags::INLINE, w.inline);
    f
}

impl Lib for RLib {
    fn cmd_fd(&self) -> i32 {
        self.b.ctx.cmd_fd().as_raw_fd()
    }

    fn post_send(&mut self, wrs: &[Wr], shared: &Shared) -> Result<(), (i32, usize)> {
        let sges = r_sges(self.b.mr.lkey(), wrs.iter().map(|w| &w.sges[..]), shared);
        let ud = self.ah.as_ref().map(|ah| ah.ud_dest(REMOTE_QPN, QKEY));
        let list: Vec<SendWr<'_>> = wrs
            .iter()
            .zip(&sges)
            .map(|(w, s)| SendWr {
                wr_id: w.wr_id,
                op: r_op(w),
                flags: flags(w),
                sgl: s,
                ud: if self.kind == Kind::Ud { ud } else { None },
            })
            .collect();
        // SAFETY: every INLINE request's SGEs lie in the shared buffer, which
        // is readable for the whole run.
        unsafe { self.qp.post_send_unchecked(&list) }.map_err(|e| (post_errno(&e), e.index))
    }

    fn post_recv(&mut self, wrs: &[Rwr], shared: &Shared, srq: bool) -> Result<(), (i32, usize)> {
        let sges = r_sges(self.b.mr.lkey(), wrs.iter().map(|w| &w.sges[..]), shared);
        let list: Vec<RecvWr<'_>> = wrs.iter().zip(&sges).map(|(w, s)| RecvWr { wr_id: w.wr_id, sgl: s }).collect();
        let r = match (srq, self.srq.as_mut()) {
            (true, Some(s)) => s.post_recv(&list),
            _ => self.qp.post_recv(&list),
        };
        r.map_err(|e| (post_errno(&e), e.index))
    }

    fn poll(&mut self, max: usize) -> Vec<WcView> {
        let mut out = vec![rverbs::Wc::default(); max];
        let n = self.b.cq.poll(&mut out);
        out.truncate(n);
        out.iter()
            .map(|w| WcView {
                wr_id: w.wr_id,
                status: w.status.0,
                opcode: w.opcode.0,
                vendor_err: w.vendor_err,
                byte_len: w.byte_len,
                imm: w.imm_data,
                qp_num: w.qp_num,
                src_qp: w.src_qp,
                wc_flags: w.wc_flags.bits(),
                pkey_index: w.pkey_index,
                slid: w.slid,
                sl: w.sl,
                dlid_path_bits: w.dlid_path_bits,
            })
            .collect()
    }

    fn arm(&mut self, solicited: bool) -> Result<(), i32> {
        self.b.cq.req_notify(solicited).map_err(|e| e.errno().map_or(-1, |e| e as i32))
    }
}

/// The errno of a refused post, libibverbs' for it (`From<PostError>`).
fn post_errno(e: &rverbs::PostError) -> i32 {
    rverbs::Error::from(*e).errno().map_or(-1, |n| n as i32)
}
