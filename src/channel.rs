//! Completion channels (`ibv_comp_channel`): an fd that becomes readable
//! when an armed CQ gets a completion.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rverbs_providers::cmd::cq as cmd;
use rverbs_providers::sys::event::{read_event, set_nonblocking, wait_readable};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_verbs::ib_uverbs_comp_event_desc;
use zerocopy::{FromZeros, IntoBytes};

use crate::Context;

/// A completion channel. Several CQs may share one; each event names the CQ
/// by its [`user_handle`](crate::CompletionQueue::user_handle). Cheap to
/// clone; CQs created on it keep it alive. The fd is non-blocking and can go
/// into `poll`/`epoll` through [`AsFd`].
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let ch = ctx.create_comp_channel()?;
/// let mut cq = ctx.create_cq(16, Some(&ch), 0)?;
/// cq.req_notify(false)?;
/// let ev = ch.get_cq_event()?;          // sleeps until a completion arrives
/// assert_eq!(ev.cq_user_handle, cq.user_handle());
/// cq.ack_events(1);
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CompletionChannel {
    inner: Arc<ChannelInner>,
}

#[derive(Debug)]
struct ChannelInner {
    ctx: Context,
    fd: OwnedFd,
}

/// One completion event: the CQ it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqEvent {
    /// The CQ's `user_handle`.
    pub cq_user_handle: u64,
}

impl Context {
    /// Creates a completion channel (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`
    /// through `INVOKE_WRITE`).
    #[doc(alias = "ibv_create_comp_channel")]
    pub fn create_comp_channel(&self) -> Result<CompletionChannel> {
        let fd = cmd::create_comp_channel(self.fd())?;
        set_nonblocking(fd.as_fd(), true).map_err(|e| Error::os("ibv_create_comp_channel", e))?;
        tracing::debug!("completion channel created");
        Ok(CompletionChannel { inner: Arc::new(ChannelInner { ctx: self.clone(), fd }) })
    }
}

impl CompletionChannel {
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Blocks until a completion event arrives (`ibv_get_cq_event`). On
    /// mlx5 reading an event also advances the CQ's arm sequence number
    /// (used by its next [`req_notify`](crate::CompletionQueue::req_notify)).
    #[doc(alias = "ibv_get_cq_event")]
    pub fn get_cq_event(&self) -> Result<CqEvent> {
        loop {
            if let Some(e) = self.get_cq_event_timeout(-1)? {
                return Ok(e);
            }
        }
    }

    /// Returns the next event if one is queued, without blocking.
    pub fn try_get_cq_event(&self) -> Result<Option<CqEvent>> {
        self.read_one()
    }

    /// Waits up to `timeout_ms` milliseconds (`-1`: forever) for an event.
    pub fn get_cq_event_timeout(&self, timeout_ms: i32) -> Result<Option<CqEvent>> {
        const VERB: &str = "ibv_get_cq_event";
        loop {
            if let Some(e) = self.read_one()? {
                return Ok(Some(e));
            }
            if !wait_readable(self.inner.fd.as_fd(), timeout_ms).map_err(|e| Error::os(VERB, e))? {
                return Ok(None);
            }
        }
    }

    fn read_one(&self) -> Result<Option<CqEvent>> {
        const VERB: &str = "ibv_get_cq_event";
        let mut d = ib_uverbs_comp_event_desc::new_zeroed();
        match read_event(self.inner.fd.as_fd(), d.as_mut_bytes()).map_err(|e| Error::os(VERB, e))? {
            Some(8) => {
                // mlx5: the CQ's next arm must carry the new event count
                // (rdma-core's `mlx5_cq_event`, run by `ibv_get_cq_event`).
                self.inner.ctx.count_cq_event(d.cq_handle);
                Ok(Some(CqEvent { cq_user_handle: d.cq_handle }))
            }
            Some(_) => Err(Error::os(VERB, Errno::EIO).with_message("short read from the completion channel")),
            None => Ok(None),
        }
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}
