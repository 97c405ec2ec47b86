//! Reading the kernel's event fds (completion channels, the async event fd)
//! and the small process-level queries the control path needs.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rverbs_uapi::ib_user_verbs::ib_uverbs_comp_event_desc;

/// What a completion channel's `read()` returns: one `ib_uverbs_comp_event_desc`.
const COMP_EVENT_LEN: usize = size_of::<ib_uverbs_comp_event_desc>();
const _: () = assert!(COMP_EVENT_LEN == 8);

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

/// Reads one completion event from a non-blocking completion channel fd
/// (`ibv_get_cq_event`'s `read()`): the `cq_handle` of its
/// `ib_uverbs_comp_event_desc`, i.e. the CQ's `user_handle`. `Ok(None)`
/// when no event is queued (`EAGAIN`); `EIO` for a short read. One
/// syscall (the raw one: `sys/raw.rs`), nothing else: no allocation, no lock.
#[inline]
pub fn read_comp_event(fd: BorrowedFd<'_>) -> Result<Option<u64>, Errno> {
    let mut handle = 0u64;
    match read_desc(fd.as_raw_fd(), &mut handle) {
        Read::Event => Ok(Some(handle)),
        Read::Empty => Ok(None),
        Read::Failed(n) => Err(super::syscall_error(n)),
    }
}

/// What one `read()` of a completion channel gave.
enum Read {
    /// The descriptor is in the buffer.
    Event,
    /// Nothing queued (`EAGAIN`).
    Empty,
    /// The raw result: `-errno`, or a short read's length.
    Failed(isize),
}

/// One `read()` of an event descriptor into `handle`, again on `EINTR`.
#[inline(always)]
fn read_desc(fd: nix::libc::c_int, handle: &mut u64) -> Read {
    loop {
        // SAFETY: `handle` is 8 writable bytes, and the kernel writes at
        // most the 8 asked for.
        let n = unsafe { super::raw::read(fd, std::ptr::from_mut(handle).cast(), COMP_EVENT_LEN) };
        if n == COMP_EVENT_LEN as isize {
            return Read::Event;
        }
        if n == -(nix::libc::EAGAIN as isize) {
            return Read::Empty;
        }
        if n != -(nix::libc::EINTR as isize) {
            return Read::Failed(n);
        }
    }
}

/// Waits up to `timeout` (`None`: no limit) for a completion event on a
/// non-blocking completion channel fd and reads it (`ibv_get_cq_event`):
/// the event's `cq_handle`, or `None` when the time is up.
///
/// `slept` says how the last wait went and is updated: after one that
/// found its event queued, this one starts with a `read()` (one syscall
/// when the event is there); after one that had to sleep, with `ppoll()`
/// and then the `read()` (two syscalls, where a `read()` that finds
/// nothing first would make three). The deadline is kept by the kernel
/// (the raw `ppoll` writes the time left back): no clock is read. Losing
/// an event to another reader waits again for what is left.
///
/// Both syscalls are the raw ones (`sys/raw.rs`): no libc wrapper, no
/// `errno`. This is once per completion event in event mode.
#[inline]
pub fn wait_comp_event(
    fd: BorrowedFd<'_>,
    slept: &AtomicBool,
    timeout: Option<Duration>,
) -> Result<Option<u64>, Errno> {
    let raw = fd.as_raw_fd();
    let mut handle = 0u64;
    let read_first = !slept.load(Ordering::Relaxed);
    if read_first {
        match read_desc(raw, &mut handle) {
            Read::Event => return Ok(Some(handle)),
            Read::Empty => slept.store(true, Ordering::Relaxed),
            Read::Failed(n) => return Err(super::syscall_error(n)),
        }
    }
    let mut left = Remaining::new(timeout);
    let full = left;
    let mut pfd = nix::libc::pollfd { fd: raw, events: nix::libc::POLLIN, revents: 0 };
    loop {
        let ts = left.0.as_mut().map_or(std::ptr::null_mut(), |t| t as *mut nix::libc::timespec);
        // SAFETY: one pollfd of ours; `ts` is null or our timespec, which
        // the kernel reads and overwrites with the time left.
        let rc = unsafe { super::raw::ppoll(&mut pfd, 1, ts) };
        if rc == 0 {
            return Ok(None);
        }
        if rc < 0 {
            if rc == -(nix::libc::EINTR as isize) {
                continue;
            }
            return Err(super::syscall_error(rc));
        }
        match read_desc(raw, &mut handle) {
            Read::Event => {
                if !read_first && left.at_once_from(&full) {
                    // Readable at once: the next wait reads first.
                    slept.store(false, Ordering::Relaxed);
                }
                return Ok(Some(handle));
            }
            Read::Empty => {} // another reader took it: wait again
            Read::Failed(n) => return Err(super::syscall_error(n)),
        }
    }
}

/// A timeout that counts down across waits: [`wait_readable_for`] leaves
/// in it what is left, so a caller that waits again (it lost an event to
/// another reader) never starts over, and no clock is read.
#[derive(Clone, Copy, Debug)]
pub struct Remaining(Option<nix::libc::timespec>);

impl Remaining {
    /// `None`: no limit.
    #[inline]
    pub fn new(timeout: Option<std::time::Duration>) -> Remaining {
        Remaining(timeout.map(|t| nix::libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as nix::libc::time_t,
            tv_nsec: t.subsec_nanos().into(),
        }))
    }

    /// True when at most a millisecond went from `full` to this: the wait
    /// returned at once (the kernel takes a few microseconds off even then).
    /// False without a limit (nothing to tell by).
    #[inline]
    pub fn at_once_from(&self, full: &Remaining) -> bool {
        match (self.0, full.0) {
            (Some(a), Some(b)) => {
                let secs = b.tv_sec.wrapping_sub(a.tv_sec);
                secs.wrapping_mul(1_000_000_000).wrapping_add(b.tv_nsec.wrapping_sub(a.tv_nsec)) <= 1_000_000
            }
            _ => false,
        }
    }

    /// Time left (`None`: no limit).
    pub fn left(&self) -> Option<std::time::Duration> {
        self.0.map(|t| std::time::Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32))
    }
}

