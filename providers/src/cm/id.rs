//! Ids and events: CREATE_ID, DESTROY_ID, MIGRATE_ID, GET_EVENT.

use rverbs_uapi::rdma_user_cm::*;
use zerocopy::{FromZeros, IntoBytes};

use super::{common_explanation, issue};
use crate::sys::ucma::{Command, UcmaFd};
use crate::{Errno, Error, Result};

fn explained(verb: &'static str, e: Errno) -> Error {
    let err = Error::os(verb, e);
    match common_explanation(e) {
        Some(m) => err.with_message(m),
        None => err,
    }
}

/// `RDMA_USER_CM_CMD_CREATE_ID` (0): a new id in port space `ps`
/// (`RDMA_PS_*`) whose events will carry `uid`; returns the kernel's id
/// (`rdma_create_id`). `qp_type` matters only for `RDMA_PS_IB`.
pub fn create_id(fd: &UcmaFd, uid: u64, ps: u16, qp_type: u8) -> Result<u32> {
    const VERB: &str = "rdma_create_id";
    let mut b = rdma_ucm_create_id { uid, response: 0, ps, qp_type, reserved: [0; 5] };
    let mut r = rdma_ucm_create_id_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_CREATE_ID,
        body: b.as_mut_bytes(),
        resp: Some((8, r.as_mut_bytes())),
        input: None,
    };
    issue(fd, "CREATE_ID", VERB, 0, c).map_err(|e| match e {
        Errno::EINVAL => Error::os(VERB, e).with_message(format!("the kernel does not know port space {ps:#x}")),
        _ => explained(VERB, e),
    })?;
    Ok(r.id)
}

/// `RDMA_USER_CM_CMD_DESTROY_ID` (1): destroys `id` with its unreported
/// events (and a listener's undelivered children); returns how many of its
/// events GET_EVENT had reported (`rdma_destroy_id`, which then waits for
/// that many acks: rverbs never waits).
pub fn destroy_id(fd: &UcmaFd, id: u32) -> Result<u32> {
    const VERB: &str = "rdma_destroy_id";
    let mut b = rdma_ucm_destroy_id { response: 0, id, reserved: 0 };
    let mut r = rdma_ucm_destroy_id_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_DESTROY_ID,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    issue(fd, "DESTROY_ID", VERB, id, c).map_err(|e| explained(VERB, e))?;
    Ok(r.events_reported)
}

/// `RDMA_USER_CM_CMD_MIGRATE_ID` (18), written to `new_fd`: moves `id`
/// and its queued events from the fd numbered `old_fd` (`rdma_migrate_id`).
/// Returns the id's `events_reported` on the old fd.
pub fn migrate_id(new_fd: &UcmaFd, id: u32, old_fd: i32) -> Result<u32> {
    const VERB: &str = "rdma_migrate_id";
    let mut b = rdma_ucm_migrate_id { response: 0, id, fd: old_fd as u32 };
    let mut r = rdma_ucm_migrate_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_MIGRATE_ID,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    issue(new_fd, "MIGRATE_ID", VERB, id, c).map_err(|e| match e {
        Errno::EBADF => Error::os(VERB, e).with_message(format!("fd {old_fd} is not an open rdma_cm event channel")),
        _ => explained(VERB, e),
    })?;
    Ok(r.events_reported)
}

/// `RDMA_USER_CM_CMD_GET_EVENT` (12): the next queued event, `None` when
/// there is none (`EAGAIN`: the fd is non-blocking). `rdma_get_cm_event`'s
/// read; the decoding and follow-up commands are the caller's.
pub fn get_event(fd: &UcmaFd) -> Result<Option<rdma_ucm_event_resp>> {
    const VERB: &str = "rdma_get_cm_event";
    let mut b = rdma_ucm_get_event { response: 0 };
    let mut r = rdma_ucm_event_resp::new_zeroed();
    let c = Command {
        cmd: RDMA_USER_CM_CMD_GET_EVENT,
        body: b.as_mut_bytes(),
        resp: Some((0, r.as_mut_bytes())),
        input: None,
    };
    match fd.command(c) {
        Ok(()) => {
            tracing::debug!(
                cmd = "GET_EVENT",
                verb = VERB,
                id = r.id,
                event = r.event,
                status = r.status as i32,
                "rdma_cm command"
            );
            Ok(Some(r))
        }
        Err(Errno::EAGAIN) => {
            tracing::trace!(cmd = "GET_EVENT", verb = VERB, "rdma_cm command: no event (EAGAIN)");
            Ok(None)
        }
        Err(e) => {
            tracing::debug!(cmd = "GET_EVENT", verb = VERB, errno = ?e, "rdma_cm command failed");
            Err(explained(VERB, e))
        }
    }
}
