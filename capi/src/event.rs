//! Async events: `ibv_get_async_event` and `ibv_ack_async_event`.
//!
//! The async fd is blocking, as libibverbs opens it (`ibv_open_device`
//! clears the `O_NONBLOCK` rverbs sets), and `ibv_get_async_event` is one
//! `read()`: it sleeps until an event comes, answers `EAGAIN` at once when
//! the caller set `O_NONBLOCK` on `async_fd`, and returns a signal's `EINTR`.
//! Acknowledgements are counted per object for its destroy (`crate::acks`).

use core::ffi::{c_int, c_void};

use crate::abi::{ibv_async_event, ibv_context, ibv_cq, ibv_qp, ibv_srq};
use crate::context::ctx;
use crate::errno::{self, set_errno, EINVAL};
use crate::export::symver;

/// `enum ibv_event_type` of an rverbs event type (the kernel's numbering).
fn event_type(t: rverbs::AsyncEventType) -> u32 {
    use rverbs::AsyncEventType::*;
    match t {
        CqErr => 0,
        QpFatal => 1,
        QpReqErr => 2,
        QpAccessErr => 3,
        CommEst => 4,
        SqDrained => 5,
        PathMig => 6,
        PathMigErr => 7,
        DeviceFatal => 8,
        PortActive => 9,
        PortErr => 10,
        LidChange => 11,
        PkeyChange => 12,
        SmChange => 13,
        SrqErr => 14,
        SrqLimitReached => 15,
        QpLastWqeReached => 16,
        ClientReregister => 17,
        GidChange => 18,
        WqFatal => 19,
        Other(v) => v,
        _ => u32::MAX,
    }
}

/// `int ibv_get_async_event(struct ibv_context *, struct ibv_async_event *)`:
/// 0, or -1 with errno. Port events carry the port number in `element`,
/// QP, CQ and SRQ events the C object (live: its destroy waits for the
/// event's acknowledgement).
unsafe extern "C" fn get_async_event(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else {
        set_errno(EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(EINVAL);
        return -1;
    }
    let ev = match rverbs::c_support::read_async_event(&c.inner) {
        Ok(Some(ev)) => ev,
        Ok(None) => {
            set_errno(nix::libc::EAGAIN);
            return -1;
        }
        Err(e) => {
            set_errno(errno::of(&e));
            return -1;
        }
    };
    // A CQ's, QP's or SRQ's handle is its C object's address (their
    // creates: `rverbs::c_support::create_*_with_handle`; rverbs names a
    // QP created so `Gone`). Its destroy frees it only after the
    // acknowledgement of this event, which the kernel counted when the
    // read returned it: the address is live.
    let element = match ev.object {
        rverbs::EventObject::Port(p) => usize::from(p),
        rverbs::EventObject::Qp { user_handle, .. }
        | rverbs::EventObject::Cq { user_handle }
        | rverbs::EventObject::Srq { user_handle }
        | rverbs::EventObject::Gone(user_handle) => user_handle as usize,
        _ => 0,
    } as *mut c_void;
    // SAFETY: `event` points at the caller's `struct ibv_async_event`.
    unsafe { event.write(ibv_async_event { element, event_type: event_type(ev.event_type) }) };
    0
}
symver!(get_async_event, ibv_get_async_event, "IBVERBS_1.1");

/// `void ibv_ack_async_event(struct ibv_async_event *)`: counts the event
/// in its object's `async_events_completed` (CQ) or `events_completed`
/// (QP, SRQ), as rdma-core does; port and device events count nowhere.
unsafe extern "C" fn ack_async_event(event: *mut ibv_async_event) {
    // SAFETY: `event` is NULL or one `ibv_get_async_event` filled.
    let Some(ev) = (unsafe { event.as_ref() }) else { return };
    if ev.element.is_null() {
        return;
    }
    // SAFETY: for these event types `element` is a live object of ours: its
    // destroy waits for this acknowledgement.
    unsafe {
        match ev.event_type {
            0 => {
                let p = ev.element.cast::<ibv_cq>();
                if let Some(q) = crate::cq::cq(p) {
                    q.acks.ack_async(1, &raw mut (*p).async_events_completed);
                }
            }
            1..=7 | 16 => {
                let p = ev.element.cast::<ibv_qp>();
                if let Some(q) = crate::qp::qp(p) {
                    q.acks.ack_async(1, &raw mut (*p).events_completed);
                }
            }
            14 | 15 => {
                let p = ev.element.cast::<ibv_srq>();
                if let Some(s) = crate::srq::srq(p) {
                    s.acks.ack_async(1, &raw mut (*p).events_completed);
                }
            }
            _ => {}
        }
    }
}
symver!(ack_async_event, ibv_ack_async_event, "IBVERBS_1.1");