/// Waits until `fd` is readable or the time in `left` is up; returns
/// whether it became readable, and leaves the time still to go in `left`.
/// The raw `ppoll` syscall, because the kernel writes the remaining time
/// back into its timeout (glibc's `ppoll` hides that): a deadline without
/// a clock read.
#[inline]
pub fn wait_readable_for(fd: BorrowedFd<'_>, left: &mut Remaining) -> Result<bool, Errno> {
    loop {
        let mut pfd = nix::libc::pollfd { fd: fd.as_raw_fd(), events: nix::libc::POLLIN, revents: 0 };
        let ts = left.0.as_mut().map_or(std::ptr::null_mut(), |t| t as *mut nix::libc::timespec);
        // SAFETY: one valid pollfd; `ts` is null or our timespec, which the
        // kernel reads and overwrites with the time left; no signal mask.
        let rc = unsafe { super::raw::ppoll(&mut pfd, 1, ts) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        if rc != -(nix::libc::EINTR as isize) {
            return Err(super::syscall_error(rc));
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

/// Makes an event fd the kernel just created non-blocking: one `F_SETFL`,
/// as such an fd has no other status flag to keep (the uverbs event files
/// are opened `O_RDONLY` and nothing else).
pub fn make_nonblocking(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok(())
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

/// The name of network interface `ifindex` (`if_indextoname`), `None`
/// when there is none.
pub fn interface_name(ifindex: u32) -> Option<String> {
    let mut buf = [0u8; nix::libc::IF_NAMESIZE];
    // SAFETY: `buf` is IF_NAMESIZE writable bytes, what if_indextoname fills
    // (with its NUL); it returns null on failure and writes nothing then.
    let p = unsafe { nix::libc::if_indextoname(ifindex, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The system page size.
pub fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |v| v as usize)
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, OwnedFd};
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use super::*;

    /// A non-blocking pipe: its read end stands in for a completion channel
    /// (one 8-byte record per event), its write end for the kernel.
    fn channel() -> (OwnedFd, OwnedFd) {
        let (r, w) = nix::unistd::pipe().unwrap();
        make_nonblocking(r.as_fd()).unwrap();
        let flags = fcntl(r.as_raw_fd(), FcntlArg::F_GETFL).unwrap();
        assert_eq!(OFlag::from_bits_retain(flags) & OFlag::O_ACCMODE, OFlag::O_RDONLY);
        assert!(OFlag::from_bits_retain(flags).contains(OFlag::O_NONBLOCK));
        (r, w)
    }

    fn post(w: &OwnedFd, handle: u64) {
        assert_eq!(nix::unistd::write(w, &handle.to_ne_bytes()), Ok(8));
    }

    #[test]
    fn reads_events_and_times_out() {
        let (r, w) = channel();
        let slept = AtomicBool::new(false);
        // Queued: read at once, nothing learned.
        post(&w, 0x11);
        assert_eq!(wait_comp_event(r.as_fd(), &slept, Some(Duration::from_secs(5))), Ok(Some(0x11)));
        assert!(!slept.load(Ordering::Relaxed));
        // Nothing queued: the wait ends after the timeout (never earlier),
        // and the next wait polls first.
        let t = Instant::now();
        assert_eq!(wait_comp_event(r.as_fd(), &slept, Some(Duration::from_millis(50))), Ok(None));
        assert!(t.elapsed() >= Duration::from_millis(50), "{:?}", t.elapsed());
        assert!(slept.load(Ordering::Relaxed));
        // Polling first finds a queued event at once: back to reading first.
        post(&w, 0x22);
        assert_eq!(wait_comp_event(r.as_fd(), &slept, Some(Duration::from_secs(5))), Ok(Some(0x22)));
        assert!(!slept.load(Ordering::Relaxed));
        // No limit, and an event that comes while it sleeps.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            post(&w, 0x33);
            w
        });
        assert_eq!(wait_comp_event(r.as_fd(), &slept, None), Ok(Some(0x33)));
        let w = writer.join().unwrap();
        // A short record is an error, not an event.
        assert_eq!(nix::unistd::write(&w, &[1, 2, 3]), Ok(3));
        assert_eq!(wait_comp_event(r.as_fd(), &slept, Some(Duration::from_secs(5))), Err(Errno::EIO));
        assert_eq!(read_comp_event(r.as_fd()), Ok(None));
    }

    #[test]
    fn names_interfaces() {
        // The loopback interface exists everywhere (index 1 on Linux);
        // index 0 is never an interface.
        assert_eq!(interface_name(1).as_deref(), Some("lo"));
        assert_eq!(interface_name(0), None);
    }

    #[test]
    fn remaining_time_counts_down() {
        let (r, _w) = channel();
        let mut left = Remaining::new(Some(Duration::from_millis(40)));
        let full = left;
        assert!(left.at_once_from(&full));
        assert_eq!(wait_readable_for(r.as_fd(), &mut left), Ok(false));
        // The kernel wrote back what was left: nothing.
        assert!(!left.at_once_from(&full));
        assert_eq!(left.left(), Some(Duration::ZERO));
        assert!(!Remaining::new(None).at_once_from(&Remaining::new(None)));
        assert_eq!(Remaining::new(None).left(), None);
    }
}
