//! Queue pairs: create (prepare → `QP_CREATE` → finish → rollback), the
//! post dispatch of the send and receive halves, modify with the
//! provider's before/after steps, and destroy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::ib_user_verbs::ib_uverbs_modify_qp;
use tracing::debug;
use zerocopy::IntoBytes;

use super::{KernelCq, KernelSrq, Kind, ProviderContext};
use crate::cmd::qp as cmd;
use crate::qp_state::{QpState, QpType};
use crate::sys::{CmdPath, UverbsFd};
use crate::wr::{PostError, RecvWr, SendWr};
use crate::{mlx5, rxe, Errno, Error, Result};

/// What a QP is created with (`ibv_create_qp`'s `ibv_qp_init_attr`, with
/// the objects already resolved to their kernel halves).
#[derive(Clone, Copy, Debug)]
pub struct QpCreate<'a> {
    /// The transport.
    pub qp_type: QpType,
    /// The PD's kernel handle.
    pub pd_handle: u32,
    /// CQ for send completions.
    pub send_cq: &'a KernelCq,
    /// CQ for receive completions (may be the same).
    pub recv_cq: &'a KernelCq,
    /// The SRQ it receives from, if any.
    pub srq: Option<&'a KernelSrq>,
    /// Requested capacities (checked against the device by the caller).
    pub cap: ib_uverbs_qp_cap,
    /// Every send work request completes with a CQE.
    pub sq_sig_all: bool,
    /// The value async events carry for this QP.
    pub user_handle: u64,
}

/// The send half's provider driver. `&mut` to post: no lock.
#[derive(Debug)]
pub struct SendDriver(SendDrv);

#[derive(Debug)]
enum SendDrv {
    Rxe(rxe::SendRing<rxe::UverbsDoorbell>),
    Mlx5(mlx5::SendQueue<mlx5::UarMmio>),
}

/// The receive half's provider driver (absent with an SRQ).
#[derive(Debug)]
pub struct RecvDriver(RecvDrv);

#[derive(Debug)]
enum RecvDrv {
    Rxe(rxe::RecvRing),
    Mlx5(mlx5::RecvQueue),
}

/// The kernel QP and the provider state that lives exactly as long:
/// mlx5's shared QP state, which owns the queue memory and is registered in
/// the context until the kernel QP is destroyed, so the send and receive
/// halves may be dropped at any time. Holds its CQs and SRQ, which must
/// outlive it.
#[derive(Debug)]
pub struct KernelQp {
    fd: Arc<UverbsFd>,
    handle: u32,
    qpn: u32,
    cap: ib_uverbs_qp_cap,
    prov: QpProv,
    send_cq: KernelCq,
    recv_cq: KernelCq,
    _srq: Option<KernelSrq>,
    /// The kernel QP exists (cleared by a destroy that succeeded; a failed
    /// one sets it again, so the QP stays usable and the destroy can be
    /// retried, as with rdma-core).
    live: AtomicBool,
}

#[derive(Debug)]
enum QpProv {
    /// Nothing beyond the kernel object: rxe, or an mlx5 QP whose provider
    /// half never came to be.
    KernelOnly,
    Mlx5 {
        ctx: mlx5::Context,
        qp: Arc<mlx5::QpShared>,
    },
}

/// Why [`KernelQp::modify`] failed.
#[derive(Debug)]
pub enum ModifyError {
    /// The provider refused before the kernel was asked.
    Check(Error),
    /// The kernel refused `MODIFY_QP` with this errno.
    Os(Errno),
}

fn unsupported(provider: &str, t: QpType) -> Error {
    Error::check("ibv_create_qp", Errno::EOPNOTSUPP)
        .with_message(format!("the rverbs {provider} provider creates RC, UC and UD QPs, not {t}"))
}

