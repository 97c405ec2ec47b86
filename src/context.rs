//! An open device: the uverbs fd with its ucontext and async event fd
//! (`struct ibv_context`), and the device-level queries.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use rverbs_providers::cmd::device as cmd;
use rverbs_providers::driver::{format_fw_ver, Provider};
use rverbs_providers::provider::ProviderContext;
use rverbs_providers::spin::{SpinGuard, SpinLock};
use rverbs_providers::sys::event::make_nonblocking;
use rverbs_providers::sys::UverbsFd;
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_gid_entry;
use rverbs_uapi::ib_user_verbs::IB_USER_VERBS_ABI_VERSION;
use tracing::info;

use crate::attr::{DeviceAttr, LinkLayer, PortAttr};
use crate::device::Device;
use crate::gid::{Gid, GidEntry, GidType};

/// An open RDMA device. Cheap to clone (shared); every object created from it
/// keeps it alive. `Send + Sync`: the control path is plain syscalls on an fd
/// whose fallback state is atomic.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    device: Device,
    num_comp_vectors: u32,
    /// The number of the QP each live `user_handle` names, for async
    /// events; the source of QP handles (unique per context, see
    /// [`Registry`]).
    objects: SpinLock<Registry>,
    /// Device attributes, queried once for the control path's limit checks.
    attr: OnceLock<DeviceAttr>,
    /// What never changes about each port (link layer, GID table length),
    /// queried once for the control path's checks: ports 1..=[`FAST_PORTS`]
    /// by index, read without a lock once known (every create_ah and
    /// address check asks), ...
    fast_ports: [OnceLock<PortStatic>; FAST_PORTS],
    /// ... any other by port number.
    ports: Mutex<Vec<(u8, PortStatic)>>,
    /// The multicast groups the QPs of this context are attached to
    /// ([`McastEntry`]), in the order they joined: kept here, not in each
    /// QP, so that a QP (most never join one) stays small enough to move
    /// inline.
    mcast: Mutex<Vec<McastEntry>>,
    /// The provider's half of the context; `None` for a driver rverbs can
    /// open and query but has no queues for. Before `fd`: its mappings go
    /// first (it holds its own `Arc` of the fd, so the fd closes after both).
    provider: Option<ProviderContext>,
    // Declared before `fd`: the async fd is closed first, then the uverbs fd
    // (which destroys the ucontext).
    async_fd: Option<OwnedFd>,
    fd: Arc<UverbsFd>,
}

/// How many ports [`Context::port_static`] keeps without a lock (1..=this);
/// any others are kept under one.
const FAST_PORTS: usize = 4;

/// A QP (by kernel handle) in a multicast group (GID, LID).
pub(crate) type McastEntry = (u32, Gid, u16);

/// What never changes about a port ([`Context::port_static`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortStatic {
    pub(crate) link_layer: LinkLayer,
    pub(crate) gid_tbl_len: u32,
}

fn open_error(dev: &Device, e: Errno) -> Error {
    let path = dev.dev_path().display();
    let msg = match e {
        Errno::ENOENT => {
            format!("{path} does not exist: is the ib_uverbs module loaded and udev done? (device {})", dev.name())
        }
        Errno::EACCES | Errno::EPERM => {
            format!("no permission to open {path}: run as a user with read-write access to it")
        }
        Errno::ENOTTY => format!("{path} is not a character device, so not a uverbs node"),
        Errno::ENODEV => format!("{path} is not the uverbs node sysfs names for {}", dev.name()),
        Errno::EMFILE | Errno::ENFILE => {
            format!("cannot open {path}: {}", rverbs_providers::error::fd_limit_message(e).unwrap_or_default())
        }
        _ => format!("cannot open {path}"),
    };
    Error::os(format!("ibv_open_device({})", dev.name()), e).with_message(msg)
}

/// Checks the core and driver ABI versions before any command is sent.
fn check_abi(dev: &Device) -> Result<Option<Provider>> {
    let verb = || format!("ibv_open_device({})", dev.name());
    if dev.core_abi_version != IB_USER_VERBS_ABI_VERSION {
        return Err(Error::check(verb(), Errno::ENOSYS).with_message(format!(
            "the kernel's uverbs ABI is version {}, rverbs speaks version {IB_USER_VERBS_ABI_VERSION} \
             (/sys/class/infiniband_verbs/abi_version)",
            dev.core_abi_version
        )));
    }
    let provider = dev.driver().provider();
    if let Some(p) = provider {
        let range = p.abi_range();
        if !range.contains(&dev.abi_version) {
            return Err(Error::check(verb(), Errno::ENOSYS).with_message(format!(
                "driver {} reports uverbs ABI version {}, the rverbs {} provider supports {}..={}",
                dev.driver(),
                dev.abi_version,
                dev.driver(),
                range.start(),
                range.end()
            )));
        }
    }
    Ok(provider)
}

