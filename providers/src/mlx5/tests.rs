//! Golden tests of the mlx5 provider: every expected buffer below is
//! written by hand, byte by byte at explicit offsets, from the layouts in
//! providers.md §B and the kernel's `mlx5-abi.h`; none is produced by the
//! encoder under test.
//!
//! Unsafe code (allowed below): the tests read and write the provider's
//! queue memory (WQEs, CQEs, doorbell records) by address, as the device would.
#![allow(unsafe_code)]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use zerocopy::IntoBytes;

use super::cq::arm_doorbell;
use super::cqe::{status_of, sw_owned, Cqe64};
use super::model::{Hca, MmioOp, ModelCfg, Recorder};
use super::seg::*;
use super::uar::{mmap_offset, uar_alloc_cmd, UarAllocOut, UarKind};
use super::*;
use crate::wr::{RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc, WcFlags, WcOpcode, WcStatus};

// -- helpers ----------------------------------------------------------------

fn peek(addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: the tests only peek at queue memory of live objects they own.
    unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, v.as_mut_ptr(), len) };
    v
}

fn poke(addr: u64, bytes: &[u8]) {
    // SAFETY: the tests only write CQ entries of live CQs they own, playing the HCA.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as usize as *mut u8, bytes.len()) };
}

/// Expected bytes: `len` zeros with `(offset, bytes)` patches.
fn bytes_at(len: usize, patches: &[(usize, &[u8])]) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for (off, b) in patches {
        v[*off..*off + b.len()].copy_from_slice(b);
    }
    v
}

#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8]) {
    if got != want {
        let hex = |b: &[u8]| b.chunks(16).map(|c| format!("{c:02x?}")).collect::<Vec<_>>().join("\n  ");
        panic!("bytes differ\n got:\n  {}\nwant:\n  {}", hex(got), hex(want));
    }
}

fn ctx(bf_reg_size: u32) -> (Hca, Context) {
    let hca = Hca::new(ModelCfg { bf_reg_size, ..Default::default() });
    let ctx = hca.context();
    (hca, ctx)
}

/// A QP with QPN 0x123 and a recording doorbell, in RTS (no kernel, no
/// model behind it: the driver answer is all zeros, as the dynamic scheme has it).
fn golden_qp(ctx: &Context, qp_type: QpType, caps: QpCaps, sig_all: bool) -> (Qp<Recorder>, Recorder) {
    let args = QpPrepareArgs { qp_type, caps, srq: None, sq_sig_all: sig_all };
    let (p, _) = ctx.qp_prepare(&args).unwrap();
    let rec = Recorder::default();
    let r2 = rec.clone();
    let qp = ctx.qp_finish_with(p, &[0u8; QP_RESP_LEN], 0x123, |_, _| r2).map_err(|e| e.error).unwrap();
    qp.on_state_change(1);
    qp.on_state_change(2);
    qp.on_state_change(3);
    (qp, rec)
}

fn rc_caps() -> QpCaps {
    QpCaps { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 4, max_inline_data: 16 }
}

fn sq_bytes<M: Mmio>(qp: &Qp<M>, bb: u32, len: usize) -> Vec<u8> {
    let s = qp.shared();
    peek(s.buf_addr() + s.sizes().sq_offset as u64 + u64::from(bb) * 64, len)
}

fn dbrec<M: Mmio>(qp: &Qp<M>, word: u64) -> Vec<u8> {
    peek(qp.shared().db_addr() + 4 * word, 4)
}

