//! Completion queues: create (prepare → `CQ_CREATE` → finish → rollback),
//! the poll/arm/resize dispatch, and the kernel object's destroy.

use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use tracing::debug;
use zerocopy::IntoBytes;

use super::parking::Parking;
use super::{Kind, ProviderContext};
use crate::cmd::cq as cmd;
use crate::sys::UverbsFd;
use crate::wr::Wc;
use crate::{mlx5, rxe, Errno, Error, Result};

/// What a CQ is created with (`ibv_create_cq`'s arguments).
#[derive(Clone, Copy, Debug)]
pub struct CqCreate<'a> {
    /// At least this many entries (checked against the device by the caller).
    pub cqe: u32,
    /// The value completion and async events carry for this CQ.
    pub user_handle: u64,
    /// The completion channel's fd, if any.
    pub channel: Option<BorrowedFd<'a>>,
    /// Completion vector.
    pub comp_vector: u32,
}

/// The provider half of a CQ: what `poll` works on. One owner polls it
/// through `&mut`: no lock, no syscall, no allocation.
///
/// It knows its own kernel CQ (the second field): `park`, `req_notify` and
/// `resize` refuse another's, and a driver dropped while its kernel CQ
/// lives parks itself there, so mlx5's queue memory is never freed while
/// the HCA may still write it.
#[derive(Debug)]
pub struct CqDriver(Drv, Weak<CqCore>);

impl Drop for CqDriver {
    fn drop(&mut self) {
        if matches!(self.0, Drv::Mlx5 { .. }) {
            if let Some(core) = self.1.upgrade() {
                KernelCq(core).park(self.take());
            }
        }
    }
}

#[derive(Debug)]
enum Drv {
    /// `arm`: the `REQ_NOTIFY_CQ` command, built at create.
    Rxe { ring: rxe::CqRing, arm: cmd::ReqNotifyCq },
    /// `synced`: the channel events already folded into the arm sequence
    /// number (rdma-core's `mlx5_cq_event`, run by `ibv_get_cq_event`).
    Mlx5 { cq: mlx5::Cq, synced: u32 },
    /// A resize failed after the kernel had moved the CQ to a new ring that
    /// could not be mapped: the old ring gets no more completions.
    Dead,
    /// Moved out (parked or dropped): polls nothing.
    Gone,
}

/// The kernel CQ, shared (cheap clone) by the CQ's owner and the QPs that
/// use it, which keep it alive. Destroyed when the last clone goes.
///
/// With mlx5 the CQ buffer and doorbell record are user memory the HCA
/// writes until the kernel CQ is destroyed; a driver whose owner goes while
/// QPs still hold the kernel CQ is therefore parked here, and freed only
/// after the kernel destroy (or leaked if that fails).
#[derive(Clone, Debug)]
pub struct KernelCq(Arc<CqCore>);

#[derive(Debug)]
struct CqCore {
    fd: Arc<UverbsFd>,
    handle: u32,
    cqe: AtomicU32,
    /// Completion events read from the channel for this CQ (mlx5's arm
    /// sequence number follows them).
    events: Arc<AtomicU32>,
    prov: CqProv,
    /// The kernel CQ exists (a failed destroy sets it again).
    live: AtomicBool,
    parked: Parking<Drv>,
}

#[derive(Debug)]
enum CqProv {
    /// Nothing beyond the kernel object: rxe, or an mlx5 CQ whose provider
    /// half never came to be (a failed finish).
    KernelOnly,
    /// The CQ number names the CQ in clean requests.
    Mlx5 { ctx: mlx5::Context, cqn: u32 },
}

