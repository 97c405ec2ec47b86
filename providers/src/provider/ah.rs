//! Address handles: the kernel `CREATE_AH` (it resolves the RoCE
//! destination MAC) and what each provider keeps to address UD sends.

use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::{ib_uverbs_gid_entry, IB_UVERBS_GID_TYPE_ROCE_V2};
use rverbs_uapi::ib_user_verbs::ib_uverbs_ah_attr;
use rverbs_uapi::ib_verbs_values::IB_LINK_LAYER_ETHERNET;
use tracing::debug;

use super::{Kind, ProviderContext};
use crate::cmd::{ah as cmd, device};
use crate::sys::UverbsFd;
use crate::{mlx5, rxe, Errno, Error, Result};

const VERB: &str = "ibv_create_ah";

/// What an AH is created with.
#[derive(Clone, Copy, Debug)]
pub struct AhCreate {
    /// The PD's kernel handle.
    pub pd_handle: u32,
    /// The address (`struct ibv_ah_attr` in the kernel's layout; checked by
    /// the caller: port, GID index, GRH on RoCE).
    pub attr: ib_uverbs_ah_attr,
    /// rxe: carry the address vector in every UD work request, as on
    /// kernels before 5.16 (which give no AH numbers), even when the kernel
    /// gave a number. Other providers ignore it.
    pub legacy_av: bool,
    /// The source GID's type (`IB_UVERBS_GID_TYPE_*`) when the caller has
    /// read it (sysfs on kernels without `QUERY_GID_ENTRY`); `None`: the
    /// provider asks the kernel.
    pub sgid_type: Option<u32>,
    /// Whether the port is Ethernet (RoCE), when the caller knows it
    /// (rverbs caches the port's link layer); `None`: QUERY_PORT.
    pub ethernet: Option<bool>,
}

/// A kernel AH and the provider's address data: the number UD work
/// requests name it by (the rxe kernel's, or a provider's own for an
/// address vector kept in userspace: rxe before 5.16, mlx5 always).
/// Dropping it destroys the kernel AH and forgets the number; WQEs already
/// posted carry their own copy of the address.
#[derive(Debug)]
pub struct KernelAh {
    fd: Arc<UverbsFd>,
    handle: u32,
    ah_num: u32,
    prov: AhProv,
    live: bool,
}

/// Held for their `Drop`, which forgets the provider's AH number.
#[derive(Debug)]
enum AhProv {
    /// rxe with a kernel AH number.
    KernelNumber,
    /// rxe without one: the vector lives in the context's table.
    RxeAv {
        _entry: rxe::AvHandle,
    },
    Mlx5 {
        _ah: mlx5::Ah,
    },
}

impl ProviderContext {
    /// Creates an address handle: `IB_USER_VERBS_CMD_CREATE_AH` through
    /// `INVOKE_WRITE` (`ibv_create_ah`), then the provider's address data
    /// (rxe: the kernel's AH number, or an `rxe_av` rverbs builds; mlx5: an
    /// address vector with the MAC the kernel resolved). A route failure
    /// keeps the kernel's errno (`ETIMEDOUT`, `ENETUNREACH`,
    /// `EHOSTUNREACH`, `ENODATA`) with [`ErrorKind::Os`](crate::ErrorKind::Os).
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, fd: &Arc<UverbsFd>, a: &AhCreate) -> Result<KernelAh> {
        let mut drv_out = [0u8; AH_RESP_MAX];
        let out_len = match &self.kind {
            Kind::Rxe(_) => rxe::AH_RESP_LEN,
            Kind::Mlx5(_) => mlx5::AH_RESP_LEN,
        };
        let drv_out = &mut drv_out[..out_len];
        let handle = cmd::create_ah(fd, a.pd_handle, &a.attr, 0, drv_out).map_err(|e| Error::os(VERB, e))?;
        // On failure from here, dropping `ah` destroys the kernel AH.
        let mut ah = KernelAh { fd: fd.clone(), handle, ah_num: 0, prov: AhProv::KernelNumber, live: true };
        match &self.kind {
            Kind::Rxe(rxe_ctx) => {
                let num = rxe::ah_num(drv_out)?;
                if num == 0 || a.legacy_av {
                    // Kernels before 5.16 give no AH numbers and read a full
                    // address vector from every UD request instead.
                    let av = rxe_ctx.avs.insert(rxe_av(fd, &a.attr)?)?;
                    ah.ah_num = av.num();
                    ah.prov = AhProv::RxeAv { _entry: av };
                } else {
                    ah.ah_num = num;
                }
            }
            Kind::Mlx5(m) => {
                let mah = m.ah_create(&mlx5_ah_attr(fd, a)?, drv_out)?;
                ah.ah_num = mah.ah_num();
                ah.prov = AhProv::Mlx5 { _ah: mah };
            }
        }
        debug!(handle, ah_num = ah.ah_num, "AH created");
        Ok(ah)
    }
}