fn post<M: Mmio>(qp: &mut Qp<M>, wrs: &[SendWr<'_>]) {
    // SAFETY: the golden tests' INLINE payloads are live byte arrays.
    unsafe { qp.sq.post(wrs) }.unwrap()
}

fn send<'a>(wr_id: u64, flags: SendFlags, sgl: &'a [Sge<'a>]) -> SendWr<'a> {
    SendWr { wr_id, op: SendOp::Send, flags, sgl, ud: None }
}

/// Posts `n` one-SGE unsignaled SENDs (one WQEBB each) and retires them.
fn advance<M: Mmio>(qp: &mut Qp<M>, n: u32) {
    let sge = [Sge::new(0x1000, 4, 1)];
    for i in 0..n {
        post(qp, &[send(1000 + u64::from(i), SendFlags::empty(), &sge)]);
        let head = qp.sq.head();
        qp.shared().sq.tail().store(head, Ordering::Release);
    }
}

const SEND_SGE: Sge<'static> = Sge::new(0x1122_3344_5566_7788, 0x100, 0xabcd);
const DATA_SEG: [u8; 16] =
    [0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xab, 0xcd, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];

// -- one test per packed field ----------------------------------------------

#[test]
fn ctrl_opmod_idx_opcode() {
    let mut c = CtrlSeg::default();
    c.set_opmod_idx_opcode(0xab, 0x1234, 0x0a);
    assert_bytes(c.as_bytes(), &bytes_at(16, &[(0, &[0xab, 0x12, 0x34, 0x0a])]));
    assert_eq!((c.opmod(), c.wqe_index(), c.opcode()), (0xab, 0x1234, 0x0a));
}

#[test]
fn ctrl_qpn_ds() {
    let mut c = CtrlSeg::default();
    c.set_qpn_ds(0x00ab_cdef, 0x3f);
    assert_bytes(c.as_bytes(), &bytes_at(16, &[(4, &[0xab, 0xcd, 0xef, 0x3f])]));
    // QPN is 24 bits, ds 6 bits.
    c.set_qpn_ds(0xff12_3456, 0x41);
    assert_bytes(&c.as_bytes()[4..8], &[0x12, 0x34, 0x56, 0x01]);
    assert_eq!((c.qpn(), c.ds()), (0x12_3456, 1));
}

#[test]
fn ctrl_fm_ce_se_and_imm() {
    let mut c = CtrlSeg::default();
    c.set_fm_ce_se(fm_ce_se::FENCE | fm_ce_se::CQ_UPDATE | fm_ce_se::SOLICITED);
    c.set_imm(0xdead_beef);
    assert_bytes(c.as_bytes(), &bytes_at(16, &[(11, &[0x8a]), (12, &[0xde, 0xad, 0xbe, 0xef])]));
}

#[test]
fn ctrl_full_and_doorbell_word() {
    let c = CtrlSeg::new(opcode::SEND, 5, 0x123, 2, fm_ce_se::CQ_UPDATE, 0);
    let want = [0x00, 0x00, 0x05, 0x0a, 0x00, 0x01, 0x23, 0x02, 0x00, 0x00, 0x00, 0x08, 0, 0, 0, 0];
    assert_bytes(c.as_bytes(), &want);
    assert_eq!(c.doorbell_word().to_ne_bytes(), [0x00, 0x00, 0x05, 0x0a, 0x00, 0x01, 0x23, 0x02]);
}

#[test]
fn ctrl_and_data_words_match_the_structs() {
    for (op, idx, qpn, ds, fm, imm) in
        [(0x0a, 5, 0x123u32, 2, 0x08, 0), (0x0b, 0xfffe, 0xab_cdef, 63, 0x8a, 0xdead_beef)]
    {
        let [a, b] = ctrl_words(op, idx, (qpn << 8).to_be(), ds, fm, imm);
        let mut got = a.to_ne_bytes().to_vec();
        got.extend_from_slice(&b.to_ne_bytes());
        assert_bytes(&got, CtrlSeg::new(op, idx, qpn, ds, fm, imm).as_bytes());
    }
    let [a, b] = data_words(0x100, 0xabcd, 0x1122_3344_5566_7788);
    let mut got = a.to_ne_bytes().to_vec();
    got.extend_from_slice(&b.to_ne_bytes());
    assert_bytes(&got, &DATA_SEG);
}

#[test]
fn raddr_seg() {
    let r = RaddrSeg::new(0xdead_beef000, 0x4242);
    let want = [0x00, 0x00, 0x0d, 0xea, 0xdb, 0xee, 0xf0, 0x00, 0x00, 0x00, 0x42, 0x42, 0, 0, 0, 0];
    assert_bytes(r.as_bytes(), &want);
}

#[test]
fn atomic_seg_cmp_swap_and_fetch_add() {
    let a = AtomicSeg::cmp_swap(0x1111_2222_3333_4444, 0x5555_6666_7777_8888);
    let want = [0x55, 0x55, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44];
    assert_bytes(a.as_bytes(), &want);
    let f = AtomicSeg::fetch_add(0x10);
    assert_bytes(f.as_bytes(), &bytes_at(16, &[(7, &[0x10])]));
}

#[test]
fn data_seg_and_terminator() {
    assert_bytes(DataSeg::new(0x100, 0xabcd, 0x1122_3344_5566_7788).as_bytes(), &DATA_SEG);
    assert_bytes(DataSeg::terminator().as_bytes(), &bytes_at(16, &[(4, &[0x00, 0x00, 0x01, 0x00])]));
}

#[test]
fn inline_seg_header() {
    let i = InlineSeg::new(5);
    assert_bytes(i.as_bytes(), &[0x80, 0x00, 0x00, 0x05]);
    assert_eq!((i.len(), i.is_inline()), (5, true));
}

#[test]
fn srq_next_seg() {
    assert_bytes(SrqNextSeg::new(0x1234).as_bytes(), &bytes_at(16, &[(2, &[0x12, 0x34])]));
}

#[test]
fn av_qkey_and_remote_qpn() {
    let mut av = Av::default();
    av.set_qkey(0x1111_1111);
    av.set_remote_qpn(0x0005_4321);
    assert_bytes(&av.as_bytes()[..12], &[0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0, 0x80, 0x05, 0x43, 0x21]);
}

#[test]
fn av_stat_rate_sl() {
    let mut av = Av::default();
    av.set_stat_rate_sl_eth(0, 3);
    assert_eq!(av.as_bytes()[12], 0x06);
    av.set_stat_rate_sl_eth(7, 0xf); // SL is 3 bits on Ethernet
    assert_eq!(av.as_bytes()[12], 0x7e);
    av.set_stat_rate_sl_ib(9, 0xa);
    assert_eq!(av.as_bytes()[12], 0x9a);
}

#[test]
fn av_fl_mlid_rlid_rmac_tclass_hop() {
    let mut av = Av::default();
    av.set_fl_mlid(0xff);
    av.set_rlid(0xe341);
    av.set_rmac([1, 2, 3, 4, 5, 6]);
    av.set_tclass_hop_limit(0x20, 64);
    assert_bytes(&av.as_bytes()[12..28], &[0x00, 0x7f, 0xe3, 0x41, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 0x20, 0x40]);
}

#[test]
fn av_grh_gid_fl_and_rgid() {
    let mut av = Av::default();
    av.set_grh_gid_fl(false, 3, 0x12345);
    assert_bytes(&av.as_bytes()[28..32], &[0x00, 0x31, 0x23, 0x45]);
    av.set_grh_gid_fl(true, 0xff, 0xfff_ffff); // flow label is 20 bits
    assert_bytes(&av.as_bytes()[28..32], &[0x4f, 0xff, 0xff, 0xff]);
    let gid: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
    av.set_rgid(gid);
    assert_bytes(&av.as_bytes()[32..48], &gid);
}

#[test]
fn flow_label_udp_sport() {
    // (0x12345 & 0x3fff) ^ ((0x12345 & 0xfc000) >> 14) | 0xc000 = 0x2345 ^ 4 | 0xc000
    assert_eq!(ah::flow_label_to_udp_sport(0x12345), 0xe341);
    assert_eq!(ah::flow_label_to_udp_sport(0), 0xc000);
}

#[test]
fn cqe64_fields() {
    let raw = bytes_at(
        64,
        &[
            (17, &[0x85]),
            (22, &[0x00, 0x07]),
            (24, &[0x13, 0x05, 0x43, 0x21]),
            (29, &[0x08]),
            (32, &[0xaa, 0x12, 0x34, 0x56]),
            (36, &[0xde, 0xad, 0xbe, 0xef]),
            (44, &[0x00, 0x00, 0x02, 0x00]),
            (54, &[0x32, 0x13]),
            (56, &[0x10, 0x00, 0x01, 0x23]),
            (60, &[0x12, 0x34]),
            (63, &[0xd3]),
        ],
    );
    let c: Cqe64 = zerocopy::FromBytes::read_from_bytes(&raw[..]).unwrap();
    assert_eq!(c.dlid_path_bits(), 5);
    assert_eq!(c.slid(), 7);
    assert_eq!((c.grh(), c.sl(), c.src_qp()), (1, 3, 0x05_4321));
    assert_eq!(c.l3_hdr_type(), 2);
    assert_eq!(c.srqn_uidx(), 0x12_3456);
    assert_eq!(c.imm_inval_pkey(), 0xdead_beef);
    assert_eq!(c.byte_cnt(), 0x200);
    assert_eq!((c.vendor_err_synd(), c.syndrome()), (0x32, 0x13));
    assert_eq!((c.send_opcode(), c.qpn()), (0x10, 0x123));
    assert_eq!(c.wqe_counter(), 0x1234);
    assert_eq!((c.opcode(), c.solicited(), c.owner()), (13, true, 1));
}

#[test]
fn ownership_predicate() {
    // ncqe 4: pass 0 expects owner 0, pass 1 owner 1, pass 2 owner 0.
    assert!(!sw_owned(0xf0, 0, 4), "the initial fill is never valid");
    assert!(!sw_owned(0xf1, 4, 4));
    assert!(sw_owned(0x00, 0, 4));
    assert!(!sw_owned(0x01, 0, 4));
    assert!(sw_owned(0x21, 5, 4));
    assert!(!sw_owned(0x20, 5, 4));
    assert!(sw_owned(0xd0, 9, 4));
}

#[test]
fn syndrome_table() {
    let table = [
        (0x01, WcStatus::LOC_LEN_ERR),
        (0x02, WcStatus::LOC_QP_OP_ERR),
        (0x04, WcStatus::LOC_PROT_ERR),
        (0x05, WcStatus::WR_FLUSH_ERR),
        (0x06, WcStatus::MW_BIND_ERR),
        (0x10, WcStatus::BAD_RESP_ERR),
        (0x11, WcStatus::LOC_ACCESS_ERR),
        (0x12, WcStatus::REM_INV_REQ_ERR),
        (0x13, WcStatus::REM_ACCESS_ERR),
        (0x14, WcStatus::REM_OP_ERR),
        (0x15, WcStatus::RETRY_EXC_ERR),
        (0x16, WcStatus::RNR_RETRY_EXC_ERR),
        (0x22, WcStatus::REM_ABORT_ERR),
        (0x03, WcStatus::GENERAL_ERR),
        (0xff, WcStatus::GENERAL_ERR),
    ];
    for (s, want) in table {
        assert_eq!(status_of(s), want, "syndrome {s:#x}");
    }
}

// -- request data -------------------------------------------------------------

#[test]
fn ucontext_request_bytes() {
    let r = ucontext_request_for(4096);
    let want = bytes_at(32, &[(0, &[16]), (4, &[4]), (16, &[1]), (24, &[3])]);
    assert_bytes(r.as_bytes(), &want);
    // 64 KiB pages: 16 UARs per page -> 32 registers, 20 low-latency.
    let r = ucontext_request_for(65536);
    assert_bytes(r.as_bytes(), &bytes_at(32, &[(0, &[32]), (4, &[20]), (16, &[1]), (24, &[3])]));
    assert_eq!(UCONTEXT_RESP_LEN, 72);
}

#[test]
fn ucontext_resp_parsing_and_old_kernels() {
    let mut b = vec![0u8; 72];
    b[4..8].copy_from_slice(&512u32.to_le_bytes()); // bf_reg_size
    b[12..16].copy_from_slice(&64u32.to_le_bytes()); // cache_line_size
    b[16..18].copy_from_slice(&1024u16.to_le_bytes()); // max_sq_desc_sz
    b[44] = 1; // cqe_version
    b[45] = 2; // cmds_supp_uhw: CREATE_AH
    b[60..64].copy_from_slice(&1u32.to_le_bytes());
    let r = parse_ucontext_resp(&b);
    let d = DeviceInfo::from_resp(&r, 4096).unwrap();
    assert_eq!(
        (d.bf_reg_size, d.cache_line_size, d.max_sq_desc_sz, d.cqe_version, d.cmds_supp_uhw),
        (512, 64, 1024, 1, 2)
    );
    assert_eq!(d.tot_bfregs, 0, "dynamic UARs");
    // An old kernel: 48 bytes, no UAR geometry -> one UAR per page.
    let r = parse_ucontext_resp(&b[..48]);
    assert_eq!(DeviceInfo::from_resp(&r, 4096).unwrap().num_uars_per_page, 1);
    let mut bad = r;
    bad.cqe_version = 2;
    assert!(DeviceInfo::from_resp(&bad, 4096).is_err());
    // BlueFlame registers: 0 (none) or a power of two from 128 to 2048, so
    // each half takes whole 64-byte blocks (the `Mmio` window contract).
    for (size, ok) in [(0, true), (64, false), (100, false), (128, true), (512, true), (2048, true), (4096, false)] {
        let mut r = r;
        r.bf_reg_size = size;
        let got = DeviceInfo::from_resp(&r, 4096);
        assert_eq!(got.is_ok(), ok, "{size}");
        if let Err(e) = got {
            assert_eq!(e.errno(), Some(crate::Errno::EPROTO));
        }
    }
}

#[test]
fn create_cq_request_and_buffer() {
    let (_hca, ctx) = ctx(512);
    let (p, u) = ctx.cq_prepare(7).unwrap();
    assert_eq!((p.ncqe(), p.core_cqe()), (8, 7));
    let (page_id, _) = (ctx.uars().cq_page().1, ());
    let want = bytes_at(
        32,
        &[
            (0, &u.buf_addr.to_le_bytes()),
            (8, &u.db_addr.to_le_bytes()),
            (16, &[0x40, 0, 0, 0]),
            (22, &[0x02, 0x00]),
            (24, &(page_id as u16).to_le_bytes()),
        ],
    );
    assert_bytes(u.as_bytes(), &want);
    assert_eq!(u.buf_addr % 4096, 0);
    let buf = peek(u.buf_addr, 8 * 64);
    for (i, e) in buf.chunks(64).enumerate() {
        assert_bytes(e, &bytes_at(64, &[(63, &[0xf0])]));
        let _ = i;
    }
    assert_bytes(&peek(u.db_addr, 8), &[0; 8]);
    assert!(p.uar_index_attr().is_none());
    // Entry counts round up to a power of two, +1 for the kernel's rule.
    assert_eq!(ctx.cq_prepare(8).unwrap().0.ncqe(), 16);
    assert!(ctx.cq_prepare(0).is_err());
}

#[test]
fn create_qp_request_bytes_and_sizes() {
    let (_hca, ctx) = ctx(512);
    let caps = QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let args = QpPrepareArgs { qp_type: QpType::Rc, caps, srq: None, sq_sig_all: false };
    let (p, u) = ctx.qp_prepare(&args).unwrap();
    // RC: overhead 48 + 16 -> one 64-byte WQEBB per request; 64 requests.
    let s = *p.sizes();
    assert_eq!((s.sq_wqe_cnt, s.sq_wqe_size, s.sq_max_post, s.max_inline), (64, 64, 64, 12));
    // RQ: 16-byte stride, 64 entries, SQ after 1024 bytes.
    assert_eq!((s.rq_wqe_cnt, s.rq_wqe_shift, s.rq_max_post, s.sq_offset, s.buf_len), (64, 4, 64, 1024, 1024 + 4096));
    let want = bytes_at(
        56,
        &[
            (0, &u.buf_addr.to_le_bytes()),
            (8, &u.db_addr.to_le_bytes()),
            (16, &[0x40, 0, 0, 0]),
            (20, &[0x40, 0, 0, 0]),
            (24, &[0x04, 0, 0, 0]),
            (28, &[0x00, 0x04, 0, 0]), // MLX5_QP_FLAG_UAR_PAGE_INDEX
            (32, &u.uidx.to_le_bytes()),
            (36, &u.bfreg_index.to_le_bytes()),
        ],
    );
    assert_bytes(u.as_bytes(), &want);
    assert!(u.uidx < 0x00ff_ffff);
    assert_eq!(p.core_caps().max_inline_data, 12);
    // The register is a dedicated BlueFlame register of a BF page.
    let reg = p.reg.as_ref().unwrap().info();
    assert_eq!((reg.uar_index, reg.offset, reg.bf_half), (u.bfreg_index, 0x800, 256));
    // A second QP gets the other register of the same UAR.
    let (p2, u2) = ctx.qp_prepare(&args).unwrap();
    let reg2 = p2.reg.as_ref().unwrap().info();
    assert_eq!((u2.bfreg_index, reg2.offset), (u.bfreg_index, 0x800 + 512));
    assert_ne!(u2.uidx, u.uidx);
}

#[test]
fn qp_sizes_ud_uc_srq_inline() {
    let (_hca, ctx) = ctx(512);
    let d = ctx.device();
    // UD: 64 + 2 SGEs -> 96 -> 128 bytes (2 WQEBBs); inline = 128 - 64 - 4.
    let c = QpCaps { max_send_wr: 10, max_recv_wr: 10, max_send_sge: 2, max_recv_sge: 3, max_inline_data: 0 };
    let s = qp::qp_sizes(d, QpType::Ud, &c, false).unwrap();
    assert_eq!((s.sq_wqe_size, s.max_inline, s.sq_wqe_cnt, s.sq_max_post), (128, 60, 32, 16));
    assert_eq!((s.rq_wqe_shift, s.rq_wqe_cnt, s.max_recv_sge), (6, 16, 4));
    // UC with 100 inline bytes: 32 + align(104, 16) = 144 -> 192.
    let c = QpCaps { max_send_wr: 1, max_inline_data: 100, max_send_sge: 1, ..Default::default() };
    let s = qp::qp_sizes(d, QpType::Uc, &c, false).unwrap();
    assert_eq!((s.sq_wqe_size, s.max_inline, s.sq_wqe_cnt, s.rq_wqe_cnt), (192, 156, 4, 0));
    // With an SRQ there is no receive queue, the SQ starts at 0.
    let c = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let s = qp::qp_sizes(d, QpType::Rc, &c, true).unwrap();
    assert_eq!((s.rq_wqe_cnt, s.sq_offset), (0, 0));
    // Too many SGEs for a 1024-byte WQE.
    let c = QpCaps { max_send_wr: 1, max_send_sge: 62, ..Default::default() };
    assert!(qp::qp_sizes(d, QpType::Rc, &c, false).is_err());
}

#[test]
fn create_srq_request_bytes() {
    let (_hca, ctx) = ctx(512);
    let (p, u) = ctx.srq_prepare(3, 1).unwrap();
    assert_eq!((p.sizes().nwqes, p.sizes().wqe_shift, p.core_max_wr(), p.core_max_sge()), (4, 5, 3, 1));
    let want =
        bytes_at(32, &[(0, &u.buf_addr.to_le_bytes()), (8, &u.db_addr.to_le_bytes()), (24, &u.uidx.to_le_bytes())]);
    assert_bytes(u.as_bytes(), &want);
    // The free list: 0 -> 1 -> 2 -> 3.
    let buf = peek(u.buf_addr, 4 * 32);
    for i in 0..3 {
        assert_bytes(&buf[i * 32..i * 32 + 4], &[0, 0, 0, i as u8 + 1]);
    }
}

#[test]
fn uar_alloc_ioctl_bytes() {
    let mut out = UarAllocOut::default();
    let p_off = &out.mmap_offset as *const u64 as u64;
    let p_len = &out.mmap_length as *const u32 as u64;
    let p_id = &out.page_id as *const u32 as u64;
    let (mut cmd, _) = uar_alloc_cmd(UarKind::Nc, &mut out);
    let b = cmd.finish(1).unwrap().to_vec();
    let want = bytes_at(
        104,
        &[
            (0, &[104, 0, 0x08, 0x10, 0x00, 0x10, 5, 0]), // length, MLX5_IB_OBJECT_UAR, UAR_OBJ_ALLOC, 5 attrs
            (16, &[1, 0, 0, 0]),                          // driver_id RDMA_DRIVER_MLX5
            (24, &[0x00, 0x10, 0, 0, 1, 0, 0, 0]),        // HANDLE: idr out, len 0, mandatory
            (40, &[0x01, 0x10, 8, 0, 1, 0, 0, 0]),        // TYPE: const in, len 8
            (48, &[1, 0, 0, 0, 0, 0, 0, 0]),              // NC = 1
            (56, &[0x02, 0x10, 8, 0, 1, 0, 0, 0]),        // MMAP_OFFSET: u64 out
            (64, &p_off.to_le_bytes()),
            (72, &[0x03, 0x10, 4, 0, 1, 0, 0, 0]), // MMAP_LENGTH: u32 out
            (80, &p_len.to_le_bytes()),
            (88, &[0x04, 0x10, 4, 0, 1, 0, 0, 0]), // PAGE_ID: u32 out
            (96, &p_id.to_le_bytes()),
        ],
    );
    assert_bytes(&b, &want);
}

#[test]
fn mmap_offsets() {
    assert_eq!(mmap_offset(0, 3, 4096), Some(0x3000));
    assert_eq!(mmap_offset(3, 3, 4096), Some(0x30_3000));
    assert_eq!(mmap_offset(6, 300, 4096), Some(0x1062_c000));
    assert_eq!(mmap_offset(0, 300, 4096), None, "only ALLOC_WC has extended indexes");
    assert_eq!(mmap_offset(3, 1, 65536), Some(0x301 * 65536));
}

// -- CQ arming ----------------------------------------------------------------

#[test]
fn arm_doorbell_values() {
    let (w, b) = arm_doorbell(1, false, 0x10, 0x45);
    assert_eq!(w.to_be_bytes(), [0x10, 0x00, 0x00, 0x10]);
    assert_eq!(b.to_ne_bytes(), [0x10, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x45]);
    let (_, b) = arm_doorbell(2, true, 0xab_cdef, 0x1_2345);
    assert_eq!(b.to_ne_bytes(), [0x21, 0xab, 0xcd, 0xef, 0x00, 0x01, 0x23, 0x45]);
}

#[test]
fn cq_arm_writes_dbrec_then_uar() {
    let (_hca, ctx) = ctx(512);
    let (p, _) = ctx.cq_prepare(15).unwrap();
    let rec = Recorder::default();
    let r2 = rec.clone();
    let resp = [0x45, 0, 0, 0, 0, 0, 0, 0]; // cqn 0x45
    let mut cq = ctx.cq_finish_with(p, &resp, 15, |_, _| r2).map_err(|e| e.error).unwrap();
    cq.on_event();
    cq.arm(false);
    assert_bytes(&peek(cq.db_addr() + 4, 4), &[0x10, 0x00, 0x00, 0x00]);
    assert_eq!(
        rec.take(),
        vec![
            MmioOp::WcStart,
            MmioOp::Write64 { offset: 0x20, bytes: [0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x45] },
            MmioOp::Flush
        ]
    );
    cq.on_event();
    cq.arm(true);
    assert_bytes(&peek(cq.db_addr() + 4, 4), &[0x21, 0x00, 0x00, 0x00]);
    assert_eq!(rec.take()[1], MmioOp::Write64 { offset: 0x20, bytes: [0x21, 0, 0, 0, 0, 0, 0, 0x45] });
    // A kernel answer with a different entry count is refused, the buffer handed back.
    let (p, _) = ctx.cq_prepare(15).unwrap();
    let e = ctx.cq_finish_with(p, &resp, 31, |_, _| Recorder::default()).unwrap_err();
    assert_eq!(e.pending.ncqe(), 16);
}

// -- full WQEs, one per opcode -------------------------------------------------

/// providers.md §B.11: RC SEND, 1 SGE, QPN 0x123, cur_post 5, signaled,
/// through a doorbell-only register.
#[test]
fn wqe_send_and_8_byte_doorbell() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, rec) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    advance(&mut qp, 5);
    rec.take();
    post(&mut qp, &[send(7, SendFlags::SIGNALED, &[SEND_SGE])]);
    let ctrl = [0x00, 0x00, 0x05, 0x0a, 0x00, 0x01, 0x23, 0x02, 0x00, 0x00, 0x00, 0x08, 0, 0, 0, 0];
    assert_bytes(&sq_bytes(&qp, 5, 32), &bytes_at(32, &[(0, &ctrl), (16, &DATA_SEG)]));
    assert_eq!(
        rec.take(),
        vec![
            MmioOp::WcStart,
            MmioOp::Write64 { offset: 0, bytes: [0x00, 0x00, 0x05, 0x0a, 0x00, 0x01, 0x23, 0x02] },
            MmioOp::Flush
        ]
    );
    assert_bytes(&dbrec(&qp, 1), &[0, 0, 0, 6]);
    assert_eq!(qp.shared().sq.wrid(5).load(Ordering::Relaxed), 7);
}

