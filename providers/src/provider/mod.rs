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
//!   [`SrqDriver`]): closed enums over the providers (no `dyn`), polled
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
//!    data of each create command.
//! 3. This module: a `Kind` variant in `mod.rs` ([`ProviderContext::open`]:
//!    its `GET_CONTEXT` driver data), and one arm per `match` in `cq.rs`,
//!    `qp.rs`, `srq.rs` and `ah.rs` (create, destroy extras, the driver
//!    enums' dispatch). The compiler lists every place: the matches are
//!    exhaustive, with no fall-through arm.
//! 4. `uapi/src/`: the vendor's ABI header, if it has driver data.
//!
//! Nothing in the `rverbs` crate (`src/`) changes.
#![allow(unsafe_code)] // only to call the `unsafe` create commands; each block says why

use std::sync::Arc;

pub use ah::{AhCreate, KernelAh};
pub use cq::{CqCreate, CqDriver, KernelCq};
pub(crate) use ops::{imm_to_net, CqOps, CqPoll, CqRef, ProviderOps, ResizeError};
pub use qp::{KernelQp, ModifyError, QpCreate, RecvDriver, SendDriver};
pub use srq::{KernelSrq, SrqCreate, SrqDriver};

use crate::cmd::device::{self as cmd, ContextInfo};
use crate::driver::Provider;
use crate::sys::UverbsFd;
use crate::Result;

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

        /// What lives as long as a kernel CQ.
        #[derive(Debug)]
        enum CqProv {
            /// Nothing beyond the kernel object: a CQ whose provider half
            /// never came to be (a failed finish).
            KernelOnly,
            $($P(<$T as CqOps>::CqState)),+
        }

        $(
            impl Variant<$T> for Kind {
                type Of = $T;
                #[allow(unreachable_patterns)]
                fn of(&self) -> Option<&$T> {
                    match self { Kind::$P(v) => Some(v), _ => None }
                }
                fn wrap(v: $T) -> Self {
                    Kind::$P(v)
                }
            }
            impl Variant<$T> for Drv {
                type Of = <$T as CqOps>::Cq;
                #[allow(unreachable_patterns)]
                fn of(&self) -> Option<&Self::Of> {
                    match self { Drv::$P(v) => Some(v), _ => None }
                }
                fn wrap(v: Self::Of) -> Self {
                    Drv::$P(v)
                }
            }
            impl VariantMut<$T> for Drv {
                #[allow(unreachable_patterns)]
                fn of_mut(&mut self) -> Option<&mut Self::Of> {
                    match self { Drv::$P(v) => Some(v), _ => None }
                }
            }
            impl Variant<$T> for CqProv {
                type Of = <$T as CqOps>::CqState;
                #[allow(unreachable_patterns)]
                fn of(&self) -> Option<&Self::Of> {
                    match self { CqProv::$P(v) => Some(v), _ => None }
                }
                fn wrap(v: Self::Of) -> Self {
                    CqProv::$P(v)
                }
            }
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
    };
}

// The providers: the one list. (The leading `$` is for the `each!` macro
// it defines: a macro can only write a `$` it was given.)
providers! { $;
    Rxe => crate::rxe::Context,
    Mlx5 => crate::mlx5::Context,
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