impl Context {
    pub(crate) fn open(dev: &Device) -> Result<Context> {
        let _span = verb_span!("ibv_open_device", device = dev.name(), driver = %dev.driver());
        let provider = check_abi(dev)?;
        // Like rdma-core, insist that the node is the char device sysfs names:
        // anything else could answer our ioctls and writes with garbage.
        let rdev = dev.rdev.ok_or_else(|| {
            Error::check(format!("ibv_open_device({})", dev.name()), Errno::ENODEV)
                .with_message(format!("{} has no readable `dev` attribute", dev.verbs_sysfs_path().display()))
        })?;
        let fd = Arc::new(UverbsFd::open(dev.dev_path(), dev.driver().0, Some(rdev)).map_err(|e| open_error(dev, e))?);
        // GET_CONTEXT with the provider's driver data, and the provider's
        // half of the context.
        let (info, provider) = ProviderContext::open(&fd, provider)?;
        let async_fd = match info.async_fd {
            Some(a) => Some(a),
            None => match cmd::async_event_alloc(&fd) {
                Ok(a) => Some(a),
                Err(e) if e.is_unsupported() => None,
                Err(e) => return Err(e),
            },
        };
        if let Some(a) = &async_fd {
            make_nonblocking(a.as_fd()).map_err(|e| Error::os("ibv_open_device", e))?;
        }
        info!(device = dev.name(), path = ?info.path, comp_vectors = info.num_comp_vectors, "device opened");
        Ok(Context {
            inner: Arc::new(Inner {
                device: dev.clone(),
                num_comp_vectors: info.num_comp_vectors,
                // Room for a typical program's objects before the first growth.
                objects: SpinLock::new(Registry::with_capacity(64)),
                attr: OnceLock::new(),
                fast_ports: Default::default(),
                ports: Mutex::new(Vec::new()),
                mcast: Mutex::new(Vec::new()),
                provider,
                async_fd,
                fd,
            }),
        })
    }

    /// The device this context was opened on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The rverbs provider serving this device; `None` for a driver rverbs
    /// can list and query but has no fast path for.
    pub fn provider(&self) -> Option<Provider> {
        self.inner.provider.as_ref().map(|p| p.provider())
    }

    /// The provider's half of the context, or an error naming `verb`
    /// saying that `what` need one (a driver rverbs can list and query but
    /// has no provider for).
    /// Inlined: every create asks, and the answer is one load; the error
    /// is built out of line.
    #[inline]
    pub(crate) fn provider_ctx(&self, verb: &'static str, what: &str) -> Result<&ProviderContext> {
        match &self.inner.provider {
            Some(p) => Ok(p),
            None => Err(self.no_provider(verb, what)),
        }
    }

    #[cold]
    #[inline(never)]
    fn no_provider(&self, verb: &'static str, what: &str) -> Error {
        Error::check(verb, Errno::EOPNOTSUPP).with_message(format!(
            "{what} need a userspace provider, and rverbs has none for driver {}",
            self.device().driver()
        ))
    }

    /// Number of completion vectors (`ibv_context.num_comp_vectors`).
    pub fn num_comp_vectors(&self) -> u32 {
        self.inner.num_comp_vectors
    }

    /// The device attributes if they were already queried ([`device_attr`](Self::device_attr)):
    /// for checks that a create's first call leaves to the kernel, so that
    /// it issues no query (rdma-core checks nothing there).
    pub(crate) fn device_attr_known(&self) -> Option<&DeviceAttr> {
        self.inner.attr.get()
    }

    /// The device attributes, queried on first use and cached (limits do not change).
    pub(crate) fn device_attr(&self) -> Result<&DeviceAttr> {
        if let Some(a) = self.inner.attr.get() {
            return Ok(a);
        }
        let a = self.query_device()?;
        Ok(self.inner.attr.get_or_init(|| a))
    }

