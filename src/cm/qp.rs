//! Moving an id's QP with the attributes the kernel's CM gives
//! (`INIT_QP_ATTR`), as librdmacm's `ucma_init_conn_qp`,
//! `ucma_init_ud_qp`, `ucma_modify_qp_rtr`/`_rts`/`_err` and
//! `ucma_process_conn_resp` do (`shared/reference/rdmacm.md` §A.5).

use rverbs_providers::cm as cmd;
use rverbs_providers::Result;
use rverbs_uapi::ib_user_verbs::ib_uverbs_qp_attr;

use super::id::CmId;
use super::{PortSpace, MAX_DEPTH};
use crate::{QpAttr, QpAttrMask, QpControl, QpState, Transport};

/// The kernel's attributes as rverbs types. Mask bits 21-24 are the
/// kernel's own (SMAC/VID, which old kernels leaked to userspace and
/// librdmacm masks off on InfiniBand); only the bits a user modify may
/// carry are kept.
pub(crate) fn from_kernel(a: &ib_uverbs_qp_attr) -> (QpAttr, QpAttrMask) {
    let all = QpAttrMask::all() - QpAttrMask::RATE_LIMIT;
    let raw = QpAttrMask::from_bits_retain(a.qp_attr_mask);
    if !(raw - all).is_empty() {
        tracing::debug!(dropped = ?(raw - all), "INIT_QP_ATTR: mask bits a user modify cannot carry, dropped");
    }
    (QpAttr::from_kernel_attr(a), raw & all)
}

/// Applies the kernel's attributes for `state`, with `adjust` to override
/// some. iWARP's RTS attributes carry no STATE (the kernel's iw_cm moves
/// the QP itself): such a mask is not applied.
fn apply(id: &CmId, q: &QpControl, state: QpState, adjust: impl FnOnce(&mut QpAttr)) -> Result<()> {
    let ch = id.channel();
    let a = cmd::init_qp_attr(ch.fd(), id.kernel_id(), state as u32)?;
    let (mut attr, mask) = from_kernel(&a);
    if !mask.contains(QpAttrMask::STATE) && q.context().device().transport() == Transport::Iwarp {
        tracing::debug!(qp_num = q.qp_num(), to = %state, mask = %mask, "iWARP: no state in the CM's attributes, not applied");
        return Ok(());
    }
    adjust(&mut attr);
    q.modify(&attr, mask)
}

/// The QP's first move, as `rdma_create_qp` makes it: RC to INIT (before
/// CONNECT there is no IB CM id yet, so the access is 0; it is set again
/// later), UD to INIT (with the Q_Key), RTR and RTS with SQ PSN 0.
pub(crate) fn init(id: &CmId, q: &QpControl) -> Result<()> {
    apply(id, q, QpState::Init, |_| {})?;
    if id.port_space() == PortSpace::Udp {
        q.modify(&QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE)?;
        q.modify(
            &QpAttr { qp_state: QpState::Rts, sq_psn: 0, ..QpAttr::default() },
            QpAttrMask::STATE | QpAttrMask::SQ_PSN,
        )?;
    }
    Ok(())
}

/// INIT again (the access the connection allows: REMOTE_WRITE, READ and
/// ATOMIC with responder resources, FLUSH where the device has it), then
/// RTR; `max_dest_rd_atomic` = `resp_res` unless it is [`MAX_DEPTH`].
pub(crate) fn to_rtr(id: &CmId, q: &QpControl, resp_res: u8) -> Result<()> {
    apply(id, q, QpState::Init, |_| {})?;
    apply(id, q, QpState::Rtr, |a| {
        if resp_res != MAX_DEPTH {
            a.max_dest_rd_atomic = resp_res;
        }
    })
}

/// RTS; `max_rd_atomic` = `init_depth` unless it is [`MAX_DEPTH`].
pub(crate) fn to_rts(id: &CmId, q: &QpControl, init_depth: u8) -> Result<()> {
    apply(id, q, QpState::Rts, |a| {
        if init_depth != MAX_DEPTH {
            a.max_rd_atomic = init_depth;
        }
    })
}

/// On iWARP the kernel's iw_cm moves the QP to RTS itself before it
/// reports ESTABLISHED (RTR and RTS were not applied here), and siw's
/// `QUERY_QP` reports no state to read back: at ESTABLISHED the state
/// rverbs keeps becomes RTS, so posts see it. Nothing on InfiniBand and
/// RoCE, where rverbs made the moves itself.
pub(crate) fn learn_iwarp_state(q: &QpControl) {
    if q.context().device().transport() == Transport::Iwarp {
        tracing::debug!(qp_num = q.qp_num(), "iWARP: ESTABLISHED, the kernel moved the QP to RTS");
        q.note_state(QpState::Rts);
    }
}

/// ERR, so posted work requests flush; a failure is only logged (the QP
/// may be gone with its device). Nothing when the QP's last modify left
/// it in ERR already (our own [`CmId::disconnect`] before the peer's
/// DISCONNECTED): its work requests flushed then, and a second modify
/// would be a syscall per connection that librdmacm does not make.
pub(crate) fn to_err(q: &QpControl) {
    if q.state() == QpState::Err {
        tracing::debug!(qp_num = q.qp_num(), "the QP is in ERR already: not moved again");
        return;
    }
    if let Err(e) = q.modify(&QpAttr { qp_state: QpState::Err, ..QpAttr::default() }, QpAttrMask::STATE) {
        tracing::debug!(qp_num = q.qp_num(), error = %e, "moving the QP to ERR failed");
    }
}

/// The active side's answer to CONNECT_RESPONSE with a QP attached: RTR
/// and RTS with the kernel's depths, then the ready-to-use; on failure
/// the QP goes to ERR.
pub(crate) fn process_conn_resp(id: &CmId, q: &QpControl) -> Result<()> {
    let r = to_rtr(id, q, MAX_DEPTH)
        .and_then(|()| to_rts(id, q, MAX_DEPTH))
        .and_then(|()| cmd::establish(id.channel().fd(), id.kernel_id()));
    if r.is_err() {
        to_err(q);
    }
    r
}
