//! A software model of the mlx5 HCA (and of the kernel's create checks),
//! for host tests and benchmarks (`cfg(test)` or the `mock` feature; never
//! in a real build).
//!
//! What it does, from the other side of the provider's memory:
//! - **Kernel commands**: answers create CQ / QP / SRQ and UAR allocation
//!   the way `drivers/infiniband/hw/mlx5` checks them (sizes, powers of
//!   two, reserved fields, user-index rules, UAR-page flags) and returns the
//!   driver answer bytes.
//! - **Doorbells**: every UAR store comes through [`HcaMmio`]. A QP doorbell
//!   (8-byte or BlueFlame) is checked against the ring (the doorbell must be
//!   the first 8 bytes of a control segment the doorbell record already
//!   covers; a BlueFlame copy must equal the WQE), against the QP's UAR page,
//!   against the `wc_start` → store → `flush` order and the alternation of
//!   BlueFlame halves; then the send doorbell record is snapshotted as the
//!   device's producer index. Receive queues and SRQs are noticed through
//!   their doorbell records only, as on the real device.
//! - **Execution** ([`Hca::run`]): parses send WQEs at their numeric
//!   offsets (independently of `seg.rs`), executes SEND / SEND_IMM /
//!   RDMA_WRITE(_IMM) / RDMA_READ / CMP_AND_SWP / FETCH_AND_ADD between
//!   modeled QPs (RC/UC through the connected peer, UD through the address
//!   vector) over real process memory, checked against a memory-key table
//!   (lkey/rkey, range, access), and writes CQEs (opcode, syndrome, owner
//!   bit) into the CQ buffers, respecting the consumer index in the CQ
//!   doorbell record (an overrun is a recorded violation).
//! - **Errors**: a bad lkey (local protection), bad rkey (remote access),
//!   a receive too small (local length at the responder, remote invalid
//!   request at the requester), no receive with `rnr_retry` 0 (RNR retry
//!   exceeded) move the QP to error; then every outstanding send and
//!   receive WQE completes with a flush error.
//! - **Arming**: the arm doorbell is checked against doorbell-record word 1
//!   and the expected sequence number; an armed CQ raises one event on its
//!   next (solicited) completion.
//!
//! Model choices (not the hardware's documented behaviour): atomics treat
//! the remote word as big-endian; remote-access errors leave the responder
//! QP alone; RNR with `rnr_retry` 7 (the default here) just waits.
//!
//! Unsafe code (allowed below): the model reads and writes the memory the
//! provider handed to the "kernel" (queue buffers, doorbell records) and
//! registered regions, through raw pointers, as the HCA does by DMA.
#![allow(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use rverbs_uapi::mlx5_abi::{
    mlx5_ib_alloc_ucontext_resp, mlx5_ib_create_cq, mlx5_ib_create_cq_resp, mlx5_ib_create_qp, mlx5_ib_create_qp_resp,
    mlx5_ib_create_srq, mlx5_ib_create_srq_resp, MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, MLX5_QP_FLAG_UAR_PAGE_INDEX,
};
use zerocopy::IntoBytes;

use crate::mlx5::mmio::Mmio;
use crate::mlx5::qp::{QpCaps, QpPrepareArgs, QpType};
use crate::mlx5::uar::{RegInfo, UarKind, CQ_DOORBELL};
use crate::mlx5::{Context, Cq, Qp, Srq};
use crate::Errno;

/// Access bits of a modeled memory region (`IB_ACCESS_*` values).
pub mod access {
    /// `IB_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: u32 = 1;
    /// `IB_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: u32 = 2;
    /// `IB_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: u32 = 4;
    /// `IB_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: u32 = 8;
    /// Everything.
    pub const ALL: u32 = 15;
}

/// How the modeled device and kernel present themselves.
#[derive(Clone, Copy, Debug)]
pub struct ModelCfg {
    /// CQE version the "kernel" grants (1: user index in CQEs).
    pub cqe_version: u8,
    /// BlueFlame register size (0: no write-combining).
    pub bf_reg_size: u32,
    /// Dynamic UARs (`tot_bfregs == 0`) or the static scheme.
    pub dynamic_uar: bool,
    /// The port's MAC (UD sends must carry it as destination MAC).
    pub mac: [u8; 6],
    /// RNR retry "7" (wait for a receive) instead of failing at once.
    pub rnr_infinite: bool,
}

impl Default for ModelCfg {
    fn default() -> Self {
        ModelCfg {
            cqe_version: 1,
            bf_reg_size: 512,
            dynamic_uar: true,
            mac: [0x02, 0, 0, 0xaa, 0xbb, 0xcc],
            rnr_infinite: true,
        }
    }
}

/// One store (or barrier) the provider made to a UAR register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmioOp {
    /// `wc_start`.
    WcStart,
    /// An 8-byte store: offset in the window, the bytes as the device sees them.
    Write64 {
        /// Offset from the window start.
        offset: usize,
        /// The bytes.
        bytes: [u8; 8],
    },
    /// A 64-byte BlueFlame block.
    Bf {
        /// Offset from the window start.
        offset: usize,
        /// The bytes.
        bytes: [u8; 64],
    },
    /// `flush`.
    Flush,
}

/// A recording [`Mmio`] with no device behind it (golden tests).
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    log: Arc<Mutex<Vec<MmioOp>>>,
}

impl Recorder {
    /// Everything recorded so far, then forgets it.
    pub fn take(&self) -> Vec<MmioOp> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

fn block_bytes(block: &[u64; 8]) -> [u8; 64] {
    let mut b = [0u8; 64];
    b.copy_from_slice(block.as_bytes());
    b
}

impl Mmio for Recorder {
    unsafe fn write64(&self, offset: usize, val: u64) {
        self.log.lock().unwrap().push(MmioOp::Write64 { offset, bytes: val.to_ne_bytes() });
    }
    unsafe fn bf_copy(&self, offset: usize, block: &[u64; 8]) {
        self.log.lock().unwrap().push(MmioOp::Bf { offset, bytes: block_bytes(block) });
    }
    fn wc_start(&self) {
        self.log.lock().unwrap().push(MmioOp::WcStart);
    }
    fn flush(&self) {
        self.log.lock().unwrap().push(MmioOp::Flush);
    }
}

// ---------------------------------------------------------------------------
// Raw memory helpers.

/// Reads `len` bytes at `addr`.
///
/// # Safety
/// `addr..addr+len` is memory the provider or a test handed to the model
/// (a queue buffer, a doorbell record, a registered region), alive now.
unsafe fn rd(addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: forwarded; volatile-free copy is fine in the single-threaded model.
    unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, v.as_mut_ptr(), len) };
    v
}

/// Writes `bytes` at `addr`.
///
/// # Safety
/// As [`rd`], for writing.
unsafe fn wr(addr: u64, bytes: &[u8]) {
    // SAFETY: forwarded.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as usize as *mut u8, bytes.len()) };
}

/// Reads a big-endian u32 at `addr` (a doorbell record word) with an
/// atomic load, as the provider's stores to it are atomic (a poster on
/// another thread may be storing it).
///
/// # Safety
/// As [`rd`], 4-aligned, a word only ever accessed atomically.
unsafe fn rd_be32(addr: u64) -> u32 {
    // SAFETY: forwarded.
    let w = unsafe { std::sync::atomic::AtomicU32::from_ptr(addr as usize as *mut u32) };
    u32::from_be(w.load(std::sync::atomic::Ordering::Relaxed))
}

fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
}
fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes(b[off..off + 2].try_into().unwrap())
}
fn be64(b: &[u8], off: usize) -> u64 {
    u64::from_be_bytes(b[off..off + 8].try_into().unwrap())
}

// ---------------------------------------------------------------------------
// Model state.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum HwState {
    Reset,
    Init,
    Rtr,
    Rts,
    Err,
}

#[derive(Debug)]
struct MCq {
    buf: u64,
    db: u64,
    ncqe: u32,
    pi: u32,
    uar: u32,
    armed: Option<bool>,
    events: u32,
}

#[derive(Debug)]
struct MQp {
    qpn: u32,
    uidx: u32,
    qp_type: QpType,
    buf: u64,
    db: u64,
    sq_off: u64,
    sq_cnt: u32,
    rq_cnt: u32,
    rq_shift: u32,
    send_cq: u32,
    recv_cq: u32,
    srq: Option<u32>,
    uar: u32,
    state: HwState,
    peer: Option<u32>,
    qkey: u32,
    /// Device's send consumer (WQEBBs, 32-bit extension of the 16-bit counter).
    sq_ci: u32,
    /// Producer index the last doorbell announced.
    sq_rung: u32,
    rq_ci: u32,
    rnr_retry_zero: bool,
}

#[derive(Debug)]
struct MSrq {
    buf: u64,
    db: u64,
    nwqes: u32,
    shift: u32,
    max_gs: u32,
    hw_head: u32,
    consumed: u32,
}

#[derive(Clone, Copy, Debug)]
struct MMr {
    addr: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
    access: u32,
}

#[derive(Clone, Copy, Debug)]
enum RegKind {
    Qp { bf_half: usize },
    CqPage,
}

#[derive(Debug)]
struct MReg {
    uar_index: u32,
    kind: RegKind,
    wc_open: bool,
    store_since_flush: bool,
    next_half: usize,
    /// The QP and WQE index of the BlueFlame copy in progress.
    bf_wqe: Option<(u32, u32)>,
}

/// Counters of what the model saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// 8-byte QP doorbells.
    pub doorbells: u64,
    /// BlueFlame WQE copies.
    pub bf_copies: u64,
    /// CQ arm doorbells.
    pub arms: u64,
    /// Completion events raised.
    pub events: u64,
    /// Send WQEs executed (including flushed ones).
    pub wqes: u64,
    /// CQEs written.
    pub cqes: u64,
    /// UD packets dropped (unknown QPN, wrong Q_Key or MAC, no receive).
    pub ud_dropped: u64,
}

#[derive(Debug, Default)]
struct State {
    cfg: ModelCfg,
    next_uar: u32,
    uars: HashMap<u32, UarKind>,
    next_cqn: u32,
    next_qpn: u32,
    /// QPNs destroyed, handed out again first when `reuse_qpns` is set
    /// (the firmware may reuse a QPN right away).
    free_qpns: Vec<u32>,
    reuse_qpns: bool,
    next_srqn: u32,
    next_key: u32,
    next_bfreg: u32,
    cqs: BTreeMap<u32, MCq>,
    qps: BTreeMap<u32, MQp>,
    srqs: BTreeMap<u32, MSrq>,
    mrs: Vec<MMr>,
    regs: Vec<MReg>,
    uidx_used: HashMap<u32, u32>,
    violations: Vec<String>,
    stats: Stats,
}

/// The modeled HCA. Cheap to clone (shared state).
#[derive(Clone, Debug, Default)]
pub struct Hca {
    st: Arc<Mutex<State>>,
}

/// A UAR register window as the model sees it; the [`Mmio`] of QPs and CQs
/// created through the model.
#[derive(Clone, Debug)]
pub struct HcaMmio {
    hca: Hca,
    id: usize,
}

impl Mmio for HcaMmio {
    unsafe fn write64(&self, offset: usize, val: u64) {
        self.hca.on_store(self.id, offset, &val.to_ne_bytes());
    }
    unsafe fn bf_copy(&self, offset: usize, block: &[u64; 8]) {
        self.hca.on_store(self.id, offset, &block_bytes(block));
    }
    fn wc_start(&self) {
        let mut st = self.hca.lock();
        let r = &mut st.regs[self.id];
        if r.store_since_flush {
            let uar = r.uar_index;
            st.violations.push(format!("UAR {uar}: wc_start before the previous store was flushed"));
        }
        st.regs[self.id].wc_open = true;
    }
    fn flush(&self) {
        let mut st = self.hca.lock();
        st.regs[self.id].store_since_flush = false;
        st.regs[self.id].wc_open = false;
    }
}

/// Outcome of executing one send WQE.
enum Exec {
    Ok { byte_cnt: u32 },
    Err(u8),
    Stall,
}

/// The model stands in for the kernel's UAR pages: heap memory it watches.
impl crate::mlx5::uar::UarSource for Hca {
    fn alloc_dynamic(&self, kind: UarKind, page_size: usize) -> crate::Result<crate::mlx5::uar::UarPage> {
        Ok(crate::mlx5::uar::UarPage::heap(self.alloc_uar(kind), kind, page_size))
    }

    fn map_static(&self, index: u32, page_size: usize, _nc_first: bool) -> crate::Result<crate::mlx5::uar::UarPage> {
        Ok(crate::mlx5::uar::UarPage::heap(index, UarKind::Bf, page_size))
    }
}