    /// The link layer and GID table length of `port`: `QUERY_PORT` on first
    /// use, then kept (neither changes while the device exists). For the
    /// library's own checks; [`query_port`](Self::query_port) always asks.
    pub(crate) fn port_static(&self, port: u8) -> Result<PortStatic> {
        if let Some(p) = self.port_static_known(port) {
            return Ok(p);
        }
        let fast = usize::from(port).checked_sub(1).and_then(|i| self.inner.fast_ports.get(i));
        let a = self.query_port(port)?;
        let p = PortStatic { link_layer: a.link_layer, gid_tbl_len: a.gid_tbl_len };
        if let Some(cell) = fast {
            return Ok(*cell.get_or_init(|| p));
        }
        if let Ok(mut v) = self.inner.ports.lock() {
            if !v.iter().any(|(n, _)| *n == port) {
                v.push((port, p));
            }
        }
        Ok(p)
    }

    /// [`port_static`](Self::port_static) if it was already read: no query.
    pub(crate) fn port_static_known(&self, port: u8) -> Option<PortStatic> {
        match usize::from(port).checked_sub(1).and_then(|i| self.inner.fast_ports.get(i)) {
            Some(cell) => cell.get().copied(),
            None => self.inner.ports.lock().ok().and_then(|v| v.iter().find(|(n, _)| *n == port).map(|e| e.1)),
        }
    }

    pub(crate) fn fd(&self) -> &UverbsFd {
        &self.inner.fd
    }

    pub(crate) fn fd_arc(&self) -> &Arc<UverbsFd> {
        &self.inner.fd
    }

    /// A fresh `user_handle` for a new QP, registered so that async events
    /// about it can name it (with its number, [`set_qp_num`](Self::set_qp_num)
    /// once the kernel gave it). CQs and SRQs take a [`counted_handle`]
    /// instead: their events name them by handle alone.
    pub(crate) fn register_qp(&self) -> u64 {
        self.registry().insert()
    }

    /// Records the number of the QP registered under `user_handle`, known
    /// after the create.
    pub(crate) fn set_qp_num(&self, user_handle: u64, qp_num: u32) {
        self.registry().set(user_handle, qp_num);
    }

    /// Forgets a destroyed QP's `user_handle`.
    pub(crate) fn unregister(&self, user_handle: u64) {
        self.registry().remove(user_handle);
    }

    /// The number of the QP registered under `user_handle`, if it still exists.
    pub(crate) fn lookup_qp(&self, user_handle: u64) -> Option<u32> {
        self.registry().get(user_handle)
    }