/// Room for the largest driver answer to create-AH.
const AH_RESP_MAX: usize = if rxe::AH_RESP_LEN > mlx5::AH_RESP_LEN { rxe::AH_RESP_LEN } else { mlx5::AH_RESP_LEN };

impl KernelAh {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The number UD work requests name this AH by.
    pub fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// Destroys the kernel AH now (`UVERBS_METHOD_AH_DESTROY`,
    /// `ibv_destroy_ah`); a second call does nothing. If the kernel
    /// refuses, the AH stays live (a later call tries again).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::destroy_ah(&self.fd, self.handle).inspect_err(|_| self.live = true)?;
        debug!(handle = self.handle, "AH destroyed");
        Ok(())
    }
}

impl Drop for KernelAh {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "AH destroy failed");
        }
    }
}

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
fn rxe_av(fd: &UverbsFd, attr: &ib_uverbs_ah_attr) -> Result<rxe::Av> {
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
    Ok(rxe::av::build_av(&rxe::AvAttr {
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

/// What mlx5 builds its address vector from: the address plus the port's
/// link layer (RoCE or InfiniBand) and, on RoCE, the source GID's type
/// (v2: UDP encapsulation; the flow label picks the UDP source port).
fn mlx5_ah_attr(fd: &UverbsFd, a: &AhCreate) -> Result<mlx5::AhAttr> {
    let attr = &a.attr;
    let sgid_type = a.sgid_type;
    let is_eth = match a.ethernet {
        Some(e) => e,
        None => u32::from(device::query_port(fd, attr.port_num)?.legacy_resp.link_layer) == IB_LINK_LAYER_ETHERNET,
    };
    let roce_v2 = if is_eth && attr.is_global != 0 {
        match sgid_type {
            Some(t) => t == IB_UVERBS_GID_TYPE_ROCE_V2,
            None => device::query_gid_entry(fd, attr.port_num, attr.grh.sgid_index.into())?
                .is_some_and(|e| e.gid_type == IB_UVERBS_GID_TYPE_ROCE_V2),
        }
    } else {
        false
    };
    Ok(mlx5_ah_attr_of(attr, is_eth, roce_v2))
}

fn mlx5_ah_attr_of(attr: &ib_uverbs_ah_attr, is_eth: bool, roce_v2: bool) -> mlx5::AhAttr {
    let g = &attr.grh;
    mlx5::AhAttr {
        is_eth,
        roce_v2,
        dlid: attr.dlid,
        sl: attr.sl,
        src_path_bits: attr.src_path_bits,
        static_rate: attr.static_rate,
        grh: (attr.is_global != 0).then_some(mlx5::Grh {
            dgid: g.dgid,
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rverbs_uapi::ib_user_verbs::ib_uverbs_global_route;

    #[test]
    fn mac_text() {
        assert_eq!(parse_mac("52:54:00:12:34:5a"), Some([0x52, 0x54, 0, 0x12, 0x34, 0x5a]));
        assert_eq!(parse_mac("52:54:00:12:34"), None);
        assert_eq!(parse_mac("52:54:00:12:34:5a:01"), None);
        assert_eq!(parse_mac("zz:54:00:12:34:5a"), None);
    }

    #[test]
    fn mlx5_address_from_ah_attr() {
        let mut dgid = [0u8; 16];
        dgid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        let a = ib_uverbs_ah_attr {
            grh: ib_uverbs_global_route {
                dgid,
                flow_label: 0x12345,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x20,
                reserved: 0,
            },
            dlid: 0,
            sl: 3,
            src_path_bits: 0,
            static_rate: 2,
            is_global: 1,
            port_num: 1,
            reserved: 0,
        };
        let m = mlx5_ah_attr_of(&a, true, true);
        assert!(m.is_eth && m.roce_v2);
        assert_eq!((m.sl, m.static_rate, m.dlid), (3, 2, 0));
        let g = m.grh.unwrap();
        assert_eq!(g.dgid, dgid);
        assert_eq!((g.flow_label, g.sgid_index, g.hop_limit, g.traffic_class), (0x12345, 3, 64, 0x20));
        let ib = ib_uverbs_ah_attr { dlid: 0x17, src_path_bits: 1, is_global: 0, ..a };
        let m = mlx5_ah_attr_of(&ib, false, false);
        assert_eq!((m.dlid, m.src_path_bits, m.grh), (0x17, 1, None));
        assert!(!m.is_eth && !m.roce_v2);
    }
}
