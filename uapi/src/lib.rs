//! The Linux RDMA userspace ABI (`include/uapi/rdma/*.h`) mirrored in Rust.
//!
//! Types and constants only: no syscalls, no `unsafe`, `#![no_std]`. Every
//! module mirrors one kernel uapi header (file name with `-` replaced by `_`);
//! the facts were re-expressed from rdma-core's `kernel-headers/rdma/` copy at
//! commit `691953d8d502` (2026-08-20), which matches the kernel 7.3 uapi.
//! Layouts were checked against gcc's `sizeof`/`offsetof` on x86_64 and
//! against the measured tables in `shared/reference/uverbs-abi.md` and
//! `providers.md`; every one of them is identical on kernels 6.1 and 6.12.
//!
//! | module | kernel header |
//! |---|---|
//! | [`rdma_user_ioctl_cmds`] | `rdma_user_ioctl_cmds.h`: ioctl header and attribute TLV |
//! | [`rdma_user_ioctl`] | `rdma_user_ioctl.h`: ioctl numbers |
//! | [`ib_user_ioctl_cmds`] | `ib_user_ioctl_cmds.h`: ioctl object, method and attribute ids |
//! | [`ib_user_ioctl_verbs`] | `ib_user_ioctl_verbs.h`: enums and structs used by the ioctl methods |
//! | [`ib_user_verbs`] | `ib_user_verbs.h`: the `write()` command set and its structs |
//! | [`ib_verbs_values`] | *not a uapi header*: values from `include/rdma/ib_verbs.h` and `libibverbs/verbs.h` that the ABI carries |
//! | [`rdma_netlink`] | `rdma_netlink.h`: RDMA netlink (`NETLINK_RDMA`) ids |
//! | [`rdma_user_cm`] | `rdma_user_cm.h`: the RDMA connection manager (`/dev/infiniband/rdma_cm`) |
//! | [`rdma_user_rxe`] | `rdma_user_rxe.h`: soft-RoCE (rxe) driver ABI |
//! | [`siw_abi`] | `siw-abi.h`: soft-iWARP (siw) driver ABI |
//! | [`mlx5_abi`] | `mlx5-abi.h`: mlx5 driver udata |
//! | [`mlx5_user_ioctl_cmds`] | `mlx5_user_ioctl_cmds.h`: mlx5 ioctl ids |
//! | [`mlx5_user_ioctl_verbs`] | `mlx5_user_ioctl_verbs.h`: mlx5 ioctl enums and structs |
//!
//! # Conventions
//!
//! - **Names** keep the kernel spelling exactly (`struct ib_uverbs_attr`,
//!   `UVERBS_METHOD_GET_CONTEXT`, `IB_USER_VERBS_CMD_QUERY_DEVICE`), so a grep
//!   for a kernel name finds the Rust item.
//! - **C enums** become plain `pub const NAME: T = value;` items, never Rust
//!   enums: the kernel may report values this crate does not know. `T` is:
//!   - `u16` for ioctl object, method and attribute ids (everything in
//!     [`ib_user_ioctl_cmds`] and the id enums of [`mlx5_user_ioctl_cmds`]),
//!     because `ib_uverbs_ioctl_hdr.object_id`/`method_id` and
//!     `ib_uverbs_attr.attr_id` are `u16`;
//!   - `u64` for enums that have values above `u32::MAX` or go into `u64`
//!     fields (`IB_UVERBS_DEVICE_*` capability bits, `MLX5_LIB_CAP_*`);
//!   - `u32` for everything else (the kernel's `enum` type), also where the
//!     value ends up in a `u8`/`u16` field: cast with `as` at the use site;
//!   - `usize` for the few `#define`s that size an array in a struct here
//!     (`LS_DEVICE_NAME_MAX`, `MLX5_IB_DW_MATCH_PARAM`, `ETH_ALEN`);
//!   - `u16` for `AF_INET`/`AF_INET6` (they go into `sa_family_t`).
//!
//!   Plain `#define`d numbers are `u32` too. Function-like macros become
//!   `const fn`s with the macro's name (`RDMA_NL_GET_TYPE`).
//! - **Structs** are `#[repr(C)]` and derive `Clone, Copy, Debug, Default`
//!   (or implement `Default` as all-zeroes) and zerocopy's `FromBytes,
//!   IntoBytes, Immutable, KnownLayout`. Every struct is followed by an
//!   [`assert_layout!`] that checks size, alignment and the offset of every
//!   field at compile time.
//! - **Padding**: zerocopy's `IntoBytes` rejects implicit padding, so where
//!   the C struct has implicit padding the Rust struct has an explicit
//!   `pub _pad0` byte field (documented at each site; there are three:
//!   `ib_uverbs_flow_action_esp_encap`, `rxe_global_route`,
//!   `rxe_send_wr_flush`). The kernel's own `reserved`/`pad`
//!   fields keep their names.
//! - **Flexible array members** (`driver_data[]`, `attrs[]`, `data[]`) become
//!   zero-length arrays `[T; 0]`, which keeps the C `sizeof` and alignment.
//! - **Unions** are flattened into their plain storage, sized and aligned as
//!   in C (e.g. `ib_uverbs_attr.attr_data: u16`, `data: u64`,
//!   `ib_uverbs_send_wr.wr: [u64; 4]`), with small accessors for the variants.
//!   Multi-field variants get their own `#[repr(C)]` struct (named
//!   `<outer>_<variant>`, e.g. `ib_uverbs_send_wr_ud`) plus a getter/setter
//!   pair on the outer struct.
//! - **Big-endian fields** (`__be16/__be32/__be64`, e.g.
//!   `ib_uverbs_query_device_resp.node_guid`, `ib_uverbs_wc` immediate data)
//!   are stored as native `u16/u32/u64` holding the raw wire bytes, exactly as
//!   the kernel copies them: use `u64::from_be(x)` to get the number and
//!   `u64::to_be(n)` to store one. Each such field says so in its doc.
//!   Raw GIDs are `[u8; 16]`.
//! - **Constants the headers do not define** but every user needs (ioctl
//!   request numbers, driver ABI versions, `NETLINK_RDMA`, the
//!   [`ib_verbs_values`] module) carry a comment naming their source.
//!
//! The asserted layouts are those of 64-bit Linux targets (x86_64, aarch64,
//! ...). On 32-bit x86 Rust's `u64` is only 4-byte aligned while the C
//! `__aligned_u64` is 8, so the `assert_layout!`s deliberately fail to
//! compile there rather than produce a silently different ABI.
#![no_std]
#![forbid(unsafe_code)]
#![allow(non_camel_case_types, non_upper_case_globals)]