    /// The multicast groups of this context's QPs, locked.
    pub(crate) fn mcast(&self) -> MutexGuard<'_, Vec<McastEntry>> {
        self.inner.mcast.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The registry, locked. A spin lock: each step under it is a few
    /// instructions, and `Mutex`'s poison checks cost about 19 more per
    /// lock, three times per QP (issue 35). A panic under it leaves the
    /// registry consistent (each change is one store).
    fn registry(&self) -> SpinGuard<'_, Registry> {
        self.inner.objects.lock()
    }

    /// A handle that does not keep the device open (for caches: the CM's
    /// map from a CM id's device to its context).
    pub(crate) fn downgrade(&self) -> WeakContext {
        WeakContext(Arc::downgrade(&self.inner))
    }

    /// True when both handles refer to the same open device context.
    pub fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The uverbs command fd.
    pub fn cmd_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// The async event fd (`ibv_context.async_fd`), when the kernel gave one.
    pub fn async_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.async_fd.as_ref().map(|f| f.as_fd())
    }

    /// Device attributes: `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` through
    /// `INVOKE_WRITE` (legacy `QUERY_DEVICE` on kernels without the EX form).
    #[doc(alias = "ibv_query_device")]
    #[doc(alias = "ibv_query_device_ex")]
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let _span = verb_span!("ibv_query_device_ex");
        let raw = cmd::query_device(&self.inner.fd)?;
        let fw = format_fw_ver(self.device().driver(), raw.resp.base.fw_ver);
        Ok(DeviceAttr::from_kernel(&raw.resp, raw.len, fw))
    }

    /// Port attributes: `UVERBS_METHOD_QUERY_PORT` (write `QUERY_PORT` fallback).
    #[doc(alias = "ibv_query_port")]
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        cmd::query_port(&self.inner.fd, port).map(|r| PortAttr::from_kernel(&r))
    }

    /// Every valid GID of every port with its type and netdev:
    /// `UVERBS_METHOD_QUERY_GID_TABLE`, or sysfs on kernels before 5.10.
    #[doc(alias = "ibv_query_gid_table")]
    pub fn query_gid_table(&self) -> Result<Vec<GidEntry>> {
        let mut table = self.gid_table_unnamed()?;
        let mut names: Vec<(u32, Option<String>)> = Vec::new();
        for e in table.iter_mut().filter(|e| e.netdev.is_none() && e.netdev_ifindex != 0) {
            // One lookup per interface, not per entry.
            let i = e.netdev_ifindex;
            if !names.iter().any(|(n, _)| *n == i) {
                names.push((i, netdev_name(i)));
            }
            e.netdev = names.iter().find(|(n, _)| *n == i).and_then(|(_, name)| name.clone());
        }
        Ok(table)
    }

    /// [`query_gid_table`](Self::query_gid_table) without the netdev names
    /// (the kernel gives interface indexes; naming them is more syscalls,
    /// which the library's own choices do not need).
    pub(crate) fn gid_table_unnamed(&self) -> Result<Vec<GidEntry>> {
        let ports = self.device_attr()?.phys_port_cnt;
        let mut lens = Vec::new();
        for p in 1..=ports {
            lens.push((p, self.port_static(p)?.gid_tbl_len));
        }
        let max: usize = lens.iter().map(|(_, l)| *l as usize).sum();
        match cmd::query_gid_table(&self.inner.fd, max)? {
            Some(entries) => Ok(entries.iter().map(entry_unnamed).collect()),
            None => Ok(lens.iter().flat_map(|&(p, len)| (0..len).filter_map(move |i| self.sysfs_gid(p, i))).collect()),
        }
    }

    /// One GID entry (`ibv_query_gid_ex`): `None` for an empty slot.
    /// `UVERBS_METHOD_QUERY_GID_ENTRY`, or sysfs on kernels before 5.10.
    #[doc(alias = "ibv_query_gid")]
    #[doc(alias = "ibv_query_gid_ex")]
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Option<GidEntry>> {
        let mut e = self.gid_unnamed(port, index)?;
        if let Some(e) = e.as_mut().filter(|e| e.netdev.is_none() && e.netdev_ifindex != 0) {
            e.netdev = netdev_name(e.netdev_ifindex);
        }
        Ok(e)
    }

    /// [`query_gid`](Self::query_gid) without the netdev name.
    pub(crate) fn gid_unnamed(&self, port: u8, index: u32) -> Result<Option<GidEntry>> {
        match cmd::query_gid_entry(&self.inner.fd, port, index) {
            Ok(e) => Ok(e.as_ref().map(entry_unnamed)),
            Err(e) if e.is_unsupported() => Ok(self.sysfs_gid(port, index)),
            Err(e) => Err(e),
        }
    }

    /// A GID entry from sysfs (`ports/<p>/gids/<i>`, `gid_attrs/{types,ndevs}/<i>`).
    fn sysfs_gid(&self, port: u8, index: u32) -> Option<GidEntry> {
        let dir = self.device().sysfs_path().join(format!("ports/{port}"));
        let gid = Gid::parse(&fs::read_to_string(dir.join(format!("gids/{index}"))).ok()?)?;
        let ty = fs::read_to_string(dir.join(format!("gid_attrs/types/{index}"))).ok()?;
        if gid.is_zero() {
            return None;
        }
        let netdev = fs::read_to_string(dir.join(format!("gid_attrs/ndevs/{index}"))).ok().map(|s| s.trim().to_owned());
        let gid_type = match ty.trim() {
            "RoCE v2" => GidType::RoceV2,
            "IB/RoCE v1" if self.device().netdev().is_some() => GidType::RoceV1,
            _ => GidType::Ib,
        };
        let netdev_ifindex = netdev.as_deref().map_or(0, ifindex_of);
        Some(GidEntry { gid, index, port: port.into(), gid_type, netdev_ifindex, netdev })
    }
}

/// A [`Context`] that is not kept open: [`upgrade`](Self::upgrade) gives
/// it back while some other handle still holds it.
#[derive(Clone, Debug)]
pub(crate) struct WeakContext(Weak<Inner>);

impl WeakContext {
    /// The context, if it is still open.
    pub(crate) fn upgrade(&self) -> Option<Context> {
        self.0.upgrade().map(|inner| Context { inner })
    }
}

