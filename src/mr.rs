//! Memory regions (`ibv_mr`): memory registered with the device, with the
//! keys work requests and peers use to reach it.
//!
//! This module may use `unsafe`: a region is memory the device reads and
//! writes behind Rust's back, and registering caller memory is an `unsafe`
//! contract by nature. Each block says why it is sound.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use bitflags::bitflags;
use memmap2::MmapRaw;
use rverbs_providers::cmd::mr as cmd;
use rverbs_providers::sys::event::{anon_pages, memlock_limit};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_ioctl_verbs::*;
use tracing::debug;

use crate::{ProtectionDomain, RemoteAddr, Sge};

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
        /// `IBV_ACCESS_RELAXED_ORDERING`: optional; kernels that don't support
        /// it ignore it.
        const RELAXED_ORDERING = IB_UVERBS_ACCESS_RELAXED_ORDERING;
    }
}

/// Checks what the kernel would refuse with a bare `EINVAL`.
fn check_access(verb: &'static str, access: AccessFlags) -> Result<()> {
    if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(Error::os(verb, Errno::EINVAL)
            .with_message(format!("{access:?} needs LOCAL_WRITE too (remote write and atomics imply local write)")));
    }
    Ok(())
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
    addr: NonNull<u8>,
    len: usize,
    access: AccessFlags,
    live: bool,
    // Dropped after the deregistration in `Drop` (fields drop after `drop()`).
    owned: Option<MmapRaw>,
}

// SAFETY: the region is plain memory plus a kernel handle; `read_at` and
// `write_at` copy through raw pointers and the user's concurrent use of the
// memory with the device is governed by the work-request discipline, as in C.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; `&self` methods only copy through raw pointers or query.
unsafe impl Sync for MemoryRegion {}

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
        let map = anon_pages(len.next_multiple_of(page_size())).map_err(|e| {
            Error::os(VERB, Errno::from_raw(e.raw_os_error().unwrap_or(12)))
                .with_message(format!("cannot allocate {len} bytes for the region"))
        })?;
        let ptr = NonNull::new(map.as_mut_ptr()).ok_or_else(|| Error::os(VERB, Errno::ENOMEM))?;
        // SAFETY: `ptr..ptr+len` is our own fresh mapping, kept alive in `owned`.
        unsafe { self.register(ptr, len, access, Some(map)) }
    }

    /// Registers caller memory (`IB_USER_VERBS_CMD_REG_MR`, `ibv_reg_mr`).
    ///
    /// # Safety
    /// `addr..addr+len` must be memory of this process that stays mapped and
    /// is not freed or remapped until the returned region is dropped (the
    /// kernel pins the pages it finds now). While the region exists the
    /// device may read it (local reads, and peers when `REMOTE_READ`) and
    /// write it (when `LOCAL_WRITE`/`REMOTE_WRITE`/`REMOTE_ATOMIC`) at any
    /// time work requests or peers say so: the caller must not hold Rust
    /// references to parts the device may write while it may write them.
    #[doc(alias = "ibv_reg_mr")]
    pub unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        const VERB: &str = "ibv_reg_mr";
        if len == 0 {
            return Err(Error::os(VERB, Errno::EINVAL).with_message("a memory region cannot have length 0"));
        }
        check_access(VERB, access)?;
        let ptr = NonNull::new(addr)
            .ok_or_else(|| Error::os(VERB, Errno::EFAULT).with_message("cannot register the null address"))?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.register(ptr, len, access, None) }
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
        const VERB: &str = "ibv_reg_mr";
        let _span = tracing::debug_span!("ibv_reg_mr", len, access = access.bits()).entered();
        let addr = ptr.as_ptr() as u64;
        // SAFETY: the range stays valid for the region's life (this
        // function's contract), and the region never makes references to it.
        let keys = unsafe { cmd::reg_mr(self.context().fd(), self.handle(), addr, len as u64, addr, access.bits()) }
            .map_err(|e| reg_error(VERB, e, addr, len))?;
        debug!(handle = keys.handle, lkey = keys.lkey, rkey = keys.rkey, "MR registered");
        Ok(MemoryRegion {
            pd: self.clone(),
            handle: keys.handle,
            lkey: keys.lkey,
            rkey: keys.rkey,
            addr: ptr,
            len,
            access,
            live: true,
            owned,
        })
    }
}

impl MemoryRegion {
    /// The PD it is registered in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
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
        self.addr.as_ptr() as u64
    }
    /// Raw pointer to the start.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never true: regions have a length.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The access flags it was registered with.
    pub fn access(&self) -> AccessFlags {
        self.access
    }

    fn check_range(&self, verb: &'static str, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::os(verb, Errno::EINVAL)
                .with_message(format!("range {offset}+{n} is outside the {}-byte region", self.len))),
        }
    }

    /// A scatter/gather entry for `len` bytes at `offset` of this region.
    ///
    /// # Errors
    /// `EINVAL` when the range is outside the region.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge<'_>> {
        self.check_range("MemoryRegion::sge", offset, len as usize)?;
        Ok(Sge::borrowing(self, self.addr() + offset as u64, len, self.lkey))
    }

    /// The whole region as one scatter/gather entry.
    pub fn sge_all(&self) -> Sge<'_> {
        Sge::borrowing(self, self.addr(), self.len as u32, self.lkey)
    }

    /// The remote address of byte `offset` of this region, for a peer's (or
    /// a loopback) RDMA READ/WRITE or atomic.
    pub fn remote(&self, offset: usize) -> RemoteAddr {
        RemoteAddr { addr: self.addr() + offset as u64, rkey: self.rkey }
    }

    /// Copies `data` into the region at `offset`.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_range("MemoryRegion::write_at", offset, data.len())?;
        // SAFETY: the range is inside the region (checked), which is valid
        // memory for the region's life; a raw copy makes no Rust reference
        // to memory the device may write.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.addr.as_ptr().add(offset), data.len()) };
        Ok(())
    }

    /// Copies bytes out of the region at `offset` into `out`.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range("MemoryRegion::read_at", offset, out.len())?;
        // SAFETY: as in `write_at`.
        unsafe { std::ptr::copy_nonoverlapping(self.addr.as_ptr().add(offset), out.as_mut_ptr(), out.len()) };
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
        const VERB: &str = "ibv_rereg_mr";
        check_access(VERB, access)?;
        // SAFETY: an access change only (`IBV_REREG_MR_CHANGE_ACCESS`): the
        // range stays the region's, whose memory is valid for its life.
        let keys = unsafe { cmd::rereg_mr(self.pd.context().fd(), self.handle, 4, 0, 0, 0, 0, access.bits()) }
            .map_err(|e| Error::os(VERB, e))?;
        self.lkey = keys.lkey;
        self.rkey = keys.rkey;
        self.access = access;
        Ok(())
    }

    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::dereg_mr(self.pd.context().fd(), self.handle)?;
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
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            // The kernel still maps the pages: leak our allocation rather
            // than free memory the device may still write.
            tracing::warn!(handle = self.handle, error = %e, "MR dereg failed; leaking its memory");
            std::mem::forget(self.owned.take());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn page_size_is_a_power_of_two() {
        let p = super::page_size();
        assert!(p >= 4096 && p.is_power_of_two(), "{p}");
    }
}