#[test]
fn wqe_send_with_imm_solicited() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    let sge = [Sge::new(0x1000, 0x20, 0x11)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::SendWithImm(0x0102_0304),
        flags: SendFlags::SIGNALED | SendFlags::SOLICITED,
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        32,
        &[
            (0, &[0x00, 0x00, 0x00, 0x0b, 0x00, 0x01, 0x23, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x02, 0x03, 0x04]),
            (16, &[0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x11, 0, 0, 0, 0, 0, 0, 0x10, 0x00]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 0, 32), &want);
}

/// providers.md §B.11: RDMA WRITE of 5 inline bytes at cur_post 7 — with a
/// BlueFlame register: the copy is the WQE's block, to the second half.
#[test]
fn wqe_rdma_write_inline_and_blueflame() {
    let (_hca, ctx) = ctx(512);
    let (mut qp, rec) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    advance(&mut qp, 7);
    rec.take();
    let hello = *b"hello";
    let sge = [Sge::new(hello.as_ptr() as u64, 5, 0)];
    let wr = SendWr {
        wr_id: 9,
        op: SendOp::RdmaWrite(RemoteAddr { addr: 0xdead_beef000, rkey: 0x4242 }),
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        64,
        &[
            (0, &[0x00, 0x00, 0x07, 0x08, 0x00, 0x01, 0x23, 0x03, 0x00, 0x00, 0x00, 0x08, 0, 0, 0, 0]),
            (16, &[0x00, 0x00, 0x0d, 0xea, 0xdb, 0xee, 0xf0, 0x00, 0x00, 0x00, 0x42, 0x42, 0, 0, 0, 0]),
            (32, &[0x80, 0x00, 0x00, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0, 0, 0, 0, 0, 0, 0]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 7, 64), &want);
    // 7 earlier posts flipped the half 7 times: this copy goes to +256.
    let ops = rec.take();
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[0], MmioOp::WcStart);
    match &ops[1] {
        MmioOp::Bf { offset, bytes } => {
            assert_eq!(*offset, 256);
            assert_bytes(bytes, &want);
        }
        o => panic!("expected a BlueFlame copy, got {o:?}"),
    }
    assert_eq!(ops[2], MmioOp::Flush);
    assert_eq!(qp.sq.bf_offset(), 0);
}