impl Hca {
    /// A model with `cfg`.
    pub fn new(cfg: ModelCfg) -> Hca {
        let st = State {
            cfg,
            next_uar: 16,
            next_cqn: 0x40,
            next_qpn: 0x100,
            next_srqn: 0x20,
            next_key: 0x1000,
            ..Default::default()
        };
        Hca { st: Arc::new(Mutex::new(st)) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The GET_CONTEXT driver answer this model's kernel gives.
    pub fn ucontext_resp(&self) -> mlx5_ib_alloc_ucontext_resp {
        let cfg = self.lock().cfg;
        mlx5_ib_alloc_ucontext_resp {
            qp_tab_size: 1 << 18,
            bf_reg_size: cfg.bf_reg_size,
            tot_bfregs: if cfg.dynamic_uar { 0 } else { 16 },
            cache_line_size: 64,
            max_sq_desc_sz: 1024,
            max_rq_desc_sz: 512,
            max_send_wqebb: 1 << 15,
            max_recv_wr: 1 << 15,
            max_srq_recv_wr: 1 << 15,
            num_ports: 1,
            cqe_version: cfg.cqe_version,
            cmds_supp_uhw: 3,
            log_uar_size: 12,
            num_uars_per_page: 1,
            ..Default::default()
        }
    }

    /// `MLX5_IB_METHOD_UAR_OBJ_ALLOC`: a page id.
    pub(crate) fn alloc_uar(&self, kind: UarKind) -> u32 {
        let mut st = self.lock();
        let id = st.next_uar;
        st.next_uar += 1;
        st.uars.insert(id, kind);
        id
    }

    /// Violations recorded so far (empty in a correct run).
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Panics if anything was violated.
    pub fn assert_clean(&self) {
        let v = self.violations();
        assert!(v.is_empty(), "HCA model violations:\n{}", v.join("\n"));
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.lock().stats
    }

    /// Events raised on CQ `cqn` so far.
    pub fn events(&self, cqn: u32) -> u32 {
        self.lock().cqs.get(&cqn).map_or(0, |c| c.events)
    }

    /// Registers `addr..addr+len` with `access`; returns `(lkey, rkey)`.
    pub fn reg_mr(&self, addr: u64, len: u64, access: u32) -> (u32, u32) {
        let mut st = self.lock();
        let lkey = st.next_key;
        st.next_key += 0x100;
        let rkey = lkey | 0x80;
        st.mrs.push(MMr { addr, len, lkey, rkey, access });
        (lkey, rkey)
    }

    /// The [`Mmio`] for a QP's register.
    pub fn mmio_for_qp(&self, reg: &RegInfo) -> HcaMmio {
        self.new_reg(reg.uar_index, RegKind::Qp { bf_half: reg.bf_half })
    }

    /// The [`Mmio`] for a CQ's arm page.
    pub fn mmio_for_cq(&self, reg: &RegInfo) -> HcaMmio {
        self.new_reg(reg.uar_index, RegKind::CqPage)
    }

    fn new_reg(&self, uar_index: u32, kind: RegKind) -> HcaMmio {
        let mut st = self.lock();
        st.regs.push(MReg { uar_index, kind, wc_open: false, store_since_flush: false, next_half: 0, bf_wqe: None });
        HcaMmio { hca: self.clone(), id: st.regs.len() - 1 }
    }

    // -- kernel commands -------------------------------------------------

    /// CREATE_CQ as the kernel checks it; returns the core `cqe` answer and
    /// the driver answer bytes.
    pub fn create_cq(&self, u: &mlx5_ib_create_cq, core_cqe: u32) -> Result<(u32, Vec<u8>), Errno> {
        let mut st = self.lock();
        let entries = (core_cqe + 1).next_power_of_two();
        if u.cqe_size != 64 || u.reserved0 != 0 || u.reserved1 != 0 || u.cqe_comp_en != 0 {
            return Err(Errno::EINVAL);
        }
        if u32::from(u.flags) & !7 != 0 {
            return Err(Errno::EINVAL);
        }
        let uar = if u32::from(u.flags) & MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0 {
            let idx = u32::from(u.uar_page_index);
            if !st.uars.contains_key(&idx) {
                return Err(Errno::EINVAL);
            }
            idx
        } else if st.cfg.dynamic_uar {
            // The kernel refuses a CQ without a UAR index with dynamic UARs.
            return Err(Errno::EINVAL);
        } else {
            0
        };
        let ps = crate::sys::event::page_size() as u64;
        if u.buf_addr % ps != 0 || u.db_addr % 8 != 0 {
            st.violations.push(format!("CQ buffer {:#x} / dbrec {:#x} misaligned", u.buf_addr, u.db_addr));
        }
        for i in 0..entries as u64 {
            // SAFETY: the provider's CQ buffer, `entries * 64` bytes (the
            // kernel pins exactly that much).
            let b = unsafe { rd(u.buf_addr + i * 64 + 63, 1) }[0];
            if b != 0xf0 {
                st.violations.push(format!("CQ entry {i} starts with op_own {b:#x}, not 0xf0"));
                break;
            }
        }
        // SAFETY: the provider's doorbell record (8 bytes).
        let (d0, d1) = unsafe { (rd_be32(u.db_addr), rd_be32(u.db_addr + 4)) };
        if (d0, d1) != (0, 0) {
            st.violations.push("CQ doorbell record not zeroed".into());
        }
        let cqn = st.next_cqn;
        st.next_cqn += 1;
        st.cqs.insert(cqn, MCq { buf: u.buf_addr, db: u.db_addr, ncqe: entries, pi: 0, uar, armed: None, events: 0 });
        let resp = mlx5_ib_create_cq_resp { cqn, reserved: 0 };
        Ok((entries - 1, resp.as_bytes().to_vec()))
    }

    /// CREATE_QP as the kernel checks it (`_create_user_qp`, `set_rq_size`,
    /// `set_user_buf_size`, `verify_assign_uidx`); returns the QPN and the
    /// driver answer bytes.
    pub fn create_qp(
        &self,
        u: &mlx5_ib_create_qp,
        qp_type: QpType,
        core: &QpCaps,
        send_cq: u32,
        recv_cq: u32,
        srq: Option<u32>,
    ) -> Result<(u32, Vec<u8>), Errno> {
        let mut st = self.lock();
        if !st.cqs.contains_key(&send_cq) || !st.cqs.contains_key(&recv_cq) {
            return Err(Errno::EINVAL);
        }
        if let Some(s) = srq {
            if !st.srqs.contains_key(&s) {
                return Err(Errno::EINVAL);
            }
        }
        if (u.sq_wqe_count != 0 && !u.sq_wqe_count.is_power_of_two())
            || (u.rq_wqe_count != 0 && !u.rq_wqe_count.is_power_of_two())
            || u.rq_wqe_shift > 31
        {
            return Err(Errno::EINVAL);
        }
        let has_rq = srq.is_none() && core.max_recv_wr != 0;
        let (rq_cnt, rq_shift) = if has_rq { (u.rq_wqe_count, u.rq_wqe_shift) } else { (0, 0) };
        if !has_rq && u.rq_wqe_count != 0 {
            st.violations.push("create QP: a receive queue in the udata of a QP without one".into());
        }
        if has_rq && (1u32 << rq_shift) < 16 {
            return Err(Errno::EINVAL);
        }
        // User index rules.
        if st.cfg.cqe_version >= 1 {
            if u.uidx >= 0x00ff_ffff {
                return Err(Errno::EINVAL);
            }
            if st.uidx_used.contains_key(&u.uidx) {
                st.violations.push(format!("user index {} used twice", u.uidx));
            }
        } else if u.uidx != 0x00ff_ffff {
            return Err(Errno::EINVAL);
        }
        // UAR.
        let uar = if u.flags & MLX5_QP_FLAG_UAR_PAGE_INDEX != 0 {
            if !st.uars.contains_key(&u.bfreg_index) {
                return Err(Errno::EINVAL);
            }
            u.bfreg_index
        } else if st.cfg.dynamic_uar {
            return Err(Errno::EINVAL);
        } else {
            // Static: the kernel hands out the 4 low-latency registers
            // (the highest numbers, one QP each) first, then shares the
            // medium ones; answers in its 4-per-UAR numbering (`adjust_bfregn`).
            let k = st.next_bfreg;
            st.next_bfreg += 1;
            let n = if k < 4 { 15 - k } else { 1 + (k - 4) % 11 };
            n / 2 * 4 + n % 2
        };
        if u.flags & !MLX5_QP_FLAG_UAR_PAGE_INDEX != 0 || u.sq_buf_addr != 0 {
            return Err(Errno::EINVAL);
        }
        let ps = crate::sys::event::page_size() as u64;
        if u.buf_addr % ps != 0 || u.db_addr % 8 != 0 {
            st.violations.push("QP buffer or doorbell record misaligned".into());
        }
        // SAFETY: the provider's doorbell record.
        let (d0, d1) = unsafe { (rd_be32(u.db_addr), rd_be32(u.db_addr + 4)) };
        if (d0, d1) != (0, 0) {
            st.violations.push("QP doorbell record not zeroed".into());
        }
        let qpn = match st.free_qpns.pop() {
            Some(q) if st.reuse_qpns => q,
            _ => {
                st.next_qpn += 1;
                st.next_qpn - 1
            }
        };
        if st.cfg.cqe_version >= 1 {
            st.uidx_used.insert(u.uidx, qpn);
        }
        let sq_off = (u64::from(rq_cnt)) << rq_shift;
        let rnr_retry_zero = !st.cfg.rnr_infinite;
        st.qps.insert(
            qpn,
            MQp {
                qpn,
                uidx: u.uidx,
                qp_type,
                buf: u.buf_addr,
                db: u.db_addr,
                sq_off,
                sq_cnt: u.sq_wqe_count,
                rq_cnt,
                rq_shift,
                send_cq,
                recv_cq,
                srq,
                uar,
                state: HwState::Reset,
                peer: None,
                qkey: 0,
                sq_ci: 0,
                sq_rung: 0,
                rq_ci: 0,
                rnr_retry_zero,
            },
        );
        let resp = mlx5_ib_create_qp_resp {
            bfreg_index: if st.cfg.dynamic_uar { 0x8000_0000 } else { uar },
            ..Default::default()
        };
        Ok((qpn, resp.as_bytes().to_vec()))
    }

    /// CREATE_SRQ as the kernel checks it; returns the SRQN and the driver
    /// answer bytes.
    pub fn create_srq(&self, u: &mlx5_ib_create_srq, max_wr: u32, max_sge: u32) -> Result<(u32, Vec<u8>), Errno> {
        let mut st = self.lock();
        if u.flags != 0 || u.reserved0 != 0 || u.reserved1 != 0 {
            return Err(Errno::EINVAL);
        }
        if st.cfg.cqe_version == 0 && u.uidx != 0x00ff_ffff {
            return Err(Errno::EINVAL);
        }
        let desc = (16 + 16 * max_sge).next_power_of_two().max(32);
        let nwqes = (max_wr + 1).next_power_of_two();
        // The free list must be linked 0 -> 1 -> ... as the kernel's doc says.
        for i in 0..nwqes - 1 {
            // SAFETY: the provider's SRQ buffer, `nwqes * desc` bytes.
            let next = be16(&unsafe { rd(u.buf_addr + u64::from(i * desc), 4) }, 2);
            if u32::from(next) != i + 1 {
                st.violations.push(format!("SRQ WQE {i} links to {next}"));
                break;
            }
        }
        let srqn = st.next_srqn;
        st.next_srqn += 1;
        st.srqs.insert(
            srqn,
            MSrq {
                buf: u.buf_addr,
                db: u.db_addr,
                nwqes,
                shift: desc.trailing_zeros(),
                max_gs: (desc - 16) / 16,
                hw_head: 0,
                consumed: 0,
            },
        );
        let resp = mlx5_ib_create_srq_resp { srqn, reserved: 0 };
        Ok((srqn, resp.as_bytes().to_vec()))
    }

    /// MODIFY_QP's state part, plus the connection (RC/UC: the peer QPN) or
    /// the Q_Key (UD).
    pub fn modify_qp(&self, qpn: u32, state: u8, peer: Option<u32>, qkey: Option<u32>) {
        let mut st = self.lock();
        let q = st.qps.get_mut(&qpn).expect("QP");
        q.state = match state {
            0 => HwState::Reset,
            1 => HwState::Init,
            2 => HwState::Rtr,
            3..=5 => HwState::Rts,
            _ => HwState::Err,
        };
        if state == 0 {
            q.sq_ci = 0;
            q.sq_rung = 0;
            q.rq_ci = 0;
        }
        if peer.is_some() {
            q.peer = peer;
        }
        if let Some(k) = qkey {
            q.qkey = k;
        }
    }

    /// Moves QP `qpn` to the error state (as a fatal error would).
    pub fn force_error(&self, qpn: u32) {
        self.lock().qps.get_mut(&qpn).expect("QP").state = HwState::Err;
    }

    /// DESTROY_QP.
    pub fn destroy_qp(&self, qpn: u32) {
        let mut st = self.lock();
        if let Some(q) = st.qps.remove(&qpn) {
            st.uidx_used.remove(&q.uidx);
            st.free_qpns.push(qpn);
        }
    }

    /// From now on a create-QP reuses the last QPN destroyed, as the
    /// firmware may.
    pub(crate) fn reuse_qpns(&self) {
        self.lock().reuse_qpns = true;
    }

    // -- doorbells --------------------------------------------------------

    fn on_store(&self, id: usize, offset: usize, bytes: &[u8]) {
        let mut st = self.lock();
        let st = &mut *st;
        let reg = &mut st.regs[id];
        if !reg.wc_open {
            st.violations.push(format!("UAR {}: store without wc_start", reg.uar_index));
        }
        reg.store_since_flush = true;
        let uar = reg.uar_index;
        match reg.kind {
            RegKind::CqPage => {
                if offset != CQ_DOORBELL || bytes.len() != 8 {
                    st.violations.push(format!("CQ page store at {offset:#x}"));
                    return;
                }
                st.stats.arms += 1;
                st.on_arm(uar, bytes);
            }
            RegKind::Qp { bf_half } => {
                // The doorbell alternates between the register's halves
                // (BlueFlame registers), blocks of one copy go to one half.
                let half = offset.checked_div(bf_half).map_or(0, |q| q * bf_half);
                if bf_half != 0 && offset % bf_half < 64 {
                    if half != reg.next_half {
                        st.violations
                            .push(format!("UAR {uar}: doorbell in half {half:#x}, expected {:#x}", reg.next_half));
                    }
                    reg.next_half = half ^ bf_half;
                } else if bf_half == 0 && offset != 0 {
                    st.violations.push(format!("UAR {uar}: doorbell at {offset:#x} of a doorbell-only register"));
                }
                if bytes.len() == 64 {
                    st.stats.bf_copies += u64::from(offset % bf_half.max(64) == 0);
                } else {
                    st.stats.doorbells += 1;
                }
                st.on_qp_doorbell(id, uar, offset % bf_half.max(64), bytes);
            }
        }
    }
}

impl State {
    fn violation(&mut self, s: String) {
        self.violations.push(s);
    }

    fn on_arm(&mut self, uar: u32, bytes: &[u8]) {
        let word = be32(bytes, 0);
        let cqn = be32(bytes, 4);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            self.violation(format!("arm of unknown CQ {cqn:#x}"));
            return;
        };
        let mut v = Vec::new();
        if cq.uar != uar {
            v.push(format!("CQ {cqn:#x} armed through UAR {uar}, created on {}", cq.uar));
        }
        // SAFETY: the CQ's doorbell record.
        let rec = unsafe { rd_be32(cq.db + 4) };
        if rec != word {
            v.push(format!("CQ {cqn:#x}: arm doorbell {word:#x} but dbrec[1] = {rec:#x}"));
        }
        let sn = word >> 28;
        if sn != cq.events & 3 {
            v.push(format!("CQ {cqn:#x}: arm sequence {sn}, expected {}", cq.events & 3));
        }
        let solicited = word & (1 << 24) != 0;
        let ci = word & 0x00ff_ffff;
        cq.armed = Some(solicited);
        // Completions already waiting raise the event at once.
        if (cq.pi & 0x00ff_ffff) != ci {
            cq.armed = None;
            cq.events += 1;
            self.stats.events += 1;
        }
        for s in v {
            self.violation(s);
        }
    }

    fn on_qp_doorbell(&mut self, id: usize, uar: u32, block_off: usize, bytes: &[u8]) {
        // BlueFlame: the blocks after the first carry no header; they must
        // equal the WQE's following blocks in the ring.
        if bytes.len() == 64 && block_off != 0 {
            let Some((qpn, idx)) = self.regs[id].bf_wqe else {
                self.violation(format!("UAR {uar}: BlueFlame block {block_off:#x} without a first block"));
                return;
            };
            let q = &self.qps[&qpn];
            let slot = u64::from((idx + (block_off / 64) as u32) & (q.sq_cnt - 1)) * 64;
            // SAFETY: a block of the QP's send queue.
            let ring = unsafe { rd(q.buf + q.sq_off + slot, 64) };
            if ring[..] != bytes[..] {
                self.violation(format!("QP {qpn:#x}: BlueFlame block {block_off:#x} differs from the ring"));
            }
            return;
        }
        let qpn = be32(bytes, 4) >> 8;
        let Some(q) = self.qps.get(&qpn) else {
            self.violation(format!("doorbell for unknown QPN {qpn:#x}"));
            return;
        };
        let mut v = Vec::new();
        if q.uar != uar {
            v.push(format!("QP {qpn:#x} rang UAR {uar}, it was created on {}", q.uar));
        }
        // SAFETY: the QP's doorbell record (send counter in word 1).
        let pi16 = unsafe { rd_be32(q.db + 4) } & 0xffff;
        let wqe_index = (be32(bytes, 0) >> 8) & 0xffff;
        // The doorbell names a WQE between the device's consumer and the
        // new producer, and equals that WQE's first 8 bytes.
        let ahead = pi16.wrapping_sub(q.sq_rung & 0xffff) & 0xffff;
        let back = pi16.wrapping_sub(wqe_index) & 0xffff;
        if ahead == 0 || back == 0 || back > ahead {
            v.push(format!("QP {qpn:#x}: doorbell for WQE {wqe_index:#x} outside the posted range (pi {pi16:#x})"));
        }
        let ring = q.buf + q.sq_off;
        let slot = u64::from(wqe_index & (q.sq_cnt - 1)) * 64;
        // SAFETY: the first block of a WQE in the QP's send queue.
        let ctrl = unsafe { rd(ring + slot, 64) };
        if ctrl[..8] != bytes[..8] {
            v.push(format!("QP {qpn:#x}: doorbell bytes differ from the WQE at {wqe_index:#x}"));
        }
        if bytes.len() == 64 && ctrl[..] != bytes[..] {
            v.push(format!("QP {qpn:#x}: BlueFlame block differs from the WQE at {wqe_index:#x}"));
        }
        self.regs[id].bf_wqe = (bytes.len() == 64).then_some((qpn, wqe_index));
        let q = self.qps.get_mut(&qpn).unwrap();
        // Extend the 16-bit counter.
        let delta = pi16.wrapping_sub(q.sq_rung & 0xffff) & 0xffff;
        q.sq_rung = q.sq_rung.wrapping_add(delta);
        for s in v {
            self.violation(s);
        }
    }
}

impl Hca {
    // -- execution ---------------------------------------------------------

