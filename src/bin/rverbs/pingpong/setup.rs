//! One side's resources and their states (`pp_init_ctx()`,
//! `pp_connect_ctx()`): the device, PD, buffer, CQ, SRQ and QPs with
//! rdma-core's attributes, moved to INIT and then to RTR and RTS towards
//! the peer.

use rverbs::{
    AccessFlags, AddressHandle, CompletionChannel, CompletionQueue, ConnectOptions, Context, Endpoint, Gid, LinkLayer,
    MemoryRegion, ProtectionDomain, QpCap, QpInitAttr, QpType, QueuePair, RecvWr, SharedReceiveQueue, UdDest,
};

use super::options::{Mode, Opts};
use super::post::post_recvs;
use super::{lib_err, GRH_LEN, RECV_WRID, UD_QKEY};

/// Everything one side holds.
pub struct PingPong {
    pub mode: Mode,
    pub size: u32,
    pub rx_depth: u32,
    /// Where the payload sits in the buffer (after the GRH for UD).
    pub payload_off: usize,
    /// Length of each receive (payload + GRH for UD).
    pub recv_len: u32,
    /// Copy the payload into the WQE (the QP's `max_inline_data` >= size).
    pub inline: bool,
    pub ib_port: u8,
    pub link_layer: LinkLayer,
    /// rdma-core's QP attributes ([`connect_options`]).
    pub opts: ConnectOptions,
    pub dev_name: String,
    /// The UD destination: the number of `ah`, which lives as long as this.
    pub ud: Option<UdDest<'static>>,
    // Dropped in this order: AH, QPs, SRQ, MR, PD, context.
    pub ah: Option<AddressHandle>,
    pub qps: Vec<QueuePair>,
    pub srq: Option<SharedReceiveQueue>,
    pub mr: MemoryRegion,
    pub pd: ProtectionDomain,
    pub ctx: Context,
}

/// The QP attributes of rdma-core's examples, as [`ConnectOptions`]
/// (`pp_init_ctx()` and `pp_connect_ctx()` of `ibv_rc_pingpong`,
/// `ibv_ud_pingpong` and `ibv_srq_pingpong`):
///
/// * INIT: P_Key index 0, our port, and `qp_access_flags` 0 (RC) or Q_Key
///   `0x11111111` (UD);
/// * RTR (RC): `-m`'s path MTU, `max_dest_rd_atomic` 1, `min_rnr_timer` 12,
///   `-l`'s SL, and a GRH with hop limit 1 when the peer gave a GID;
///   (UD): the state only;
/// * RTS (RC): `timeout` 14, `retry_cnt` 7, `rnr_retry` 7, `max_rd_atomic` 1;
///   (UD): the state and the PSN;
/// * the UD address handle: `-l`'s SL and a GRH with hop limit 64 when the
///   peer gave a GID.
///
/// The GID index: `-g`, else on RoCE the port's default (rdma-core sends
/// none and fails there), else none.
fn connect_options(o: &Opts) -> ConnectOptions {
    ConnectOptions {
        port: o.ib_port,
        sgid_index: o.gid_idx,
        access: AccessFlags::empty(),
        path_mtu: Some(o.mtu),
        sl: o.sl,
        traffic_class: 0,
        hop_limit: if o.mode == Mode::Ud { 64 } else { 1 },
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        pkey_index: 0,
        qkey: UD_QKEY,
    }
}

impl PingPong {
    /// The receive half of the posting pattern: `n` receives of the whole
    /// buffer, wr_id 1, one per call (as rdma-core's examples post them).
    /// Returns how many were posted.
    pub fn post_recv(&mut self, n: u32) -> u32 {
        let Ok(sge) = self.mr.sge(0, self.recv_len) else { return 0 };
        let sgl = [sge];
        let wr = RecvWr { wr_id: RECV_WRID, sgl: &sgl };
        post_recvs(&mut self.qps, &mut self.srq, &wr, n)
    }

    /// The local descriptions: QPN, a random PSN, our LID and GID
    /// ([`QpControl::local_endpoint`](rverbs::QpControl::local_endpoint)).
    pub fn local_endpoints(&self) -> Result<Vec<Endpoint>, String> {
        self.qps
            .iter()
            .map(|qp| {
                qp.local_endpoint(Endpoint::random_psn(), &self.opts).map_err(lib_err("Couldn't get local address"))
            })
            .collect()
    }