/// A kernel GID entry, its netdev not named yet.
fn entry_unnamed(e: &ib_uverbs_gid_entry) -> GidEntry {
    GidEntry {
        gid: Gid(e.gid),
        index: e.gid_index,
        port: e.port_num,
        gid_type: GidType::from_kernel(e.gid_type),
        netdev_ifindex: e.netdev_ifindex,
        netdev: None,
    }
}

/// The name of network interface `ifindex` (`if_indextoname`: one
/// `SIOCGIFNAME` ioctl on a socket), `None` for 0 or an interface that is gone.
fn netdev_name(ifindex: u32) -> Option<String> {
    if ifindex == 0 {
        return None;
    }
    rverbs_providers::sys::event::interface_name(ifindex)
}

fn ifindex_of(name: &str) -> u32 {
    fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// A `user_handle` for a CQ or SRQ: a count, with the top bit set, never
/// given out twice in this process, and no registry entry. Their async
/// events (`CqErr`, `SrqErr`, `SrqLimitReached`) say which kind of object
/// they are about, and the handle is the whole of what
/// [`EventObject::Cq`](crate::EventObject::Cq) or
/// [`EventObject::Srq`](crate::EventObject::Srq) holds, so there is
/// nothing to look up. The kernel drops a destroyed object's unread events
/// (`ib_uverbs_release_ucq`, `ib_uverbs_release_uevent`): an event about a
/// CQ or SRQ destroyed after it was read names a handle that matches no
/// live object, and never a later one. (A registry entry cost about 120
/// instructions per CQ or SRQ, create and destroy, in the scale bench,
/// issue #35.) Registry handles never have the top bit set
/// ([`MAX_GEN`]): the two kinds of handle never meet.
pub(crate) fn counted_handle() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    COUNTED | NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The top bit: set in every [`counted_handle`], in no registry handle.
const COUNTED: u64 = 1 << 63;

/// The registry's highest generation: after it a slot's generation wraps
/// to 1, so a registry handle (generation in the high 32 bits) never has
/// the top bit that marks a [`counted_handle`].
const MAX_GEN: u32 = (1 << 31) - 1;

/// The `user_handle` registry of QPs: the number of the QP each live
/// handle names, for async events. A slab, not a map: a handle is a
/// slot's index (low 32 bits) and its generation (high 32, from 1), so
/// insert, set, remove and get are an index and a compare. A freed slot is
/// reused with the next generation, so a handle is not given out again
/// until its slot was freed 2^31 - 1 more times, and an event about a
/// destroyed QP finds another generation there, not a new QP. The free
/// slots form a list through the slots themselves (no second vector to
/// grow). (A `HashMap` keyed by a counter cost about 340 instructions per
/// QP in the scale bench, issue #35; a free list in a `Vec` 25 more than
/// this one.)
#[derive(Debug)]
struct Registry {
    slots: Vec<Slot>,
    /// The last freed slot (`NONE`: none); each free slot names the next.
    free: u32,
}

/// No slot: the end of the free list. Never a slot's index (insert stops
/// one short of it).
const NONE: u32 = u32::MAX;

#[derive(Debug)]
struct Slot {
    /// The generation the slot's handle has now (never 0).
    gen: u32,
    state: SlotState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// Free; the next free slot.
    Free(u32),
    /// A live QP's number (0 until the create answered).
    Live(u32),
}

impl Registry {
    fn with_capacity(n: usize) -> Registry {
        Registry { slots: Vec::with_capacity(n), free: NONE }
    }

    /// A fresh handle, live: the last freed slot, else a new one. Past
    /// 2^32 - 1 live slots (memory runs out long before), the handle is 0,
    /// which is never registered: events about that QP then name it
    /// `Gone(0)`.
    fn insert(&mut self) -> u64 {
        let idx = if self.free != NONE {
            let i = self.free;
            let Some(Slot { state: SlotState::Free(next), .. }) = self.slots.get(i as usize) else { return 0 };
            self.free = *next;
            i
        } else {
            let Ok(i) = u32::try_from(self.slots.len()) else { return 0 };
            if i == NONE {
                return 0;
            }
            self.slots.push(Slot { gen: 1, state: SlotState::Free(NONE) });
            i
        };
        let Some(slot) = self.slots.get_mut(idx as usize) else { return 0 };
        slot.state = SlotState::Live(0);
        u64::from(slot.gen) << 32 | u64::from(idx)
    }

    /// The live slot of `h`.
    fn live(&mut self, h: u64) -> Option<&mut Slot> {
        let (gen, idx) = ((h >> 32) as u32, h as u32);
        self.slots.get_mut(idx as usize).filter(|s| s.gen == gen && matches!(s.state, SlotState::Live(_)))
    }

    /// Records the QP number of a live `h`; nothing for another.
    fn set(&mut self, h: u64, qp_num: u32) {
        if let Some(s) = self.live(h) {
            s.state = SlotState::Live(qp_num);
        }
    }

    /// Frees `h`'s slot for the next generation, at the head of the free
    /// list; nothing for a handle not live.
    fn remove(&mut self, h: u64) {
        let free = self.free;
        if let Some(s) = self.live(h) {
            s.state = SlotState::Free(free);
            s.gen = if s.gen >= MAX_GEN { 1 } else { s.gen + 1 };
            self.free = h as u32;
        }
    }

    /// The QP number of a live `h`.
    fn get(&self, h: u64) -> Option<u32> {
        let (gen, idx) = ((h >> 32) as u32, h as u32);
        match self.slots.get(idx as usize) {
            Some(&Slot { gen: g, state: SlotState::Live(qp_num) }) if g == gen => Some(qp_num),
            _ => None,
        }
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn handles_are_nonzero_distinct_and_found() {
        let mut r = Registry::with_capacity(2);
        let hs: Vec<u64> = (0..100).map(|_| r.insert()).collect();
        for (i, &h) in hs.iter().enumerate() {
            assert_ne!(h, 0);
            assert!(!hs[..i].contains(&h), "handle {h:#x} given twice");
            assert_eq!(r.get(h), Some(0));
        }
    }

    #[test]
    fn a_freed_handle_is_gone_and_not_given_again() {
        let mut r = Registry::with_capacity(0);
        let a = r.insert();
        r.remove(a);
        assert_eq!(r.get(a), None);
        let b = r.insert();
        assert_ne!(a, b, "the slot is reused under a new generation");
        assert_eq!(a as u32, b as u32);
        assert_eq!(r.get(a), None, "the old handle does not name the new object");
        assert_eq!(r.get(b), Some(0));
        // A second remove of the old handle, or a set of it, leaves the new one alone.
        r.remove(a);
        r.set(a, 9);
        assert_eq!(r.get(b), Some(0));
    }

    #[test]
    fn freed_slots_are_reused_last_freed_first_and_never_while_live() {
        let mut r = Registry::with_capacity(0);
        let hs: Vec<u64> = (0..6).map(|_| r.insert()).collect();
        for &i in &[1usize, 4, 2] {
            r.remove(hs[i]);
        }
        r.remove(hs[4]); // a second remove of a freed handle changes nothing
        let again: Vec<u32> = (0..4).map(|_| r.insert() as u32).collect();
        assert_eq!(again, [2, 4, 1, 6], "the free list, then a new slot");
        for &i in &[0usize, 3, 5] {
            assert_eq!(r.get(hs[i]), Some(0), "live handles untouched");
        }
        assert_eq!(r.slots.len(), 7);
    }

    #[test]
    fn set_records_a_live_handles_qp_number() {
        let mut r = Registry::with_capacity(0);
        let h = r.insert();
        assert_eq!(r.get(h), Some(0), "0 until the create answered");
        r.set(h, 17);
        assert_eq!(r.get(h), Some(17));
    }

    #[test]
    fn unknown_handles_are_nothing() {
        let mut r = Registry::with_capacity(0);
        let h = r.insert();
        for bad in [0, u64::MAX, h + 1, h ^ (1 << 32)] {
            assert_eq!(r.get(bad), None);
            r.remove(bad);
        }
        assert_eq!(r.get(h), Some(0));
    }

    #[test]
    fn the_generation_wraps_before_the_counted_bit() {
        let mut r = Registry::with_capacity(0);
        let h = r.insert();
        r.slots[0].gen = MAX_GEN;
        let h = h & 0xffff_ffff | u64::from(MAX_GEN) << 32;
        assert_eq!(h & COUNTED, 0, "the highest generation leaves the top bit clear");
        r.remove(h);
        assert_eq!(r.slots[0].gen, 1);
        assert_ne!(r.insert(), 0);
    }

    #[test]
    fn counted_handles_are_distinct_and_never_registry_handles() {
        let a = counted_handle();
        let b = counted_handle();
        assert_ne!(a, b);
        assert_ne!(a & COUNTED, 0);
        let mut r = Registry::with_capacity(0);
        let h = r.insert();
        assert_eq!(h & COUNTED, 0);
        assert_eq!(r.get(a), None);
    }
}
