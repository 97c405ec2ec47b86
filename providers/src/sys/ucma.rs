//! The RDMA connection manager's fd, `/dev/infiniband/rdma_cm`
//! (`rdma_ucm.ko`): the only place rverbs makes CM syscalls.
//!
//! Every command is one `write()` of `rdma_ucm_cmd_hdr ‖ body`; the kernel
//! copies the answer to the `response` pointer in the body before `write()`
//! returns (`shared/reference/rdmacm.md` §A.2). The fd is pollable: it is
//! readable while events are queued. rverbs keeps it `O_NONBLOCK` and waits
//! with `poll()` itself, so a blocking wait can have a timeout and the fd
//! can go into any event loop.
//!
//! The per-command functions are in [`crate::cm`]; `UcmaFd::command`,
//! which can name memory through the body's pointer fields, is
//! crate-private, and fills those fields itself from the buffers it is
//! given.

use std::fs::OpenOptions;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
#[cfg(any(test, feature = "ucma-mock"))]
use std::sync::Arc;

use nix::errno::Errno;
use rverbs_uapi::rdma_user_cm::{rdma_ucm_accept, rdma_ucm_cmd_hdr, RDMA_USER_CM_ABI_VERSION};
use zerocopy::IntoBytes;

use super::event::{set_nonblocking, wait_readable};
use crate::{Error, Result};

/// Where the kernel puts the CM's char device.
pub const RDMA_CM_DEV: &str = "/dev/infiniband/rdma_cm";
/// The misc device's sysfs directory (`abi_version`, `dev`).
pub const RDMA_CM_SYSFS: &str = "/sys/class/misc/rdma_cm";

#[derive(Debug)]
enum Backend {
    Kernel(OwnedFd),
    #[cfg(any(test, feature = "ucma-mock"))]
    Mock(Arc<super::ucma_mock::MockUcma>),
}

/// An open `/dev/infiniband/rdma_cm`: one event channel of the kernel's
/// CM (`struct rdma_event_channel`). Its ids die when it is closed.
/// Always non-blocking.
#[derive(Debug)]
pub struct UcmaFd {
    backend: Backend,
}

/// One command for [`UcmaFd::command`]: the body, and the buffers its
/// pointer fields name (the fields' offsets are fixed per command; the
/// caller's body holds zeros there).
pub(crate) struct Command<'a> {
    /// `RDMA_USER_CM_CMD_*`.
    pub cmd: u32,
    /// The full body (the kernel copies its own struct size whatever `in` says).
    pub body: &'a mut [u8],
    /// The response buffer and the offset of the `response` field in `body`.
    pub resp: Option<(usize, &'a mut [u8])>,
    /// SET_OPTION's value and the offset of its `optval` field.
    pub input: Option<(usize, &'a [u8])>,
}

impl Command<'_> {
    /// The header the command goes out with: `in` = body size, `out` =
    /// response size.
    pub(crate) fn header(&self) -> rdma_ucm_cmd_hdr {
        rdma_ucm_cmd_hdr {
            cmd: self.cmd,
            r#in: self.body.len() as u16,
            out: self.resp.as_ref().map_or(0, |(_, r)| r.len() as u16),
        }
    }

    /// Writes `ptr` into the body's u64 field at `off`.
    fn set_ptr(body: &mut [u8], off: usize, ptr: u64) {
        body[off..off + 8].copy_from_slice(&ptr.to_ne_bytes());
    }

    /// Writes the bytes `write()` sends into `frame`: header then body,
    /// with the pointer fields set to `resp_ptr` and `input_ptr`; their
    /// length. `EINVAL` for a body longer than [`MAX_BODY`] (none of the
    /// kernel's commands has one).
    pub(crate) fn frame(&mut self, frame: &mut Frame, resp_ptr: u64, input_ptr: u64) -> Result<usize, Errno> {
        if let Some((off, _)) = self.resp {
            Self::set_ptr(self.body, off, resp_ptr);
        }
        if let Some((off, _)) = self.input {
            Self::set_ptr(self.body, off, input_ptr);
        }
        let len = HDR + self.body.len();
        frame.get_mut(HDR..len).ok_or(Errno::EINVAL)?.copy_from_slice(self.body);
        frame[..HDR].copy_from_slice(self.header().as_bytes());
        Ok(len)
    }
}

