//! Property tests of the CM's decoding of the addresses the kernel reports
//! (issue 32, hostile bytes): `to_cm_addr` over any 128-byte
//! `sockaddr_storage` and any reported size gives an address of the
//! family the bytes name, or `CmAddr::None`, never a panic; and what
//! `sockaddr_of` encodes decodes back to itself.

use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};

use proptest::prelude::*;
use rverbs_uapi::rdma_user_cm::{__kernel_sockaddr_storage, AF_IB, AF_INET, AF_INET6};
use zerocopy::{FromBytes, IntoBytes};

use super::{sockaddr_of, to_cm_addr, CmAddr};
use crate::proptest_config::config;

fn storage() -> impl Strategy<Value = __kernel_sockaddr_storage> {
    let family = prop_oneof![Just(AF_INET), Just(AF_INET6), Just(AF_IB), Just(0u16), any::<u16>()];
    (family, proptest::array::uniform16(any::<u64>())).prop_map(|(f, words)| {
        let mut b = [0u8; 128];
        for (c, w) in b.chunks_exact_mut(8).zip(words) {
            c.copy_from_slice(&w.to_ne_bytes());
        }
        let mut ss = __kernel_sockaddr_storage::read_from_bytes(&b).expect("128 bytes");
        ss.ss_family = f;
        ss
    })
}

fn size() -> impl Strategy<Value = u16> {
    prop_oneof![Just(0u16), Just(16), Just(28), Just(48), Just(128), 0u16..130, any::<u16>()]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_reported_address_decodes(ss in storage(), size in size()) {
        match to_cm_addr(&ss, size) {
            CmAddr::Ip(SocketAddr::V4(_)) => prop_assert!(ss.ss_family == AF_INET && size >= 16),
            CmAddr::Ip(SocketAddr::V6(_)) => prop_assert!(ss.ss_family == AF_INET6 && size >= 28),
            CmAddr::Ib { .. } => prop_assert!(ss.ss_family == AF_IB && size >= 48),
            CmAddr::None(f) => prop_assert_eq!(f, ss.ss_family),
        }
    }

    #[test]
    fn encoded_addresses_decode_to_themselves(
        v6 in any::<bool>(),
        ip in any::<[u8; 16]>(),
        port in any::<u16>(),
        flow in any::<u32>(),
        scope in any::<u32>(),
    ) {
        let a = if v6 {
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow & 0x000f_ffff, scope))
        } else {
            SocketAddr::from(([ip[0], ip[1], ip[2], ip[3]], port))
        };
        let (ss, len) = sockaddr_of(&a);
        prop_assert!(usize::from(len) <= ss.as_bytes().len());
        prop_assert_eq!(to_cm_addr(&ss, len), CmAddr::Ip(a));
    }
}
