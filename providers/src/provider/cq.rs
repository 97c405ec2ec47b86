//! Completion queues: create (prepare → `CQ_CREATE` → finish → rollback),
//! the poll/arm/resize dispatch, and the kernel object's destroy.

use std::any::Any;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use super::ops::create_then_finish;
use super::parking::Parking;
use super::{CqOps, CqPoll, CqProv, CqRef, Drv, Kind, ProviderContext, ResizeError, Variant, VariantMut};
use crate::cmd::cq as cmd;
use crate::sys::UverbsFd;
use crate::wr::Wc;
use crate::{Errno, Error, Result};

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
/// lives parks itself there when its provider parks CQ drivers
/// (`CqOps::CQ_PARKS`: mlx5), so queue memory is never freed while the
/// device may still write it.
///
/// The tie is the `Weak` (which keeps the kernel CQ's allocation, so its
/// address, from being reused while the driver lives) and that address,
/// kept as a number: [`is_of`](Self::is_of), tested on every arm, is one
/// compare, where `Weak::as_ptr` must first tell a dangling `Weak` apart.
#[derive(Debug)]
pub struct CqDriver(Drv, Weak<CqCore<CqUser>>, usize);

/// What the library above keeps with a kernel CQ, in the kernel CQ's own
/// allocation (one per CQ): rverbs' context, `user_handle` and channel.
/// Dropped right after the kernel CQ's destroy, with the last holder.
pub type CqUser = dyn Any + Send + Sync;

/// A tie to no kernel CQ (`Weak::new` needs a sized type: this one, unsized).
fn no_cq() -> Weak<CqCore<CqUser>> {
    Weak::<CqCore<()>>::new()
}

impl Drop for CqDriver {
    /// Inlined into the drop glue: a driver that need not outlive its
    /// kernel CQ (rxe, siw) drops with no call of its own.
    #[inline]
    fn drop(&mut self) {
        if self.0.parks() {
            self.park_on_drop();
        }
    }
}

impl CqDriver {
    /// [`Drop`] of a driver that must outlive its kernel CQ (mlx5): parked
    /// with it while it lives.
    #[inline(never)]
    fn park_on_drop(&mut self) {
        if let Some(core) = self.1.upgrade() {
            KernelCq(core).park(self);
        }
    }
}

/// `inline_first!(&mut drv, d => fast, slow)`: the dispatch of a fast
/// path. A provider whose fast paths are inlined ([`CqPoll::INLINE`]) is
/// called in place (`fast`, with its driver `d`) after one compare of the
/// tag; every other provider, and a dead or moved-out driver, calls `slow`
/// (one of `Drv`'s `*_elsewhere`), out of line, which dispatches again.
/// (The `match` leaves every other arm empty, so they all reach `slow` as
/// one branch: with a call in each, LLVM builds a jump table.)
macro_rules! inline_first {
    ($drv:expr, $d:ident => $fast:expr, $slow:expr) => {
        'inline: {
            each!($drv, Drv, T, $d => if <<T as CqOps>::Cq as CqPoll>::INLINE { break 'inline $fast; }; Drv::Dead | Drv::Gone => {});
            $slow
        }
    };
}

// The fast paths of the providers that are not inlined into the dispatch,
// and of a dead or moved-out driver (nothing, or an error).
impl Drv {
    #[inline(never)]
    fn poll_elsewhere(&mut self, out: &mut [Wc]) -> usize {
        each!(self, Drv, T, d => d.poll(out); Drv::Dead | Drv::Gone => 0)
    }

    #[inline(never)]
    fn poll_one_elsewhere(&mut self, w: &mut Wc) -> bool {
        each!(self, Drv, T, d => d.poll_one(w); Drv::Dead | Drv::Gone => false)
    }

    #[inline(never)]
    fn poll_uninit_elsewhere(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        each!(self, Drv, T, d => d.poll_uninit(out); Drv::Dead | Drv::Gone => 0)
    }

    #[inline(never)]
    fn poll_uninit_net_imm_elsewhere(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        each!(self, Drv, T, d => d.poll_uninit_net_imm(out); Drv::Dead | Drv::Gone => 0)
    }

    #[inline(never)]
    fn arm_elsewhere(&mut self, r: CqRef<'_>, solicited_only: bool) -> Result<()> {
        const VERB: &str = "ibv_req_notify_cq";
        each!(self, Drv, T, d => d.arm(r, solicited_only); Drv::Dead => Err(dead(VERB)), Drv::Gone => Err(gone(VERB)))
    }

    #[inline(never)]
    fn poll_one_uninit_net_imm_elsewhere<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        each!(self, Drv, T, d => d.poll_one_uninit_net_imm(w); Drv::Dead | Drv::Gone => None)
    }
}

