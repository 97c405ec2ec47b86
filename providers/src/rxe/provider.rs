//! rxe's side of the provider interface ([`crate::provider`]'s traits):
//! the context, and for each object its create and its driver.
#![allow(unsafe_code)] // `unsafe impl` of the create traits; each says why

use std::mem::MaybeUninit;
use std::sync::Arc;

use rverbs_uapi::rdma_user_rxe::rxe_create_cq_resp;

use super::{cq_finish, AvTable, CqRing, AV_NUM_FLAG};
use crate::cmd::cq::{self as cmd, CqCreated};
use crate::cmd::device::{self as dev, ContextInfo};
use crate::provider::{CqOps, CqPoll, CqRef, ProviderOps, ResizeError};
use crate::sys::UverbsFd;
use crate::wr::Wc;
use crate::{Error, Result};

/// rxe's half of an open context: the address vectors of AHs the kernel
/// gave no number (kernels before 5.16, or a forced legacy AV).
#[derive(Clone, Debug)]
pub struct Context {
    pub(crate) avs: Arc<AvTable>,
}

impl ProviderOps for Context {
    /// rxe sends no driver data and reads none.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)> {
        let info = dev::get_context(fd, &[], &mut [])?;
        Ok((info, Context { avs: AvTable::new(AV_NUM_FLAG) }))
    }
}

// SAFETY: rxe's create-CQ driver data is empty: it names no memory.
unsafe impl CqOps for Context {
    type Cq = RxeCq;
    type CqState = ();
    type CqPending = ();
    type CqUdata = [u8; 0];
    type CqResp = rxe_create_cq_resp;
    type CqCleanQp = ();

    fn cq_prepare(&self, cqe: u32) -> Result<((), [u8; 0], u32)> {
        Ok(((), [], cqe))
    }

    /// Maps the ring the kernel made; the arm command is built once.
    fn cq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &rxe_create_cq_resp,
        created: &CqCreated,
    ) -> std::result::Result<((), RxeCq), (Error, ())> {
        let ring = cq_finish(fd, zerocopy::IntoBytes::as_bytes(resp)).map_err(|e| (e, ()))?;
        Ok(((), RxeCq { ring, arm: cmd::ReqNotifyCq::new(fd, created.handle) }))
    }
}

/// An rxe CQ's driver: the ring the kernel shares, and the
/// `REQ_NOTIFY_CQ` command built at create.
#[derive(Debug)]
pub struct RxeCq {
    ring: CqRing,
    arm: cmd::ReqNotifyCq,
}

// Behind the dispatch: `poll` is one function with a frame that fits the
// ring code (the benches poll the rings directly); the C library's
// entries (`*_net_imm`) and `is_empty` are inlined into their caller.
impl CqPoll for RxeCq {
    #[inline(never)]
    fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.ring.poll(out)
    }

    #[inline(never)]
    fn poll_uninit(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        self.ring.poll_uninit(out)
    }

    #[inline(always)]
    fn poll_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        self.ring.poll_uninit_net_imm(out)
    }

    #[inline(always)]
    fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        self.ring.poll_one_uninit_net_imm(w)
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`: one ioctl of the command built
    /// at create.
    #[inline]
    fn arm(&mut self, cq: CqRef<'_>, solicited_only: bool) -> Result<()> {
        self.arm.send(cq.fd, solicited_only)
    }

    /// `IB_USER_VERBS_CMD_RESIZE_CQ`, then the new ring mapped.
    fn resize(&mut self, cq: CqRef<'_>, cqe: u32) -> std::result::Result<u32, ResizeError> {
        let mut drv_out = [0u8; size_of::<rxe_create_cq_resp>()];
        let new = cmd::resize_cq(cq.fd, cq.handle, cqe, &mut drv_out).map_err(ResizeError::Kept)?;
        match cq_finish(cq.fd, &drv_out) {
            Ok(r) => {
                self.ring = r;
                Ok(new)
            }
            Err(error) => Err(ResizeError::Lost { error, cqe: new }),
        }
    }
}