    /// Executes everything the doorbells announced, until nothing moves.
    pub fn run(&self) {
        let mut st = self.lock();
        loop {
            let qpns: Vec<u32> = st.qps.keys().copied().collect();
            let mut progress = false;
            for qpn in qpns {
                progress |= st.step_qp(qpn);
            }
            if !progress {
                break;
            }
        }
    }
}

/// A parsed send WQE.
struct Wqe {
    opcode: u8,
    wqe_index: u16,
    qpn: u32,
    ds: u32,
    fm: u8,
    imm: u32,
    segs: Vec<u8>,
}

impl Wqe {
    fn seg(&self, i: usize) -> &[u8] {
        &self.segs[i * 16..i * 16 + 16]
    }
}

/// Data segments as `(byte_count, lkey, addr)`.
type Sges = Vec<(u32, u32, u64)>;

/// A gather entry or inline payload of a WQE, from segment `first` on.
enum Payload {
    Inline(Vec<u8>),
    Sges(Sges),
}

fn payload(w: &Wqe, first: usize) -> Payload {
    if first >= w.ds as usize {
        return Payload::Sges(Vec::new());
    }
    let bc = be32(w.seg(first), 0);
    if bc & 0x8000_0000 != 0 {
        let len = (bc & 0x7fff_ffff) as usize;
        let start = first * 16 + 4;
        return Payload::Inline(w.segs[start..start + len].to_vec());
    }
    Payload::Sges((first..w.ds as usize).map(|i| (be32(w.seg(i), 0), be32(w.seg(i), 4), be64(w.seg(i), 8))).collect())
}

impl State {
    fn mr_check(&self, key: u32, remote: bool, addr: u64, len: u64, need: u32) -> bool {
        self.mrs.iter().any(|m| {
            (if remote { m.rkey } else { m.lkey }) == key
                && addr >= m.addr
                && addr.checked_add(len).is_some_and(|e| e <= m.addr + m.len)
                && m.access & need == need
        })
    }