impl ProviderContext {
    /// Creates a CQ: `UVERBS_METHOD_CQ_CREATE` with the provider's driver
    /// data (mlx5: the buffer and doorbell record allocated first; rxe:
    /// none in, the ring's mmap info out), then the provider's half (rxe
    /// maps the ring). If anything fails after the kernel create, the kernel
    /// CQ is destroyed before the memory it uses is freed.
    #[doc(alias = "ibv_create_cq")]
    pub fn create_cq(&self, fd: &Arc<UverbsFd>, a: &CqCreate<'_>) -> Result<(KernelCq, CqDriver)> {
        const VERB: &str = "ibv_create_cq";
        let core = |handle, cqe, prov| CqCore {
            fd: fd.clone(),
            handle,
            cqe: AtomicU32::new(cqe),
            events: Arc::new(AtomicU32::new(0)),
            prov,
            live: AtomicBool::new(true),
            parked: Parking::new(),
        };
        let args =
            |cqe| cmd::CreateCq { cqe, user_handle: a.user_handle, channel: a.channel, comp_vector: a.comp_vector };
        match &self.kind {
            Kind::Rxe(_) => {
                let mut drv_out = [0u8; rxe::CQ_RESP_LEN];
                // SAFETY: rxe's create-CQ driver data names no memory.
                let created = unsafe { cmd::create_cq(fd, &args(a.cqe), &[], &mut drv_out) }?;
                // If mapping fails, dropping the core destroys the kernel CQ.
                let k = KernelCq(Arc::new(core(created.handle, created.cqe, CqProv::KernelOnly)));
                let ring = rxe::cq_finish(fd, &drv_out)?;
                debug!(handle = created.handle, cqe = created.cqe, "rxe CQ created");
                let arm = cmd::ReqNotifyCq::new(fd, created.handle);
                let owner = Arc::downgrade(&k.0);
                Ok((k, CqDriver(Drv::Rxe { ring, arm }, owner)))
            }
            Kind::Mlx5(m) => {
                let (pending, udata) = m.cq_prepare(a.cqe)?;
                if let Some(page) = pending.uar_index_attr() {
                    return Err(Error::check(VERB, Errno::EOPNOTSUPP).with_message(format!(
                        "the CQ's UAR page id {page} needs MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX, which rverbs does not send"
                    )));
                }
                let mut drv_out = [0u8; mlx5::CQ_RESP_LEN];
                // SAFETY: the driver data names `pending`'s buffer and doorbell
                // record, which stay allocated until the kernel CQ is destroyed:
                // on failure here the kernel took nothing and `pending` drops.
                let created = unsafe { cmd::create_cq(fd, &args(pending.core_cqe()), udata.as_bytes(), &mut drv_out) }?;
                // Nothing fallible between the kernel create and `cq_finish`:
                // `pending` must not be dropped while the kernel CQ exists.
                match m.cq_finish(pending, &drv_out, created.cqe) {
                    Ok(cq) => {
                        let prov = CqProv::Mlx5 { ctx: m.clone(), cqn: cq.cqn() };
                        debug!(handle = created.handle, cqe = created.cqe, cqn = cq.cqn(), "mlx5 CQ created");
                        let k = KernelCq(Arc::new(core(created.handle, created.cqe, prov)));
                        let owner = Arc::downgrade(&k.0);
                        Ok((k, CqDriver(Drv::Mlx5 { cq, synced: 0 }, owner)))
                    }
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel CQ uses the pending memory: destroy it first.
                        let mut c = core(created.handle, created.cqe, CqProv::KernelOnly);
                        match c.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        Err(error)
                    }
                }
            }
        }
    }
}

impl CqCore {
    /// The last holder's destroy: the kernel CQ (unless an earlier
    /// [`destroy_now`](Self::destroy_now) did it), then the parked driver.
    fn destroy(&mut self) -> Result<()> {
        if self.fd.in_forked_child() {
            // The kernel CQ is the parent's (the destroy command would be
            // skipped too), and mlx5's queue memory is not mapped here.
            if self.live.swap(false, Ordering::Relaxed) {
                self.parked.release(false);
            }
            return Ok(());
        }
        match self.destroy_now() {
            Ok(_) => {
                drop(self.parked.release(true));
                Ok(())
            }
            Err(e) => {
                // The kernel CQ may still exist, and an mlx5 HCA may still
                // write its buffer: never free that memory.
                self.live.store(false, Ordering::Relaxed);
                self.parked.release(false);
                Err(e)
            }
        }
    }

    /// The kernel destroy, once; zero counts when it was already done. On
    /// failure the CQ is as it was.
    fn destroy_now(&self) -> Result<cmd::EventsReported> {
        if !self.live.swap(false, Ordering::AcqRel) {
            return Ok(cmd::EventsReported::default());
        }
        if let CqProv::Mlx5 { ctx, cqn } = &self.prov {
            // Nobody polls this CQ again; before the destroy, as the CQN
            // may be reused right after it.
            ctx.cq_destroyed(*cqn);
        }
        match cmd::destroy_cq(&self.fd, self.handle) {
            Ok(ev) => {
                debug!(handle = self.handle, comp_events = ev.comp, async_events = ev.async_, "CQ destroyed");
                Ok(ev)
            }
            Err(e) => {
                self.live.store(true, Ordering::Release);
                Err(e)
            }
        }
    }
}

