//! Values the uverbs ABI carries but no uapi header defines.
//!
//! **Not a uapi header.** The kernel declares these in
//! `include/rdma/ib_verbs.h` (kernel-internal) and libibverbs repeats them in
//! `libibverbs/verbs.h` (rdma-core commit `691953d8d502`) with the same
//! values; the uapi structs only say "`__u32 attr_mask`", "`__u8 qp_state`",
//! "`__u32 event_type; /* enum ib_event_type */`", "`__u32 status`". They are
//! mirrored here because every verbs library has to put them on the wire or
//! decode them. Values checked against `shared/reference/uverbs-abi.md` §3.3
//! and `providers.md` §A.3.
//!
//! Kernel names (`IB_QP_*`, `IB_QPS_*`, `IB_MTU_*`, `IB_EVENT_*`,
//! `IB_WC_*` flags, ...) are used where the value is defined by the kernel
//! enum; libibverbs names (`IBV_WC_*`) are used for the work-completion
//! status and opcode sets, as in rdma-core. Where the two differ (the
//! `wc_flags` bits), both are given.
#![allow(missing_docs)]

// ---------------------------------------------------------------------------
// enum ib_qp_attr_mask (include/rdma/ib_verbs.h; libibverbs `IBV_QP_*`):
// `ib_uverbs_modify_qp.attr_mask`, `ib_uverbs_query_qp.attr_mask`.

pub const IB_QP_STATE: u32 = 1 << 0;
pub const IB_QP_CUR_STATE: u32 = 1 << 1;
pub const IB_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
pub const IB_QP_ACCESS_FLAGS: u32 = 1 << 3;
pub const IB_QP_PKEY_INDEX: u32 = 1 << 4;
pub const IB_QP_PORT: u32 = 1 << 5;
pub const IB_QP_QKEY: u32 = 1 << 6;
pub const IB_QP_AV: u32 = 1 << 7;
pub const IB_QP_PATH_MTU: u32 = 1 << 8;
pub const IB_QP_TIMEOUT: u32 = 1 << 9;
pub const IB_QP_RETRY_CNT: u32 = 1 << 10;
pub const IB_QP_RNR_RETRY: u32 = 1 << 11;
pub const IB_QP_RQ_PSN: u32 = 1 << 12;
pub const IB_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const IB_QP_ALT_PATH: u32 = 1 << 14;
pub const IB_QP_MIN_RNR_TIMER: u32 = 1 << 15;
pub const IB_QP_SQ_PSN: u32 = 1 << 16;
pub const IB_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const IB_QP_PATH_MIG_STATE: u32 = 1 << 18;
pub const IB_QP_CAP: u32 = 1 << 19;
pub const IB_QP_DEST_QPN: u32 = 1 << 20;
/// Only accepted by the EX MODIFY_QP command (`ib_uverbs_ex_modify_qp.rate_limit`).
pub const IB_QP_RATE_LIMIT: u32 = 1 << 25;
/// `IB_QP_ATTR_STANDARD_BITS = GENMASK(20, 0)`: the non-EX MODIFY_QP rejects
/// any other bit with `EOPNOTSUPP` (`uverbs_cmd.c:ib_uverbs_modify_qp`).
pub const IB_QP_ATTR_STANDARD_BITS: u32 = (1 << 21) - 1;

// ---------------------------------------------------------------------------
// enum ib_qp_state (libibverbs `IBV_QPS_*`): `qp_state`, `cur_qp_state`.

pub const IB_QPS_RESET: u32 = 0;
pub const IB_QPS_INIT: u32 = 1;
pub const IB_QPS_RTR: u32 = 2;
pub const IB_QPS_RTS: u32 = 3;
pub const IB_QPS_SQD: u32 = 4;
pub const IB_QPS_SQE: u32 = 5;
pub const IB_QPS_ERR: u32 = 6;

// ---------------------------------------------------------------------------
// enum ib_mig_state (libibverbs `IBV_MIG_*`): `path_mig_state`.

pub const IB_MIG_MIGRATED: u32 = 0;
pub const IB_MIG_REARM: u32 = 1;
pub const IB_MIG_ARMED: u32 = 2;

// ---------------------------------------------------------------------------
// enum ib_mtu (libibverbs `IBV_MTU_*`): `path_mtu`, `max_mtu`, `active_mtu`.

pub const IB_MTU_256: u32 = 1;
pub const IB_MTU_512: u32 = 2;
pub const IB_MTU_1024: u32 = 3;
pub const IB_MTU_2048: u32 = 4;
pub const IB_MTU_4096: u32 = 5;

// ---------------------------------------------------------------------------
// enum ib_port_state (libibverbs `IBV_PORT_*`): `ib_uverbs_query_port_resp.state`.

pub const IB_PORT_NOP: u32 = 0;
pub const IB_PORT_DOWN: u32 = 1;
pub const IB_PORT_INIT: u32 = 2;
pub const IB_PORT_ARMED: u32 = 3;
pub const IB_PORT_ACTIVE: u32 = 4;
pub const IB_PORT_ACTIVE_DEFER: u32 = 5;

