//! Address handle commands.

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{destroy_object, traced, Destroy};
use crate::sys::UverbsFd;
use crate::Result;

/// `IB_USER_VERBS_CMD_CREATE_AH` (write-only; through `INVOKE_WRITE`). The
/// kernel resolves the destination MAC for RoCE; the driver's answer (rxe:
/// `ah_num`; mlx5: the dmac) lands in `drv_out`. The raw errno is returned so
/// the caller can explain routing failures with the GIDs involved.
pub fn create_ah(
    fd: &UverbsFd,
    pd: u32,
    attr: &ib_uverbs_ah_attr,
    user_handle: u64,
    drv_out: &mut [u8],
) -> Result<u32, crate::Errno> {
    let req =
        ib_uverbs_create_ah { response: 0, user_handle, pd_handle: pd, reserved: 0, attr: *attr, driver_data: [] };
    let mut resp = ib_uverbs_create_ah_resp::new_zeroed();
    let path = fd.write_cmd(IB_USER_VERBS_CMD_CREATE_AH, req.as_bytes(), resp.as_mut_bytes(), &[], drv_out)?;
    traced("ibv_create_ah", path);
    Ok(resp.ah_handle)
}

/// `UVERBS_METHOD_AH_DESTROY` (write fallback `IB_USER_VERBS_CMD_DESTROY_AH`).
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn destroy_ah(fd: &UverbsFd, handle: u32) -> Result<()> {
    let req = ib_uverbs_destroy_ah { ah_handle: handle };
    let d = Destroy {
        verb: "ibv_destroy_ah",
        object: UVERBS_OBJECT_AH,
        method: UVERBS_METHOD_AH_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_AH_HANDLE,
        write_cmd: IB_USER_VERBS_CMD_DESTROY_AH,
        write_req: req.as_bytes(),
    };
    destroy_object(fd, handle, &d)
}
