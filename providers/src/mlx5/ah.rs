//! Address handles: the 48-byte address vector ([`Av`]) a UD send WQE
//! carries (rdma-core `verbs.c mlx5_create_ah`), and the per-context table
//! the post path finds it in by [`UdDest::ah_num`](crate::wr::UdDest).
//!
//! mlx5 AHs are userspace objects built from the address attributes; for
//! RoCE the kernel's `CREATE_AH` resolves the destination MAC and returns
//! it in `mlx5_ib_create_ah_resp.dmac` (when `cmds_supp_uhw & CREATE_AH`).

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use crate::ah_table::AhEntry;

use rverbs_uapi::mlx5_abi::mlx5_ib_create_ah_resp;

use crate::mlx5::seg::Av;
use crate::{Errno, Error, Result};

/// The GRH part of an address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// What an mlx5 address vector is built from (`struct ibv_ah_attr` plus the
/// port facts rdma-core looks up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// The port's link layer is Ethernet (RoCE).
    pub is_eth: bool,
    /// The source GID is a RoCE v2 GID (UDP encapsulation: `rlid` carries
    /// the UDP source port).
    pub roce_v2: bool,
    /// Destination LID (InfiniBand).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits (InfiniBand).
    pub src_path_bits: u8,
    /// `enum ibv_rate`.
    pub static_rate: u8,
    /// Global route; required on Ethernet.
    pub grh: Option<Grh>,
}

/// rdma-core `ib_to_mlx5_rate_table`: `enum ibv_rate` → the mlx5 rate code.
const RATE: [u8; 22] = [0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0];

/// `ibv_flow_label_to_udp_sport`: `(fl & 0x3fff) ^ ((fl & 0xfc000) >> 14) | 0xc000`.
pub fn flow_label_to_udp_sport(fl: u32) -> u16 {
    let low = fl & 0x03fff;
    let high = fl & 0xfc000;
    ((low ^ (high >> 14)) | 0xc000) as u16
}

/// Builds the address vector. `dmac` is required on Ethernet;
/// `random_sport` is the UDP source port used for RoCE v2 when the flow
/// label is 0 (rdma-core picks a random one in `0xc000..=0xffff`).
pub fn build_av(attr: &AhAttr, dmac: Option<[u8; 6]>, random_sport: u16) -> Result<Av> {
    const VERB: &str = "ibv_create_ah";
    let rate = RATE.get(attr.static_rate as usize).copied().unwrap_or(0);
    let mut av = Av::default();
    if attr.is_eth {
        let Some(grh) = attr.grh else {
            return Err(Error::invalid(VERB, "RoCE addresses need a GRH (is_global)"));
        };
        if attr.roce_v2 {
            let fl = grh.flow_label & 0x000f_ffff;
            av.set_rlid(if fl != 0 { flow_label_to_udp_sport(fl) } else { random_sport | 0xc000 });
        }
        av.set_stat_rate_sl_eth(rate, attr.sl);
        let Some(mac) = dmac else {
            return Err(Error::check(VERB, Errno::EOPNOTSUPP)
                .with_message("the kernel did not resolve the destination MAC (no CREATE_AH udata support)"));
        };
        av.set_rmac(mac);
    } else {
        av.set_fl_mlid(attr.src_path_bits);
        av.set_rlid(attr.dlid);
        av.set_stat_rate_sl_ib(rate, attr.sl);
    }
    if let Some(g) = attr.grh {
        av.set_tclass_hop_limit(g.traffic_class, g.hop_limit);
        av.set_grh_gid_fl(!attr.is_eth, g.sgid_index, g.flow_label);
        av.set_rgid(g.dgid);
    }
    Ok(av)
}

/// The destination MAC of a create-AH driver answer.
pub fn dmac_of(drv_out: &[u8]) -> Result<[u8; 6]> {
    use zerocopy::FromBytes;
    mlx5_ib_create_ah_resp::read_from_prefix(drv_out)
        .map(|(r, _)| r.dmac)
        .map_err(|_| Error::check("ibv_create_ah", Errno::EPROTO))
}

/// A random UDP source port for RoCE v2 (no `rand` dependency: std's
/// randomly keyed hasher). Under Miri, whose isolation has no wall clock,
/// the key alone.
pub(crate) fn random_sport() -> u16 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    if !cfg!(miri) {
        h.write_u64(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
        );
    }
    (h.finish() as u16) | 0xc000
}

/// Address vectors by AH number (numbers without a flag bit).
pub type AhTable = crate::ah_table::AhTable<Av>;

/// An mlx5 address handle: its AH number (put it in
/// [`UdDest::ah_num`](crate::wr::UdDest)), which owns its address vector
/// in the context's table, where posts find it. Dropping it forgets the
/// number; WQEs already posted carry their own copy. (No copy of the vector
/// here: every AH's provider half is as large as the largest provider's,
/// and a 48-byte one made each `AddressHandle` a `memcpy` to move, issue 35.)
#[derive(Debug)]
pub struct Ah {
    entry: AhEntry<Av>,
}

impl Ah {
    pub(crate) fn new(table: &Arc<AhTable>, av: Av) -> Result<Ah> {
        Ok(Ah { entry: table.insert(av)? })
    }
    /// The number UD work requests name it by.
    pub fn ah_num(&self) -> u32 {
        self.entry.num()
    }
    /// The address vector (read from the context's table).
    pub fn av(&self) -> Option<Av> {
        self.entry.value()
    }
}