#[test]
fn wqe_rdma_write_with_imm_fenced_unsignaled() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    let sge = [Sge::new(0x2000, 0x10, 0x12)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::RdmaWriteWithImm(RemoteAddr { addr: 0x7f00_dead_0000, rkey: 0x99 }, 0xcafe_babe),
        flags: SendFlags::FENCE,
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        48,
        &[
            (0, &[0x00, 0x00, 0x00, 0x09, 0x00, 0x01, 0x23, 0x03, 0x00, 0x00, 0x00, 0x80, 0xca, 0xfe, 0xba, 0xbe]),
            (16, &[0x00, 0x00, 0x7f, 0x00, 0xde, 0xad, 0x00, 0x00, 0x00, 0x00, 0x00, 0x99, 0, 0, 0, 0]),
            (32, &[0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x12, 0, 0, 0, 0, 0, 0, 0x20, 0x00]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 0, 48), &want);
}

#[test]
fn wqe_rdma_read_two_sges() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    let sgl = [Sge::new(0x1000, 8, 1), Sge::new(0x2000, 8, 2)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::RdmaRead(RemoteAddr { addr: 0x5000, rkey: 0x77 }),
        flags: SendFlags::SIGNALED,
        sgl: &sgl,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        64,
        &[
            (0, &[0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x23, 0x04, 0x00, 0x00, 0x00, 0x08]),
            (16, &[0, 0, 0, 0, 0, 0, 0x50, 0x00, 0x00, 0x00, 0x00, 0x77]),
            (32, &[0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x10, 0x00]),
            (48, &[0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0x20, 0x00]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 0, 64), &want);
}

#[test]
fn wqe_cmp_and_swap() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    let sge = [Sge::new(0x3000, 8, 0x66)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::AtomicCmpAndSwp {
            remote: RemoteAddr { addr: 0x8000, rkey: 0x55 },
            compare: 0x1111_2222_3333_4444,
            swap: 0x5555_6666_7777_8888,
        },
        flags: SendFlags::SIGNALED,
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        64,
        &[
            (0, &[0x00, 0x00, 0x00, 0x11, 0x00, 0x01, 0x23, 0x04, 0x00, 0x00, 0x00, 0x08]),
            (16, &[0, 0, 0, 0, 0, 0, 0x80, 0x00, 0x00, 0x00, 0x00, 0x55]),
            (32, &[0x55, 0x55, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44]),
            (48, &[0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x66, 0, 0, 0, 0, 0, 0, 0x30, 0x00]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 0, 64), &want);
}

#[test]
fn wqe_fetch_and_add_result_sge_is_8_bytes() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    // A 16-byte local SGE: the data segment still says 8.
    let sge = [Sge::new(0x3000, 16, 0x66)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::AtomicFetchAndAdd { remote: RemoteAddr { addr: 0x8008, rkey: 0x55 }, add: 0x10 },
        flags: SendFlags::empty(),
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let want = bytes_at(
        64,
        &[
            (0, &[0x00, 0x00, 0x00, 0x12, 0x00, 0x01, 0x23, 0x04, 0x00, 0x00, 0x00, 0x00]),
            (16, &[0, 0, 0, 0, 0, 0, 0x80, 0x08, 0x00, 0x00, 0x00, 0x55]),
            (32, &[0, 0, 0, 0, 0, 0, 0, 0x10]),
            (48, &[0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x66, 0, 0, 0, 0, 0, 0, 0x30, 0x00]),
        ],
    );
    assert_bytes(&sq_bytes(&qp, 0, 64), &want);
}

fn golden_ah(ctx: &Context) -> Ah {
    let dgid: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 2];
    let attr = AhAttr {
        is_eth: true,
        roce_v2: true,
        sl: 3,
        grh: Some(Grh { dgid, flow_label: 0x12345, sgid_index: 3, hop_limit: 64, traffic_class: 0 }),
        ..Default::default()
    };
    let mut resp = [0u8; AH_RESP_LEN];
    resp[4..10].copy_from_slice(&[0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc]);
    ctx.ah_create(&attr, &resp).unwrap()
}

fn av_bytes() -> Vec<u8> {
    bytes_at(
        48,
        &[
            (0, &[0x11, 0x11, 0x11, 0x11]),
            (8, &[0x80, 0x05, 0x43, 0x21]),
            (12, &[0x06, 0x00, 0xe3, 0x41]),
            (20, &[0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc, 0x00, 0x40]),
            (28, &[0x00, 0x31, 0x23, 0x45]),
            (42, &[0xff, 0xff, 192, 168, 77, 2]),
        ],
    )
}

