//! Address vectors (`ibv_ah_attr`, `ibv_global_route`): where a QP's path or
//! a UD send goes, their kernel layouts, and the checks made before the
//! kernel sees one.

use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_verbs::{ib_uverbs_ah_attr, ib_uverbs_global_route, ib_uverbs_qp_dest};

use crate::attr::LinkLayer;
use crate::{Context, Gid};

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

/// Checks an address vector before the kernel sees it: RoCE needs a GRH, the
/// GID index must hold a GID, the destination GID must not be empty.
pub(crate) fn check_av(ctx: &Context, ah: &AhAttr, port: u8, verb: &'static str) -> Result<()> {
    let bad = |msg: String| Err(Error::check(verb, Errno::EINVAL).with_message(msg));
    if port == 0 {
        return bad("the address vector names no port (set ah_attr.port_num, or PORT at RESET->INIT)".into());
    }
    let p = ctx.query_port(port)?;
    let Some(g) = ah.grh else {
        if p.link_layer == LinkLayer::Ethernet {
            return bad(format!(
                "port {port} is RoCE (Ethernet): the address needs a GRH with the peer's GID (ah_attr.grh)"
            ));
        }
        return Ok(());
    };
    if u32::from(g.sgid_index) >= p.gid_tbl_len || ctx.query_gid(port, g.sgid_index.into())?.is_none() {
        return Err(Error::check(verb, Errno::ENODATA).with_message(format!(
            "GID index {} does not exist on port {port} (see `rverbs devinfo -v` for the GID table)",
            g.sgid_index
        )));
    }
    if g.dgid.is_zero() {
        return bad("the destination GID is all zeros".into());
    }
    Ok(())
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
}
