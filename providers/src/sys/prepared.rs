//! Write commands sent many times: the rxe CQ arm (`REQ_NOTIFY_CQ`),
//! built once and issued once per completion event in event mode, and the
//! rxe send doorbell ([`SendDoorbellFrame`]), once per post.
//!
//! A command whose core request is 8 bytes and that has no response fits
//! entirely in an `INVOKE_WRITE` ioctl of two attributes: the write
//! command id (`CONST_IN`) and the request itself, inlined in the
//! attribute's `data` (pointer inputs of 8 bytes or less are inlined,
//! `uverbs-abi.md` §2.2). No pointer, so the buffer can be kept with the
//! object and sent as it is: one store for the request, one `ioctl()`.
//! Kernels without `INVOKE_WRITE` get the legacy `write()` frame (header +
//! request, 16 bytes), built when sent: it is not kept, so the CQ that
//! holds the command stays small enough to move inline. What [`IoctlCmd`](super::IoctlCmd)
//! would build for the same command is byte for byte the same (a test
//! checks).

use std::cell::UnsafeCell;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use rverbs_uapi::ib_user_ioctl_cmds::{
    UVERBS_ATTR_CORE_IN, UVERBS_ATTR_WRITE_CMD, UVERBS_METHOD_INVOKE_WRITE, UVERBS_OBJECT_DEVICE,
};
use rverbs_uapi::ib_user_verbs::ib_uverbs_cmd_hdr;
use rverbs_uapi::rdma_user_ioctl::RDMA_VERBS_IOCTL;
use rverbs_uapi::rdma_user_ioctl_cmds::{ib_uverbs_attr, ib_uverbs_ioctl_hdr, UVERBS_ATTR_F_MANDATORY};
use zerocopy::{FromZeros, Immutable, IntoBytes};

use super::{CmdPath, UverbsFd};

/// rxe's `POST_SEND` doorbell frame for one QP: the 32 bytes of
/// [`super::write::post_send_doorbell_frame`], naming the 4-byte response
/// (one static word for the process: `ib_uverbs_post_send_resp.bad_wr`,
/// which the kernel writes on every doorbell and nobody reads). Built on
/// the stack by each ring ([`UverbsFd::ring_send_doorbell`]), as rdma-core
/// does: a few stores per post, where a frame kept in the QP's send half
/// would make every QP 32 bytes larger to move (a `QueuePair` over 128
/// bytes is copied with a `memcpy` call). The frame holds no address of
/// its own, so it moves freely and needs no allocation.
#[derive(Debug)]
pub struct SendDoorbellFrame([u8; 32]);

/// The response word every doorbell frame names, one for the process:
/// written by the kernel (during a doorbell's `write()`), never read or
/// referenced here, reached only by its raw pointer. A static, so its
/// address is valid for every frame's whole life (and a forked child's).
struct DoorbellResp(UnsafeCell<u32>);

// SAFETY: the word is written only by the kernel and never read, so
// threads whose doorbells name it at once race on nothing they can
// observe (each doorbell is its own syscall).
unsafe impl Sync for DoorbellResp {}

static DOORBELL_RESP: DoorbellResp = DoorbellResp(UnsafeCell::new(0));

impl SendDoorbellFrame {
    /// The doorbell of the QP with kernel handle `qp_handle`.
    #[inline]
    pub fn new(qp_handle: u32) -> SendDoorbellFrame {
        SendDoorbellFrame(super::write::post_send_doorbell_frame(qp_handle, DOORBELL_RESP.0.get() as u64))
    }

    /// The 32 bytes the doorbell writes.
    #[inline]
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// `INVOKE_WRITE` with the command id and an inlined 8-byte request.
#[repr(C)]
#[derive(Clone, Copy, Debug, IntoBytes, Immutable)]
struct InvokeBuf {
    hdr: ib_uverbs_ioctl_hdr,
    attrs: [ib_uverbs_attr; 2],
}

/// The legacy frame: `ib_uverbs_cmd_hdr` + the 8-byte request.
#[repr(C)]
#[derive(Clone, Copy, Debug, IntoBytes, Immutable)]
struct WriteBuf {
    hdr: ib_uverbs_cmd_hdr,
    body: u64,
}

/// A write command with an 8-byte request and no response, ready to send.
#[derive(Debug)]
pub(crate) struct SmallWrite {
    invoke: InvokeBuf,
}

impl SmallWrite {
    /// Command `command` (an `IB_USER_VERBS_CMD_*` without a response) for
    /// the driver of `fd`.
    pub(crate) fn new(fd: &UverbsFd, command: u32) -> SmallWrite {
        let mut hdr = ib_uverbs_ioctl_hdr::new_zeroed();
        hdr.length = size_of::<InvokeBuf>() as u16;
        hdr.object_id = UVERBS_OBJECT_DEVICE;
        hdr.method_id = UVERBS_METHOD_INVOKE_WRITE;
        hdr.num_attrs = 2;
        hdr.driver_id = fd.driver_id();
        let attr = |attr_id: u16, data: u64| {
            let mut a = ib_uverbs_attr::new_zeroed();
            a.attr_id = attr_id;
            a.len = 8;
            a.flags = UVERBS_ATTR_F_MANDATORY as u16;
            a.data = data;
            a
        };
        let invoke =
            InvokeBuf { hdr, attrs: [attr(UVERBS_ATTR_WRITE_CMD, u64::from(command)), attr(UVERBS_ATTR_CORE_IN, 0)] };
        SmallWrite { invoke }
    }

