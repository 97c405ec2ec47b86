//! Connections and the rest: CONNECT, LISTEN, ACCEPT, REJECT, DISCONNECT,
//! INIT_QP_ATTR, NOTIFY, SET_OPTION, JOIN_MCAST, LEAVE_MCAST.

use std::net::SocketAddr;

use rverbs_uapi::ib_user_verbs::ib_uverbs_qp_attr;
use rverbs_uapi::rdma_user_cm::*;
use zerocopy::{FromZeros, IntoBytes};

use super::addr::sockaddr_of;
use super::{common_explanation, issue};
use crate::sys::ucma::{Command, UcmaFd};
use crate::{Errno, Error, Result};

fn explained(verb: &'static str, e: Errno, einval: &str) -> Error {
    let err = Error::os(verb, e);
    match e {
        Errno::EINVAL => err.with_message(einval.to_owned()),
        _ => match common_explanation(e) {
            Some(m) => err.with_message(m),
            None => err,
        },
    }
}

/// `RDMA_USER_CM_CMD_CONNECT` (6): sends the connection request of a
/// route-resolved id; CONNECT_RESPONSE (RC on IB/RoCE), ESTABLISHED (UD,
/// iWARP), REJECTED, UNREACHABLE or CONNECT_ERROR follows
/// (`rdma_connect`). `valid` is set here.
pub fn connect(fd: &UcmaFd, id: u32, param: &rdma_ucm_conn_param, ece: rdma_ucm_ece) -> Result<()> {
    const VERB: &str = "rdma_connect";
    let mut b = rdma_ucm_connect { conn_param: *param, id, reserved: 0, ece };
    b.conn_param.valid = 1;
    let c = Command { cmd: RDMA_USER_CM_CMD_CONNECT, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "CONNECT", VERB, id, c).map_err(|e| {
        explained(
            VERB,
            e,
            "the kernel refused the request: the route is not resolved yet, the id is connected already, or the \
             private data is too long for the transport",
        )
    })
}

/// `RDMA_USER_CM_CMD_LISTEN` (7): a bound id starts listening; each
/// request arrives as a CONNECT_REQUEST with a new id (`rdma_listen`).
/// A `backlog` of 0 or less is the kernel's maximum.
pub fn listen(fd: &UcmaFd, id: u32, backlog: i32) -> Result<()> {
    const VERB: &str = "rdma_listen";
    let mut b = rdma_ucm_listen { id, backlog: backlog as u32 };
    let c = Command { cmd: RDMA_USER_CM_CMD_LISTEN, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "LISTEN", VERB, id, c).map_err(|e| match e {
        Errno::EADDRINUSE => Error::os(VERB, e).with_message("another CM id listens on this address and port"),
        _ => explained(VERB, e, "the id cannot listen (bind it to an address first)"),
    })
}

/// `RDMA_USER_CM_CMD_ACCEPT` (8) with `valid` = 1: accepts a connection
/// request on the child `id`, whose events carry `uid` from now on
/// (`rdma_accept`). The QP must be in RTR/RTS already for RC.
pub fn accept(fd: &UcmaFd, id: u32, uid: u64, param: &rdma_ucm_conn_param, ece: rdma_ucm_ece) -> Result<()> {
    const VERB: &str = "rdma_accept";
    let mut b = rdma_ucm_accept { uid, conn_param: *param, id, reserved: 0, ece };
    b.conn_param.valid = 1;
    let c = Command { cmd: RDMA_USER_CM_CMD_ACCEPT, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "ACCEPT", VERB, id, c).map_err(|e| {
        explained(
            VERB,
            e,
            "the kernel refused the accept: the id has no pending request, or the private data is too long",
        )
    })
}

/// `RDMA_USER_CM_CMD_ACCEPT` (8) with `valid` = 0: the active side's
/// ready-to-use after CONNECT_RESPONSE, once its QP is in RTS
/// (`rdma_establish`, `ucma_process_conn_resp`).
pub fn establish(fd: &UcmaFd, id: u32) -> Result<()> {
    const VERB: &str = "rdma_establish";
    let mut b = rdma_ucm_accept::new_zeroed();
    b.id = id;
    let c = Command { cmd: RDMA_USER_CM_CMD_ACCEPT, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "ACCEPT(RTU)", VERB, id, c)
        .map_err(|e| explained(VERB, e, "the kernel refused the ready-to-use: no connect response is pending"))
}

/// `RDMA_USER_CM_CMD_REJECT` (9): rejects a connection request with
/// `private_data` (at most 256 bytes here; the transport's limit is
/// smaller) and `reason` (0: the kernel's "consumer reject", 28; or
/// `RDMA_USER_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`) (`rdma_reject`).
pub fn reject(fd: &UcmaFd, id: u32, private_data: &[u8], reason: u8) -> Result<()> {
    const VERB: &str = "rdma_reject";
    if private_data.len() > u8::MAX as usize {
        return Err(Error::check(VERB, Errno::EINVAL)
            .with_message(format!("{} bytes of private data: the command carries at most 255", private_data.len())));
    }
    let mut b = rdma_ucm_reject { id, private_data_len: private_data.len() as u8, reason, ..Default::default() };
    b.private_data[..private_data.len()].copy_from_slice(private_data);
    let c = Command { cmd: RDMA_USER_CM_CMD_REJECT, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "REJECT", VERB, id, c).map_err(|e| {
        explained(VERB, e, "the kernel refused the reject: no request is pending, or the private data is too long")
    })
}