    /// Gathers the local payload; `Err(LOCAL_PROT)` on a bad lkey.
    fn gather(&self, p: &Payload) -> Result<Vec<u8>, u8> {
        match p {
            Payload::Inline(b) => Ok(b.clone()),
            Payload::Sges(s) => {
                let mut out = Vec::new();
                for &(len, lkey, addr) in s {
                    if !self.mr_check(lkey, false, addr, u64::from(len), 0) {
                        return Err(0x04);
                    }
                    // SAFETY: inside a registered region (checked).
                    out.extend(unsafe { rd(addr, len as usize) });
                }
                Ok(out)
            }
        }
    }

    /// Scatters `data` over `sges` (LOCAL_WRITE regions); `Err(syndrome)`.
    fn scatter(&self, sges: &[(u32, u32, u64)], data: &[u8]) -> Result<(), u8> {
        let cap: u64 = sges.iter().map(|s| u64::from(s.0)).sum();
        if (data.len() as u64) > cap {
            return Err(0x01);
        }
        let mut at = 0usize;
        for &(len, lkey, addr) in sges {
            if at == data.len() {
                break;
            }
            let n = (len as usize).min(data.len() - at);
            if !self.mr_check(lkey, false, addr, n as u64, access::LOCAL_WRITE) {
                return Err(0x04);
            }
            // SAFETY: inside a registered, locally writable region (checked).
            unsafe { wr(addr, &data[at..at + n]) };
            at += n;
        }
        Ok(())
    }

