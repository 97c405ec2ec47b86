//! rxe's own data path against the real kernel (VM tier, rxe loopback):
//! what RoCE has and iWARP lacks, so siw's tier skips this binary: UC
//! (WRITE and SEND, READ refused), UD with GRH, multicast groups, and the
//! legacy address vector. The RC data path that every device shares
//! (SEND, WRITE, READ, immediate data, atomics, SRQ, inline, errors,
//! flushes, event mode, strace) is in `datapath`, which runs on rxe0 and siw0.

mod common;

use common::{assert_no_more, loopback, ok_one, pattern, read, send_wr, Loopback};
use rverbs::{
    AccessFlags, AhAttr, ConnectOptions, GlobalRoute, QpCap, QpInitAttr, QpType, RecvWr, SendFlags, SendOp, SendWr,
    WcFlags, WcOpcode,
};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

fn cap(depth: u32) -> QpCap {
    QpCap { max_send_wr: depth, max_recv_wr: depth, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 128 }
}

#[test]
fn uc_write_and_send() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Uc, cap(16), 64)
    else {
        return;
    };
    let ma = pd.alloc_mr(8192, ALL).unwrap();
    let mb = pd.alloc_mr(8192, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let p = pattern(5, 777);
    ma.write_at(0, &p).unwrap();
    let s = [ma.sge(0, 777).unwrap()];
    a.post_send(&[send_wr(1, SendOp::RdmaWrite(mb.remote(100).unwrap()), &s)]).unwrap();
    ok_one(&mut cq_a, 1, WcOpcode::RDMA_WRITE);
    // UC gives no acknowledgement: the send completion means it left; wait
    // for the data with a receive-completing send behind it.
    b.post_recv(&[RecvWr { wr_id: 7, sgl: &[mb.sge(4096, 1024).unwrap()] }]).unwrap();
    a.post_send(&[send_wr(2, SendOp::Send, &s)]).unwrap();
    ok_one(&mut cq_a, 2, WcOpcode::SEND);
    assert_eq!(ok_one(&mut cq_b, 7, WcOpcode::RECV).byte_len, 777);
    assert_eq!(read(&mb, 100, 777), p);
    assert_eq!(read(&mb, 4096, 777), p);
    // READ is not a UC operation: refused at post time, nothing queued.
    let e = a.post_send(&[send_wr(3, SendOp::RdmaRead(mb.remote(0).unwrap()), &s)]).unwrap_err();
    assert_eq!((e.index, e.kind), (0, rverbs::PostErrorKind::OpcodeNotSupported));
    assert_no_more(&mut cq_a);
}

#[test]
fn ud_send_with_grh() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Ud, cap(16), 64)
    else {
        return;
    };
    let idx = ctx.default_sgid_index(1).unwrap();
    let gid = ctx.query_gid(1, idx.into()).unwrap().unwrap().gid;
    let ah = pd
        .create_ah(&AhAttr {
            port_num: 1,
            grh: Some(GlobalRoute { dgid: gid, sgid_index: idx, hop_limit: 64, ..Default::default() }),
            ..Default::default()
        })
        .unwrap();
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    let p = pattern(6, 300);
    ma.write_at(0, &p).unwrap();
    b.post_recv(&[RecvWr { wr_id: 9, sgl: &[mb.sge(0, 40 + 1024).unwrap()] }]).unwrap();
    let qkey = ConnectOptions::default().qkey;
    let s = [ma.sge(0, 300).unwrap()];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::SendWithImm(42),
        flags: SendFlags::SIGNALED,
        sgl: &s,
        ud: Some(ah.ud_dest(b.qp_num(), qkey)),
    };
    a.post_send(&[wr]).unwrap();
    ok_one(&mut cq_a, 1, WcOpcode::SEND);
    let wc = ok_one(&mut cq_b, 9, WcOpcode::RECV);
    assert_eq!(wc.byte_len, 40 + 300, "UD receives start with the 40-byte GRH");
    assert!(wc.wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM), "{wc:?}");
    assert_eq!((wc.imm_data, wc.src_qp), (42, a.qp_num()));
    assert_eq!(read(&mb, 40, 300), p);
    // A wrong Q_Key is dropped silently by the receiver (UD semantics).
    b.post_recv(&[RecvWr { wr_id: 10, sgl: &[mb.sge(0, 1064).unwrap()] }]).unwrap();
    let wr = SendWr { ud: Some(ah.ud_dest(b.qp_num(), qkey ^ 1)), wr_id: 2, ..wr };
    a.post_send(&[wr]).unwrap();
    ok_one(&mut cq_a, 2, WcOpcode::SEND);
    assert_no_more(&mut cq_b);
    // A UD send without a destination is refused before it is written.
    let e = a.post_send(&[SendWr { ud: None, ..wr }]).unwrap_err();
    assert_eq!(e.kind, rverbs::PostErrorKind::BadDestination);
}

