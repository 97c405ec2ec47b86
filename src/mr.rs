//! Memory regions (`ibv_mr`): memory registered with the device, with the
//! keys work requests and peers use to reach it.
//!
//! This module may use `unsafe`: a region is memory the device reads and
//! writes behind Rust's back, and registering caller memory is an `unsafe`
//! contract by nature. Each block says why it is sound.
#![allow(unsafe_code)]

mod shared_bytes;

use std::ptr::NonNull;

use bitflags::bitflags;
use memmap2::{Advice, MmapRaw};
use rverbs_providers::cmd::mr as cmd;
use rverbs_providers::sys::event::{anon_pages, memlock_limit};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_ioctl_verbs::*;
use tracing::debug;

use crate::{ProtectionDomain, RemoteAddr, Sge};
use shared_bytes::SharedBytes;

bitflags! {
    /// `enum ibv_access_flags` (`IB_UVERBS_ACCESS_*`): what the device may do
    /// with a memory region (or a QP's remote access).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct AccessFlags: u32 {
        /// `IBV_ACCESS_LOCAL_WRITE`: the device may write (receives, READ responses).
        const LOCAL_WRITE = IB_UVERBS_ACCESS_LOCAL_WRITE;
        /// `IBV_ACCESS_REMOTE_WRITE`: peers may RDMA WRITE. Needs `LOCAL_WRITE`.
        const REMOTE_WRITE = IB_UVERBS_ACCESS_REMOTE_WRITE;
        /// `IBV_ACCESS_REMOTE_READ`: peers may RDMA READ.
        const REMOTE_READ = IB_UVERBS_ACCESS_REMOTE_READ;
        /// `IBV_ACCESS_REMOTE_ATOMIC`: peers may do atomics. Needs `LOCAL_WRITE`.
        const REMOTE_ATOMIC = IB_UVERBS_ACCESS_REMOTE_ATOMIC;
        /// `IBV_ACCESS_MW_BIND`.
        const MW_BIND = IB_UVERBS_ACCESS_MW_BIND;
        /// `IBV_ACCESS_ZERO_BASED`.
        const ZERO_BASED = IB_UVERBS_ACCESS_ZERO_BASED;
        /// `IBV_ACCESS_ON_DEMAND`.
        const ON_DEMAND = IB_UVERBS_ACCESS_ON_DEMAND;
        /// `IBV_ACCESS_HUGETLB`.
        const HUGETLB = IB_UVERBS_ACCESS_HUGETLB;
        /// `IBV_ACCESS_FLUSH_GLOBAL` (kernel 6.2+): peers may FLUSH to the
        /// global visibility point. 6.12's rxe reports it (with
        /// `FLUSH_PERSISTENT`) in the QP access the CM's `INIT_QP_ATTR`
        /// returns; kept, not dropped, when such attributes are applied.
        const FLUSH_GLOBAL = IB_UVERBS_ACCESS_FLUSH_GLOBAL;
        /// `IBV_ACCESS_FLUSH_PERSISTENT` (kernel 6.2+): peers may FLUSH to
        /// persistence.
        const FLUSH_PERSISTENT = IB_UVERBS_ACCESS_FLUSH_PERSISTENT;
        /// `IBV_ACCESS_RELAXED_ORDERING`: optional; kernels that don't support
        /// it ignore it.
        const RELAXED_ORDERING = IB_UVERBS_ACCESS_RELAXED_ORDERING;
    }
}

/// `ibv_reg_mr`'s checks of a caller's range: a length, an address, the
/// access flags.
#[inline]
fn check_reg(addr: *mut u8, len: usize, access: AccessFlags) -> Result<NonNull<u8>> {
    const VERB: &str = "ibv_reg_mr";
    if len == 0 {
        return Err(Error::os(VERB, Errno::EINVAL).with_message("a memory region cannot have length 0"));
    }
    check_access(VERB, access)?;
    NonNull::new(addr).ok_or_else(|| Error::os(VERB, Errno::EFAULT).with_message("cannot register the null address"))
}

/// Checks what the kernel would refuse with a bare `EINVAL` (the test
/// inline, its error out of line).
#[inline]
fn check_access(verb: &'static str, access: AccessFlags) -> Result<()> {
    if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(access_error(verb, access));
    }
    Ok(())
}

