//! The mlx5 provider (NVIDIA ConnectX-4 and later): driver id 1
//! (`RDMA_DRIVER_MLX5`), driver ABI 1 (`MLX5_IB_UVERBS_ABI_VERSION`).
//!
//! With mlx5, userspace allocates all queue memory (CQ buffer, QP/SRQ
//! buffers, doorbell records) and passes the addresses in the create
//! commands' driver data; the kernel pins them. Doorbells are a doorbell
//! record in that memory plus a store to a UAR page mapped from the uverbs
//! fd. Completions are owned by an owner bit that flips on every pass.
//! Nothing on the data path is a syscall. See `docs/MLX5.md` for the
//! layouts, what differs from rxe, and what has not been verified on
//! hardware (everything at run time: there was no mlx5 device here).
//!
//! # Integration surface (for this crate's provider-neutral layer)
//!
//! The create / destroy sequence below is crate-internal: each step hands
//! over memory the HCA reaches (dropping a `Pending*` or a [`Cq`] frees it,
//! a state change clears the doorbell record the HCA reads, a clean hands
//! WQEs back to an SRQ), so calling one out of order reaches undefined
//! behaviour. Those steps are `pub(crate)`: `provider/` calls them in
//! order, and nothing outside this crate can. What stays public is what
//! cannot break that order:
//! the post and poll methods ([`SendQueue::post`] is `unsafe` only for
//! INLINE payloads), the accessors, the sizing functions and the layouts.
//! None of these compiles outside the crate:
//!
//! ```compile_fail,E0599
//! // The UAR writer of a queue (its stores reach the device).
//! fn f(q: &rverbs_providers::mlx5::SendQueue<rverbs_providers::mlx5::UarMmio>) {
//!     let _ = q.mmio();
//! }
//! ```
//! ```compile_fail,E0599
//! fn f(c: &rverbs_providers::mlx5::Cq) {
//!     let _ = c.mmio();
//! }
//! ```
//! ```compile_fail,E0599
//! // Freeing a QP's memory without the kernel destroy.
//! fn f(ctx: &rverbs_providers::mlx5::Context, qp: rverbs_providers::mlx5::Qp) {
//!     ctx.qp_destroyed(qp);
//! }
//! ```
//! ```compile_fail,E0624
//! // Phase two of a create, out of the provider-neutral layer's order.
//! fn f(ctx: &rverbs_providers::mlx5::Context, p: rverbs_providers::mlx5::PendingQp) {
//!     let _ = ctx.qp_finish(p, &[], 0);
//! }
//! ```
//! ```compile_fail
//! // A state change that clears the doorbell record the HCA reads.
//! fn f(qp: &rverbs_providers::mlx5::Qp) {
//!     qp.on_state_change(0);
//! }
//! ```
//!
//! Open (`GET_CONTEXT`):
//! - [`ucontext_request()`] → `mlx5_ib_alloc_ucontext_req_v2` as the driver
//!   data in; [`UCONTEXT_RESP_LEN`] bytes of driver data out.
//! - [`Context::finish(fd, &resp)`](Context::finish) → [`Context`]: parses
//!   the answer ([`parse_ucontext_resp`]), allocates/maps the UAR pages
//!   (dynamic scheme: `MLX5_IB_METHOD_UAR_OBJ_ALLOC` when `tot_bfregs == 0`;
//!   static scheme otherwise). `Context` is a cheap `Clone` (an `Arc`).
//!
//! Create, two phases each; `prepare` allocates and returns the driver data
//! in, `finish` consumes the driver data out. If the kernel create fails,
//! drop the `Pending*` (rollback). If `finish` fails, the `Pending*` comes
//! back in [`FinishError`]: destroy the kernel object first, then drop it.
//! - CQ: `Context::cq_prepare(cqe)` → `(PendingCq, mlx5_ib_create_cq)`;
//!   core `cqe` = [`PendingCq::core_cqe`];
//!   `Context::cq_finish(pending, drv_out, kernel_cqe)` → [`Cq`] with
//!   `poll(&mut self, &mut [Wc]) -> usize`, `poll_one(&mut self, &mut Wc) -> bool`,
//!   `arm(&mut self, solicited)`,
//!   `on_event(&mut self)` (call it for every completion event read from
//!   the channel for this CQ), `clean_qp`. Driver data out:
//!   [`CQ_RESP_LEN`] bytes.
//! - SRQ: `Context::srq_prepare(max_wr, max_sge)` →
//!   `(PendingSrq, mlx5_ib_create_srq)`; core `max_wr`/`max_sge` from
//!   [`PendingSrq::core_max_wr`]/[`core_max_sge`](PendingSrq::core_max_sge);
//!   `Context::srq_finish(pending, drv_out)` → [`Srq`] with
//!   `post(&mut self, &[RecvWr])`. Driver data out: [`SRQ_RESP_LEN`].
//! - QP: `Context::qp_prepare(&QpPrepareArgs)` →
//!   `(PendingQp, mlx5_ib_create_qp)`; core caps = [`PendingQp::core_caps`],
//!   caps to report = [`PendingQp::caps`];
//!   `Context::qp_finish(pending, drv_out, qpn)` → [`Qp`] = [`SendQueue`]
//!   (`unsafe post(&mut self, &[SendWr])`, unsafe only for INLINE payloads,
//!   exactly like rxe's `SendRing::post`) + optional [`RecvQueue`]
//!   (`post(&mut self, &[RecvWr])`) + shared state. Post semantics are
//!   rxe's: requests before the refused one are posted, none after, nothing
//!   half-written, one doorbell per call. Driver data out: [`QP_RESP_LEN`].
//! - AH: [`Context::ah_create(&AhAttr, drv_out)`](Context::ah_create) →
//!   [`Ah`] (send `drv_out` of [`AH_RESP_LEN`] bytes with the kernel
//!   CREATE_AH: it carries the RoCE destination MAC). Put
//!   [`Ah::ah_num`] into [`UdDest::ah_num`](crate::wr::UdDest).
//!
//! State: after every successful MODIFY_QP call
//! `QpShared::on_state_change(new_state)` (sends need RTS or later,
//! receives INIT or later; RESET starts a new epoch and clears the doorbell
//! record; then also `Cq::clean_qp` on both CQs, or `Context::request_clean`,
//! before the QP leaves RESET: [`Context::clean_pending`]).
//!
//! Destroy (memory must outlive the kernel object, providers.md §B.9):
//! kernel destroy first; then `QpShared::leave_registry` for a QP (a
//! QP just dropped stays registered, i.e. leaked, never freed under the
//! HCA) and `Context::request_clean` for each of its CQs (the CQ runs the
//! clean, [`Cq::apply_cleans`], at its next poll, before reading any entry,
//! and the request holds the QP, and so its user index, until then), or
//! `Cq::clean_qp` on a CQ at hand; `Context::srqn_destroyed` for an SRQ;
//! `Context::cq_destroyed` before a CQ's destroy (it drops the cleans
//! requested of it), and the [`Cq`] is dropped after its kernel destroy
//! (`mem::forget` it if the destroy fails).
//!
//! How CQs find the work-request ids: every QP's [`QpShared`] (slot →
//! wr_id arrays, retire counters, its SRQ) is registered in the context
//! under its user index (CQE version 1, the default) or QPN (version 0);
//! a CQ caches the last lookup.
//!
//! Hardware effects go through seams so the HCA model can watch them:
//! [`Mmio`] (UAR / BlueFlame stores, `unsafe`; [`UarMmio`] is the real one)
//! and the DMA memory itself. The crate-internal `*_finish_with` variants
//! take the seam.
//!
//! Unsafe code is denied in this module tree except in the files that
//! touch shared memory or MMIO: `barrier.rs`, `mem.rs`, `mmio.rs`,
//! `uar.rs`, `qp.rs`, `send.rs`, `recv.rs`, `srq.rs`, `cq.rs`, the model and
//! the benchmark fixtures; each says so in its header and every block has a `SAFETY` note.
#![deny(unsafe_code)]