impl ProviderContext {
    /// Creates a QP: `UVERBS_METHOD_QP_CREATE` with the provider's driver
    /// data (mlx5: the queues sized and allocated first, the core command
    /// then carries the capacities they have; rxe: none in, the rings' mmap
    /// info out), then its halves. If anything fails after the kernel
    /// create, the kernel QP is destroyed before the memory it uses is freed.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(
        &self,
        fd: &Arc<UverbsFd>,
        a: &QpCreate<'_>,
    ) -> Result<(KernelQp, SendDriver, Option<RecvDriver>)> {
        // The CQs and SRQ are objects of this fd: a QP holds them, and
        // mlx5's cleans reach them, as objects of its own context.
        if !(a.send_cq.is_on(fd) && a.recv_cq.is_on(fd) && a.srq.map_or(true, |s| s.is_on(fd))) {
            return Err(Error::check("ibv_create_qp", Errno::EINVAL)
                .with_message("its CQs and SRQ belong to another context than the QP"));
        }
        let args = |cap| cmd::CreateQp {
            qp_type: a.qp_type.to_kernel(),
            pd: a.pd_handle,
            send_cq: a.send_cq.handle(),
            recv_cq: a.recv_cq.handle(),
            srq: a.srq.map(|s| s.handle()),
            cap,
            sq_sig_all: a.sq_sig_all,
            user_handle: a.user_handle,
        };
        let kernel = |created: &cmd::QpCreated, cap, prov| KernelQp {
            fd: fd.clone(),
            handle: created.handle,
            qpn: created.qpn,
            cap,
            prov,
            send_cq: a.send_cq.clone(),
            recv_cq: a.recv_cq.clone(),
            _srq: a.srq.cloned(),
            live: AtomicBool::new(true),
        };
        match &self.kind {
            Kind::Rxe(rxe_ctx) => {
                let transport = match a.qp_type {
                    QpType::Rc => rxe::Transport::Rc,
                    QpType::Uc => rxe::Transport::Uc,
                    QpType::Ud => rxe::Transport::Ud,
                    other => return Err(unsupported("rxe", other)),
                };
                let mut drv_out = [0u8; rxe::QP_RESP_LEN];
                // SAFETY: rxe's create-QP driver data names no memory.
                let created = unsafe { cmd::create_qp(fd, &args(a.cap), &[], &mut drv_out) }?;
                // On failure from here, dropping `k` destroys the kernel QP.
                let k = kernel(&created, created.cap, QpProv::KernelOnly);
                let info = rxe::QpInfo {
                    handle: created.handle,
                    send: rxe::SendLimits {
                        transport,
                        max_sge: created.cap.max_send_sge,
                        max_inline: created.cap.max_inline_data,
                    },
                    max_recv_sge: created.cap.max_recv_sge,
                    has_srq: a.srq.is_some(),
                };
                let q = rxe::qp_finish(fd, &drv_out, &info, &rxe_ctx.avs)?;
                debug!(handle = created.handle, qp_num = created.qpn, "rxe QP created");
                Ok((k, SendDriver(SendDrv::Rxe(q.sq)), q.rq.map(|r| RecvDriver(RecvDrv::Rxe(r)))))
            }
            Kind::Mlx5(m) => {
                let qp_type = match a.qp_type {
                    QpType::Rc => mlx5::QpType::Rc,
                    QpType::Uc => mlx5::QpType::Uc,
                    QpType::Ud => mlx5::QpType::Ud,
                    other => return Err(unsupported("mlx5", other)),
                };
                let srq = match a.srq {
                    Some(s) => Some(s.mlx5_shared().cloned().ok_or_else(|| {
                        Error::check("ibv_create_qp", Errno::EINVAL).with_message("the SRQ has no mlx5 receive queue")
                    })?),
                    None => None,
                };
                let prep = mlx5::QpPrepareArgs { qp_type, caps: caps_of(a.cap), srq, sq_sig_all: a.sq_sig_all };
                let (pending, udata) = m.qp_prepare(&prep)?;
                let mut drv_out = [0u8; mlx5::QP_RESP_LEN];
                let core_args = args(cap_of(pending.core_caps()));
                // SAFETY: the driver data names `pending`'s buffer and doorbell
                // record, which stay allocated until the kernel QP is destroyed:
                // on failure here the kernel took nothing and `pending` drops.
                let created = unsafe { cmd::create_qp(fd, &core_args, udata.as_bytes(), &mut drv_out) }?;
                // The provider's capacities, not the kernel's echo of the request.
                let cap = cap_of(pending.caps());
                // Nothing fallible between the kernel create and `qp_finish`:
                // `pending` must not be dropped while the kernel QP exists.
                match m.qp_finish(pending, &drv_out, created.qpn) {
                    Ok(q) => {
                        let prov = QpProv::Mlx5 { ctx: m.clone(), qp: q.shared().clone() };
                        let k = kernel(&created, cap, prov);
                        let mlx5::Qp { sq, rq, .. } = q;
                        debug!(handle = created.handle, qp_num = created.qpn, "mlx5 QP created");
                        Ok((k, SendDriver(SendDrv::Mlx5(sq)), rq.map(|r| RecvDriver(RecvDrv::Mlx5(r)))))
                    }
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel QP uses the pending memory: destroy it first.
                        let mut k = kernel(&created, cap, QpProv::KernelOnly);
                        match k.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        Err(error)
                    }
                }
            }
        }
    }
}