impl Drop for CqCore {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "CQ destroy failed");
        }
    }
}

impl KernelCq {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.0.handle
    }

    /// Entries the CQ holds (after create or the last resize).
    pub fn cqe(&self) -> u32 {
        self.0.cqe.load(Ordering::Relaxed)
    }

    /// The count of completion events read from the channel for this CQ,
    /// when the provider needs it: whoever reads an event must add one
    /// (`ibv_get_cq_event` does it in rdma-core), or mlx5's next arm is
    /// ignored by the HCA. `None` for rxe, whose arm state the kernel keeps:
    /// reading its events needs no bookkeeping.
    pub fn event_counter(&self) -> Option<&Arc<AtomicU32>> {
        matches!(self.0.prov, CqProv::Mlx5 { .. }).then_some(&self.0.events)
    }

    /// True when both are the same kernel CQ.
    pub fn same_as(&self, other: &KernelCq) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether it was created on `fd`.
    pub(crate) fn is_on(&self, fd: &Arc<UverbsFd>) -> bool {
        Arc::ptr_eq(&self.0.fd, fd)
    }

    /// Takes the driver of a CQ whose owner goes away. rxe: dropped now
    /// (its ring is a mapping of kernel memory; unmapping it before the
    /// kernel destroy is harmless). mlx5: owed cleans are run, then it is
    /// parked until the kernel CQ is destroyed.
    ///
    /// Another CQ's driver is not taken: it parks itself with its own
    /// kernel CQ when dropped.
    pub fn park(&self, mut driver: CqDriver) {
        if !driver.is_of(self) {
            tracing::warn!(handle = self.0.handle, "a CQ driver offered to another kernel CQ: not parked here");
            return;
        }
        if self.0.fd.in_forked_child() {
            // A forked child touches none of the parent's queue memory
            // (mlx5's is not even mapped here: MADV_DONTFORK).
            std::mem::forget(driver.take());
            return;
        }
        match std::mem::replace(&mut driver.0, Drv::Gone) {
            d @ Drv::Mlx5 { .. } => self.0.parked.park(d, |d| {
                if let Drv::Mlx5 { cq, .. } = d {
                    cq.apply_cleans();
                }
            }),
            other => drop(other),
        }
    }

    /// Destroys the kernel CQ now (`UVERBS_METHOD_CQ_DESTROY`), if this is
    /// the last holder; park the driver first.
    ///
    /// # Errors
    /// `EBUSY` while QPs still hold it (it is destroyed after the last of
    /// them); the kernel's errno otherwise.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(&mut self) -> Result<()> {
        match Arc::get_mut(&mut self.0) {
            Some(c) => c.destroy(),
            None => Err(Error::check("ibv_destroy_cq", Errno::EBUSY)
                .with_message("QPs still use this CQ; it is destroyed after the last of them")),
        }
    }

    /// Destroys the kernel CQ now, through a shared reference, and returns
    /// the kernel's counts of the completion and async events it reported
    /// for the CQ (what `ibv_destroy_cq` waits for the acknowledgements
    /// of); zeros when it was already destroyed, or in a forked child
    /// (whose CQ is the parent's). The driver and any parked one stay until
    /// the last holder goes. If the kernel refuses, nothing changed: the CQ
    /// is usable and the destroy may be tried again.
    ///
    /// # Errors
    /// `EBUSY` while QPs hold it (no command is issued); the kernel's errno.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy_now(&self) -> Result<cmd::EventsReported> {
        if Arc::strong_count(&self.0) > 1 {
            return Err(Error::check("ibv_destroy_cq", Errno::EBUSY).with_message("QPs still use this CQ"));
        }
        if self.0.fd.in_forked_child() {
            return Ok(cmd::EventsReported::default());
        }
        self.0.destroy_now()
    }

    /// mlx5: QP `qp` was destroyed or moved to RESET (kernel command done):
    /// its completions still in this CQ must go. A parked driver (no owner
    /// any more) is cleaned now; a live one is out of reach (polled through
    /// `&mut` without a lock), so the clean is requested and runs at its
    /// next poll, before it reads any entry. Under the parking lock, so an
    /// owner being dropped either sees the request or is seen parked.
    pub(crate) fn clean_qp(&self, qp: &Arc<mlx5::QpShared>) {
        let CqProv::Mlx5 { ctx, cqn } = &self.0.prov else { return };
        self.0.parked.with(|parked| match parked {
            Some(Drv::Mlx5 { cq, .. }) => cq.clean_qp(qp),
            _ => ctx.request_clean(*cqn, qp),
        })
    }
}