impl Drv {
    /// Whether this driver must outlive its kernel CQ.
    #[inline]
    fn parks(&self) -> bool {
        each!(self, Drv, T, _ => <T as CqOps>::CQ_PARKS; Drv::Dead | Drv::Gone => false)
    }
}

/// The kernel CQ, shared (cheap clone) by the CQ's owner and the QPs that
/// use it, which keep it alive. Destroyed when the last clone goes.
///
/// With mlx5 the CQ buffer and doorbell record are user memory the HCA
/// writes until the kernel CQ is destroyed; a driver whose owner goes while
/// QPs still hold the kernel CQ is therefore parked here
/// (`CqOps::CQ_PARKS`), and freed only after the kernel destroy (or
/// leaked if that fails).
///
/// `U` is the creator's part kept with it ([`create_cq`]'s `user`): a
/// CQ's owner keeps it typed (`KernelCq<ItsType>`: its fields at fixed
/// offsets, for `req_notify`'s fast path), and so does a QP of the same
/// creator ([`KernelQp`](super::KernelQp)`<ItsType, _>`: a thin pointer);
/// the erased default ([`CqUser`]) serves code that holds CQs of any
/// creator.
///
/// [`create_cq`]: ProviderContext::create_cq
#[derive(Debug)]
pub struct KernelCq<U: ?Sized = CqUser>(Arc<CqCore<U>>);

impl<U: ?Sized> Clone for KernelCq<U> {
    fn clone(&self) -> Self {
        KernelCq(self.0.clone())
    }
}

/// The kernel CQ's one allocation: the provider's part, then the user's
/// ([`CqUser`], last, so that it may be unsized).
#[derive(Debug)]
struct CqCore<U: ?Sized> {
    fd: Arc<UverbsFd>,
    handle: u32,
    cqe: AtomicU32,
    /// Completion events read from the channel for this CQ (mlx5's arm
    /// sequence number follows them); `None` where the provider does not
    /// count them (rxe: one allocation less per CQ).
    events: Option<Arc<AtomicU32>>,
    prov: CqProv,
    /// The kernel CQ exists (a failed destroy sets it again).
    live: AtomicBool,
    parked: Parking<Drv>,
    /// The library's part, dropped after the kernel destroy.
    user: U,
}

impl CqProv {
    fn counts_events(&self) -> bool {
        each!(self, CqProv, T, _ => <T as CqOps>::CQ_COUNTS_EVENTS; CqProv::KernelOnly => false)
    }
}

impl ProviderContext {
    /// Creates a CQ: `UVERBS_METHOD_CQ_CREATE` with the provider's driver
    /// data (mlx5: the buffer and doorbell record allocated first; rxe:
    /// none in, the ring's mmap info out), then the provider's half (rxe
    /// maps the ring). If anything fails after the kernel create, the kernel
    /// CQ is destroyed before the memory it uses is freed.
    ///
    /// `user` (the caller's part, `()` for none) is kept in the kernel CQ's
    /// allocation ([`KernelCq::user_value`]): it is dropped right after the
    /// kernel CQ's destroy, with the last holder, or before this returns if
    /// the create fails.
    #[doc(alias = "ibv_create_cq")]
    pub fn create_cq<U: Any + Send + Sync>(
        &self,
        fd: &Arc<UverbsFd>,
        a: &CqCreate<'_>,
        user: U,
    ) -> Result<(KernelCq<U>, CqDriver)> {
        self.create_cq_into(fd, a, user, |kernel, driver| (kernel, driver))
    }