#[cold]
fn access_error(verb: &'static str, access: AccessFlags) -> Error {
    Error::os(verb, Errno::EINVAL)
        .with_message(format!("{access:?} needs LOCAL_WRITE too (remote write and atomics imply local write)"))
}

/// Turns a REG_MR errno into a sentence about its usual cause.
fn reg_error(verb: &'static str, e: Errno, addr: u64, len: usize) -> Error {
    let err = Error::os(verb, e);
    match e {
        Errno::ENOMEM | Errno::EPERM | Errno::EAGAIN => match memlock_limit() {
            Some(limit) => err.with_message(format!(
                "cannot pin {len} bytes: RLIMIT_MEMLOCK is {limit} bytes (raise it with `ulimit -l`, \
                 in limits.conf, or run with CAP_IPC_LOCK)"
            )),
            None => err.with_message(format!("the kernel could not pin {len} bytes at {addr:#x}")),
        },
        Errno::EFAULT => err.with_message(format!(
            "[{addr:#x}, {:#x}) is not mapped in this process (or not accessible as asked)",
            addr.wrapping_add(len as u64)
        )),
        _ => err,
    }
}

/// A registered memory region. Dropping it deregisters it, then frees the
/// memory if rverbs allocated it.
///
/// The device may write the memory at any time, so rverbs never hands out a
/// `&[u8]`/`&mut [u8]` over it: use [`read_at`](Self::read_at) and
/// [`write_at`](Self::write_at), or the raw pointer.
///
/// # Sharing between threads
/// A region is `Send` and `Sync`, and `read_at`/`write_at` take `&self`, so
/// it can sit in an `Arc` shared by the thread that posts and others that
/// fill or read buffers. That is sound because the copies are *relaxed
/// atomics*, never plain `memcpy`: two threads copying into and out of the
/// same bytes at once get some interleaving of whole bytes (no data race,
/// no undefined behaviour), which is also how the model describes the
/// device writing while the CPU copies. Each byte is always accessed with the
/// same access size (the region's 8-aligned words as `AtomicU64`, up to 7
/// bytes at an unaligned start or end as `AtomicU8`; a copy that covers
/// part of a word merges into it with a compare-exchange), because Rust
/// forbids racing atomics of different sizes. On x86_64 the whole words
/// are ordinary 8-byte `mov`s: a 1 MiB copy runs at memory speed, like
/// `memcpy`; a 4 KiB `write_at` in cache takes a few hundred nanoseconds, a
/// few times a vectorised `memcpy`. Relaxed means no ordering: what makes
/// the device see bytes written before a post, and the CPU see bytes the
/// device wrote before a completion, is the Release/Acquire (or barrier)
/// pairing of the rings (docs/MEMORY_ORDERING.md), exactly as for memory
/// written by raw pointers.
/// Code that reaches the memory through [`as_ptr`](Self::as_ptr) while other
/// threads use `read_at`/`write_at` must follow the same rule (its own
/// business, in `unsafe` code).
///
/// # fork
/// Memory rverbs allocates (`alloc_mr`) is `MADV_DONTFORK`: a child process
/// does not get it, so a write by the parent after `fork()` never moves a
/// page away from the one the device was given (kernels before 5.13 did
/// that). A forked child must not use the parent's regions (as with
/// libibverbs); dropping them there is harmless: the kernel object is left
/// alone and the parent's memory is not unmapped.
///
/// ```no_run
/// use rverbs::AccessFlags;
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)?;
/// mr.write_at(0, b"hello")?;
/// println!("lkey {:#x} rkey {:#x} at {:#x}", mr.lkey(), mr.rkey(), mr.addr());
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct MemoryRegion {
    pd: ProtectionDomain,
    handle: u32,
    lkey: u32,
    rkey: u32,
    mem: SharedBytes,
    access: AccessFlags,
    live: bool,
    // Dropped after the deregistration in `Drop` (fields drop after `drop()`).
    owned: Option<MmapRaw>,
}

// `Send + Sync` come from the fields: the memory is reached only through
// `SharedBytes`, whose accesses are atomics (see the type's docs).
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<MemoryRegion>();
};

