//! `RDMA_VERBS_IOCTL`: the uverbs ioctl command and its attribute builder.
//!
//! A command is a 24-byte `ib_uverbs_ioctl_hdr` followed contiguously by
//! 16-byte `ib_uverbs_attr` TLVs (`include/uapi/rdma/rdma_user_ioctl_cmds.h`).
//! [`IoctlCmd`] builds that buffer. Every pointer attribute borrows its buffer
//! for the builder's lifetime `'a`, so the borrow checker proves the buffers
//! outlive the syscall. The attribute array stays inside the builder and is
//! writable, because the kernel writes new handles and fds back into
//! `attrs[i].data` and sets `UVERBS_ATTR_F_VALID_OUTPUT` in `attrs[i].flags`.
//!
//! Encoding rules (`uverbs-abi.md` §2.2): pointer inputs of 8 bytes or less
//! are inlined in `data`; outputs are always pointers; object handles and fds
//! have `len = 0` and the value in `data`; `CONST_IN` is an inline 8-byte value.
//! Attributes are mandatory unless [`IoctlCmd::optional`] is called after them.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use rverbs_uapi::rdma_user_ioctl::RDMA_VERBS_IOCTL;
use rverbs_uapi::rdma_user_ioctl_cmds::{
    ib_uverbs_attr, ib_uverbs_ioctl_hdr, UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT,
};
use zerocopy::{FromZeros, Immutable, IntoBytes};

/// Most attributes any method we issue takes (CQ/QP create with UHW: 14).
pub const MAX_ATTRS: usize = 20;

/// A handle to one attribute of a built command, to read what the kernel
/// wrote into it after the command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSlot(usize);

/// The header and the attribute array, contiguous as the kernel reads them.
/// Only the first `num` attributes are ever written: a command starts with
/// no zeroing of the array (20 attributes, 320 bytes: about 35
/// instructions of `memset` per command, issue #35), and nothing reads
/// past `num`.
#[repr(C)]
struct Buf {
    hdr: ib_uverbs_ioctl_hdr,
    attrs: [MaybeUninit<ib_uverbs_attr>; MAX_ATTRS],
}

/// One `RDMA_VERBS_IOCTL` command under construction.
///
/// `repr(C)` with the unwritten attributes last: the fields `new` sets are
/// contiguous, so the compiler does not widen their zeroing into a
/// `memset` over the attribute array too (which it may, the array being
/// uninitialised), as it did with Rust's layout.
#[repr(C)]
pub struct IoctlCmd<'a> {
    num: usize,
    /// Set by the first attribute that could not be encoded; `execute` returns it.
    overflow: bool,
    _borrows: PhantomData<&'a mut [u8]>,
    buf: Buf,
}

impl<'a> IoctlCmd<'a> {
    /// A command for `object_id`/`method_id`, with no attributes yet.
    #[inline]
    pub fn new(object_id: u16, method_id: u16) -> Self {
        let mut hdr = ib_uverbs_ioctl_hdr::new_zeroed();
        hdr.object_id = object_id;
        hdr.method_id = method_id;
        IoctlCmd {
            num: 0,
            overflow: false,
            _borrows: PhantomData,
            buf: Buf { hdr, attrs: [MaybeUninit::uninit(); MAX_ATTRS] },
        }
    }

    /// The object id.
    pub fn object_id(&self) -> u16 {
        self.buf.hdr.object_id
    }

    /// The method id.
    pub fn method_id(&self) -> u16 {
        self.buf.hdr.method_id
    }

    fn push(&mut self, attr_id: u16, len: u16, data: u64) -> AttrSlot {
        if self.num == MAX_ATTRS {
            self.overflow = true;
            return AttrSlot(MAX_ATTRS - 1);
        }
        self.buf.attrs[self.num] = MaybeUninit::new(ib_uverbs_attr {
            attr_id,
            len,
            flags: UVERBS_ATTR_F_MANDATORY as u16,
            attr_data: 0,
            data,
        });
        self.num += 1;
        AttrSlot(self.num - 1)
    }