    fn read_wqe(&self, q: &MQp) -> Wqe {
        let ring = q.buf + q.sq_off;
        let bytes = u64::from(q.sq_cnt) * 64;
        let start = u64::from(q.sq_ci & (q.sq_cnt - 1)) * 64;
        // SAFETY: the control segment of the WQE at the device's consumer.
        let ctrl = unsafe { rd(ring + start, 16) };
        let ds = u32::from(ctrl[7] & 0x3f);
        let mut segs = Vec::with_capacity(ds as usize * 16);
        for i in 0..u64::from(ds) {
            // SAFETY: segment i of the WQE, wrapped at the end of the ring.
            segs.extend(unsafe { rd(ring + (start + 16 * i) % bytes, 16) });
        }
        Wqe {
            opcode: ctrl[3],
            wqe_index: be16(&ctrl, 1),
            qpn: be32(&ctrl, 4) >> 8,
            ds,
            fm: ctrl[11],
            imm: be32(&ctrl, 12),
            segs,
        }
    }

    /// Writes one CQE (`bytes`, opcode nibble included in byte 63) at the
    /// CQ's producer index with the pass's owner bit.
    fn write_cqe(&mut self, cqn: u32, mut bytes: [u8; 64], solicited: bool) {
        let cq = self.cqs.get_mut(&cqn).expect("CQ");
        // SAFETY: the CQ's doorbell record.
        let ci = unsafe { rd_be32(cq.db) } & 0x00ff_ffff;
        if (cq.pi.wrapping_sub(ci) & 0x00ff_ffff) >= cq.ncqe {
            let pi = cq.pi;
            self.violation(format!("CQ {cqn:#x} overrun: pi {pi:#x}, ci {ci:#x}"));
            return;
        }
        let owner = u8::from(cq.pi & cq.ncqe != 0);
        let opcode = bytes[63] & 0xf0;
        bytes[63] = opcode | owner | if solicited { 2 } else { 0 };
        let at = cq.buf + u64::from(cq.pi & (cq.ncqe - 1)) * 64;
        // SAFETY: an entry of the CQ buffer the device owns (not yet
        // produced); body first, the owner byte last.
        unsafe {
            wr(at, &bytes[..63]);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            (at as usize as *mut u8).add(63).write_volatile(bytes[63]);
        }
        cq.pi = cq.pi.wrapping_add(1);
        self.stats.cqes += 1;
        let err = opcode >> 4 >= 13;
        if let Some(sol_only) = cq.armed {
            if !sol_only || solicited || err {
                cq.armed = None;
                cq.events += 1;
                self.stats.events += 1;
            }
        }
    }

    fn rsn_of(&self, q: &MQp) -> u32 {
        if self.cfg.cqe_version >= 1 {
            q.uidx
        } else {
            0
        }
    }