/// The system page size in bytes (`sysconf(_SC_PAGESIZE)`, libc's
/// `getpagesize()`; 4096 if it cannot be read): the unit
/// [`ProtectionDomain::alloc_mr`] rounds up to.
pub fn page_size() -> usize {
    rverbs_providers::sys::event::page_size()
}

impl ProtectionDomain {
    /// Allocates `len` bytes of zeroed, page-aligned memory owned by the new
    /// MR and registers it (`IB_USER_VERBS_CMD_REG_MR`, `ibv_reg_mr`).
    pub fn alloc_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        const VERB: &str = "ibv_reg_mr";
        if len == 0 {
            return Err(Error::os(VERB, Errno::EINVAL).with_message("a memory region cannot have length 0"));
        }
        check_access(VERB, access)?;
        let map_len = mapping_len(len, page_size())?;
        let map = anon_pages(map_len).map_err(|e| {
            Error::os(VERB, Errno::from_raw(e.raw_os_error().unwrap_or(12)))
                .with_message(format!("cannot allocate {len} bytes for the region"))
        })?;
        // ibv_fork_init's rule for memory the device writes: a forked child
        // must not share these pages, or a write by the parent after fork
        // would copy-on-write its page away from the one the kernel pinned
        // (kernels before 5.13; later ones copy pinned pages for the child
        // at fork instead, which DONTFORK also saves). Fresh mapping of our
        // own, so the advice touches nothing else.
        map.advise(Advice::DontFork).map_err(|e| {
            Error::os(VERB, Errno::from_raw(e.raw_os_error().unwrap_or(22)))
                .with_message("madvise(MADV_DONTFORK) of the region's memory failed")
        })?;
        let ptr = NonNull::new(map.as_mut_ptr()).ok_or_else(|| Error::os(VERB, Errno::ENOMEM))?;
        // SAFETY: `ptr..ptr+len` is our own fresh mapping, kept alive in `owned`.
        unsafe { self.register(ptr, len, access, Some(map)) }
    }

    /// Registers caller memory (`IB_USER_VERBS_CMD_REG_MR`, `ibv_reg_mr`).
    ///
    /// Unlike [`alloc_mr`](Self::alloc_mr) this does not `madvise` the
    /// memory `MADV_DONTFORK` (libibverbs does after `ibv_fork_init`): the
    /// advice covers whole pages, so it would also hide the neighbours of
    /// the buffer on its first and last page (other heap objects, the
    /// allocator's own data) from a forked child, and undoing it at
    /// deregistration needs a process-wide count of overlapping ranges.
    /// Kernels since 5.13 keep pinned pages with the parent across fork
    /// (`rdma sys show` says `copy-on-fork on`), so nothing is needed there.
    /// On 5.10 to 5.12 a program that forks while such a region exists and
    /// then writes to it must `madvise(MADV_DONTFORK)` the pages itself, or
    /// use `alloc_mr`.
    ///
    /// # Safety
    /// `addr..addr+len` must be readable and writable memory of this
    /// process that stays mapped and is not freed or remapped until the
    /// returned region is dropped (the kernel pins the pages it finds now).
    /// While the region exists the device may read it (local reads, and
    /// peers when `REMOTE_READ`) and write it (when
    /// `LOCAL_WRITE`/`REMOTE_WRITE`/`REMOTE_ATOMIC`) at any time work
    /// requests or peers say so, and [`MemoryRegion::write_at`] and
    /// [`read_at`](MemoryRegion::read_at) (safe, from any thread holding the
    /// region) copy into and out of any of it with atomics (see
    /// [`MemoryRegion`]): the caller must not hold Rust references to the
    /// memory, nor access it other than through the region (or raw pointers
    /// following the same rule), while the region exists. Through two regions
    /// over overlapping memory, do not write through one while the other
    /// reads or writes an 8-aligned word that holds the start or the end of
    /// exactly one of them (the two would access it with different sizes).
    #[doc(alias = "ibv_reg_mr")]
    pub unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        let ptr = check_reg(addr, len, access)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.register(ptr, len, access, None) }
    }

    /// [`reg_mr`](Self::reg_mr)'s checks and kernel command, returning the
    /// kernel's handle and keys only: for the C library (`c_support`),
    /// whose caller owns the memory and whose `ibv_mr` holds the rest;
    /// `c_support::dereg_mr_handle` deregisters it. Not for Rust programs.
    ///
    /// # Safety
    /// As [`reg_mr`](Self::reg_mr), until the deregistration succeeds.
    ///
    /// # Errors
    /// As [`reg_mr`](Self::reg_mr).
    #[doc(hidden)]
    #[doc(alias = "ibv_reg_mr")]
    pub unsafe fn reg_mr_keys(&self, addr: *mut u8, len: usize, access: AccessFlags) -> Result<cmd::MrKeys> {
        let ptr = check_reg(addr, len, access)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.register_keys(ptr, len, access) }
    }

    /// Deregisters the MR `handle` of this PD (`IB_USER_VERBS_CMD_DEREG_MR`):
    /// [`reg_mr_keys`](Self::reg_mr_keys)' counterpart. On error the MR is as it was.
    pub(crate) fn dereg_handle(&self, handle: u32) -> Result<()> {
        cmd::dereg_mr(self.context().fd(), handle)?;
        debug!(handle, "MR deregistered");
        Ok(())
    }

    /// # Safety
    /// `ptr..ptr+len` stays valid for the region's life (owned or by contract).
    unsafe fn register(
        &self,
        ptr: NonNull<u8>,
        len: usize,
        access: AccessFlags,
        owned: Option<MmapRaw>,
    ) -> Result<MemoryRegion> {
        // SAFETY: forwarded from this function's contract.
        let keys = unsafe { self.register_keys(ptr, len, access) }?;
        Ok(MemoryRegion {
            pd: self.clone(),
            handle: keys.handle,
            lkey: keys.lkey,
            rkey: keys.rkey,
            // SAFETY: `ptr..ptr+len` stays valid for the region's life
            // (this function's contract), and while the region exists it is
            // reached only by the device and through this view (`reg_mr`'s
            // contract; owned memory is never handed out otherwise).
            mem: unsafe { SharedBytes::new(ptr, len) },
            access,
            live: true,
            owned,
        })
    }

    /// The kernel's registration (`IB_USER_VERBS_CMD_REG_MR`).
    ///
    /// # Safety
    /// `ptr..ptr+len` stays valid while the kernel MR exists.
    #[inline(always)]
    unsafe fn register_keys(&self, ptr: NonNull<u8>, len: usize, access: AccessFlags) -> Result<cmd::MrKeys> {
        const VERB: &str = "ibv_reg_mr";
        let _span = verb_span!("ibv_reg_mr", len, access = access.bits());
        let addr = ptr.as_ptr() as u64;
        let udata = self.context().provider().map_or(0, |p| p.reg_mr_udata_len());
        // SAFETY: the range stays valid while the kernel MR exists (this
        // function's contract), and nothing here makes references to it.
        let keys =
            unsafe { cmd::reg_mr(self.context().fd(), self.handle(), addr, len as u64, addr, access.bits(), udata) }
                .map_err(|e| reg_error(VERB, e, addr, len))?;
        debug!(handle = keys.handle, lkey = keys.lkey, rkey = keys.rkey, "MR registered");
        Ok(keys)
    }

    /// Changes the access flags of the MR `handle` of this PD in place
    /// (`IB_USER_VERBS_CMD_REREG_MR`, `IBV_REREG_MR_CHANGE_ACCESS`): its new
    /// keys.
    pub(crate) fn rereg_access_keys(&self, handle: u32, access: AccessFlags) -> Result<cmd::MrKeys> {
        const VERB: &str = "ibv_rereg_mr";
        check_access(VERB, access)?;
        // SAFETY: an access change only (`IBV_REREG_MR_CHANGE_ACCESS`): the
        // range stays the region's, whose memory is valid for its life.
        unsafe { cmd::rereg_mr(self.context().fd(), handle, 4, 0, 0, 0, 0, access.bits()) }
            .map_err(|e| Error::os(VERB, e))
    }
}

