//! Protection domain commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{destroy_object, traced, Destroy};
use crate::sys::UverbsFd;
use crate::{Error, Result};

/// `IB_USER_VERBS_CMD_ALLOC_PD` (write-only on 6.1/6.12; sent through
/// `INVOKE_WRITE`): returns the PD handle. `drv_out` receives the driver's
/// response (mlx5: the PD number).
pub fn alloc_pd(fd: &UverbsFd, drv_out: &mut [u8]) -> Result<u32> {
    const VERB: &str = "ibv_alloc_pd";
    let req = ib_uverbs_alloc_pd::new_zeroed();
    let mut resp = ib_uverbs_alloc_pd_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_ALLOC_PD, req.as_bytes(), resp.as_mut_bytes(), &[], drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp.pd_handle)
}

/// `UVERBS_METHOD_PD_DESTROY` (write fallback `IB_USER_VERBS_CMD_DEALLOC_PD`).
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn dealloc_pd(fd: &UverbsFd, handle: u32) -> Result<()> {
    let req = ib_uverbs_dealloc_pd { pd_handle: handle };
    let d = Destroy {
        verb: "ibv_dealloc_pd",
        object: UVERBS_OBJECT_PD,
        method: UVERBS_METHOD_PD_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_PD_HANDLE,
        write_cmd: IB_USER_VERBS_CMD_DEALLOC_PD,
        write_req: req.as_bytes(),
    };
    destroy_object(fd, handle, &d)
}