/// The header's size.
const HDR: usize = size_of::<rdma_ucm_cmd_hdr>();

/// The longest command body: ACCEPT's (`struct rdma_ucm_accept`). Every
/// other command's is shorter (checked below), so a [`Frame`] fits on the
/// stack and a command allocates nothing.
pub(crate) const MAX_BODY: usize = size_of::<rdma_ucm_accept>();

const _: () = {
    use rverbs_uapi::rdma_user_cm as k;
    let sizes = [
        size_of::<k::rdma_ucm_create_id>(),
        size_of::<k::rdma_ucm_destroy_id>(),
        size_of::<k::rdma_ucm_bind_ip>(),
        size_of::<k::rdma_ucm_bind>(),
        size_of::<k::rdma_ucm_resolve_ip>(),
        size_of::<k::rdma_ucm_resolve_addr>(),
        size_of::<k::rdma_ucm_resolve_route>(),
        size_of::<k::rdma_ucm_query>(),
        size_of::<k::rdma_ucm_connect>(),
        size_of::<k::rdma_ucm_listen>(),
        size_of::<k::rdma_ucm_accept>(),
        size_of::<k::rdma_ucm_reject>(),
        size_of::<k::rdma_ucm_disconnect>(),
        size_of::<k::rdma_ucm_init_qp_attr>(),
        size_of::<k::rdma_ucm_notify>(),
        size_of::<k::rdma_ucm_join_ip_mcast>(),
        size_of::<k::rdma_ucm_join_mcast>(),
        size_of::<k::rdma_ucm_get_event>(),
        size_of::<k::rdma_ucm_set_option>(),
        size_of::<k::rdma_ucm_migrate_id>(),
    ];
    let mut i = 0;
    while i < sizes.len() {
        assert!(sizes[i] <= MAX_BODY);
        i += 1;
    }
};

/// A command's bytes, header then body: on the stack, as librdmacm's.
pub(crate) type Frame = [u8; HDR + MAX_BODY];

