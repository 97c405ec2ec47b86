//! Golden byte encodings (little-endian hosts) and union accessor checks.

use zerocopy::{FromBytes, IntoBytes};

use crate::ib_user_ioctl_cmds::*;
use crate::ib_user_ioctl_verbs::*;
use crate::ib_user_verbs::*;
use crate::mlx5_abi::*;
use crate::mlx5_user_ioctl_cmds::*;
use crate::rdma_netlink::*;
use crate::rdma_user_ioctl_cmds::*;
use crate::rdma_user_rxe::*;

/// `uverbs-abi.md` §2.7: GET_CONTEXT for rxe, header plus two attributes.
#[cfg(target_endian = "little")]
#[test]
fn ioctl_get_context_rxe() {
    let hdr = ib_uverbs_ioctl_hdr {
        length: (24 + 2 * 16) as u16,
        object_id: UVERBS_OBJECT_DEVICE,
        method_id: UVERBS_METHOD_GET_CONTEXT,
        num_attrs: 2,
        driver_id: RDMA_DRIVER_RXE,
        ..Default::default()
    };
    #[rustfmt::skip]
    let want: [u8; 24] = [
        0x38, 0x00, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    assert_eq!(hdr.as_bytes(), &want);

    let attr = ib_uverbs_attr {
        attr_id: UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
        len: 4,
        flags: UVERBS_ATTR_F_MANDATORY as u16,
        attr_data: 0,
        data: 0x7fff_0000_1000,
    };
    #[rustfmt::skip]
    let want: [u8; 16] = [
        0x00, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x10, 0x00, 0x00, 0xff, 0x7f, 0x00, 0x00,
    ];
    assert_eq!(attr.as_bytes(), &want);

    let back = ib_uverbs_ioctl_hdr::read_from_bytes(hdr.as_bytes()).unwrap();
    assert_eq!(back.length, 56);
    assert_eq!(back.driver_id, 14);
}

/// `providers.md` §B.11: the rxe POST_SEND doorbell (`wr_count = 0`).
#[cfg(target_endian = "little")]
#[test]
fn write_post_send_doorbell() {
    let hdr = ib_uverbs_cmd_hdr {
        command: IB_USER_VERBS_CMD_POST_SEND,
        in_words: ((8 + size_of::<ib_uverbs_post_send>()) / 4) as u16,
        out_words: (size_of::<ib_uverbs_post_send_resp>() / 4) as u16,
    };
    let cmd = ib_uverbs_post_send { response: 0x7fff_0000_1000, qp_handle: 7, wqe_size: 128, ..Default::default() };
    let mut buf = [0u8; 32];
    buf[..8].copy_from_slice(hdr.as_bytes());
    buf[8..].copy_from_slice(cmd.as_bytes());
    #[rustfmt::skip]
    let want: [u8; 32] = [
        0x1c, 0x00, 0x00, 0x00, 0x08, 0x00, 0x01, 0x00,
        0x00, 0x10, 0x00, 0x00, 0xff, 0x7f, 0x00, 0x00,
        0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
    ];
    assert_eq!(buf, want);
}

/// `providers.md` §B.11: REQ_NOTIFY_CQ, cq_handle 7, solicited_only 0.
#[cfg(target_endian = "little")]
#[test]
fn write_req_notify_cq() {
    let hdr = ib_uverbs_cmd_hdr { command: IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, in_words: 4, out_words: 0 };
    let cmd = ib_uverbs_req_notify_cq { cq_handle: 7, solicited_only: 0 };
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(hdr.as_bytes());
    buf[8..].copy_from_slice(cmd.as_bytes());
    assert_eq!(buf, [0x17, 0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
}

/// `providers.md` §B.1/B.2: mlx5 write GET_CONTEXT framing and the UAR
/// allocation ioctl header.
#[test]
fn mlx5_framing() {
    // hdr 8 + response 8 + req_v2 32 = 48 bytes; response 8 + 72 = 80 bytes.
    let in_len = 8 + size_of::<ib_uverbs_get_context>() + size_of::<mlx5_ib_alloc_ucontext_req_v2>();
    let out_len = size_of::<ib_uverbs_get_context_resp>() + size_of::<mlx5_ib_alloc_ucontext_resp>();
    assert_eq!((in_len / 4, out_len / 4), (12, 20));
    assert_eq!(MLX5_IB_OBJECT_UAR, 0x1008);
    assert_eq!(MLX5_IB_METHOD_UAR_OBJ_ALLOC, 0x1000);
    assert_eq!(MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 0x1004);
    assert_eq!(24 + 5 * size_of::<ib_uverbs_attr>(), 104);
    // mlx5 create_qp write request: 8 + 56 + 56 = 120 bytes; create_cq 72.
    assert_eq!(8 + size_of::<ib_uverbs_create_qp>() + size_of::<mlx5_ib_create_qp>(), 120);
    assert_eq!(8 + size_of::<ib_uverbs_create_cq>() + size_of::<mlx5_ib_create_cq>(), 72);
}

#[test]
fn constants() {
    assert_eq!(RDMA_VERBS_IOCTL, 0xC018_1B01);
    assert_eq!(UVERBS_ATTR_UHW_IN, 0x1000);
    assert_eq!(UVERBS_ATTR_UHW_OUT, 0x1001);
    assert_eq!(UVERBS_ID_DRIVER_NS_WITH_UHW, 0x1002);
    assert_eq!(UVERBS_ID_NS_MASK, 0xF000);
    assert_eq!(IB_USER_VERBS_CMD_FLAG_EXTENDED, 0x8000_0000);
    assert_eq!(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), 0x1401);
    assert_eq!(RDMA_NL_GET_CLIENT(0x140F), RDMA_NL_NLDEV);
    assert_eq!(RDMA_NL_GET_OP(0x140F), RDMA_NLDEV_CMD_GET_CHARDEV);
    assert_eq!(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, 73);
    assert_eq!(RDMA_NLA_TYPE_MASK as u16, 0x1FFF);
    assert_eq!(NETLINK_RDMA, 20);
}

#[cfg(target_endian = "little")]
#[test]
fn union_accessors() {
    let mut a = ib_uverbs_attr::default();
    a.set_elem_id(3);
    assert_eq!(a.as_bytes()[6..8], [3, 0]);
    assert_eq!(a.elem_id(), 3);
    a.set_data_s64(-1);
    assert_eq!(a.data, u64::MAX);

    let mut wr = rxe_send_wr::default();
    wr.set_ud(rxe_send_wr_ud { remote_qpn: 0x11, remote_qkey: 0x22, ah_num: 0x0403_0201, ..Default::default() });
    let b = wr.as_bytes();
    assert_eq!(b[24..28], [0x11, 0, 0, 0]);
    assert_eq!(b[36..40], [1, 2, 3, 4]); // wr.ud.ah_num @36
    assert_eq!(wr.ud().ah_num, 0x0403_0201);
    // Writing a smaller variant clears the rest of the union.
    wr.set_rdma(rxe_send_wr_rdma { remote_addr: 5, rkey: 6, reserved: 0 });
    assert_eq!(wr.ud().ah_num, 0);
    assert_eq!(wr.rdma().rkey, 6);

    let mut av = rxe_av::default();
    av.set_dgid_addr_in(sockaddr_in {
        sin_family: AF_INET,
        sin_addr: u32::from_ne_bytes([10, 0, 0, 1]),
        ..Default::default()
    });
    let b = av.as_bytes();
    assert_eq!(b[60..62], [2, 0]); // dgid_addr @60
    assert_eq!(b[64..68], [10, 0, 0, 1]);
    assert_eq!(av.dgid_addr_in().sin_addr.to_ne_bytes(), [10, 0, 0, 1]);

    let mut g = rxe_gid::default();
    g.raw[..8].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
    g.raw[15] = 1;
    assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
    assert_eq!(g.interface_id(), 1);

    let mut s = ib_uverbs_send_wr::default();
    s.set_atomic(ib_uverbs_send_wr_atomic { rkey: 9, ..Default::default() });
    assert_eq!(s.as_bytes()[48..52], [9, 0, 0, 0]); // wr.atomic.rkey @48
}

#[test]
fn zeroed_defaults() {
    let q = rxe_queue_buf::default();
    assert!(q.as_bytes().iter().all(|&b| b == 0));
    let e = ib_uverbs_gid_entry::default();
    assert_eq!(e.as_bytes().len(), 32);
}