    /// [`create_cq`](Self::create_cq), the two halves handed to `into`,
    /// whose value is returned: a caller's CQ is built where this returns
    /// it, not moved there from a tuple.
    #[doc(alias = "ibv_create_cq")]
    #[inline]
    pub fn create_cq_into<U: Any + Send + Sync, R>(
        &self,
        fd: &Arc<UverbsFd>,
        a: &CqCreate<'_>,
        user: U,
        into: impl FnOnce(KernelCq<U>, CqDriver) -> R,
    ) -> Result<R> {
        each!(&self.kind, Kind, T, ctx => create_cq::<T, U, R>(ctx, fd, a, user, into))
    }
}

impl<U> CqCore<U> {
    /// A live kernel CQ of provider state `prov`, with no driver parked.
    fn new(fd: &Arc<UverbsFd>, handle: u32, cqe: u32, counts_events: bool, prov: CqProv, user: U) -> Self {
        CqCore {
            fd: fd.clone(),
            handle,
            cqe: AtomicU32::new(cqe),
            events: counts_events.then(|| Arc::new(AtomicU32::new(0))),
            prov,
            live: AtomicBool::new(true),
            parked: Parking::new(),
            user,
        }
    }
}

/// [`ProviderContext::create_cq`] of provider `T`.
fn create_cq<T: CqOps, U: Any + Send + Sync, R>(
    ctx: &T,
    fd: &Arc<UverbsFd>,
    a: &CqCreate<'_>,
    user: U,
    into: impl FnOnce(KernelCq<U>, CqDriver) -> R,
) -> Result<R>
where
    CqProv: Variant<T, Of = T::CqState>,
    Drv: Variant<T, Of = T::Cq>,
{
    let (pending, udata, cqe) = ctx.cq_prepare(a.cqe)?;
    let args = cmd::CreateCq { cqe, user_handle: a.user_handle, channel: a.channel, comp_vector: a.comp_vector };
    let ((created, _), (state, cq)) = create_then_finish(
        pending,
        |_| {
            let mut resp = T::CqResp::new_zeroed();
            // SAFETY: the driver data names only pending memory (CqOps), freed
            // after the kernel CQ is destroyed, or now if this create fails.
            let created = unsafe { cmd::create_cq(fd, &args, udata.as_bytes(), resp.as_mut_bytes()) }?;
            Ok((created, resp))
        },
        |pending, (created, resp)| ctx.cq_finish(fd, pending, resp, created),
        |(created, _)| CqCore::new(fd, created.handle, created.cqe, false, CqProv::KernelOnly, ()).destroy(),
    )?;
    debug!(handle = created.handle, cqe = created.cqe, "CQ created");
    let prov = Variant::<T>::wrap(state);
    // Built in its allocation (`new_cyclic` allocates first: the fields are
    // stored there, not built beside it and copied), the driver's tie taken
    // on the way.
    let mut owner = Weak::new();
    let k = KernelCq(Arc::new_cyclic(|me: &Weak<CqCore<U>>| {
        owner = me.clone();
        CqCore::new(fd, created.handle, created.cqe, T::CQ_COUNTS_EVENTS, prov, user)
    }));
    let at = Arc::as_ptr(&k.0).cast::<()>() as usize;
    Ok(into(k, CqDriver(Variant::<T>::wrap(cq), owner as Weak<CqCore<CqUser>>, at)))
}

impl<U: ?Sized> CqCore<U> {
    /// The last holder's destroy: the kernel CQ (unless an earlier
    /// [`destroy_now`](Self::destroy_now) did it), then the parked driver.
    /// Through `&self`: the drivers' `Weak`s keep `Arc::get_mut` from
    /// answering, the strong count is what says "last holder".
    #[inline]
    fn destroy(&self) -> Result<()> {
        // A forked child: the kernel CQ is the parent's (the destroy
        // command would be skipped too), and mlx5's queue memory is not
        // mapped here. A refused destroy: the kernel CQ may still exist,
        // and an mlx5 HCA may still write its buffer, which is never freed.
        self.parked.destroy_last(&self.live, self.fd.in_forked_child(), || self.destroy_now())
    }

