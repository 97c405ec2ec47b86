//! Reading the kernel's event fds (completion channels, the async event fd)
//! and the small process-level queries the control path needs.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Reads one event descriptor into `buf` (the kernel returns exactly one per
/// `read()`). `Ok(None)` when the fd is non-blocking and empty (`EAGAIN`).
pub fn read_event(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
    loop {
        match nix::unistd::read(fd.as_raw_fd(), buf) {
            Ok(n) => return Ok(Some(n)),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Waits until `fd` is readable or `timeout_ms` passes (`-1`: forever).
/// Returns whether it became readable.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> Result<bool, Errno> {
    let timeout = PollTimeout::try_from(timeout_ms).unwrap_or(PollTimeout::NONE);
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(n) => return Ok(n > 0),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> Result<(), Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    let new = if on { flags | OFlag::O_NONBLOCK } else { flags - OFlag::O_NONBLOCK };
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(new))?;
    Ok(())
}

/// The soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited), to explain
/// pinning failures.
pub fn memlock_limit() -> Option<u64> {
    let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(soft)
}

/// Page-aligned, zeroed anonymous memory for buffers rverbs owns (MRs it
/// allocates). Returned raw: the NIC may write it, so no slice is ever made.
pub fn anon_pages(len: usize) -> std::io::Result<memmap2::MmapRaw> {
    memmap2::MmapOptions::new().len(len).map_anon().map(memmap2::MmapRaw::from)
}

/// The system page size.
pub fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |v| v as usize)
}
