//! Completion queue and completion channel commands.

use std::mem::offset_of;
use std::os::fd::{BorrowedFd, OwnedFd};

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{owned_fd, traced};
use crate::sys::{CmdPath, IoctlCmd, SmallWrite, UverbsFd};
use crate::{Error, Result};

/// `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL` (write-only; through
/// `INVOKE_WRITE`): a new completion event fd.
pub fn create_comp_channel(fd: &UverbsFd) -> Result<OwnedFd> {
    const VERB: &str = "ibv_create_comp_channel";
    let req = ib_uverbs_create_comp_channel::new_zeroed();
    let mut resp = ib_uverbs_create_comp_channel_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    owned_fd(u64::from(resp.fd)).map_err(|e| Error::os(VERB, e))
}

/// Arguments of a CQ create.
#[derive(Clone, Copy, Debug)]
pub struct CreateCq<'a> {
    /// Minimum number of entries.
    pub cqe: u32,
    /// Value the kernel reports in completion and async events.
    pub user_handle: u64,
    /// Completion channel, if any.
    pub channel: Option<BorrowedFd<'a>>,
    /// Completion vector.
    pub comp_vector: u32,
}

/// The kernel's answer to a CQ create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqCreated {
    /// Handle for later commands.
    pub handle: u32,
    /// Actual number of entries.
    pub cqe: u32,
}

/// Adds the `UVERBS_METHOD_CQ_CREATE` attributes to `cmd` (made by
/// `IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE)`, in the
/// caller's frame: built in place, never moved), in the order libibverbs
/// sends them; returns the slot of the new handle.
#[inline]
pub fn create_cq_cmd<'a>(
    cmd: &mut IoctlCmd<'a>,
    a: &CreateCq<'a>,
    cqe_out: &'a mut u32,
    drv_in: &'a [u8],
    drv_out: &'a mut [u8],
) -> crate::sys::AttrSlot {
    let h = cmd.new_obj(UVERBS_ATTR_CREATE_CQ_HANDLE);
    cmd.out_struct(UVERBS_ATTR_CREATE_CQ_RESP_CQE, cqe_out);
    cmd.in_u32(UVERBS_ATTR_CREATE_CQ_CQE, a.cqe);
    cmd.in_u64(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, a.user_handle);
    if let Some(ch) = a.channel {
        cmd.in_fd(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, ch);
    }
    cmd.in_u32(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, a.comp_vector);
    cmd.uhw(drv_in, drv_out);
    h
}

/// `UVERBS_METHOD_CQ_CREATE` (write fallback `IB_USER_VERBS_CMD_CREATE_CQ`),
/// with the provider's driver data.
///
/// # Safety
/// The driver data goes to the kernel as it is, and some providers' driver
/// data names memory the device will read and write (mlx5: the queue buffer
/// and doorbell record). Every address in `drv_in` must be memory that stays
/// allocated, and that nothing else in the process uses, until the kernel
/// object is destroyed.
pub unsafe fn create_cq(fd: &UverbsFd, a: &CreateCq<'_>, drv_in: &[u8], drv_out: &mut [u8]) -> Result<CqCreated> {
    const VERB: &str = "ibv_create_cq";
    let mut cqe = 0u32;
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
        let h = create_cq_cmd(&mut cmd, a, &mut cqe, drv_in, &mut *drv_out);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            let handle = cmd.data(h) as u32;
            traced(VERB, CmdPath::Ioctl);
            return Ok(CqCreated { handle, cqe });
        }
    }
    let req = ib_uverbs_create_cq {
        response: 0,
        user_handle: a.user_handle,
        cqe: a.cqe,
        comp_vector: a.comp_vector,
        comp_channel: a.channel.map_or(-1, |c| std::os::fd::AsRawFd::as_raw_fd(&c)),
        reserved: 0,
        driver_data: [],
    };
    let mut resp = ib_uverbs_create_cq_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_CREATE_CQ, req.as_bytes(), resp.as_mut_bytes(), drv_in, drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(CqCreated { handle: resp.cq_handle, cqe: resp.cqe })
}

