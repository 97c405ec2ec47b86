//! The QP state machine: which `MODIFY_QP` transitions the kernel accepts,
//! and which attribute-mask bits each one requires or allows.
//!
//! The kernel checks every modify with `ib_modify_qp_is_ok()`
//! (`drivers/infiniband/core/verbs.c`), which looks the transition up in
//! `qp_state_table`: per (current state, next state) a `valid` flag, and per
//! QP type a set of *required* and a set of *optional* `ib_qp_attr_mask`
//! bits. The table follows the IBTA specification, vol. 1, chapter 10.3
//! ("QP state transitions"; the per-transition attribute lists of
//! chapter 11.2.5 "Modify QP"). rxe, mlx5 and most other drivers call it
//! from their `modify_qp`; a refused modify comes back as a bare `EINVAL`.
//!
//! [`check_transition`] applies the same rule in userspace, so rverbs can
//! refuse an illegal modify before the syscall, with an error that names the
//! states and the offending bits ([`TransitionError`]). [`required_bits`] and
//! [`optional_bits`] expose the table for code that fills in a mask.
//!
//! The table is expressed below as one `Rule` per legal transition, with
//! a column per QP type. Only the types userspace can create through uverbs
//! are kept (RC, UC, UD, RAW_PACKET, XRC_INI, XRC_TGT); the kernel's GSI and
//! SMI rows (special QP0/QP1, kernel-owned) are left out.
//!
//! ## Kernel behaviour reproduced on top of the table
//!
//! * **Next state.** The kernel's next state is `attr.qp_state` only when the
//!   mask has `STATE`; otherwise the modify is attribute-only and the
//!   transition checked is `cur -> cur` (drivers compute
//!   `new_state = mask & IB_QP_STATE ? attr->qp_state : cur_state`).
//! * **`STATE` itself** is never forbidden (`mask & ~(req | opt | IB_QP_STATE)`).
//! * **`CUR_STATE`** is refused unless the current state is RTR, RTS, SQD or
//!   SQE (an explicit test in `ib_modify_qp_is_ok()`; the table agrees).
//! * **uverbs mask rewriting** (`uverbs_cmd.c:modify_qp()`), done before the
//!   driver sees the mask:
//!   - `modify_qp_mask()` silently clears `MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER`
//!     for XRC_INI and `MAX_QP_RD_ATOMIC | RETRY_CNT | RNR_RETRY` for
//!     XRC_TGT, so those bits are accepted (and ignored) for those types;
//!   - when `AV` is set without `PORT` and the modify is not a move to RTR,
//!     uverbs adds `PORT` (taken from the AV's port). This only matters for
//!     SQD->SQD, where it makes a UC `AV` change fail (the UC SQD->SQD row
//!     allows `AV` but not `PORT`).
//!
//! Not modelled: link-layer specifics. Older kernels (3.14 to 4.x) passed the
//! link layer to `ib_modify_qp_is_ok()` and added Ethernet-only bits
//! (`IB_QP_SMAC`, `IB_QP_VID`, ...) to the RoCE INIT->RTR row; current kernels
//! resolve the RoCE DMAC from the `AV` GID instead, so the table is the same
//! for InfiniBand and RoCE. `RATE_LIMIT` (RAW_PACKET RTR->RTS and RTS->RTS)
//! is only accepted by the extended `EX_MODIFY_QP` command; plain
//! `MODIFY_QP` refuses any bit above `DEST_QPN` with `EOPNOTSUPP` before the
//! state check, which is not this module's business.

use core::fmt;

bitflags::bitflags! {
    /// `enum ib_qp_attr_mask` (include/rdma/ib_verbs.h), the bits of `ib_uverbs_modify_qp.attr_mask`.
    ///
    /// Each bit says "this field of the modify command is valid". The same
    /// values are libibverbs' `IBV_QP_*`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct QpAttrMask: u32 {
        /// `IB_QP_STATE`: `qp_state` is the state to move to.
        const STATE = 1;
        /// `IB_QP_CUR_STATE`: `cur_qp_state` asserts the current state.
        const CUR_STATE = 1 << 1;
        /// `IB_QP_EN_SQD_ASYNC_NOTIFY`: raise an event when the SQ is drained.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// `IB_QP_ACCESS_FLAGS`: `qp_access_flags` (remote read/write/atomic).
        const ACCESS_FLAGS = 1 << 3;
        /// `IB_QP_PKEY_INDEX`: `pkey_index`.
        const PKEY_INDEX = 1 << 4;
        /// `IB_QP_PORT`: `port_num`.
        const PORT = 1 << 5;
        /// `IB_QP_QKEY`: `qkey` (UD).
        const QKEY = 1 << 6;
        /// `IB_QP_AV`: the primary path, `dest` (address vector).
        const AV = 1 << 7;
        /// `IB_QP_PATH_MTU`: `path_mtu`.
        const PATH_MTU = 1 << 8;
        /// `IB_QP_TIMEOUT`: local ACK `timeout`.
        const TIMEOUT = 1 << 9;
        /// `IB_QP_RETRY_CNT`: `retry_cnt`.
        const RETRY_CNT = 1 << 10;
        /// `IB_QP_RNR_RETRY`: `rnr_retry`.
        const RNR_RETRY = 1 << 11;
        /// `IB_QP_RQ_PSN`: `rq_psn`.
        const RQ_PSN = 1 << 12;
        /// `IB_QP_MAX_QP_RD_ATOMIC`: `max_rd_atomic` (outstanding as initiator).
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `IB_QP_ALT_PATH`: the alternate path (`alt_dest`, `alt_port_num`, ...).
        const ALT_PATH = 1 << 14;
        /// `IB_QP_MIN_RNR_TIMER`: `min_rnr_timer`.
        const MIN_RNR_TIMER = 1 << 15;
        /// `IB_QP_SQ_PSN`: `sq_psn`.
        const SQ_PSN = 1 << 16;
        /// `IB_QP_MAX_DEST_RD_ATOMIC`: `max_dest_rd_atomic` (as responder).
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `IB_QP_PATH_MIG_STATE`: `path_mig_state` (APM).
        const PATH_MIG_STATE = 1 << 18;
        /// `IB_QP_CAP`: queue capacities (not supported by modify in practice).
        const CAP = 1 << 19;
        /// `IB_QP_DEST_QPN`: `dest_qp_num`.
        const DEST_QPN = 1 << 20;
        /// `IB_QP_RATE_LIMIT`: packet pacing rate (`EX_MODIFY_QP` only).
        const RATE_LIMIT = 1 << 25;
    }
}

