//! The provider-neutral core: everything `rverbs` does that differs between
//! providers goes through here, so the safe API above never names one.
//!
//! A [`ProviderContext`] is the provider's half of an open device. It owns
//! every create — prepare (mlx5 allocates queue memory and builds its
//! driver data) → the kernel command → finish (rxe maps the rings the
//! kernel made; mlx5 parses the answer and registers the QP) → rollback
//! (if finishing fails, destroy the kernel object before the memory it
//! uses is freed) — and returns two things:
//!
//! - a `Kernel*` value ([`KernelCq`], [`KernelQp`], [`KernelSrq`],
//!   [`KernelAh`]): the kernel object and the provider state that must
//!   live exactly as long as it, with the destroy sequence the provider
//!   needs (mlx5: parked queue memory, completions cleaned from CQs, the
//!   registry entry removed only after the kernel destroy);
//! - the data-path drivers ([`CqDriver`], [`SendDriver`], [`RecvDriver`],
//!   [`SrqDriver`]): closed enums over the providers (no `dyn`, generated
//!   from the one list of providers below), polled
//!   and posted through `&mut` with no lock and no syscall but rxe's send
//!   doorbell.
//!
//! The vendor types stay private: the drivers are structs around private
//! enums, so code outside this crate can only call what is sound.
//!
//! # Adding a provider
//! 1. `providers/src/driver.rs`: a [`Provider`] variant, its driver id in
//!    `DriverId::provider`, its ABI range and firmware format.
//! 2. `providers/src/<vendor>/`: the rings, WQE/CQE formats and the driver
//!    data of each create command; in its `provider.rs`, the traits of
//!    `ops.rs` on its context type: `ProviderOps` (open, with its
//!    `GET_CONTEXT` driver data), `CqOps`, `SrqOps`, `QpOps` and `AhOps`
//!    (each create's prepare and finish with their driver data, and the
//!    lifecycle hooks), `CqPoll`, `SendPost` and `RecvPost` (the fast
//!    paths). Hooks default to nothing; a missing feature answers
//!    `EOPNOTSUPP`. Per-provider facts are associated consts there too
//!    (`ProviderOps::REG_MR_UDATA_LEN`, `AhOps::AH_NEEDS_GID_TYPE`,
//!    `CqPoll::INLINE`, ...), with the common answer as their default.
//! 3. This module: one line in the `providers!` list. It generates the
//!    enums and every `match` over them, so the compiler lists whatever
//!    the provider has not implemented; no other file here names a vendor.
//! 4. `uapi/src/`: the vendor's ABI header, if it has driver data.
//!
//! Nothing in the `rverbs` crate (`src/`) changes.
#![allow(unsafe_code)] // only to call the `unsafe` create commands; each block says why

use std::sync::Arc;

pub use ah::{AhCreate, KernelAh};
pub use cq::{CqCreate, CqDriver, CqUser, KernelCq};
pub(crate) use ops::{
    imm_to_net, modify_srq_limit, qp_type_unsupported, AhOps, CqOps, CqPoll, CqRef, ProviderOps, QpOps, RecvPost,
    ResizeError, SendPost, SrqOps,
};
pub use qp::{KernelQp, ModifyError, QpCreate, RecvDriver, SendDriver};
pub use srq::{KernelSrq, SrqCreate, SrqDriver, SrqUser};

use crate::cmd::device::{self as cmd, ContextInfo};
use crate::driver::Provider;
use crate::sys::UverbsFd;
use crate::Result;