// ---------------------------------------------------------------------------
// IB_LINK_LAYER_* (include/rdma/ib_verbs.h; libibverbs `IBV_LINK_LAYER_*`):
// `ib_uverbs_query_port_resp.link_layer`.

pub const IB_LINK_LAYER_UNSPECIFIED: u32 = 0;
pub const IB_LINK_LAYER_INFINIBAND: u32 = 1;
pub const IB_LINK_LAYER_ETHERNET: u32 = 2;

// ---------------------------------------------------------------------------
// enum ib_atomic_cap (libibverbs `IBV_ATOMIC_*`): `ib_uverbs_query_device_resp.atomic_cap`.

pub const IB_ATOMIC_NONE: u32 = 0;
pub const IB_ATOMIC_HCA: u32 = 1;
pub const IB_ATOMIC_GLOB: u32 = 2;

// ---------------------------------------------------------------------------
// enum ib_event_type (libibverbs `IBV_EVENT_*`): `ib_uverbs_async_event_desc.event_type`.

pub const IB_EVENT_CQ_ERR: u32 = 0;
pub const IB_EVENT_QP_FATAL: u32 = 1;
pub const IB_EVENT_QP_REQ_ERR: u32 = 2;
pub const IB_EVENT_QP_ACCESS_ERR: u32 = 3;
pub const IB_EVENT_COMM_EST: u32 = 4;
pub const IB_EVENT_SQ_DRAINED: u32 = 5;
pub const IB_EVENT_PATH_MIG: u32 = 6;
pub const IB_EVENT_PATH_MIG_ERR: u32 = 7;
pub const IB_EVENT_DEVICE_FATAL: u32 = 8;
pub const IB_EVENT_PORT_ACTIVE: u32 = 9;
pub const IB_EVENT_PORT_ERR: u32 = 10;
pub const IB_EVENT_LID_CHANGE: u32 = 11;
pub const IB_EVENT_PKEY_CHANGE: u32 = 12;
pub const IB_EVENT_SM_CHANGE: u32 = 13;
pub const IB_EVENT_SRQ_ERR: u32 = 14;
pub const IB_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
pub const IB_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
pub const IB_EVENT_CLIENT_REREGISTER: u32 = 17;
pub const IB_EVENT_GID_CHANGE: u32 = 18;
pub const IB_EVENT_WQ_FATAL: u32 = 19;
/// Kernel ≈6.19/7.0 (same series as `UVERBS_METHOD_QUERY_PORT_SPEED`).
pub const IB_EVENT_DEVICE_SPEED_CHANGE: u32 = 20;

// ---------------------------------------------------------------------------
// enum ib_send_flags (libibverbs `IBV_SEND_*`, same values): rxe
// `rxe_send_wr.send_flags`, `ib_uverbs_send_wr.send_flags`.

pub const IB_SEND_FENCE: u32 = 1 << 0;
pub const IB_SEND_SIGNALED: u32 = 1 << 1;
pub const IB_SEND_SOLICITED: u32 = 1 << 2;
pub const IB_SEND_INLINE: u32 = 1 << 3;
pub const IB_SEND_IP_CSUM: u32 = 1 << 4;

// ---------------------------------------------------------------------------
// enum ib_srq_attr_mask (libibverbs `IBV_SRQ_*`): `ib_uverbs_modify_srq.attr_mask`.

pub const IB_SRQ_MAX_WR: u32 = 1 << 0;
pub const IB_SRQ_LIMIT: u32 = 1 << 1;

// ---------------------------------------------------------------------------
// enum ib_mr_rereg_flags (libibverbs `IBV_REREG_MR_CHANGE_*`): `ib_uverbs_rereg_mr.flags`.

pub const IB_MR_REREG_TRANS: u32 = 1 << 0;
pub const IB_MR_REREG_PD: u32 = 1 << 1;
pub const IB_MR_REREG_ACCESS: u32 = 1 << 2;
pub const IB_MR_REREG_SUPPORTED: u32 = (IB_MR_REREG_ACCESS << 1) - 1;

// ---------------------------------------------------------------------------
// enum ib_mw_type (libibverbs `IBV_MW_TYPE_*`): `ib_uverbs_alloc_mw.mw_type`.

pub const IB_MW_TYPE_1: u32 = 1;
pub const IB_MW_TYPE_2: u32 = 2;

// ---------------------------------------------------------------------------
// enum ib_wc_flags (include/rdma/ib_verbs.h): the bits the kernel and rxe
// put in `ib_uverbs_wc.wc_flags`.