    /// The peer's address as rdma-core uses it: a GID only when its
    /// interface id is not zero (rdma-core's test for a GRH), which RoCE
    /// requires. Also the options towards it: without a GID no GRH, even
    /// with `-g` (as rdma-core).
    fn towards(&self, remote: &Endpoint) -> Result<(Endpoint, ConnectOptions), String> {
        if remote.gid.0[8..].iter().any(|&b| b != 0) {
            return Ok((*remote, self.opts));
        }
        if self.link_layer == LinkLayer::Ethernet {
            return Err(format!(
                "the peer sent no GID ({}), but port {} of {} is RoCE, where the GID is the address: \
                 give the peer -g <GID index> (its IPv4-mapped RoCE v2 GID, see 'rverbs devinfo -v')",
                remote.gid.to_inet_string(),
                self.ib_port,
                self.dev_name
            ));
        }
        Ok((Endpoint { gid: Gid::default(), ..*remote }, ConnectOptions { sgid_index: None, ..self.opts }))
    }

    /// `pp_connect_ctx()`: RTR and RTS towards the peer's QP(s)
    /// ([`QpControl::to_rtr`](rverbs::QpControl::to_rtr),
    /// [`QpControl::to_rts`](rverbs::QpControl::to_rts)); for UD also the
    /// address handle ([`Endpoint::ah_attr`]).
    pub fn connect(&mut self, mine: &[Endpoint], remote: &[Endpoint]) -> Result<(), String> {
        if self.mode == Mode::Ud {
            let (peer, opts) = self.towards(&remote[0])?;
            let qp = &self.qps[0];
            qp.to_rtr(&peer, &opts).map_err(lib_err("Failed to modify QP to RTR"))?;
            qp.to_rts(mine[0].psn, &opts).map_err(lib_err("Failed to modify QP to RTS"))?;
            let av = peer.ah_attr(&self.ctx, &opts).map_err(lib_err("Failed to create AH"))?;
            let ah = self.pd.create_ah(&av).map_err(lib_err("Failed to create AH"))?;
            self.ud = Some(UdDest::new(ah.ah_num(), peer.qpn, opts.qkey));
            self.ah = Some(ah);
            return Ok(());
        }
        for (i, (qp, (me, peer))) in self.qps.iter().zip(mine.iter().zip(remote)).enumerate() {
            let label = if self.mode == Mode::Srq { format!("QP[{i}]") } else { "QP".to_string() };
            if peer.qpn == 0 {
                return Err(format!(
                    "the peer sent no address for {label}: it uses fewer QPs (give both sides the same -q)"
                ));
            }
            let (peer, opts) = self.towards(peer)?;
            qp.to_rtr(&peer, &opts).map_err(|e| format!("Failed to modify {label} to RTR: {e}"))?;
            qp.to_rts(me.psn, &opts).map_err(|e| format!("Failed to modify {label} to RTS: {e}"))?;
        }
        Ok(())
    }
}

/// What `-d` names, or the first device.
fn pick_device(name: Option<&str>) -> Result<rverbs::Device, String> {
    let devs = rverbs::devices().map_err(|e| format!("Failed to get IB devices list: {e}"))?;
    match name {
        None => devs.into_iter().next().ok_or_else(|| "No IB devices found".to_string()),
        Some(n) => {
            let names: Vec<String> = devs.iter().map(|d| d.name().to_string()).collect();
            devs.into_iter().find(|d| d.name() == n).ok_or_else(|| {
                if names.is_empty() {
                    format!("IB device {n} not found (there are no RDMA devices)")
                } else {
                    format!("IB device {n} not found (devices: {})", names.join(", "))
                }
            })
        }
    }
}