/// Multicast (`ibv_attach_mcast`/`ibv_detach_mcast`): a UD QP attached to
/// an IPv4 group receives what another QP sends to the group (destination
/// QPN 0xffffff, an AH whose GID is the group's). On RoCE the kernel's
/// attach only programs the netdev's link-layer filter; the host joins the
/// IP group itself (here a UDP socket on rxe0's address, as the RDMA CM's
/// `rdma_join_multicast` does in the kernel), and the IP layer's multicast
/// loopback brings the datagram back to rxe0. Then the commands' answers:
/// a second attach is no error, a detach of what is not attached, a
/// unicast GID and an RC QP are EINVAL with a message that says which;
/// a QP still in two groups is destroyed (rverbs leaves them first),
/// while a second QP in one of them stays in it.
#[test]
fn ud_multicast_group() {
    use std::net::{Ipv4Addr, UdpSocket};
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Ud, cap(16), 64)
    else {
        return;
    };
    let idx = ctx.default_sgid_index(1).unwrap();
    let local = ctx.query_gid(1, idx.into()).unwrap().unwrap().gid;
    let ip = local.to_ipv4().expect("the device's default GID is IPv4-mapped (RoCE v2)");
    let group_ip = Ipv4Addr::new(239, 7, 7, 7);
    let group = rverbs::Gid(group_ip.to_ipv6_mapped().octets());
    assert!(group.is_multicast() && !local.is_multicast());
    let member = UdpSocket::bind((ip, 0)).unwrap();
    member.join_multicast_v4(&group_ip, &ip).unwrap();
    b.attach_mcast(&group, 0).unwrap();
    b.attach_mcast(&group, 0).expect("attaching to a group the QP is in already is no error");
    assert_eq!(b.mcast_groups(), [(group, 0)]);

    let ah = pd
        .create_ah(&AhAttr {
            port_num: 1,
            grh: Some(GlobalRoute { dgid: group, sgid_index: idx, hop_limit: 1, ..Default::default() }),
            ..Default::default()
        })
        .unwrap();
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    let p = pattern(17, 200);
    ma.write_at(0, &p).unwrap();
    b.post_recv(&[RecvWr { wr_id: 7, sgl: &[mb.sge(0, 40 + 1024).unwrap()] }]).unwrap();
    let qkey = ConnectOptions::default().qkey;
    let s = [ma.sge(0, 200).unwrap()];
    let wr = SendWr {
        wr_id: 3,
        op: SendOp::Send,
        flags: SendFlags::SIGNALED,
        sgl: &s,
        ud: Some(ah.ud_dest(0xff_ffff, qkey)),
    };
    a.post_send(&[wr]).unwrap();
    ok_one(&mut cq_a, 3, WcOpcode::SEND);
    let wc = ok_one(&mut cq_b, 7, WcOpcode::RECV);
    assert_eq!((wc.byte_len, wc.src_qp), (40 + 200, a.qp_num()), "{wc:?}");
    assert!(wc.wc_flags.contains(WcFlags::GRH), "{wc:?}");
    assert_eq!(read(&mb, 40, 200), p);
    // RoCE v2 over IPv4: the GRH's last 20 bytes are the IPv4 header,
    // whose destination (its bytes 16..20) is the group.
    assert_eq!(read(&mb, 36, 4), group_ip.octets(), "the datagram came to the group's address");

    b.detach_mcast(&group, 0).unwrap();
    assert!(b.mcast_groups().is_empty());
    let e = b.detach_mcast(&group, 0).unwrap_err();
    assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL), "{e}");
    assert!(e.to_string().contains("not attached"), "{e}");
    let e = b.attach_mcast(&local, 0).unwrap_err();
    assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL), "{e}");
    assert!(e.to_string().contains("not a multicast GID"), "{e}");
    let rc = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let e = rc.attach_mcast(&group, 0).unwrap_err();
    assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL), "{e}");
    assert!(e.to_string().contains("only UD QPs"), "{e}");
    // A QP still in a group is destroyed all the same: rverbs detaches it
    // first (the kernel alone refuses, EBUSY).
    b.attach_mcast(&group, 0).unwrap();
    b.attach_mcast(&rverbs::Gid(Ipv4Addr::new(239, 7, 7, 8).to_ipv6_mapped().octets()), 0).unwrap();
    assert_eq!(b.mcast_groups().len(), 2, "{:?}", b.mcast_groups());
    // Another QP in one of them: the context keeps every QP's groups, and
    // each QP lists, leaves and is destroyed with its own.
    a.attach_mcast(&group, 0).unwrap();
    assert_eq!(a.mcast_groups(), [(group, 0)]);
    assert_eq!(b.mcast_groups().len(), 2, "{:?}", b.mcast_groups());
    b.destroy().expect("destroy a QP attached to two groups");
    assert_eq!(a.mcast_groups(), [(group, 0)], "the other QP's destroy left this one's group alone");
    a.destroy().expect("destroy a QP still in a group another QP left");
    drop(member);
}