pub mod ah;
pub mod barrier;
#[cfg(feature = "mock")]
#[doc(hidden)]
pub mod bench;
pub mod cq;
pub mod cqe;
// Memory the HCA reaches by DMA: crate-internal.
pub(crate) mod mem;
pub mod mmio;
// The HCA model writes wherever its "kernel" was told: crate-internal (the
// `bench` fixtures expose it only over memory they own).
#[cfg(any(test, feature = "mock"))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod model;
// The provider interface's implementation.
mod provider;
pub mod qp;
pub mod recv;
pub mod seg;
pub mod send;
pub mod srq;
pub mod table;
pub mod uar;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_model;

use std::sync::Arc;

use rverbs_uapi::mlx5_abi::{
    mlx5_ib_alloc_ucontext_req_v2, mlx5_ib_alloc_ucontext_resp, mlx5_ib_create_ah_resp, mlx5_ib_create_cq_resp,
    mlx5_ib_create_qp_resp, mlx5_ib_create_srq_resp, MLX5_LIB_CAP_4K_UAR, MLX5_LIB_CAP_DYN_UAR,
    MLX5_USER_CMDS_SUPP_UHW_CREATE_AH,
};
use zerocopy::FromBytes;

pub use ah::{Ah, AhAttr, Grh};
pub use cq::{Cq, PendingCq};
pub use mmio::{Mmio, UarMmio};
pub use qp::{FinishError, PendingQp, Qp, QpCaps, QpPrepareArgs, QpShared, QpSizes, QpType};
pub use recv::RecvQueue;
pub use send::SendQueue;
pub use srq::{PendingSrq, Srq, SrqShared};

