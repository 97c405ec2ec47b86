//! The data-path vocabulary shared by every provider: scatter/gather
//! entries, send and receive work requests, work completions.
//!
//! These are provider-neutral; each provider encodes them into its own WQE
//! layout (rxe: `rxe_send_wqe`; mlx5: WQE segments) and decodes its CQEs into
//! [`Wc`].

use std::marker::PhantomData;

use bitflags::bitflags;
use rverbs_uapi::ib_verbs_values::*;

/// A scatter/gather entry: `addr..addr+length` inside the memory region
/// whose local key is `lkey` (`struct ibv_sge`; byte-identical to
/// `ib_uverbs_sge` and `rxe_sge`).
///
/// The lifetime ties an entry to the region it came from
/// (`MemoryRegion::sge` in `rverbs`), so it cannot be posted after the
/// region is gone. [`Sge::new`] builds one from raw values with no such
/// tie: that is safe, because the device checks the key and the range
/// against its registrations (a stale key completes with
/// `LOC_PROT_ERR`), but it is the caller's job to keep the region alive.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sge<'mr> {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
    region: PhantomData<&'mr ()>,
}

impl Sge<'static> {
    /// An entry from raw values (`struct ibv_sge`), tied to no region.
    #[inline]
    pub const fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Sge { addr, length, lkey, region: PhantomData }
    }
}

impl<'mr> Sge<'mr> {
    /// An entry that borrows whatever owns the region for `'mr` (what
    /// `MemoryRegion::sge` returns).
    #[inline]
    pub const fn borrowing<T: ?Sized>(_owner: &'mr T, addr: u64, length: u32, lkey: u32) -> Self {
        Sge { addr, length, lkey, region: PhantomData }
    }
}

bitflags! {
    /// `enum ibv_send_flags` (same values as the kernel's `IB_SEND_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct SendFlags: u32 {
        /// `IBV_SEND_FENCE`: wait for earlier READs/atomics first.
        const FENCE = IB_SEND_FENCE;
        /// `IBV_SEND_SIGNALED`: generate a completion.
        const SIGNALED = IB_SEND_SIGNALED;
        /// `IBV_SEND_SOLICITED`: raise a solicited event at the receiver.
        const SOLICITED = IB_SEND_SOLICITED;
        /// `IBV_SEND_INLINE`: copy the payload into the WQE at post time.
        const INLINE = IB_SEND_INLINE;
    }
}

/// The remote side of an RDMA READ/WRITE or atomic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key of the peer's region.
    pub rkey: u32,
}

/// What a send work request does (`enum ibv_wr_opcode`, with the operands
/// each opcode needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`: the 32-bit immediate arrives in the receive
    /// completion (host order here; network order on the wire).
    SendWithImm(u32),
    /// `IBV_WR_RDMA_WRITE`.
    RdmaWrite(RemoteAddr),
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: consumes a receive at the peer.
    RdmaWriteWithImm(RemoteAddr, u32),
    /// `IBV_WR_RDMA_READ`.
    RdmaRead(RemoteAddr),
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`: 8 bytes at `remote`; if equal to
    /// `compare`, replaced by `swap`; the old value lands in the SGE.
    AtomicCmpAndSwp {
        /// The 8-byte aligned remote word.
        remote: RemoteAddr,
        /// Value to compare with.
        compare: u64,
        /// Value to store if equal.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`: adds `add` to the remote word; the old
    /// value lands in the SGE.
    AtomicFetchAndAdd {
        /// The 8-byte aligned remote word.
        remote: RemoteAddr,
        /// Value to add.
        add: u64,
    },
    /// `IBV_WR_LOCAL_INV`: invalidates the memory window (type 2) or
    /// memory region whose key this is, on this QP's device. No SGEs.
    LocalInv(u32),
    /// `IBV_WR_SEND_WITH_INV`: a SEND that invalidates, at the receiver,
    /// the type 2 memory window whose rkey this is; the receive completes
    /// with `WITH_INV` and the key in `Wc::imm_data`. RC only.
    SendWithInv(u32),
    /// `IBV_WR_BIND_MW`: binds a memory window to a range of a memory
    /// region (RC and UC). No SGEs; the completion's opcode is `BIND_MW`.
    BindMw(MwBind),
    /// `IBV_WR_ATOMIC_WRITE` (`ibv_wr_atomic_write`): writes the 8 bytes of
    /// `value` (as they are: wire order) to `remote` as one atomic
    /// operation; the request takes no SGE. RC only; rxe carries it since
    /// Linux 6.2 (6.1's completes it with an error, as under rdma-core).
    AtomicWrite {
        /// The 8-byte aligned remote word.
        remote: RemoteAddr,
        /// The bytes to store.
        value: [u8; 8],
    },
}

