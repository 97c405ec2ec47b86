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

/// Adds the `UVERBS_METHOD_QP_CREATE` attributes to `cmd` (made by
/// `IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE)`, in the
/// caller's frame: built in place, never moved); returns the slot of the
/// new handle.
#[inline]
pub fn create_qp_cmd<'a>(
    cmd: &mut IoctlCmd<'a>,
    a: &'a CreateQp,
    cap_out: &'a mut ib_uverbs_qp_cap,
    qpn_out: &'a mut u32,
    drv_in: &'a [u8],
    drv_out: &'a mut [u8],
) -> crate::sys::AttrSlot {
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
    cmd.out_struct(UVERBS_ATTR_CREATE_QP_RESP_CAP, cap_out);
    cmd.out_struct(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, qpn_out);
    cmd.uhw(drv_in, drv_out);
    h
}

/// `UVERBS_METHOD_QP_CREATE` (write fallback `IB_USER_VERBS_CMD_CREATE_QP`).
///
/// # Safety
/// The driver data goes to the kernel as it is, and some providers' driver
/// data names memory the device will read and write (mlx5: the queue buffer
/// and doorbell record). Every address in `drv_in` must be memory that stays
/// allocated, and that nothing else in the process uses, until the kernel
/// object is destroyed.
pub unsafe fn create_qp(fd: &UverbsFd, a: &CreateQp, drv_in: &[u8], drv_out: &mut [u8]) -> Result<QpCreated> {
    const VERB: &str = "ibv_create_qp";
    let mut cap = ib_uverbs_qp_cap::new_zeroed();
    let mut qpn = 0u32;
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
        let h = create_qp_cmd(&mut cmd, a, &mut cap, &mut qpn, drv_in, &mut *drv_out);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            let handle = cmd.data(h) as u32;
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
        // The kernel's legacy CREATE_QP reads `srq_handle` only when this
        // is set (found by the mlx5 differential test: the QP was created
        // without its SRQ on kernels without the ioctl framework).
        is_srq: a.srq.is_some().into(),
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
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn destroy_qp(fd: &UverbsFd, handle: u32) -> Result<u32> {
    const VERB: &str = "ibv_destroy_qp";
    if fd.skip_destroy_in_child(VERB, handle) {
        return Ok(0);
    }
    let mut resp = ib_uverbs_destroy_qp_resp::new_zeroed();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY);
        cmd.in_obj(UVERBS_ATTR_DESTROY_QP_HANDLE, handle);
        cmd.out_struct(UVERBS_ATTR_DESTROY_QP_RESP, &mut resp);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
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

/// Attaches a UD QP to a multicast group: `IB_USER_VERBS_CMD_ATTACH_MCAST`
/// (write-only; through `INVOKE_WRITE`), `ibv_attach_mcast`. `gid` is the
/// group's GID in network order, `mlid` its LID (0 on RoCE). The kernel
/// answers EINVAL for a GID that is not a multicast address, a QP that is
/// not UD or a LID outside the multicast range, and 0 for a group the QP
/// is already attached to.
pub fn attach_mcast(fd: &UverbsFd, qp_handle: u32, gid: [u8; 16], mlid: u16) -> Result<()> {
    const VERB: &str = "ibv_attach_mcast";
    let req = ib_uverbs_attach_mcast { gid, qp_handle, mlid, reserved: 0, driver_data: [] };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_ATTACH_MCAST, req.as_bytes(), &mut [], &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(())
}

/// Detaches a QP from a multicast group: `IB_USER_VERBS_CMD_DETACH_MCAST`
/// (write-only; through `INVOKE_WRITE`), `ibv_detach_mcast`. EINVAL when
/// the QP is not attached to that group (GID and LID).
pub fn detach_mcast(fd: &UverbsFd, qp_handle: u32, gid: [u8; 16], mlid: u16) -> Result<()> {
    const VERB: &str = "ibv_detach_mcast";
    let req = ib_uverbs_detach_mcast { gid, qp_handle, mlid, reserved: 0, driver_data: [] };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_DETACH_MCAST, req.as_bytes(), &mut [], &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(w: &mut Vec<u8>, id: u16, len: u16, flags: u16, data: u64) {
        for v in [id, len, flags, 0] {
            w.extend_from_slice(&v.to_le_bytes());
        }
        w.extend_from_slice(&data.to_le_bytes());
    }

    /// QP_CREATE for an RC QP with sq_sig_all, hand-computed from the
    /// attribute table of uverbs-abi.md §2.5 (Object 4).
    #[test]
    fn create_qp_bytes() {
        let a = CreateQp {
            qp_type: 2,
            pd: 1,
            send_cq: 2,
            recv_cq: 3,
            srq: None,
            cap: ib_uverbs_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
            sq_sig_all: true,
            user_handle: 9,
        };
        let (mut cap, mut qpn) = (ib_uverbs_qp_cap::new_zeroed(), 0u32);
        let cap_ptr = &mut cap as *mut _ as u64;
        let qpn_ptr = &mut qpn as *mut u32 as u64;
        let in_cap_ptr = &a.cap as *const _ as u64;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
        create_qp_cmd(&mut cmd, &a, &mut cap, &mut qpn, &[], &mut []);
        let b = cmd.finish(14).unwrap().to_vec();
        let mut want: Vec<u8> = vec![];
        for v in [24u16 + 16 * 10, 4, 0, 10] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&14u32.to_le_bytes());
        want.extend_from_slice(&[0; 4]);
        attr(&mut want, 0, 0, 1, 0); // HANDLE
        attr(&mut want, 2, 0, 1, 1); // PD
        attr(&mut want, 4, 0, 1, 2); // SEND_CQ
        attr(&mut want, 5, 0, 1, 3); // RECV_CQ
        attr(&mut want, 7, 8, 1, 9); // USER_HANDLE
        attr(&mut want, 8, 20, 1, in_cap_ptr); // CAP: 20 bytes, by pointer
        attr(&mut want, 9, 8, 1, 2); // TYPE = IB_UVERBS_QPT_RC, CONST_IN
        attr(&mut want, 10, 4, 1, 1 << 12); // FLAGS = SQ_SIG_ALL
        attr(&mut want, 13, 20, 1, cap_ptr); // RESP_CAP
        attr(&mut want, 14, 4, 1, qpn_ptr); // RESP_QP_NUM
        assert_eq!(b, want);
    }
}