use crate::mlx5::ah::AhTable;
use crate::mlx5::mem::DbRecPool;
use crate::mlx5::table::{IdAlloc, Registry};
use crate::mlx5::uar::{KernelUars, UarPool, UarSource, NON_FP_BFREGS_PER_UAR, UAR_SIZE};
use crate::sys::UverbsFd;
use crate::{Errno, Error, Result};

/// `RDMA_DRIVER_MLX5`.
pub const DRIVER_ID: u32 = rverbs_uapi::ib_user_ioctl_verbs::RDMA_DRIVER_MLX5;
/// The driver ABI this provider speaks (`MLX5_IB_UVERBS_ABI_VERSION`).
pub const ABI_VERSION: u32 = rverbs_uapi::mlx5_abi::MLX5_IB_UVERBS_ABI_VERSION;

/// Driver response length of GET_CONTEXT (`mlx5_ib_alloc_ucontext_resp`).
pub const UCONTEXT_RESP_LEN: usize = size_of::<mlx5_ib_alloc_ucontext_resp>();
/// Driver response length of create CQ (`mlx5_ib_create_cq_resp`).
pub const CQ_RESP_LEN: usize = size_of::<mlx5_ib_create_cq_resp>();
/// Driver response length of create QP (`mlx5_ib_create_qp_resp`).
pub const QP_RESP_LEN: usize = size_of::<mlx5_ib_create_qp_resp>();
/// Driver response length of create SRQ (`mlx5_ib_create_srq_resp`).
pub const SRQ_RESP_LEN: usize = size_of::<mlx5_ib_create_srq_resp>();
/// Driver response length of create AH (`mlx5_ib_create_ah_resp`).
pub const AH_RESP_LEN: usize = size_of::<mlx5_ib_create_ah_resp>();

/// rdma-core's default number of low-latency (dedicated) registers.
pub const DEFAULT_LOW_LAT_BFREGS: u32 = 4;

