//! The data-path vocabulary shared by every provider: scatter/gather
//! entries, send and receive work requests, work completions.
//!
//! These are provider-neutral; each provider encodes them into its own WQE
//! layout (rxe: `rxe_send_wqe`; mlx5: WQE segments) and decodes its CQEs into
//! [`Wc`].

use bitflags::bitflags;
use rverbs_uapi::ib_verbs_values::*;

/// A scatter/gather entry: `addr..addr+length` inside the memory region
/// whose local key is `lkey` (`struct ibv_sge`; byte-identical to
/// `ib_uverbs_sge` and `rxe_sge`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
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
        }
    }

    /// True for the two atomics.
    pub fn is_atomic(self) -> bool {
        matches!(self, SendOp::AtomicCmpAndSwp { .. } | SendOp::AtomicFetchAndAdd { .. })
    }
}

/// Where a UD send goes: an address handle (its provider data) and the
/// remote QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// rxe: the kernel's AH number.
    pub ah_num: u32,
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

/// A send work request, as the providers see it. The SGEs must describe
/// registered memory; with `INLINE` their bytes are copied at post time.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation and operands.
    pub op: SendOp,
    /// Flags.
    pub flags: SendFlags,
    /// Local buffers (gathered for sends/writes, scattered for reads/atomics).
    pub sgl: &'a [Sge],
    /// UD only: the destination.
    pub ud: Option<UdDest>,
}

/// A receive work request.
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffers to scatter the incoming message into.
    pub sgl: &'a [Sge],
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
    /// receive: INIT or later).
    BadState,
    /// The SGE list's total length overflows 32 bits.
    TooLong,
    /// The doorbell `write()` failed with this errno. The requests before
    /// `index` are in the ring all the same (the kernel takes them on the
    /// next successful doorbell); `index` may equal the list's length.
    Doorbell(i32),
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
            PostErrorKind::BadAtomic => write!(f, "atomics need exactly one 8-byte SGE and an 8-byte aligned remote address"),
            PostErrorKind::BadDestination => write!(f, "UD sends need a destination (AH); other QP types must not have one"),
            PostErrorKind::BadState => write!(f, "the QP's state does not accept this post"),
            PostErrorKind::TooLong => write!(f, "the SGE list is longer than 4 GiB"),
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

/// `enum ibv_wc_status`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS`.
    Success = IBV_WC_SUCCESS,
    /// `IBV_WC_LOC_LEN_ERR`: the receive buffer was too small (or similar).
    LocLenErr = IBV_WC_LOC_LEN_ERR,
    /// `IBV_WC_LOC_QP_OP_ERR`.
    LocQpOpErr = IBV_WC_LOC_QP_OP_ERR,
    /// `IBV_WC_LOC_EEC_OP_ERR`.
    LocEecOpErr = IBV_WC_LOC_EEC_OP_ERR,
    /// `IBV_WC_LOC_PROT_ERR`: bad lkey or address outside the region.
    LocProtErr = IBV_WC_LOC_PROT_ERR,
    /// `IBV_WC_WR_FLUSH_ERR`: flushed because the QP is in error.
    WrFlushErr = IBV_WC_WR_FLUSH_ERR,
    /// `IBV_WC_MW_BIND_ERR`.
    MwBindErr = IBV_WC_MW_BIND_ERR,
    /// `IBV_WC_BAD_RESP_ERR`.
    BadRespErr = IBV_WC_BAD_RESP_ERR,
    /// `IBV_WC_LOC_ACCESS_ERR`.
    LocAccessErr = IBV_WC_LOC_ACCESS_ERR,
    /// `IBV_WC_REM_INV_REQ_ERR`.
    RemInvReqErr = IBV_WC_REM_INV_REQ_ERR,
    /// `IBV_WC_REM_ACCESS_ERR`: the peer refused the rkey/range/access.
    RemAccessErr = IBV_WC_REM_ACCESS_ERR,
    /// `IBV_WC_REM_OP_ERR`.
    RemOpErr = IBV_WC_REM_OP_ERR,
    /// `IBV_WC_RETRY_EXC_ERR`.
    RetryExcErr = IBV_WC_RETRY_EXC_ERR,
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: the peer had no receive posted.
    RnrRetryExcErr = IBV_WC_RNR_RETRY_EXC_ERR,
    /// `IBV_WC_LOC_RDD_VIOL_ERR`.
    LocRddViolErr = IBV_WC_LOC_RDD_VIOL_ERR,
    /// `IBV_WC_REM_INV_RD_REQ_ERR`.
    RemInvRdReqErr = IBV_WC_REM_INV_RD_REQ_ERR,
    /// `IBV_WC_REM_ABORT_ERR`.
    RemAbortErr = IBV_WC_REM_ABORT_ERR,
    /// `IBV_WC_INV_EECN_ERR`.
    InvEecnErr = IBV_WC_INV_EECN_ERR,
    /// `IBV_WC_INV_EEC_STATE_ERR`.
    InvEecStateErr = IBV_WC_INV_EEC_STATE_ERR,
    /// `IBV_WC_FATAL_ERR`.
    FatalErr = IBV_WC_FATAL_ERR,
    /// `IBV_WC_RESP_TIMEOUT_ERR`.
    RespTimeoutErr = IBV_WC_RESP_TIMEOUT_ERR,
    /// `IBV_WC_GENERAL_ERR` (also any value this library does not know).
    GeneralErr = IBV_WC_GENERAL_ERR,
}

