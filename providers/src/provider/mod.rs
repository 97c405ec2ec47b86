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

mod ah;
mod cq;
mod parking;
mod qp;
mod srq;

use std::sync::Arc;

use zerocopy::IntoBytes;

pub use ah::{AhCreate, KernelAh};
pub use cq::{CqCreate, CqDriver, KernelCq};
pub use qp::{KernelQp, ModifyError, QpCreate, RecvDriver, SendDriver};
pub use srq::{KernelSrq, SrqCreate, SrqDriver};

use crate::cmd::device::{self as cmd, ContextInfo};
use crate::driver::Provider;
use crate::sys::UverbsFd;
use crate::{mlx5, rxe, Result};

/// A provider's half of an open device context. Cheap to clone; every
/// object created through it keeps what it needs of it.
#[derive(Clone, Debug)]
pub struct ProviderContext {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    /// rxe: the address vectors of AHs the kernel gave no number (kernels
    /// before 5.16, or a forced legacy AV).
    Rxe(Arc<rxe::AvTable>),
    /// mlx5: UAR pages, doorbell-record pages, the QP/SRQ registry, user
    /// indexes, address vectors.
    Mlx5(mlx5::Context),
}

impl ProviderContext {
    /// Creates the fd's ucontext (`UVERBS_METHOD_GET_CONTEXT`,
    /// `ibv_open_device`) with `provider`'s driver data, and sets up the
    /// provider's half: mlx5 sends its `alloc_ucontext` request and reads
    /// the answer (UAR geometry, limits, CQE version) to allocate its UAR
    /// pages; rxe sends nothing. A driver rverbs has no provider for
    /// (`None`) gets a plain context it can query but not queue on.
    #[doc(alias = "ibv_open_device")]
    pub fn open(fd: &Arc<UverbsFd>, provider: Option<Provider>) -> Result<(ContextInfo, Option<ProviderContext>)> {
        match provider {
            Some(Provider::Rxe) => {
                let info = cmd::get_context(fd, &[], &mut [])?;
                Ok((info, Some(ProviderContext { kind: Kind::Rxe(rxe::AvTable::new(rxe::AV_NUM_FLAG)) })))
            }
            Some(Provider::Mlx5) => {
                let req = mlx5::ucontext_request();
                let mut drv_out = [0u8; mlx5::UCONTEXT_RESP_LEN];
                let info = cmd::get_context(fd, req.as_bytes(), &mut drv_out)?;
                let m = mlx5::Context::finish(fd, &mlx5::parse_ucontext_resp(&drv_out))?;
                Ok((info, Some(ProviderContext { kind: Kind::Mlx5(m) })))
            }
            None => Ok((cmd::get_context(fd, &[], &mut [])?, None)),
        }
    }

    /// Which provider this is.
    pub fn provider(&self) -> Provider {
        match self.kind {
            Kind::Rxe(_) => Provider::Rxe,
            Kind::Mlx5(_) => Provider::Mlx5,
        }
    }
}