/// Event counts the kernel reported for a destroyed object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsReported {
    /// Completion events delivered for it.
    pub comp: u32,
    /// Async events delivered for it.
    pub async_: u32,
}

/// `UVERBS_METHOD_CQ_DESTROY` (write fallback `IB_USER_VERBS_CMD_DESTROY_CQ`).
///
/// In a forked child: nothing, `Ok` ([`UverbsFd`'s fork rule](crate::sys::UverbsFd#fork)).
pub fn destroy_cq(fd: &UverbsFd, handle: u32) -> Result<EventsReported> {
    const VERB: &str = "ibv_destroy_cq";
    if fd.skip_destroy_in_child(VERB, handle) {
        return Ok(EventsReported::default());
    }
    let mut resp = ib_uverbs_destroy_cq_resp::new_zeroed();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY);
        cmd.in_obj(UVERBS_ATTR_DESTROY_CQ_HANDLE, handle);
        cmd.out_struct(UVERBS_ATTR_DESTROY_CQ_RESP, &mut resp);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            traced(VERB, CmdPath::Ioctl);
            return Ok(EventsReported { comp: resp.comp_events_reported, async_: resp.async_events_reported });
        }
    }
    let req = ib_uverbs_destroy_cq { response: 0, cq_handle: handle, reserved: 0 };
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_DESTROY_CQ, req.as_bytes(), resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(EventsReported { comp: resp.comp_events_reported, async_: resp.async_events_reported })
}

/// `IB_USER_VERBS_CMD_RESIZE_CQ`: returns the new number of entries; the
/// driver's response (rxe: the new queue's mmap info) lands in `drv_out`.
pub fn resize_cq(fd: &UverbsFd, handle: u32, cqe: u32, drv_out: &mut [u8]) -> Result<u32> {
    const VERB: &str = "ibv_resize_cq";
    let req = ib_uverbs_resize_cq { response: 0, cq_handle: handle, cqe, driver_data: [] };
    let mut resp = ib_uverbs_resize_cq_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_RESIZE_CQ, req.as_bytes(), resp.as_mut_bytes(), &[], drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    Ok(resp.cqe)
}

/// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ` for one CQ, built once (at create)
/// and sent at every arm: rxe's `ibv_req_notify_cq` (mlx5 arms through its
/// doorbell instead). Sending it is one ioctl on a ready buffer (or one
/// `write()` on kernels without `INVOKE_WRITE`): rdma-core builds it anew
/// each time through its generic ioctl builder.
///
/// The CQ's handle lives in the command's request, written at create: the
/// command is all this keeps (56 bytes).
#[derive(Debug)]
pub struct ReqNotifyCq {
    cmd: SmallWrite,
}

/// `ib_uverbs_req_notify_cq { cq_handle, solicited_only }` as the 8-byte
/// request in memory order (what the kernel reads from an inlined
/// attribute), whatever the byte order.
const fn req_notify_body(cq_handle: u32, solicited_only: u32) -> u64 {
    let mut bytes = [0u8; 8];
    let h = cq_handle.to_ne_bytes();
    let s = solicited_only.to_ne_bytes();
    let (ho, so) =
        (offset_of!(ib_uverbs_req_notify_cq, cq_handle), offset_of!(ib_uverbs_req_notify_cq, solicited_only));
    let mut i = 0;
    while i < 4 {
        bytes[ho + i] = h[i];
        bytes[so + i] = s[i];
        i += 1;
    }
    u64::from_ne_bytes(bytes)
}

impl ReqNotifyCq {
    /// The request's `cq_handle` bits.
    const HANDLE: u64 = req_notify_body(u32::MAX, 0);
    /// The request's `solicited_only = 1`.
    const SOLICITED: u64 = req_notify_body(0, 1);

