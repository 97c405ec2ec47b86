//! mlx5 send/receive WQE segments, as the HCA reads them (rdma-core
//! `providers/mlx5/mlx5dv.h`, `wqe.h`; providers.md §B.5, §B.7).
//!
//! Every multi-byte field is big-endian (`zerocopy::byteorder::big_endian`),
//! every struct is `repr(C)` with alignment 1 and no padding (the
//! byte-order types are unaligned), and fields are private: setters pack the
//! bitfields the way `mlx5dv_set_ctrl_seg` / `set_data_ptr_seg` do, getters
//! unpack them (used by the tests and the HCA model). No `unsafe` here: the
//! ring code in `send.rs` / `recv.rs` copies these values into the queue.

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes in one send WQE basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB: usize = 64;
/// Bytes in one WQE "DS" unit (octoword); the WQE length in the control
/// segment counts these.
pub const DS: usize = 16;

/// `MLX5_OPCODE_*`: send WQE opcodes (the low byte of `opmod_idx_opcode`,
/// echoed in the top byte of a requester CQE's `sop_drop_qpn`).
pub mod opcode {
    /// `MLX5_OPCODE_NOP`.
    pub const NOP: u8 = 0x00;
    /// `MLX5_OPCODE_SEND_INVAL`.
    pub const SEND_INVAL: u8 = 0x01;
    /// `MLX5_OPCODE_RDMA_WRITE`.
    pub const RDMA_WRITE: u8 = 0x08;
    /// `MLX5_OPCODE_RDMA_WRITE_IMM`.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// `MLX5_OPCODE_SEND`.
    pub const SEND: u8 = 0x0a;
    /// `MLX5_OPCODE_SEND_IMM`.
    pub const SEND_IMM: u8 = 0x0b;
    /// `MLX5_OPCODE_RDMA_READ`.
    pub const RDMA_READ: u8 = 0x10;
    /// `MLX5_OPCODE_ATOMIC_CS`.
    pub const ATOMIC_CS: u8 = 0x11;
    /// `MLX5_OPCODE_ATOMIC_FA`.
    pub const ATOMIC_FA: u8 = 0x12;
    /// `MLX5_OPCODE_UMR` (bind MW / local invalidate in rdma-core; not used here).
    pub const UMR: u8 = 0x25;
}

/// `fm_ce_se` bits of the control segment.
pub mod fm_ce_se {
    /// `MLX5_WQE_CTRL_CQ_UPDATE`: generate a CQE (signaled, or `sq_sig_all`).
    pub const CQ_UPDATE: u8 = 0x08;
    /// `MLX5_WQE_CTRL_SOLICITED`: solicited event at the responder.
    pub const SOLICITED: u8 = 0x02;
    /// `MLX5_WQE_CTRL_FENCE`: strong fence (`IBV_SEND_FENCE`).
    pub const FENCE: u8 = 0x80;
    /// `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE` (after bind / local invalidate; unused).
    pub const INITIATOR_SMALL_FENCE: u8 = 0x20;
}

/// `MLX5_INLINE_SEG`: the top bit of an inline segment's byte count.
pub const INLINE_SEG: u32 = 0x8000_0000;
/// `MLX5_INVALID_LKEY`: the lkey of the receive-list terminator segment.
pub const INVALID_LKEY: u32 = 0x100;
/// `MLX5_EXTENDED_UD_AV`: set in `dqp_dct` of every datagram segment.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// `struct mlx5_wqe_ctrl_seg` (16 bytes): the first segment of every send WQE.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CtrlSeg {
    opmod_idx_opcode: U32,
    qpn_ds: U32,
    signature: u8,
    dci_stream_channel_id: U16,
    fm_ce_se: u8,
    imm: U32,
}

impl CtrlSeg {
    /// A control segment with every field set (signature and DCI stream 0).
    #[inline(always)]
    pub fn new(opcode: u8, wqe_index: u16, qpn: u32, ds: u8, fm_ce_se: u8, imm: u32) -> Self {
        let mut c = CtrlSeg::default();
        c.set_opmod_idx_opcode(0, wqe_index, opcode);
        c.set_qpn_ds(qpn, ds);
        c.set_fm_ce_se(fm_ce_se);
        c.set_imm(imm);
        c
    }

    /// `opmod << 24 | wqe_index << 8 | opcode`. `wqe_index` is the SQ
    /// producer counter in WQEBBs at this WQE's first block, modulo 2^16.
    #[inline(always)]
    pub fn set_opmod_idx_opcode(&mut self, opmod: u8, wqe_index: u16, opcode: u8) {
        self.opmod_idx_opcode = U32::new(u32::from(opmod) << 24 | u32::from(wqe_index) << 8 | u32::from(opcode));
    }