    /// The kernel destroy, once; zero counts when it was already done. On
    /// failure the CQ is as it was.
    fn destroy_now(&self) -> Result<cmd::EventsReported> {
        if !self.live.swap(false, Ordering::AcqRel) {
            return Ok(cmd::EventsReported::default());
        }
        // Nobody polls this CQ again.
        each!(&self.prov, CqProv, T, s => <T as CqOps>::cq_destroying(s); CqProv::KernelOnly => {});
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

impl<U: ?Sized> Drop for CqCore<U> {
    /// Inlined into the drop glue: after an explicit destroy it is the
    /// parking slot's release, no call of its own.
    #[inline]
    fn drop(&mut self) {
        if !self.parked.drop_if_destroyed(&mut self.live) {
            self.destroy_on_drop();
        }
    }
}

impl<U: ?Sized> CqCore<U> {
    /// [`Drop`]'s destroy of a CQ still live.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "CQ destroy failed");
        }
    }
}

impl<U: Any + Send + Sync> KernelCq<U> {
    /// The part the creator kept here (`create_cq`'s `user`).
    #[inline]
    pub fn user_value(&self) -> &U {
        &self.0.user
    }

    /// This holder, its user part's type erased.
    pub fn erase(self) -> KernelCq {
        KernelCq(self.0)
    }
}

