//! Addresses: BIND, RESOLVE_ADDR, RESOLVE_ROUTE, QUERY; and the socket
//! address conversions they need.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use rverbs_uapi::rdma_user_cm::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{common_explanation, issue};
use crate::sys::ucma::{Command, UcmaFd};
use crate::{Errno, Error, Result};

/// An address the CM reports: an IP socket address, or (QUERY(GID), AF_IB
/// ids) an InfiniBand one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmAddr {
    /// `AF_INET`/`AF_INET6`.
    Ip(SocketAddr),
    /// `AF_IB`: a GID (16 raw bytes), P_Key and service id (host order).
    Ib {
        /// The GID, network order.
        gid: [u8; 16],
        /// The P_Key.
        pkey: u16,
        /// The service id (`RDMA_PS_*` << 16 | port for IP port spaces).
        sid: u64,
    },
    /// No address (size 0), or a family rverbs does not know.
    None(u16),
}

/// `addr` as the kernel's `sockaddr_storage` and the family's size.
pub fn sockaddr_of(addr: &SocketAddr) -> (__kernel_sockaddr_storage, u16) {
    let mut ss = __kernel_sockaddr_storage::new_zeroed();
    let size = match addr {
        SocketAddr::V4(a) => {
            let s = sockaddr_in {
                sin_family: AF_INET,
                sin_port: a.port().to_be(),
                sin_addr: u32::from_ne_bytes(a.ip().octets()),
                __pad: [0; 8],
            };
            ss.as_mut_bytes()[..16].copy_from_slice(s.as_bytes());
            16
        }
        SocketAddr::V6(a) => {
            let s = sockaddr_in6 {
                sin6_family: AF_INET6,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: a.ip().octets(),
                sin6_scope_id: a.scope_id(),
            };
            ss.as_mut_bytes()[..28].copy_from_slice(s.as_bytes());
            28
        }
    };
    (ss, size)
}

/// Decodes an address of `size` bytes the kernel reported.
pub fn to_cm_addr(ss: &__kernel_sockaddr_storage, size: u16) -> CmAddr {
    let b = ss.as_bytes();
    match (ss.ss_family, size) {
        (AF_INET, 16..) => {
            let Ok((s, _)) = sockaddr_in::read_from_prefix(b) else { return CmAddr::None(AF_INET) };
            let ip = Ipv4Addr::from(s.sin_addr.to_ne_bytes());
            CmAddr::Ip(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(s.sin_port))))
        }
        (AF_INET6, 28..) => {
            let Ok((s, _)) = sockaddr_in6::read_from_prefix(b) else { return CmAddr::None(AF_INET6) };
            let ip = Ipv6Addr::from(s.sin6_addr);
            CmAddr::Ip(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            )))
        }
        (AF_IB, 48..) => {
            let Ok((s, _)) = sockaddr_ib::read_from_prefix(b) else { return CmAddr::None(AF_IB) };
            CmAddr::Ib { gid: s.sib_addr.sib_raw, pkey: u16::from_be(s.sib_pkey), sid: u64::from_be(s.sib_sid) }
        }
        (f, _) => CmAddr::None(f),
    }
}

/// An errno of an address command as an error naming `addr`.
fn addr_error(verb: &'static str, e: Errno, addr: &SocketAddr) -> Error {
    let err = Error::os(verb, e);
    match e {
        Errno::EADDRINUSE => err.with_message(format!("{addr} is already bound by another CM id")),
        Errno::EADDRNOTAVAIL => err.with_message(format!("{addr} is not an address of this host")),
        Errno::ENODEV => err.with_message(format!("no RDMA device serves {addr}")),
        Errno::EAFNOSUPPORT => err.with_message(format!("the kernel's CM cannot use {addr}'s address family")),
        Errno::EINVAL => err.with_message(format!(
            "the kernel refused {addr} (the id may be bound or resolved already, or the address is not usable)"
        )),
        _ => match common_explanation(e) {
            Some(m) => err.with_message(format!("{m} ({addr})")),
            None => err.with_message(format!("the kernel refused {addr}")),
        },
    }
}

/// `RDMA_USER_CM_CMD_BIND` (20): binds `id` to a local address; a specific
/// address also binds the id to that address's RDMA device
/// (`rdma_bind_addr`).
pub fn bind(fd: &UcmaFd, id: u32, addr: &SocketAddr) -> Result<()> {
    const VERB: &str = "rdma_bind_addr";
    let (ss, size) = sockaddr_of(addr);
    let mut b = rdma_ucm_bind { id, addr_size: size, reserved: 0, addr: ss };
    let c = Command { cmd: RDMA_USER_CM_CMD_BIND, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "BIND", VERB, id, c).map_err(|e| addr_error(VERB, e, addr))
}