    /// The written attributes, `attrs[..num]`.
    fn written(&self) -> &[ib_uverbs_attr] {
        let num = self.num.min(MAX_ATTRS);
        // SAFETY: `push` wrote every attribute below `num` (it is the only
        // place `num` grows), and `MaybeUninit<T>` has `T`'s layout.
        unsafe { std::slice::from_raw_parts(self.buf.attrs.as_ptr().cast::<ib_uverbs_attr>(), num) }
    }

    /// The written attributes, mutable.
    fn written_mut(&mut self) -> &mut [ib_uverbs_attr] {
        let num = self.num.min(MAX_ATTRS);
        // SAFETY: as in `written`; the borrow of `self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.buf.attrs.as_mut_ptr().cast::<ib_uverbs_attr>(), num) }
    }

    /// Clears the mandatory flag of the attribute added last: a kernel that
    /// does not know it ignores it instead of failing with `EPROTONOSUPPORT`.
    pub fn optional(&mut self) -> &mut Self {
        if let Some(a) = self.written_mut().last_mut() {
            a.flags &= !(UVERBS_ATTR_F_MANDATORY as u16);
        }
        self
    }

    /// `PTR_IN`: bytes the kernel reads. Up to 8 bytes are inlined in `data`.
    #[inline]
    pub fn in_bytes(&mut self, attr_id: u16, bytes: &'a [u8]) -> AttrSlot {
        let Ok(len) = u16::try_from(bytes.len()) else {
            self.overflow = true;
            return AttrSlot(0);
        };
        if bytes.len() <= 8 {
            self.push(attr_id, len, inline_value(bytes))
        } else {
            self.push(attr_id, len, bytes.as_ptr() as u64)
        }
    }

    /// `PTR_IN` of a kernel struct.
    pub fn in_struct<T: IntoBytes + Immutable>(&mut self, attr_id: u16, v: &'a T) -> AttrSlot {
        self.in_bytes(attr_id, v.as_bytes())
    }

    /// `PTR_IN` of exactly 4 bytes (`UVERBS_ATTR_TYPE(u32)`), inlined.
    pub fn in_u32(&mut self, attr_id: u16, v: u32) -> AttrSlot {
        self.push(attr_id, 4, u64::from(v))
    }

    /// `PTR_IN` of exactly 8 bytes (`UVERBS_ATTR_TYPE(u64)`), inlined. Also
    /// `CONST_IN`, which is always an inline 8-byte value.
    pub fn in_u64(&mut self, attr_id: u16, v: u64) -> AttrSlot {
        self.push(attr_id, 8, v)
    }

    /// `CONST_IN`: an inline 8-byte constant (range-checked by the kernel).
    pub fn in_const(&mut self, attr_id: u16, v: u64) -> AttrSlot {
        self.in_u64(attr_id, v)
    }

    /// An existing object's handle (`UVERBS_ATTR_IDR`, read/write/destroy access).
    pub fn in_obj(&mut self, attr_id: u16, handle: u32) -> AttrSlot {
        self.push(attr_id, 0, u64::from(handle))
    }

    /// A new object: the kernel writes its handle into this slot.
    pub fn new_obj(&mut self, attr_id: u16) -> AttrSlot {
        self.push(attr_id, 0, 0)
    }

    /// An existing fd (`UVERBS_ATTR_FD`).
    pub fn in_fd(&mut self, attr_id: u16, fd: BorrowedFd<'a>) -> AttrSlot {
        self.push(attr_id, 0, fd.as_raw_fd() as i64 as u64)
    }

    /// A new fd: the kernel writes it into this slot.
    pub fn new_fd(&mut self, attr_id: u16) -> AttrSlot {
        self.push(attr_id, 0, 0)
    }

    /// `PTR_OUT`: a buffer the kernel fills (always passed by pointer).
    pub fn out_bytes(&mut self, attr_id: u16, buf: &'a mut [u8]) -> AttrSlot {
        let Ok(len) = u16::try_from(buf.len()) else {
            self.overflow = true;
            return AttrSlot(0);
        };
        self.push(attr_id, len, buf.as_mut_ptr() as u64)
    }

    /// `PTR_OUT` of a kernel struct.
    pub fn out_struct<T: IntoBytes + zerocopy::FromBytes>(&mut self, attr_id: u16, v: &'a mut T) -> AttrSlot {
        self.out_bytes(attr_id, v.as_mut_bytes())
    }