/// providers.md §B.11 UD vector: Q_Key 0x11111111, remote QPN 0x54321,
/// RoCE v2, sgid index 3, flow label 0x12345, SL 3.
#[test]
fn wqe_ud_send_datagram_segment() {
    let (_hca, ctx) = ctx(0);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (mut qp, _) = golden_qp(&ctx, QpType::Ud, caps, false);
    let ah = golden_ah(&ctx);
    let sge = [Sge::new(0x4000, 0x40, 0x12)];
    let dest = UdDest::new(ah.ah_num(), 0x5_4321, 0x1111_1111);
    let wr = SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: Some(dest) };
    post(&mut qp, &[wr]);
    let got = sq_bytes(&qp, 0, 128);
    assert_bytes(&got[..16], &[0x00, 0x00, 0x00, 0x0a, 0x00, 0x01, 0x23, 0x05, 0x00, 0x00, 0x00, 0x08, 0, 0, 0, 0]);
    assert_bytes(&got[16..64], &av_bytes());
    assert_bytes(&got[64..80], &[0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x12, 0, 0, 0, 0, 0, 0, 0x40, 0x00]);
    assert_eq!(qp.sq.cur_post(), 2, "ds 5 takes two WQEBBs");
    // A gone AH is a bad destination, and nothing is written.
    let num = ah.ah_num();
    drop(ah);
    let dest = UdDest::new(num, 1, 1);
    let wr = SendWr { wr_id: 2, op: SendOp::Send, flags: SendFlags::empty(), sgl: &sge, ud: Some(dest) };
    // SAFETY: not INLINE.
    let e = unsafe { qp.sq.post(&[wr]) }.unwrap_err();
    assert_eq!(e.kind, crate::wr::PostErrorKind::BadDestination);
    assert_eq!(qp.sq.cur_post(), 2);
}

/// A UD WQE starting in the last WQEBB continues at block 0; the BlueFlame
/// copy wraps the same way.
#[test]
fn wqe_wraps_mid_wqe_ud_and_blueflame() {
    let (_hca, ctx) = ctx(512);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (mut qp, rec) = golden_qp(&ctx, QpType::Ud, caps, false);
    assert_eq!(qp.shared().sizes().sq_wqe_cnt, 8);
    let ah = golden_ah(&ctx);
    let dest = UdDest::new(ah.ah_num(), 0x5_4321, 0x1111_1111);
    let sge = [Sge::new(0x4000, 0x40, 0x12)];
    // One SGE-less UD send (one WQEBB), three with data (two each): cur_post 7.
    post(&mut qp, &[SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::empty(), sgl: &[], ud: Some(dest) }]);
    for i in 0..3 {
        post(
            &mut qp,
            &[SendWr { wr_id: 2 + i, op: SendOp::Send, flags: SendFlags::empty(), sgl: &sge, ud: Some(dest) }],
        );
    }
    assert_eq!(qp.sq.cur_post(), 7);
    let head = qp.sq.head();
    qp.shared().sq.tail().store(head, Ordering::Release);
    rec.take();
    let sge2 = [Sge::new(0x9000, 0x24, 0x34)];
    post(&mut qp, &[SendWr { wr_id: 9, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge2, ud: Some(dest) }]);
    let last = sq_bytes(&qp, 7, 64);
    assert_bytes(&last[..16], &[0x00, 0x00, 0x07, 0x0a, 0x00, 0x01, 0x23, 0x05, 0x00, 0x00, 0x00, 0x08, 0, 0, 0, 0]);
    assert_bytes(&last[16..64], &av_bytes());
    let first = sq_bytes(&qp, 0, 64);
    assert_bytes(&first[..16], &[0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x34, 0, 0, 0, 0, 0, 0, 0x90, 0x00]);
    assert_eq!(qp.sq.cur_post(), 9);
    assert_bytes(&dbrec(&qp, 1), &[0, 0, 0, 9]);
    let ops = rec.take();
    assert_eq!(ops.len(), 4, "wc_start, two BlueFlame blocks, flush: {ops:?}");
    assert_eq!(ops[1], MmioOp::Bf { offset: 0, bytes: last.clone().try_into().unwrap() });
    assert_eq!(ops[2], MmioOp::Bf { offset: 64, bytes: first.clone().try_into().unwrap() });
}

/// An inline payload split across the end of the ring.
#[test]
fn inline_payload_split_across_the_wrap() {
    let (_hca, ctx) = ctx(0);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 60 };
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, caps, false);
    // RC: 48 + align(64, 16) = 112 -> 128-byte WQEs, 4 of them: 8 WQEBBs.
    assert_eq!(qp.shared().sizes().sq_wqe_cnt, 8);
    advance(&mut qp, 7);
    let payload: [u8; 40] = core::array::from_fn(|i| 0xa0 + i as u8);
    let sge = [Sge::new(payload.as_ptr() as u64, 40, 0)];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::RdmaWrite(RemoteAddr { addr: 0x10, rkey: 0x20 }),
        flags: SendFlags::INLINE,
        sgl: &sge,
        ud: None,
    };
    post(&mut qp, &[wr]);
    let last = sq_bytes(&qp, 7, 64);
    // ds = 1 + 1 + ceil(44 / 16) = 5.
    assert_bytes(&last[..8], &[0x00, 0x00, 0x07, 0x08, 0x00, 0x01, 0x23, 0x05]);
    assert_bytes(&last[32..36], &[0x80, 0x00, 0x00, 0x28]);
    assert_bytes(&last[36..64], &payload[..28]);
    let first = sq_bytes(&qp, 0, 16);
    assert_bytes(&first, &bytes_at(16, &[(0, &payload[28..])]));
    assert_eq!(qp.sq.cur_post(), 9);
}

#[test]
fn sq_sig_all_sets_cq_update() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), true);
    post(&mut qp, &[send(1, SendFlags::empty(), &[SEND_SGE])]);
    assert_eq!(sq_bytes(&qp, 0, 16)[11], 0x08);
}

// -- receive WQEs ----------------------------------------------------------------

#[test]
fn recv_wqe_skips_empty_sges_and_terminates() {
    let (_hca, ctx) = ctx(0);
    let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    assert_eq!(qp.shared().sizes().rq_wqe_shift, 6);
    let sgl = [Sge::new(0x1000, 0x100, 0x21), Sge::new(0x1800, 0, 0x99), Sge::new(0x2000, 0x80, 0x22)];
    qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 5, sgl: &sgl }]).unwrap();
    let want = bytes_at(
        64,
        &[
            (0, &[0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x21, 0, 0, 0, 0, 0, 0, 0x10, 0x00]),
            (16, &[0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x22, 0, 0, 0, 0, 0, 0, 0x20, 0x00]),
            (32, &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00]),
        ],
    );
    assert_bytes(&peek(qp.shared().buf_addr(), 64), &want);
    assert_bytes(&dbrec(&qp, 0), &[0, 0, 0, 1]);
    assert_bytes(&dbrec(&qp, 1), &[0, 0, 0, 0]);
}

#[test]
fn srq_wqe_and_free_list() {
    let (hca, ctx) = ctx(0);
    let mut srq = hca.new_srq(&ctx, 3, 1);
    let s = srq.shared().clone();
    let sge = [Sge::new(0x1000, 0x40, 0x31)];
    srq.post(&[RecvWr { wr_id: 1, sgl: &sge }]).unwrap();
    let want = bytes_at(
        32,
        &[(2, &[0x00, 0x01]), (16, &[0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x31, 0, 0, 0, 0, 0, 0, 0x10, 0x00])],
    );
    assert_bytes(&peek(s.buf_addr(), 32), &want);
    assert_bytes(&peek(s.db_addr(), 4), &[0, 0, 0, 1]);
    srq.post(&[RecvWr { wr_id: 2, sgl: &sge }, RecvWr { wr_id: 3, sgl: &sge }]).unwrap();
    // WQE 3 is the free-list tail: full.
    let e = srq.post(&[RecvWr { wr_id: 4, sgl: &sge }]).unwrap_err();
    assert_eq!(e.kind, crate::wr::PostErrorKind::QueueFull);
    assert_bytes(&peek(s.db_addr(), 4), &[0, 0, 0, 3]);
    // Completing WQE 1 links it after 3; the next post uses 3, then 1.
    s.free(1);
    assert_bytes(&peek(s.buf_addr() + 3 * 32, 4), &[0, 0, 0, 1]);
    srq.post(&[RecvWr { wr_id: 5, sgl: &sge }]).unwrap();
    assert_eq!(s.wrid(3), 5);
    assert!(srq.post(&[RecvWr { wr_id: 6, sgl: &sge }]).is_err());
}

/// The SRQ doorbell counter is 16 bits, as the RQ's (audit L2): after
/// 65,536 posts the record's upper half stays 0.
#[test]
fn srq_doorbell_counter_is_masked_to_16_bits() {
    let (hca, ctx) = ctx(0);
    let mut srq = hca.new_srq(&ctx, 3, 1);
    let s = srq.shared().clone();
    let sge = [Sge::new(0x1000, 0x40, 0x31)];
    for n in 1..=0x1_0003u32 {
        srq.post(&[RecvWr { wr_id: u64::from(n), sgl: &sge }]).unwrap();
        // The WQE just posted is the list head's predecessor; completing it
        // (whichever it was: the one whose wr_id is `n`) links it back.
        let i = (0..4).find(|&i| s.wrid(i) == u64::from(n)).unwrap();
        s.free(i);
        if n == 0xffff || n == 0x1_0003 {
            assert_bytes(&peek(s.db_addr(), 4), &(n & 0xffff).to_be_bytes());
        }
    }
    hca.assert_clean();
}