impl CqDriver {
    /// Moves up to `out.len()` completions into `out`; returns how many
    /// (`ibv_poll_cq`). No syscall, no allocation, no lock: a copy out of
    /// the ring (rxe: shared with the kernel; mlx5: written by the HCA).
    /// mlx5 takes its registry's read lock when a CQE names a QP other than
    /// the one it resolved last.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        match &mut self.0 {
            Drv::Rxe { ring, .. } => rxe_poll(ring, out),
            Drv::Mlx5 { cq, .. } => mlx5_poll(cq, out),
            Drv::Dead | Drv::Gone => 0,
        }
    }

    /// One completion into `w`: true, or false (and `w` as it was) when
    /// none is ready (`ibv_poll_cq` with one entry). rxe polls a one-entry
    /// slice; mlx5 takes [`Cq::poll_one`](crate::mlx5::Cq::poll_one), its
    /// one-entry path without the slice's length test.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_one(&mut self, w: &mut Wc) -> bool {
        match &mut self.0 {
            Drv::Rxe { ring, .. } => rxe_poll(ring, std::slice::from_mut(w)) == 1,
            Drv::Mlx5 { cq, .. } => mlx5_poll_one(cq, w),
            Drv::Dead | Drv::Gone => false,
        }
    }

    /// [`poll`](Self::poll) into memory that need not be initialised:
    /// returns the completions written, the first entries of `out` (the
    /// rest is left as it was). rxe decodes straight into `out`; mlx5
    /// initialises `out` first and polls it as usual.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_uninit<'a>(&mut self, out: &'a mut [MaybeUninit<Wc>]) -> &'a mut [Wc] {
        let n = match &mut self.0 {
            Drv::Rxe { ring, .. } => rxe_poll_uninit(ring, out),
            Drv::Mlx5 { cq, .. } => mlx5_poll_uninit(cq, out),
            Drv::Dead | Drv::Gone => 0,
        };
        let done = &mut out[..n];
        // SAFETY: both polls wrote the first `n` entries whole (rxe's
        // `poll_uninit` contract; mlx5's were all initialised), and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) }
    }

    /// [`poll_uninit`](Self::poll_uninit) that leaves `imm_data` in network
    /// byte order, as libibverbs' `ibv_wc` holds it (the C library's
    /// `ibv_poll_cq` writes the caller's array with it and swaps nothing).
    /// rxe's ring copy is inlined here, so the C poll is one frame; mlx5
    /// polls out of line and swaps `imm_data` back where `WITH_IMM` says
    /// there is one (the union's other member, an invalidated rkey, stays
    /// in host order, as in `ibv_wc`).
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll_uninit_net_imm<'a>(&mut self, out: &'a mut [MaybeUninit<Wc>]) -> &'a mut [Wc] {
        let n = match &mut self.0 {
            Drv::Rxe { ring, .. } => ring.poll_uninit_net_imm(out),
            Drv::Mlx5 { cq, .. } => mlx5_poll_uninit_net_imm(cq, out),
            Drv::Dead | Drv::Gone => 0,
        };
        // Both polls return at most `out.len()`; `min` lets the compiler
        // see it (no bounds check, no panic path).
        let len = out.len();
        let done = &mut out[..n.min(len)];
        // SAFETY: both polls wrote the first `n` entries whole (rxe's
        // `poll_uninit_net_imm` contract; mlx5's were all initialised), and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) }
    }

    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) of one entry,
    /// without the slice: `Some` with the completion written into `w`, or
    /// `None` (`w` untouched) when there is none. rxe's ring copy is
    /// inlined here with no call (the C library's one-entry `ibv_poll_cq`
    /// is a leaf); mlx5 polls out of line into a local `Wc` (the
    /// provider's `poll_one`) and swaps an immediate to network order.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        match &mut self.0 {
            Drv::Rxe { ring, .. } => ring.poll_one_uninit_net_imm(w),
            Drv::Mlx5 { cq, .. } => mlx5_poll_one_net_imm(cq, w),
            Drv::Dead | Drv::Gone => None,
        }
    }

    /// True when no completion is ready: a [`poll`](Self::poll) now would
    /// return 0 (rxe: its producer index is our consumer index; mlx5: the
    /// next entry is the hardware's; a dead or moved-out CQ: always).
    /// Nothing is consumed and nothing is called: a busy loop's empty poll
    /// costs a few loads.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Drv::Rxe { ring, .. } => ring.is_empty(),
            Drv::Mlx5 { cq, .. } => cq.is_empty(),
            Drv::Dead | Drv::Gone => true,
        }
    }

    /// Arms the CQ for one event (`ibv_req_notify_cq`). rxe:
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`, one ioctl of a command built at
    /// create ([`cmd::ReqNotifyCq`]). mlx5: no syscall, the
    /// arm word into the doorbell record and a store to the UAR arm
    /// register, with a sequence number that counts the events read for
    /// this CQ so far ([`KernelCq::event_counter`]).
    #[doc(alias = "ibv_req_notify_cq")]
    #[inline]
    pub fn req_notify(&mut self, k: &KernelCq, solicited_only: bool) -> Result<()> {
        if !self.is_of(k) {
            return Err(not_its_cq("ibv_req_notify_cq"));
        }
        match &mut self.0 {
            Drv::Rxe { arm, .. } => arm.send(&k.0.fd, solicited_only),
            _ => self.req_notify_other(k, solicited_only),
        }
    }

    /// [`req_notify`](Self::req_notify) of mlx5 (and of a CQ that cannot be armed).
    #[inline(never)]
    fn req_notify_other(&mut self, k: &KernelCq, solicited_only: bool) -> Result<()> {
        match &mut self.0 {
            Drv::Rxe { arm, .. } => arm.send(&k.0.fd, solicited_only),
            Drv::Mlx5 { cq, synced } => {
                let seen = k.0.events.load(Ordering::Acquire);
                // At most one event per arm, so this is 0 or 1 in practice.
                for _ in 0..seen.wrapping_sub(*synced) {
                    cq.on_event();
                }
                *synced = seen;
                cq.arm(solicited_only);
                Ok(())
            }
            Drv::Dead => Err(dead("ibv_req_notify_cq")),
            Drv::Gone => Err(gone("ibv_req_notify_cq")),
        }
    }

    /// Resizes the CQ to at least `cqe` entries (`IB_USER_VERBS_CMD_RESIZE_CQ`,
    /// `ibv_resize_cq`); returns the new size. Unpolled completions are kept.
    ///
    /// # Errors
    /// mlx5: `EOPNOTSUPP` (nothing sent). rxe: if the kernel resized but
    /// the new ring cannot be mapped, the CQ is dead from then on (it polls
    /// nothing, as the kernel writes only the new ring) and the error says
    /// to recreate it.
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, k: &KernelCq, cqe: u32) -> Result<u32> {
        const VERB: &str = "ibv_resize_cq";
        if !self.is_of(k) {
            return Err(not_its_cq(VERB));
        }
        match &mut self.0 {
            Drv::Rxe { ring, .. } => {
                let mut drv_out = [0u8; rxe::CQ_RESP_LEN];
                let new = cmd::resize_cq(&k.0.fd, k.0.handle, cqe, &mut drv_out)?;
                match rxe::cq_finish(&k.0.fd, &drv_out) {
                    Ok(r) => *ring = r,
                    Err(e) => {
                        self.0 = Drv::Dead;
                        return Err(e.with_message(format!(
                            "the kernel resized the CQ to {new} entries but its new ring could not be mapped, so \
                             this CQ can no longer be polled: destroy it and create a new one"
                        )));
                    }
                }
                k.0.cqe.store(new, Ordering::Relaxed);
                debug!(handle = k.0.handle, cqe = new, "CQ resized");
                Ok(new)
            }
            Drv::Mlx5 { .. } => Err(Error::check(VERB, Errno::EOPNOTSUPP)
                .with_message("resizing a CQ is not supported by the rverbs mlx5 provider; create a larger one")),
            Drv::Dead => Err(dead(VERB)),
            Drv::Gone => Err(gone(VERB)),
        }
    }

    /// Takes the driver out, leaving one that polls nothing (for the owner's
    /// `Drop`, before [`KernelCq::park`]).
    pub fn take(&mut self) -> CqDriver {
        CqDriver(std::mem::replace(&mut self.0, Drv::Gone), self.1.clone())
    }

    /// False once a failed resize left the CQ unpollable.
    pub fn is_usable(&self) -> bool {
        !matches!(self.0, Drv::Dead | Drv::Gone)
    }

    /// Whether this is `k`'s driver.
    #[inline]
    pub fn is_of(&self, k: &KernelCq) -> bool {
        core::ptr::eq(self.1.as_ptr(), Arc::as_ptr(&k.0))
    }
}

/// The error of a driver used with another CQ's kernel object.
fn not_its_cq(verb: &'static str) -> Error {
    Error::check(verb, Errno::EINVAL).with_message("this CQ driver belongs to another kernel CQ")
}

// One function per provider behind the dispatch, each with a frame that fits
// its own ring code (the providers' benches poll the rings directly).

#[inline(never)]
fn rxe_poll(ring: &mut rxe::CqRing, out: &mut [Wc]) -> usize {
    ring.poll(out)
}

#[inline(never)]
fn mlx5_poll(cq: &mut mlx5::Cq, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

#[inline(never)]
fn mlx5_poll_one(cq: &mut mlx5::Cq, w: &mut Wc) -> bool {
    cq.poll_one(w)
}

#[cold]
#[inline(never)]
fn mlx5_poll_one_net_imm<'a>(cq: &mut mlx5::Cq, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
    let mut got = Wc::default();
    if !cq.poll_one(&mut got) {
        return None;
    }
    imm_to_net(std::slice::from_mut(&mut got));
    Some(w.write(got))
}

#[inline(never)]
fn rxe_poll_uninit(ring: &mut rxe::CqRing, out: &mut [MaybeUninit<Wc>]) -> usize {
    ring.poll_uninit(out)
}

#[inline(never)]
fn mlx5_poll_uninit(cq: &mut mlx5::Cq, out: &mut [MaybeUninit<Wc>]) -> usize {
    cq.poll_uninit(out)
}

/// mlx5's [`CqDriver::poll_uninit_net_imm`]: decoded as usual, then each
/// immediate back to network order.
#[inline(never)]
fn mlx5_poll_uninit_net_imm(cq: &mut mlx5::Cq, out: &mut [MaybeUninit<Wc>]) -> usize {
    let len = out.len();
    let n = cq.poll_uninit(out).min(len);
    let done = &mut out[..n];
    // SAFETY: `poll_uninit` initialised the first `n` entries, and
    // `MaybeUninit<Wc>` has `Wc`'s layout.
    imm_to_net(unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) });
    n
}

/// Puts the immediate of each completion that has one (`WITH_IMM`) in
/// network byte order; an invalidated rkey stays as it is.
fn imm_to_net(done: &mut [Wc]) {
    for w in done {
        if w.wc_flags.contains(crate::wr::WcFlags::WITH_IMM) {
            w.imm_data = w.imm_data.to_be();
        }
    }
}

fn gone(verb: &'static str) -> Error {
    Error::check(verb, Errno::EINVAL).with_message("the CQ was destroyed")
}

fn dead(verb: &'static str) -> Error {
    Error::check(verb, Errno::EIO)
        .with_message("a failed resize left this CQ without a ring: destroy it and create a new one")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::WcFlags;

    #[test]
    fn only_immediates_go_to_network_order() {
        let mut w = [
            Wc { imm_data: 0x0102_0304, wc_flags: WcFlags::WITH_IMM, ..Wc::default() },
            Wc { imm_data: 0x0a0b_0c0d, wc_flags: WcFlags::WITH_INV, ..Wc::default() },
            Wc { imm_data: 7, ..Wc::default() },
        ];
        imm_to_net(&mut w);
        assert_eq!(w.map(|w| w.imm_data), [u32::from_ne_bytes([1, 2, 3, 4]), 0x0a0b_0c0d, 7]);
    }
}