fn caps_of(c: ib_uverbs_qp_cap) -> mlx5::QpCaps {
    mlx5::QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_of(c: mlx5::QpCaps) -> ib_uverbs_qp_cap {
    ib_uverbs_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

impl KernelQp {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The QP number peers address.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// The capacities granted (what the provider's queues really hold).
    pub fn cap(&self) -> ib_uverbs_qp_cap {
        self.cap
    }

    /// `IB_USER_VERBS_CMD_MODIFY_QP` (`EX_MODIFY_QP` with a rate limit) with
    /// the provider's steps around it, for a QP in `from` moving to `to`
    /// (`None`: an attribute-only modify). mlx5: RESET → INIT is refused
    /// with `EBUSY` until the CQs have run the clean owed from the last move
    /// to RESET; after the command the provider learns the new state (sends
    /// need RTS, receives INIT; RESET starts the queue indices over and
    /// removes the old completions from the CQs).
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(
        &self,
        req: &ib_uverbs_modify_qp,
        rate_limit: Option<u32>,
        from: QpState,
        to: Option<QpState>,
    ) -> std::result::Result<CmdPath, ModifyError> {
        if let (QpProv::Mlx5 { ctx, qp }, QpState::Reset, Some(QpState::Init)) = (&self.prov, from, to) {
            if ctx.clean_pending(qp) {
                return Err(ModifyError::Check(Error::check("ibv_modify_qp", Errno::EBUSY).with_message(
                    "on mlx5 the completions this QP left before its move to RESET are removed when its CQs \
                     are next polled, and that has not happened yet: poll its CQs once (an empty slice is \
                     enough), then retry",
                )));
            }
        }
        let path = cmd::modify_qp(&self.fd, req, rate_limit).map_err(ModifyError::Os)?;
        if let (QpProv::Mlx5 { qp, .. }, Some(next)) = (&self.prov, to) {
            if next == QpState::Reset {
                // Before the indices start over: the old completions must
                // not be matched against the new posts.
                self.clean_cqs(qp);
            }
            qp.on_state_change(next as u8);
        }
        Ok(path)
    }

    /// Destroys the kernel QP now (`UVERBS_METHOD_QP_DESTROY`,
    /// `ibv_destroy_qp`); a second call does nothing. mlx5: then its
    /// completions still in the CQs go (cleaned now, or at each CQ's next
    /// poll, the request holding the QP's user index until then), and it
    /// leaves the registry; its memory goes with the last reference. If the
    /// kernel refuses, the memory is leaked, never freed under the HCA.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(&mut self) -> Result<()> {
        match self.destroy_now() {
            Ok(_) => Ok(()),
            Err(e) => {
                // Not retried from here: the kernel QP may still exist, so
                // an mlx5 QP's memory is leaked (it stays registered, and
                // this reference is never released, not even when the
                // context goes).
                self.live.store(false, Ordering::Relaxed);
                if let QpProv::Mlx5 { qp, .. } = &self.prov {
                    std::mem::forget(qp.clone());
                }
                Err(e)
            }
        }
    }

    /// Destroys the kernel QP now, through a shared reference, and returns
    /// the kernel's count of async events it reported for the QP (what
    /// `ibv_destroy_qp` waits for the acknowledgements of); 0 when it was
    /// already destroyed or in a forked child (whose QP is the parent's).
    /// If the kernel refuses, nothing changed: the QP is usable and the
    /// destroy may be tried again.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy_now(&self) -> Result<u32> {
        if self.fd.in_forked_child() || !self.live.swap(false, Ordering::AcqRel) {
            // A forked child: no destroy, and no clean of CQ memory that
            // it does not have (mlx5's is MADV_DONTFORK).
            return Ok(0);
        }
        let events = match cmd::destroy_qp(&self.fd, self.handle) {
            Ok(ev) => ev,
            Err(e) => {
                self.live.store(true, Ordering::Release);
                return Err(e);
            }
        };
        if let QpProv::Mlx5 { ctx, qp } = &self.prov {
            self.clean_cqs(qp);
            ctx.qp_shared_destroyed(qp);
        }
        debug!(handle = self.handle, qp_num = self.qpn, async_events = events, "QP destroyed");
        Ok(events)
    }

    /// mlx5: removes (or has removed) `qp`'s completions from both CQs.
    fn clean_cqs(&self, qp: &Arc<mlx5::QpShared>) {
        self.send_cq.clean_qp::<mlx5::Context>(qp);
        if !self.send_cq.same_as(&self.recv_cq) {
            self.recv_cq.clean_qp::<mlx5::Context>(qp);
        }
    }
}