/// Why the CM's fd cannot be opened, as one sentence.
fn open_error(path: &Path, e: Errno) -> Error {
    let msg = match e {
        Errno::ENOENT | Errno::ENODEV | Errno::ENXIO => format!(
            "{} does not exist: the kernel's RDMA connection manager is not loaded (modprobe rdma_ucm)",
            path.display()
        ),
        Errno::EACCES | Errno::EPERM => format!("no permission to open {}", path.display()),
        Errno::ENOTTY => format!("{} is not the rdma_cm character device", path.display()),
        Errno::EMFILE | Errno::ENFILE => {
            format!("cannot open {}: {}", path.display(), crate::error::fd_limit_message(e).unwrap_or_default())
        }
        _ => format!("cannot open {}", path.display()),
    };
    Error::os("rdma_create_event_channel", e).with_message(msg)
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// The CM's ABI version from sysfs; when the module is not loaded, RDMA
/// netlink's `GET_CHARDEV` for `rdma_cm` (which loads it, as librdmacm
/// relies on) and sysfs again.
fn abi_version(sysfs: &Path) -> Option<u32> {
    if let Some(v) = read_trim(&sysfs.join("abi_version")).and_then(|s| s.parse().ok()) {
        return Some(v);
    }
    let mut nl = super::netlink::RdmaNetlink::open().ok()?;
    let c = nl.rdma_cm_chardev().ok()?;
    read_trim(&sysfs.join("abi_version")).and_then(|s| s.parse().ok()).or(u32::try_from(c.abi).ok())
}

/// `sysfs/dev`'s `MAJOR:MINOR`.
fn dev_numbers(sysfs: &Path) -> Option<(u64, u64)> {
    read_trim(&sysfs.join("dev")).and_then(|s| {
        let (a, b) = s.split_once(':')?;
        Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
    })
}

/// The CM's ABI version and char device numbers from `sysfs`. For the
/// default directory they are read once per process, as librdmacm reads
/// them once (`ucma_init`), once both were there: a process that opens a
/// channel per connection (rverbs' async listener moves each request to
/// one of its own, an async client resolves on one of its own) otherwise
/// read two sysfs files, ten syscalls, for each (issue #35's connections).
fn cm_facts(sysfs: &Path) -> (Option<u32>, Option<(u64, u64)>) {
    static KNOWN: std::sync::OnceLock<(u32, (u64, u64))> = std::sync::OnceLock::new();
    let default = sysfs == Path::new(RDMA_CM_SYSFS);
    if let Some(&(abi, dev)) = KNOWN.get().filter(|_| default) {
        return (Some(abi), Some(dev));
    }
    let (abi, dev) = (abi_version(sysfs), dev_numbers(sysfs));
    if let (true, Some(RDMA_USER_CM_ABI_VERSION), Some(d)) = (default, abi, dev) {
        let _ = KNOWN.set((RDMA_USER_CM_ABI_VERSION, d));
    }
    (abi, dev)
}

impl UcmaFd {
    /// Opens the kernel's CM: checks its ABI version (4) in
    /// `/sys/class/misc/rdma_cm/abi_version`, opens
    /// `/dev/infiniband/rdma_cm` `O_RDWR|O_CLOEXEC`, checks that it is the
    /// char device sysfs names (both sysfs files read once per process),
    /// and makes it non-blocking (`rdma_create_event_channel`).
    pub fn open() -> Result<UcmaFd> {
        Self::open_at(Path::new(RDMA_CM_DEV), Path::new(RDMA_CM_SYSFS))
    }

    /// [`open`](Self::open) with another node and sysfs directory.
    pub fn open_at(path: &Path, sysfs: &Path) -> Result<UcmaFd> {
        const VERB: &str = "rdma_create_event_channel";
        let (abi, want) = cm_facts(sysfs);
        match abi {
            Some(RDMA_USER_CM_ABI_VERSION) => {}
            Some(v) => {
                return Err(Error::check(VERB, Errno::ENOSYS).with_message(format!(
                    "the kernel's RDMA CM speaks ABI version {v} ({}/abi_version), rverbs speaks \
                     {RDMA_USER_CM_ABI_VERSION}",
                    sysfs.display()
                )))
            }
            // Unreadable for another reason than absence (no descriptor
            // left: EMFILE) is that reason, not "not loaded".
            None => {
                let e = std::fs::File::open(sysfs.join("abi_version"))
                    .err()
                    .and_then(|e| e.raw_os_error())
                    .map(Errno::from_raw)
                    .filter(|e| !matches!(e, Errno::ENOENT | Errno::ENODEV | Errno::ENXIO));
                return Err(open_error(path, e.unwrap_or(Errno::ENOENT)));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| open_error(path, Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32))))?;
        let meta = file.metadata().map_err(|e| open_error(path, Errno::from_raw(e.raw_os_error().unwrap_or(5))))?;
        if !meta.file_type().is_char_device() {
            return Err(open_error(path, Errno::ENOTTY));
        }
        let rdev = meta.rdev();
        if let Some((maj, min)) = want {
            if (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev)) != (maj, min) {
                return Err(Error::check(VERB, Errno::ENODEV).with_message(format!(
                    "{} is device {}:{}, but {}/dev says {maj}:{min}",
                    path.display(),
                    nix::sys::stat::major(rdev),
                    nix::sys::stat::minor(rdev),
                    sysfs.display()
                )));
            }
        }
        let fd = OwnedFd::from(file);
        set_nonblocking(fd.as_fd(), true).map_err(|e| Error::os(VERB, e))?;
        tracing::debug!(path = %path.display(), abi = RDMA_USER_CM_ABI_VERSION, "rdma_cm event channel opened");
        Ok(UcmaFd { backend: Backend::Kernel(fd) })
    }

    /// A channel served by a [`MockUcma`](super::ucma_mock::MockUcma)
    /// instead of the kernel (host tests).
    #[cfg(any(test, feature = "ucma-mock"))]
    pub fn mock(m: Arc<super::ucma_mock::MockUcma>) -> UcmaFd {
        UcmaFd { backend: Backend::Mock(m) }
    }

    /// The mock behind this fd, if it is one.
    #[cfg(any(test, feature = "ucma-mock"))]
    pub fn as_mock(&self) -> Option<&Arc<super::ucma_mock::MockUcma>> {
        match &self.backend {
            Backend::Mock(m) => Some(m),
            Backend::Kernel(_) => None,
        }
    }

    /// The fd number (MIGRATE_ID names the current fd by number).
    pub fn raw(&self) -> i32 {
        self.as_fd().as_raw_fd()
    }

    /// Issues one command: fills the body's pointer fields, writes header
    /// and body with one `write()`, and leaves the kernel's answer in the
    /// response buffer. `EINTR` is retried (the kernel has done nothing
    /// then).
    pub(crate) fn command(&self, mut c: Command<'_>) -> Result<(), Errno> {
        match &self.backend {
            Backend::Kernel(fd) => {
                let resp_ptr = c.resp.as_mut().map_or(0, |(_, r)| r.as_mut_ptr() as u64);
                let input_ptr = c.input.map_or(0, |(_, i)| i.as_ptr() as u64);
                let mut frame: Frame = [0; HDR + MAX_BODY];
                let len = c.frame(&mut frame, resp_ptr, input_ptr)?;
                loop {
                    match nix::unistd::write(fd.as_fd(), &frame[..len]) {
                        Ok(n) if n == len => return Ok(()),
                        // librdmacm's answer to a short write.
                        Ok(_) => return Err(Errno::ENODATA),
                        Err(Errno::EINTR) => continue,
                        Err(e) => return Err(e),
                    }
                }
            }
            #[cfg(any(test, feature = "ucma-mock"))]
            Backend::Mock(m) => {
                let hdr = c.header();
                let mut frame: Frame = [0; HDR + MAX_BODY];
                let len = c.frame(&mut frame, 0, 0)?;
                let input = c.input.map(|(_, i)| i);
                let resp = c.resp.map(|(_, r)| r);
                m.command(hdr, &frame[HDR..len], input, resp)
            }
        }
    }

    /// Waits until an event is queued or `timeout_ms` passed (`-1`:
    /// forever); `poll()` on the fd.
    pub fn wait_readable(&self, timeout_ms: i32) -> Result<bool, Errno> {
        wait_readable(self.as_fd(), timeout_ms)
    }
}

impl AsFd for UcmaFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.backend {
            Backend::Kernel(fd) => fd.as_fd(),
            #[cfg(any(test, feature = "ucma-mock"))]
            Backend::Mock(m) => m.as_fd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another sysfs directory than the kernel's is read on every open
    /// (only the kernel's facts are kept for the process).
    #[test]
    fn cm_facts_are_read_from_sysfs_and_kept_only_for_the_default() {
        let dir = std::env::temp_dir().join(format!("rverbs-ucma-facts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("abi_version"), "4\n").unwrap();
        std::fs::write(dir.join("dev"), "10:260\n").unwrap();
        assert_eq!(cm_facts(&dir), (Some(4), Some((10, 260))));
        std::fs::write(dir.join("abi_version"), "5\n").unwrap();
        std::fs::write(dir.join("dev"), "bogus\n").unwrap();
        assert_eq!(cm_facts(&dir), (Some(5), None));
        let e = UcmaFd::open_at(&dir.join("no-such-node"), &dir).unwrap_err();
        assert!(e.to_string().contains("ABI version 5"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