/// A zero-length SGE is skipped in an SRQ WQE, as in the RQ's (audit L3):
/// the HCA is believed to read byte count 0 as 2 GiB.
#[test]
fn srq_skips_zero_length_sges() {
    let (hca, ctx) = ctx(0);
    let mut srq = hca.new_srq(&ctx, 3, 2);
    let s = srq.shared().clone();
    let sgl = [Sge::new(0x2000, 0, 0x77), Sge::new(0x1000, 0x40, 0x31)];
    srq.post(&[RecvWr { wr_id: 1, sgl: &sgl }]).unwrap();
    let stride = 1usize << s.sizes().wqe_shift;
    let data = [0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x31, 0, 0, 0, 0, 0, 0, 0x10, 0x00];
    // Next segment (next index 1), the 0x40-byte SGE, then the terminator
    // (byte count 0, lkey MLX5_INVALID_LKEY 0x100).
    let term = [0, 0, 0, 0, 0, 0, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut want = bytes_at(stride, &[(2, &[0x00, 0x01]), (16, &data), (32, &term)]);
    want.truncate(48);
    assert_bytes(&peek(s.buf_addr(), 48), &want);
}

/// Static UARs with 1024- or 2048-byte BlueFlame registers: a register
/// of the kernel's 4-per-UAR numbering that lies past its UAR's end is
/// refused with `EPROTO` at create-QP (audit L8), instead of the register
/// window's assert panicking in `qp_finish`.
#[test]
fn static_uar_register_outside_its_uar_is_eproto() {
    for (bf_reg_size, fits) in [(512, true), (1024, true), (2048, false)] {
        let hca = Hca::new(ModelCfg { bf_reg_size, dynamic_uar: false, ..Default::default() });
        let ctx = hca.context();
        let cq = hca.new_cq(&ctx, 15);
        let args = QpPrepareArgs { qp_type: QpType::Rc, caps: rc_caps(), srq: None, sq_sig_all: false };
        let (p, u) = ctx.qp_prepare(&args).unwrap();
        let (qpn, resp) = hca.create_qp(&u, QpType::Rc, &p.core_caps(), cq.cqn(), cq.cqn(), None).unwrap();
        // The model hands out register 29 first (UAR 7, register 1).
        assert_eq!(resp[..].get(0..4).map(|b| u32::from_ne_bytes(b.try_into().unwrap())), Some(29));
        match ctx.qp_finish_with(p, &resp, qpn, |r, _| hca.mmio_for_qp(r)) {
            Ok(qp) => assert!(fits, "{bf_reg_size}: register at {:#x}", qp.shared().reg().unwrap().offset),
            Err(e) => {
                assert!(!fits, "{bf_reg_size}: {}", e.error);
                assert_eq!(e.error.errno(), Some(crate::Errno::EPROTO));
            }
        }
    }
}

// -- CQE parsing, one per opcode ----------------------------------------------------

struct CqFix {
    ctx: Context,
    cq: Cq<Recorder>,
    qp: Qp<Recorder>,
    slot: u32,
}

impl CqFix {
    fn new() -> CqFix {
        let (_hca, ctx) = ctx(0);
        let (p, _) = ctx.cq_prepare(3).unwrap();
        let cq = ctx
            .cq_finish_with(p, &[0x45, 0, 0, 0, 0, 0, 0, 0], 3, |_, _| Recorder::default())
            .map_err(|e| e.error)
            .unwrap();
        let (mut qp, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
        // wr_ids: send slots 0.. = 100.., receive slots 0.. = 200..
        for i in 0..4 {
            post(&mut qp, &[send(100 + i, SendFlags::SIGNALED, &[SEND_SGE])]);
            qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 200 + i, sgl: &[SEND_SGE] }]).unwrap();
        }
        CqFix { ctx, cq, qp, slot: 0 }
    }

    /// Writes a CQE (hand bytes; byte 63 gets this pass's owner bit) and polls one.
    fn poll(&mut self, mut raw: Vec<u8>) -> Option<Wc> {
        let n = self.cq.ncqe();
        raw[63] |= u8::from(self.slot & n != 0);
        poke(self.cq.buf_addr() + u64::from(self.slot & (n - 1)) * 64, &raw);
        self.slot += 1;
        let mut out = [Wc::default(); 2];
        match self.cq.poll(&mut out) {
            0 => None,
            1 => Some(out[0]),
            k => panic!("{k} completions from one CQE"),
        }
    }

    fn uidx(&self) -> [u8; 4] {
        self.qp.shared().uidx().to_be_bytes()
    }

    /// As [`poll`](Self::poll), through `poll` with a batch of 2 (`How::Batch`),
    /// a one-entry slice or `poll_one`.
    fn poll_how(&mut self, mut raw: Vec<u8>, how: How) -> Option<Wc> {
        if how == How::Batch {
            return self.poll(raw);
        }
        let n = self.cq.ncqe();
        raw[63] |= u8::from(self.slot & n != 0);
        poke(self.cq.buf_addr() + u64::from(self.slot & (n - 1)) * 64, &raw);
        self.slot += 1;
        let mut one = [Wc::default(); 1];
        match how {
            How::One => self.cq.poll_one(&mut one[0]).then_some(one[0]),
            How::Uninit => {
                let mut w = core::mem::MaybeUninit::<Wc>::uninit();
                self.cq.poll_one_uninit(&mut w).copied()
            }
            _ => (self.cq.poll(&mut one) == 1).then_some(one[0]),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Batch,
    Slice1,
    One,
    /// `poll_one_uninit`.
    Uninit,
}

fn req_cqe(uidx: [u8; 4], send_op: u8, wqe_counter: u16, byte_cnt: u32) -> Vec<u8> {
    bytes_at(
        64,
        &[
            (32, &uidx),
            (44, &byte_cnt.to_be_bytes()),
            (56, &[send_op, 0x00, 0x01, 0x23]),
            (60, &wqe_counter.to_be_bytes()),
            (63, &[0x00]),
        ],
    )
}

#[test]
fn cqe_req_opcodes() {
    let mut f = CqFix::new();
    let u = f.uidx();
    let cases = [
        (0x0a, WcOpcode::SEND, WcFlags::empty(), 0),
        (0x0b, WcOpcode::SEND, WcFlags::WITH_IMM, 0),
        (0x08, WcOpcode::RDMA_WRITE, WcFlags::empty(), 0),
        (0x09, WcOpcode::RDMA_WRITE, WcFlags::WITH_IMM, 0),
        (0x10, WcOpcode::RDMA_READ, WcFlags::empty(), 0x200),
        (0x11, WcOpcode::COMP_SWAP, WcFlags::empty(), 8),
        (0x12, WcOpcode::FETCH_ADD, WcFlags::empty(), 8),
        (0x01, WcOpcode::SEND, WcFlags::empty(), 0),
    ];
    for (i, (op, opcode, flags, len)) in cases.into_iter().enumerate() {
        let slot = (i % 4) as u16;
        let wc = f.poll(req_cqe(u, op, slot, 0x200)).expect("a completion");
        let want =
            Wc { wr_id: 100 + u64::from(slot), opcode, byte_len: len, qp_num: 0x123, wc_flags: flags, ..Wc::default() };
        assert_eq!(wc, want, "send opcode {op:#x}");
    }
    // The CQ has 4 entries: two passes went by, owner bits flipped each time.
    assert_eq!(f.cq.cons_index(), 8);
    assert_bytes(&peek(f.cq.db_addr(), 4), &[0, 0, 0, 8]);
    // Retiring slot 3 means 4 requests retired in all (wqe_head 3 + 1).
    assert_eq!(f.qp.shared().sq.tail().load(Ordering::Relaxed), 4);
}

/// A requester CQE with any of `op_own`'s bits 1..=3 set (`cqe_format`,
/// solicited; never asked for by this provider) fails the fast paths'
/// whole-byte compare and is decoded by the general path to the same
/// completion, through every way of polling.
#[test]
fn cqe_req_with_format_or_se_bits_decodes_the_same() {
    let mut f = CqFix::new();
    let u = f.uidx();
    let mut i = 0u16;
    for how in [How::Batch, How::Slice1, How::One, How::Uninit] {
        for bits in [0x00, 0x02, 0x04, 0x08, 0x0e] {
            for (op, opcode, len) in [(0x0a, WcOpcode::SEND, 0), (0x10, WcOpcode::RDMA_READ, 0x200)] {
                let slot = i % 4;
                let mut raw = req_cqe(u, op, slot, 0x200);
                raw[63] |= bits;
                let wc = f.poll_how(raw, how).expect("a completion");
                let want = Wc { wr_id: 100 + u64::from(slot), opcode, byte_len: len, qp_num: 0x123, ..Wc::default() };
                assert_eq!(wc, want, "{how:?}, op_own bits {bits:#x}, send opcode {op:#x}");
                i += 1;
            }
        }
    }
    assert_eq!(f.cq.cons_index(), u32::from(i));
    assert_eq!(f.cq.skipped(), 0);
}

/// `poll_one_uninit` takes what a batch `poll` takes (a requester CQE
/// through the fast path, a responder one and an error through the
/// general path, each into memory that was never initialised), and
/// leaves `w` untouched when nothing is ready.
#[test]
fn poll_one_uninit_matches_poll_and_leaves_an_empty_poll_untouched() {
    let (mut a, mut b) = (CqFix::new(), CqFix::new());
    let u = a.uidx();
    let resp = |ctr: u16| {
        bytes_at(
            64,
            &[
                (32, &u),
                (36, &[0xde, 0xad, 0xbe, 0xef]),
                (44, &[0x00, 0x00, 0x00, 0x28]),
                (56, &[0x00, 0x00, 0x01, 0x23]),
                (60, &ctr.to_be_bytes()),
                (63, &[0x20]),
            ],
        )
    };
    let err = bytes_at(64, &[(32, &u), (54, &[0x05, 0x11]), (56, &[0x0a, 0x00, 0x01, 0x23]), (63, &[0xd0])]);
    for raw in [req_cqe(u, 0x0a, 0, 0), resp(0), req_cqe(u, 0x10, 1, 0x40), resp(1), err] {
        let want = a.poll(raw.clone());
        assert!(want.is_some(), "{raw:02x?}");
        assert_eq!(b.poll_how(raw, How::Uninit), want);
    }
    let mut w = core::mem::MaybeUninit::<Wc>::uninit();
    // SAFETY: writes 48 bytes into the `MaybeUninit`'s own memory.
    unsafe { w.as_mut_ptr().cast::<u8>().write_bytes(0xab, core::mem::size_of::<Wc>()) };
    assert!(b.cq.poll_one_uninit(&mut w).is_none());
    // SAFETY: every byte was written above (a `Wc` is integers).
    let left = unsafe { w.assume_init() };
    assert_eq!(left.wr_id, 0xabab_abab_abab_abab, "untouched");
    assert_eq!((a.cq.cons_index(), b.cq.cons_index()), (5, 5));
}

#[test]
fn cqe_responder_opcodes() {
    let mut f = CqFix::new();
    let u = f.uidx();
    let resp = |op: u8, imm: [u8; 4], ctr: u16| {
        bytes_at(
            64,
            &[
                (17, &[0x85]),
                (22, &[0x00, 0x07]),
                (24, &[0x13, 0x05, 0x43, 0x21]),
                (32, &u),
                (36, &imm),
                (44, &[0x00, 0x00, 0x00, 0x28]),
                (56, &[0x00, 0x00, 0x01, 0x23]),
                (60, &ctr.to_be_bytes()),
                (63, &[op << 4]),
            ],
        )
    };
    let base =
        Wc { byte_len: 0x28, qp_num: 0x123, src_qp: 0x5_4321, sl: 3, slid: 7, dlid_path_bits: 5, ..Wc::default() };
    let wc = f.poll(resp(2, [0, 0, 0, 2], 0)).unwrap();
    assert_eq!(wc, Wc { wr_id: 200, opcode: WcOpcode::RECV, wc_flags: WcFlags::GRH, pkey_index: 2, ..base });
    let wc = f.poll(resp(3, [0xde, 0xad, 0xbe, 0xef], 1)).unwrap();
    assert_eq!(
        wc,
        Wc {
            wr_id: 201,
            opcode: WcOpcode::RECV,
            imm_data: 0xdead_beef,
            wc_flags: WcFlags::GRH | WcFlags::WITH_IMM,
            ..base
        }
    );
    let wc = f.poll(resp(1, [0x01, 0x02, 0x03, 0x04], 2)).unwrap();
    assert_eq!(
        wc,
        Wc {
            wr_id: 202,
            opcode: WcOpcode::RECV_RDMA_WITH_IMM,
            imm_data: 0x0102_0304,
            wc_flags: WcFlags::GRH | WcFlags::WITH_IMM,
            ..base
        }
    );
    let wc = f.poll(resp(4, [0x00, 0x00, 0x12, 0x34], 3)).unwrap();
    assert_eq!(
        wc,
        Wc { wr_id: 203, opcode: WcOpcode::RECV, imm_data: 0x1234, wc_flags: WcFlags::GRH | WcFlags::WITH_INV, ..base }
    );
    assert_eq!(f.qp.shared().rq.tail.load(Ordering::Relaxed), 4);
}

#[test]
fn cqe_errors() {
    let mut f = CqFix::new();
    let u = f.uidx();
    let err = |op: u8, vendor: u8, synd: u8, s_op: u8, ctr: u16| {
        bytes_at(
            64,
            &[
                (32, &u),
                (54, &[vendor, synd]),
                (56, &[s_op, 0x00, 0x01, 0x23]),
                (60, &ctr.to_be_bytes()),
                (63, &[op << 4]),
            ],
        )
    };
    let wc = f.poll(err(13, 0x32, 0x13, 0x08, 2)).unwrap();
    assert_eq!(
        wc,
        Wc {
            wr_id: 102,
            status: WcStatus::REM_ACCESS_ERR,
            opcode: WcOpcode::RDMA_WRITE,
            vendor_err: 0x32,
            qp_num: 0x123,
            ..Wc::default()
        }
    );
    let wc = f.poll(err(14, 0xf9, 0x05, 0, 0)).unwrap();
    assert_eq!(
        wc,
        Wc {
            wr_id: 200,
            status: WcStatus::WR_FLUSH_ERR,
            opcode: WcOpcode::RECV,
            vendor_err: 0xf9,
            qp_num: 0x123,
            ..Wc::default()
        }
    );
    // Internal opcodes are consumed without a completion.
    assert_eq!(f.poll(bytes_at(64, &[(63, &[5 << 4])])), None);
    assert_eq!(f.cq.skipped(), 1);
    // So is a CQE of a user index nobody registered.
    assert_eq!(f.poll(req_cqe([0, 0x77, 0x77, 0x77], 0x0a, 0, 0)), None);
    assert_eq!(f.cq.skipped(), 2);
    let _ = &f.ctx;
}

#[test]
fn cqe_wrong_owner_is_not_consumed() {
    let mut f = CqFix::new();
    let u = f.uidx();
    // Slot 0 in pass 0 with owner bit 1: still the device's.
    let mut raw = req_cqe(u, 0x0a, 0, 0);
    raw[63] = 0x01;
    poke(f.cq.buf_addr(), &raw);
    let mut out = [Wc::default(); 4];
    assert_eq!(f.cq.poll(&mut out), 0);
    assert_eq!(f.cq.cons_index(), 0);
    assert_bytes(&peek(f.cq.db_addr(), 4), &[0, 0, 0, 0]);
}

#[test]
fn clean_qp_compacts_and_keeps_owner_bits() {
    let mut f = CqFix::new();
    let u = f.uidx();
    let other = [0, 0x12, 0x34, 0x56];
    // Three CQEs: ours, another QP's, ours. Not polled.
    for (i, who) in [u, other, u].iter().enumerate() {
        let raw = req_cqe(*who, 0x0a, i as u16, 0);
        poke(f.cq.buf_addr() + i as u64 * 64, &raw);
    }
    let shared = f.qp.shared().clone();
    f.cq.clean_qp(&shared);
    // Two freed: the consumer index moved by 2, the other QP's CQE now sits
    // in slot 2 with slot 2's owner bit (pass 0 -> 0).
    assert_eq!(f.cq.cons_index(), 2);
    let e = peek(f.cq.buf_addr() + 2 * 64, 64);
    assert_bytes(&e[32..36], &other);
    assert_eq!(e[63], 0x00);
    assert_bytes(&peek(f.cq.db_addr(), 4), &[0, 0, 0, 2]);
}

// -- post semantics --------------------------------------------------------------

#[test]
fn post_refuses_before_writing_and_posts_the_prefix() {
    use crate::wr::PostErrorKind;
    let (_hca, ctx) = ctx(0);
    let (mut qp, rec) = golden_qp(&ctx, QpType::Uc, rc_caps(), false);
    let sge = [SEND_SGE];
    let three = [SEND_SGE; 3];
    let read = SendWr {
        wr_id: 9,
        op: SendOp::RdmaRead(RemoteAddr::default()),
        flags: SendFlags::empty(),
        sgl: &sge,
        ud: None,
    };
    let wrs =
        [send(1, SendFlags::empty(), &sge), send(2, SendFlags::empty(), &sge), read, send(4, SendFlags::empty(), &sge)];
    // SAFETY: not INLINE.
    let e = unsafe { qp.sq.post(&wrs) }.unwrap_err();
    assert_eq!((e.index, e.kind), (2, PostErrorKind::OpcodeNotSupported));
    assert_eq!(qp.sq.cur_post(), 2);
    assert_eq!(rec.take().iter().filter(|o| matches!(o, MmioOp::Write64 { .. })).count(), 1, "one doorbell");
    assert_bytes(&dbrec(&qp, 1), &[0, 0, 0, 2]);
    // Nothing of the refused request landed in slot 2.
    assert_bytes(&sq_bytes(&qp, 2, 64), &[0; 64]);
    // SAFETY: not INLINE.
    let e = unsafe { qp.sq.post(&[send(5, SendFlags::empty(), &three)]) }.unwrap_err();
    assert_eq!(e.kind, PostErrorKind::TooManySge { given: 3, max: 2 });
    assert!(rec.take().is_empty(), "no doorbell when nothing was posted");
    let big = [0u8; 80];
    let sge = [Sge::new(big.as_ptr() as u64, 80, 0)];
    // SAFETY: `big` is readable.
    let e = unsafe { qp.sq.post(&[send(6, SendFlags::INLINE, &sge)]) }.unwrap_err();
    assert_eq!(e.kind, PostErrorKind::InlineTooLong { given: 80, max: qp.shared().sizes().max_inline });
    // Atomics need one 8-byte SGE and an aligned remote address (RC only).
    let (mut rc, _) = golden_qp(&ctx, QpType::Rc, rc_caps(), false);
    let small = [Sge::new(0, 4, 0)];
    let fa = SendWr {
        wr_id: 1,
        op: SendOp::AtomicFetchAndAdd { remote: RemoteAddr { addr: 8, rkey: 0 }, add: 1 },
        flags: SendFlags::empty(),
        sgl: &small,
        ud: None,
    };
    // SAFETY: not INLINE.
    assert_eq!(unsafe { rc.sq.post(&[fa]) }.unwrap_err().kind, PostErrorKind::BadAtomic);
    // UD needs a destination, RC must not have one.
    let d = UdDest::new(1, 1, 1);
    let wr = SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::empty(), sgl: &[], ud: Some(d) };
    // SAFETY: not INLINE.
    assert_eq!(unsafe { rc.sq.post(&[wr]) }.unwrap_err().kind, PostErrorKind::BadDestination);
}

