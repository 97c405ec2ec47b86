//! The driver side of rverbs: the command transport to the uverbs fd (the
//! only syscall site), the provider table and the vendor providers.
//!
//! Dependencies flow one way: `rverbs-uapi` <- `rverbs-providers` <- `rverbs`.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod ah_table;
pub mod cm;
pub mod cmd;
pub mod driver;
pub mod error;
pub mod pool;
pub mod provider;
pub mod qp_state;
pub mod rxe;
pub mod siw;
pub mod spin;
pub mod sys;
pub mod wr;

#[cfg(test)]
mod proptest_config;

pub use error::{Errno, Error, ErrorKind, Result};
pub mod mlx5;