/// What a `BIND_MW` request binds (`struct ibv_mw_bind_info` with the
/// window's keys), as the kernel reads it from the WQE: all numbers, so a
/// stale one fails the bind (`MW_BIND_ERR`) rather than touching memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MwBind {
    /// The window's current rkey (`ibv_mw.rkey`).
    pub mw_rkey: u32,
    /// The rkey the window has after the bind: the same index (upper 24
    /// bits) with a new low byte (`ibv_inc_rkey`).
    pub new_rkey: u32,
    /// The memory region's lkey (it needs `MW_BIND` access).
    pub mr_lkey: u32,
    /// First byte of the bound range (an address inside the region).
    pub addr: u64,
    /// Bytes bound; 0 unbinds a type 1 window.
    pub length: u64,
    /// `IBV_ACCESS_*` the window grants (`REMOTE_READ`, `REMOTE_WRITE`,
    /// `REMOTE_ATOMIC`; `ZERO_BASED` is refused).
    pub access: u32,
}

/// `ibv_inc_rkey`: the next key of the same window (the low byte moves on).
#[inline]
pub const fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

impl SendOp {
    /// The `IB_UVERBS_WR_*` opcode.
    pub fn kernel_opcode(self) -> u32 {
        use rverbs_uapi::ib_user_verbs::*;
        match self {
            SendOp::Send => IB_UVERBS_WR_SEND,
            SendOp::SendWithImm(_) => IB_UVERBS_WR_SEND_WITH_IMM,
            SendOp::RdmaWrite(_) => IB_UVERBS_WR_RDMA_WRITE,
            SendOp::RdmaWriteWithImm(..) => IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
            SendOp::RdmaRead(_) => IB_UVERBS_WR_RDMA_READ,
            SendOp::AtomicCmpAndSwp { .. } => IB_UVERBS_WR_ATOMIC_CMP_AND_SWP,
            SendOp::AtomicFetchAndAdd { .. } => IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
            SendOp::LocalInv(_) => IB_UVERBS_WR_LOCAL_INV,
            SendOp::SendWithInv(_) => IB_UVERBS_WR_SEND_WITH_INV,
            SendOp::BindMw(_) => IB_UVERBS_WR_BIND_MW,
            SendOp::AtomicWrite { .. } => IB_UVERBS_WR_ATOMIC_WRITE,
        }
    }

    /// True for the requests that act on this device only and carry no
    /// data: `LOCAL_INV` and `BIND_MW`.
    pub fn is_local(self) -> bool {
        matches!(self, SendOp::LocalInv(_) | SendOp::BindMw(_))
    }

    /// True for the two atomics that return the old value
    /// (compare-and-swap, fetch-and-add; not [`SendOp::AtomicWrite`]).
    pub fn is_atomic(self) -> bool {
        matches!(self, SendOp::AtomicCmpAndSwp { .. } | SendOp::AtomicFetchAndAdd { .. })
    }
}

/// Where a UD send goes: an address handle (its AH number) and the remote
/// QP.
///
/// The lifetime ties it to its address handle (`AddressHandle::ud_dest` in
/// `rverbs`), so a destination cannot be posted after its AH is destroyed
/// and its number reused by another. [`UdDest::new`] builds one from a raw
/// number with no such tie (safe: a number that names no AH is refused at
/// post time or completes with an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdDest<'ah> {
    /// The AH number: the rxe kernel's, or a provider's own for an address
    /// vector kept in userspace.
    pub ah_num: u32,
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
    ah: PhantomData<&'ah ()>,
}

impl UdDest<'static> {
    /// A destination from a raw AH number, tied to no address handle.
    #[inline]
    pub const fn new(ah_num: u32, remote_qpn: u32, remote_qkey: u32) -> Self {
        UdDest { ah_num, remote_qpn, remote_qkey, ah: PhantomData }
    }
}

impl<'ah> UdDest<'ah> {
    /// A destination that borrows its address handle `ah` for `'ah`.
    #[inline]
    pub const fn borrowing<T: ?Sized>(_ah: &'ah T, ah_num: u32, remote_qpn: u32, remote_qkey: u32) -> Self {
        UdDest { ah_num, remote_qpn, remote_qkey, ah: PhantomData }
    }
}