    /// The command id (the write command attribute's inline value).
    fn command(&self) -> u32 {
        self.invoke.attrs[0].data as u32
    }

    /// The legacy `write()` frame of the command with request `body`.
    fn write_frame(&self, body: u64) -> WriteBuf {
        let hdr =
            ib_uverbs_cmd_hdr { command: self.command(), in_words: (size_of::<WriteBuf>() / 4) as u16, out_words: 0 };
        WriteBuf { hdr, body }
    }

    /// The request sent last, or set at creation by [`set_body`](Self::set_body).
    #[inline]
    pub(crate) fn body(&self) -> u64 {
        self.invoke.attrs[1].data
    }

    /// Sets the request for the next send (which rewrites it anyway): a
    /// command can keep a part of its request here instead of beside it.
    pub(crate) fn set_body(&mut self, body: u64) {
        self.invoke.attrs[1].data = body;
    }

    /// The ioctl's bytes with `body` as the request (for tests).
    #[cfg(test)]
    fn invoke_bytes(&mut self, body: u64) -> Vec<u8> {
        self.invoke.attrs[1].data = body;
        self.invoke.as_bytes().to_vec()
    }
}

impl UverbsFd {
    /// Sends `cmd` with request `body` (the request struct's 8 bytes, as
    /// the kernel reads them): through `INVOKE_WRITE` while the kernel has
    /// it, else `write()`, with the fallback rules of [`UverbsFd::write_cmd`].
    /// One syscall, no allocation, no lock (the fallback state is atomic).
    #[inline]
    pub(crate) fn send_small(&self, cmd: &mut SmallWrite, body: u64) -> Result<CmdPath, Errno> {
        if !self.no_invoke_write.load(Ordering::Relaxed) && !self.no_ioctl.load(Ordering::Relaxed) {
            let b = &mut cmd.invoke;
            // Rewritten each time: the buffer is the kernel's to read (it
            // writes back only into output attributes, which this has none of).
            b.attrs[1].data = body;
            b.attrs[0].flags = UVERBS_ATTR_F_MANDATORY as u16;
            b.attrs[1].flags = UVERBS_ATTR_F_MANDATORY as u16;
            // SAFETY: a complete ioctl header + `num_attrs` attributes
            // (`length` bytes), naming no memory: every value is inline.
            // The raw syscall: libc's `ioctl` is variadic (~20 instructions).
            let rc = unsafe {
                super::raw::ioctl(self.as_fd().as_raw_fd(), RDMA_VERBS_IOCTL as _, std::ptr::addr_of_mut!(*b).cast())
            };
            if rc == 0 {
                // The level test is one load; the event itself (for
                // `cargo xtask demo`, which names every ioctl from them)
                // is out of line, so the fast path needs no stack frame.
                if tracing::level_enabled!(tracing::Level::TRACE) {
                    trace_sent(cmd.command());
                }
                return Ok(CmdPath::InvokeWrite);
            }
            // One tail call of what lives on in registers the syscall
            // leaves alone: the fast path above then saves none.
            return self.send_small_after_failure(cmd, rc);
        }
        self.send_small_write(cmd, body)
    }

    /// [`send_small`](Self::send_small) after its `INVOKE_WRITE` returned
    /// `rc`: by `write()` if the kernel lacks the method, else the errno.
    #[cold]
    #[inline(never)]
    fn send_small_after_failure(&self, cmd: &mut SmallWrite, rc: isize) -> Result<CmdPath, Errno> {
        self.small_ioctl_failed(super::syscall_error(rc))?;
        // The request as written above (the kernel writes nothing back
        // into an inline input attribute).
        let body = cmd.invoke.attrs[1].data;
        self.send_small_write(cmd, body)
    }