/// `Variant` and `VariantMut` of enum `$E` for provider `$T` (variant `$P`,
/// holding `$Of`).
macro_rules! variant {
    ($E:ident, $P:ident, $T:ty, $Of:ty) => {
        impl Variant<$T> for $E {
            type Of = $Of;
            #[allow(unreachable_patterns)]
            fn of(&self) -> Option<&$Of> {
                match self {
                    $E::$P(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: $Of) -> Self {
                $E::$P(v)
            }
        }
        impl VariantMut<$T> for $E {
            #[allow(unreachable_patterns)]
            fn of_mut(&mut self) -> Option<&mut $Of> {
                match self {
                    $E::$P(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

/// Generates, from the one list of providers, the enums the dispatch
/// matches on (one variant per provider, holding that provider's type for
/// the object) and the `each!` macro that writes a `match` with one arm per
/// provider. A provider is a variant name (the [`Provider`] variant too)
/// and its context type, which implements the traits of [`ops`].
/// Invoked once, below.
macro_rules! providers {
    ($d:tt ; $($P:ident => $T:ty),+ $(,)?) => {
        /// The provider's half of an open context.
        #[derive(Clone, Debug)]
        enum Kind { $($P($T)),+ }

        /// A CQ's driver. An explicit tag: a niche in a provider's driver
        /// would cost every poll a few instructions to decode.
        #[derive(Debug)]
        #[repr(u32)]
        enum Drv {
            $($P(<$T as CqOps>::Cq),)+
            /// A resize failed after the kernel had moved the CQ to a new
            /// ring that could not be mapped: the old ring gets no more
            /// completions.
            Dead,
            /// Moved out (parked or dropped): polls nothing.
            Gone,
        }

        /// A QP's send-half driver.
        #[derive(Debug)]
        enum SendDrv { $($P(<$T as QpOps>::Send)),+ }

        /// A QP's receive-half driver.
        #[derive(Debug)]
        enum RecvDrv { $($P(<$T as QpOps>::Recv)),+ }

        /// What lives as long as a kernel QP.
        #[derive(Debug)]
        enum QpProv {
            /// Nothing beyond the kernel object: a QP whose provider half
            /// never came to be (a failed finish).
            KernelOnly,
            $($P(<$T as QpOps>::QpState)),+
        }

        /// What a provider keeps for a kernel AH, held for its `Drop`
        /// (which forgets the AH's number).
        #[derive(Debug)]
        enum AhProv {
            /// Nothing: an AH whose provider half never came to be.
            KernelOnly,
            $($P(<$T as AhOps>::Ah)),+
        }

        /// An SRQ's driver.
        #[derive(Debug)]
        enum SrqDrv {
            $($P(<$T as SrqOps>::Srq),)+
            /// Moved out (parked or dropped): posts nothing.
            Gone,
        }

        /// What lives as long as a kernel SRQ.
        #[derive(Debug)]
        enum SrqProv {
            /// Nothing beyond the kernel object: an SRQ whose provider half
            /// never came to be (a failed finish).
            KernelOnly,
            $($P(<$T as SrqOps>::SrqState)),+
        }

        /// What lives as long as a kernel CQ.
        #[derive(Debug)]
        enum CqProv {
            /// Nothing beyond the kernel object: a CQ whose provider half
            /// never came to be (a failed finish).
            KernelOnly,
            $($P(<$T as CqOps>::CqState)),+
        }

        $(
            variant!(Kind, $P, $T, $T);
            variant!(Drv, $P, $T, <$T as CqOps>::Cq);
            variant!(CqProv, $P, $T, <$T as CqOps>::CqState);
            variant!(SrqDrv, $P, $T, <$T as SrqOps>::Srq);
            variant!(SrqProv, $P, $T, <$T as SrqOps>::SrqState);
            variant!(SendDrv, $P, $T, <$T as QpOps>::Send);
            variant!(RecvDrv, $P, $T, <$T as QpOps>::Recv);
            variant!(QpProv, $P, $T, <$T as QpOps>::QpState);
            variant!(AhProv, $P, $T, <$T as AhOps>::Ah);
        )+

        /// `each!(value, Enum, T, x => body; other arms)`: a `match` of
        /// `value` with one arm per provider, `Enum::<provider>(x) => body`,
        /// in which `T` names the provider's context type; then the other
        /// arms, if any (the enum's variants that are no provider's).
        macro_rules! each {
            ($d value:expr, $d E:ident, $d T:ident, $d x:pat => $d body:expr $d(; $d($d rest:tt)*)?) => {
                match $d value {
                    $( $d E::$P($d x) => {
                        #[allow(dead_code)]
                        type $d T = $T;
                        $d body
                    } )+
                    $d($d($d rest)*)?
                }
            };
        }

        impl ProviderContext {
            fn open_kind(fd: &Arc<UverbsFd>, provider: Provider) -> Result<(ContextInfo, Kind)> {
                match provider {
                    $(Provider::$P => {
                        let (info, ctx) = <$T as ProviderOps>::open(fd)?;
                        Ok((info, Kind::$P(ctx)))
                    })+
                }
            }

            /// Which provider this is.
            pub fn provider(&self) -> Provider {
                match self.kind {
                    $(Kind::$P(_) => Provider::$P),+
                }
            }
        }

        impl Provider {
            /// Bytes of driver data `REG_MR` carries each way, zeros in and
            /// the answer unread (`ibv_reg_mr`): siw requires
            /// `siw_ureq_reg_mr` and room for `siw_uresp_reg_mr` (without
            /// them: `EINVAL`); rxe and mlx5 take none. The provider's
            /// `ProviderOps::REG_MR_UDATA_LEN`.
            pub fn reg_mr_udata_len(self) -> usize {
                match self {
                    $(Provider::$P => <$T as ProviderOps>::REG_MR_UDATA_LEN),+
                }
            }

            /// Whether `create_ah` uses the source GID's type (mlx5: RoCE
            /// v1 or v2 in its address vector; read from the kernel unless
            /// the caller gives it). rxe and siw do not: rverbs then reads
            /// no GID entry per AH. The provider's `AhOps::AH_NEEDS_GID_TYPE`.
            pub fn ah_needs_gid_type(self) -> bool {
                match self {
                    $(Provider::$P => <$T as AhOps>::AH_NEEDS_GID_TYPE),+
                }
            }
        }
    };
}

// The providers: the one list. (The leading `$` is for the `each!` macro
// it defines: a macro can only write a `$` it was given.)
providers! { $;
    Rxe => crate::rxe::Context,
    Mlx5 => crate::mlx5::Context,
    Siw => crate::siw::Context,
}

/// The value of provider `T`'s variant of a provider enum, if it is `T`'s.
trait Variant<T> {
    type Of;
    fn of(&self) -> Option<&Self::Of>;
    /// `T`'s variant holding `v`.
    fn wrap(v: Self::Of) -> Self;
}

/// [`Variant`] through `&mut`.
trait VariantMut<T>: Variant<T> {
    fn of_mut(&mut self) -> Option<&mut Self::Of>;
}

// The submodules come after `providers!`: they use its `each!`.
mod ah;
mod cq;
mod ops;
mod parking;
mod qp;
mod srq;

/// A provider's half of an open device context. Cheap to clone; every
/// object created through it keeps what it needs of it.
#[derive(Clone, Debug)]
pub struct ProviderContext {
    kind: Kind,
}

impl ProviderContext {
    /// Creates the fd's ucontext (`UVERBS_METHOD_GET_CONTEXT`,
    /// `ibv_open_device`) with `provider`'s driver data, and sets up the
    /// provider's half (mlx5 reads the UAR geometry, limits and CQE
    /// version it allocates its UAR pages from; rxe sends nothing). A
    /// driver rverbs has no provider for (`None`) gets a plain context it
    /// can query but not queue on.
    #[doc(alias = "ibv_open_device")]
    pub fn open(fd: &Arc<UverbsFd>, provider: Option<Provider>) -> Result<(ContextInfo, Option<ProviderContext>)> {
        match provider {
            Some(p) => {
                let (info, kind) = Self::open_kind(fd, p)?;
                Ok((info, Some(ProviderContext { kind })))
            }
            None => Ok((cmd::get_context(fd, &[], &mut [])?, None)),
        }
    }
}