/// A send work request, as the providers see it. The SGEs must describe
/// registered memory; with `INLINE` their bytes are copied at post time.
///
/// Build one with the constructors, which leave it unsignaled, then add
/// flags, e.g. `SendWr::write(7, &sgl, remote).imm(42).signaled()`. They are
/// `const fn`s that fill the struct in place: no cost over a literal.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation and operands.
    pub op: SendOp,
    /// Flags.
    pub flags: SendFlags,
    /// Local buffers (gathered for sends/writes, scattered for reads/atomics).
    pub sgl: &'a [Sge<'a>],
    /// UD only: the destination.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendWr<'a> {
    /// A request of `op` over `sgl`, no flags, no UD destination.
    #[inline]
    pub const fn new(wr_id: u64, op: SendOp, sgl: &'a [Sge<'a>]) -> Self {
        SendWr { wr_id, op, flags: SendFlags::empty(), sgl, ud: None }
    }
    /// `IBV_WR_SEND` of the bytes `sgl` gathers.
    #[inline]
    pub const fn send(wr_id: u64, sgl: &'a [Sge<'a>]) -> Self {
        Self::new(wr_id, SendOp::Send, sgl)
    }
    /// `IBV_WR_RDMA_WRITE` of the bytes `sgl` gathers to `remote`.
    #[inline]
    pub const fn write(wr_id: u64, sgl: &'a [Sge<'a>], remote: RemoteAddr) -> Self {
        Self::new(wr_id, SendOp::RdmaWrite(remote), sgl)
    }
    /// `IBV_WR_RDMA_READ` from `remote` into `sgl`.
    #[inline]
    pub const fn read(wr_id: u64, sgl: &'a [Sge<'a>], remote: RemoteAddr) -> Self {
        Self::new(wr_id, SendOp::RdmaRead(remote), sgl)
    }
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` on the 8-byte aligned word at `remote`:
    /// if it equals `compare` it becomes `swap`; the old value lands in
    /// `sge` (one 8-byte entry).
    #[inline]
    pub const fn compare_swap(wr_id: u64, sge: &'a [Sge<'a>], remote: RemoteAddr, compare: u64, swap: u64) -> Self {
        Self::new(wr_id, SendOp::AtomicCmpAndSwp { remote, compare, swap }, sge)
    }
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` of `add` to the 8-byte aligned word at
    /// `remote`; the old value lands in `sge` (one 8-byte entry).
    #[inline]
    pub const fn fetch_add(wr_id: u64, sge: &'a [Sge<'a>], remote: RemoteAddr, add: u64) -> Self {
        Self::new(wr_id, SendOp::AtomicFetchAndAdd { remote, add }, sge)
    }
    /// `IBV_WR_LOCAL_INV` of `rkey` (a type 2 window's or a region's key).
    #[inline]
    pub const fn local_inv(wr_id: u64, rkey: u32) -> Self {
        Self::new(wr_id, SendOp::LocalInv(rkey), &[])
    }
    /// `IBV_WR_SEND_WITH_INV` of the bytes `sgl` gathers, invalidating the
    /// peer's type 2 window `rkey` (RC).
    #[inline]
    pub const fn send_inv(wr_id: u64, sgl: &'a [Sge<'a>], rkey: u32) -> Self {
        Self::new(wr_id, SendOp::SendWithInv(rkey), sgl)
    }
    /// `IBV_WR_BIND_MW` (type 2 windows through the send queue; type 1
    /// windows are bound the same way by `ibv_bind_mw`).
    #[inline]
    pub const fn bind_mw(wr_id: u64, bind: MwBind) -> Self {
        Self::new(wr_id, SendOp::BindMw(bind), &[])
    }
    /// With a 32-bit immediate: a SEND becomes `SEND_WITH_IMM`, an RDMA
    /// WRITE becomes `RDMA_WRITE_WITH_IMM` (which consumes a receive at the
    /// peer); on the other opcodes it replaces an earlier immediate or does
    /// nothing.
    #[inline]
    pub const fn imm(mut self, imm: u32) -> Self {
        self.op = match self.op {
            SendOp::Send | SendOp::SendWithImm(_) => SendOp::SendWithImm(imm),
            SendOp::RdmaWrite(r) | SendOp::RdmaWriteWithImm(r, _) => SendOp::RdmaWriteWithImm(r, imm),
            other => other,
        };
        self
    }
    /// `IBV_SEND_SIGNALED`: this request completes with a CQE. Unsignaled
    /// requests free their send-queue slots only when a later signaled one
    /// completes: post a signaled one at least every `max_send_wr` requests.
    #[inline]
    pub const fn signaled(mut self) -> Self {
        self.flags = self.flags.union(SendFlags::SIGNALED);
        self
    }
    /// `IBV_SEND_FENCE`: wait for earlier READs and atomics of this QP.
    #[inline]
    pub const fn fence(mut self) -> Self {
        self.flags = self.flags.union(SendFlags::FENCE);
        self
    }
    /// `IBV_SEND_SOLICITED`: a solicited event at the receiver.
    #[inline]
    pub const fn solicited(mut self) -> Self {
        self.flags = self.flags.union(SendFlags::SOLICITED);
        self
    }
    /// `IBV_SEND_INLINE`: the CPU copies the payload into the WQE at post
    /// time. The safe `post_send` refuses it (the payload must come as
    /// bytes, `post_send_inline`); `post_send_unchecked` takes it.
    #[inline]
    pub const fn inline(mut self) -> Self {
        self.flags = self.flags.union(SendFlags::INLINE);
        self
    }
    /// UD: where the request goes.
    #[inline]
    pub const fn to(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }
}

/// A receive work request.
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffers to scatter the incoming message into.
    pub sgl: &'a [Sge<'a>],
}

impl<'a> RecvWr<'a> {
    /// A receive into `sgl`, completing with `wr_id`.
    #[inline]
    pub const fn new(wr_id: u64, sgl: &'a [Sge<'a>]) -> Self {
        RecvWr { wr_id, sgl }
    }
}