/// `RDMA_USER_CM_CMD_DISCONNECT` (10): sends a disconnect request (or
/// answers the peer's); DISCONNECTED follows on both sides
/// (`rdma_disconnect`, after it moved the QP to ERR).
pub fn disconnect(fd: &UcmaFd, id: u32) -> Result<()> {
    const VERB: &str = "rdma_disconnect";
    let mut b = rdma_ucm_disconnect { id };
    let c = Command { cmd: RDMA_USER_CM_CMD_DISCONNECT, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "DISCONNECT", VERB, id, c).map_err(|e| explained(VERB, e, "the id is not connected"))
}

/// `RDMA_USER_CM_CMD_INIT_QP_ATTR` (11): the QP attributes and mask the
/// kernel's CM wants for moving the id's QP to `qp_state` (`IB_QPS_*`;
/// `rdma_init_qp_attr`).
pub fn init_qp_attr(fd: &UcmaFd, id: u32, qp_state: u32) -> Result<ib_uverbs_qp_attr> {
    const VERB: &str = "rdma_init_qp_attr";
    let mut b = rdma_ucm_init_qp_attr { response: 0, id, qp_state };
    let mut r = ib_uverbs_qp_attr::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_INIT_QP_ATTR,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    issue(fd, "INIT_QP_ATTR", VERB, id, c).map_err(|e| {
        explained(
            VERB,
            e,
            "the kernel has no attributes for that state yet (the id is not far enough in its connection)",
        )
    })?;
    Ok(r)
}

/// `RDMA_USER_CM_CMD_NOTIFY` (15): tells the CM about a QP event (`event`:
/// an `ibv_event_type`, e.g. COMM_EST 9) (`rdma_notify`).
pub fn notify(fd: &UcmaFd, id: u32, event: u32) -> Result<()> {
    const VERB: &str = "rdma_notify";
    let mut b = rdma_ucm_notify { id, event };
    let c = Command { cmd: RDMA_USER_CM_CMD_NOTIFY, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "NOTIFY", VERB, id, c).map_err(|e| explained(VERB, e, "the kernel refused the notification"))
}

/// `RDMA_USER_CM_CMD_SET_OPTION` (14): sets option `optname` of `level`
/// (`RDMA_OPTION_*`) to `optval` (`rdma_set_option`).
pub fn set_option(fd: &UcmaFd, id: u32, level: u32, optname: u32, optval: &[u8]) -> Result<()> {
    const VERB: &str = "rdma_set_option";
    let mut b = rdma_ucm_set_option { optval: 0, id, level, optname, optlen: optval.len() as u32 };
    let c = Command { cmd: RDMA_USER_CM_CMD_SET_OPTION, body: b.as_mut_bytes(), resp: None, input: Some((0, optval)) };
    issue(fd, "SET_OPTION", VERB, id, c).map_err(|e| match e {
        Errno::ENOSYS => Error::os(VERB, e).with_message(format!("the kernel does not know option {level}/{optname}")),
        _ => explained(VERB, e, "the kernel refused the option's value (or the id's state does not allow it now)"),
    })
}

/// `RDMA_USER_CM_CMD_JOIN_MCAST` (22): joins multicast group `addr`;
/// MULTICAST_JOIN or MULTICAST_ERROR follows with `uid`. Returns the
/// membership's kernel id (`rdma_join_multicast_ex`).
pub fn join_mcast(fd: &UcmaFd, id: u32, uid: u64, addr: &SocketAddr, join_flags: u16) -> Result<u32> {
    const VERB: &str = "rdma_join_multicast";
    let (ss, size) = sockaddr_of(addr);
    let mut b = rdma_ucm_join_mcast { response: 0, uid, id, addr_size: size, join_flags, addr: ss };
    let mut r = rdma_ucm_create_id_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_JOIN_MCAST,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    issue(fd, "JOIN_MCAST", VERB, id, c).map_err(|e| {
        explained(VERB, e, &format!("the kernel refused to join {addr} (bind or resolve the id first)"))
    })?;
    Ok(r.id)
}

/// `RDMA_USER_CM_CMD_LEAVE_MCAST` (17): leaves the membership `mc_id`
/// [`join_mcast`] returned; returns its `events_reported`
/// (`rdma_leave_multicast`).
pub fn leave_mcast(fd: &UcmaFd, mc_id: u32) -> Result<u32> {
    const VERB: &str = "rdma_leave_multicast";
    let mut b = rdma_ucm_destroy_id { response: 0, id: mc_id, reserved: 0 };
    let mut r = rdma_ucm_destroy_id_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_LEAVE_MCAST,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    issue(fd, "LEAVE_MCAST", VERB, mc_id, c).map_err(|e| explained(VERB, e, "no such membership"))?;
    Ok(r.events_reported)
}