pub(crate) fn parse<T: FromBytes>(verb: &'static str, b: &[u8]) -> Result<T> {
    T::read_from_prefix(b).map(|(v, _)| v).map_err(|_| {
        Error::check(verb, Errno::EPROTO)
            .with_message(format!("the kernel's mlx5 answer is {} bytes, too short", b.len()))
    })
}

/// The GET_CONTEXT driver data for a system page size of `page_size`
/// (rdma-core `mlx5_alloc_context` defaults): `total_num_bfregs =
/// align(max(page_size / 4096 * 2, 16), 2)`, `num_low_latency_bfregs =
/// max(4, total - 12)`, CQE version 1, lib caps 4K-UAR | dynamic UAR. No
/// DEVX (rdma-core asks for it and retries without; nothing here needs it).
pub fn ucontext_request_for(page_size: usize) -> mlx5_ib_alloc_ucontext_req_v2 {
    let per_page = (page_size / UAR_SIZE) as u32 * NON_FP_BFREGS_PER_UAR;
    let total = per_page.max(16).next_multiple_of(NON_FP_BFREGS_PER_UAR);
    mlx5_ib_alloc_ucontext_req_v2 {
        total_num_bfregs: total,
        num_low_latency_bfregs: DEFAULT_LOW_LAT_BFREGS.max(total.saturating_sub(12)),
        flags: 0,
        comp_mask: 0,
        max_cqe_version: 1,
        reserved0: 0,
        reserved1: 0,
        reserved2: 0,
        lib_caps: MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR,
    }
}

/// [`ucontext_request_for`] this system's page size.
pub fn ucontext_request() -> mlx5_ib_alloc_ucontext_req_v2 {
    ucontext_request_for(crate::sys::event::page_size())
}

/// `MLX5_SHUT_UP_BF` as libmlx5 reads it: set to anything but `0` turns
/// BlueFlame off (8-byte doorbells only, NC UAR pages).
pub fn shut_up_bf() -> bool {
    std::env::var_os("MLX5_SHUT_UP_BF").is_some_and(|v| v != "0")
}

/// Parses the GET_CONTEXT driver data out (a short answer from an old
/// kernel leaves the missing fields 0).
pub fn parse_ucontext_resp(drv_out: &[u8]) -> mlx5_ib_alloc_ucontext_resp {
    let mut b = [0u8; UCONTEXT_RESP_LEN];
    let n = drv_out.len().min(UCONTEXT_RESP_LEN);
    b[..n].copy_from_slice(&drv_out[..n]);
    mlx5_ib_alloc_ucontext_resp::read_from_bytes(&b).expect("exact size")
}

/// What the kernel told us about the device at GET_CONTEXT, normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `1 << log_max_qp`.
    pub qp_tab_size: u32,
    /// BlueFlame register size; 0: no write-combining, no BlueFlame.
    pub bf_reg_size: u32,
    /// Static registers; 0: dynamic UARs.
    pub tot_bfregs: u32,
    /// Doorbell-record stride.
    pub cache_line_size: u32,
    /// Largest send WQE in bytes.
    pub max_sq_desc_sz: u16,
    /// Largest receive WQE in bytes.
    pub max_rq_desc_sz: u16,
    /// Largest send queue in WQEBBs.
    pub max_send_wqebb: u32,
    /// Largest receive queue.
    pub max_recv_wr: u32,
    /// Largest SRQ.
    pub max_srq_recv_wr: u32,
    /// Ports.
    pub num_ports: u16,
    /// CQE version (1: user index in CQEs).
    pub cqe_version: u8,
    /// `MLX5_USER_CMDS_SUPP_UHW_*`.
    pub cmds_supp_uhw: u8,
    /// UARs per system page (1 on old kernels).
    pub num_uars_per_page: u32,
    /// System page size.
    pub page_size: usize,
}