pub const IB_WC_GRH: u32 = 1 << 0;
pub const IB_WC_WITH_IMM: u32 = 1 << 1;
/// Kernel bit 2 = "with invalidate"; libibverbs uses bit 2 for
/// [`IBV_WC_IP_CSUM_OK`] instead. Decode `ib_uverbs_wc.wc_flags` with the
/// `IB_WC_*` (kernel) values.
pub const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
/// Kernel bit 3; libibverbs' bit 3 is [`IBV_WC_WITH_INV`].
pub const IB_WC_IP_CSUM_OK: u32 = 1 << 3;
pub const IB_WC_WITH_SMAC: u32 = 1 << 4;
pub const IB_WC_WITH_VLAN: u32 = 1 << 5;
pub const IB_WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;

// ---------------------------------------------------------------------------
// enum ibv_wc_flags (libibverbs/verbs.h): the *library* API bits, for
// comparison. Bits 2 and 3 are swapped relative to the kernel's.

pub const IBV_WC_GRH: u32 = 1 << 0;
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;
/// `1 << IBV_WC_IP_CSUM_OK_SHIFT` (shift 2).
pub const IBV_WC_IP_CSUM_OK: u32 = 1 << 2;
pub const IBV_WC_WITH_INV: u32 = 1 << 3;
pub const IBV_WC_TM_SYNC_REQ: u32 = 1 << 4;
pub const IBV_WC_TM_MATCH: u32 = 1 << 5;
pub const IBV_WC_TM_DATA_VALID: u32 = 1 << 6;

// ---------------------------------------------------------------------------
// enum ibv_wc_status (libibverbs/verbs.h): `ib_uverbs_wc.status`. The kernel
// `enum ib_wc_status` has the same values for 0..=21 (it lacks the two TM
// values, which only libibverbs' extended CQs report).

pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
pub const IBV_WC_LOC_EEC_OP_ERR: u32 = 3;
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
pub const IBV_WC_MW_BIND_ERR: u32 = 6;
pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
pub const IBV_WC_LOC_ACCESS_ERR: u32 = 8;
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
pub const IBV_WC_REM_OP_ERR: u32 = 11;
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
pub const IBV_WC_LOC_RDD_VIOL_ERR: u32 = 14;
pub const IBV_WC_REM_INV_RD_REQ_ERR: u32 = 15;
pub const IBV_WC_REM_ABORT_ERR: u32 = 16;
pub const IBV_WC_INV_EECN_ERR: u32 = 17;
pub const IBV_WC_INV_EEC_STATE_ERR: u32 = 18;
pub const IBV_WC_FATAL_ERR: u32 = 19;
pub const IBV_WC_RESP_TIMEOUT_ERR: u32 = 20;
pub const IBV_WC_GENERAL_ERR: u32 = 21;
pub const IBV_WC_TM_ERR: u32 = 22;
pub const IBV_WC_TM_RNDV_INCOMPLETE: u32 = 23;

// ---------------------------------------------------------------------------
// enum ibv_wc_opcode (libibverbs/verbs.h): `ib_uverbs_wc.opcode`. Values
// 0..=9 equal `IB_UVERBS_WC_*` (ib_user_verbs.h) and the kernel
// `ib_wc_opcode`; `IBV_WC_RECV` is a bit (`opcode & IBV_WC_RECV` tests for a
// receive completion). The TM/DRIVER values come only from libibverbs'
// extended CQs, never from the kernel.

pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_COMP_SWAP: u32 = 3;
pub const IBV_WC_FETCH_ADD: u32 = 4;
pub const IBV_WC_BIND_MW: u32 = 5;
pub const IBV_WC_LOCAL_INV: u32 = 6;
pub const IBV_WC_TSO: u32 = 7;
pub const IBV_WC_FLUSH: u32 = 8;
pub const IBV_WC_ATOMIC_WRITE: u32 = 9;
pub const IBV_WC_RECV: u32 = 1 << 7;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const IBV_WC_TM_ADD: u32 = 130;
pub const IBV_WC_TM_DEL: u32 = 131;
pub const IBV_WC_TM_SYNC: u32 = 132;
pub const IBV_WC_TM_RECV: u32 = 133;
pub const IBV_WC_TM_NO_TAG: u32 = 134;
pub const IBV_WC_DRIVER1: u32 = 135;
pub const IBV_WC_DRIVER2: u32 = 136;
pub const IBV_WC_DRIVER3: u32 = 137;

#[cfg(test)]
mod tests {
    use super::*;

    /// The combined masks from `uverbs-abi.md` §5.2.
    #[test]
    fn modify_qp_masks() {
        assert_eq!(IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS, 0x39);
        assert_eq!(
            IB_QP_STATE
                | IB_QP_AV
                | IB_QP_PATH_MTU
                | IB_QP_DEST_QPN
                | IB_QP_RQ_PSN
                | IB_QP_MAX_DEST_RD_ATOMIC
                | IB_QP_MIN_RNR_TIMER,
            0x12_9181
        );
        assert_eq!(
            IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC,
            0x1_2E01
        );
        assert_eq!(IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY, 0x71);
        assert_eq!(IB_QP_STATE | IB_QP_SQ_PSN, 0x1_0001);
        assert_eq!(IB_QP_ATTR_STANDARD_BITS, 0x1F_FFFF);
    }
}