impl MemoryRegion {
    /// The PD it is registered in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// Local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// Remote key, for peers' RDMA and atomic operations.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Start address (also the IO virtual address peers use).
    pub fn addr(&self) -> u64 {
        self.mem.as_ptr() as u64
    }
    /// Raw pointer to the start.
    pub fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }
    /// Never true: regions have a length.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The access flags it was registered with.
    pub fn access(&self) -> AccessFlags {
        self.access
    }

    fn check_range(&self, verb: &'static str, offset: usize, n: usize) -> Result<()> {
        check_range(verb, self.len(), offset, n)
    }

    /// A scatter/gather entry for `len` bytes at `offset` of this region.
    ///
    /// # Errors
    /// `ERANGE` ([`ErrorKind::Check`](crate::ErrorKind::Check)) when the range is outside the region.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge<'_>> {
        self.check_range("MemoryRegion::sge", offset, len as usize)?;
        Ok(Sge::borrowing(self, self.addr() + offset as u64, len, self.lkey))
    }

    /// The whole region as one scatter/gather entry.
    ///
    /// # Errors
    /// `EINVAL` when the region is 4 GiB or larger: an SGE's length is 32
    /// bits. Cover it with several [`sge`](Self::sge)s instead.
    pub fn sge_all(&self) -> Result<Sge<'_>> {
        let s = whole_sge(self.addr(), self.len(), self.lkey)?;
        Ok(Sge::borrowing(self, s.addr, s.length, s.lkey))
    }

    /// The remote address of byte `offset` of this region, for a peer's (or
    /// a loopback) RDMA READ/WRITE or atomic. The length of the operation
    /// is the device's to check against the key.
    ///
    /// # Errors
    /// `ERANGE` ([`ErrorKind::Check`](crate::ErrorKind::Check)) when `offset` is past the end of the region.
    pub fn remote(&self, offset: usize) -> Result<RemoteAddr> {
        self.check_range("MemoryRegion::remote", offset, 0)?;
        Ok(RemoteAddr { addr: self.addr() + offset as u64, rkey: self.rkey })
    }

    /// Copies `data` into the region at `offset`, with relaxed atomic stores
    /// (see [Sharing between threads](Self#sharing-between-threads)): safe
    /// while other threads copy into or out of the same bytes and while the
    /// device writes them; overlapping writers leave each byte as one of
    /// them wrote it.
    ///
    /// # Errors
    /// `ERANGE` ([`ErrorKind::Check`](crate::ErrorKind::Check)) when the range is outside the region
    /// (nothing is written).
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_range("MemoryRegion::write_at", offset, data.len())?;
        let done = self.mem.write(offset, data);
        debug_assert!(done);
        Ok(())
    }

    /// Copies bytes out of the region at `offset` into `out`, with relaxed
    /// atomic loads (see [`write_at`](Self::write_at)).
    ///
    /// # Errors
    /// `ERANGE` ([`ErrorKind::Check`](crate::ErrorKind::Check)) when the range is outside the region.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range("MemoryRegion::read_at", offset, out.len())?;
        let done = self.mem.read(offset, out);
        debug_assert!(done);
        Ok(())
    }

    /// Asks the kernel for the keys and length (`UVERBS_METHOD_QUERY_MR`, 5.9+).
    pub fn query(&self) -> Result<cmd::MrQuery> {
        cmd::query_mr(self.pd.context().fd(), self.handle)
    }

    /// Changes the access flags in place (`IB_USER_VERBS_CMD_REREG_MR` with
    /// `IBV_REREG_MR_CHANGE_ACCESS`, `ibv_rereg_mr`). Keys may change.
    #[doc(alias = "ibv_rereg_mr")]
    pub fn rereg_access(&mut self, access: AccessFlags) -> Result<()> {
        let keys = self.pd.rereg_access_keys(self.handle, access)?;
        self.lkey = keys.lkey;
        self.rkey = keys.rkey;
        self.access = access;
        Ok(())
    }

    /// The kernel dereg, once; if the kernel refuses, the MR stays live
    /// (a later call tries again).
    pub(crate) fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let fd = self.pd.context().fd();
        cmd::dereg_mr(fd, self.handle).inspect_err(|_| self.live = true)?;
        if fd.in_forked_child() {
            // `dereg_mr` left the parent's MR alone. Owned pages are
            // MADV_DONTFORK, so this process never had them: unmapping the
            // range could only hit something this process mapped there
            // since the fork.
            std::mem::forget(self.owned.take());
            return Ok(());
        }
        debug!(handle = self.handle, "MR deregistered");
        Ok(())
    }

    /// Deregisters now, reporting the kernel's answer (`ibv_dereg_mr`).
    #[doc(alias = "ibv_dereg_mr")]
    pub fn dereg(mut self) -> Result<()> {
        self.destroy()
    }
}