/// Why a post stopped: the index of the work request that was refused (the
/// ones before it are posted, none after it), and the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostError {
    /// Index in the list passed to the post call.
    pub index: usize,
    /// What was wrong.
    pub kind: PostErrorKind,
}

/// Reasons a work request is refused at post time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostErrorKind {
    /// The queue is full (`ENOMEM` in libibverbs).
    QueueFull,
    /// More SGEs than the queue was created for.
    TooManySge {
        /// SGEs given.
        given: usize,
        /// The queue's limit.
        max: u32,
    },
    /// Inline payload larger than the QP's `max_inline_data`.
    InlineTooLong {
        /// Bytes given.
        given: u64,
        /// The QP's limit.
        max: u32,
    },
    /// An opcode this QP type cannot do (e.g. READ on UC, WRITE on UD).
    OpcodeNotSupported,
    /// Atomics need one 8-byte SGE and an 8-byte aligned remote address.
    BadAtomic,
    /// UD sends need a destination; other types must not have one.
    BadDestination,
    /// The QP is not in a state that accepts this post (send: RTS or later;
    /// receive: INIT or later), or the queue was destroyed.
    BadState,
    /// A receive posted to a QP that receives from an SRQ: post it to the SRQ.
    UsesSrq,
    /// The SGE list's total length overflows 32 bits.
    TooLong,
    /// The doorbell `write()` failed with this errno. The requests before
    /// `index` are in the ring all the same (the kernel takes them on the
    /// next successful doorbell); `index` may equal the list's length.
    Doorbell(i32),
    /// A `LOCAL_INV` or `BIND_MW` with SGEs or `INLINE` (they carry no
    /// data), or a bind with `ZERO_BASED` access (libibverbs: `EINVAL`).
    BadLocalOp,
    /// `INLINE` with SGEs through the safe API: inline payloads are read by
    /// the CPU at post time, so they must come as bytes (`post_send_inline`)
    /// or through the `unsafe` unchecked post.
    InlineNeedsBytes,
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "work request {} refused: ", self.index)?;
        match self.kind {
            PostErrorKind::QueueFull => write!(f, "the queue is full (poll completions first, or create it deeper)"),
            PostErrorKind::TooManySge { given, max } => write!(f, "{given} SGEs, the queue takes at most {max}"),
            PostErrorKind::InlineTooLong { given, max } => {
                write!(f, "{given} bytes inline, the QP takes at most {max} (max_inline_data)")
            }
            PostErrorKind::OpcodeNotSupported => write!(f, "this QP type does not support the opcode"),
            PostErrorKind::BadAtomic => {
                write!(f, "atomics need exactly one 8-byte SGE and an 8-byte aligned remote address")
            }
            PostErrorKind::BadDestination => {
                write!(f, "UD sends need a destination (AH); other QP types must not have one")
            }
            PostErrorKind::BadState => write!(f, "the QP's state does not accept this post"),
            PostErrorKind::UsesSrq => write!(f, "this QP receives from an SRQ: post receives to the SRQ"),
            PostErrorKind::TooLong => write!(f, "the SGE list is longer than 4 GiB"),
            PostErrorKind::BadLocalOp => write!(
                f,
                "LOCAL_INV and BIND_MW carry no SGEs and no inline data, and a window cannot be bound ZERO_BASED"
            ),
            PostErrorKind::InlineNeedsBytes => {
                write!(f, "INLINE sends through the safe API take their payload as bytes (post_send_inline)")
            }
            PostErrorKind::Doorbell(e) => {
                write!(f, "the doorbell write() failed: {}", nix::errno::Errno::from_raw(e).desc())
            }
        }
    }
}

impl std::error::Error for PostError {}

/// `enum ibv_wc_status`: whether a work request succeeded, and if not why.
///
/// A transparent `u32` (like [`WcOpcode`]) so a completion is copied out of
/// the ring as it is; the kernel's `ib_wc_status` numbers are libibverbs'.
/// A value above [`WcStatus::GENERAL_ERR`] is possible only from a kernel
/// newer than this library; [`Display`](std::fmt::Display) calls it a
/// general error, as `ibv_wc_status_str` does.
///
/// # What soft-RoCE (rxe) reports
/// The status is the kernel's (or the device's), passed on as it is; the
/// constants' docs give the IBTA meaning. rxe does not always give that
/// status for a mistake, and its answer changed between kernels. What the
/// VM tests (`tests/completion_status.rs`) pin, an RC requester A and
/// responder B:
///
/// | mistake | 6.1 | 6.12 |
/// | --- | --- | --- |
/// | SEND/WRITE source SGE with a wrong lkey (e.g. a region of another PD) | A: `LOC_QP_OP_ERR` | A: `WR_FLUSH_ERR` |
/// | SEND/WRITE source SGE past the end of its region | A: `LOC_PROT_ERR` | A: `WR_FLUSH_ERR` |
/// | READ destination SGE with a wrong lkey | A: `LOC_PROT_ERR` | A: `LOC_PROT_ERR` |
/// | SEND larger than the receive (IBTA: `LOC_LEN_ERR`) | B: `LOC_QP_OP_ERR`, A: `REM_OP_ERR` | the same |
/// | receive SGE of a region of another PD | B: `LOC_QP_OP_ERR`, A: `REM_OP_ERR` | the same |
/// | WRITE to a region without `REMOTE_WRITE`, past the peer's region, or with an rkey of another PD | A: `REM_ACCESS_ERR` | the same |
/// | SEND with no receive posted, `rnr_retry` below 7 | A: `RNR_RETRY_EXC_ERR` | the same |
///
/// Any error moves the QP to ERR: what was outstanding, and every send
/// posted later, completes with `WR_FLUSH_ERR` (the posts are accepted). So
/// on 6.12 the first error of a bad local SGE is itself a flush: read
/// `WR_FLUSH_ERR` as "look at the first completion of this QP, or at the
/// request's SGEs". With rnr_retry 7 (the default) rxe waits for a receive
/// forever, and with retry_cnt 7 it retries a peer that is gone forever:
/// no completion at all. The repository's docs/TROUBLESHOOTING.md has the
/// same table with the other traps.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcStatus(pub u32);