impl WcStatus {
    /// From the kernel/provider value; unknown values become `GeneralErr`.
    pub fn from_raw(v: u32) -> Self {
        use WcStatus::*;
        const ALL: [WcStatus; 22] = [
            Success, LocLenErr, LocQpOpErr, LocEecOpErr, LocProtErr, WrFlushErr, MwBindErr, BadRespErr,
            LocAccessErr, RemInvReqErr, RemAccessErr, RemOpErr, RetryExcErr, RnrRetryExcErr, LocRddViolErr,
            RemInvRdReqErr, RemAbortErr, InvEecnErr, InvEecStateErr, FatalErr, RespTimeoutErr, GeneralErr,
        ];
        ALL.get(v as usize).copied().unwrap_or(GeneralErr)
    }
}

impl std::fmt::Display for WcStatus {
    /// The strings of `ibv_wc_status_str`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use WcStatus::*;
        f.write_str(match self {
            Success => "success",
            LocLenErr => "local length error",
            LocQpOpErr => "local QP operation error",
            LocEecOpErr => "local EE context operation error",
            LocProtErr => "local protection error",
            WrFlushErr => "Work Request Flushed Error",
            MwBindErr => "memory management operation error",
            BadRespErr => "bad response error",
            LocAccessErr => "local access error",
            RemInvReqErr => "remote invalid request error",
            RemAccessErr => "remote access error",
            RemOpErr => "remote operation error",
            RetryExcErr => "transport retry counter exceeded",
            RnrRetryExcErr => "RNR retry counter exceeded",
            LocRddViolErr => "local RDD violation error",
            RemInvRdReqErr => "remote invalid RD request",
            RemAbortErr => "aborted error",
            InvEecnErr => "invalid EE context number",
            InvEecStateErr => "invalid EE context state",
            FatalErr => "fatal error",
            RespTimeoutErr => "response timeout error",
            GeneralErr => "general error",
        })
    }
}

/// `enum ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcOpcode {
    /// `IBV_WC_SEND`.
    Send,
    /// `IBV_WC_RDMA_WRITE`.
    RdmaWrite,
    /// `IBV_WC_RDMA_READ`.
    RdmaRead,
    /// `IBV_WC_COMP_SWAP`.
    CompSwap,
    /// `IBV_WC_FETCH_ADD`.
    FetchAdd,
    /// `IBV_WC_BIND_MW`.
    BindMw,
    /// `IBV_WC_LOCAL_INV`.
    LocalInv,
    /// `IBV_WC_RECV`: a SEND (with or without immediate) arrived.
    Recv,
    /// `IBV_WC_RECV_RDMA_WITH_IMM`: an RDMA WRITE with immediate arrived.
    RecvRdmaWithImm,
    /// Any other value (error completions may carry garbage here).
    Other(u32),
}

impl WcOpcode {
    /// From the kernel's `ib_wc_opcode` value.
    pub fn from_raw(v: u32) -> Self {
        match v {
            IBV_WC_SEND => WcOpcode::Send,
            IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
            IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
            IBV_WC_COMP_SWAP => WcOpcode::CompSwap,
            IBV_WC_FETCH_ADD => WcOpcode::FetchAdd,
            IBV_WC_BIND_MW => WcOpcode::BindMw,
            IBV_WC_LOCAL_INV => WcOpcode::LocalInv,
            IBV_WC_RECV => WcOpcode::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
            o => WcOpcode::Other(o),
        }
    }

    /// True for receive-side completions.
    pub fn is_recv(self) -> bool {
        matches!(self, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
    }
}

bitflags! {
    /// `enum ibv_wc_flags`, in libibverbs' bit values (providers map their
    /// own: rxe copies the kernel's `IB_WC_*`, where bits 2 and 3 are swapped).
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
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
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
    /// True for `WcStatus::Success`.
    pub fn is_success(&self) -> bool {
        self.status == WcStatus::Success
    }
}