#[test]
fn queue_full_and_state_checks() {
    use crate::wr::PostErrorKind;
    let (_hca, ctx) = ctx(0);
    let caps = QpCaps { max_send_wr: 2, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let args = QpPrepareArgs { qp_type: QpType::Rc, caps, srq: None, sq_sig_all: false };
    let (p, _) = ctx.qp_prepare(&args).unwrap();
    let mut qp =
        ctx.qp_finish_with(p, &[0; QP_RESP_LEN], 0x123, |_, _| Recorder::default()).map_err(|e| e.error).unwrap();
    let sge = [SEND_SGE];
    // RESET: neither sends nor receives.
    // SAFETY: not INLINE.
    assert_eq!(unsafe { qp.sq.post(&[send(1, SendFlags::empty(), &sge)]) }.unwrap_err().kind, PostErrorKind::BadState);
    assert_eq!(
        qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 1, sgl: &sge }]).unwrap_err().kind,
        PostErrorKind::BadState
    );
    // INIT: receives only.
    qp.on_state_change(1);
    qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 1, sgl: &sge }]).unwrap();
    // SAFETY: not INLINE.
    assert_eq!(unsafe { qp.sq.post(&[send(1, SendFlags::empty(), &sge)]) }.unwrap_err().kind, PostErrorKind::BadState);
    qp.on_state_change(2);
    qp.on_state_change(3);
    let max = qp.sq.max_post();
    assert_eq!(max, 2);
    let wrs: Vec<SendWr<'_>> = (0..3).map(|i| send(i, SendFlags::empty(), &sge)).collect();
    // SAFETY: not INLINE.
    let e = unsafe { qp.sq.post(&wrs) }.unwrap_err();
    assert_eq!((e.index, e.kind), (2, PostErrorKind::QueueFull));
    // The receive queue has at least 64 bytes: 4 slots of 16.
    assert_eq!(qp.shared().sizes().rq_max_post, 4);
    let r = qp.rq.as_mut().unwrap();
    r.post(&[RecvWr { wr_id: 2, sgl: &sge }, RecvWr { wr_id: 3, sgl: &sge }, RecvWr { wr_id: 4, sgl: &sge }]).unwrap();
    assert_eq!(r.post(&[RecvWr { wr_id: 5, sgl: &sge }]).unwrap_err().kind, PostErrorKind::QueueFull);
    // RESET: indices and the doorbell record start over.
    qp.on_state_change(0);
    assert_bytes(&dbrec(&qp, 0), &[0; 4]);
    assert_bytes(&dbrec(&qp, 1), &[0; 4]);
    for s in 1..=3 {
        qp.on_state_change(s);
    }
    // SAFETY: not INLINE.
    unsafe { qp.sq.post(&wrs[..2]) }.unwrap();
    assert_eq!(qp.sq.cur_post(), 2);
    assert_bytes(&dbrec(&qp, 1), &[0, 0, 0, 2]);
    qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 2, sgl: &sge }]).unwrap();
    assert_bytes(&dbrec(&qp, 0), &[0, 0, 0, 1]);
    // ERR accepts both (the device flushes them).
    qp.on_state_change(6);
    qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 3, sgl: &sge }]).unwrap();
}

