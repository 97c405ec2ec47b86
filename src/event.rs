//! Asynchronous events (`ibv_get_async_event`): QP/CQ/SRQ errors, port
//! state changes, device fatal, read from the context's async event fd.

use std::fmt;
use std::os::fd::BorrowedFd;

use rverbs_providers::sys::event::{read_event, wait_readable};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_verbs::ib_uverbs_async_event_desc;
use zerocopy::{FromZeros, IntoBytes};

use crate::Context;

/// The object an async event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventObject {
    /// A QP, by QP number, and the `user_handle` rverbs gave it.
    Qp {
        /// QP number.
        qp_num: u32,
        /// The QP's user_handle (`QueuePair::user_handle`).
        user_handle: u64,
    },
    /// A CQ, by its `user_handle` (`CompletionQueue::user_handle`).
    Cq {
        /// The CQ's user_handle.
        user_handle: u64,
    },
    /// An SRQ, by its `user_handle` (`SharedReceiveQueue::user_handle`).
    Srq {
        /// The SRQ's user_handle.
        user_handle: u64,
    },
    /// A port of the device.
    Port(u8),
    /// The whole device.
    Device,
    /// A QP that no longer exists (destroyed while the event was read), or
    /// an object of a kind this library does not know, by `user_handle`.
    /// A CQ or SRQ destroyed while its event was read is still named as
    /// `Cq` or `Srq`: its handle is never given to another object.
    Gone(u64),
}

/// `enum ibv_event_type` (kernel `enum ib_event_type`, same values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AsyncEventType {
    /// `IBV_EVENT_CQ_ERR`.
    CqErr,
    /// `IBV_EVENT_QP_FATAL`.
    QpFatal,
    /// `IBV_EVENT_QP_REQ_ERR`.
    QpReqErr,
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    QpAccessErr,
    /// `IBV_EVENT_COMM_EST`.
    CommEst,
    /// `IBV_EVENT_SQ_DRAINED`.
    SqDrained,
    /// `IBV_EVENT_PATH_MIG`.
    PathMig,
    /// `IBV_EVENT_PATH_MIG_ERR`.
    PathMigErr,
    /// `IBV_EVENT_DEVICE_FATAL`.
    DeviceFatal,
    /// `IBV_EVENT_PORT_ACTIVE`.
    PortActive,
    /// `IBV_EVENT_PORT_ERR`.
    PortErr,
    /// `IBV_EVENT_LID_CHANGE`.
    LidChange,
    /// `IBV_EVENT_PKEY_CHANGE`.
    PkeyChange,
    /// `IBV_EVENT_SM_CHANGE`.
    SmChange,
    /// `IBV_EVENT_SRQ_ERR`.
    SrqErr,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    SrqLimitReached,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    QpLastWqeReached,
    /// `IBV_EVENT_CLIENT_REREGISTER`.
    ClientReregister,
    /// `IBV_EVENT_GID_CHANGE`.
    GidChange,
    /// `IBV_EVENT_WQ_FATAL`.
    WqFatal,
    /// A value this library does not know.
    Other(u32),
}

impl AsyncEventType {
    fn from_kernel(v: u32) -> Self {
        use AsyncEventType::*;
        const ALL: [AsyncEventType; 20] = [
            CqErr,
            QpFatal,
            QpReqErr,
            QpAccessErr,
            CommEst,
            SqDrained,
            PathMig,
            PathMigErr,
            DeviceFatal,
            PortActive,
            PortErr,
            LidChange,
            PkeyChange,
            SmChange,
            SrqErr,
            SrqLimitReached,
            QpLastWqeReached,
            ClientReregister,
            GidChange,
            WqFatal,
        ];
        ALL.get(v as usize).copied().unwrap_or(Other(v))
    }

    /// True for events whose `element` is a port number (or the device).
    fn is_port_event(self) -> bool {
        use AsyncEventType::*;
        matches!(
            self,
            DeviceFatal | PortActive | PortErr | LidChange | PkeyChange | SmChange | ClientReregister | GidChange
        )
    }
}

impl fmt::Display for AsyncEventType {
    /// The strings of `ibv_event_type_str`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AsyncEventType::*;
        let s = match self {
            CqErr => "CQ error",
            QpFatal => "local work queue catastrophic error",
            QpReqErr => "invalid request local work queue error",
            QpAccessErr => "local access violation work queue error",
            CommEst => "communication established",
            SqDrained => "send queue drained",
            PathMig => "path migrated",
            PathMigErr => "path migration request error",
            DeviceFatal => "local catastrophic error",
            PortActive => "port active",
            PortErr => "port error",
            LidChange => "LID change",
            PkeyChange => "P_Key change",
            SmChange => "SM change",
            SrqErr => "SRQ catastrophic error",
            SrqLimitReached => "SRQ limit reached",
            QpLastWqeReached => "last WQE reached",
            ClientReregister => "client reregistration",
            GidChange => "GID table change",
            WqFatal => "WQ fatal",
            Other(_) => "unknown",
        };
        f.write_str(s)
    }
}

