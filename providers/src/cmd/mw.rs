//! Memory window commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{destroy_object, traced, Destroy};
use crate::sys::UverbsFd;
use crate::{Error, Result};

/// `IB_USER_VERBS_CMD_ALLOC_MW` (write-only on 6.1/6.12; sent through
/// `INVOKE_WRITE`) for a window of `mw_type` (`IB_MW_TYPE_1`/`_2`) in
/// protection domain `pd_handle`: returns the window's handle and rkey.
/// No driver data (rxe takes none; mlx5 reads a zeroed request).
pub fn alloc_mw(fd: &UverbsFd, pd_handle: u32, mw_type: u8) -> Result<(u32, u32)> {
    const VERB: &str = "ibv_alloc_mw";
    let mut req = ib_uverbs_alloc_mw::new_zeroed();
    req.pd_handle = pd_handle;
    req.mw_type = mw_type;
    let mut resp = ib_uverbs_alloc_mw_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_ALLOC_MW, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok((resp.mw_handle, resp.rkey))
}

/// `UVERBS_METHOD_MW_DESTROY` (write fallback `IB_USER_VERBS_CMD_DEALLOC_MW`).
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn dealloc_mw(fd: &UverbsFd, handle: u32) -> Result<()> {
    let req = ib_uverbs_dealloc_mw { mw_handle: handle };
    let d = Destroy {
        verb: "ibv_dealloc_mw",
        object: UVERBS_OBJECT_MW,
        method: UVERBS_METHOD_MW_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_MW_HANDLE,
        write_cmd: IB_USER_VERBS_CMD_DEALLOC_MW,
        write_req: req.as_bytes(),
    };
    destroy_object(fd, handle, &d)
}
