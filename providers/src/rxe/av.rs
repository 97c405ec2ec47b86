//! UD address vectors built in userspace, for rxe kernels that give no AH
//! numbers (before 5.16).
//!
//! Such a kernel answers create-AH without an `ah_num` and reads the whole
//! `struct rxe_av` from every UD send WQE (`wr.ud.av`, WQE offset 56); newer
//! kernels still honour that vector whenever a WQE's `ah_num` is 0
//! (`rxe_av.c rxe_get_av`). rdma-core builds it in `rxe_create_ah`; this is
//! our version:
//! - `grh` is the address's global route; `port_num` its port;
//! - `network_type` is IPv4 when the destination GID is IPv4-mapped
//!   (`::ffff:a.b.c.d`), else IPv6;
//! - `sgid_addr`/`dgid_addr` are the source and destination GIDs as socket
//!   addresses (`sockaddr_in` with `AF_INET` for IPv4-mapped GIDs, as the
//!   kernel's `rdma_gid2ip` writes them; `sockaddr_in6` otherwise). The
//!   kernel builds the IP header from them;
//! - `dmac`: rxe uses it only to decide whether a packet loops back to its
//!   own port (`rxe_prepare`: destination MAC == the netdev's MAC); the IP
//!   stack resolves the real next hop. The caller passes the port's own MAC
//!   when the destination GID is one of the port's, zeros otherwise.
//!
//! The vectors live in an [`AvTable`] (the providers' shared
//! [`AhTable`](crate::ah_table::AhTable)) per context under numbers with
//! bit 31 set ([`AV_NUM_FLAG`]), which a send ring tells apart from the
//! kernel's AH numbers: for those it copies the 88 bytes into the WQE and
//! writes `ah_num` 0.

use rverbs_uapi::rdma_user_rxe::{
    rxe_av, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6, RXE_NETWORK_TYPE_IPV4, RXE_NETWORK_TYPE_IPV6,
};
use zerocopy::IntoBytes;

/// Size of `struct rxe_av`.
pub const AV_LEN: usize = size_of::<rxe_av>();

/// Marks an AH number as one of ours ([`AvTable`]) rather than the
/// kernel's. rxe's own AH indices stay far below it (its AH pool holds at
/// most 2^24 entries on every kernel so far).
pub const AV_NUM_FLAG: u32 = 1 << 31;

/// An encoded `struct rxe_av`, ready to copy into a WQE.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Av(pub [u8; AV_LEN]);

impl std::fmt::Debug for Av {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Av({:02x?})", &self.0[..])
    }
}

/// What an address vector is built from (`struct ibv_ah_attr` with its GRH,
/// plus what rdma-core looks up: the source GID and the destination MAC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AvAttr {
    /// Port number.
    pub port_num: u8,
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
    /// The source GID (the port's GID at `sgid_index`).
    pub sgid: [u8; 16],
    /// Destination MAC: the port's own for a local destination, else zeros
    /// (see the module documentation).
    pub dmac: [u8; 6],
}

fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// A GID as the socket address the kernel builds the IP header from.
enum SockAddr {
    V4(sockaddr_in),
    V6(sockaddr_in6),
}

fn sock_addr(gid: &[u8; 16]) -> SockAddr {
    if is_v4_mapped(gid) {
        SockAddr::V4(sockaddr_in {
            sin_family: AF_INET,
            sin_addr: u32::from_ne_bytes([gid[12], gid[13], gid[14], gid[15]]),
            ..Default::default()
        })
    } else {
        SockAddr::V6(sockaddr_in6 { sin6_family: AF_INET6, sin6_addr: *gid, ..Default::default() })
    }
}

/// Builds the address vector for `a`.
pub fn build_av(a: &AvAttr) -> Av {
    let mut av = rxe_av { port_num: a.port_num, dmac: a.dmac, ..Default::default() };
    av.network_type = if is_v4_mapped(&a.dgid) { RXE_NETWORK_TYPE_IPV4 } else { RXE_NETWORK_TYPE_IPV6 } as u8;
    av.grh.dgid.raw = a.dgid;
    av.grh.flow_label = a.flow_label;
    av.grh.sgid_index = a.sgid_index;
    av.grh.hop_limit = a.hop_limit;
    av.grh.traffic_class = a.traffic_class;
    match sock_addr(&a.sgid) {
        SockAddr::V4(v) => av.set_sgid_addr_in(v),
        SockAddr::V6(v) => av.set_sgid_addr_in6(v),
    }
    match sock_addr(&a.dgid) {
        SockAddr::V4(v) => av.set_dgid_addr_in(v),
        SockAddr::V6(v) => av.set_dgid_addr_in6(v),
    }
    let mut out = [0u8; AV_LEN];
    out.copy_from_slice(av.as_bytes());
    Av(out)
}

/// Address vectors by AH number; create it with
/// `AvTable::new(AV_NUM_FLAG)`.
pub type AvTable = crate::ah_table::AhTable<Av>;

/// Owns one number in an [`AvTable`].
pub type AvHandle = crate::ah_table::AhEntry<Av>;