    fn req_cqe(&self, q: &MQp, opcode: u8, wqe_index: u16, byte_cnt: u32) -> [u8; 64] {
        let mut c = [0u8; 64];
        c[32..36].copy_from_slice(&self.rsn_of(q).to_be_bytes());
        c[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
        c[56..60].copy_from_slice(&((u32::from(opcode) << 24) | q.qpn).to_be_bytes());
        c[60..62].copy_from_slice(&wqe_index.to_be_bytes());
        c[63] = 0; // REQ
        c
    }

    fn err_cqe(&self, q: &MQp, cqe_op: u8, syndrome: u8, opcode: u8, wqe_counter: u16, srqn_uidx: u32) -> [u8; 64] {
        let mut c = [0u8; 64];
        c[32..36].copy_from_slice(&srqn_uidx.to_be_bytes());
        c[54] = 0x42; // vendor syndrome (model value)
        c[55] = syndrome;
        c[56..60].copy_from_slice(&((u32::from(opcode) << 24) | q.qpn).to_be_bytes());
        c[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        c[63] = cqe_op << 4;
        c
    }

    /// Moves a QP to error.
    fn fail_qp(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.state = HwState::Err;
        }
    }

    /// One round for QP `qpn`; true if anything happened.
    fn step_qp(&mut self, qpn: u32) -> bool {
        let mut progress = false;
        // Flush on error: every posted send, every posted receive.
        if self.qps[&qpn].state == HwState::Err {
            loop {
                let q = &self.qps[&qpn];
                if q.sq_ci == q.sq_rung {
                    break;
                }
                let w = self.read_wqe(q);
                let c = self.err_cqe(q, 13, 0x05, w.opcode, w.wqe_index, self.rsn_of(q));
                let (cq, adv) = (q.send_cq, w.ds.div_ceil(4));
                self.write_cqe(cq, c, false);
                self.stats.wqes += 1;
                self.qps.get_mut(&qpn).unwrap().sq_ci += adv;
                progress = true;
            }
            let q = &self.qps[&qpn];
            if q.srq.is_none() && q.rq_cnt > 0 {
                // SAFETY: the QP's doorbell record (receive counter in word 0).
                let pi16 = unsafe { rd_be32(q.db) } & 0xffff;
                while self.qps[&qpn].rq_ci & 0xffff != pi16 {
                    let q = &self.qps[&qpn];
                    let c = self.err_cqe(q, 14, 0x05, 0, q.rq_ci as u16, self.rsn_of(q));
                    let cq = q.recv_cq;
                    self.write_cqe(cq, c, false);
                    self.qps.get_mut(&qpn).unwrap().rq_ci += 1;
                    progress = true;
                }
            }
            return progress;
        }
        if self.qps[&qpn].state < HwState::Rts {
            return false;
        }
        loop {
            let q = &self.qps[&qpn];
            if q.sq_ci == q.sq_rung || q.state != HwState::Rts {
                break;
            }
            let w = self.read_wqe(q);
            if u32::from(w.wqe_index) != q.sq_ci & 0xffff || w.qpn != qpn || w.ds == 0 {
                let s = format!(
                    "QP {qpn:#x}: WQE at {:#x} has index {:#x}, QPN {:#x}, ds {}",
                    q.sq_ci, w.wqe_index, w.qpn, w.ds
                );
                self.violation(s);
                self.fail_qp(qpn);
                return true;
            }
            let r = self.exec(qpn, &w);
            let q = &self.qps[&qpn];
            match r {
                Exec::Stall => break,
                Exec::Ok { byte_cnt } => {
                    if w.fm & 0x08 != 0 {
                        let c = self.req_cqe(q, w.opcode, w.wqe_index, byte_cnt);
                        let cq = q.send_cq;
                        self.write_cqe(cq, c, false);
                    }
                }
                Exec::Err(syn) => {
                    let c = self.err_cqe(q, 13, syn, w.opcode, w.wqe_index, self.rsn_of(q));
                    let cq = q.send_cq;
                    self.write_cqe(cq, c, false);
                    self.fail_qp(qpn);
                }
            }
            self.stats.wqes += 1;
            self.qps.get_mut(&qpn).unwrap().sq_ci += w.ds.div_ceil(4);
            progress = true;
        }
        progress
    }

    /// Executes one WQE of QP `qpn`.
    fn exec(&mut self, qpn: u32, w: &Wqe) -> Exec {
        let q = &self.qps[&qpn];
        let qp_type = q.qp_type;
        if qp_type == QpType::Ud {
            if !matches!(w.opcode, 0x0a | 0x0b) {
                return Exec::Err(0x02);
            }
            return self.exec_ud(qpn, w);
        }
        let Some(peer) = q.peer else { return Exec::Err(0x15) };
        if self.qps.get(&peer).map_or(true, |p| p.state < HwState::Rtr || p.state == HwState::Err) {
            return Exec::Err(0x15);
        }
        match w.opcode {
            0x0a | 0x0b => {
                let data = match self.gather(&payload(w, 1)) {
                    Ok(d) => d,
                    Err(s) => return Exec::Err(s),
                };
                let imm = (w.opcode == 0x0b).then_some(w.imm);
                let resp_op = if imm.is_some() { 3 } else { 2 };
                self.deliver(qpn, peer, &data, resp_op, imm, w.fm & 0x02 != 0, true)
            }
            0x08 | 0x09 => {
                let (raddr, rkey) = (be64(w.seg(1), 0), be32(w.seg(1), 8));
                let data = match self.gather(&payload(w, 2)) {
                    Ok(d) => d,
                    Err(s) => return Exec::Err(s),
                };
                if !self.mr_check(rkey, true, raddr, data.len() as u64, access::REMOTE_WRITE) {
                    return Exec::Err(0x13);
                }
                if w.opcode == 0x09 {
                    // Needs a receive first (RNR otherwise); then the data.
                    let r = self.deliver(qpn, peer, &data, 1, Some(w.imm), w.fm & 0x02 != 0, false);
                    if !matches!(r, Exec::Ok { .. }) {
                        return r;
                    }
                }
                // SAFETY: inside a registered, remotely writable region.
                unsafe { wr(raddr, &data) };
                Exec::Ok { byte_cnt: data.len() as u32 }
            }
            0x10 => {
                if qp_type != QpType::Rc {
                    return Exec::Err(0x02);
                }
                let (raddr, rkey) = (be64(w.seg(1), 0), be32(w.seg(1), 8));
                let Payload::Sges(sges) = payload(w, 2) else { return Exec::Err(0x02) };
                let len: u64 = sges.iter().map(|s| u64::from(s.0)).sum();
                if !self.mr_check(rkey, true, raddr, len, access::REMOTE_READ) {
                    return Exec::Err(0x13);
                }
                // SAFETY: inside a registered, remotely readable region.
                let data = unsafe { rd(raddr, len as usize) };
                match self.scatter(&sges, &data) {
                    Ok(()) => Exec::Ok { byte_cnt: len as u32 },
                    Err(s) => Exec::Err(s),
                }
            }
            0x11 | 0x12 => {
                if qp_type != QpType::Rc {
                    return Exec::Err(0x02);
                }
                let (raddr, rkey) = (be64(w.seg(1), 0), be32(w.seg(1), 8));
                let (swap_add, compare) = (be64(w.seg(2), 0), be64(w.seg(2), 8));
                let Payload::Sges(sges) = payload(w, 3) else { return Exec::Err(0x02) };
                if sges.len() != 1 || sges[0].0 != 8 || raddr % 8 != 0 {
                    return Exec::Err(0x02);
                }
                if !self.mr_check(rkey, true, raddr, 8, access::REMOTE_ATOMIC) {
                    return Exec::Err(0x13);
                }
                // SAFETY: 8 bytes inside a registered, atomic-capable region.
                let old = unsafe { rd(raddr, 8) };
                let oldv = be64(&old, 0);
                let new = if w.opcode == 0x11 {
                    if oldv == compare {
                        swap_add
                    } else {
                        oldv
                    }
                } else {
                    oldv.wrapping_add(swap_add)
                };
                if !self.mr_check(sges[0].1, false, sges[0].2, 8, access::LOCAL_WRITE) {
                    return Exec::Err(0x04);
                }
                // SAFETY: as above, and the local result buffer (checked).
                unsafe {
                    wr(raddr, &new.to_be_bytes());
                    wr(sges[0].2, &old);
                }
                Exec::Ok { byte_cnt: 8 }
            }
            op => {
                let s = format!("QP {qpn:#x}: unknown send opcode {op:#x}");
                self.violation(s);
                Exec::Err(0x02)
            }
        }
    }

    /// Takes the next receive of QP `dst` (its RQ or SRQ): `Some((wqe
    /// counter, scatter list))`, `None` when there is none.
    fn take_recv(&mut self, dst: u32) -> Option<(u16, Sges)> {
        let q = &self.qps[&dst];
        if let Some(srqn) = q.srq {
            let s = self.srqs.get_mut(&srqn)?;
            // SAFETY: the SRQ's doorbell record.
            let counter = unsafe { rd_be32(s.db) };
            if counter >> 16 != 0 {
                let v = format!("SRQ {srqn}: doorbell counter {counter:#x} sets the reserved upper 16 bits");
                self.violations.push(v);
            }
            // A 16-bit counter: `consumed` runs free.
            if counter.wrapping_sub(s.consumed) & 0xffff == 0 {
                return None;
            }
            let i = s.hw_head;
            let at = s.buf + (u64::from(i) << s.shift);
            // SAFETY: WQE `i` of the SRQ buffer, posted (counted by the dbrec).
            let w = unsafe { rd(at, 16 + 16 * s.max_gs as usize) };
            let mut sges = Vec::new();
            for k in 0..s.max_gs as usize {
                let o = 16 + 16 * k;
                if be32(&w, o + 4) == 0x100 {
                    break;
                }
                sges.push((be32(&w, o), be32(&w, o + 4), be64(&w, o + 8)));
            }
            s.hw_head = u32::from(be16(&w, 2)) & (s.nwqes - 1);
            s.consumed = s.consumed.wrapping_add(1);
            return Some((i as u16, sges));
        }
        if q.rq_cnt == 0 {
            return None;
        }
        // SAFETY: the QP's doorbell record (receive counter).
        let pi16 = unsafe { rd_be32(q.db) } & 0xffff;
        if q.rq_ci & 0xffff == pi16 {
            return None;
        }
        let stride = 1usize << q.rq_shift;
        let at = q.buf + (u64::from(q.rq_ci & (q.rq_cnt - 1)) << q.rq_shift);
        // SAFETY: a posted receive WQE of the QP's receive queue.
        let w = unsafe { rd(at, stride) };
        let mut sges = Vec::new();
        for k in 0..stride / 16 {
            let o = 16 * k;
            if be32(&w, o + 4) == 0x100 {
                break;
            }
            sges.push((be32(&w, o), be32(&w, o + 4), be64(&w, o + 8)));
        }
        let ctr = q.rq_ci as u16;
        self.qps.get_mut(&dst).unwrap().rq_ci += 1;
        Some((ctr, sges))
    }

    /// Delivers `data` to a receive of QP `dst` and writes its responder
    /// CQE (`resp_op` 1/2/3). `scatter`: SEND (data into the buffers) vs
    /// WRITE_IMM (only consumes the receive).
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        src: u32,
        dst: u32,
        data: &[u8],
        resp_op: u8,
        imm: Option<u32>,
        solicited: bool,
        scatter: bool,
    ) -> Exec {
        let Some((ctr, sges)) = self.take_recv(dst) else {
            if self.qps[&src].rnr_retry_zero {
                return Exec::Err(0x16);
            }
            return Exec::Stall;
        };
        let d = &self.qps[&dst];
        let srqn_uidx = if self.cfg.cqe_version >= 1 { d.uidx } else { d.srq.unwrap_or(0) };
        if scatter {
            if let Err(s) = self.scatter(&sges, data) {
                let c = self.err_cqe(d, 14, s, 0, ctr, srqn_uidx);
                let cq = d.recv_cq;
                self.write_cqe(cq, c, false);
                self.fail_qp(dst);
                return Exec::Err(if s == 0x01 { 0x12 } else { 0x13 });
            }
        }
        let d = &self.qps[&dst];
        let mut c = [0u8; 64];
        c[24..28].copy_from_slice(&(self.qps[&src].qpn & 0x00ff_ffff).to_be_bytes());
        c[32..36].copy_from_slice(&srqn_uidx.to_be_bytes());
        c[36..40].copy_from_slice(&imm.unwrap_or(0).to_be_bytes());
        c[44..48].copy_from_slice(&(data.len() as u32).to_be_bytes());
        c[56..60].copy_from_slice(&d.qpn.to_be_bytes());
        c[60..62].copy_from_slice(&ctr.to_be_bytes());
        c[63] = resp_op << 4;
        let cq = d.recv_cq;
        self.write_cqe(cq, c, solicited);
        Exec::Ok { byte_cnt: data.len() as u32 }
    }