impl WcStatus {
    /// `IBV_WC_SUCCESS`.
    pub const SUCCESS: WcStatus = WcStatus(IBV_WC_SUCCESS);
    /// `IBV_WC_LOC_LEN_ERR`: the receive buffer was too small (or similar).
    /// rxe reports a too-small receive as [`LOC_QP_OP_ERR`](Self::LOC_QP_OP_ERR)
    /// instead (6.1 and 6.12; the sender gets [`REM_OP_ERR`](Self::REM_OP_ERR)).
    pub const LOC_LEN_ERR: WcStatus = WcStatus(IBV_WC_LOC_LEN_ERR);
    /// `IBV_WC_LOC_QP_OP_ERR`: the QP could not carry out the request (a
    /// malformed WQE). On rxe also: a receive too small for the SEND or on
    /// a region of another PD, and (6.1) a send whose SGE has a wrong lkey.
    pub const LOC_QP_OP_ERR: WcStatus = WcStatus(IBV_WC_LOC_QP_OP_ERR);
    /// `IBV_WC_LOC_EEC_OP_ERR`.
    pub const LOC_EEC_OP_ERR: WcStatus = WcStatus(IBV_WC_LOC_EEC_OP_ERR);
    /// `IBV_WC_LOC_PROT_ERR`: bad lkey or address outside the region. On
    /// rxe: where the device writes local memory (a READ's destination);
    /// for a send's source SGE 6.1 reports it past the region's end only,
    /// and 6.12 flushes the request instead ([`WR_FLUSH_ERR`](Self::WR_FLUSH_ERR)).
    pub const LOC_PROT_ERR: WcStatus = WcStatus(IBV_WC_LOC_PROT_ERR);
    /// `IBV_WC_WR_FLUSH_ERR`: flushed because the QP is in error: the
    /// request was outstanding when the QP went to ERR, or posted after.
    /// On rxe 6.12 also the first error of a send whose SGE has a wrong
    /// lkey or runs past its region: see the table above.
    pub const WR_FLUSH_ERR: WcStatus = WcStatus(IBV_WC_WR_FLUSH_ERR);
    /// `IBV_WC_MW_BIND_ERR`.
    pub const MW_BIND_ERR: WcStatus = WcStatus(IBV_WC_MW_BIND_ERR);
    /// `IBV_WC_BAD_RESP_ERR`.
    pub const BAD_RESP_ERR: WcStatus = WcStatus(IBV_WC_BAD_RESP_ERR);
    /// `IBV_WC_LOC_ACCESS_ERR`.
    pub const LOC_ACCESS_ERR: WcStatus = WcStatus(IBV_WC_LOC_ACCESS_ERR);
    /// `IBV_WC_REM_INV_REQ_ERR`.
    pub const REM_INV_REQ_ERR: WcStatus = WcStatus(IBV_WC_REM_INV_REQ_ERR);
    /// `IBV_WC_REM_ACCESS_ERR`: the peer refused the rkey/range/access: a
    /// region without the remote right, a range past its end, an rkey of
    /// another PD than the responder QP's, or a revoked memory window.
    pub const REM_ACCESS_ERR: WcStatus = WcStatus(IBV_WC_REM_ACCESS_ERR);
    /// `IBV_WC_REM_OP_ERR`: the responder could not carry out the request;
    /// on rxe the sender's side of a receive that was too small or invalid.
    pub const REM_OP_ERR: WcStatus = WcStatus(IBV_WC_REM_OP_ERR);
    /// `IBV_WC_RETRY_EXC_ERR`: the peer did not acknowledge within
    /// `retry_cnt` retries (rxe retries forever with 7, the default).
    pub const RETRY_EXC_ERR: WcStatus = WcStatus(IBV_WC_RETRY_EXC_ERR);
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: the peer had no receive posted, through
    /// `rnr_retry` retries (7, the default, retries forever).
    pub const RNR_RETRY_EXC_ERR: WcStatus = WcStatus(IBV_WC_RNR_RETRY_EXC_ERR);
    /// `IBV_WC_LOC_RDD_VIOL_ERR`.
    pub const LOC_RDD_VIOL_ERR: WcStatus = WcStatus(IBV_WC_LOC_RDD_VIOL_ERR);
    /// `IBV_WC_REM_INV_RD_REQ_ERR`.
    pub const REM_INV_RD_REQ_ERR: WcStatus = WcStatus(IBV_WC_REM_INV_RD_REQ_ERR);
    /// `IBV_WC_REM_ABORT_ERR`.
    pub const REM_ABORT_ERR: WcStatus = WcStatus(IBV_WC_REM_ABORT_ERR);
    /// `IBV_WC_INV_EECN_ERR`.
    pub const INV_EECN_ERR: WcStatus = WcStatus(IBV_WC_INV_EECN_ERR);
    /// `IBV_WC_INV_EEC_STATE_ERR`.
    pub const INV_EEC_STATE_ERR: WcStatus = WcStatus(IBV_WC_INV_EEC_STATE_ERR);
    /// `IBV_WC_FATAL_ERR`.
    pub const FATAL_ERR: WcStatus = WcStatus(IBV_WC_FATAL_ERR);
    /// `IBV_WC_RESP_TIMEOUT_ERR`.
    pub const RESP_TIMEOUT_ERR: WcStatus = WcStatus(IBV_WC_RESP_TIMEOUT_ERR);
    /// `IBV_WC_GENERAL_ERR` (also any value this library does not know).
    pub const GENERAL_ERR: WcStatus = WcStatus(IBV_WC_GENERAL_ERR);

