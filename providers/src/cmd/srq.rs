//! Shared receive queue commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::traced;
use crate::sys::{CmdPath, IoctlCmd, UverbsFd};
use crate::{Error, Result};

/// The kernel's answer to an SRQ create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqCreated {
    /// Handle for later commands.
    pub handle: u32,
    /// Actual capacity.
    pub max_wr: u32,
    /// Actual SGEs per receive.
    pub max_sge: u32,
    /// SRQ number (XRC), when reported.
    pub srqn: u32,
}

/// `UVERBS_METHOD_SRQ_CREATE` for a basic SRQ (write fallback `IB_USER_VERBS_CMD_CREATE_SRQ`).
///
/// # Safety
/// The driver data goes to the kernel as it is, and some providers' driver
/// data names memory the device will read and write (mlx5: the queue buffer
/// and doorbell record). Every address in `drv_in` must be memory that stays
/// allocated, and that nothing else in the process uses, until the kernel
/// object is destroyed.
#[allow(clippy::too_many_arguments)]
pub unsafe fn create_srq(
    fd: &UverbsFd,
    pd: u32,
    max_wr: u32,
    max_sge: u32,
    limit: u32,
    user_handle: u64,
    drv_in: &[u8],
    drv_out: &mut [u8],
) -> Result<SrqCreated> {
    const VERB: &str = "ibv_create_srq";
    let (mut rwr, mut rsge, mut srqn) = (0u32, 0u32, 0u32);
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE);
        let h = cmd.new_obj(UVERBS_ATTR_CREATE_SRQ_HANDLE);
        cmd.in_obj(UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd);
        cmd.in_u64(UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, user_handle);
        cmd.in_u32(UVERBS_ATTR_CREATE_SRQ_MAX_WR, max_wr);
        cmd.in_u32(UVERBS_ATTR_CREATE_SRQ_MAX_SGE, max_sge);
        cmd.in_u32(UVERBS_ATTR_CREATE_SRQ_LIMIT, limit);
        cmd.in_const(UVERBS_ATTR_CREATE_SRQ_TYPE, 0); // IB_SRQT_BASIC
        cmd.out_struct(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &mut rwr);
        cmd.out_struct(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &mut rsge);
        cmd.out_struct(UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, &mut srqn);
        cmd.optional();
        cmd.uhw(drv_in, &mut *drv_out);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            let handle = cmd.data(h) as u32;
            traced(VERB, CmdPath::Ioctl);
            return Ok(SrqCreated { handle, max_wr: rwr, max_sge: rsge, srqn });
        }
    }
    let req = ib_uverbs_create_srq {
        response: 0,
        user_handle,
        pd_handle: pd,
        max_wr,
        max_sge,
        srq_limit: limit,
        driver_data: [],
    };
    let mut resp = ib_uverbs_create_srq_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_CREATE_SRQ, req.as_bytes(), resp.as_mut_bytes(), drv_in, drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(SrqCreated { handle: resp.srq_handle, max_wr: resp.max_wr, max_sge: resp.max_sge, srqn: resp.srqn })
}

/// `UVERBS_METHOD_SRQ_DESTROY` (write fallback `IB_USER_VERBS_CMD_DESTROY_SRQ`):
/// returns the number of async events reported for it.
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn destroy_srq(fd: &UverbsFd, handle: u32) -> Result<u32> {
    const VERB: &str = "ibv_destroy_srq";
    if fd.skip_destroy_in_child(VERB, handle) {
        return Ok(0);
    }
    let mut resp = ib_uverbs_destroy_srq_resp::new_zeroed();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY);
        cmd.in_obj(UVERBS_ATTR_DESTROY_SRQ_HANDLE, handle);
        cmd.out_struct(UVERBS_ATTR_DESTROY_SRQ_RESP, &mut resp);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            traced(VERB, CmdPath::Ioctl);
            return Ok(resp.events_reported);
        }
    }
    let req = ib_uverbs_destroy_srq { response: 0, srq_handle: handle, reserved: 0 };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_DESTROY_SRQ, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp.events_reported)
}

/// `IB_USER_VERBS_CMD_MODIFY_SRQ` (`attr_mask`: `IBV_SRQ_MAX_WR` 1, `IBV_SRQ_LIMIT` 2).
///
/// # Safety
/// rxe's driver data (`rxe_modify_srq_cmd`) carries an address the kernel
/// writes the resized queue's mmap info to: every address in `drv_in` must
/// be writable memory of this process for the duration of the call.
pub unsafe fn modify_srq(
    fd: &UverbsFd,
    handle: u32,
    attr_mask: u32,
    max_wr: u32,
    limit: u32,
    drv_in: &[u8],
) -> Result<()> {
    const VERB: &str = "ibv_modify_srq";
    let req = ib_uverbs_modify_srq { srq_handle: handle, attr_mask, max_wr, srq_limit: limit, driver_data: [] };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_MODIFY_SRQ, req.as_bytes(), &mut [], drv_in, &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(())
}

/// `IB_USER_VERBS_CMD_QUERY_SRQ`.
pub fn query_srq(fd: &UverbsFd, handle: u32) -> Result<ib_uverbs_query_srq_resp> {
    const VERB: &str = "ibv_query_srq";
    let req = ib_uverbs_query_srq { response: 0, srq_handle: handle, reserved: 0, driver_data: [] };
    let mut resp = ib_uverbs_query_srq_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_QUERY_SRQ, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp)
}