/// One async event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// What happened.
    pub event_type: AsyncEventType,
    /// To what.
    pub object: EventObject,
}

impl Context {
    pub(crate) fn decode_event(&self, d: &ib_uverbs_async_event_desc) -> AsyncEvent {
        let event_type = AsyncEventType::from_kernel(d.event_type);
        let object = if event_type.is_port_event() {
            if event_type == AsyncEventType::DeviceFatal {
                EventObject::Device
            } else {
                EventObject::Port(d.element as u8)
            }
        } else {
            // A CQ's and an SRQ's handle is all their object holds (no
            // registry entry: `counted_handle`); a QP's number is looked up.
            let h = d.element;
            match event_type {
                AsyncEventType::CqErr => EventObject::Cq { user_handle: h },
                AsyncEventType::SrqErr | AsyncEventType::SrqLimitReached => EventObject::Srq { user_handle: h },
                _ => {
                    self.lookup_qp(h).map_or(EventObject::Gone(h), |qp_num| EventObject::Qp { qp_num, user_handle: h })
                }
            }
        };
        AsyncEvent { event_type, object }
    }

    /// Reads the next async event, blocking until one arrives
    /// (`ibv_get_async_event`). Events need no acknowledgement here: they
    /// carry values, not pointers, so destroying an object never waits for them.
    ///
    /// # Errors
    /// `EOPNOTSUPP` when the kernel gave this context no async fd; `EIO`
    /// when the device went away.
    #[doc(alias = "ibv_get_async_event")]
    pub fn get_async_event(&self) -> Result<AsyncEvent> {
        match self.read_async_event(-1)? {
            Some(e) => Ok(e),
            None => Err(Error::check("ibv_get_async_event", Errno::EAGAIN)),
        }
    }

    /// Like [`get_async_event`](Self::get_async_event) but gives up after
    /// `timeout_ms` milliseconds (`Ok(None)`).
    pub fn get_async_event_timeout(&self, timeout_ms: i32) -> Result<Option<AsyncEvent>> {
        self.read_async_event(timeout_ms)
    }

    /// Returns the next async event if one is queued, without blocking
    /// (one `read()` of the non-blocking async fd, `ibv_get_async_event` on
    /// a non-blocking fd): `Ok(None)` when there is none. For event loops
    /// that wait for [`async_fd`](Self::async_fd) to become readable
    /// themselves.
    ///
    /// # Errors
    /// `EOPNOTSUPP` when the kernel gave this context no async fd; `EIO`
    /// when the device went away.
    #[doc(alias = "ibv_get_async_event")]
    pub fn try_get_async_event(&self) -> Result<Option<AsyncEvent>> {
        self.read_one_async_event(self.async_event_fd()?)
    }

    fn async_event_fd(&self) -> Result<BorrowedFd<'_>> {
        self.async_fd().ok_or_else(|| {
            Error::check("ibv_get_async_event", Errno::EOPNOTSUPP).with_message("this context has no async event fd")
        })
    }

    /// One `read()` of the (non-blocking) async fd.
    fn read_one_async_event(&self, fd: BorrowedFd<'_>) -> Result<Option<AsyncEvent>> {
        const VERB: &str = "ibv_get_async_event";
        let mut d = ib_uverbs_async_event_desc::new_zeroed();
        match read_event(fd, d.as_mut_bytes()).map_err(|e| Error::os(VERB, e))? {
            Some(n) if n == size_of_val(&d) => Ok(Some(self.decode_event(&d))),
            Some(_) => Err(Error::check(VERB, Errno::EIO).with_message("short read from the async event fd")),
            None => Ok(None),
        }
    }

    fn read_async_event(&self, timeout_ms: i32) -> Result<Option<AsyncEvent>> {
        const VERB: &str = "ibv_get_async_event";
        // A deadline, so losing an event to another reader does not start
        // the timeout over.
        let deadline =
            u64::try_from(timeout_ms).ok().map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
        let fd = self.async_event_fd()?;
        // The async fd is non-blocking (set at open): wait, then read; if
        // another thread took the event first, wait again.
        loop {
            if !wait_readable(fd, crate::channel::remaining_ms(deadline)).map_err(|e| Error::os(VERB, e))? {
                return Ok(None);
            }
            if let Some(e) = self.read_one_async_event(fd)? {
                return Ok(Some(e));
            }
        }
    }
}
