//! Queue pair commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::traced;
use crate::sys::{CmdPath, IoctlCmd, UverbsFd};
use crate::{Error, Result};

/// Arguments of a QP create.
#[derive(Clone, Copy, Debug)]
pub struct CreateQp {
    /// `IB_UVERBS_QPT_*`.
    pub qp_type: u32,
    /// PD handle.
    pub pd: u32,
    /// Send CQ handle.
    pub send_cq: u32,
    /// Receive CQ handle.
    pub recv_cq: u32,
    /// SRQ handle, if the QP receives from an SRQ.
    pub srq: Option<u32>,
    /// Requested capacities.
    pub cap: ib_uverbs_qp_cap,
    /// Every send work request generates a completion.
    pub sq_sig_all: bool,
    /// Value the kernel reports in async events.
    pub user_handle: u64,
}

/// The kernel's answer to a QP create.
#[derive(Clone, Copy, Debug)]
pub struct QpCreated {
    /// Handle for later commands.
    pub handle: u32,
    /// The QP number.
    pub qpn: u32,
    /// Actual capacities (at least what was asked).
    pub cap: ib_uverbs_qp_cap,
}

/// `UVERBS_METHOD_QP_CREATE` (write fallback `IB_USER_VERBS_CMD_CREATE_QP`).
pub fn create_qp(fd: &UverbsFd, a: &CreateQp, drv_in: &[u8], drv_out: &mut [u8]) -> Result<QpCreated> {
    const VERB: &str = "ibv_create_qp";
    let mut cap = ib_uverbs_qp_cap::new_zeroed();
    let mut qpn = 0u32;
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
        let h = cmd.new_obj(UVERBS_ATTR_CREATE_QP_HANDLE);
        cmd.in_obj(UVERBS_ATTR_CREATE_QP_PD_HANDLE, a.pd);
        cmd.in_obj(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, a.send_cq);
        cmd.in_obj(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, a.recv_cq);
        if let Some(srq) = a.srq {
            cmd.in_obj(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, srq);
        }
        cmd.in_u64(UVERBS_ATTR_CREATE_QP_USER_HANDLE, a.user_handle);
        cmd.in_struct(UVERBS_ATTR_CREATE_QP_CAP, &a.cap);
        cmd.in_const(UVERBS_ATTR_CREATE_QP_TYPE, u64::from(a.qp_type));
        if a.sq_sig_all {
            cmd.in_u32(UVERBS_ATTR_CREATE_QP_FLAGS, rverbs_uapi::ib_user_ioctl_verbs::IB_UVERBS_QP_CREATE_SQ_SIG_ALL);
        }
        cmd.out_struct(UVERBS_ATTR_CREATE_QP_RESP_CAP, &mut cap);
        cmd.out_struct(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &mut qpn);
        cmd.uhw(drv_in, &mut *drv_out);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            let handle = cmd.data(h) as u32;
            drop(cmd);
            traced(VERB, CmdPath::Ioctl);
            return Ok(QpCreated { handle, qpn, cap });
        }
    }
    let req = ib_uverbs_create_qp {
        response: 0,
        user_handle: a.user_handle,
        pd_handle: a.pd,
        send_cq_handle: a.send_cq,
        recv_cq_handle: a.recv_cq,
        srq_handle: a.srq.unwrap_or(0),
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
        sq_sig_all: a.sq_sig_all.into(),
        qp_type: a.qp_type as u8,
        is_srq: 0,
        reserved: 0,
        driver_data: [],
    };
    let mut resp = ib_uverbs_create_qp_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_CREATE_QP, req.as_bytes(), resp.as_mut_bytes(), drv_in, drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(QpCreated {
        handle: resp.qp_handle,
        qpn: resp.qpn,
        cap: ib_uverbs_qp_cap {
            max_send_wr: resp.max_send_wr,
            max_recv_wr: resp.max_recv_wr,
            max_send_sge: resp.max_send_sge,
            max_recv_sge: resp.max_recv_sge,
            max_inline_data: resp.max_inline_data,
        },
    })
}

/// `UVERBS_METHOD_QP_DESTROY` (write fallback `IB_USER_VERBS_CMD_DESTROY_QP`):
/// returns the number of async events the kernel reported for the QP.
pub fn destroy_qp(fd: &UverbsFd, handle: u32) -> Result<u32> {
    const VERB: &str = "ibv_destroy_qp";
    let mut resp = ib_uverbs_destroy_qp_resp::new_zeroed();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY);
        cmd.in_obj(UVERBS_ATTR_DESTROY_QP_HANDLE, handle);
        cmd.out_struct(UVERBS_ATTR_DESTROY_QP_RESP, &mut resp);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            drop(cmd);
            traced(VERB, CmdPath::Ioctl);
            return Ok(resp.events_reported);
        }
    }
    let req = ib_uverbs_destroy_qp { response: 0, qp_handle: handle, reserved: 0 };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_DESTROY_QP, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp.events_reported)
}

/// `IB_USER_VERBS_CMD_MODIFY_QP` (write-only; through `INVOKE_WRITE`), or the
/// extended form when `rate_limit` is given. The raw errno is returned so the
/// caller can explain it with the QP's state and the attributes.
pub fn modify_qp(fd: &UverbsFd, req: &ib_uverbs_modify_qp, rate_limit: Option<u32>) -> Result<CmdPath, crate::Errno> {
    match rate_limit {
        None => fd.write_cmd(IB_USER_VERBS_CMD_MODIFY_QP, req.as_bytes(), &mut [], &[], &mut []),
        Some(rate_limit) => {
            let ex = ib_uverbs_ex_modify_qp { base: *req, rate_limit, reserved: 0 };
            let mut resp = ib_uverbs_ex_modify_qp_resp::new_zeroed();
            fd.write_cmd_ex(IB_USER_VERBS_EX_CMD_MODIFY_QP, ex.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        }
    }
}

/// `IB_USER_VERBS_CMD_QUERY_QP` (write-only; through `INVOKE_WRITE`).
pub fn query_qp(fd: &UverbsFd, handle: u32, attr_mask: u32) -> Result<ib_uverbs_query_qp_resp> {
    const VERB: &str = "ibv_query_qp";
    let req = ib_uverbs_query_qp { response: 0, qp_handle: handle, attr_mask, driver_data: [] };
    let mut resp = ib_uverbs_query_qp_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_QUERY_QP, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp)
}