    /// `qpn << 8 | ds`: the QP number (24 bits) and the WQE length in
    /// 16-byte units (6 bits).
    #[inline(always)]
    pub fn set_qpn_ds(&mut self, qpn: u32, ds: u8) {
        self.qpn_ds = U32::new((qpn & 0x00ff_ffff) << 8 | u32::from(ds & 0x3f));
    }

    /// The `fm_ce_se` byte ([`fm_ce_se`] bits).
    #[inline(always)]
    pub fn set_fm_ce_se(&mut self, v: u8) {
        self.fm_ce_se = v;
    }

    /// The immediate (`SEND_IMM`, `RDMA_WRITE_IMM`: the immediate in host
    /// order, stored big-endian = network order) or the rkey to invalidate.
    #[inline(always)]
    pub fn set_imm(&mut self, imm: u32) {
        self.imm = U32::new(imm);
    }

    /// The opcode (low byte of `opmod_idx_opcode`).
    pub fn opcode(&self) -> u8 {
        self.opmod_idx_opcode.get() as u8
    }
    /// The WQE index (bits 23..8 of `opmod_idx_opcode`).
    pub fn wqe_index(&self) -> u16 {
        (self.opmod_idx_opcode.get() >> 8) as u16
    }
    /// The opcode modifier (top byte).
    pub fn opmod(&self) -> u8 {
        (self.opmod_idx_opcode.get() >> 24) as u8
    }
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn_ds.get() >> 8
    }
    /// The WQE length in 16-byte units.
    pub fn ds(&self) -> u8 {
        (self.qpn_ds.get() & 0x3f) as u8
    }
    /// The `fm_ce_se` byte.
    pub fn fm_ce_se(&self) -> u8 {
        self.fm_ce_se
    }
    /// The immediate / invalidated rkey, host order.
    pub fn imm(&self) -> u32 {
        self.imm.get()
    }
    /// The first 8 bytes, as the 64-bit doorbell store writes them: a `u64`
    /// whose in-memory bytes are `opmod_idx_opcode ‖ qpn_ds`.
    #[inline(always)]
    pub fn doorbell_word(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.as_bytes()[..8]);
        u64::from_ne_bytes(b)
    }
}

/// The 16 bytes of a control segment as two native `u64`s whose
/// in-memory bytes are exactly [`CtrlSeg::new`]'s (little- and big-endian
/// hosts alike): the post fast path stores these with two 64-bit stores,
/// and the first one is also the 8-byte doorbell. `qpn8_be` is
/// `(qpn << 8).to_be()`, precomputed per QP.
#[inline(always)]
pub fn ctrl_words(opcode: u8, wqe_index: u16, qpn8_be: u32, ds: u8, fm_ce_se: u8, imm: u32) -> [u64; 2] {
    // Each 32-bit field's bytes in memory order, as a native u32.
    let opmod_idx_opcode = (u32::from(wqe_index) << 8 | u32::from(opcode)).to_be();
    let qpn_ds = qpn8_be | u32::from(ds & 0x3f).to_be();
    let sig_fm = u32::from_ne_bytes([0, 0, 0, fm_ce_se]);
    let join = |a: u32, b: u32| {
        let mut w = [0u8; 8];
        w[..4].copy_from_slice(&a.to_ne_bytes());
        w[4..].copy_from_slice(&b.to_ne_bytes());
        u64::from_ne_bytes(w)
    };
    [join(opmod_idx_opcode, qpn_ds), join(sig_fm, imm.to_be())]
}

/// A data segment as two native `u64`s with [`DataSeg::new`]'s bytes.
#[inline(always)]
pub fn data_words(byte_count: u32, lkey: u32, addr: u64) -> [u64; 2] {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&byte_count.to_be_bytes());
    w[4..].copy_from_slice(&lkey.to_be_bytes());
    [u64::from_ne_bytes(w), u64::from_ne_bytes(addr.to_be_bytes())]
}

/// `struct mlx5_wqe_raddr_seg` (16 bytes): RDMA READ/WRITE and atomics.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RaddrSeg {
    raddr: U64,
    rkey: U32,
    reserved: U32,
}

impl RaddrSeg {
    /// The remote address and rkey; `reserved` stays 0.
    #[inline(always)]
    pub fn new(raddr: u64, rkey: u32) -> Self {
        RaddrSeg { raddr: U64::new(raddr), rkey: U32::new(rkey), reserved: U32::ZERO }
    }
    /// Remote address.
    pub fn raddr(&self) -> u64 {
        self.raddr.get()
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey.get()
    }
}

/// `struct mlx5_wqe_atomic_seg` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct AtomicSeg {
    swap_add: U64,
    compare: U64,
}

