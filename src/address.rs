//! Address vectors (`ibv_ah_attr`, `ibv_global_route`): where a QP's path or
//! a UD send goes, their kernel layouts, and the checks made before the
//! kernel sees one.

use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_verbs::{ib_uverbs_ah_attr, ib_uverbs_global_route, ib_uverbs_qp_dest};

use crate::attr::LinkLayer;
use crate::gid::GidType;
use crate::{Context, Gid, Wc, WcFlags};

/// The GRH part of an address (`struct ibv_global_route`). RoCE always needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: Gid,
    /// Flow label (RoCE v2: also picks the UDP source port on some devices).
    pub flow_label: u32,
    /// Index of our GID (RoCE: this picks v1 or v2 and the netdev).
    pub sgid_index: u8,
    /// Hop limit (the kernel overwrites it with the route's for RoCE RC/UC).
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2).
    pub traffic_class: u8,
}

/// An address vector (`struct ibv_ah_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// Destination LID (InfiniBand; 0 for RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Local port.
    pub port_num: u8,
    /// Global route header; required for RoCE.
    pub grh: Option<GlobalRoute>,
}

impl AhAttr {
    pub(crate) fn to_dest(self) -> ib_uverbs_qp_dest {
        let g = self.grh.unwrap_or_default();
        ib_uverbs_qp_dest {
            dgid: g.dgid.0,
            flow_label: g.flow_label,
            dlid: self.dlid,
            reserved: 0,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: self.grh.is_some().into(),
            port_num: self.port_num,
        }
    }

    /// The kernel's `ib_uverbs_ah_attr` (CREATE_AH's address).
    pub(crate) fn to_kernel_ah_attr(self) -> ib_uverbs_ah_attr {
        let g = self.grh.unwrap_or_default();
        ib_uverbs_ah_attr {
            grh: ib_uverbs_global_route {
                dgid: g.dgid.0,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
                reserved: 0,
            },
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: self.grh.is_some().into(),
            port_num: self.port_num,
            reserved: 0,
        }
    }

    /// From the kernel's `ib_uverbs_ah_attr` (the CM's INIT_QP_ATTR answer,
    /// a UD ESTABLISHED event's address).
    pub(crate) fn from_kernel_ah_attr(a: &ib_uverbs_ah_attr) -> Self {
        AhAttr {
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            port_num: a.port_num,
            grh: (a.is_global != 0).then_some(GlobalRoute {
                dgid: Gid(a.grh.dgid),
                flow_label: a.grh.flow_label,
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
            }),
        }
    }

    pub(crate) fn from_dest(d: &ib_uverbs_qp_dest) -> Self {
        AhAttr {
            dlid: d.dlid,
            sl: d.sl,
            src_path_bits: d.src_path_bits,
            static_rate: d.static_rate,
            port_num: d.port_num,
            grh: (d.is_global != 0).then_some(GlobalRoute {
                dgid: Gid(d.dgid),
                flow_label: d.flow_label,
                sgid_index: d.sgid_index,
                hop_limit: d.hop_limit,
                traffic_class: d.traffic_class,
            }),
        }
    }
}

/// The length of the GRH in front of every UD receive buffer.
pub const GRH_LEN: usize = 40;