impl fmt::Display for QpAttrMask {
    /// The set bits by name in bit order, joined with `" | "`, e.g.
    /// `PATH_MTU | DEST_QPN`; bits without a name print as one hex number at
    /// the end; an empty mask prints `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let r = if first { Ok(()) } else { f.write_str(" | ") };
            first = false;
            r
        };
        for (name, _) in self.iter_names() {
            sep(f)?;
            f.write_str(name)?;
        }
        let unnamed = self.bits() & !Self::all().bits();
        if unnamed != 0 {
            sep(f)?;
            write!(f, "{unnamed:#x}")?;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// `enum ib_qp_state`: the state of a queue pair (IBTA vol. 1, 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum QpState {
    /// `IB_QPS_RESET` (0): just created, or reset; no work is processed.
    Reset = 0,
    /// `IB_QPS_INIT` (1): receive WRs can be posted but are not processed.
    Init = 1,
    /// `IB_QPS_RTR` (2): ready to receive.
    Rtr = 2,
    /// `IB_QPS_RTS` (3): ready to send.
    Rts = 3,
    /// `IB_QPS_SQD` (4): send queue drain(ing/ed).
    Sqd = 4,
    /// `IB_QPS_SQE` (5): send queue error (UC/UD only, per IBTA).
    Sqe = 5,
    /// `IB_QPS_ERR` (6): error; outstanding WRs complete with flush errors.
    Err = 6,
}

impl QpState {
    /// Every state, in numeric order.
    const ALL: [QpState; 7] =
        [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err];

    /// From the kernel's numeric value (`qp_state`, `cur_qp_state`); `None`
    /// above ERR (6), which the kernel refuses with `EINVAL`.
    pub fn from_raw(v: u8) -> Option<Self> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// The state's name as the kernel and the IBTA spec spell it.
    fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }
}

impl fmt::Display for QpState {
    /// `RESET`, `INIT`, `RTR`, `RTS`, `SQD`, `SQE` or `ERR`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The QP types userspace can create (`enum ib_uverbs_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// Raw Ethernet packet QP (mlx5).
    RawPacket,
    /// XRC initiator (send side).
    XrcIni,
    /// XRC target (receive side, owned by an XRC domain).
    XrcTgt,
}

impl QpType {
    /// The value of `IB_UVERBS_QPT_*` (also `IB_QPT_*`): RC 2, UC 3, UD 4,
    /// RAW_PACKET 8, XRC_INI 9, XRC_TGT 10.
    pub fn to_kernel(self) -> u32 {
        match self {
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
            QpType::RawPacket => 8,
            QpType::XrcIni => 9,
            QpType::XrcTgt => 10,
        }
    }

    /// The type's kernel name without the `IB_QPT_` prefix.
    fn name(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::RawPacket => "RAW_PACKET",
            QpType::XrcIni => "XRC_INI",
            QpType::XrcTgt => "XRC_TGT",
        }
    }

    /// Bits uverbs' `modify_qp_mask()` clears before the driver (and so
    /// `ib_modify_qp_is_ok()`) sees the mask: fields this type ignores.
    fn ignored_bits(self) -> u32 {
        match self {
            QpType::XrcIni => bit::MAX_DEST_RD_ATOMIC | bit::MIN_RNR_TIMER,
            QpType::XrcTgt => bit::MAX_QP_RD_ATOMIC | bit::RETRY_CNT | bit::RNR_RETRY,
            _ => 0,
        }
    }
}