    /// The provider's driver data, `UVERBS_ATTR_UHW_IN`/`UHW_OUT`: the bytes
    /// that follow the core struct in the write ABI. Empty buffers add nothing.
    /// Both are optional, as libibverbs sends them.
    #[inline(always)]
    pub fn uhw(&mut self, drv_in: &'a [u8], drv_out: &'a mut [u8]) {
        if !drv_in.is_empty() {
            self.in_bytes(rverbs_uapi::ib_user_ioctl_cmds::UVERBS_ATTR_UHW_IN, drv_in);
            self.optional();
        }
        if !drv_out.is_empty() {
            self.out_bytes(rverbs_uapi::ib_user_ioctl_cmds::UVERBS_ATTR_UHW_OUT, drv_out);
            self.optional();
        }
    }

    /// The value the kernel left in the slot's `data`: a new handle or fd
    /// (0 for the slot of an attribute that could not be encoded).
    pub fn data(&self, slot: AttrSlot) -> u64 {
        self.written().get(slot.0).map_or(0, |a| a.data)
    }

    /// True when the kernel wrote this output attribute (`UVERBS_ATTR_F_VALID_OUTPUT`).
    pub fn is_valid_output(&self, slot: AttrSlot) -> bool {
        self.written().get(slot.0).is_some_and(|a| a.flags & UVERBS_ATTR_F_VALID_OUTPUT as u16 != 0)
    }

    /// Fills in the header (`length`, `num_attrs`, `driver_id`) and returns
    /// the bytes the kernel will read. Exposed for byte-for-byte tests.
    pub fn finish(&mut self, driver_id: u32) -> Result<&[u8], Errno> {
        if self.overflow {
            return Err(Errno::E2BIG);
        }
        let hdr = &mut self.buf.hdr;
        hdr.length = (size_of::<ib_uverbs_ioctl_hdr>() + self.num * size_of::<ib_uverbs_attr>()) as u16;
        hdr.num_attrs = self.num as u16;
        hdr.driver_id = driver_id;
        let len = hdr.length as usize;
        // SAFETY: `Buf` is `repr(C)`: the header (24 bytes, no padding)
        // then the attributes (16 bytes each, no padding); `len` covers the
        // header and the `num` attributes `push` wrote, all initialised.
        Ok(unsafe { std::slice::from_raw_parts((&self.buf as *const Buf).cast::<u8>(), len) })
    }

    /// Issues `ioctl(fd, RDMA_VERBS_IOCTL, &hdr)`.
    pub(crate) fn execute(&mut self, fd: BorrowedFd<'_>, driver_id: u32) -> Result<(), Errno> {
        self.finish(driver_id)?;
        let ptr = &mut self.buf as *mut Buf;
        // The kernel may write back into the attributes (flags, data), which
        // is why the buffer is ours and mutable.
        // SAFETY: `ptr` is our header + `num` initialised attributes (`length`); each
        // attribute pointer refers to a buffer borrowed for `'a`, outliving this call.
        let rc = unsafe { nix::libc::ioctl(fd.as_raw_fd(), RDMA_VERBS_IOCTL as _, ptr) };
        Errno::result(rc).map(drop)
    }
}