impl AtomicSeg {
    /// Compare-and-swap: `swap_add` = the swap value, `compare` = the compare value.
    #[inline(always)]
    pub fn cmp_swap(compare: u64, swap: u64) -> Self {
        AtomicSeg { swap_add: U64::new(swap), compare: U64::new(compare) }
    }
    /// Fetch-and-add: `swap_add` = the addend, `compare` = 0.
    #[inline(always)]
    pub fn fetch_add(add: u64) -> Self {
        AtomicSeg { swap_add: U64::new(add), compare: U64::ZERO }
    }
    /// `swap_add`.
    pub fn swap_add(&self) -> u64 {
        self.swap_add.get()
    }
    /// `compare`.
    pub fn compare(&self) -> u64 {
        self.compare.get()
    }
}

/// `struct mlx5_wqe_data_seg` (16 bytes): one gather / scatter entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct DataSeg {
    byte_count: U32,
    lkey: U32,
    addr: U64,
}

impl DataSeg {
    /// `byte_count @0, lkey @4, addr @8`.
    #[inline(always)]
    pub fn new(byte_count: u32, lkey: u32, addr: u64) -> Self {
        DataSeg { byte_count: U32::new(byte_count), lkey: U32::new(lkey), addr: U64::new(addr) }
    }
    /// The receive-list terminator: `{0, MLX5_INVALID_LKEY, 0}`.
    #[inline(always)]
    pub fn terminator() -> Self {
        DataSeg::new(0, INVALID_LKEY, 0)
    }
    /// Byte count.
    pub fn byte_count(&self) -> u32 {
        self.byte_count.get()
    }
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.lkey.get()
    }
    /// Address.
    pub fn addr(&self) -> u64 {
        self.addr.get()
    }
}

/// `struct mlx5_wqe_inl_data_seg` (4 bytes, then the payload; the segment
/// is padded to a multiple of 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct InlineSeg {
    byte_count: U32,
}

impl InlineSeg {
    /// `len | MLX5_INLINE_SEG`.
    #[inline(always)]
    pub fn new(len: u32) -> Self {
        InlineSeg { byte_count: U32::new(len | INLINE_SEG) }
    }
    /// The payload length (without the inline bit).
    pub fn len(&self) -> u32 {
        self.byte_count.get() & !INLINE_SEG
    }
    /// True for a zero-length payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the inline bit is set.
    pub fn is_inline(&self) -> bool {
        self.byte_count.get() & INLINE_SEG != 0
    }
}

/// `struct mlx5_wqe_av` = `mlx5_wqe_datagram_seg` (48 bytes): where a UD
/// send goes. Built once per address handle ([`crate::mlx5::ah`]); the
/// post path copies it and fills in the remote QPN and Q_Key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Av {
    qkey: U32,
    key_reserved: U32,
    dqp_dct: U32,
    stat_rate_sl: u8,
    fl_mlid: u8,
    rlid: U16,
    reserved0: [u8; 4],
    rmac: [u8; 6],
    tclass: u8,
    hop_limit: u8,
    grh_gid_fl: U32,
    rgid: [u8; 16],
}

impl Av {
    /// `key.qkey.qkey`: the remote Q_Key.
    #[inline(always)]
    pub fn set_qkey(&mut self, qkey: u32) {
        self.qkey = U32::new(qkey);
    }
    /// `dqp_dct = remote_qpn | MLX5_EXTENDED_UD_AV`.
    #[inline(always)]
    pub fn set_remote_qpn(&mut self, qpn: u32) {
        self.dqp_dct = U32::new((qpn & 0x00ff_ffff) | EXTENDED_UD_AV);
    }
    /// Ethernet (RoCE): `stat_rate_sl = rate << 4 | (sl & 7) << 1`.
    pub fn set_stat_rate_sl_eth(&mut self, rate: u8, sl: u8) {
        self.stat_rate_sl = rate << 4 | (sl & 7) << 1;
    }
    /// InfiniBand: `stat_rate_sl = rate << 4 | sl & 0xf`.
    pub fn set_stat_rate_sl_ib(&mut self, rate: u8, sl: u8) {
        self.stat_rate_sl = rate << 4 | (sl & 0xf);
    }
    /// InfiniBand: `fl_mlid = src_path_bits & 0x7f`.
    pub fn set_fl_mlid(&mut self, src_path_bits: u8) {
        self.fl_mlid = src_path_bits & 0x7f;
    }
    /// `rlid`: the DLID (InfiniBand) or the UDP source port (RoCE v2).
    pub fn set_rlid(&mut self, v: u16) {
        self.rlid = U16::new(v);
    }
    /// `rmac`: the destination MAC (RoCE).
    pub fn set_rmac(&mut self, mac: [u8; 6]) {
        self.rmac = mac;
    }
    /// Traffic class and hop limit of the GRH.
    pub fn set_tclass_hop_limit(&mut self, tclass: u8, hop_limit: u8) {
        self.tclass = tclass;
        self.hop_limit = hop_limit;
    }
    /// `grh_gid_fl = grh << 30 | sgid_index << 20 | flow_label` (`grh` is 0
    /// on Ethernet, 1 for an InfiniBand GRH).
    pub fn set_grh_gid_fl(&mut self, grh: bool, sgid_index: u8, flow_label: u32) {
        self.grh_gid_fl = U32::new(u32::from(grh) << 30 | u32::from(sgid_index) << 20 | (flow_label & 0x000f_ffff));
    }
    /// `rgid`: the destination GID.
    pub fn set_rgid(&mut self, gid: [u8; 16]) {
        self.rgid = gid;
    }