    /// The variant's name (`"WR_FLUSH_ERR"`), or `None` for an unknown value.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            WcStatus::SUCCESS => "SUCCESS",
            WcStatus::LOC_LEN_ERR => "LOC_LEN_ERR",
            WcStatus::LOC_QP_OP_ERR => "LOC_QP_OP_ERR",
            WcStatus::LOC_EEC_OP_ERR => "LOC_EEC_OP_ERR",
            WcStatus::LOC_PROT_ERR => "LOC_PROT_ERR",
            WcStatus::WR_FLUSH_ERR => "WR_FLUSH_ERR",
            WcStatus::MW_BIND_ERR => "MW_BIND_ERR",
            WcStatus::BAD_RESP_ERR => "BAD_RESP_ERR",
            WcStatus::LOC_ACCESS_ERR => "LOC_ACCESS_ERR",
            WcStatus::REM_INV_REQ_ERR => "REM_INV_REQ_ERR",
            WcStatus::REM_ACCESS_ERR => "REM_ACCESS_ERR",
            WcStatus::REM_OP_ERR => "REM_OP_ERR",
            WcStatus::RETRY_EXC_ERR => "RETRY_EXC_ERR",
            WcStatus::RNR_RETRY_EXC_ERR => "RNR_RETRY_EXC_ERR",
            WcStatus::LOC_RDD_VIOL_ERR => "LOC_RDD_VIOL_ERR",
            WcStatus::REM_INV_RD_REQ_ERR => "REM_INV_RD_REQ_ERR",
            WcStatus::REM_ABORT_ERR => "REM_ABORT_ERR",
            WcStatus::INV_EECN_ERR => "INV_EECN_ERR",
            WcStatus::INV_EEC_STATE_ERR => "INV_EEC_STATE_ERR",
            WcStatus::FATAL_ERR => "FATAL_ERR",
            WcStatus::RESP_TIMEOUT_ERR => "RESP_TIMEOUT_ERR",
            WcStatus::GENERAL_ERR => "GENERAL_ERR",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for WcStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "WcStatus({})", self.0),
        }
    }
}

impl std::fmt::Display for WcStatus {
    /// The strings of `ibv_wc_status_str`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match *self {
            WcStatus::SUCCESS => "success",
            WcStatus::LOC_LEN_ERR => "local length error",
            WcStatus::LOC_QP_OP_ERR => "local QP operation error",
            WcStatus::LOC_EEC_OP_ERR => "local EE context operation error",
            WcStatus::LOC_PROT_ERR => "local protection error",
            WcStatus::WR_FLUSH_ERR => "Work Request Flushed Error",
            WcStatus::MW_BIND_ERR => "memory management operation error",
            WcStatus::BAD_RESP_ERR => "bad response error",
            WcStatus::LOC_ACCESS_ERR => "local access error",
            WcStatus::REM_INV_REQ_ERR => "remote invalid request error",
            WcStatus::REM_ACCESS_ERR => "remote access error",
            WcStatus::REM_OP_ERR => "remote operation error",
            WcStatus::RETRY_EXC_ERR => "transport retry counter exceeded",
            WcStatus::RNR_RETRY_EXC_ERR => "RNR retry counter exceeded",
            WcStatus::LOC_RDD_VIOL_ERR => "local RDD violation error",
            WcStatus::REM_INV_RD_REQ_ERR => "remote invalid RD request",
            WcStatus::REM_ABORT_ERR => "aborted error",
            WcStatus::INV_EECN_ERR => "invalid EE context number",
            WcStatus::INV_EEC_STATE_ERR => "invalid EE context state",
            WcStatus::FATAL_ERR => "fatal error",
            WcStatus::RESP_TIMEOUT_ERR => "response timeout error",
            _ => "general error",
        })
    }
}

