//! Device-level commands: context, async event fd, device/port/GID queries.

use std::os::fd::OwnedFd;

use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_ioctl_verbs::{ib_uverbs_gid_entry, ib_uverbs_query_port_resp_ex};
use rverbs_uapi::ib_user_verbs::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{owned_fd, traced};
use crate::sys::{CmdPath, IoctlCmd, UverbsFd};
use crate::{Errno, Error, Result};

/// What `GET_CONTEXT` returned.
#[derive(Debug)]
pub struct ContextInfo {
    /// Completion vectors the device has.
    pub num_comp_vectors: u32,
    /// `UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT` bits (0 on the write path).
    pub core_support: u64,
    /// The async event fd, when the command returned one (write path only).
    pub async_fd: Option<OwnedFd>,
    /// The path the command took.
    pub path: CmdPath,
}

/// `UVERBS_METHOD_GET_CONTEXT` (write fallback: `IB_USER_VERBS_CMD_GET_CONTEXT`):
/// creates the fd's one ucontext. `drv_in`/`drv_out` carry the provider's
/// request and response (`mlx5_ib_alloc_ucontext_req_v2`/`_resp`; empty for rxe).
pub fn get_context(fd: &UverbsFd, drv_in: &[u8], drv_out: &mut [u8]) -> Result<ContextInfo> {
    const VERB: &str = "ibv_open_device(GET_CONTEXT)";
    let mut ncv = 0u32;
    let mut core = 0u64;
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
        cmd.out_struct(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &mut ncv);
        cmd.out_struct(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core);
        cmd.uhw(drv_in, drv_out);
        if fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
            traced(VERB, CmdPath::Ioctl);
            return Ok(ContextInfo { num_comp_vectors: ncv, core_support: core, async_fd: None, path: CmdPath::Ioctl });
        }
    }
    let req = ib_uverbs_get_context::new_zeroed();
    let mut resp = ib_uverbs_get_context_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_GET_CONTEXT, req.as_bytes(), resp.as_mut_bytes(), drv_in, drv_out)
        .map_err(|e| Error::os(VERB, e))?;
    traced(VERB, path);
    let async_fd = owned_fd(u64::from(resp.async_fd)).map_err(|e| Error::os(VERB, e))?;
    Ok(ContextInfo { num_comp_vectors: resp.num_comp_vectors, core_support: 0, async_fd: Some(async_fd), path })
}

/// `UVERBS_METHOD_ASYNC_EVENT_ALLOC`: the context's async event fd. The first
/// one allocated becomes the default for objects created afterwards, so call
/// it right after [`get_context`].
pub fn async_event_alloc(fd: &UverbsFd) -> Result<OwnedFd> {
    const VERB: &str = "ibv_open_device(ASYNC_EVENT_ALLOC)";
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    let slot = cmd.new_fd(UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    fd.ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))?;
    traced(VERB, CmdPath::Ioctl);
    owned_fd(cmd.data(slot)).map_err(|e| Error::os(VERB, e))
}

/// The device attributes and how many bytes of them the kernel filled in.
pub struct DeviceAttrRaw {
    /// The extended response; only its first `len` bytes are valid.
    pub resp: ib_uverbs_ex_query_device_resp,
    /// Valid length: `response_length` of the EX command, 176 for the legacy one.
    pub len: usize,
}

/// `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` (through `INVOKE_WRITE` or `write()`),
/// falling back to the legacy `IB_USER_VERBS_CMD_QUERY_DEVICE`.
pub fn query_device(fd: &UverbsFd) -> Result<DeviceAttrRaw> {
    const VERB: &str = "ibv_query_device_ex";
    let req = ib_uverbs_ex_query_device::new_zeroed();
    let mut resp = ib_uverbs_ex_query_device_resp::new_zeroed();
    match fd.write_cmd_ex(IB_USER_VERBS_EX_CMD_QUERY_DEVICE, req.as_bytes(), resp.as_mut_bytes(), &[], &mut []) {
        Ok(path) => {
            traced(VERB, path);
            let len =
                (resp.response_length as usize).clamp(size_of::<ib_uverbs_query_device_resp>(), size_of_val(&resp));
            return Ok(DeviceAttrRaw { resp, len });
        }
        Err(Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL) => {}
        Err(e) => return Err(Error::os(VERB, e)),
    }
    let req = ib_uverbs_query_device::new_zeroed();
    let mut base = ib_uverbs_query_device_resp::new_zeroed();
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_QUERY_DEVICE, req.as_bytes(), base.as_mut_bytes(), &[], &mut [])
        .map_err(|e| Error::os("ibv_query_device", e))?;
    traced("ibv_query_device", path);
    resp.base = base;
    Ok(DeviceAttrRaw { resp, len: size_of::<ib_uverbs_query_device_resp>() })
}