    fn exec_ud(&mut self, qpn: u32, w: &Wqe) -> Exec {
        let av = &w.segs[16..64];
        let dqp = be32(av, 8);
        if dqp & 0x8000_0000 == 0 {
            let s = format!("QP {qpn:#x}: datagram segment without MLX5_EXTENDED_UD_AV");
            self.violation(s);
        }
        let data = match self.gather(&payload(w, 4)) {
            Ok(d) => d,
            Err(s) => return Exec::Err(s),
        };
        let dst = dqp & 0x00ff_ffff;
        let qkey = be32(av, 0);
        let mac: [u8; 6] = av[20..26].try_into().unwrap();
        let ok = mac == self.cfg.mac
            && self.qps.get(&dst).is_some_and(|d| {
                d.qp_type == QpType::Ud && d.state >= HwState::Rtr && d.state != HwState::Err && d.qkey == qkey
            });
        let byte_cnt = data.len() as u32;
        if !ok {
            self.stats.ud_dropped += 1;
            return Exec::Ok { byte_cnt };
        }
        let Some((ctr, sges)) = self.take_recv(dst) else {
            self.stats.ud_dropped += 1;
            return Exec::Ok { byte_cnt };
        };
        // A 40-byte GRH in front of the payload: version 6, the destination
        // GID from the address vector as DGID.
        let mut grh = vec![0u8; 40];
        grh[0] = 0x60;
        grh[24..40].copy_from_slice(&av[32..48]);
        grh.extend_from_slice(&data);
        let d = &self.qps[&dst];
        let srqn_uidx = if self.cfg.cqe_version >= 1 { d.uidx } else { d.srq.unwrap_or(0) };
        if let Err(s) = self.scatter(&sges, &grh) {
            let c = self.err_cqe(d, 14, s, 0, ctr, srqn_uidx);
            let cq = d.recv_cq;
            self.write_cqe(cq, c, false);
            self.fail_qp(dst);
            return Exec::Ok { byte_cnt };
        }
        let imm = (w.opcode == 0x0b).then_some(w.imm);
        let d = &self.qps[&dst];
        let sl = u32::from(av[12] >> 1 & 7);
        let mut c = [0u8; 64];
        c[24..28].copy_from_slice(&((1 << 28) | (sl << 24) | qpn).to_be_bytes());
        c[32..36].copy_from_slice(&srqn_uidx.to_be_bytes());
        c[36..40].copy_from_slice(&imm.unwrap_or(0).to_be_bytes());
        c[44..48].copy_from_slice(&(grh.len() as u32).to_be_bytes());
        c[56..60].copy_from_slice(&d.qpn.to_be_bytes());
        c[60..62].copy_from_slice(&ctr.to_be_bytes());
        c[63] = if imm.is_some() { 3 } else { 2 } << 4;
        let cq = d.recv_cq;
        self.write_cqe(cq, c, w.fm & 0x02 != 0);
        Exec::Ok { byte_cnt }
    }
}

// ---------------------------------------------------------------------------
// Convenience: create provider objects through the model's kernel.

impl Hca {
    /// A provider context on this model.
    pub fn context(&self) -> Context {
        Context::new_model(self, &self.ucontext_resp()).expect("model context")
    }

    /// A CQ of at least `cqe` entries.
    pub fn new_cq(&self, ctx: &Context, cqe: u32) -> Cq<HcaMmio> {
        let (p, u) = ctx.cq_prepare(cqe).expect("cq_prepare");
        let (kcqe, resp) = self.create_cq(&u, p.core_cqe()).expect("create_cq");
        ctx.cq_finish_with(p, &resp, kcqe, |r, _| self.mmio_for_cq(r)).map_err(|e| e.error).expect("cq_finish")
    }

    /// An SRQ.
    pub fn new_srq(&self, ctx: &Context, max_wr: u32, max_sge: u32) -> Srq {
        let (p, u) = ctx.srq_prepare(max_wr, max_sge).expect("srq_prepare");
        let (_, resp) = self.create_srq(&u, p.core_max_wr(), p.core_max_sge()).expect("create_srq");
        ctx.srq_finish(p, &resp).map_err(|e| e.error).expect("srq_finish")
    }

    /// A QP (state RESET).
    pub fn new_qp(&self, ctx: &Context, args: &QpPrepareArgs, send_cq: u32, recv_cq: u32) -> Qp<HcaMmio> {
        let (p, u) = ctx.qp_prepare(args).expect("qp_prepare");
        let srqn = args.srq.as_ref().map(|s| s.srqn());
        let (qpn, resp) = self.create_qp(&u, args.qp_type, &p.core_caps(), send_cq, recv_cq, srqn).expect("create_qp");
        ctx.qp_finish_with(p, &resp, qpn, |r, _| self.mmio_for_qp(r)).map_err(|e| e.error).expect("qp_finish")
    }

    /// Moves a provider QP and the model QP to `state` together.
    pub fn set_state<M: Mmio>(&self, qp: &Qp<M>, state: u8, peer: Option<u32>, qkey: Option<u32>) {
        self.modify_qp(qp.qpn(), state, peer, qkey);
        qp.on_state_change(state);
    }

    /// Connects two RC/UC QPs and moves both to RTS.
    pub fn connect<M: Mmio, N: Mmio>(&self, a: &Qp<M>, b: &Qp<N>) {
        for s in 1..=3 {
            self.set_state(a, s, Some(b.qpn()), None);
            self.set_state(b, s, Some(a.qpn()), None);
        }
    }
}

/// Pretends the device completed every send request posted to `qp`
/// (benchmarks that post without a device behind the doorbell).
#[cfg_attr(not(feature = "mock"), allow(dead_code))]
pub fn retire_all_sends<M: Mmio>(qp: &Qp<M>) {
    qp.shared().sq.tail().store(qp.sq.head(), std::sync::atomic::Ordering::Release);
}