/// Compile-time layout check for a `#[repr(C)]` ABI struct.
///
/// ```
/// # use rverbs_uapi::assert_layout;
/// #[repr(C)]
/// struct pair { a: u32, b: u64 }
/// assert_layout!(pair, size = 16, align = 8, a = 0, b = 8);
/// ```
///
/// Expands to a `const _: () = { ... };` block of `assert!`s on
/// `size_of`, `align_of` and `offset_of!` for each listed field, so a wrong
/// layout fails `cargo build`, not just `cargo test`.
#[macro_export]
macro_rules! assert_layout {
    ($t:ty, size = $size:expr, align = $align:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = {
            assert!(
                ::core::mem::size_of::<$t>() == $size,
                concat!("wrong size of ", stringify!($t))
            );
            assert!(
                ::core::mem::align_of::<$t>() == $align,
                concat!("wrong alignment of ", stringify!($t))
            );
            $(
                assert!(
                    ::core::mem::offset_of!($t, $field) == $off,
                    concat!("wrong offset of ", stringify!($t), ".", stringify!($field))
                );
            )*
        };
    };
}

/// Reads union variant `V` from the start of a flattened union's storage.
///
/// Every variant struct is const-asserted to fit its storage next to its
/// definition, so the error arm is unreachable.
pub(crate) fn union_get<V, S>(storage: &S) -> V
where
    V: zerocopy::FromBytes,
    S: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized,
{
    match V::read_from_prefix(storage.as_bytes()) {
        Ok((v, _)) => v,
        Err(_) => panic!("union variant larger than its storage"),
    }
}

/// Writes union variant `V` at the start of a flattened union's storage and
/// zeroes the rest of the storage (so no stale bytes of another variant reach
/// the kernel).
pub(crate) fn union_set<V, S>(storage: &mut S, v: &V)
where
    V: zerocopy::IntoBytes + zerocopy::Immutable,
    S: zerocopy::FromBytes + zerocopy::IntoBytes + ?Sized,
{
    let dst = storage.as_mut_bytes();
    let src = v.as_bytes();
    dst.fill(0);
    dst[..src.len()].copy_from_slice(src);
}

pub mod ib_user_ioctl_cmds;
pub mod ib_user_ioctl_verbs;
pub mod ib_user_verbs;
pub mod ib_verbs_values;
pub mod mlx5_abi;
pub mod mlx5_user_ioctl_cmds;
pub mod mlx5_user_ioctl_verbs;
pub mod rdma_netlink;
pub mod rdma_user_cm;
pub mod rdma_user_ioctl;
pub mod rdma_user_ioctl_cmds;
pub mod rdma_user_rxe;
pub mod siw_abi;

#[cfg(test)]
mod tests;