impl AhAttr {
    /// The address that answers a UD message received on `port`
    /// (`ibv_init_ah_from_wc`): from the completion and the 40 bytes of
    /// GRH in front of the payload. On RoCE v2 over IPv4 those bytes hold
    /// the IPv4 header in their last 20 (rxe and rdma-core's convention);
    /// otherwise they are a GRH (an IPv6 header on RoCE). The source GID
    /// index is that of our GID the message was sent to.
    ///
    /// # Errors
    /// The completion has no GRH on a port that needs one (RoCE), or none
    /// of our GIDs is the one the message was sent to.
    #[doc(alias = "ibv_init_ah_from_wc")]
    pub fn from_wc(ctx: &Context, port: u8, wc: &Wc, grh: &[u8; GRH_LEN]) -> Result<AhAttr> {
        const VERB: &str = "ibv_init_ah_from_wc";
        let mut ah = AhAttr {
            dlid: wc.slid,
            sl: wc.sl,
            src_path_bits: wc.dlid_path_bits,
            static_rate: 0,
            port_num: port,
            grh: None,
        };
        let roce = ctx.query_port(port)?.link_layer == LinkLayer::Ethernet;
        if !wc.wc_flags.contains(WcFlags::GRH) {
            if roce {
                return Err(Error::check(VERB, Errno::EINVAL)
                    .with_message(format!("port {port} is RoCE, but the completion carries no GRH")));
            }
            return Ok(ah);
        }
        let ip4 = &grh[20..];
        let is_ip4 = roce && grh_is_ipv4(grh);
        let (sender, ours, tclass, flow, want) = if is_ip4 {
            let mapped = |b: &[u8]| {
                let mut g = [0u8; 16];
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(b);
                Gid(g)
            };
            (mapped(&ip4[12..16]), mapped(&ip4[16..20]), ip4[1], 0, Some(GidType::RoceV2))
        } else {
            let word = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&grh[8..24]);
            d.copy_from_slice(&grh[24..40]);
            (Gid(s), Gid(d), ((word >> 20) & 0xff) as u8, word & 0xf_ffff, None)
        };
        let table = ctx.query_gid_table()?;
        let index = table
            .iter()
            .filter(|e| e.port == u32::from(port) && e.gid == ours)
            .filter(|e| want.map_or(true, |w| w == e.gid_type))
            .map(|e| e.index)
            .min()
            .ok_or_else(|| {
                Error::check(VERB, Errno::ENOENT)
                    .with_message(format!("the message was sent to {ours}, which is not a GID of port {port}"))
            })?;
        ah.grh = Some(GlobalRoute {
            dgid: sender,
            flow_label: flow,
            sgid_index: u8::try_from(index).unwrap_or(u8::MAX),
            hop_limit: 0xff,
            traffic_class: tclass,
        });
        Ok(ah)
    }
}

/// Whether a RoCE GRH buffer holds an IPv4 header in its last 20 bytes
/// (RoCE v2 over IPv4) rather than an IPv6 header (rdma-core's
/// `get_grh_header_version`): the first word's version is not 6 and the
/// IPv4 header's is 4; or, when both could be, an IPv4 header of 5 words
/// whose checksum adds up. rxe leaves the first 20 bytes zero and, on
/// loopback, the IPv4 checksum 0 (the stack fills it in later), so the
/// checksum cannot be the first test.
fn grh_is_ipv4(grh: &[u8; GRH_LEN]) -> bool {
    let ip4 = &grh[20..];
    if grh[0] >> 4 != 6 {
        return ip4[0] >> 4 == 4;
    }
    ip4[0] == 0x45 && ipv4_checksum_ok(ip4)
}