/// `UVERBS_METHOD_QUERY_PORT` (48-byte extended response), falling back to
/// the write command `IB_USER_VERBS_CMD_QUERY_PORT` (40-byte legacy response).
pub fn query_port(fd: &UverbsFd, port: u8) -> Result<ib_uverbs_query_port_resp_ex> {
    const VERB: &str = "ibv_query_port";
    let mut resp = ib_uverbs_query_port_resp_ex::new_zeroed();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.in_const(UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port));
        cmd.out_struct(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
        if fd.try_ioctl(&mut cmd).map_err(|e| port_error(e, port))? {
            traced(VERB, CmdPath::Ioctl);
            return Ok(resp);
        }
    }
    let mut req = ib_uverbs_query_port::new_zeroed();
    req.port_num = port;
    let path = fd
        .write_cmd(IB_USER_VERBS_CMD_QUERY_PORT, req.as_bytes(), resp.legacy_resp.as_mut_bytes(), &[], &mut [])
        .map_err(|e| port_error(e, port))?;
    traced(VERB, path);
    Ok(resp)
}

fn port_error(e: Errno, port: u8) -> Error {
    let err = Error::os("ibv_query_port", e);
    if e == Errno::EINVAL {
        err.with_message(format!("port {port} does not exist on this device (ports are numbered from 1)"))
    } else {
        err
    }
}

/// `UVERBS_METHOD_QUERY_GID_TABLE`: every valid GID entry of every port, in
/// one call. `max_entries` bounds the answer (the sum of the ports' `gid_tbl_len`).
/// `Ok(None)` when the kernel lacks the method (before 5.10).
pub fn query_gid_table(fd: &UverbsFd, max_entries: usize) -> Result<Option<Vec<ib_uverbs_gid_entry>>> {
    const VERB: &str = "ibv_query_gid_table";
    let mut entries = vec![ib_uverbs_gid_entry::new_zeroed(); max_entries.max(1)];
    let mut num = 0u64;
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
    cmd.in_const(UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, size_of::<ib_uverbs_gid_entry>() as u64);
    cmd.out_bytes(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, entries.as_mut_slice().as_mut_bytes());
    cmd.out_struct(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut num);
    if !fd.try_ioctl(&mut cmd).map_err(|e| Error::os(VERB, e))? {
        return Ok(None);
    }
    traced(VERB, CmdPath::Ioctl);
    entries.truncate(num as usize);
    Ok(Some(entries))
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY`: one entry. `Ok(None)` for an empty entry
/// (`ENODATA`); `Err` with `EOPNOTSUPP` when the kernel lacks the method.
pub fn query_gid_entry(fd: &UverbsFd, port: u8, index: u32) -> Result<Option<ib_uverbs_gid_entry>> {
    const VERB: &str = "ibv_query_gid_ex";
    let mut entry = ib_uverbs_gid_entry::new_zeroed();
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY);
    cmd.in_const(UVERBS_ATTR_QUERY_GID_ENTRY_PORT, u64::from(port));
    cmd.in_const(UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, u64::from(index));
    cmd.in_u32(UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0);
    cmd.out_struct(UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &mut entry);
    match fd.ioctl(&mut cmd) {
        Ok(()) => {
            traced(VERB, CmdPath::Ioctl);
            Ok(Some(entry))
        }
        Err(Errno::ENODATA) => Ok(None),
        Err(e) => Err(Error::os(VERB, e)),
    }
}

/// Reads a struct from the start of a byte buffer (for callers holding raw udata).
pub fn read_struct<T: FromBytes>(b: &[u8]) -> Option<T> {
    T::read_from_prefix(b).ok().map(|(v, _)| v)
}