/// `enum ibv_wc_opcode`: what a completion reports as done.
///
/// A transparent `u32` rather than an enum, so a completion is copied out
/// of the ring without translating it and an unknown value (error
/// completions may carry anything here) survives as it is. Match on the
/// constants: `match wc.opcode { WcOpcode::SEND => .., WcOpcode(other) => .. }`.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcOpcode(pub u32);

impl WcOpcode {
    /// `IBV_WC_SEND`.
    pub const SEND: WcOpcode = WcOpcode(IBV_WC_SEND);
    /// `IBV_WC_RDMA_WRITE`.
    pub const RDMA_WRITE: WcOpcode = WcOpcode(IBV_WC_RDMA_WRITE);
    /// `IBV_WC_RDMA_READ`.
    pub const RDMA_READ: WcOpcode = WcOpcode(IBV_WC_RDMA_READ);
    /// `IBV_WC_COMP_SWAP`.
    pub const COMP_SWAP: WcOpcode = WcOpcode(IBV_WC_COMP_SWAP);
    /// `IBV_WC_FETCH_ADD`.
    pub const FETCH_ADD: WcOpcode = WcOpcode(IBV_WC_FETCH_ADD);
    /// `IBV_WC_BIND_MW`.
    pub const BIND_MW: WcOpcode = WcOpcode(IBV_WC_BIND_MW);
    /// `IBV_WC_LOCAL_INV`.
    pub const LOCAL_INV: WcOpcode = WcOpcode(IBV_WC_LOCAL_INV);
    /// `IBV_WC_RECV`: a SEND (with or without immediate) arrived.
    pub const RECV: WcOpcode = WcOpcode(IBV_WC_RECV);
    /// `IBV_WC_RECV_RDMA_WITH_IMM`: an RDMA WRITE with immediate arrived.
    pub const RECV_RDMA_WITH_IMM: WcOpcode = WcOpcode(IBV_WC_RECV_RDMA_WITH_IMM);

    /// True for receive-side completions (`opcode & IBV_WC_RECV`, as
    /// libibverbs defines it).
    #[inline]
    pub fn is_recv(self) -> bool {
        self.0 & IBV_WC_RECV != 0
    }

    /// The libibverbs name without its prefix (`"SEND"`), or `None` for a
    /// value this library does not name.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            WcOpcode::SEND => "SEND",
            WcOpcode::RDMA_WRITE => "RDMA_WRITE",
            WcOpcode::RDMA_READ => "RDMA_READ",
            WcOpcode::COMP_SWAP => "COMP_SWAP",
            WcOpcode::FETCH_ADD => "FETCH_ADD",
            WcOpcode::BIND_MW => "BIND_MW",
            WcOpcode::LOCAL_INV => "LOCAL_INV",
            WcOpcode::RECV => "RECV",
            WcOpcode::RECV_RDMA_WITH_IMM => "RECV_RDMA_WITH_IMM",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for WcOpcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "WcOpcode({})", self.0),
        }
    }
}

bitflags! {
    /// `enum ibv_wc_flags`, in libibverbs' bit values (providers map their
    /// own: rxe copies the kernel's `IB_WC_*`, where bits 2 and 3 are swapped).
        ///
    /// `#[repr(transparent)]` over its `u32`: providers copy CQE words into
    /// a [`Wc`] as they are.
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct WcFlags: u32 {
        /// `IBV_WC_GRH`: the first 40 bytes of the buffer hold a GRH (UD).
        const GRH = IBV_WC_GRH;
        /// `IBV_WC_WITH_IMM`: `imm_data` is valid.
        const WITH_IMM = IBV_WC_WITH_IMM;
        /// `IBV_WC_IP_CSUM_OK`.
        const IP_CSUM_OK = IBV_WC_IP_CSUM_OK;
        /// `IBV_WC_WITH_INV`: `invalidated_rkey` is valid.
        const WITH_INV = IBV_WC_WITH_INV;
    }
}

/// A work completion (`struct ibv_wc`).
///
/// Laid out like the kernel's `struct ib_uverbs_wc` (48 bytes, the same
/// field order as libibverbs' `ibv_wc`), so a provider whose ring holds
/// that struct (rxe) turns a CQE into a `Wc` with a few wide copies and
/// three fix-ups (status range, flag bits, immediate byte order).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// The `wr_id` of the work request.
    pub wr_id: u64,
    /// Success or why not.
    pub status: WcStatus,
    /// What completed (valid on success; receives always).
    pub opcode: WcOpcode,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// Bytes received or transferred.
    pub byte_len: u32,
    /// Immediate data in host order (`WITH_IMM`), or the invalidated rkey (`WITH_INV`).
    pub imm_data: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Remote QP number (UD receives).
    pub src_qp: u32,
    /// Flags.
    pub wc_flags: WcFlags,
    /// P_Key index (UD/GSI receives).
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
    /// Port the completion came from.
    pub port_num: u8,
}

