//! The data path's syscalls made directly (`syscall` on x86_64, `svc 0` on
//! aarch64) instead of through libc's wrappers: rxe's doorbell `write()`,
//! the CQ arm's `ioctl()`, and a completion channel's `ppoll()` and
//! `read()` (an 8-byte read into a register: `read_u64`). Each is issued
//! once per post or per completion event, and libc's wrappers cost more
//! than the call: `ioctl` and `syscall` are variadic (about 20 and 11
//! instructions), and every wrapper reaches the error through `errno`
//! (`__errno_location`). Here a call is the registers and the trap, and a
//! failure comes back as `-errno` in the result, as the kernel returns it.
//!
//! Other architectures and Miri (which cannot run `asm!`) go through
//! `libc::syscall` with the same contract.
//!
//! These are the only `asm!` syscalls of rverbs; every other syscall goes
//! through libc (`nix`).
#![allow(unsafe_code)]

use nix::libc::{c_int, c_long, c_ulong, c_void, pollfd, timespec};

/// Syscall `n` with up to five arguments (unused ones 0: the kernel reads
/// only what the call takes); `-errno` on failure. One body for every call
/// here: the two zeroed registers of a three-argument call cost two
/// instructions.
///
/// # Safety
/// As for the syscall: every pointer among the arguments must be valid for
/// what the kernel does with it.
#[inline(always)]
unsafe fn syscall5(n: c_long, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize) -> isize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
    {
        let ret: isize;
        // SAFETY: the Linux x86_64 convention: number in rax, arguments in
        // rdi, rsi, rdx, r10, r8; rcx and r11 clobbered, result in rax; no
        // stack use; memory access is the caller's contract.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a1,
                in("rsi") a2,
                in("rdx") a3,
                in("r10") a4,
                in("r8") a5,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, preserves_flags)
            );
        }
        ret
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux", not(miri)))]
    {
        let ret: isize;
        // SAFETY: the Linux aarch64 convention: number in x8, arguments in
        // x0..x4, the result in x0; nothing else clobbered.
        unsafe {
            core::arch::asm!(
                "svc 0",
                in("x8") n,
                inlateout("x0") a1 as isize => ret,
                in("x1") a2,
                in("x2") a3,
                in("x3") a4,
                in("x4") a5,
                options(nostack)
            );
        }
        ret
    }
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), target_os = "linux", not(miri))))]
    {
        // SAFETY: forwarded from this function's contract.
        let r = unsafe { nix::libc::syscall(n, a1, a2, a3, a4, a5) };
        if r < 0 {
            -(nix::errno::Errno::last_raw() as isize)
        } else {
            r as isize
        }
    }
}

/// `read(fd, buf, len)`: the byte count, or `-errno`.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes.
#[inline(always)]
pub(crate) unsafe fn read(fd: c_int, buf: *mut c_void, len: usize) -> isize {
    // SAFETY: forwarded: the kernel writes at most `len` bytes at `buf`.
    unsafe { syscall5(nix::libc::SYS_read, fd as usize, buf as usize, len, 0, 0) }
}

/// `read(fd, buf, 8)` into a register: the byte count or `-errno`, and the
/// 8 bytes read (meaningful only when the count is 8). A completion
/// channel's event read (`sys::event::wait_comp_event`). The buffer is a
/// stack slot the `asm!` block pushes and pops itself: the caller keeps no
/// local for it (no store of a zero, no load after), and has no local
/// whose address reaches the kernel, which would keep LLVM from making
/// its calls tail calls.
#[inline(always)]
pub(crate) fn read_u64(fd: c_int) -> (isize, u64) {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
    {
        let (ret, value): (isize, u64);
        // SAFETY: the Linux x86_64 convention as in `syscall5`; the 8-byte
        // buffer is the slot pushed here (the stack pointer is 8-aligned,
        // all a u64 needs, and no red zone is live: no `nostack`), which
        // the kernel writes at most 8 bytes of, popped into `value` before
        // the block ends. The pushed register's old value is junk to us.
        unsafe {
            core::arch::asm!(
                "push rsi",
                "mov rsi, rsp",
                "syscall",
                "pop rsi",
                inlateout("rax") nix::libc::SYS_read as isize => ret,
                in("rdi") fd as isize,
                out("rsi") value,
                in("rdx") 8usize,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        (ret, value)
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux", not(miri)))]
    {
        let (ret, value): (isize, u64);
        // SAFETY: the Linux aarch64 convention as in `syscall5`; the buffer
        // is 16 bytes (sp stays 16-aligned) below the stack pointer,
        // reserved and released here, of which the kernel writes at most
        // the first 8, loaded into `value` before the block ends.
        unsafe {
            core::arch::asm!(
                "sub sp, sp, #16",
                "mov x1, sp",
                "svc 0",
                "ldr x1, [sp]",
                "add sp, sp, #16",
                in("x8") nix::libc::SYS_read,
                inlateout("x0") fd as isize => ret,
                out("x1") value,
                in("x2") 8usize,
            );
        }
        (ret, value)
    }
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), target_os = "linux", not(miri))))]
    {
        let mut value = 0u64;
        // SAFETY: `value` is 8 writable bytes.
        let ret = unsafe { read(fd, std::ptr::from_mut(&mut value).cast(), 8) };
        (ret, value)
    }
}