    /// [`send_small`](Self::send_small) on a kernel without `INVOKE_WRITE`.
    #[cold]
    #[inline(never)]
    fn send_small_write(&self, cmd: &mut SmallWrite, body: u64) -> Result<CmdPath, Errno> {
        let frame = cmd.write_frame(body);
        let bytes = frame.as_bytes();
        let n = nix::unistd::write(self.as_fd(), bytes)?;
        if n != bytes.len() {
            return Err(Errno::EIO);
        }
        tracing::trace!(command = frame.hdr.command, ex = false, path = ?CmdPath::Write, "uverbs command ok");
        Ok(CmdPath::Write)
    }

    /// An `INVOKE_WRITE` of [`send_small`](Self::send_small) failed:
    /// `Ok` when the kernel lacks the method (remembered: later commands
    /// go by `write()`), the errno otherwise.
    #[cold]
    #[inline(never)]
    fn small_ioctl_failed(&self, e: Errno) -> Result<(), Errno> {
        if self.note_failure(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, e) {
            self.no_invoke_write.store(true, Ordering::Relaxed);
            return Ok(());
        }
        tracing::debug!(
            object = UVERBS_OBJECT_DEVICE,
            method = UVERBS_METHOD_INVOKE_WRITE,
            errno = ?e,
            "uverbs ioctl failed"
        );
        Err(e)
    }
}

/// The `uverbs command ok` event of [`UverbsFd::try_ioctl`], for a
/// prepared `INVOKE_WRITE`.
#[cold]
#[inline(never)]
fn trace_sent(command: u32) {
    tracing::trace!(
        object = UVERBS_OBJECT_DEVICE,
        method = UVERBS_METHOD_INVOKE_WRITE,
        path = ?CmdPath::Ioctl,
        write_cmd = u64::from(command),
        "uverbs command ok"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::IoctlCmd;
    use rverbs_uapi::ib_user_verbs::{ib_uverbs_req_notify_cq, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ};

    fn dev_null() -> UverbsFd {
        UverbsFd::open(std::path::Path::new("/dev/null"), 14, None).expect("/dev/null is a char device")
    }

    /// The prepared doorbell is `write::post_send_doorbell_frame`'s, naming
    /// the process's one response word, wherever the frame moves.
    #[test]
    fn send_doorbell_frame_names_the_static_response_word() {
        let d = SendDoorbellFrame::new(7);
        let resp = DOORBELL_RESP.0.get() as u64;
        assert_eq!(d.bytes(), &crate::sys::write::post_send_doorbell_frame(7, resp));
        let moved = std::hint::black_box(Some(d)).expect("just put there");
        assert_eq!(u64::from_ne_bytes(moved.bytes()[8..16].try_into().unwrap()), resp);
        assert_ne!(SendDoorbellFrame::new(8).bytes(), moved.bytes(), "the QP handle is in the frame");
        // `/dev/null` takes any write whole: the doorbell's result path.
        let fd = dev_null();
        assert_eq!(fd.ring_send_doorbell(7), Ok(()));
    }

    /// `/dev/null` answers the ioctl with `ENOTTY`: the command goes out as
    /// its `write()` frame, this time and every later time.
    #[test]
    fn falls_back_to_write() {
        let fd = dev_null();
        let mut small = SmallWrite::new(&fd, 9);
        assert_eq!(fd.send_small(&mut small, 0x1_0000_0007), Ok(CmdPath::Write));
        assert!(fd.no_invoke_write.load(Ordering::Relaxed) && fd.no_ioctl.load(Ordering::Relaxed));
        assert_eq!(fd.send_small(&mut small, 7), Ok(CmdPath::Write));
    }

    /// The prebuilt ioctl is what the builder makes for the same command,
    /// and the legacy frame what `write::frame` makes.
    #[test]
    fn same_bytes_as_the_builders() {
        let fd = dev_null();
        let mut small = SmallWrite::new(&fd, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        let req = ib_uverbs_req_notify_cq { cq_handle: 7, solicited_only: 1 };
        let body = u64::from_ne_bytes(req.as_bytes().try_into().unwrap());
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
        cmd.in_const(UVERBS_ATTR_WRITE_CMD, u64::from(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ));
        cmd.in_bytes(UVERBS_ATTR_CORE_IN, req.as_bytes());
        assert_eq!(small.invoke_bytes(body), cmd.finish(14).unwrap());
        let framed = crate::sys::write::frame(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, req.as_bytes(), &[], 0, 0);
        assert_eq!(small.write_frame(body).as_bytes(), &framed[..]);
    }
}
