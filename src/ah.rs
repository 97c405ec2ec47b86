//! Address handles (`ibv_ah`): where a UD send goes.

use rverbs_providers::cmd::ah as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::{mlx5, rxe};
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;

use crate::attr::LinkLayer;
use crate::qp::{check_av, AhAttr};
use crate::{Context, GidType, ProtectionDomain, UdDest};

/// An address handle for UD sends. The kernel resolved the destination MAC
/// when it was created (RoCE); the provider keeps what the kernel answered
/// (rxe: the AH number its work requests carry; mlx5: the destination MAC,
/// which goes into an address vector the provider keeps under its own AH
/// number). On rxe kernels before 5.16, which give no AH number, rverbs
/// builds rxe's address vector itself and copies it into every UD request.
///
/// ```no_run
/// use rverbs::{AhAttr, GlobalRoute};
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let sgid_index = ctx.default_sgid_index(1)?;
/// let dgid = ctx.query_gid(1, sgid_index.into())?.unwrap().gid;   // loopback
/// let ah = pd.create_ah(&AhAttr {
///     port_num: 1,
///     grh: Some(GlobalRoute { dgid, sgid_index, hop_limit: 64, ..Default::default() }),
///     ..Default::default()
/// })?;
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct AddressHandle {
    pd: ProtectionDomain,
    handle: u32,
    attr: AhAttr,
    ah_num: u32,
    live: bool,
    /// mlx5: the address vector UD sends copy into their WQEs (dropping it
    /// forgets the number; WQEs already posted carry their own copy).
    mlx5: Option<mlx5::Ah>,
    /// rxe without a kernel AH number: likewise.
    rxe_av: Option<rxe::AvHandle>,
}

impl ProtectionDomain {
    /// Creates an address handle (`IB_USER_VERBS_CMD_CREATE_AH` through
    /// `INVOKE_WRITE`, `ibv_create_ah`).
    ///
    /// # Errors
    /// A GID index that does not exist, a RoCE address without GRH, a
    /// destination the kernel cannot resolve ("cannot reach GID ...").
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        self.create_ah_inner(attr, false)
    }

    /// Creates an address handle whose address vector travels in every UD
    /// work request, as rverbs does on rxe kernels before 5.16, which give
    /// no AH numbers: this makes that path testable on newer kernels (the
    /// kernel reads the vector whenever a request's AH number is 0). The
    /// kernel AH is created all the same. Other providers: [`create_ah`](Self::create_ah).
    ///
    /// # Errors
    /// As [`create_ah`](Self::create_ah); an address without a GRH.
    pub fn create_ah_legacy_av(&self, attr: &AhAttr) -> Result<AddressHandle> {
        self.create_ah_inner(attr, true)
    }

    fn create_ah_inner(&self, attr: &AhAttr, legacy_av: bool) -> Result<AddressHandle> {
        const VERB: &str = "ibv_create_ah";
        let ctx = self.context();
        let _span = tracing::debug_span!("ibv_create_ah").entered();
        check_av(ctx, attr, attr.port_num, VERB)?;
        let ah_attr = attr.to_kernel_ah_attr();
        let out_len = match ctx.provider() {
            Some(Provider::Mlx5) => mlx5::AH_RESP_LEN,
            _ => rxe::AH_RESP_LEN,
        };
        let mut drv_out = [0u8; DRV_OUT_LEN];
        let handle = cmd::create_ah(ctx.fd(), self.handle(), &ah_attr, 0, &mut drv_out[..out_len]).map_err(|e| {
            let err = Error::os(VERB, e);
            match (e, attr.grh) {
                (Errno::ETIMEDOUT | Errno::ENETUNREACH | Errno::EHOSTUNREACH | Errno::ENODATA, Some(g)) => {
                    err.with_message(format!("cannot reach GID {} from sgid index {}", g.dgid, g.sgid_index))
                }
                _ => err,
            }
        })?;
        let mut ah =
            AddressHandle { pd: self.clone(), handle, attr: *attr, ah_num: 0, live: true, mlx5: None, rxe_av: None };
        // On failure from here, dropping `ah` destroys the kernel AH.
        match ctx.provider() {
            Some(Provider::Rxe) => {
                ah.ah_num = rxe::ah_num(&drv_out[..out_len])?;
                if ah.ah_num == 0 || legacy_av {
                    // Kernels before 5.16 give no AH numbers and read a full
                    // address vector from every UD request instead.
                    let av = ctx.rxe_avs().insert(rxe_av(ctx, attr)?)?;
                    ah.ah_num = av.num();
                    ah.rxe_av = Some(av);
                }
            }
            Some(Provider::Mlx5) => {
                let m = ctx.mlx5_or_err(VERB)?;
                let mah = m.ah_create(&mlx5_ah_attr(ctx, attr)?, &drv_out[..out_len])?;
                ah.ah_num = mah.ah_num();
                ah.mlx5 = Some(mah);
            }
            None => {}
        }
        debug!(handle, ah_num = ah.ah_num, "AH created");
        Ok(ah)
    }
}