impl Default for Wc {
    fn default() -> Self {
        Wc {
            wr_id: 0,
            status: WcStatus::SUCCESS,
            opcode: WcOpcode::SEND,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num: 0,
            src_qp: 0,
            wc_flags: WcFlags::empty(),
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: 0,
        }
    }
}

impl Wc {
    /// True for `WcStatus::SUCCESS`.
    pub fn is_success(&self) -> bool {
        self.status == WcStatus::SUCCESS
    }

    /// The immediate data, in host order, of a completion that carries one
    /// (`WITH_IMM`): `ibv_wc.imm_data` with `ntohl` applied.
    ///
    /// ```
    /// use rverbs_providers::wr::{Wc, WcFlags};
    /// let wc = Wc { imm_data: 0xbeef, wc_flags: WcFlags::WITH_IMM, ..Wc::default() };
    /// assert_eq!((wc.imm(), wc.invalidated_rkey()), (Some(0xbeef), None));
    /// ```
    pub fn imm(&self) -> Option<u32> {
        self.wc_flags.contains(WcFlags::WITH_IMM).then_some(self.imm_data)
    }

    /// The rkey a `SEND_WITH_INV` invalidated (`WITH_INV`).
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.wc_flags.contains(WcFlags::WITH_INV).then_some(self.imm_data)
    }

    /// `Ok(self)` on success, else an error that names the status, the
    /// work request and the QP (for `?` in completion loops).
    pub fn ok(self) -> Result<Wc, WcError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(WcError(self))
        }
    }
}

/// A completion with an error status ([`Wc::ok`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcError(pub Wc);

impl std::fmt::Display for WcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.0;
        write!(
            f,
            "work request {} on QP {:#x} completed with {} ({:?}, vendor error {:#x})",
            w.wr_id, w.qp_num, w.status, w.status, w.vendor_err
        )
    }
}

impl std::error::Error for WcError {}

// `Wc` keeps `ib_uverbs_wc`'s size and field offsets (see its doc comment).
const _: () = {
    use rverbs_uapi::ib_user_verbs::ib_uverbs_wc;
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Wc>() == size_of::<ib_uverbs_wc>());
    assert!(offset_of!(Wc, status) == offset_of!(ib_uverbs_wc, status));
    assert!(offset_of!(Wc, opcode) == offset_of!(ib_uverbs_wc, opcode));
    assert!(offset_of!(Wc, imm_data) == offset_of!(ib_uverbs_wc, ex));
    assert!(offset_of!(Wc, wc_flags) == offset_of!(ib_uverbs_wc, wc_flags));
    assert!(offset_of!(Wc, pkey_index) == offset_of!(ib_uverbs_wc, pkey_index));
    assert!(offset_of!(Wc, port_num) == offset_of!(ib_uverbs_wc, port_num));
};

#[cfg(test)]
mod wc_tests {
    use super::*;

    #[test]
    fn imm_and_invalidated_rkey_follow_the_flags() {
        let w = Wc { imm_data: 0x1234_5678, wc_flags: WcFlags::WITH_IMM, ..Wc::default() };
        assert_eq!((w.imm(), w.invalidated_rkey()), (Some(0x1234_5678), None));
        let w = Wc { imm_data: 0x77, wc_flags: WcFlags::WITH_INV, ..Wc::default() };
        assert_eq!((w.imm(), w.invalidated_rkey()), (None, Some(0x77)));
        assert_eq!(Wc::default().imm(), None);
    }

    #[test]
    fn status_and_opcode_print_like_libibverbs() {
        assert_eq!(WcStatus::WR_FLUSH_ERR.to_string(), "Work Request Flushed Error");
        assert_eq!(format!("{:?}", WcStatus::REM_ACCESS_ERR), "REM_ACCESS_ERR");
        // A status newer than this library: ibv_wc_status_str's fallback.
        assert_eq!(WcStatus(99).to_string(), "general error");
        assert_eq!(format!("{:?}", WcStatus(99)), "WcStatus(99)");
        assert_eq!(format!("{:?}", WcOpcode::RECV_RDMA_WITH_IMM), "RECV_RDMA_WITH_IMM");
        assert_eq!(format!("{:?}", WcOpcode(0x77)), "WcOpcode(119)");
        assert!(WcOpcode::RECV.is_recv() && WcOpcode::RECV_RDMA_WITH_IMM.is_recv());
        assert!(!WcOpcode::RDMA_READ.is_recv());
        assert!(Wc { status: WcStatus::SUCCESS, ..Wc::default() }.is_success());
    }
}