impl Drop for MemoryRegion {
    /// Inlined into the drop glue: after an explicit dereg it is one load
    /// and a branch, no call.
    #[inline]
    fn drop(&mut self) {
        if self.live {
            self.destroy_on_drop();
        }
    }
}

impl MemoryRegion {
    /// [`Drop`]'s dereg of an MR still live.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            // The kernel still maps the pages: leak our allocation rather
            // than free memory the device may still write.
            tracing::warn!(handle = self.handle, error = %e, "MR dereg failed; leaking its memory");
            std::mem::forget(self.owned.take());
        }
    }
}

/// `ERANGE` unless `offset..offset+n` lies inside a region of `len` bytes:
/// rverbs' own check ([`ErrorKind::Check`](crate::ErrorKind::Check)), the
/// same errno as [`RemoteMemory::at`](crate::RemoteMemory::at).
fn check_range(verb: &'static str, len: usize, offset: usize, n: usize) -> Result<()> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(()),
        _ => Err(Error::check(verb, Errno::ERANGE)
            .with_message(format!("range {offset}+{n} is outside the {len}-byte region"))),
    }
}

/// The length of the mapping `alloc_mr` makes for `len` bytes: whole pages.
fn mapping_len(len: usize, page: usize) -> Result<usize> {
    len.checked_next_multiple_of(page).ok_or_else(|| {
        Error::check("ibv_reg_mr", Errno::ENOMEM)
            .with_message(format!("a region of {len} bytes cannot be rounded up to whole {page}-byte pages"))
    })
}

