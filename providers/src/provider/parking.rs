//! Where the provider half of a dropped user handle waits for its kernel
//! object's destroy (mlx5: queue memory the device writes until then).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::Result;

/// A parked provider half. Only control paths touch it (drop, destroy, a
/// QP's destroy or RESET); the fast path never does.
///
/// The flag says whether anything was ever parked, so that the last
/// holder's [`release`](Self::release) of a provider that never parks
/// (rxe, siw) takes no lock. A park happens before that release: the
/// parker holds a strong reference to the kernel object while it parks,
/// and the release runs after the last one is dropped (the reference
/// count's release/acquire orders the two).
///
/// The parked half is boxed: the slot is in every kernel CQ's and SRQ's
/// allocation, and a provider driver inline (rxe's CQ: 144 bytes) would
/// more than double it for the one provider that parks (mlx5, whose parks
/// then cost an allocation, on a control path).
#[derive(Debug)]
pub(crate) struct Parking<D>(Mutex<Option<Box<D>>>, AtomicBool);

impl<D> Parking<D> {
    pub(crate) fn new() -> Self {
        Parking(Mutex::new(None), AtomicBool::new(false))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Box<D>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `d` until [`release`](Self::release), after running `last` on
    /// it under the lock (so [`with`](Self::with) sees it either before
    /// `last` or parked).
    pub(crate) fn park(&self, mut d: D, last: impl FnOnce(&mut D)) {
        let mut slot = self.lock();
        last(&mut d);
        *slot = Some(Box::new(d));
        self.1.store(true, Ordering::Release);
    }

    /// Runs `f` on the parked driver (`None`: nothing parked) under the lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&mut D>) -> R) -> R {
        f(self.lock().as_deref_mut())
    }

    /// After the kernel object's destroy: `destroyed` hands the driver back
    /// (drop it); otherwise the kernel object may still exist and the
    /// device may still reach the driver's memory, so it is leaked.
    #[inline]
    pub(crate) fn release(&self, destroyed: bool) -> Option<Box<D>> {
        if !self.1.load(Ordering::Acquire) {
            // Never parked (rxe, siw): no lock, no call.
            return None;
        }
        self.release_parked(destroyed)
    }

    /// For the kernel object's `Drop`: true when `live` says it is gone
    /// already (destroyed, or a refused destroy gave it up), after freeing
    /// a driver parked since, which the kernel object no longer uses. That
    /// is all a second destroy would do; this skips its fork check and
    /// `live` swap.
    #[inline]
    pub(crate) fn drop_if_destroyed(&self, live: &mut AtomicBool) -> bool {
        if *live.get_mut() {
            return false;
        }
        drop(self.release(true));
        true
    }

    /// [`release`](Self::release) of a slot that was parked in.
    #[inline(never)]
    fn release_parked(&self, destroyed: bool) -> Option<Box<D>> {
        let mut slot = self.lock();
        if slot.is_none() {
            // Nothing parked (a second call): no move of the slot.
            return None;
        }
        let d = slot.take();
        drop(slot);
        if destroyed {
            d
        } else {
            // The driver (and the memory it owns) is leaked; the box it was
            // parked in, which the device never sees, is freed.
            if let Some(b) = d {
                std::mem::forget(*b);
            }
            None
        }
    }

    /// The last holder's destroy of the kernel object this parks for:
    /// `destroy_now` (the kernel command, done at most once through `live`),
    /// then the parked driver is dropped. If the kernel refuses, the object
    /// counts as gone and the driver is leaked (the device may still reach
    /// its memory). In a forked child (`forked`) nothing is destroyed: the
    /// object and its memory are the parent's.
    #[inline]
    pub(crate) fn destroy_last<R>(
        &self,
        live: &AtomicBool,
        forked: bool,
        destroy_now: impl FnOnce() -> Result<R>,
    ) -> Result<()> {
        if forked {
            if live.swap(false, Ordering::Relaxed) {
                self.release(false);
            }
            return Ok(());
        }
        match destroy_now() {
            Ok(_) => {
                // Tested here, not in `release`: the drop of what it
                // returns is out-of-line glue, called even for `None`.
                if self.1.load(Ordering::Acquire) {
                    drop(self.release_parked(true));
                }
                Ok(())
            }
            Err(e) => {
                live.store(false, Ordering::Relaxed);
                self.release(false);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A provider half that counts its drops (as an mlx5 CQ buffer would
    /// be unmapped). The counter is a static: a driver that is leaked on
    /// purpose takes no heap with it, so Miri's leak check still holds for
    /// everything else.
    #[derive(Debug)]
    struct Dummy(&'static AtomicUsize);
    impl Drop for Dummy {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A kernel object holding a parked driver, in the shape of a CQ's core:
    /// `Drop` destroys, then releases.
    struct Holder {
        log: Arc<Mutex<Vec<&'static str>>>,
        destroy_ok: bool,
        parked: Parking<Dummy>,
    }
    impl Drop for Holder {
        fn drop(&mut self) {
            self.log.lock().unwrap().push("kernel destroy");
            let d = self.parked.release(self.destroy_ok);
            drop(d);
            self.log.lock().unwrap().push("released");
        }
    }

    #[test]
    fn parked_driver_lives_until_the_kernel_destroy() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        let drops = &DROPS;
        let log = Arc::new(Mutex::new(Vec::new()));
        let h = Arc::new(Holder { log: log.clone(), destroy_ok: true, parked: Parking::new() });
        let qp_ref = h.clone(); // a QP still holding the kernel object
        let mut ran_last = false;
        h.parked.park(Dummy(drops), |_| ran_last = true);
        assert!(ran_last);
        drop(h); // the user's handle goes
        assert_eq!(drops.load(Ordering::SeqCst), 0, "parked, not freed");
        assert!(qp_ref.parked.with(|d| d.is_some()));
        assert!(log.lock().unwrap().is_empty());
        drop(qp_ref); // the last QP goes: destroy, then free
        assert_eq!(*log.lock().unwrap(), ["kernel destroy", "released"]);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_destroy_leaks_the_parked_driver() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        let drops = &DROPS;
        let log = Arc::new(Mutex::new(Vec::new()));
        let h = Holder { log, destroy_ok: false, parked: Parking::new() };
        h.parked.park(Dummy(drops), |_| {});
        drop(h);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "never freed under a device that may still write it");
    }

    #[test]
    fn nothing_parked_releases_nothing() {
        let p: Parking<Dummy> = Parking::new();
        assert!(p.with(|d| d.is_none()));
        assert!(p.release(true).is_none());
    }
}