impl Drop for KernelQp {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "QP destroy failed");
        }
    }
}

impl SendDriver {
    /// Posts `wrs` in order, then rings the doorbell once if any was
    /// posted (rxe: one `write()`; mlx5: the doorbell record and a UAR
    /// store or a BlueFlame copy). On a refused request the ones before it
    /// are posted, none after it, and the error names its index.
    ///
    /// # Safety
    /// For every `INLINE` request, each SGE's `addr..addr+length` must be
    /// memory this process may read for the duration of the call (it is
    /// copied now). Nothing else is read through the SGEs here; the device
    /// checks the keys.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        match &mut self.0 {
            // SAFETY: forwarded from this function's contract.
            SendDrv::Rxe(r) => unsafe { r.post(wrs) },
            // SAFETY: forwarded (mlx5's `post` has the same contract).
            SendDrv::Mlx5(q) => unsafe { q.post(wrs) },
        }
    }

    /// [`post`](Self::post) of the one request `wr`, inlined into the
    /// caller on rxe (the ring's short path for one usual request, see
    /// `SendRing::post_one`); mlx5's post stays one call. For callers that
    /// post one request per call, such as the C library's `ibv_post_send`.
    ///
    /// # Safety
    /// As for [`post`](Self::post).
    #[doc(alias = "ibv_post_send")]
    #[inline(always)]
    pub unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        match &mut self.0 {
            // SAFETY: forwarded from this function's contract.
            SendDrv::Rxe(r) => unsafe { r.post_one(wr) },
            // SAFETY: forwarded (mlx5's `post` has the same contract).
            SendDrv::Mlx5(q) => unsafe { mlx5_post_one(q, wr) },
        }
    }
}

/// mlx5's post of one request, kept out of line so that an inlined
/// [`SendDriver::post_one`] carries only rxe's ring code.
///
/// # Safety
/// As for [`SendDriver::post`].
#[inline(never)]
unsafe fn mlx5_post_one(q: &mut mlx5::SendQueue<mlx5::UarMmio>, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
    // SAFETY: forwarded.
    unsafe { q.post(core::slice::from_ref(wr)) }
}

impl RecvDriver {
    /// Posts receive work requests (`ibv_post_recv`): WQEs and the
    /// producer index or doorbell record, no syscall. On a refused request
    /// the ones before it are posted, none after it.
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        match &mut self.0 {
            RecvDrv::Rxe(r) => r.post(wrs),
            RecvDrv::Mlx5(q) => mlx5_post_recv(q, wrs),
        }
    }
}

/// mlx5's receive post, kept out of line (a call of its own: a few
/// instructions more per mlx5 post): inlined next to rxe's one-SGE path,
/// its loop made every post of either provider save six registers first.
#[inline(never)]
fn mlx5_post_recv(q: &mut mlx5::RecvQueue, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
    q.post(wrs)
}
