//! Memory region commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{destroy_object, traced, Destroy};
use crate::sys::{CmdPath, IoctlCmd, UverbsFd};
use crate::{Error, Result};

/// What `REG_MR` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrKeys {
    /// The MR's handle.
    pub handle: u32,
    /// Local key: goes in SGEs.
    pub lkey: u32,
    /// Remote key: what a peer uses for RDMA READ/WRITE/atomics.
    pub rkey: u32,
}

/// The most driver data [`reg_mr`] carries each way.
pub const REG_MR_UDATA_MAX: usize = 16;

/// `IB_USER_VERBS_CMD_REG_MR` (write-only before 6.17; through
/// `INVOKE_WRITE`): pins `[start, start+length)` and maps it at IO virtual
/// address `hca_va` in PD `pd`, with `udata_len` zero bytes of driver data
/// each way (the provider's [`Provider::reg_mr_udata_len`](crate::driver::Provider::reg_mr_udata_len); at most
/// [`REG_MR_UDATA_MAX`], else `EINVAL`). The kernel errno is returned raw
/// so the caller can explain `ENOMEM`/`EFAULT` with its own context.
///
/// # Safety
/// The device may read `[start, start+length)` and, with write access
/// flags, write it at any time until the MR is deregistered: the range must
/// be memory that stays mapped until then, and that no Rust reference
/// covers while the device may write it.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reg_mr(
    fd: &UverbsFd,
    pd: u32,
    start: u64,
    length: u64,
    hca_va: u64,
    access: u32,
    udata_len: usize,
) -> Result<MrKeys, crate::Errno> {
    if udata_len > REG_MR_UDATA_MAX {
        return Err(crate::Errno::EINVAL);
    }
    let req =
        ib_uverbs_reg_mr { response: 0, start, length, hca_va, pd_handle: pd, access_flags: access, driver_data: [] };
    let mut resp = ib_uverbs_reg_mr_resp::new_zeroed();
    let drv_in = [0u8; REG_MR_UDATA_MAX];
    let mut drv_out = [0u8; REG_MR_UDATA_MAX];
    let path = fd.write_cmd(
        IB_USER_VERBS_CMD_REG_MR,
        req.as_bytes(),
        resp.as_mut_bytes(),
        &drv_in[..udata_len],
        &mut drv_out[..udata_len],
    )?;
    traced("ibv_reg_mr", path);
    Ok(MrKeys { handle: resp.mr_handle, lkey: resp.lkey, rkey: resp.rkey })
}

/// `IB_USER_VERBS_CMD_REREG_MR`: changes translation, PD and/or access of
/// MR `handle` (`flags`: `IBV_REREG_MR_CHANGE_TRANSLATION` 1, `_PD` 2,
/// `_ACCESS` 4). Returns the new keys.
///
/// # Safety
/// With `IBV_REREG_MR_CHANGE_TRANSLATION`, the new range is under
/// [`reg_mr`]'s contract; with write access flags, so is the old one.
#[allow(clippy::too_many_arguments)]
pub unsafe fn rereg_mr(
    fd: &UverbsFd,
    handle: u32,
    flags: u32,
    start: u64,
    length: u64,
    hca_va: u64,
    pd: u32,
    access: u32,
) -> Result<MrKeys, crate::Errno> {
    let req = ib_uverbs_rereg_mr {
        response: 0,
        mr_handle: handle,
        flags,
        start,
        length,
        hca_va,
        pd_handle: pd,
        access_flags: access,
        driver_data: [],
    };
    let mut resp = ib_uverbs_rereg_mr_resp::new_zeroed();
    let path = fd.write_cmd(IB_USER_VERBS_CMD_REREG_MR, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])?;
    traced("ibv_rereg_mr", path);
    Ok(MrKeys { handle, lkey: resp.lkey, rkey: resp.rkey })
}

/// `UVERBS_METHOD_MR_DESTROY` (write fallback `IB_USER_VERBS_CMD_DEREG_MR`).
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn dereg_mr(fd: &UverbsFd, handle: u32) -> Result<()> {
    let req = ib_uverbs_dereg_mr { mr_handle: handle };
    let d = Destroy {
        verb: "ibv_dereg_mr",
        object: UVERBS_OBJECT_MR,
        method: UVERBS_METHOD_MR_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_MR_HANDLE,
        write_cmd: IB_USER_VERBS_CMD_DEREG_MR,
        write_req: req.as_bytes(),
    };
    destroy_object(fd, handle, &d)
}

/// What `UVERBS_METHOD_QUERY_MR` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrQuery {
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub length: u64,
}

/// `UVERBS_METHOD_QUERY_MR` (5.9+; no write form).
pub fn query_mr(fd: &UverbsFd, handle: u32) -> Result<MrQuery> {
    const VERB: &str = "ibv_query_mr";
    let (mut lkey, mut rkey, mut length) = (0u32, 0u32, 0u64);
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_MR, UVERBS_METHOD_QUERY_MR);
    cmd.in_obj(UVERBS_ATTR_QUERY_MR_HANDLE, handle);
    cmd.out_struct(UVERBS_ATTR_QUERY_MR_RESP_LKEY, &mut lkey);
    cmd.out_struct(UVERBS_ATTR_QUERY_MR_RESP_RKEY, &mut rkey);
    cmd.out_struct(UVERBS_ATTR_QUERY_MR_RESP_LENGTH, &mut length);
    fd.ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))?;
    traced(VERB, CmdPath::Ioctl);
    Ok(MrQuery { lkey, rkey, length })
}