/// The IPv4 header's checksum adds up (RFC 791).
fn ipv4_checksum_ok(h: &[u8]) -> bool {
    let mut sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

/// The port facts [`check_av`] read on the way.
pub(crate) struct AvPort {
    /// `None`: not known without a `QUERY_PORT` (a provider that needs it asks).
    pub ethernet: Option<bool>,
    pub sgid_type: Option<u32>,
}

/// Checks an address vector before the kernel sees it: RoCE needs a GRH, the
/// GID index must hold a GID, the destination GID must not be empty. Returns
/// what the provider needs to know of the port: whether it is Ethernet, and
/// the source GID's type (from the kernel, or sysfs on kernels without
/// `QUERY_GID_ENTRY`) when there is a GRH.
pub(crate) fn check_av(ctx: &Context, ah: &AhAttr, port: u8, verb: &'static str) -> Result<AvPort> {
    check_av_with(ctx, ah, port, verb, true)
}

/// [`check_av`], reading the source GID's entry only when `gid` (else
/// `sgid_type` is `None`: a provider that needs the type asks the kernel,
/// and the kernel refuses an index without a GID). `create_ah` skips the
/// read, one syscall per AH that rdma-core does not make either, and
/// checks fully only to explain a refusal. Without `gid`, an address with
/// a GRH on a port whose facts were not read yet is left to the kernel
/// too (no `QUERY_PORT` on the context's first AH: rdma-core makes none).
pub(crate) fn check_av_with(ctx: &Context, ah: &AhAttr, port: u8, verb: &'static str, gid: bool) -> Result<AvPort> {
    let bad = |msg: String| Err(Error::check(verb, Errno::EINVAL).with_message(msg));
    if port == 0 {
        return bad("the address vector names no port (set ah_attr.port_num, or PORT at RESET->INIT)".into());
    }
    let p = match (gid, ah.grh) {
        (false, Some(g)) if !g.dgid.is_zero() => match ctx.port_static_known(port) {
            Some(p) => p,
            None => return Ok(AvPort { ethernet: None, sgid_type: None }),
        },
        _ => ctx.port_static(port)?,
    };
    let Some(g) = ah.grh else {
        if p.link_layer == LinkLayer::Ethernet {
            return bad(format!(
                "port {port} is RoCE (Ethernet): the address needs a GRH with the peer's GID (ah_attr.grh)"
            ));
        }
        return Ok(AvPort { ethernet: Some(false), sgid_type: None });
    };
    if !gid && u32::from(g.sgid_index) < p.gid_tbl_len && !g.dgid.is_zero() {
        return Ok(AvPort { ethernet: Some(p.link_layer == LinkLayer::Ethernet), sgid_type: None });
    }
    let entry =
        if u32::from(g.sgid_index) < p.gid_tbl_len { ctx.gid_unnamed(port, g.sgid_index.into())? } else { None };
    let Some(entry) = entry else {
        return Err(Error::check(verb, Errno::ENODATA).with_message(format!(
            "GID index {} does not exist on port {port} (see `rverbs devinfo -v` for the GID table)",
            g.sgid_index
        )));
    };
    if g.dgid.is_zero() {
        return bad("the destination GID is all zeros".into());
    }
    Ok(AvPort { ethernet: Some(p.link_layer == LinkLayer::Ethernet), sgid_type: Some(entry.gid_type.to_kernel()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// CREATE_AH's `ib_uverbs_ah_attr`, hand-computed from uverbs-abi.md §3.3.
    #[test]
    fn ah_attr_bytes() {
        let dgid = Gid::parse("::ffff:192.168.77.2").unwrap();
        let a = AhAttr {
            sl: 3,
            port_num: 1,
            grh: Some(GlobalRoute { dgid, flow_label: 7, sgid_index: 1, hop_limit: 64, traffic_class: 8 }),
            ..Default::default()
        };
        let k = a.to_kernel_ah_attr();
        let mut want = [0u8; 32];
        want[10..12].copy_from_slice(&[0xff, 0xff]);
        want[12..16].copy_from_slice(&[192, 168, 77, 2]);
        want[16..20].copy_from_slice(&7u32.to_le_bytes());
        want[20] = 1; // sgid_index
        want[21] = 64; // hop_limit
        want[22] = 8; // traffic_class
        want[26] = 3; // sl
        want[29] = 1; // is_global
        want[30] = 1; // port_num
        assert_eq!(k.as_bytes(), &want[..]);
    }

    /// What rxe put in front of a UD message on 6.12 (loopback, RoCE v2
    /// over IPv4): 20 zero bytes, then the IPv4 header with checksum 0.
    #[test]
    fn grh_version_as_rdma_core_reads_it() {
        let mut g = [0u8; GRH_LEN];
        g[20..40].copy_from_slice(&[
            0x45, 0, 0, 0x9c, 0x6b, 0xab, 0x40, 0, 0x40, 0x11, 0, 0, 192, 168, 77, 1, 192, 168, 77, 1,
        ]);
        assert!(grh_is_ipv4(&g), "version nibble 0 in front: IPv4 whatever the checksum");
        // An IPv6 header: version 6, and the last 20 bytes are addresses.
        let mut v6 = [0u8; GRH_LEN];
        v6[0] = 0x60;
        v6[20] = 0x45;
        assert!(!grh_is_ipv4(&v6), "a bad IPv4 checksum behind a version 6: IPv6");
        // Both could be: the IPv4 checksum decides.
        let mut both = g;
        both[0] = 0x60;
        let mut sum: u32 = both[20..40].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        both[30..32].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        assert!(grh_is_ipv4(&both));
    }
}