/// The rxe address vector of `attr` (rdma-core `rxe_create_av`): the
/// source GID from the port's table, and as destination MAC the netdev's
/// own when the destination GID is one of the port's (rxe loops such
/// packets back; any other MAC sends them through the IP stack, which
/// resolves the next hop itself: see `rverbs_providers::rxe::av`).
fn rxe_av(ctx: &Context, attr: &AhAttr) -> Result<rxe::Av> {
    const VERB: &str = "ibv_create_ah";
    let Some(g) = attr.grh else {
        return Err(Error::invalid(VERB, "rxe address handles need a GRH (RoCE): set AhAttr::grh"));
    };
    // One table query answers both: the source GID and whether the destination is ours.
    let port: Vec<_> = ctx.query_gid_table()?.into_iter().filter(|e| e.port == u32::from(attr.port_num)).collect();
    let sgid = port.iter().find(|e| e.index == u32::from(g.sgid_index)).ok_or_else(|| {
        Error::invalid(VERB, format!("sgid index {} of port {} holds no GID", g.sgid_index, attr.port_num))
    })?;
    let local = port.iter().find(|e| e.gid == g.dgid);
    let dmac = match local.and_then(|e| e.netdev.as_deref()) {
        Some(ndev) => netdev_mac(ndev).unwrap_or_default(),
        None => [0; 6],
    };
    Ok(rxe::av::build_av(&rxe::AvAttr {
        port_num: attr.port_num,
        dgid: g.dgid.0,
        flow_label: g.flow_label,
        sgid_index: g.sgid_index,
        hop_limit: g.hop_limit,
        traffic_class: g.traffic_class,
        sgid: sgid.gid.0,
        dmac,
    }))
}

/// The MAC address of network device `name` (`/sys/class/net/<name>/address`).
fn netdev_mac(name: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).ok()?;
    parse_mac(text.trim())
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Room for the largest driver answer to create-AH.
const DRV_OUT_LEN: usize = if rxe::AH_RESP_LEN > mlx5::AH_RESP_LEN { rxe::AH_RESP_LEN } else { mlx5::AH_RESP_LEN };

/// What mlx5 builds its address vector from: the address plus the port's
/// link layer (RoCE or InfiniBand) and, on RoCE, the source GID's type
/// (v2: UDP encapsulation; the flow label picks the UDP source port).
fn mlx5_ah_attr(ctx: &Context, attr: &AhAttr) -> Result<mlx5::AhAttr> {
    let is_eth = ctx.query_port(attr.port_num)?.link_layer == LinkLayer::Ethernet;
    let roce_v2 = match attr.grh {
        Some(g) if is_eth => {
            ctx.query_gid(attr.port_num, g.sgid_index.into())?.is_some_and(|e| e.gid_type == GidType::RoceV2)
        }
        _ => false,
    };
    Ok(mlx5_ah_attr_of(attr, is_eth, roce_v2))
}

pub(crate) fn mlx5_ah_attr_of(attr: &AhAttr, is_eth: bool, roce_v2: bool) -> mlx5::AhAttr {
    mlx5::AhAttr {
        is_eth,
        roce_v2,
        dlid: attr.dlid,
        sl: attr.sl,
        src_path_bits: attr.src_path_bits,
        static_rate: attr.static_rate,
        grh: attr.grh.map(|g| mlx5::Grh {
            dgid: g.dgid.0,
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        }),
    }
}

impl AddressHandle {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The address it was created with.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
    /// The AH number UD work requests name it by: the rxe kernel's, or
    /// rverbs' own for an address vector kept in userspace (rxe before 5.16,
    /// [`create_ah_legacy_av`](ProtectionDomain::create_ah_legacy_av), mlx5);
    /// 0 for drivers without a provider.
    pub fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// The destination of a UD send through this AH to QP `remote_qpn`
    /// with Q_Key `remote_qkey`.
    pub fn ud_dest(&self, remote_qpn: u32, remote_qkey: u32) -> UdDest {
        UdDest { ah_num: self.ah_num, remote_qpn, remote_qkey }
    }

    fn destroy_inner(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::destroy_ah(self.pd.context().fd(), self.handle)?;
        debug!(handle = self.handle, "AH destroyed");
        Ok(())
    }

    /// Destroys the AH now (`UVERBS_METHOD_AH_DESTROY`, `ibv_destroy_ah`).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_inner() {
            tracing::warn!(handle = self.handle, error = %e, "AH destroy failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gid, GlobalRoute};

    #[test]
    fn mac_text() {
        assert_eq!(parse_mac("52:54:00:12:34:5a"), Some([0x52, 0x54, 0, 0x12, 0x34, 0x5a]));
        assert_eq!(parse_mac("52:54:00:12:34"), None);
        assert_eq!(parse_mac("52:54:00:12:34:5a:01"), None);
        assert_eq!(parse_mac("zz:54:00:12:34:5a"), None);
    }

    #[test]
    fn mlx5_address_from_ah_attr() {
        let dgid = Gid::parse("::ffff:10.0.0.2").unwrap();
        let a = AhAttr {
            dlid: 0,
            sl: 3,
            src_path_bits: 0,
            static_rate: 2,
            port_num: 1,
            grh: Some(GlobalRoute { dgid, flow_label: 0x12345, sgid_index: 3, hop_limit: 64, traffic_class: 0x20 }),
        };
        let m = mlx5_ah_attr_of(&a, true, true);
        assert!(m.is_eth && m.roce_v2);
        assert_eq!((m.sl, m.static_rate, m.dlid), (3, 2, 0));
        let g = m.grh.unwrap();
        assert_eq!(g.dgid, dgid.0);
        assert_eq!((g.flow_label, g.sgid_index, g.hop_limit, g.traffic_class), (0x12345, 3, 64, 0x20));
        let ib = AhAttr { dlid: 0x17, src_path_bits: 1, grh: None, ..a };
        let m = mlx5_ah_attr_of(&ib, false, false);
        assert_eq!((m.dlid, m.src_path_bits, m.grh), (0x17, 1, None));
        assert!(!m.is_eth && !m.roce_v2);
    }
}