/// The address-vector path of rxe kernels before 5.16 (no AH numbers): the
/// 88-byte `rxe_av` travels in every UD WQE with `ah_num` 0. Newer kernels
/// read it too, so `create_ah_legacy_av` exercises it on the matrix.
#[test]
fn ud_send_through_legacy_address_vector() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Ud, cap(16), 64)
    else {
        return;
    };
    let idx = ctx.default_sgid_index(1).unwrap();
    let gid = ctx.query_gid(1, idx.into()).unwrap().unwrap().gid;
    let attr = AhAttr {
        port_num: 1,
        grh: Some(GlobalRoute { dgid: gid, sgid_index: idx, hop_limit: 64, ..Default::default() }),
        ..Default::default()
    };
    let ah = pd.create_ah_legacy_av(&attr).unwrap();
    assert_ne!(ah.ah_num() & (1 << 31), 0, "a userspace vector's number, not the kernel's");
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(8192, ALL).unwrap();
    let qkey = ConnectOptions::default().qkey;
    // Several sends in one post call, each carrying the vector, with
    // different payloads so a stale or misplaced vector cannot pass.
    let mut wrs = Vec::new();
    let mut sges = Vec::new();
    for i in 0..4u64 {
        ma.write_at(i as usize * 1024, &pattern(20 + i as u32, 100 + 50 * i as usize)).unwrap();
        sges.push([ma.sge(i as usize * 1024, 100 + 50 * i as u32).unwrap()]);
        b.post_recv(&[RecvWr { wr_id: 10 + i, sgl: &[mb.sge(i as usize * 2048, 40 + 1024).unwrap()] }]).unwrap();
    }
    for (i, s) in sges.iter().enumerate() {
        wrs.push(SendWr {
            wr_id: i as u64,
            op: SendOp::SendWithImm(7 + i as u32),
            flags: SendFlags::SIGNALED,
            sgl: s,
            ud: Some(ah.ud_dest(b.qp_num(), qkey)),
        });
    }
    a.post_send(&wrs).unwrap();
    for i in 0..4u64 {
        ok_one(&mut cq_a, i, WcOpcode::SEND);
        let wc = ok_one(&mut cq_b, 10 + i, WcOpcode::RECV);
        let len = 100 + 50 * i as usize;
        assert_eq!(wc.byte_len as usize, 40 + len, "{wc:?}");
        assert!(wc.wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM), "{wc:?}");
        assert_eq!((wc.imm_data, wc.src_qp), (7 + i as u32, a.qp_num()));
        assert_eq!(read(&mb, i as usize * 2048 + 40, len), pattern(20 + i as u32, len));
    }
    // The kernel-numbered AH and the vector reach the same QP side by side.
    let numbered = pd.create_ah(&attr).unwrap();
    assert_eq!(numbered.ah_num() & (1 << 31), 0);
    b.post_recv(&[RecvWr { wr_id: 20, sgl: &[mb.sge(0, 1064).unwrap()] }]).unwrap();
    let s = [ma.sge(0, 100).unwrap()];
    let dest = Some(numbered.ud_dest(b.qp_num(), qkey));
    let wr = SendWr { wr_id: 5, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &s, ud: dest };
    a.post_send(&[wr]).unwrap();
    ok_one(&mut cq_a, 5, WcOpcode::SEND);
    ok_one(&mut cq_b, 20, WcOpcode::RECV);
    // Once the AH is gone its number names nothing: refused, nothing written.
    // By its raw number: the borrowing `ud_dest` cannot outlive the AH.
    let stale = rverbs::UdDest::new(ah.ah_num(), b.qp_num(), qkey);
    drop(ah);
    let e = a.post_send(&[SendWr { ud: Some(stale), wr_id: 6, ..wr }]).unwrap_err();
    assert_eq!((e.index, e.kind), (0, rverbs::PostErrorKind::BadDestination));
    assert_no_more(&mut cq_a);
}