    /// Q_Key.
    pub fn qkey(&self) -> u32 {
        self.qkey.get()
    }
    /// Remote QPN (without the extended-AV bit).
    pub fn remote_qpn(&self) -> u32 {
        self.dqp_dct.get() & 0x00ff_ffff
    }
    /// Raw `dqp_dct`.
    pub fn dqp_dct(&self) -> u32 {
        self.dqp_dct.get()
    }
    /// Raw `stat_rate_sl`.
    pub fn stat_rate_sl(&self) -> u8 {
        self.stat_rate_sl
    }
    /// Raw `fl_mlid`.
    pub fn fl_mlid(&self) -> u8 {
        self.fl_mlid
    }
    /// `rlid`.
    pub fn rlid(&self) -> u16 {
        self.rlid.get()
    }
    /// Destination MAC.
    pub fn rmac(&self) -> [u8; 6] {
        self.rmac
    }
    /// Raw `grh_gid_fl`.
    pub fn grh_gid_fl(&self) -> u32 {
        self.grh_gid_fl.get()
    }
    /// Destination GID.
    pub fn rgid(&self) -> [u8; 16] {
        self.rgid
    }
    /// Traffic class.
    pub fn tclass(&self) -> u8 {
        self.tclass
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.hop_limit
    }
}

/// `struct mlx5_wqe_srq_next_seg` (16 bytes): the head of every SRQ WQE;
/// `next_wqe_index` links the free list.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SrqNextSeg {
    rsvd0: [u8; 2],
    next_wqe_index: U16,
    signature: u8,
    rsvd1: [u8; 11],
}

impl SrqNextSeg {
    /// A next segment pointing at WQE `next`.
    pub fn new(next: u16) -> Self {
        SrqNextSeg { next_wqe_index: U16::new(next), ..Default::default() }
    }
    /// The next WQE in the list.
    pub fn next_wqe_index(&self) -> u16 {
        self.next_wqe_index.get()
    }
}

/// Byte offset of `next_wqe_index` in an SRQ WQE.
pub const SRQ_NEXT_WQE_INDEX: usize = 2;

// The layouts the HCA reads (providers.md §B.5, §B.11), checked at compile time.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<CtrlSeg>() == 16 && align_of::<CtrlSeg>() == 1);
    assert!(offset_of!(CtrlSeg, qpn_ds) == 4);
    assert!(offset_of!(CtrlSeg, signature) == 8);
    assert!(offset_of!(CtrlSeg, dci_stream_channel_id) == 9);
    assert!(offset_of!(CtrlSeg, fm_ce_se) == 11);
    assert!(offset_of!(CtrlSeg, imm) == 12);
    assert!(size_of::<RaddrSeg>() == 16 && offset_of!(RaddrSeg, rkey) == 8);
    assert!(size_of::<AtomicSeg>() == 16 && offset_of!(AtomicSeg, compare) == 8);
    assert!(size_of::<DataSeg>() == 16 && offset_of!(DataSeg, lkey) == 4 && offset_of!(DataSeg, addr) == 8);
    assert!(size_of::<InlineSeg>() == 4);
    assert!(size_of::<Av>() == 48);
    assert!(offset_of!(Av, dqp_dct) == 8);
    assert!(offset_of!(Av, stat_rate_sl) == 12);
    assert!(offset_of!(Av, fl_mlid) == 13);
    assert!(offset_of!(Av, rlid) == 14);
    assert!(offset_of!(Av, rmac) == 20);
    assert!(offset_of!(Av, tclass) == 26);
    assert!(offset_of!(Av, hop_limit) == 27);
    assert!(offset_of!(Av, grh_gid_fl) == 28);
    assert!(offset_of!(Av, rgid) == 32);
    assert!(size_of::<SrqNextSeg>() == 16 && offset_of!(SrqNextSeg, next_wqe_index) == SRQ_NEXT_WQE_INDEX);
};