/// `RDMA_USER_CM_CMD_RESOLVE_ADDR` (21): starts resolving `dst` (and binds
/// `src`, or the source the route picks); ADDR_RESOLVED or ADDR_ERROR
/// follows within `timeout_ms` (`rdma_resolve_addr`).
pub fn resolve_addr(fd: &UcmaFd, id: u32, src: Option<&SocketAddr>, dst: &SocketAddr, timeout_ms: u32) -> Result<()> {
    const VERB: &str = "rdma_resolve_addr";
    let mut b = rdma_ucm_resolve_addr::new_zeroed();
    b.id = id;
    b.timeout_ms = timeout_ms;
    if let Some(s) = src {
        (b.src_addr, b.src_size) = sockaddr_of(s);
    }
    (b.dst_addr, b.dst_size) = sockaddr_of(dst);
    let c = Command { cmd: RDMA_USER_CM_CMD_RESOLVE_ADDR, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "RESOLVE_ADDR", VERB, id, c).map_err(|e| match (e, src) {
        (Errno::EADDRNOTAVAIL | Errno::EADDRINUSE, Some(s)) => addr_error(VERB, e, s),
        _ => addr_error(VERB, e, dst),
    })
}

/// `RDMA_USER_CM_CMD_RESOLVE_ROUTE` (4): starts resolving the route of a
/// resolved id; ROUTE_RESOLVED or ROUTE_ERROR follows (`rdma_resolve_route`).
pub fn resolve_route(fd: &UcmaFd, id: u32, timeout_ms: u32) -> Result<()> {
    const VERB: &str = "rdma_resolve_route";
    let mut b = rdma_ucm_resolve_route { id, timeout_ms };
    let c = Command { cmd: RDMA_USER_CM_CMD_RESOLVE_ROUTE, body: b.as_mut_bytes(), resp: None, input: None };
    issue(fd, "RESOLVE_ROUTE", VERB, id, c).map_err(|e| {
        let err = Error::os(VERB, e);
        match e {
            Errno::EINVAL => err.with_message("the id's address is not resolved yet (wait for ADDR_RESOLVED)"),
            _ => match common_explanation(e) {
                Some(m) => err.with_message(m),
                None => err,
            },
        }
    })
}

fn query(fd: &UcmaFd, id: u32, option: u32, out: &mut [u8]) -> Result<()> {
    const VERB: &str = "rdma_query_id";
    let mut b = rdma_ucm_query { response: 0, id, option };
    let name = match option {
        RDMA_USER_CM_QUERY_ADDR => "QUERY(ADDR)",
        RDMA_USER_CM_QUERY_PATH => "QUERY(PATH)",
        _ => "QUERY(GID)",
    };
    let c = Command { cmd: RDMA_USER_CM_CMD_QUERY, body: b.as_mut_bytes(), resp: Some((0, out)), input: None };
    issue(fd, name, VERB, id, c).map_err(|e| {
        let err = Error::os(VERB, e);
        match common_explanation(e) {
            Some(m) => err.with_message(format!("{name}: {m}")),
            None => err.with_message(format!("{name}: the kernel refused it")),
        }
    })
}

/// `RDMA_USER_CM_CMD_QUERY` (19), option ADDR: the id's device (node GUID,
/// device index), port, P_Key and IP addresses (librdmacm's
/// `ucma_query_addr`).
pub fn query_addr(fd: &UcmaFd, id: u32) -> Result<rdma_ucm_query_addr_resp> {
    let mut r = rdma_ucm_query_addr_resp::new_zeroed();
    query(fd, id, RDMA_USER_CM_QUERY_ADDR, r.as_mut_bytes())?;
    Ok(r)
}

/// `RDMA_USER_CM_CMD_QUERY` (19), option GID: the same with the addresses
/// as `sockaddr_ib` (GIDs; librdmacm's `ucma_query_gid`).
pub fn query_gid(fd: &UcmaFd, id: u32) -> Result<rdma_ucm_query_addr_resp> {
    let mut r = rdma_ucm_query_addr_resp::new_zeroed();
    query(fd, id, RDMA_USER_CM_QUERY_GID, r.as_mut_bytes())?;
    Ok(r)
}

/// `RDMA_USER_CM_CMD_QUERY` (19), option PATH: the resolved path records
/// (at most 6 are asked for, as librdmacm does; `ucma_query_path`).
pub fn query_path(fd: &UcmaFd, id: u32) -> Result<Vec<ib_path_rec_data>> {
    const MAX: usize = 6;
    let mut buf = vec![0u8; size_of::<rdma_ucm_query_path_resp>() + MAX * size_of::<ib_path_rec_data>()];
    query(fd, id, RDMA_USER_CM_QUERY_PATH, &mut buf)?;
    let (head, rest) =
        rdma_ucm_query_path_resp::read_from_prefix(&buf).map_err(|_| Error::check("rdma_query_id", Errno::EPROTO))?;
    let n = (head.num_paths as usize).min(MAX);
    Ok(rest
        .chunks_exact(size_of::<ib_path_rec_data>())
        .take(n)
        .filter_map(|c| ib_path_rec_data::read_from_bytes(c).ok())
        .collect())
}
