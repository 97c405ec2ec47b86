//! What the fake device reports: a ConnectX-5 (`MT4119`, firmware
//! 16.35.2000) with one RoCE port, in mlx5_ib's values.

use rverbs_uapi::ib_user_verbs::{
    ib_uverbs_cq_moderation_caps, ib_uverbs_ex_query_device_resp, ib_uverbs_odp_caps, ib_uverbs_query_device_resp,
    ib_uverbs_query_port_resp, ib_uverbs_rss_caps,
};
use rverbs_uapi::mlx5_abi::mlx5_ib_query_device_resp;

/// The node GUID as the kernel stores it (`__be64`: these bytes in order).
pub const NODE_GUID: [u8; 8] = [0xb8, 0x59, 0x9f, 0x03, 0x00, 0xd0, 0xa1, 0xb2];
/// Firmware 16.35.2000, as mlx5_ib packs it (major << 32 | minor << 16 | sub).
pub const FW_VER: u64 = (16 << 32) | (35 << 16) | 2000;
/// The port's MAC (the GIDs derive from it).
pub const MAC: [u8; 6] = [0xb8, 0x59, 0x9f, 0xd0, 0xa1, 0xb2];
/// The port's IPv4 address, a documentation address (RFC 5737): no traffic
/// ever goes anywhere.
pub const IPV4: [u8; 4] = [192, 0, 2, 9];
/// GID table: (gid, type as sysfs spells it).
pub fn gids() -> Vec<([u8; 16], &'static str)> {
    let mut link_local = [0u8; 16];
    link_local[0] = 0xfe;
    link_local[1] = 0x80;
    link_local[8..11].copy_from_slice(&[MAC[0] ^ 2, MAC[1], MAC[2]]);
    link_local[11] = 0xff;
    link_local[12] = 0xfe;
    link_local[13..16].copy_from_slice(&MAC[3..6]);
    let mut v4 = [0u8; 16];
    v4[10] = 0xff;
    v4[11] = 0xff;
    v4[12..16].copy_from_slice(&IPV4);
    vec![(link_local, "IB/RoCE v1"), (link_local, "RoCE v2"), (v4, "IB/RoCE v1"), (v4, "RoCE v2")]
}
/// GID table length of the port.
pub const GID_TBL_LEN: u32 = 255;

/// QUERY_DEVICE's answer.
pub fn device() -> ib_uverbs_query_device_resp {
    ib_uverbs_query_device_resp {
        fw_ver: FW_VER,
        node_guid: u64::from_ne_bytes(NODE_GUID),
        sys_image_guid: u64::from_ne_bytes(NODE_GUID),
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_ffff_ffff_f000,
        vendor_id: 0x02c9,
        vendor_part_id: 4119,
        hw_ver: 0,
        max_qp: 1 << 18,
        max_qp_wr: 1 << 15,
        device_cap_flags: 0xed72_1c36,
        max_sge: 30,
        max_sge_rd: 30,
        max_cq: 1 << 24,
        max_cqe: (1 << 22) - 1,
        max_mr: 1 << 24,
        max_pd: 1 << 24,
        max_qp_rd_atom: 16,
        max_res_rd_atom: 1 << 22,
        max_qp_init_rd_atom: 16,
        atomic_cap: 1,
        max_mw: 1 << 24,
        max_mcast_grp: 1 << 21,
        max_mcast_qp_attach: 240,
        max_total_mcast_qp_attach: 503_316_480,
        max_ah: i32::MAX as u32,
        max_srq: 1 << 23,
        max_srq_wr: (1 << 15) - 1,
        max_srq_sge: 31,
        max_pkeys: 128,
        local_ca_ack_delay: 16,
        phys_port_cnt: 1,
        ..Default::default()
    }
}

/// QUERY_DEVICE_EX's answer (the kernel truncates it to what was asked).
pub fn device_ex() -> ib_uverbs_ex_query_device_resp {
    let mut r = ib_uverbs_ex_query_device_resp {
        base: device(),
        odp_caps: ib_uverbs_odp_caps { general_caps: 0, ..Default::default() },
        timestamp_mask: 0x7fff_ffff_ffff_ffff,
        hca_core_clock: 156_250,
        device_cap_flags_ex: 0x1_ed72_1c36,
        rss_caps: ib_uverbs_rss_caps {
            supported_qpts: 1 << 8,
            max_rwq_indirection_tables: 1 << 16,
            max_rwq_indirection_table_size: 2048,
            reserved: 0,
        },
        max_wq_type_rq: 1 << 24,
        raw_packet_caps: 0xe,
        cq_moderation_caps: ib_uverbs_cq_moderation_caps {
            max_cq_moderation_count: 65535,
            max_cq_moderation_period: 4095,
            reserved: 0,
        },
        max_dm_size: 131_072,
        ..Default::default()
    };
    r.response_length = std::mem::size_of::<ib_uverbs_ex_query_device_resp>() as u32;
    r
}

/// mlx5_ib's driver data of QUERY_DEVICE_EX.
pub fn mlx5_device() -> mlx5_ib_query_device_resp {
    mlx5_ib_query_device_resp {
        response_length: std::mem::size_of::<mlx5_ib_query_device_resp>() as u32,
        ..Default::default()
    }
}

/// QUERY_PORT's answer for port 1: RoCE, active, 4096/1024 MTU.
pub fn port() -> ib_uverbs_query_port_resp {
    ib_uverbs_query_port_resp {
        port_cap_flags: 0x0401_0000,
        max_msg_sz: 1 << 30,
        gid_tbl_len: GID_TBL_LEN,
        pkey_tbl_len: 1,
        state: 4,
        max_mtu: 5,
        active_mtu: 3,
        active_width: 2,
        active_speed: 32,
        phys_state: 5,
        link_layer: 2,
        flags: 1,
        ..Default::default()
    }
}
