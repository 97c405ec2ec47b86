//! Event channels (`struct rdma_event_channel`): one open
//! `/dev/infiniband/rdma_cm`, the ids on it, and reading their events.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rverbs_providers::cm as cmd;
use rverbs_providers::sys::ucma::UcmaFd;
use rverbs_providers::{Errno, Error, Result};

use super::event::{self, Event};
use super::id::{CmId, IdShared};
use super::PortSpace;

/// Source of uids: unique in the process, never reused, so an event the
/// kernel reports after its id is gone cannot name another id (and an id
/// keeps its uid when it migrates).
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_uid() -> u64 {
    NEXT_UID.fetch_add(1, Ordering::Relaxed)
}

/// Fibonacci hashing of the uids: a process-wide counter, never chosen by
/// a peer, so a multiply spreads them (SipHash is ~20x the cost, and every
/// CM event looks its id up).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UidHash;

impl BuildHasher for UidHash {
    type Hasher = UidHasher;
    fn build_hasher(&self) -> UidHasher {
        UidHasher(0)
    }
}

/// [`UidHash`]'s hasher.
#[derive(Debug)]
pub(crate) struct UidHasher(u64);

impl Hasher for UidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The fd and the ids whose events it carries.
#[derive(Debug)]
pub(crate) struct ChannelShared {
    pub(crate) fd: UcmaFd,
    /// uid -> the id, for decoding events; weak, so an event never keeps an
    /// id alive that every handle dropped.
    ids: Mutex<HashMap<u64, Weak<IdShared>, UidHash>>,
}

impl ChannelShared {
    pub(crate) fn register(&self, uid: u64, id: &Arc<IdShared>) {
        if let Ok(mut m) = self.ids.lock() {
            m.insert(uid, Arc::downgrade(id));
        }
    }

    pub(crate) fn unregister(&self, uid: u64) {
        if let Ok(mut m) = self.ids.lock() {
            m.remove(&uid);
        }
    }

    /// The live id with `uid` (the lock is released before the caller
    /// can drop what it got: dropping the last handle destroys the id,
    /// which takes this lock).
    pub(crate) fn lookup(&self, uid: u64) -> Option<Arc<IdShared>> {
        let w = self.ids.lock().ok()?.get(&uid).cloned()?;
        w.upgrade()
    }

    /// The live id whose kernel id is `kernel_id` (events with uid 0, which
    /// old kernels sent for ESTABLISHED).
    pub(crate) fn lookup_kernel_id(&self, kernel_id: u32) -> Option<Arc<IdShared>> {
        let all: Vec<Weak<IdShared>> = self.ids.lock().ok()?.values().cloned().collect();
        all.iter().filter_map(Weak::upgrade).find(|i| i.kernel_id() == kernel_id)
    }
}

/// An event channel: the kernel CM's fd with the ids created on it (or
/// migrated to it). Cheap to clone; its ids keep it open.
///
/// The fd is non-blocking and readable while an event is queued: put it in
/// `poll`/`epoll` through [`AsFd`] and read with
/// [`try_get_event`](Self::try_get_event) when it is readable (never with
/// `read`/`write` on the fd), or block in [`get_event`](Self::get_event).
///
/// ```no_run
/// use rverbs::cm::{EventChannel, EventKind, PortSpace};
/// let ch = EventChannel::new()?;
/// let id = ch.create_id(PortSpace::Tcp)?;
/// id.resolve_addr(None, "192.168.77.1:7174".parse().unwrap(), std::time::Duration::from_secs(2))?;
/// let ev = ch.get_event()?;
/// assert_eq!(ev.kind(), EventKind::AddrResolved);
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct EventChannel {
    pub(crate) inner: Arc<ChannelShared>,
}

impl EventChannel {
    /// Opens the kernel's CM: checks its ABI version, opens
    /// `/dev/infiniband/rdma_cm` non-blocking (`rdma_create_event_channel`).
    ///
    /// # Errors
    /// The node is missing (`rdma_ucm` not loaded), not accessible, or the
    /// kernel speaks another ABI version.
    #[doc(alias = "rdma_create_event_channel")]
    pub fn new() -> Result<EventChannel> {
        Ok(Self::from_fd(UcmaFd::open()?))
    }

    /// A channel on an fd opened elsewhere (a test's mock of the kernel).
    pub(crate) fn from_fd(fd: UcmaFd) -> EventChannel {
        EventChannel { inner: Arc::new(ChannelShared { fd, ids: Mutex::new(HashMap::with_hasher(UidHash)) }) }
    }

    /// A new id in port space `ps` on this channel (`RDMA_USER_CM_CMD_CREATE_ID`,
    /// `rdma_create_id`).
    #[doc(alias = "rdma_create_id")]
    pub fn create_id(&self, ps: PortSpace) -> Result<CmId> {
        CmId::create(self, ps)
    }

    /// The next event, waiting as long as it takes
    /// (`RDMA_USER_CM_CMD_GET_EVENT` after `poll()`, `rdma_get_cm_event`).
    #[doc(alias = "rdma_get_cm_event")]
    pub fn get_event(&self) -> Result<Event> {
        loop {
            if let Some(ev) = self.try_get_event()? {
                return Ok(ev);
            }
            self.inner.fd.wait_readable(-1).map_err(|e| Error::os("rdma_get_cm_event", e))?;
        }
    }

    /// The next event within `timeout`, `None` when none came.
    pub fn get_event_timeout(&self, timeout: Duration) -> Result<Option<Event>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.try_get_event()? {
                return Ok(Some(ev));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            self.inner.fd.wait_readable(ms).map_err(|e| Error::os("rdma_get_cm_event", e))?;
        }
    }

    /// The next event if one is queued, without waiting. Events for ids
    /// that are gone are dropped here (a connect request for a dropped
    /// listener: its new id is destroyed), so `None` means nothing for a
    /// live id was queued.
    pub fn try_get_event(&self) -> Result<Option<Event>> {
        loop {
            let Some(raw) = cmd::get_event(&self.inner.fd)? else { return Ok(None) };
            if let Some(ev) = event::decode(self, &raw)? {
                return Ok(Some(ev));
            }
        }
    }

    pub(crate) fn fd(&self) -> &UcmaFd {
        &self.inner.fd
    }

    /// Same channel (one fd)?
    pub fn same_as(&self, other: &EventChannel) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

/// What the channel says when a wait is over: no event within `timeout`.
pub(crate) fn timed_out(verb: &'static str, what: &str, timeout: Duration) -> Error {
    Error::check(verb, Errno::ETIMEDOUT).with_message(format!("no {what} within {timeout:?}"))
}