/// Up to 8 bytes as the inline `data` of an attribute: the bytes in memory
/// order, zero-padded (the kernel reads `len` bytes from `&attr.data`).
/// Two overlapping fixed-size copies instead of a variable-length one,
/// which LLVM turns into a `memcpy` call (about 20 instructions with the
/// register shuffling around it, once per command).
#[inline]
fn inline_value(bytes: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    let n = bytes.len().min(8);
    if n >= 4 {
        out[..4].copy_from_slice(&bytes[..4]);
        out[n - 4..n].copy_from_slice(&bytes[n - 4..n]);
    } else if n >= 2 {
        out[..2].copy_from_slice(&bytes[..2]);
        out[n - 2..n].copy_from_slice(&bytes[n - 2..n]);
    } else if n == 1 {
        out[0] = bytes[0];
    }
    u64::from_ne_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_value_is_the_bytes_zero_padded() {
        let src = [1u8, 2, 3, 4, 5, 6, 7, 8];
        for n in 0..=8 {
            let mut want = [0u8; 8];
            want[..n].copy_from_slice(&src[..n]);
            assert_eq!(inline_value(&src[..n]), u64::from_ne_bytes(want), "{n} bytes");
        }
    }

    fn words(b: &[u8]) -> Vec<u64> {
        b.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// GET_CONTEXT for rxe, as `uverbs-abi.md` §2.7 spells it out.
    #[test]
    fn get_context_rxe_bytes() {
        let mut ncv = [0u8; 4];
        let mut core = [0u8; 8];
        let (p1, p2) = (ncv.as_mut_ptr() as u64, core.as_mut_ptr() as u64);
        let mut cmd = IoctlCmd::new(0, 3);
        cmd.out_bytes(0, &mut ncv);
        cmd.out_bytes(1, &mut core);
        let b = cmd.finish(14).unwrap().to_vec();
        assert_eq!(b.len(), 56);
        let mut want = vec![];
        want.extend_from_slice(&[56, 0, 0, 0, 3, 0, 2, 0]); // length, object, method, num_attrs
        want.extend_from_slice(&[0; 8]); // reserved1
        want.extend_from_slice(&[14, 0, 0, 0, 0, 0, 0, 0]); // driver_id, reserved2
        want.extend_from_slice(&[0, 0, 4, 0, 1, 0, 0, 0]); // attr 0: len 4, mandatory
        want.extend_from_slice(&p1.to_le_bytes());
        want.extend_from_slice(&[1, 0, 8, 0, 1, 0, 0, 0]); // attr 1: len 8, mandatory
        want.extend_from_slice(&p2.to_le_bytes());
        assert_eq!(b, want);
    }

    /// Small inputs are inlined little-endian; handles and fds have len 0;
    /// `optional` clears only the last attribute's mandatory bit; UHW ids.
    #[test]
    fn inline_handles_and_uhw() {
        let small = [0xaa, 0xbb, 0xcc];
        let big = [7u8; 20];
        let mut out = [0u8; 12];
        let out_ptr = out.as_mut_ptr() as u64;
        let mut cmd = IoctlCmd::new(3, 0);
        let h = cmd.new_obj(0);
        cmd.in_u32(1, 0x1234_5678);
        cmd.in_u64(2, 0xdead_beef_0000_0001);
        cmd.in_bytes(5, &small);
        cmd.optional();
        cmd.uhw(&big, &mut out);
        let b = cmd.finish(1).unwrap().to_vec();
        let w = words(&b);
        assert_eq!(w.len(), 3 + 2 * 6);
        assert_eq!(b[0..2], [24 + 16 * 6, 0]);
        assert_eq!(b[6..8], [6, 0]); // num_attrs
        assert_eq!(b[16..20], [1, 0, 0, 0]); // driver_id mlx5
                                             // attr 0: new handle
        assert_eq!(&b[24..32], &[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(w[4], 0);
        // attr 1: u32 inline
        assert_eq!(&b[40..44], &[1, 0, 4, 0]);
        assert_eq!(w[6], 0x1234_5678);
        // attr 2: u64 inline
        assert_eq!(&b[56..60], &[2, 0, 8, 0]);
        assert_eq!(w[8], 0xdead_beef_0000_0001);
        // attr 3: 3-byte inline, optional (flags 0)
        assert_eq!(&b[72..80], &[5, 0, 3, 0, 0, 0, 0, 0]);
        assert_eq!(w[10], 0x00cc_bbaa);
        // attr 4: UHW_IN 0x1000, pointer (20 > 8)
        assert_eq!(&b[88..94], &[0x00, 0x10, 20, 0, 0, 0]);
        assert_eq!(w[12], big.as_ptr() as u64);
        // attr 5: UHW_OUT 0x1001, pointer
        assert_eq!(&b[104..110], &[0x01, 0x10, 12, 0, 0, 0]);
        assert_eq!(w[14], out_ptr);
        assert_eq!(cmd.data(h), 0);
    }

    #[test]
    fn too_many_attributes_is_an_error_not_a_panic() {
        let mut cmd = IoctlCmd::new(0, 0);
        for i in 0..=MAX_ATTRS as u16 {
            cmd.in_u32(i, 0);
        }
        assert_eq!(cmd.finish(0).unwrap_err(), Errno::E2BIG);
    }
}
