//! QP attributes and their kernel layouts: capacities (`ibv_qp_cap`), what
//! to create (`ibv_qp_init_attr`), and the attributes of modify and query
//! (`ibv_qp_attr` ↔ `ib_uverbs_modify_qp` / `ib_uverbs_query_qp_resp`).

use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::ib_user_verbs::{ib_uverbs_modify_qp, ib_uverbs_qp_attr, ib_uverbs_query_qp_resp};
use zerocopy::FromZeros;

use crate::attr::Mtu;
use crate::{AccessFlags, AhAttr, CompletionQueue, QpAttrMask, QpState, QpType, SharedReceiveQueue};

/// Capacities of a QP's queues (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpCap {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

impl From<ib_uverbs_qp_cap> for QpCap {
    fn from(c: ib_uverbs_qp_cap) -> Self {
        QpCap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }
}

impl From<QpCap> for ib_uverbs_qp_cap {
    fn from(c: QpCap) -> Self {
        ib_uverbs_qp_cap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }
}

/// What to create (`struct ibv_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr<'a> {
    /// RC, UC or UD (what rxe supports).
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: &'a CompletionQueue,
    /// CQ for receive completions (may be the same as `send_cq`).
    pub recv_cq: &'a CompletionQueue,
    /// Receive from this SRQ instead of an own receive queue.
    pub srq: Option<&'a SharedReceiveQueue>,
    /// Requested capacities (the kernel may round up; see [`QpControl::cap`](crate::QpControl::cap)).
    pub cap: QpCap,
    /// Every send work request completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
}

impl<'a> QpInitAttr<'a> {
    /// A QP of `qp_type` using `cq` for both directions, default caps.
    pub fn new(qp_type: QpType, cq: &'a CompletionQueue) -> Self {
        QpInitAttr { qp_type, send_cq: cq, recv_cq: cq, srq: None, cap: QpCap::default(), sq_sig_all: false }
    }
}

/// QP attributes for modify and query (`struct ibv_qp_attr`). Only the
/// fields named in the attribute mask are used by a modify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// `STATE`: the state to move to.
    pub qp_state: QpState,
    /// `CUR_STATE`: the state the caller believes the QP is in.
    pub cur_qp_state: QpState,
    /// `PATH_MTU`.
    pub path_mtu: Mtu,
    /// `PATH_MIG_STATE` (0 migrated, 1 rearm, 2 armed).
    pub path_mig_state: u8,
    /// `QKEY` (UD).
    pub qkey: u32,
    /// `RQ_PSN`: expected PSN of the first incoming packet (24 bits).
    pub rq_psn: u32,
    /// `SQ_PSN`: PSN of the first outgoing packet (24 bits).
    pub sq_psn: u32,
    /// `DEST_QPN`: the remote QP number.
    pub dest_qp_num: u32,
    /// `ACCESS_FLAGS`: what remote peers may do (remote read/write/atomic).
    pub qp_access_flags: AccessFlags,
    /// Capacities (reported by query; `CAP` to resize where supported).
    pub cap: QpCap,
    /// `AV`: the primary path.
    pub ah_attr: AhAttr,
    /// `ALT_PATH`: the alternate path.
    pub alt_ah_attr: AhAttr,
    /// `PKEY_INDEX`.
    pub pkey_index: u16,
    /// `ALT_PATH`: alternate P_Key index.
    pub alt_pkey_index: u16,
    /// `EN_SQD_ASYNC_NOTIFY`.
    pub en_sqd_async_notify: bool,
    /// Query only: the SQ is draining (SQD).
    pub sq_draining: bool,
    /// `MAX_QP_RD_ATOMIC`: outstanding RDMA READ/atomics we initiate.
    pub max_rd_atomic: u8,
    /// `MAX_DEST_RD_ATOMIC`: outstanding RDMA READ/atomics we serve.
    pub max_dest_rd_atomic: u8,
    /// `MIN_RNR_TIMER`.
    pub min_rnr_timer: u8,
    /// `PORT`.
    pub port_num: u8,
    /// `TIMEOUT` (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// `RETRY_CNT`.
    pub retry_cnt: u8,
    /// `RNR_RETRY` (7 = infinite).
    pub rnr_retry: u8,
    /// `ALT_PATH`: alternate port.
    pub alt_port_num: u8,
    /// `ALT_PATH`: alternate timeout.
    pub alt_timeout: u8,
    /// `RATE_LIMIT` (kbps; extended modify only).
    pub rate_limit: u32,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            path_mig_state: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: AccessFlags::empty(),
            cap: QpCap { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline_data: 0 },
            ah_attr: AhAttr::default(),
            alt_ah_attr: AhAttr::default(),
            pkey_index: 0,
            alt_pkey_index: 0,
            en_sqd_async_notify: false,
            sq_draining: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        }
    }
}