#[test]
fn static_uar_scheme() {
    let hca = Hca::new(ModelCfg { dynamic_uar: false, ..Default::default() });
    let ctx = hca.context();
    assert!(!ctx.uars().is_dynamic());
    let (p, u) =
        ctx.qp_prepare(&QpPrepareArgs { qp_type: QpType::Rc, caps: rc_caps(), srq: None, sq_sig_all: false }).unwrap();
    assert_eq!((u.flags, u.bfreg_index), (0, 0), "the kernel picks the register");
    // The kernel answers bfreg 5: UAR 1 (4 registers per UAR), register 1.
    let mut resp = [0u8; QP_RESP_LEN];
    resp[0] = 5;
    let qp = ctx.qp_finish_with(p, &resp, 0x77, |_, _| Recorder::default()).map_err(|e| e.error).unwrap();
    let reg = qp.shared().reg().unwrap();
    assert_eq!((reg.uar_index, reg.offset), (5, 0x800 + 512));
    let (_, cu) = ctx.cq_prepare(3).unwrap();
    assert_eq!((cu.flags, cu.uar_page_index), (0, 0));
    // Register 0 never takes BlueFlame.
    assert_eq!(ctx.uars().static_reg(0).unwrap().info().bf_half, 0);
    let _ = Arc::strong_count(qp.shared());
}

#[test]
fn dedicated_registers_run_out_into_the_nc_page() {
    let (_hca, ctx) = ctx(512);
    let args = QpPrepareArgs { qp_type: QpType::Rc, caps: rc_caps(), srq: None, sq_sig_all: false };
    let mut keep = Vec::new();
    for _ in 0..uar::MAX_DEDICATED_BFREGS {
        let (p, _) = ctx.qp_prepare(&args).unwrap();
        assert_ne!(p.reg.as_ref().unwrap().info().bf_half, 0);
        keep.push(p);
    }
    let (p, u) = ctx.qp_prepare(&args).unwrap();
    let info = p.reg.as_ref().unwrap().info();
    assert_eq!((info.bf_half, info.offset, u.bfreg_index), (0, 0x800, ctx.uars().cq_page().1));
    // A register comes back when its pending QP goes (kernel create failed).
    drop(keep.pop());
    let (p, _) = ctx.qp_prepare(&args).unwrap();
    assert_ne!(p.reg.as_ref().unwrap().info().bf_half, 0);
    assert_eq!(ctx.uars().dedicated_count(), uar::MAX_DEDICATED_BFREGS);
}

#[test]
fn data_path_objects_are_send() {
    fn send<T: Send>() {}
    fn sync<T: Send + Sync>() {}
    send::<Qp<UarMmio>>();
    send::<SendQueue<UarMmio>>();
    send::<RecvQueue>();
    send::<Cq<UarMmio>>();
    send::<Srq>();
    send::<PendingQp>();
    send::<PendingCq>();
    send::<PendingSrq>();
    sync::<Context>();
    sync::<QpShared>();
    sync::<SrqShared>();
    sync::<Ah>();
}

/// The poster's doorbell-record store (`SendQueue::ring`) and the control
/// path's (`on_state_change(RESET)` clears the record) from two threads
/// (audit M1). With atomic stores this is no data race; with the volatile
/// stores of before, Miri's race detector stops this test
/// (`cargo +nightly miri test -p rverbs-providers --lib
/// doorbell_record_stores_from_two_threads`).
#[test]
fn doorbell_record_stores_from_two_threads() {
    use crate::mlx5::mmio::NoopMmio;
    let (_hca, ctx) = ctx(0);
    let args = QpPrepareArgs { qp_type: QpType::Rc, caps: rc_caps(), srq: None, sq_sig_all: false };
    let (p, _) = ctx.qp_prepare(&args).unwrap();
    let mut qp = ctx.qp_finish_with(p, &[0u8; QP_RESP_LEN], 0x123, |_, _| NoopMmio).map_err(|e| e.error).unwrap();
    for s in 1..=3 {
        qp.on_state_change(s);
    }
    let shared = qp.shared().clone();
    let sge = [Sge::new(0x1000, 4, 1)];
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..20 {
                shared.on_state_change(0);
                for st in 1..=3 {
                    shared.on_state_change(st);
                }
            }
        });
        for i in 0..40 {
            // SAFETY: not INLINE.
            match unsafe { qp.sq.post(&[send(i, SendFlags::empty(), &sge)]) } {
                Ok(()) => {
                    let head = qp.sq.head();
                    qp.shared().sq.tail().store(head, Ordering::Release);
                }
                Err(e) => assert_eq!(e.kind, crate::wr::PostErrorKind::BadState),
            }
        }
    });
}