impl DeviceInfo {
    /// From the GET_CONTEXT answer, with rdma-core's fix-ups (old kernels
    /// report 0 for the UAR geometry: one UAR per page).
    pub fn from_resp(resp: &mlx5_ib_alloc_ucontext_resp, page_size: usize) -> Result<DeviceInfo> {
        const VERB: &str = "ibv_open_device";
        if resp.cqe_version > 1 {
            return Err(Error::check(VERB, Errno::EPROTO).with_message(format!(
                "the kernel chose CQE version {}, this provider knows 0 and 1",
                resp.cqe_version
            )));
        }
        // BlueFlame halves of at least 64 bytes: a copy is whole 64-byte
        // blocks into one half (rdma-core assumes the same).
        if resp.bf_reg_size != 0 && (!resp.bf_reg_size.is_power_of_two() || !(128..=2048).contains(&resp.bf_reg_size)) {
            return Err(
                Error::check(VERB, Errno::EPROTO).with_message(format!("BlueFlame register size {}", resp.bf_reg_size))
            );
        }
        let num_uars_per_page =
            if resp.log_uar_size == 0 && resp.num_uars_per_page == 0 { 1 } else { resp.num_uars_per_page.max(1) };
        // The kernel's PAGE_SIZE / 4096 at most: more would place UARs past
        // the page it maps (and overflow the register arithmetic).
        if num_uars_per_page as usize > (page_size / UAR_SIZE).max(1) {
            return Err(Error::check(VERB, Errno::EPROTO)
                .with_message(format!("{num_uars_per_page} UARs per page of {page_size} bytes")));
        }
        Ok(DeviceInfo {
            qp_tab_size: resp.qp_tab_size,
            bf_reg_size: resp.bf_reg_size,
            tot_bfregs: resp.tot_bfregs,
            cache_line_size: resp.cache_line_size,
            max_sq_desc_sz: resp.max_sq_desc_sz,
            max_rq_desc_sz: resp.max_rq_desc_sz,
            max_send_wqebb: resp.max_send_wqebb,
            max_recv_wr: resp.max_recv_wr,
            max_srq_recv_wr: resp.max_srq_recv_wr,
            num_ports: resp.num_ports,
            cqe_version: resp.cqe_version,
            cmds_supp_uhw: resp.cmds_supp_uhw,
            num_uars_per_page,
            page_size,
        })
    }
}

#[derive(Debug)]
struct Inner {
    dev: DeviceInfo,
    registry: Arc<Registry>,
    uidx: Arc<IdAlloc>,
    ahs: Arc<AhTable>,
    dbrecs: Arc<DbRecPool>,
    // Last: the UAR mappings go before the fd reference they hold.
    uars: Arc<UarPool>,
}

/// An mlx5 context's provider half: device limits, UAR pages, doorbell-record
/// pages, the QP/SRQ registry, user indexes and address vectors.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

impl Context {
    /// After GET_CONTEXT: parses the driver answer and sets up the UARs
    /// (dynamic scheme: allocates the CQ arm page now; static: maps every
    /// page the kernel allocated).
    pub fn finish(fd: &Arc<UverbsFd>, resp: &mlx5_ib_alloc_ucontext_resp) -> Result<Context> {
        let page_size = crate::sys::event::page_size();
        Self::with_backend(Box::new(KernelUars(fd.clone())), resp, page_size)
    }

    fn with_backend(
        backend: Box<dyn UarSource>,
        resp: &mlx5_ib_alloc_ucontext_resp,
        page_size: usize,
    ) -> Result<Context> {
        let dev = DeviceInfo::from_resp(resp, page_size)?;
        let req = ucontext_request_for(page_size);
        let uars = UarPool::new(
            backend,
            page_size,
            dev.bf_reg_size,
            dev.num_uars_per_page,
            dev.tot_bfregs,
            req.num_low_latency_bfregs,
            shut_up_bf(),
        )?;
        tracing::debug!(
            dynamic_uar = dev.tot_bfregs == 0,
            bf_reg_size = dev.bf_reg_size,
            cqe_version = dev.cqe_version,
            uars_per_page = dev.num_uars_per_page,
            "mlx5 context ready"
        );
        Ok(Context {
            inner: Arc::new(Inner {
                dev,
                registry: Arc::new(Registry::default()),
                uidx: IdAlloc::new(),
                ahs: AhTable::new(0),
                dbrecs: DbRecPool::new(dev.cache_line_size as usize),
                uars,
            }),
        })
    }