impl fmt::Display for QpType {
    /// `RC`, `UC`, `UD`, `RAW_PACKET`, `XRC_INI` or `XRC_TGT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a transition is refused.
///
/// The states are the ones the kernel would check: `to` is the current state
/// when the mask has no `STATE` bit (an attribute-only modify).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransitionError {
    /// `qp_state_table[from][to].valid` is 0: no such transition.
    Illegal {
        /// The QP's type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
    },
    /// The mask lacks bits the transition requires.
    MissingBits {
        /// The QP's type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
        /// The required bits that were not set.
        missing: QpAttrMask,
    },
    /// The mask has bits the transition neither requires nor allows.
    ForbiddenBits {
        /// The QP's type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
        /// The bits that are not allowed (may include bits without a name).
        forbidden: QpAttrMask,
    },
}

impl fmt::Display for TransitionError {
    /// For example:
    ///
    /// * `RC QP cannot go from RESET to RTS (legal from RESET: RESET, INIT)`
    /// * `RC QP INIT->RTR is missing attribute(s) AV | PATH_MTU (required: ...)`
    /// * `UD QP RESET->INIT does not allow attribute(s) AV (allowed: ...)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TransitionError::Illegal { qp_type, from, to } => {
                write!(f, "{qp_type} QP cannot go from {from} to {to} (legal from {from}: ")?;
                let mut first = true;
                for s in QpState::ALL.iter().filter(|&&s| find_rule(from, s).is_some()) {
                    if !first {
                        f.write_str(", ")?;
                    }
                    first = false;
                    write!(f, "{s}")?;
                }
                f.write_str(")")
            }
            TransitionError::MissingBits { qp_type, from, to, missing } => {
                let required = required_bits(qp_type, from, to).unwrap_or(QpAttrMask::empty());
                write!(f, "{qp_type} QP {from}->{to} is missing attribute(s) {missing} (required: {required})")
            }
            TransitionError::ForbiddenBits { qp_type, from, to, forbidden } => {
                let allowed = required_bits(qp_type, from, to).unwrap_or(QpAttrMask::empty())
                    | optional_bits(qp_type, from, to).unwrap_or(QpAttrMask::empty());
                write!(f, "{qp_type} QP {from}->{to} does not allow attribute(s) {forbidden} (allowed: {allowed})")?;
                if forbidden.contains(QpAttrMask::PORT) && from == QpState::Sqd && to == QpState::Sqd {
                    f.write_str("; uverbs adds PORT to an AV given without it")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TransitionError {}

/// Checks a `MODIFY_QP` the way the kernel will: `ib_modify_qp_is_ok()`
/// against `verbs.c qp_state_table` (IBTA vol. 1, 10.3 "QP state
/// transitions"), after the mask rewriting uverbs does first.
///
/// * `cur`: the QP's current state (the value of `cur_qp_state` if the mask
///   has `CUR_STATE`, as drivers do).
/// * `next`: the command's `qp_state`. It is used only when `mask` has
///   `STATE`; without it the modify is attribute-only and `cur -> cur` is
///   checked, exactly as in the kernel.
/// * `mask`: the command's `attr_mask`.
///
/// # Errors
///
/// [`TransitionError::Illegal`] if the kernel's table has no `cur -> next`
/// transition, else [`TransitionError::MissingBits`] if required bits are
/// absent, else [`TransitionError::ForbiddenBits`] if bits are set that the
/// transition neither requires nor allows. The kernel says `EINVAL` to all
/// three.
pub fn check_transition(qp_type: QpType, cur: QpState, next: QpState, mask: QpAttrMask) -> Result<(), TransitionError> {
    let to = if mask.contains(QpAttrMask::STATE) { next } else { cur };
    let raw = kernel_mask(qp_type, to, mask.bits());

    let Some(rule) = find_rule(cur, to) else {
        return Err(TransitionError::Illegal { qp_type, from: cur, to });
    };
    let p = rule.params(qp_type);

    let missing = p.req & !raw;
    if missing != 0 {
        return Err(TransitionError::MissingBits {
            qp_type,
            from: cur,
            to,
            missing: QpAttrMask::from_bits_retain(missing),
        });
    }

    let mut forbidden = raw & !(p.req | p.opt | bit::STATE);
    // ib_modify_qp_is_ok()'s explicit test; the table never allows
    // CUR_STATE elsewhere, so this only restates it.
    if raw & bit::CUR_STATE != 0 && !matches!(cur, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe) {
        forbidden |= bit::CUR_STATE;
    }
    if forbidden != 0 {
        return Err(TransitionError::ForbiddenBits {
            qp_type,
            from: cur,
            to,
            forbidden: QpAttrMask::from_bits_retain(forbidden),
        });
    }
    Ok(())
}

/// The bits a `cur -> next` modify must set, `None` if the transition is
/// illegal (`verbs.c qp_state_table`, `req_param`).
///
/// Includes `STATE` when `cur != next` (without it the kernel would not
/// change state); for `cur == next` (attribute-only modify) `STATE` is in
/// [`optional_bits`] instead. So `required_bits | optional_bits` is
/// what [`check_transition`] accepts, with two uverbs exceptions: the bits
/// uverbs silently drops for XRC QPs are accepted too, and a UC SQD->SQD
/// with `AV` is refused although the table lists `AV` (uverbs adds `PORT`).
pub fn required_bits(qp_type: QpType, cur: QpState, next: QpState) -> Option<QpAttrMask> {
    let p = find_rule(cur, next)?.params(qp_type);
    let state = if cur != next { bit::STATE } else { 0 };
    Some(QpAttrMask::from_bits_retain(p.req | state))
}

/// The bits a `cur -> next` modify may set besides the required ones,
/// `None` if the transition is illegal (`verbs.c qp_state_table`,
/// `opt_param`). Includes `STATE` when `cur == next`.
pub fn optional_bits(qp_type: QpType, cur: QpState, next: QpState) -> Option<QpAttrMask> {
    let p = find_rule(cur, next)?.params(qp_type);
    let state = if cur == next { bit::STATE } else { 0 };
    Some(QpAttrMask::from_bits_retain(p.opt | state))
}

/// The mask as the driver receives it from uverbs' `modify_qp()`: `PORT`
/// added to a lone `AV` outside a move to RTR, then the bits the QP type
/// ignores cleared (`modify_qp_mask()`).
fn kernel_mask(qp_type: QpType, to: QpState, mut raw: u32) -> u32 {
    let to_rtr = raw & bit::STATE != 0 && to == QpState::Rtr;
    if !to_rtr && raw & (bit::AV | bit::PORT) == bit::AV {
        raw |= bit::PORT;
    }
    raw & !qp_type.ignored_bits()
}

/// Raw `u32` copies of the mask bits, so the table below reads like the
/// kernel's (`A | B` in a `const` context).
mod bit {
    use super::QpAttrMask as M;
    pub const STATE: u32 = M::STATE.bits();
    pub const CUR_STATE: u32 = M::CUR_STATE.bits();
    pub const EN_SQD_ASYNC_NOTIFY: u32 = M::EN_SQD_ASYNC_NOTIFY.bits();
    pub const ACCESS_FLAGS: u32 = M::ACCESS_FLAGS.bits();
    pub const PKEY_INDEX: u32 = M::PKEY_INDEX.bits();
    pub const PORT: u32 = M::PORT.bits();
    pub const QKEY: u32 = M::QKEY.bits();
    pub const AV: u32 = M::AV.bits();
    pub const PATH_MTU: u32 = M::PATH_MTU.bits();
    pub const TIMEOUT: u32 = M::TIMEOUT.bits();
    pub const RETRY_CNT: u32 = M::RETRY_CNT.bits();
    pub const RNR_RETRY: u32 = M::RNR_RETRY.bits();
    pub const RQ_PSN: u32 = M::RQ_PSN.bits();
    pub const MAX_QP_RD_ATOMIC: u32 = M::MAX_QP_RD_ATOMIC.bits();
    pub const ALT_PATH: u32 = M::ALT_PATH.bits();
    pub const MIN_RNR_TIMER: u32 = M::MIN_RNR_TIMER.bits();
    pub const SQ_PSN: u32 = M::SQ_PSN.bits();
    pub const MAX_DEST_RD_ATOMIC: u32 = M::MAX_DEST_RD_ATOMIC.bits();
    pub const PATH_MIG_STATE: u32 = M::PATH_MIG_STATE.bits();
    pub const DEST_QPN: u32 = M::DEST_QPN.bits();
    pub const RATE_LIMIT: u32 = M::RATE_LIMIT.bits();
}

/// Required and optional bits of one transition for one QP type
/// (`req_param[type]`, `opt_param[type]`), without `STATE`.
#[derive(Clone, Copy, Debug)]
struct Params {
    req: u32,
    opt: u32,
}

/// A transition that needs (and allows) nothing but `STATE`.
const BARE: Params = Params { req: 0, opt: 0 };

/// A transition with required bits only.
const fn req(req: u32) -> Params {
    Params { req, opt: 0 }
}

/// A transition with optional bits only.
const fn opt(opt: u32) -> Params {
    Params { req: 0, opt }
}

/// A transition with both.
const fn req_opt(req: u32, opt: u32) -> Params {
    Params { req, opt }
}

/// One legal transition (`qp_state_table[from][to].valid == 1`) and its
/// parameters for each QP type.
#[derive(Clone, Copy, Debug)]
struct Rule {
    from: QpState,
    to: QpState,
    rc: Params,
    uc: Params,
    ud: Params,
    raw: Params,
    xrc_ini: Params,
    xrc_tgt: Params,
}

impl Rule {
    /// The column for `t`.
    fn params(&self, t: QpType) -> Params {
        match t {
            QpType::Rc => self.rc,
            QpType::Uc => self.uc,
            QpType::Ud => self.ud,
            QpType::RawPacket => self.raw,
            QpType::XrcIni => self.xrc_ini,
            QpType::XrcTgt => self.xrc_tgt,
        }
    }

    /// A transition that takes `STATE` alone for every type (to RESET, to ERR).
    const fn bare(from: QpState, to: QpState) -> Rule {
        Rule { from, to, rc: BARE, uc: BARE, ud: BARE, raw: BARE, xrc_ini: BARE, xrc_tgt: BARE }
    }
}

/// The legal transitions, as in `verbs.c qp_state_table` (Linux 6.x; the
/// rows have been stable since XRC was added in 3.x, RAW_PACKET's
/// `RATE_LIMIT` came in 4.10). Anything not listed is illegal; in
/// particular RESET->ERR, RTR->RTR and SQE->SQE are not in the kernel's
/// table.
const RULES: &[Rule] = {
    use bit::*;
    use QpState::*;

    // Column values shared by several rows.
    const CONN_INIT: u32 = PKEY_INDEX | PORT | ACCESS_FLAGS;
    const UD_INIT: u32 = PKEY_INDEX | PORT | QKEY;
    const UC_RTR: u32 = AV | PATH_MTU | DEST_QPN | RQ_PSN;
    const RC_RTR: u32 = UC_RTR | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    const RTR_OPT: u32 = ALT_PATH | ACCESS_FLAGS | PKEY_INDEX;
    const RC_RTS: u32 = TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC;
    const UC_TO_RTS_OPT: u32 = CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE;
    const RC_TO_RTS_OPT: u32 = UC_TO_RTS_OPT | MIN_RNR_TIMER;
    const UD_TO_RTS_OPT: u32 = CUR_STATE | QKEY;

    &[
        // RESET
        Rule::bare(Reset, Reset),
        Rule {
            from: Reset,
            to: Init,
            rc: req(CONN_INIT),
            uc: req(CONN_INIT),
            ud: req(UD_INIT),
            raw: req(PORT),
            xrc_ini: req(CONN_INIT),
            xrc_tgt: req(CONN_INIT),
        },
        // INIT
        Rule::bare(Init, Reset),
        Rule::bare(Init, Err),
        Rule {
            from: Init,
            to: Init,
            rc: opt(CONN_INIT),
            uc: opt(CONN_INIT),
            ud: opt(UD_INIT),
            raw: BARE,
            xrc_ini: opt(CONN_INIT),
            xrc_tgt: opt(CONN_INIT),
        },
        Rule {
            from: Init,
            to: Rtr,
            rc: req_opt(RC_RTR, RTR_OPT),
            uc: req_opt(UC_RTR, RTR_OPT),
            ud: opt(PKEY_INDEX | QKEY),
            raw: BARE,
            xrc_ini: req_opt(UC_RTR, RTR_OPT),
            xrc_tgt: req_opt(RC_RTR, RTR_OPT),
        },
        // RTR
        Rule::bare(Rtr, Reset),
        Rule::bare(Rtr, Err),
        Rule {
            from: Rtr,
            to: Rts,
            rc: req_opt(RC_RTS, RC_TO_RTS_OPT),
            uc: req_opt(SQ_PSN, UC_TO_RTS_OPT),
            ud: req_opt(SQ_PSN, UD_TO_RTS_OPT),
            raw: opt(RATE_LIMIT),
            xrc_ini: req_opt(RC_RTS, UC_TO_RTS_OPT),
            xrc_tgt: req_opt(TIMEOUT | SQ_PSN, RC_TO_RTS_OPT),
        },
        // RTS
        Rule::bare(Rts, Reset),
        Rule::bare(Rts, Err),
        Rule {
            from: Rts,
            to: Rts,
            rc: opt(RC_TO_RTS_OPT),
            uc: opt(UC_TO_RTS_OPT),
            ud: opt(UD_TO_RTS_OPT),
            raw: opt(RATE_LIMIT),
            xrc_ini: opt(UC_TO_RTS_OPT),
            xrc_tgt: opt(RC_TO_RTS_OPT),
        },
        Rule {
            from: Rts,
            to: Sqd,
            rc: opt(EN_SQD_ASYNC_NOTIFY),
            uc: opt(EN_SQD_ASYNC_NOTIFY),
            ud: opt(EN_SQD_ASYNC_NOTIFY),
            raw: BARE,
            xrc_ini: opt(EN_SQD_ASYNC_NOTIFY),
            xrc_tgt: opt(EN_SQD_ASYNC_NOTIFY),
        },
        // SQD
        Rule::bare(Sqd, Reset),
        Rule::bare(Sqd, Err),
        Rule {
            from: Sqd,
            to: Rts,
            rc: opt(RC_TO_RTS_OPT),
            uc: opt(UC_TO_RTS_OPT),
            ud: opt(UD_TO_RTS_OPT),
            raw: BARE,
            xrc_ini: opt(UC_TO_RTS_OPT),
            xrc_tgt: opt(RC_TO_RTS_OPT),
        },
        Rule {
            from: Sqd,
            to: Sqd,
            rc: opt(PORT
                | AV
                | TIMEOUT
                | RETRY_CNT
                | RNR_RETRY
                | MAX_QP_RD_ATOMIC
                | MAX_DEST_RD_ATOMIC
                | ALT_PATH
                | ACCESS_FLAGS
                | PKEY_INDEX
                | MIN_RNR_TIMER
                | PATH_MIG_STATE),
            uc: opt(AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE),
            ud: opt(PKEY_INDEX | QKEY),
            raw: BARE,
            xrc_ini: opt(PORT
                | AV
                | TIMEOUT
                | RETRY_CNT
                | RNR_RETRY
                | MAX_QP_RD_ATOMIC
                | ALT_PATH
                | ACCESS_FLAGS
                | PKEY_INDEX
                | PATH_MIG_STATE),
            xrc_tgt: opt(PORT
                | AV
                | TIMEOUT
                | MAX_DEST_RD_ATOMIC
                | ALT_PATH
                | ACCESS_FLAGS
                | PKEY_INDEX
                | MIN_RNR_TIMER
                | PATH_MIG_STATE),
        },
        // SQE (IBTA reaches it only for UC/UD, but the kernel's row is open
        // to every type; RC/XRC/RAW get STATE alone).
        Rule::bare(Sqe, Reset),
        Rule::bare(Sqe, Err),
        Rule {
            from: Sqe,
            to: Rts,
            rc: BARE,
            uc: opt(CUR_STATE | ACCESS_FLAGS),
            ud: opt(UD_TO_RTS_OPT),
            raw: BARE,
            xrc_ini: BARE,
            xrc_tgt: BARE,
        },
        // ERR
        Rule::bare(Err, Reset),
        Rule::bare(Err, Err),
    ]
};

/// The rule for `from -> to`, `None` if the kernel's table marks it invalid.
fn find_rule(from: QpState, to: QpState) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.from == from && r.to == to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpAttrMask as M;
    use QpState::{Err as ErrState, Init, Reset, Rtr, Rts, Sqd, Sqe};

    const TYPES: [QpType; 6] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket, QpType::XrcIni, QpType::XrcTgt];

    /// (from, to) pairs the kernel's table marks valid, for every type.
    const LEGAL: &[(QpState, QpState)] = &[
        (Reset, Reset),
        (Reset, Init),
        (Init, Reset),
        (Init, Init),
        (Init, Rtr),
        (Init, ErrState),
        (Rtr, Reset),
        (Rtr, Rts),
        (Rtr, ErrState),
        (Rts, Reset),
        (Rts, Rts),
        (Rts, Sqd),
        (Rts, ErrState),
        (Sqd, Reset),
        (Sqd, Rts),
        (Sqd, Sqd),
        (Sqd, ErrState),
        (Sqe, Reset),
        (Sqe, Rts),
        (Sqe, ErrState),
        (ErrState, Reset),
        (ErrState, ErrState),
    ];

    fn rc_init_rtr() -> M {
        M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER
    }

    fn rc_rtr_rts() -> M {
        M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC
    }

    #[test]
    fn table_is_consistent() {
        // One rule per pair, exactly the legal pairs.
        for from in QpState::ALL {
            for to in QpState::ALL {
                let n = RULES.iter().filter(|r| r.from == from && r.to == to).count();
                let legal = LEGAL.contains(&(from, to));
                assert_eq!(n, usize::from(legal), "{from}->{to}");
            }
        }
        // Required and optional never overlap, never name STATE.
        for r in RULES {
            for t in TYPES {
                let p = r.params(t);
                assert_eq!(p.req & p.opt, 0, "{t} {}->{}", r.from, r.to);
                assert_eq!((p.req | p.opt) & bit::STATE, 0);
            }
        }
    }

    #[test]
    fn abi_values() {
        assert_eq!(M::all().bits(), 0x21f_ffff);
        assert_eq!(QpState::from_raw(0), Some(Reset));
        assert_eq!(QpState::from_raw(6), Some(ErrState));
        assert_eq!(QpState::from_raw(7), None);
        for s in QpState::ALL {
            assert_eq!(QpState::from_raw(s as u8), Some(s));
        }
        let k: Vec<u32> = TYPES.iter().map(|t| t.to_kernel()).collect();
        assert_eq!(k, [2, 3, 4, 8, 9, 10]);
        let names: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
        assert_eq!(names, ["RC", "UC", "UD", "RAW_PACKET", "XRC_INI", "XRC_TGT"]);
        let names: Vec<String> = QpState::ALL.iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]);
    }

    #[test]
    fn reference_masks() {
        // uverbs-abi.md section 5.
        let r = |t, a, b| required_bits(t, a, b).unwrap().bits();
        assert_eq!(r(QpType::Rc, Reset, Init), 0x39);
        assert_eq!(r(QpType::Rc, Init, Rtr), 0x12_9181);
        assert_eq!(r(QpType::Rc, Rtr, Rts), 0x1_2E01);
        assert_eq!(r(QpType::Ud, Reset, Init), 0x71);
        assert_eq!(r(QpType::Ud, Init, Rtr), 0x1);
        assert_eq!(r(QpType::Ud, Rtr, Rts), 0x1_0001);
        assert_eq!(rc_init_rtr().bits(), 0x12_9181);
        assert_eq!(rc_rtr_rts().bits(), 0x1_2E01);
    }

    #[test]
    fn every_legal_transition_passes_with_required_bits() {
        for t in TYPES {
            for &(from, to) in LEGAL {
                let req = required_bits(t, from, to).unwrap();
                assert_eq!(check_transition(t, from, to, req), Ok(()), "{t} {from}->{to}");
                // And with every optional bit too, except where uverbs'
                // AV-implies-PORT rule bites (see uverbs_mask_rewriting).
                let mut all = req | optional_bits(t, from, to).unwrap();
                if (t, from, to) == (QpType::Uc, Sqd, Sqd) {
                    all -= M::AV;
                }
                assert_eq!(check_transition(t, from, to, all), Ok(()), "{t} {from}->{to} +opt");
            }
        }
    }

    #[test]
    fn bring_up_sequences() {
        let seq: [(QpType, [M; 3]); 3] = [
            (QpType::Rc, [M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, rc_init_rtr(), rc_rtr_rts()]),
            (
                QpType::Uc,
                [
                    M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                    M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                    M::STATE | M::SQ_PSN,
                ],
            ),
            (QpType::Ud, [M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY, M::STATE, M::STATE | M::SQ_PSN]),
        ];
        for (t, masks) in seq {
            let steps = [(Reset, Init), (Init, Rtr), (Rtr, Rts)];
            for ((from, to), mask) in steps.into_iter().zip(masks) {
                assert_eq!(check_transition(t, from, to, mask), Ok(()), "{t} {from}->{to}");
                assert_eq!(required_bits(t, from, to), Some(mask), "{t} {from}->{to}");
            }
        }
    }

    #[test]
    fn each_missing_required_bit_is_named() {
        for (from, to, full) in [(Init, Rtr, rc_init_rtr()), (Rtr, Rts, rc_rtr_rts())] {
            for (name, b) in full.iter_names() {
                if b == M::STATE {
                    continue;
                }
                let err = check_transition(QpType::Rc, from, to, full - b).unwrap_err();
                assert_eq!(err, TransitionError::MissingBits { qp_type: QpType::Rc, from, to, missing: b });
                let msg = err.to_string();
                assert!(msg.contains(&format!("missing attribute(s) {name} (")), "{msg}");
            }
        }
    }

    #[test]
    fn extra_bit_is_forbidden() {
        let err = check_transition(QpType::Rc, Init, Rtr, rc_init_rtr() | M::SQ_PSN).unwrap_err();
        assert_eq!(
            err,
            TransitionError::ForbiddenBits { qp_type: QpType::Rc, from: Init, to: Rtr, forbidden: M::SQ_PSN }
        );
        // QKEY is UD's, not RC's.
        let m = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS | M::QKEY;
        assert!(matches!(
            check_transition(QpType::Rc, Reset, Init, m),
            Err(TransitionError::ForbiddenBits { forbidden, .. }) if forbidden == M::QKEY
        ));
        // Bits without a name are forbidden too, and print as hex.
        let m = M::STATE | M::from_bits_retain(1 << 22);
        let err = check_transition(QpType::Rc, Rts, ErrState, m).unwrap_err();
        assert_eq!(err.to_string(), "RC QP RTS->ERR does not allow attribute(s) 0x400000 (allowed: STATE)");
        // RATE_LIMIT is RAW_PACKET's only.
        let m = M::STATE | M::RATE_LIMIT;
        assert_eq!(check_transition(QpType::RawPacket, Rts, Rts, m), Ok(()));
        assert_eq!(check_transition(QpType::RawPacket, Rtr, Rts, m), Ok(()));
        assert!(check_transition(QpType::Rc, Rts, Rts, m).is_err());
    }

    #[test]
    fn illegal_transitions() {
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            for (from, to) in [(Reset, Rtr), (Reset, Rts), (Init, Rts), (Rtr, Init)] {
                // Even with every named bit set.
                for mask in [M::STATE, M::all()] {
                    assert_eq!(
                        check_transition(t, from, to, mask),
                        Err(TransitionError::Illegal { qp_type: t, from, to }),
                        "{t} {from}->{to}"
                    );
                }
                assert_eq!(required_bits(t, from, to), None);
                assert_eq!(optional_bits(t, from, to), None);
            }
        }
    }

    #[test]
    fn to_reset_and_to_err() {
        for t in TYPES {
            for from in QpState::ALL {
                assert_eq!(check_transition(t, from, Reset, M::STATE), Ok(()), "{t} {from}->RESET");
                // The kernel's table has no RESET->ERR.
                let r = check_transition(t, from, ErrState, M::STATE);
                if from == Reset {
                    assert_eq!(r, Err(TransitionError::Illegal { qp_type: t, from, to: ErrState }));
                } else {
                    assert_eq!(r, Ok(()), "{t} {from}->ERR");
                }
                // Nothing else is allowed on the way.
                if from != Reset {
                    assert!(check_transition(t, from, ErrState, M::STATE | M::QKEY).is_err());
                }
            }
        }
    }

    #[test]
    fn attribute_only_modify() {
        // No STATE: the transition is cur->cur whatever `next` says.
        let m = M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE | M::MIN_RNR_TIMER;
        assert_eq!(check_transition(QpType::Rc, Rts, Rts, m), Ok(()));
        assert_eq!(check_transition(QpType::Rc, Rts, ErrState, m), Ok(()));
        assert_eq!(check_transition(QpType::Rc, Rts, Rts, m | M::STATE), Ok(()));
        assert_eq!(check_transition(QpType::Rc, Rts, Rts, m | M::CUR_STATE), Ok(()));
        assert_eq!(check_transition(QpType::Ud, Rts, Rts, M::QKEY), Ok(()));
        assert_eq!(check_transition(QpType::Rc, Rts, Rts, M::empty()), Ok(()));
        // MIN_RNR_TIMER is RC-only here.
        assert!(check_transition(QpType::Uc, Rts, Rts, M::MIN_RNR_TIMER).is_err());
        // INIT->RTR bits without STATE: checked as INIT->INIT.
        assert_eq!(
            check_transition(QpType::Rc, Init, Rtr, rc_init_rtr() - M::STATE),
            Err(TransitionError::ForbiddenBits {
                qp_type: QpType::Rc,
                from: Init,
                to: Init,
                forbidden: M::AV | M::PATH_MTU | M::RQ_PSN | M::MIN_RNR_TIMER | M::MAX_DEST_RD_ATOMIC | M::DEST_QPN
            })
        );
        // RTR has no RTR->RTR row: no attribute-only modify there.
        assert_eq!(
            check_transition(QpType::Rc, Rtr, Rtr, M::ACCESS_FLAGS),
            Err(TransitionError::Illegal { qp_type: QpType::Rc, from: Rtr, to: Rtr })
        );
        assert_eq!(optional_bits(QpType::Rc, Rts, Rts).unwrap() & M::STATE, M::STATE);
        assert_eq!(required_bits(QpType::Rc, Rts, Rts), Some(M::empty()));
    }

    #[test]
    fn cur_state_only_from_rtr_rts_sqd_sqe() {
        let m = M::STATE | M::CUR_STATE;
        for from in [Rtr, Rts, Sqd, Sqe] {
            let extra = if from == Rtr { M::SQ_PSN } else { M::empty() };
            assert_eq!(check_transition(QpType::Ud, from, Rts, m | extra), Ok(()), "{from}");
        }
        assert!(check_transition(QpType::Rc, Rtr, Rts, rc_rtr_rts() | M::CUR_STATE).is_ok());
        for (from, to) in [(Reset, Init), (Init, Rtr), (Init, ErrState), (Rts, ErrState), (Reset, Reset)] {
            let req = required_bits(QpType::Rc, from, to).unwrap();
            assert!(matches!(
                check_transition(QpType::Rc, from, to, req | M::CUR_STATE),
                Err(TransitionError::ForbiddenBits { forbidden, .. }) if forbidden == M::CUR_STATE
            ));
        }
    }

    #[test]
    fn uverbs_mask_rewriting() {
        // modify_qp_mask(): ignored bits are dropped for XRC, so accepted.
        let m = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
        assert_eq!(check_transition(QpType::XrcIni, Init, Rtr, m | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER), Ok(()));
        assert!(check_transition(QpType::Uc, Init, Rtr, m | M::MIN_RNR_TIMER).is_err());
        let m = M::STATE | M::TIMEOUT | M::SQ_PSN;
        assert_eq!(
            check_transition(QpType::XrcTgt, Rtr, Rts, m | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC),
            Ok(())
        );
        // A lone AV outside INIT->RTR gets PORT added: fine for RC SQD->SQD,
        // fatal for UC, whose SQD->SQD row has AV but not PORT.
        assert_eq!(check_transition(QpType::Rc, Sqd, Sqd, M::AV), Ok(()));
        let err = check_transition(QpType::Uc, Sqd, Sqd, M::AV).unwrap_err();
        assert_eq!(err, TransitionError::ForbiddenBits { qp_type: QpType::Uc, from: Sqd, to: Sqd, forbidden: M::PORT });
        assert_eq!(
            err.to_string(),
            "UC QP SQD->SQD does not allow attribute(s) PORT (allowed: STATE | ACCESS_FLAGS | \
             PKEY_INDEX | AV | ALT_PATH | PATH_MIG_STATE); uverbs adds PORT to an AV given without it"
        );
        // INIT->RTR with AV stays without PORT (PORT is not allowed there).
        assert_eq!(check_transition(QpType::Rc, Init, Rtr, rc_init_rtr()), Ok(()));
        assert!(check_transition(QpType::Rc, Init, Rtr, rc_init_rtr() | M::PORT).is_err());
    }

    #[test]
    fn display_strings() {
        assert_eq!(
            check_transition(QpType::Rc, Reset, Rts, M::STATE).unwrap_err().to_string(),
            "RC QP cannot go from RESET to RTS (legal from RESET: RESET, INIT)"
        );
        assert_eq!(
            check_transition(QpType::Rc, Init, Rtr, M::STATE | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER)
                .unwrap_err()
                .to_string(),
            "RC QP INIT->RTR is missing attribute(s) AV | PATH_MTU | DEST_QPN \
             (required: STATE | AV | PATH_MTU | RQ_PSN | MIN_RNR_TIMER | MAX_DEST_RD_ATOMIC | DEST_QPN)"
        );
        assert_eq!(
            check_transition(QpType::Ud, Reset, Init, M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY | M::AV)
                .unwrap_err()
                .to_string(),
            "UD QP RESET->INIT does not allow attribute(s) AV (allowed: STATE | PKEY_INDEX | PORT | QKEY)"
        );
        assert_eq!(
            TransitionError::Illegal { qp_type: QpType::Uc, from: Sqe, to: Sqd }.to_string(),
            "UC QP cannot go from SQE to SQD (legal from SQE: RESET, RTS, ERR)"
        );
        assert_eq!(M::empty().to_string(), "none");
    }
}