impl QpAttr {
    /// The `ib_uverbs_modify_qp` body for `mask` (exactly 112 bytes).
    pub(crate) fn to_kernel(self, handle: u32, mask: QpAttrMask) -> ib_uverbs_modify_qp {
        // Only the fields the mask names are copied, the others stay 0, as
        // libibverbs' `copy_modify_qp_fields` does: the kernel reads only
        // masked fields, and the command bytes then match rdma-core's (the
        // mlx5 differential test compares them).
        let on = |f: QpAttrMask| mask.contains(f);
        let mut m = ib_uverbs_modify_qp::new_zeroed();
        m.qp_handle = handle;
        m.attr_mask = (mask - QpAttrMask::RATE_LIMIT).bits();
        if on(QpAttrMask::STATE) {
            m.qp_state = self.qp_state as u8;
        }
        if on(QpAttrMask::CUR_STATE) {
            m.cur_qp_state = self.cur_qp_state as u8;
        }
        if on(QpAttrMask::EN_SQD_ASYNC_NOTIFY) {
            m.en_sqd_async_notify = self.en_sqd_async_notify.into();
        }
        if on(QpAttrMask::ACCESS_FLAGS) {
            m.qp_access_flags = self.qp_access_flags.bits();
        }
        if on(QpAttrMask::PKEY_INDEX) {
            m.pkey_index = self.pkey_index;
        }
        if on(QpAttrMask::PORT) {
            m.port_num = self.port_num;
        }
        if on(QpAttrMask::QKEY) {
            m.qkey = self.qkey;
        }
        if on(QpAttrMask::AV) {
            m.dest = self.ah_attr.to_dest();
        }
        if on(QpAttrMask::PATH_MTU) {
            m.path_mtu = self.path_mtu.raw();
        }
        if on(QpAttrMask::TIMEOUT) {
            m.timeout = self.timeout;
        }
        if on(QpAttrMask::RETRY_CNT) {
            m.retry_cnt = self.retry_cnt;
        }
        if on(QpAttrMask::RNR_RETRY) {
            m.rnr_retry = self.rnr_retry;
        }
        if on(QpAttrMask::RQ_PSN) {
            m.rq_psn = self.rq_psn;
        }
        if on(QpAttrMask::MAX_QP_RD_ATOMIC) {
            m.max_rd_atomic = self.max_rd_atomic;
        }
        if on(QpAttrMask::ALT_PATH) {
            m.alt_dest = self.alt_ah_attr.to_dest();
            m.alt_pkey_index = self.alt_pkey_index;
            m.alt_port_num = self.alt_port_num;
            m.alt_timeout = self.alt_timeout;
        }
        if on(QpAttrMask::MIN_RNR_TIMER) {
            m.min_rnr_timer = self.min_rnr_timer;
        }
        if on(QpAttrMask::SQ_PSN) {
            m.sq_psn = self.sq_psn;
        }
        if on(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            m.max_dest_rd_atomic = self.max_dest_rd_atomic;
        }
        if on(QpAttrMask::PATH_MIG_STATE) {
            m.path_mig_state = self.path_mig_state;
        }
        if on(QpAttrMask::DEST_QPN) {
            m.dest_qp_num = self.dest_qp_num;
        }
        m
    }