    /// A context whose "kernel" is the HCA model (tests, benchmarks).
    #[cfg(any(test, feature = "mock"))]
    pub(crate) fn new_model(hca: &model::Hca, resp: &mlx5_ib_alloc_ucontext_resp) -> Result<Context> {
        Self::with_backend(Box::new(hca.clone()), resp, crate::sys::event::page_size())
    }

    /// Device facts from GET_CONTEXT.
    pub fn device(&self) -> &DeviceInfo {
        &self.inner.dev
    }
    /// The QP/SRQ registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }
    /// The UAR pages and registers.
    pub fn uars(&self) -> &Arc<UarPool> {
        &self.inner.uars
    }
    pub(crate) fn dbrecs(&self) -> &Arc<DbRecPool> {
        &self.inner.dbrecs
    }
    pub(crate) fn uidx_alloc(&self) -> &Arc<IdAlloc> {
        &self.inner.uidx
    }
    pub(crate) fn ah_table(&self) -> &Arc<AhTable> {
        &self.inner.ahs
    }

    /// An address handle from the kernel CREATE_AH's driver answer
    /// (`drv_out`, [`AH_RESP_LEN`] bytes; the RoCE destination MAC when the
    /// kernel supports it, `cmds_supp_uhw & CREATE_AH`).
    pub fn ah_create(&self, attr: &AhAttr, drv_out: &[u8]) -> Result<Ah> {
        let dmac = if attr.is_eth && u32::from(self.device().cmds_supp_uhw) & MLX5_USER_CMDS_SUPP_UHW_CREATE_AH != 0 {
            Some(ah::dmac_of(drv_out)?)
        } else {
            None
        };
        self.ah_create_with_dmac(attr, dmac)
    }

    /// An address handle with a destination MAC resolved elsewhere
    /// (required on Ethernet).
    pub fn ah_create_with_dmac(&self, attr: &AhAttr, dmac: Option<[u8; 6]>) -> Result<Ah> {
        let av = ah::build_av(attr, dmac, ah::random_sport())?;
        Ah::new(self.ah_table(), av)
    }

    /// CQ `cqn` is to drop `qp`'s completions (the [`Cq::clean_qp`] owed
    /// after a destroy or a move to RESET) the next time it is polled,
    /// before it looks at any entry: for callers that cannot reach the
    /// CQ's poller without a lock. Until then the request holds `qp`, so its
    /// user index is not reused and its memory stays. No cost on the fast
    /// path: the request bumps the registry's generation, which a batch
    /// `poll` checks and which closes every CQ's poll gate, which the
    /// one-entry poll compares the owner byte with anyway.
    ///
    /// Crate-internal in spirit: a QP of another context would have its
    /// SRQ's free list given WQEs that are not its own.
    pub(crate) fn request_clean(&self, cqn: u32, qp: &Arc<QpShared>) {
        self.registry().request_clean(cqn, qp)
    }

    /// Whether a CQ still owes a clean of `qp` (`request_clean`).
    pub fn clean_pending(&self, qp: &Arc<QpShared>) -> bool {
        self.registry().clean_pending(qp)
    }

    /// CQ `cqn` is about to be destroyed and will not be polled again:
    /// drops the cleans requested of it. Call it before the kernel destroy
    /// (the CQN may be reused right after).
    ///
    /// Crate-internal in spirit: called for a CQ that is still polled, it
    /// drops cleans owed after a RESET, whose stale completions the CQ then
    /// matches against the new epoch's work requests.
    pub(crate) fn cq_destroyed(&self, cqn: u32) -> usize {
        self.registry().drop_cleans(cqn)
    }
}