impl<U: ?Sized> KernelCq<U> {
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
        self.0.events.as_ref().filter(|_| self.0.prov.counts_events())
    }

    /// True when both are the same kernel CQ.
    pub fn same_as<V: ?Sized>(&self, other: &KernelCq<V>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }

    /// What the driver's verbs see of it.
    #[inline]
    fn as_ref(&self) -> CqRef<'_> {
        /// What a CQ that does not count events shows its driver: 0.
        static NO_EVENTS: AtomicU32 = AtomicU32::new(0);
        CqRef { fd: &self.0.fd, handle: self.0.handle, events: self.0.events.as_deref().unwrap_or(&NO_EVENTS) }
    }

    /// Whether it was created on `fd`.
    pub(crate) fn is_on(&self, fd: &Arc<UverbsFd>) -> bool {
        Arc::ptr_eq(&self.0.fd, fd)
    }

    /// Takes the driver of a CQ whose owner goes away out of `driver`,
    /// leaving one that polls nothing and is tied to no kernel CQ (its tie
    /// would keep [`destroy`](Self::destroy) from finding itself the last
    /// holder). rxe: dropped now, in place (its ring is a mapping of kernel
    /// memory; unmapping it before the kernel destroy is harmless). mlx5:
    /// owed cleans are run, then it is parked until the kernel CQ is
    /// destroyed. A driver already taken is left as it is, at the cost of
    /// one compare (a second call).
    ///
    /// Another CQ's driver is not taken: it parks itself with its own
    /// kernel CQ when dropped.
    pub fn park(&self, driver: &mut CqDriver) {
        if matches!(driver.0, Drv::Gone) {
            return;
        }
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
        if driver.0.parks() {
            let d = std::mem::replace(&mut driver.0, Drv::Gone);
            self.0.parked.park(d, |d| each!(d, Drv, T, d => d.on_park(); Drv::Dead | Drv::Gone => {}));
        } else {
            // Dropped where it is: no copy of the driver on the way out.
            driver.0 = Drv::Gone;
        }
        (driver.1, driver.2) = (no_cq(), 0);
    }

    /// Destroys the kernel CQ now (`UVERBS_METHOD_CQ_DESTROY`), if this is
    /// the last holder; park the driver first.
    ///
    /// # Errors
    /// `EBUSY` while QPs still hold it (it is destroyed after the last of
    /// them); the kernel's errno otherwise.
    #[doc(alias = "ibv_destroy_cq")]
    #[inline]
    pub fn destroy(&mut self) -> Result<()> {
        // The strong count, not `Arc::get_mut`: the driver's `Weak` to its
        // kernel CQ is no holder. With `&mut self` and no other strong
        // reference, nobody can clone this one meanwhile.
        if Arc::strong_count(&self.0) > 1 {
            return Err(Error::check("ibv_destroy_cq", Errno::EBUSY)
                .with_message("QPs still use this CQ; it is destroyed after the last of them"));
        }
        self.0.destroy()
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

    /// QP `qp` of provider `T` was destroyed or moved to RESET (kernel
    /// command done): its completions still in this CQ must go
    /// ([`CqOps::cq_clean_qp`], given the parked driver if the owner has
    /// gone). Under the parking lock, so an owner being dropped either sees
    /// the request or is seen parked.
    pub(super) fn clean_qp<T: CqOps>(&self, qp: &T::CqCleanQp)
    where
        CqProv: Variant<T, Of = T::CqState>,
        Drv: VariantMut<T, Of = T::Cq>,
    {
        let Some(state) = Variant::<T>::of(&self.0.prov) else { return };
        self.0.parked.with(|parked| T::cq_clean_qp(state, parked.and_then(|d| VariantMut::<T>::of_mut(d)), qp))
    }

    /// QP `qp` of provider `T` moved to ERR, its send queue (`send`) and
    /// receive queue (`recv`) completing here ([`CqOps::cq_qp_errored`]).
    pub(super) fn qp_errored<T: CqOps>(&self, qp: &T::CqCleanQp, send: bool, recv: bool)
    where
        CqProv: Variant<T, Of = T::CqState>,
    {
        if let Some(state) = Variant::<T>::of(&self.0.prov) {
            T::cq_qp_errored(state, qp, send, recv);
        }
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
        inline_first!(&mut self.0, d => d.poll(out), self.0.poll_elsewhere(out))
    }

    /// One completion into `w`: true, or false (and `w` as it was) when
    /// none is ready (`ibv_poll_cq` with one entry). rxe polls a one-entry
    /// slice; mlx5 takes [`Cq::poll_one`](crate::mlx5::Cq::poll_one), its
    /// one-entry path without the slice's length test.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_one(&mut self, w: &mut Wc) -> bool {
        inline_first!(&mut self.0, d => d.poll_one(w), self.0.poll_one_elsewhere(w))
    }

    /// [`poll`](Self::poll) into memory that need not be initialised:
    /// returns the completions written, the first entries of `out` (the
    /// rest is left as it was). rxe decodes straight into `out`; mlx5
    /// initialises `out` first and polls it as usual.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_uninit<'a>(&mut self, out: &'a mut [MaybeUninit<Wc>]) -> &'a mut [Wc] {
        let n = inline_first!(&mut self.0, d => d.poll_uninit(out), self.0.poll_uninit_elsewhere(out));
        // Every poll returns at most `out.len()`; `min` lets the compiler
        // see it (no bounds check, no panic path).
        let len = out.len();
        let done = &mut out[..n.min(len)];
        // SAFETY: every poll wrote the first `n` entries whole
        // (`CqPoll::poll_uninit`'s contract), and `MaybeUninit<Wc>` has
        // `Wc`'s layout.
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
        let n = inline_first!(&mut self.0, d => d.poll_uninit_net_imm(out), self.0.poll_uninit_net_imm_elsewhere(out));
        // Every poll returns at most `out.len()`; `min` lets the compiler
        // see it (no bounds check, no panic path).
        let len = out.len();
        let done = &mut out[..n.min(len)];
        // SAFETY: every poll wrote the first `n` entries whole
        // (`CqPoll::poll_uninit_net_imm`'s contract), and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) }
    }

    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) taken in line
    /// where that costs no call (rxe, when none, one or two completions are
    /// ready): `Some` with how many were written; `None`, with nothing
    /// consumed, for every other case (three or more ready, another
    /// provider, a dead CQ), which `poll_uninit_net_imm` then takes. For
    /// the C library's `ibv_poll_cq`, whose usual poll is then a leaf.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll_few_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> Option<usize> {
        let n = inline_first!(&mut self.0, d => d.poll_few_uninit_net_imm(out), None)?;
        // At most `out.len()` (see `poll_uninit_net_imm`).
        Some(n.min(out.len()))
    }

    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) of one entry,
    /// without the slice: `Some` with the completion written into `w`, or
    /// `None` (`w` untouched) when there is none. rxe's ring copy is
    /// inlined here with no call (the C library's one-entry `ibv_poll_cq`
    /// is a leaf); mlx5 polls out of line (its `poll_one_uninit`: the
    /// fast path straight into `w`) and swaps an immediate to network order.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        inline_first!(&mut self.0, d => d.poll_one_uninit_net_imm(w), self.0.poll_one_uninit_net_imm_elsewhere(w))
    }

    /// [`poll_one_uninit_net_imm`](Self::poll_one_uninit_net_imm) after an
    /// [`is_empty`](Self::is_empty) test, both in one dispatch in line: an
    /// empty CQ costs the test (busy pollers' one-entry C polls mostly find
    /// nothing), a ready one a call straight to the provider's poll.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll_one_ready_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        each!(&mut self.0, Drv, T, d => d.poll_one_ready_uninit_net_imm(w); Drv::Dead | Drv::Gone => None)
    }

    /// True when no completion is ready: a [`poll`](Self::poll) now would
    /// return 0 (rxe: its producer index is our consumer index; mlx5: the
    /// next entry is the hardware's; a dead or moved-out CQ: always).
    /// Nothing is consumed and nothing is called: a busy loop's empty poll
    /// costs a few loads.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        each!(&self.0, Drv, T, d => d.is_empty(); Drv::Dead | Drv::Gone => true)
    }

    /// Arms the CQ for one event (`ibv_req_notify_cq`). rxe:
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`, one ioctl of a command built at
    /// create ([`cmd::ReqNotifyCq`]). mlx5: no syscall, the
    /// arm word into the doorbell record and a store to the UAR arm
    /// register, with a sequence number that counts the events read for
    /// this CQ so far ([`KernelCq::event_counter`]).
    #[doc(alias = "ibv_req_notify_cq")]
    #[inline]
    pub fn req_notify<U: ?Sized>(&mut self, k: &KernelCq<U>, solicited_only: bool) -> Result<()> {
        if !self.is_of(k) {
            return Err(not_its_cq("ibv_req_notify_cq"));
        }
        inline_first!(&mut self.0, d => d.arm(k.as_ref(), solicited_only), self.0.arm_elsewhere(k.as_ref(), solicited_only))
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
    pub fn resize<U: ?Sized>(&mut self, k: &KernelCq<U>, cqe: u32) -> Result<u32> {
        const VERB: &str = "ibv_resize_cq";
        if !self.is_of(k) {
            return Err(not_its_cq(VERB));
        }
        let r = k.as_ref();
        let resized = each!(&mut self.0, Drv, T, d => d.resize(r, cqe); Drv::Dead => return Err(dead(VERB)), Drv::Gone => return Err(gone(VERB)));
        match resized {
            Ok(new) => {
                k.0.cqe.store(new, Ordering::Relaxed);
                debug!(handle = k.0.handle, cqe = new, "CQ resized");
                Ok(new)
            }
            Err(ResizeError::Kept(e)) => Err(e),
            Err(ResizeError::Lost { error, cqe: new }) => {
                self.0 = Drv::Dead;
                Err(error.with_message(format!(
                    "the kernel resized the CQ to {new} entries but its new ring could not be mapped, so this CQ \
                     can no longer be polled: destroy it and create a new one"
                )))
            }
        }
    }

    /// Takes the driver out, leaving one that polls nothing and is tied to
    /// no kernel CQ any more (for the owner's `Drop` or destroy, before
    /// [`KernelCq::park`]): its link would keep [`KernelCq::destroy`]
    /// from finding itself the last holder.
    pub fn take(&mut self) -> CqDriver {
        let tie = (std::mem::replace(&mut self.1, no_cq()), std::mem::take(&mut self.2));
        CqDriver(std::mem::replace(&mut self.0, Drv::Gone), tie.0, tie.1)
    }

    /// False once a failed resize left the CQ unpollable.
    pub fn is_usable(&self) -> bool {
        !matches!(self.0, Drv::Dead | Drv::Gone)
    }

    /// Whether this is `k`'s driver. (Its address: the driver's `Weak`
    /// keeps that allocation alive, so no other kernel CQ can have it; 0,
    /// no address, once [`take`](Self::take)n.)
    #[inline]
    pub fn is_of<U: ?Sized>(&self, k: &KernelCq<U>) -> bool {
        self.2 == Arc::as_ptr(&k.0).cast::<()>() as usize
    }
}

/// The error of a driver used with another CQ's kernel object.
fn not_its_cq(verb: &'static str) -> Error {
    Error::check(verb, Errno::EINVAL).with_message("this CQ driver belongs to another kernel CQ")
}

#[cold]
#[inline(never)]
fn gone(verb: &'static str) -> Error {
    Error::check(verb, Errno::EINVAL).with_message("the CQ was destroyed")
}

#[cold]
#[inline(never)]
fn dead(verb: &'static str) -> Error {
    Error::check(verb, Errno::EIO)
        .with_message("a failed resize left this CQ without a ring: destroy it and create a new one")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel CQ that was never created (no provider half, not live: its
    /// drop sends nothing), on `/dev/null`.
    fn kernel_cq() -> KernelCq {
        let fd = UverbsFd::open(std::path::Path::new("/dev/null"), 0, None).expect("/dev/null is a char device");
        let core = CqCore::new(&Arc::new(fd), 7, 16, false, CqProv::KernelOnly, ());
        core.live.store(false, Ordering::Relaxed);
        KernelCq(Arc::new(core))
    }

    /// A driver tied to `k` as `create_cq` ties one.
    fn driver_of(k: &KernelCq) -> CqDriver {
        CqDriver(Drv::Gone, Arc::downgrade(&k.0), Arc::as_ptr(&k.0).cast::<()>() as usize)
    }

    /// N9: a driver is its own kernel CQ's only, and once taken out, no
    /// kernel CQ's: arming or resizing another CQ is refused before any
    /// command (the fd is /dev/null: a command would fail otherwise).
    #[test]
    #[cfg_attr(miri, ignore)] // opens /dev/null
    fn a_driver_is_tied_to_its_kernel_cq_alone() {
        let (a, b) = (kernel_cq(), kernel_cq());
        let mut d = driver_of(&a);
        assert!(d.is_of(&a) && !d.is_of(&b));
        assert!(d.is_of(&a.clone()), "a clone is the same kernel CQ");
        let e = d.req_notify(&b, false).expect_err("another CQ's arm");
        assert_eq!(e.errno(), Some(Errno::EINVAL));
        assert!(e.to_string().contains("another kernel CQ"), "{e}");
        let e = d.resize(&b, 32).expect_err("another CQ's resize");
        assert!(e.to_string().contains("another kernel CQ"), "{e}");
        // Its own CQ: past the tie, to the driver (moved out: "destroyed").
        let e = d.req_notify(&a, false).expect_err("a moved-out driver");
        assert!(e.to_string().contains("destroyed"), "{e}");
        let taken = d.take();
        assert!(taken.is_of(&a), "the tie moves with the driver");
        assert!(!d.is_of(&a) && !d.is_of(&b), "what is left is tied to nothing");
        assert_eq!(d.2, 0);
    }

    /// The tie outlives the kernel CQ's last strong holder: the driver's
    /// `Weak` keeps the allocation, so a kernel CQ created after it cannot
    /// take its address.
    #[test]
    #[cfg_attr(miri, ignore)] // opens /dev/null
    fn a_dead_kernel_cqs_address_is_not_reused() {
        let a = kernel_cq();
        let d = driver_of(&a);
        drop(a);
        let fresh: Vec<KernelCq> = (0..16).map(|_| kernel_cq()).collect();
        assert!(fresh.iter().all(|k| !d.is_of(k)));
    }

    /// A dead or moved-out driver polls nothing, through the out-of-line
    /// dispatch, in every shape of poll.
    #[test]
    #[cfg_attr(miri, ignore)] // opens /dev/null
    fn a_moved_out_driver_polls_nothing() {
        let k = kernel_cq();
        let mut d = driver_of(&k);
        let mut out = [Wc::default(); 4];
        assert_eq!(d.poll(&mut out), 0);
        assert!(!d.poll_one(&mut out[0]));
        let mut raw = [MaybeUninit::<Wc>::uninit(); 4];
        assert!(d.poll_uninit(&mut raw).is_empty());
        assert!(d.poll_uninit_net_imm(&mut raw).is_empty());
        assert!(d.poll_one_uninit_net_imm(&mut raw[0]).is_none());
        assert!(d.is_empty() && !d.is_usable());
        d.0 = Drv::Dead;
        assert_eq!(d.poll(&mut out), 0);
        let e = d.req_notify(&k, false).expect_err("a dead CQ");
        assert_eq!(e.errno(), Some(Errno::EIO));
    }
}
