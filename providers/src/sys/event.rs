//! Reading the kernel's event fds (completion channels, the async event fd)
//! and the small process-level queries the control path needs.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
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

/// Like [`read_event`], but a signal's `EINTR` is returned rather than
/// retried, as libibverbs' `ibv_get_async_event` (one `read()`) returns it.
pub fn read_event_once(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
    match nix::unistd::read(fd.as_raw_fd(), buf) {
        Ok(n) => Ok(Some(n)),
        Err(Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e),
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
/// Two syscalls, `ppoll()` and `read()`, whether the event was already
/// queued or not. (The wait used to start with a `read()` after a wait
/// that had found its event queued, one syscall then, three when it found
/// nothing. In a ping-pong client on a 6.12 guest 62 to 81% of the waits
/// found nothing, a read the guess chose hit hardly more often than one
/// made always (41% against 38%), and the misses cost more instructions
/// and syscalls than the hits saved.) The deadline is kept by the kernel
/// (the raw `ppoll` writes the time left back): no clock is read.
///
/// Both syscalls are the raw ones (`sys/raw.rs`): no libc wrapper, no
/// `errno`. This is once per completion event in event mode, inlined
/// where the event is taken: the `ppoll` that finds the fd readable and
/// the `read()` that gets the event are all of it, anything else (a
/// timeout, `EINTR`, an event another reader took, a failure) goes on in
/// `wait_comp_event_rest`, out of line.
#[inline(always)]
pub fn wait_comp_event(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> Result<Option<u64>, Errno> {
    let raw = fd.as_raw_fd();
    let mut left = Remaining::new(timeout);
    let mut pfd = nix::libc::pollfd { fd: raw, events: nix::libc::POLLIN, revents: 0 };
    let ts = left.0.as_mut().map_or(std::ptr::null_mut(), |t| t as *mut nix::libc::timespec);
    // SAFETY: one pollfd of ours; `ts` is null or our timespec, which the
    // kernel reads and overwrites with the time left.
    let rc = unsafe { super::raw::ppoll(&mut pfd, 1, ts) };
    if rc > 0 {
        let (n, handle) = super::raw::read_u64(raw);
        if n == COMP_EVENT_LEN as isize {
            return Ok(Some(handle));
        }
        return wait_comp_event_rest(fd, &mut left, Step::Read(n));
    }
    wait_comp_event_rest(fd, &mut left, Step::Polled(rc))
}

/// Where [`wait_comp_event_rest`] takes a wait up.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `ppoll` returned this (not a readable fd).
    Polled(isize),
    /// The `read()` after it returned this (not an event).
    Read(isize),
}

/// The rest of a [`wait_comp_event`] that did not get its event at the
/// first try, with the time still to go in `left`: a `ppoll` that timed
/// out is `None`; one interrupted (`EINTR`) waits again, as does a read
/// that found nothing (`EAGAIN`: another reader took the event); a read
/// interrupted reads again; a short read is `EIO`, another failure its
/// errno.
#[cold]
#[inline(never)]
fn wait_comp_event_rest(fd: BorrowedFd<'_>, left: &mut Remaining, mut step: Step) -> Result<Option<u64>, Errno> {
    const EAGAIN: isize = -(nix::libc::EAGAIN as isize);
    const EINTR: isize = -(nix::libc::EINTR as isize);
    let raw = fd.as_raw_fd();
    loop {
        step = match step {
            Step::Polled(0) => return Ok(None),
            Step::Polled(rc) if rc > 0 => Step::Read(EINTR), // readable: read (again)
            Step::Polled(EINTR) | Step::Read(EAGAIN) => {
                let mut pfd = nix::libc::pollfd { fd: raw, events: nix::libc::POLLIN, revents: 0 };
                let ts = left.0.as_mut().map_or(std::ptr::null_mut(), |t| t as *mut nix::libc::timespec);
                // SAFETY: one pollfd of ours; `ts` is null or our timespec,
                // which the kernel reads and overwrites with the time left.
                Step::Polled(unsafe { super::raw::ppoll(&mut pfd, 1, ts) })
            }
            Step::Read(EINTR) => {
                // Interrupted, or the fd readable: read.
                let (n, handle) = super::raw::read_u64(raw);
                if n == COMP_EVENT_LEN as isize {
                    return Ok(Some(handle));
                }
                Step::Read(n)
            }
            Step::Polled(rc) | Step::Read(rc) => return Err(super::syscall_error(rc)),
        };
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

/// Waits until `a` or `b` is readable (or failed: `POLLERR`, `POLLHUP`,
/// which a read then reports) or `timeout_ms` passes (`-1`: forever): one
/// `poll()` on both, retried on `EINTR`. Returns whether each is ready
/// (both `false`: the time passed). A program that waits on a completion
/// channel and a CM channel at once (`rverbs rping`) sleeps in one call.
pub fn wait_readable_either(a: BorrowedFd<'_>, b: BorrowedFd<'_>, timeout_ms: i32) -> Result<(bool, bool), Errno> {
    let timeout = PollTimeout::try_from(timeout_ms).unwrap_or(PollTimeout::NONE);
    loop {
        let mut fds = [PollFd::new(a, PollFlags::POLLIN), PollFd::new(b, PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(_) => {
                let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
                return Ok((ready(&fds[0]), ready(&fds[1])));
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One `read()` of a completion channel fd and nothing else, which is all
/// `ibv_get_cq_event` does: on a blocking fd ([`set_blocking`]) it sleeps
/// in the kernel until an event is queued, so a wait is one syscall, not
/// the `ppoll()` and `read()` of [`wait_comp_event`]. `Ok(None)` when the
/// fd is non-blocking and no event is queued (`EAGAIN`); `Err(EINTR)` when
/// a signal interrupted the sleep (see [`start_wait_interrupts`]), as
/// `read(2)` and `ibv_get_cq_event` report it. A short read is `EIO`.
#[inline(always)]
pub fn read_comp_event_once(fd: BorrowedFd<'_>) -> Result<Option<u64>, Errno> {
    let (n, handle) = super::raw::read_u64(fd.as_raw_fd());
    if n == COMP_EVENT_LEN as isize {
        return Ok(Some(handle));
    }
    read_once_failed(n)
}

/// [`read_comp_event_once`] without its event, out of line.
#[cold]
#[inline(never)]
fn read_once_failed(n: isize) -> Result<Option<u64>, Errno> {
    if n == -(nix::libc::EAGAIN as isize) {
        return Ok(None);
    }
    Err(super::syscall_error(n))
}

/// Makes an event fd blocking (`true`, libibverbs' default for a
/// completion channel) or non-blocking (`false`): `F_GETFL` and `F_SETFL`,
/// keeping the other status flags. The flag belongs to the open file, so
/// it holds for every reader of the fd.
pub fn set_blocking(fd: BorrowedFd<'_>, blocking: bool) -> Result<(), Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    let flags = if blocking { flags - OFlag::O_NONBLOCK } else { flags | OFlag::O_NONBLOCK };
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags))?;
    Ok(())
}

/// The handler of [`start_wait_interrupts`]' `SIGALRM`: it only has to
/// exist (a signal with a handler ends a blocked `read()` with `EINTR`).
extern "C" fn on_wait_alarm(_: nix::libc::c_int) {}

/// Makes `SIGALRM` come every `period` and end any blocked `read()` of the
/// process with `EINTR` (a handler that does nothing, installed without
/// `SA_RESTART`): a deadline for waits made with [`read_comp_event_once`]
/// on a blocking channel, at no cost per wait. One `rt_sigaction` and one
/// `setitimer(ITIMER_REAL)`; [`stop_wait_interrupts`] stops the timer.
///
/// Process-wide: for programs that own `SIGALRM` and whose other blocking
/// syscalls in that time retry on `EINTR` (the CLI's event loop).
pub fn start_wait_interrupts(period: Duration) -> Result<(), Errno> {
    // SAFETY: a zeroed `sigaction` is valid (empty mask, no flags); the
    // handler is an `extern "C" fn(c_int)` that touches nothing, so it is
    // async-signal-safe; the old action is not asked for.
    let rc = unsafe {
        let mut act: nix::libc::sigaction = core::mem::zeroed();
        act.sa_sigaction = on_wait_alarm as extern "C" fn(nix::libc::c_int) as usize;
        nix::libc::sigaction(nix::libc::SIGALRM, &act, core::ptr::null_mut())
    };
    Errno::result(rc)?;
    set_timer(period)
}

/// Stops the timer of [`start_wait_interrupts`] (one `setitimer`); the
/// handler stays, harmless without its signal.
pub fn stop_wait_interrupts() -> Result<(), Errno> {
    set_timer(Duration::ZERO)
}

/// `setitimer(ITIMER_REAL)` every `period` (zero: off).
fn set_timer(period: Duration) -> Result<(), Errno> {
    let tv = nix::libc::timeval {
        tv_sec: period.as_secs().min(i32::MAX as u64) as nix::libc::time_t,
        tv_usec: period.subsec_micros().into(),
    };
    let it = nix::libc::itimerval { it_interval: tv, it_value: tv };
    // SAFETY: `it` is a valid itimerval; the old value is not asked for.
    Errno::result(unsafe { nix::libc::setitimer(nix::libc::ITIMER_REAL, &it, core::ptr::null_mut()) })?;
    Ok(())
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
        // Queued: ppoll returns at once, the read gets it.
        post(&w, 0x12);
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::from_secs(5))), Ok(Some(0x12)));
        // Nothing queued: the wait ends after the timeout (never earlier).
        let t = Instant::now();
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::from_millis(50))), Ok(None));
        assert!(t.elapsed() >= Duration::from_millis(50), "{:?}", t.elapsed());
        // A zero limit with nothing queued: at once.
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::ZERO)), Ok(None));
        // No limit, and an event that comes while it sleeps.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            post(&w, 0x33);
            w
        });
        assert_eq!(wait_comp_event(r.as_fd(), None), Ok(Some(0x33)));
        let w = writer.join().unwrap();
        // A limit, and an event that comes while it sleeps.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            post(&w, 0x44);
            w
        });
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::from_secs(5))), Ok(Some(0x44)));
        let w = writer.join().unwrap();
        // A short record is an error, not an event: read at once, or after
        // a sleep.
        assert_eq!(nix::unistd::write(&w, &[1, 2, 3]), Ok(3));
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::from_secs(5))), Err(Errno::EIO));
        assert_eq!(read_comp_event(r.as_fd()), Ok(None));
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(nix::unistd::write(&w, &[1, 2, 3, 4]), Ok(4));
            w
        });
        assert_eq!(wait_comp_event(r.as_fd(), None), Err(Errno::EIO));
        let w = writer.join().unwrap();
        assert_eq!(read_comp_event(r.as_fd()), Ok(None));
        drop(w);
    }

    #[test]
    fn waits_go_on_from_where_the_first_try_left() {
        const EINTR: isize = -(nix::libc::EINTR as isize);
        const EAGAIN: isize = -(nix::libc::EAGAIN as isize);
        let (r, w) = channel();
        let forever = || Remaining::new(None);
        let mut soon = Remaining::new(Some(Duration::from_millis(20)));
        // ppoll interrupted: wait again (here the event is there by then).
        post(&w, 0x55);
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Polled(EINTR)), Ok(Some(0x55)));
        // ppoll timed out: no event, nothing read.
        post(&w, 0x56);
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Polled(0)), Ok(None));
        // The read interrupted: read again.
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Read(EINTR)), Ok(Some(0x56)));
        // The read found nothing (another reader took the event): wait
        // again, for what is left of the time.
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut soon, Step::Read(EAGAIN)), Ok(None));
        assert_eq!(soon.left(), Some(Duration::ZERO));
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            post(&w, 0x66);
            w
        });
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Read(EAGAIN)), Ok(Some(0x66)));
        let w = writer.join().unwrap();
        // Another failure is its errno, a short read EIO.
        let ebadf = -(nix::libc::EBADF as isize);
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Polled(ebadf)), Err(Errno::EBADF));
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Read(ebadf)), Err(Errno::EBADF));
        assert_eq!(wait_comp_event_rest(r.as_fd(), &mut forever(), Step::Read(3)), Err(Errno::EIO));
        // A closed peer: ppoll says readable (POLLHUP), the read gets 0
        // bytes: a short read, not a loop.
        drop(w);
        assert_eq!(wait_comp_event(r.as_fd(), Some(Duration::from_secs(5))), Err(Errno::EIO));
    }

    /// One read: an event when one is queued, `None` on an empty
    /// non-blocking fd; `set_blocking` flips the flag both ways.
    #[test]
    fn reads_once_and_switches_blocking() {
        let (r, w) = channel();
        assert_eq!(read_comp_event_once(r.as_fd()), Ok(None), "non-blocking and empty: EAGAIN");
        post(&w, 0x77);
        assert_eq!(read_comp_event_once(r.as_fd()), Ok(Some(0x77)));
        let nonblock = |fd: &OwnedFd| {
            OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL).unwrap()).contains(OFlag::O_NONBLOCK)
        };
        set_blocking(r.as_fd(), true).unwrap();
        assert!(!nonblock(&r));
        // Blocking: the read sleeps until the event comes.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            post(&w, 0x78);
            w
        });
        assert_eq!(read_comp_event_once(r.as_fd()), Ok(Some(0x78)));
        let w = writer.join().unwrap();
        set_blocking(r.as_fd(), false).unwrap();
        assert!(nonblock(&r));
        // A short read is EIO.
        assert_eq!(nix::unistd::write(&w, &[1u8, 2, 3]), Ok(3));
        assert_eq!(read_comp_event_once(r.as_fd()), Err(Errno::EIO));
    }

    /// The wait alarm ends a blocked read with `EINTR`, in a
    /// forked child: it has one thread, so the process's `SIGALRM` can only
    /// land on the reader (in the test harness another thread might take it).
    #[test]
    fn wait_alarm_interrupts_a_blocked_read() {
        let (r, w) = channel();
        set_blocking(r.as_fd(), true).unwrap();
        // SAFETY: the child only makes syscalls (no allocation, no lock)
        // and leaves with `_exit`.
        let pid = unsafe { nix::libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = match start_wait_interrupts(Duration::from_millis(20)) {
                Ok(()) => match read_comp_event_once(r.as_fd()) {
                    Err(Errno::EINTR) => 0,
                    Ok(Some(_)) => 2,
                    _ => 3,
                },
                Err(_) => 4,
            };
            let code = if code == 0 && stop_wait_interrupts().is_err() { 5 } else { code };
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { nix::libc::_exit(code) };
        }
        // The child's read would sleep forever without the alarm; after
        // 60 s an event wakes it (it then exits 2: the test fails, no hang).
        let mut status = 0;
        for i in 0.. {
            // SAFETY: our child; `status` is ours.
            let rc = unsafe { nix::libc::waitpid(pid, &mut status, nix::libc::WNOHANG) };
            if rc == pid {
                break;
            }
            if i == 6000 {
                post(&w, 1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(nix::libc::WIFEXITED(status), "{status:#x}");
        assert_eq!(
            nix::libc::WEXITSTATUS(status),
            0,
            "0: interrupted; 2: only the event woke it; 3-5: a syscall failed"
        );
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
        assert_eq!(left.left(), Some(Duration::from_millis(40)));
        assert_eq!(wait_readable_for(r.as_fd(), &mut left), Ok(false));
        // The kernel wrote back what was left: nothing.
        assert_eq!(left.left(), Some(Duration::ZERO));
        assert_eq!(Remaining::new(None).left(), None);
    }
}
