//! rxe's side of the provider interface ([`crate::provider`]'s traits):
//! the context, and for each object its create and its driver.
#![allow(unsafe_code)] // `unsafe impl` of the create traits; each says why

use std::mem::MaybeUninit;
use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::{ib_uverbs_gid_entry, ib_uverbs_qp_cap};
use rverbs_uapi::ib_user_verbs::ib_uverbs_ah_attr;
use rverbs_uapi::rdma_user_rxe::{
    mminfo, rxe_create_ah_resp, rxe_create_cq_resp, rxe_create_qp_resp, rxe_create_srq_resp, rxe_modify_srq_cmd,
};
use zerocopy::{FromZeros, IntoBytes};

use super::{
    cq_finish, qp_finish, srq_finish, Av, AvAttr, AvHandle, AvTable, CqRing, QpInfo, RecvRing, SendLimits, SendRing,
    Transport, UverbsDoorbell, AV_NUM_FLAG,
};
use crate::cmd::cq::{self as cmd, CqCreated};
use crate::cmd::device::{self as device, ContextInfo};
use crate::cmd::qp::QpCreated;
use crate::cmd::srq::SrqCreated;
use crate::provider::{
    modify_srq_limit, qp_type_unsupported, AhCreate, AhOps, CqOps, CqPoll, CqRef, ProviderOps, QpCreate, QpOps,
    RecvPost, ResizeError, SendPost, SrqOps,
};
use crate::qp_state::QpType;
use crate::sys::UverbsFd;
use crate::wr::{PostError, RecvWr, SendWr, Wc};
use crate::{Errno, Error, Result};

/// rxe's half of an open context: the address vectors of AHs the kernel
/// gave no number (kernels before 5.16, or a forced legacy AV).
#[derive(Clone, Debug)]
pub struct Context {
    pub(crate) avs: Arc<AvTable>,
}

impl ProviderOps for Context {
    /// rxe sends no driver data and reads none.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)> {
        let info = device::get_context(fd, &[], &mut [])?;
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
    #[inline]
    fn cq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &rxe_create_cq_resp,
        created: &CqCreated,
    ) -> std::result::Result<((), RxeCq), (Error, ())> {
        let ring = cq_finish(fd, resp.as_bytes()).map_err(|e| (e, ()))?;
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

// Every poll, and the arm, is inlined into the dispatch, and so into its
// caller: the usual poll (one or two CQEs) is a straight line that saves
// no register (`CqRing::poll_into`), cheaper than a call.
impl CqPoll for RxeCq {
    const INLINE: bool = true;

    #[inline(always)]
    fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.ring.poll(out)
    }

    #[inline(always)]
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
    fn poll_few_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> Option<usize> {
        self.ring.poll_few_uninit_net_imm(out)
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

// SAFETY: rxe's create-SRQ driver data is empty: it names no memory.
unsafe impl SrqOps for Context {
    type Srq = RecvRing;
    type SrqState = ();
    type SrqPending = ();
    type SrqUdata = [u8; 0];
    type SrqResp = rxe_create_srq_resp;

    fn srq_prepare(&self, max_wr: u32, max_sge: u32) -> Result<((), [u8; 0], u32, u32)> {
        Ok(((), [], max_wr, max_sge))
    }

    /// Maps the ring the kernel made; the SRQ has what the kernel granted.
    #[inline]
    fn srq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &rxe_create_srq_resp,
        created: &SrqCreated,
    ) -> std::result::Result<((), RecvRing, u32, u32), (Error, ())> {
        let ring = srq_finish(fd, resp.as_bytes(), created.max_sge).map_err(|e| (e, ()))?;
        Ok(((), ring, created.max_wr, created.max_sge))
    }

    /// rxe reads an `rxe_modify_srq_cmd` on every modify; its pointer is
    /// where the kernel would describe a resized queue (not written for a
    /// limit change, but it must be valid memory).
    fn srq_modify_limit(_: &(), fd: &UverbsFd, handle: u32, limit: u32) -> Result<()> {
        let mut mi = mminfo::new_zeroed();
        let drv = rxe_modify_srq_cmd { mmap_info_addr: mi.as_mut_bytes().as_mut_ptr() as u64 };
        // SAFETY: the only address in the driver data is `mi`'s, writable
        // and alive for the whole call.
        unsafe { modify_srq_limit(fd, handle, limit, drv.as_bytes()) }
    }
}

// SAFETY: rxe's create-QP driver data is empty: it names no memory.
unsafe impl QpOps for Context {
    /// rxe's responder drains a QP's receive ring only when scheduled,
    /// and for a QP in ERR only a move to ERR schedules it.
    const RECV_IN_ERR_NEEDS_MODIFY: bool = true;
    type Send = SendRing<UverbsDoorbell>;
    type Recv = RecvRing;
    type QpState = ();
    /// The transport, checked at prepare.
    type QpPending = Transport;
    type QpUdata = [u8; 0];
    type QpResp = rxe_create_qp_resp;

    /// The kernel gets the capacities asked for and answers with its own.
    fn qp_prepare<C: ?Sized, S: ?Sized>(
        &self,
        a: &QpCreate<C, S>,
        _srq: Option<&()>,
    ) -> Result<(Transport, [u8; 0], ib_uverbs_qp_cap)> {
        let transport = match a.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
            other => return Err(qp_type_unsupported("rxe", other)),
        };
        Ok((transport, [], a.cap))
    }

    /// Maps the rings the kernel made; UD sends may name the context's
    /// address vectors. The QP has the capacities the kernel granted.
    #[inline]
    fn qp_finish<C: ?Sized, S: ?Sized>(
        &self,
        fd: &Arc<UverbsFd>,
        transport: Transport,
        resp: &rxe_create_qp_resp,
        created: &QpCreated,
        a: &QpCreate<C, S>,
    ) -> std::result::Result<((), SendRing<UverbsDoorbell>, Option<RecvRing>, ib_uverbs_qp_cap), (Error, Transport)>
    {
        let info = QpInfo {
            handle: created.handle,
            send: SendLimits { transport, max_sge: created.cap.max_send_sge, max_inline: created.cap.max_inline_data },
            max_recv_sge: created.cap.max_recv_sge,
            has_srq: a.srq.is_some(),
        };
        let q = qp_finish(fd, resp.as_bytes(), &info, &self.avs).map_err(|e| (e, transport))?;
        Ok(((), q.sq, q.rq, created.cap))
    }
}

