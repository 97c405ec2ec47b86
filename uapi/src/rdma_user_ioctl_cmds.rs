//! `include/uapi/rdma/rdma_user_ioctl_cmds.h`: the `RDMA_VERBS_IOCTL` header
//! and its 16-byte attribute TLVs.
//!
//! Synced from rdma-core `kernel-headers/rdma/rdma_user_ioctl_cmds.h` at
//! commit `691953d8d502`. Kernel side: `drivers/infiniband/core/uverbs_ioctl.c`.
//!
//! The ioctl argument is a pointer to an [`ib_uverbs_ioctl_hdr`] immediately
//! followed by `num_attrs` [`ib_uverbs_attr`]s; `length` must be exactly
//! `24 + 16 * num_attrs`.
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `RDMA_IOCTL_MAGIC`: the ioctl "type" byte of every RDMA ioctl
/// (`Documentation/userspace-api/ioctl/ioctl-number.rst`).
pub const RDMA_IOCTL_MAGIC: u32 = 0x1b;

/// Linux `_IOC_*` encoding (asm-generic; powerpc's different bit split
/// yields the same number for this request).
const fn ioc_readwrite(ty: u32, nr: u32, size: usize) -> u32 {
    const IOC_READ_WRITE: u32 = 3;
    (IOC_READ_WRITE << 30) | ((size as u32) << 16) | (ty << 8) | nr
}

/// `RDMA_VERBS_IOCTL = _IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`
/// = `0xC018_1B01`. The header defines it with the `_IOWR` macro; here it is
/// computed from the struct size and pinned to the number the kernel
/// dispatches on (`uverbs_main.c:ib_uverbs_ioctl`).
pub const RDMA_VERBS_IOCTL: u32 = ioc_readwrite(RDMA_IOCTL_MAGIC, 1, core::mem::size_of::<ib_uverbs_ioctl_hdr>());
const _: () = assert!(RDMA_VERBS_IOCTL == 0xC018_1B01);

// anonymous enum: ib_uverbs_attr.flags bits
/// User input: the kernel must understand this attribute, else the call
/// fails with `EPROTONOSUPPORT`.
pub const UVERBS_ATTR_F_MANDATORY: u32 = 1;
/// Kernel output: set in the caller's attribute array when a `PTR_OUT`
/// attribute was written.
pub const UVERBS_ATTR_F_VALID_OUTPUT: u32 = 2;

/// `struct ib_uverbs_attr` (16 bytes): one ioctl attribute.
///
/// C unions flattened: `attr_data` is the `attr_data` union
/// (`enum_data.elem_id`, `enum_data.reserved` / `reserved`; see
/// [`elem_id`](Self::elem_id)), `data` is the `data`/`data_s64` union.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_attr {
    pub attr_id: u16,
    /// Payload length; must be 0 for IDR and FD attributes.
    pub len: u16,
    /// `UVERBS_ATTR_F_*`.
    pub flags: u16,
    /// Union `attr_data`: `{ u8 elem_id; u8 reserved; } enum_data` for
    /// `ENUM_IN` attributes, else `u16 reserved` (must be 0).
    pub attr_data: u16,
    /// Union of `__aligned_u64 data` and `__s64 data_s64`: inline value
    /// (payloads of at most 8 bytes, handles, fds) or a user pointer.
    pub data: u64,
}
assert_layout!(ib_uverbs_attr, size = 16, align = 8, attr_id = 0, len = 2, flags = 4, attr_data = 6, data = 8);

impl ib_uverbs_attr {
    /// `attr_data.enum_data.elem_id` (the first byte of `attr_data`).
    pub const fn elem_id(&self) -> u8 {
        self.attr_data.to_ne_bytes()[0]
    }

    /// Sets `attr_data.enum_data.elem_id` and zeroes `enum_data.reserved`.
    pub fn set_elem_id(&mut self, elem_id: u8) {
        self.attr_data = u16::from_ne_bytes([elem_id, 0]);
    }

    /// `data_s64`: the signed view of `data` (used by FD attributes).
    pub const fn data_s64(&self) -> i64 {
        self.data as i64
    }

    /// Stores `data_s64`.
    pub fn set_data_s64(&mut self, v: i64) {
        self.data = v as u64;
    }
}

/// `struct ib_uverbs_ioctl_hdr` (24 bytes), followed in memory by
/// `num_attrs` [`ib_uverbs_attr`]s (`attrs[]`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ioctl_hdr {
    /// `24 + 16 * num_attrs`, exactly.
    pub length: u16,
    pub object_id: u16,
    pub method_id: u16,
    pub num_attrs: u16,
    /// Must be 0 (`EPROTONOSUPPORT` otherwise).
    pub reserved1: u64,
    /// The device's `RDMA_DRIVER_*` id; must match (`EINVAL` otherwise).
    pub driver_id: u32,
    /// Must be 0 (`EPROTONOSUPPORT` otherwise).
    pub reserved2: u32,
    pub attrs: [ib_uverbs_attr; 0],
}
assert_layout!(
    ib_uverbs_ioctl_hdr,
    size = 24,
    align = 8,
    length = 0,
    object_id = 2,
    method_id = 4,
    num_attrs = 6,
    reserved1 = 8,
    driver_id = 16,
    reserved2 = 20,
    attrs = 24
);