/// One SGE over `len` bytes at `addr`, if its 32-bit length can say so.
fn whole_sge(addr: u64, len: usize, lkey: u32) -> Result<Sge<'static>> {
    let length = u32::try_from(len).map_err(|_| {
        Error::check("MemoryRegion::sge_all", Errno::EINVAL).with_message(format!(
            "the region has {len} bytes, more than one SGE can carry ({} bytes): use several `sge(offset, len)`",
            u32::MAX
        ))
    })?;
    Ok(Sge::new(addr, length, lkey))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        let p = super::page_size();
        assert!(p >= 4096 && p.is_power_of_two(), "{p}");
    }

    #[test]
    fn sge_all_of_4_gib_or_more_is_an_error_not_a_truncation() {
        let max = u32::MAX as usize;
        assert_eq!(whole_sge(0x1000, max, 7).unwrap().length, u32::MAX);
        for len in [max + 1, 1 << 33, usize::MAX] {
            let e = whole_sge(0x1000, len, 7).unwrap_err();
            assert_eq!(e.errno(), Some(Errno::EINVAL));
            assert!(e.to_string().contains("sge(offset, len)"), "{e}");
        }
    }

    #[test]
    fn rounding_a_huge_length_up_to_pages_is_an_error() {
        assert_eq!(mapping_len(1, 4096).unwrap(), 4096);
        assert_eq!(mapping_len(8192, 4096).unwrap(), 8192);
        let e = mapping_len(usize::MAX - 10, 4096).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::ENOMEM));
        assert!(e.to_string().contains("whole 4096-byte pages"), "{e}");
    }

    #[test]
    fn ranges_are_checked_without_overflow() {
        assert!(check_range("t", 100, 100, 0).is_ok(), "the empty range at the end");
        assert!(check_range("t", 100, 101, 0).is_err());
        assert!(check_range("t", 100, 50, 51).is_err());
        assert!(check_range("t", 100, usize::MAX, 2).is_err());
        // rverbs' own refusal, not the kernel's, with RemoteMemory::at's errno.
        let e = check_range("MemoryRegion::write_at", 100, 90, 20).unwrap_err();
        assert_eq!((e.kind(), e.errno()), (&crate::ErrorKind::Check, Some(Errno::ERANGE)));
        assert!(e.to_string().contains("range 90+20 is outside the 100-byte region"), "{e}");
    }
}