    /// From the kernel's `ib_uverbs_qp_attr` (the CM's INIT_QP_ATTR answer,
    /// what `ibv_copy_qp_attr_from_kern` converts). Access bits the
    /// library does not name are kept (`from_bits_retain`).
    pub(crate) fn from_kernel_attr(r: &ib_uverbs_qp_attr) -> Self {
        let state = |v: u32| u8::try_from(v).ok().and_then(QpState::from_raw).unwrap_or(QpState::Err);
        QpAttr {
            qp_state: state(r.qp_state),
            cur_qp_state: state(r.cur_qp_state),
            path_mtu: Mtu::from_raw(r.path_mtu as u8),
            path_mig_state: r.path_mig_state as u8,
            qkey: r.qkey,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
            cap: QpCap {
                max_send_wr: r.max_send_wr,
                max_recv_wr: r.max_recv_wr,
                max_send_sge: r.max_send_sge,
                max_recv_sge: r.max_recv_sge,
                max_inline_data: r.max_inline_data,
            },
            ah_attr: AhAttr::from_kernel_ah_attr(&r.ah_attr),
            alt_ah_attr: AhAttr::from_kernel_ah_attr(&r.alt_ah_attr),
            pkey_index: r.pkey_index,
            alt_pkey_index: r.alt_pkey_index,
            en_sqd_async_notify: r.en_sqd_async_notify != 0,
            sq_draining: r.sq_draining != 0,
            max_rd_atomic: r.max_rd_atomic,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            alt_port_num: r.alt_port_num,
            alt_timeout: r.alt_timeout,
            rate_limit: 0,
        }
    }

    pub(crate) fn from_kernel(r: &ib_uverbs_query_qp_resp) -> Self {
        QpAttr {
            qp_state: QpState::from_raw(r.qp_state).unwrap_or(QpState::Err),
            cur_qp_state: QpState::from_raw(r.cur_qp_state).unwrap_or(QpState::Err),
            path_mtu: Mtu::from_raw(r.path_mtu),
            path_mig_state: r.path_mig_state,
            qkey: r.qkey,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
            cap: QpCap {
                max_send_wr: r.max_send_wr,
                max_recv_wr: r.max_recv_wr,
                max_send_sge: r.max_send_sge,
                max_recv_sge: r.max_recv_sge,
                max_inline_data: r.max_inline_data,
            },
            ah_attr: AhAttr::from_dest(&r.dest),
            alt_ah_attr: AhAttr::from_dest(&r.alt_dest),
            pkey_index: r.pkey_index,
            alt_pkey_index: r.alt_pkey_index,
            en_sqd_async_notify: false,
            sq_draining: r.sq_draining != 0,
            max_rd_atomic: r.max_rd_atomic,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            alt_port_num: r.alt_port_num,
            alt_timeout: r.alt_timeout,
            rate_limit: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gid, GlobalRoute};
    use zerocopy::IntoBytes;

    /// INIT -> RTR of an RC QP over RoCE: the 112-byte `ib_uverbs_modify_qp`,
    /// hand-computed from the offsets in uverbs-abi.md §3.3, and its 120-byte
    /// write frame.
    #[test]
    fn modify_qp_rtr_bytes() {
        let dgid = Gid::parse("::ffff:192.168.77.1").unwrap();
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: 0x11,
            rq_psn: 0x123,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: AhAttr {
                port_num: 1,
                grh: Some(GlobalRoute { dgid, sgid_index: 1, hop_limit: 64, ..Default::default() }),
                ..Default::default()
            },
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER;
        let k = a.to_kernel(5, mask);
        let b = k.as_bytes();
        let mut want = [0u8; 112];
        want[10..12].copy_from_slice(&[0xff, 0xff]); // dgid ::ffff:
        want[12..16].copy_from_slice(&[192, 168, 77, 1]);
        want[24] = 1; // sgid_index
        want[25] = 64; // hop_limit
        want[30] = 1; // is_global
        want[31] = 1; // port_num
        want[64..68].copy_from_slice(&5u32.to_le_bytes()); // qp_handle
        want[68..72].copy_from_slice(&0x0012_9181u32.to_le_bytes()); // attr_mask
        want[76..80].copy_from_slice(&0x123u32.to_le_bytes()); // rq_psn
        want[84..88].copy_from_slice(&0x11u32.to_le_bytes()); // dest_qp_num
        want[96] = 2; // qp_state RTR
        want[98] = 3; // path_mtu 1024
        want[102] = 1; // max_dest_rd_atomic
        want[103] = 12; // min_rnr_timer
        assert_eq!(b, &want[..]);
        let frame = rverbs_providers::sys::write::frame(26, b, &[], 0, 0);
        assert_eq!(frame.len(), 120);
        assert_eq!(&frame[..8], &[26, 0, 0, 0, 30, 0, 0, 0]);
    }
}
