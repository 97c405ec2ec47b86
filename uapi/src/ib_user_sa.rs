//! `include/uapi/rdma/ib_user_sa.h`: the subnet administrator's path record
//! as the kernel passes it to userspace (the RDMA CM's `ROUTE_RESOLVED`
//! answer, which librdmacm turns into a `struct ibv_sa_path_rec` with
//! `ibv_copy_path_rec_from_kern`).
//!
//! Synced from rdma-core 44's `kernel-headers/rdma/ib_user_sa.h` (64 bytes,
//! offsets checked with gcc 12 on that declaration).
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `struct ib_user_path_rec` (64 bytes). GIDs in network order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_user_path_rec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: u32,
    pub flow_label: u32,
    pub reversible: u32,
    pub mtu: u32,
    pub pkey: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub numb_path: u8,
    pub sl: u8,
    pub mtu_selector: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}
assert_layout!(
    ib_user_path_rec,
    size = 64,
    align = 4,
    dgid = 0,
    sgid = 16,
    dlid = 32,
    slid = 34,
    raw_traffic = 36,
    flow_label = 40,
    reversible = 44,
    mtu = 48,
    pkey = 52,
    hop_limit = 54,
    traffic_class = 55,
    numb_path = 56,
    sl = 57,
    mtu_selector = 58,
    rate_selector = 59,
    rate = 60,
    packet_life_time_selector = 61,
    packet_life_time = 62,
    preference = 63
);