/// `write(fd, buf, len)`: the byte count, or `-errno`.
///
/// # Safety
/// `buf` must be valid for reads of `len` bytes, and what the kernel does
/// with them (a uverbs command names more memory) valid too.
#[inline(always)]
pub(crate) unsafe fn write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    // SAFETY: forwarded from this function's contract.
    unsafe { syscall5(nix::libc::SYS_write, fd as usize, buf as usize, len, 0, 0) }
}

/// `ioctl(fd, request, arg)`: the kernel's result, or `-errno`.
///
/// # Safety
/// `arg` must be what `request` expects, valid for what the kernel reads
/// and writes through it.
#[inline(always)]
pub(crate) unsafe fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> isize {
    // SAFETY: forwarded from this function's contract.
    unsafe { syscall5(nix::libc::SYS_ioctl, fd as usize, request as usize, arg as usize, 0, 0) }
}

/// The kernel's `ppoll(fds, nfds, tsp, NULL, 8)`: no signal mask, and the
/// time left written back into `*tsp` (libc's `ppoll` keeps its own copy
/// and hides that). The number of ready fds, 0 on timeout, or `-errno`.
///
/// # Safety
/// `fds` must point at `nfds` writable `pollfd`s; `tsp` must be null (no
/// limit) or point at a writable `timespec`.
#[inline(always)]
pub(crate) unsafe fn ppoll(fds: *mut pollfd, nfds: usize, tsp: *mut timespec) -> isize {
    /// The kernel's `sigset_t` on Linux (`_NSIG / 8`); unused with no mask.
    const SIGSET_LEN: usize = 8;
    // SAFETY: forwarded from this function's contract; no signal mask.
    unsafe { syscall5(nix::libc::SYS_ppoll, fds as usize, nfds, tsp as usize, 0, SIGSET_LEN) }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn reads_writes_and_reports_errno() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let data = 0x1122_3344_5566_7788u64;
        // SAFETY: 8 readable bytes.
        let n = unsafe { write(w.as_raw_fd(), std::ptr::addr_of!(data).cast(), 8) };
        assert_eq!(n, 8);
        let mut pfd = pollfd { fd: r.as_raw_fd(), events: nix::libc::POLLIN, revents: 0 };
        let mut ts = timespec { tv_sec: 5, tv_nsec: 0 };
        // SAFETY: one pollfd, our timespec.
        assert_eq!(unsafe { ppoll(&mut pfd, 1, &mut ts) }, 1);
        assert!(ts.tv_sec <= 5 && ts.tv_sec >= 4, "{}", ts.tv_sec);
        let mut got = 0u64;
        // SAFETY: 8 writable bytes.
        assert_eq!(unsafe { read(r.as_raw_fd(), std::ptr::addr_of_mut!(got).cast(), 8) }, 8);
        assert_eq!(got, data);
        // Nothing queued, a zero limit: a timeout, the time left zero.
        let mut ts = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: as above.
        assert_eq!(unsafe { ppoll(&mut pfd, 1, &mut ts) }, 0);
        // Errors come back as -errno: a closed fd, an ioctl a pipe lacks.
        let bad = nix::libc::c_int::MAX;
        // SAFETY: 8 writable bytes (the fd is invalid: nothing is written).
        assert_eq!(unsafe { read(bad, std::ptr::addr_of_mut!(got).cast(), 8) }, -(nix::libc::EBADF as isize));
        let mut avail: c_int = -1;
        // SAFETY: FIONREAD writes one int.
        let rc = unsafe { ioctl(r.as_raw_fd(), nix::libc::FIONREAD as c_ulong, std::ptr::addr_of_mut!(avail).cast()) };
        assert_eq!((rc, avail), (0, 0));
        let mut tio = [0u64; 16];
        // SAFETY: TCGETS writes at most a `termios`, which fits in `tio`
        // (on a pipe it fails and writes nothing).
        let rc = unsafe { ioctl(r.as_raw_fd(), nix::libc::TCGETS as c_ulong, tio.as_mut_ptr().cast()) };
        assert_eq!(rc, -(nix::libc::ENOTTY as isize));
    }

    #[test]
    fn reads_eight_bytes_into_a_register() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let fl = nix::fcntl::fcntl(r.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
        let nb = nix::fcntl::OFlag::from_bits_retain(fl) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(r.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nb)).unwrap();
        // Two records back to back: each read takes one, in order.
        let recs = [0x0102_0304_0506_0708u64, u64::MAX];
        for v in recs {
            assert_eq!(nix::unistd::write(&w, &v.to_ne_bytes()), Ok(8));
        }
        for v in recs {
            assert_eq!(read_u64(r.as_raw_fd()), (8, v));
        }
        // Empty and non-blocking: -EAGAIN; a short record: its length.
        assert_eq!(read_u64(r.as_raw_fd()).0, -(nix::libc::EAGAIN as isize));
        assert_eq!(nix::unistd::write(&w, &[9, 9, 9]), Ok(3));
        assert_eq!(read_u64(r.as_raw_fd()).0, 3);
        // A closed writer: end of file; a bad fd: -EBADF.
        drop(w);
        assert_eq!(read_u64(r.as_raw_fd()).0, 0);
        assert_eq!(read_u64(c_int::MAX).0, -(nix::libc::EBADF as isize));
    }
}