/// Builds the context, PD, buffer, CQ, SRQ and QPs, and moves the QPs to INIT
/// (`pp_init_ctx()`). Returns the object, the CQ and the channel.
pub fn init(o: &Opts) -> Result<(PingPong, CompletionQueue, Option<CompletionChannel>, rverbs::PortAttr), String> {
    let dev = pick_device(o.ib_dev.as_deref())?;
    let name = dev.name().to_string();
    let ctx = dev.open().map_err(|e| format!("Couldn't get context for {name}: {e}"))?;
    let port = ctx
        .query_port(o.ib_port)
        .map_err(|e| format!("Unable to query port info for port {} of {name}: {e}", o.ib_port))?;
    if o.mode == Mode::Ud {
        if let Some(mtu) = port.active_mtu.bytes() {
            if o.size > mtu {
                return Err(format!("Requested size larger than port MTU ({mtu})"));
            }
        }
    }
    let channel = if o.events {
        Some(ctx.create_comp_channel().map_err(lib_err("Couldn't create completion channel"))?)
    } else {
        None
    };
    let pd = ctx.alloc_pd().map_err(lib_err("Couldn't allocate PD"))?;
    let extra = if o.mode == Mode::Ud { GRH_LEN } else { 0 };
    let buf_len = o.size as usize + extra;
    let mr = pd.alloc_mr(buf_len, AccessFlags::LOCAL_WRITE).map_err(lib_err("Couldn't register MR"))?;
    // rdma-core fills the RC and UD buffers with 0x7b; srq_pingpong zeroes its own.
    if o.mode != Mode::Srq {
        mr.write_at(0, &vec![0x7b; buf_len]).map_err(lib_err("Couldn't fill the buffer"))?;
    }
    let nqp = if o.mode == Mode::Srq { o.num_qp } else { 1 };
    let cqe = if o.mode == Mode::Srq { o.rx_depth + o.num_qp } else { o.rx_depth + 1 };
    let cq = ctx
        .create_cq_with(&rverbs::CqInitAttr { cqe, channel: channel.as_ref(), comp_vector: 0 })
        .map_err(lib_err("Couldn't create CQ"))?;
    let srq = if o.mode == Mode::Srq {
        Some(
            pd.create_srq(&rverbs::SrqAttr { max_wr: o.rx_depth, max_sge: 1, srq_limit: 0 })
                .map_err(lib_err("Couldn't create SRQ"))?,
        )
    } else {
        None
    };
    let mut opts = connect_options(o);
    // Resolve RoCE's default GID index once, not in every endpoint and transition.
    if opts.sgid_index.is_none() && port.link_layer == LinkLayer::Ethernet {
        opts.sgid_index = Some(ctx.default_sgid_index(o.ib_port).map_err(lib_err("cannot pick a GID index"))?);
    }
    let mut qps = Vec::with_capacity(nqp as usize);
    let mut inline = false;
    for i in 0..nqp {
        let mut init = QpInitAttr::new(if o.mode == Mode::Ud { QpType::Ud } else { QpType::Rc }, &cq);
        init.srq = srq.as_ref();
        init.cap = QpCap {
            max_send_wr: 1,
            max_recv_wr: if srq.is_some() { 0 } else { o.rx_depth },
            max_send_sge: 1,
            max_recv_sge: if srq.is_some() { 0 } else { 1 },
            max_inline_data: 0,
        };
        let qp = pd.create_qp(&init).map_err(|e| {
            if o.mode == Mode::Srq {
                format!("Couldn't create QP[{i}]: {e}")
            } else {
                format!("Couldn't create QP: {e}")
            }
        })?;
        if qp.cap().max_inline_data >= o.size {
            inline = true;
        }
        qp.to_init(&opts).map_err(lib_err("Failed to modify QP to INIT"))?;
        qps.push(qp);
    }
    let pp = PingPong {
        mode: o.mode,
        size: o.size,
        rx_depth: o.rx_depth,
        payload_off: extra,
        recv_len: o.size + extra as u32,
        inline,
        ib_port: o.ib_port,
        link_layer: port.link_layer,
        opts,
        dev_name: name,
        ud: None,
        ah: None,
        qps,
        srq,
        mr,
        pd,
        ctx,
    };
    Ok((pp, cq, channel, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rverbs::Mtu;

    use super::super::options::{args, parse_args};
    /// The attributes of rdma-core's examples, spelled out (so a change of
    /// `ConnectOptions::default()` cannot silently change them).
    #[test]
    fn qp_attributes_are_rdma_cores() {
        let rc = connect_options(&parse_args(&args(&["-i", "2", "-m", "2048", "-l", "3", "-g", "1"])).unwrap());
        assert_eq!(
            (rc.port, rc.sgid_index, rc.access, rc.path_mtu, rc.sl),
            (2, Some(1), AccessFlags::empty(), Some(Mtu::Mtu2048), 3)
        );
        assert_eq!((rc.hop_limit, rc.traffic_class, rc.pkey_index), (1, 0, 0));
        assert_eq!((rc.timeout, rc.retry_cnt, rc.rnr_retry, rc.max_rd_atomic), (14, 7, 7, 1));
        assert_eq!((rc.min_rnr_timer, rc.max_dest_rd_atomic), (12, 1));
        let ud = connect_options(&parse_args(&args(&["--ud"])).unwrap());
        assert_eq!((ud.qkey, ud.hop_limit, ud.sgid_index), (0x1111_1111, 64, None));
    }
}