    /// The command for CQ `handle` of `fd`.
    pub fn new(fd: &UverbsFd, handle: u32) -> ReqNotifyCq {
        let mut cmd = SmallWrite::new(fd, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        cmd.set_body(req_notify_body(handle, 0));
        ReqNotifyCq { cmd }
    }

    /// Arms the CQ for one completion event (or one solicited one).
    #[doc(alias = "ibv_req_notify_cq")]
    #[inline]
    pub fn send(&mut self, fd: &UverbsFd, solicited_only: bool) -> Result<()> {
        let body = (self.cmd.body() & Self::HANDLE) | (Self::SOLICITED * u64::from(solicited_only));
        match fd.send_small(&mut self.cmd, body) {
            Ok(_) => Ok(()),
            Err(e) => Err(arm_error(e)),
        }
    }
}

#[cold]
fn arm_error(e: nix::errno::Errno) -> Error {
    Error::os("ibv_req_notify_cq", e)
}

/// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ` built for one call: arms the CQ for
/// one completion event ([`ReqNotifyCq`] keeps the command for the next).
pub fn req_notify_cq(fd: &UverbsFd, handle: u32, solicited_only: bool) -> Result<()> {
    let req = ib_uverbs_req_notify_cq { cq_handle: handle, solicited_only: solicited_only.into() };
    fd.write_cmd(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, req.as_bytes(), &mut [], &[], &mut [])
        .map_err(|e| Error::os("ibv_req_notify_cq", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept request is the struct's bytes, and an arm keeps the handle.
    #[test]
    fn req_notify_body_is_the_request() {
        let req = ib_uverbs_req_notify_cq { cq_handle: 0x1234_5678, solicited_only: 1 };
        let want = u64::from_ne_bytes(req.as_bytes().try_into().unwrap());
        assert_eq!(req_notify_body(0x1234_5678, 1), want);
        assert_eq!((req_notify_body(0x1234_5678, 0) & ReqNotifyCq::HANDLE) | ReqNotifyCq::SOLICITED, want);
    }

    /// CQ_CREATE for rxe with a channel on fd 7: hand-computed from
    /// uverbs-abi.md §2.7 (attribute ids, lengths, inline values, UHW_OUT).
    #[test]
    fn create_cq_bytes() {
        // SAFETY: fd 7 is only encoded, never used.
        let ch = unsafe { BorrowedFd::borrow_raw(7) };
        let a = CreateCq { cqe: 100, user_handle: 0x55, channel: Some(ch), comp_vector: 0 };
        let mut cqe = 0u32;
        let mut drv_out = [0u8; 16];
        let cqe_ptr = &mut cqe as *mut u32 as u64;
        let out_ptr = drv_out.as_mut_ptr() as u64;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
        create_cq_cmd(&mut cmd, &a, &mut cqe, &[], &mut drv_out);
        let b = cmd.finish(14).unwrap().to_vec();
        let mut want: Vec<u8> = vec![];
        let hdr = |w: &mut Vec<u8>, len: u16, obj: u16, meth: u16, n: u16| {
            for v in [len, obj, meth, n] {
                w.extend_from_slice(&v.to_le_bytes());
            }
            w.extend_from_slice(&[0; 8]);
            w.extend_from_slice(&14u32.to_le_bytes());
            w.extend_from_slice(&[0; 4]);
        };
        hdr(&mut want, 24 + 16 * 7, 3, 0, 7);
        let attr = |w: &mut Vec<u8>, id: u16, len: u16, flags: u16, data: u64| {
            for v in [id, len, flags, 0] {
                w.extend_from_slice(&v.to_le_bytes());
            }
            w.extend_from_slice(&data.to_le_bytes());
        };
        attr(&mut want, 0, 0, 1, 0); // HANDLE (new)
        attr(&mut want, 6, 4, 1, cqe_ptr); // RESP_CQE
        attr(&mut want, 1, 4, 1, 100); // CQE inline
        attr(&mut want, 2, 8, 1, 0x55); // USER_HANDLE inline
        attr(&mut want, 3, 0, 1, 7); // COMP_CHANNEL fd
        attr(&mut want, 4, 4, 1, 0); // COMP_VECTOR
        attr(&mut want, 0x1001, 16, 0, out_ptr); // UHW_OUT (rxe's mmap info), optional
        assert_eq!(b, want);
    }
}