impl SendPost for SendRing<UverbsDoorbell> {
    const INLINE: bool = true;

    #[inline(always)]
    unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded (the ring's `post` has the same contract).
        unsafe { SendRing::post(self, wrs) }
    }

    /// The ring's short path for one usual request, inlined into the caller.
    #[inline(always)]
    unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { SendRing::post_one(self, wr) }
    }
}

impl RecvPost for RecvRing {
    const INLINE: bool = true;

    #[inline(always)]
    fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        RecvRing::post(self, wrs)
    }
}

impl AhOps for Context {
    /// `None`: the kernel's AH number; `Some`: the vector lives in the
    /// context's table, under the number it gave.
    type Ah = Option<AvHandle>;
    /// Its full length: a shorter answer makes the kernel treat us as an
    /// old provider without AH numbers.
    type AhResp = rxe_create_ah_resp;

    /// The kernel's AH number, or on kernels before 5.16 (which give none
    /// and read a full address vector from every UD request instead), or
    /// with `legacy_av`, an `rxe_av` rverbs builds.
    fn ah_finish(
        &self,
        fd: &Arc<UverbsFd>,
        a: &AhCreate,
        resp: &rxe_create_ah_resp,
    ) -> Result<(Option<AvHandle>, u32)> {
        if resp.ah_num == 0 || a.legacy_av {
            let av = self.avs.insert(av_of(fd, &a.attr)?)?;
            let num = av.num();
            return Ok((Some(av), num));
        }
        Ok((None, resp.ah_num))
    }
}

const VERB: &str = "ibv_create_ah";

/// Every GID entry of `port` (`UVERBS_METHOD_QUERY_GID_TABLE`, Linux 5.10+).
fn port_gids(fd: &UverbsFd, port: u8) -> Result<Vec<ib_uverbs_gid_entry>> {
    let ports = device::query_device(fd)?.resp.base.phys_port_cnt;
    let mut max = 0usize;
    for p in 1..=ports {
        max += device::query_port(fd, p)?.legacy_resp.gid_tbl_len as usize;
    }
    let all = device::query_gid_table(fd, max)?.ok_or_else(|| {
        Error::check(VERB, Errno::EOPNOTSUPP)
            .with_message("building an rxe address vector needs UVERBS_METHOD_QUERY_GID_TABLE (Linux 5.10 and later)")
    })?;
    Ok(all.into_iter().filter(|e| e.port_num == u32::from(port)).collect())
}

/// The rxe address vector of `attr` (rdma-core `rxe_create_av`): the
/// source GID from the port's table, and as destination MAC the netdev's
/// own when the destination GID is one of the port's (rxe loops such
/// packets back; any other MAC sends them through the IP stack, which
/// resolves the next hop itself: see `rxe::av`).
fn av_of(fd: &UverbsFd, attr: &ib_uverbs_ah_attr) -> Result<Av> {
    if attr.is_global == 0 {
        return Err(Error::invalid(VERB, "rxe address handles need a GRH (RoCE): set AhAttr::grh"));
    }
    let g = &attr.grh;
    // One table query answers both: the source GID and whether the destination is ours.
    let port = port_gids(fd, attr.port_num)?;
    let sgid = port.iter().find(|e| e.gid_index == u32::from(g.sgid_index)).ok_or_else(|| {
        Error::check(VERB, Errno::ENODATA)
            .with_message(format!("sgid index {} of port {} holds no GID", g.sgid_index, attr.port_num))
    })?;
    let dmac = match port.iter().find(|e| e.gid == g.dgid) {
        Some(local) => netdev_mac(local.netdev_ifindex).unwrap_or_default(),
        None => [0; 6],
    };
    Ok(super::av::build_av(&AvAttr {
        port_num: attr.port_num,
        dgid: g.dgid,
        flow_label: g.flow_label,
        sgid_index: g.sgid_index,
        hop_limit: g.hop_limit,
        traffic_class: g.traffic_class,
        sgid: sgid.gid,
        dmac,
    }))
}

/// The MAC address of network interface `ifindex`, from sysfs
/// (`/sys/class/net/<name>/{ifindex,address}`).
fn netdev_mac(ifindex: u32) -> Option<[u8; 6]> {
    if ifindex == 0 {
        return None;
    }
    std::fs::read_dir("/sys/class/net").ok()?.filter_map(|e| e.ok()).find_map(|e| {
        let idx: u32 = std::fs::read_to_string(e.path().join("ifindex")).ok()?.trim().parse().ok()?;
        if idx != ifindex {
            return None;
        }
        parse_mac(std::fs::read_to_string(e.path().join("address")).ok()?.trim())
    })
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_text() {
        assert_eq!(parse_mac("52:54:00:12:34:5a"), Some([0x52, 0x54, 0, 0x12, 0x34, 0x5a]));
        assert_eq!(parse_mac("52:54:00:12:34"), None);
        assert_eq!(parse_mac("52:54:00:12:34:5a:01"), None);
        assert_eq!(parse_mac("zz:54:00:12:34:5a"), None);
    }
}
