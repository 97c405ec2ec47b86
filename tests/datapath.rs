//! The RC data path on every device of the VM tier (rxe0 and siw0; pairs
//! connected by hand on RoCE, through the RDMA CM on iWARP): SEND, WRITE,
//! READ, SGE lists, inline, zero-length and large messages,
//! send-with-invalidate, SRQ, unsignaled requests, solicited events, a
//! large randomized run, error completions, flushes, event mode, and the
//! syscall promise checked with strace. What iWARP lacks (immediate data,
//! atomics, RNR retry) is checked refused there, then `n/a on siw0`.
//! rxe's UC, UD, multicast and address vectors are in `rxe_datapath`.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{assert_no_more, loopback, ok_one, pattern, poll_n, read, send_wr, Loopback};
use rverbs::{
    AccessFlags, AtomicCap, ConnectOptions, PostErrorKind, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType,
    RecvWr, SendFlags, SendOp, SendWr, Sge, WcFlags, WcOpcode, WcStatus,
};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// Bytes a request may carry inline on the device the tests get: 128 on
/// rxe; 80 on siw (`SIW_MAX_INLINE`: a send entry holds no more, and
/// create_qp refuses a larger `max_inline_data`, which `inline_sends` checks).
fn inline_max() -> u32 {
    match common::first_device() {
        Some(d) if common::is_iwarp(&d) => 80,
        _ => 128,
    }
}

fn cap(depth: u32) -> QpCap {
    QpCap { max_send_wr: depth, max_recv_wr: depth, max_send_sge: 2, max_recv_sge: 2, max_inline_data: inline_max() }
}

/// Waits for `kind` on a CM id of an iWARP pair (`common::connect_pair`'s
/// ids), panicking after a bound that only keeps a lost event from hanging.
fn cm_event(id: &rverbs::cm::CmId, kind: rverbs::cm::EventKind) {
    let t = std::time::Duration::from_secs(30);
    let ev = id.channel().get_event_timeout(t).expect("rdma_get_cm_event");
    let ev = ev.unwrap_or_else(|| panic!("no {kind:?} within {t:?} (hang detector)"));
    assert_eq!(ev.kind(), kind, "{ev:?}");
}

#[test]
fn rc_send_write_read_and_sge_lists() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    let ma = pd.alloc_mr(1 << 16, ALL).unwrap();
    let mb = pd.alloc_mr(1 << 16, ALL).unwrap();

    // Two SENDs in one post call.
    let p = pattern(1, 1000);
    ma.write_at(0, &p).unwrap();
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(0, 4096).unwrap()] }]).unwrap();
    b.post_recv(&[RecvWr { wr_id: 2, sgl: &[mb.sge(4096, 4096).unwrap()] }]).unwrap();
    let s = [ma.sge(0, 1000).unwrap()];
    a.post_send(&[send_wr(10, SendOp::Send, &s), send_wr(11, SendOp::Send, &s)]).unwrap();
    let wcs = poll_n(&mut cq_a, 2);
    assert!(wcs.iter().all(|w| w.status == WcStatus::SUCCESS && w.opcode == WcOpcode::SEND), "{wcs:?}");
    assert_eq!((wcs[0].wr_id, wcs[1].wr_id), (10, 11));
    let r = poll_n(&mut cq_b, 2);
    for (w, id) in r.iter().zip([1, 2]) {
        assert_eq!((w.wr_id, w.opcode, w.byte_len, w.status), (id, WcOpcode::RECV, 1000, WcStatus::SUCCESS));
        assert!(!w.wc_flags.contains(WcFlags::WITH_IMM), "{w:?}");
        assert_eq!(w.qp_num, b.qp_num());
    }
    assert_eq!(read(&mb, 0, 1000), p);
    assert_eq!(read(&mb, 4096, 1000), p);

    // RDMA_WRITE: lands without a receive completion.
    let p = pattern(2, 3000);
    ma.write_at(8192, &p).unwrap();
    let s = [ma.sge(8192, 3000).unwrap()];
    a.post_send(&[send_wr(20, SendOp::RdmaWrite(mb.remote(16384).unwrap()), &s)]).unwrap();
    ok_one(&mut cq_a, 20, WcOpcode::RDMA_WRITE);
    assert_eq!(read(&mb, 16384, 3000), p);
    assert_no_more(&mut cq_b);

    // RDMA_READ.
    let p = pattern(4, 2500);
    mb.write_at(24576, &p).unwrap();
    let s = [ma.sge(28672, 2500).unwrap()];
    a.post_send(&[send_wr(40, SendOp::RdmaRead(mb.remote(24576).unwrap()), &s)]).unwrap();
    let wc = ok_one(&mut cq_a, 40, WcOpcode::RDMA_READ);
    assert_eq!(wc.byte_len, 2500);
    assert_eq!(read(&ma, 28672, 2500), p);

    // Two SGEs gathered into one message, scattered into two.
    ma.write_at(40000, b"hello ").unwrap();
    ma.write_at(50000, b"world").unwrap();
    b.post_recv(&[RecvWr { wr_id: 4, sgl: &[mb.sge(0, 3).unwrap(), mb.sge(100, 100).unwrap()] }]).unwrap();
    let s = [ma.sge(40000, 6).unwrap(), ma.sge(50000, 5).unwrap()];
    a.post_send(&[send_wr(60, SendOp::Send, &s)]).unwrap();
    ok_one(&mut cq_a, 60, WcOpcode::SEND);
    assert_eq!(ok_one(&mut cq_b, 4, WcOpcode::RECV).byte_len, 11);
    assert_eq!((read(&mb, 0, 3), read(&mb, 100, 8)), (b"hel".to_vec(), b"lo world".to_vec()));
    // And a WRITE gathered from two SGEs.
    let s = [ma.sge(50000, 5).unwrap(), ma.sge(40000, 6).unwrap()];
    a.post_send(&[send_wr(61, SendOp::RdmaWrite(mb.remote(300).unwrap()), &s)]).unwrap();
    ok_one(&mut cq_a, 61, WcOpcode::RDMA_WRITE);
    assert_eq!(read(&mb, 300, 11), b"worldhello ");
}

/// SEND_WITH_IMM and RDMA_WRITE_WITH_IMM. iWARP has no immediate data:
/// on siw0 both are refused at post, nothing queued.
#[test]
fn rc_immediate_data() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    let ma = pd.alloc_mr(1 << 16, ALL).unwrap();
    let mb = pd.alloc_mr(1 << 16, ALL).unwrap();
    let s = [ma.sge(0, 500).unwrap()];
    if common::is_iwarp(ctx.device()) {
        for op in [SendOp::SendWithImm(1), SendOp::RdmaWriteWithImm(mb.remote(0).unwrap(), 2)] {
            let e = a.post_send(&[send_wr(1, op, &s)]).unwrap_err();
            assert_eq!((e.index, e.kind), (0, PostErrorKind::OpcodeNotSupported), "{e}");
        }
        assert_no_more(&mut cq_a);
        return common::not_applicable(ctx.device(), "no immediate data on iWARP (refused at post)");
    }
    let p = pattern(1, 1000);
    ma.write_at(0, &p).unwrap();
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(0, 4096).unwrap()] }]).unwrap();
    let s = [ma.sge(0, 1000).unwrap()];
    a.post_send(&[send_wr(11, SendOp::SendWithImm(0xdead_beef), &s)]).unwrap();
    ok_one(&mut cq_a, 11, WcOpcode::SEND);
    let r = ok_one(&mut cq_b, 1, WcOpcode::RECV);
    assert_eq!((r.byte_len, r.imm_data), (1000, 0xdead_beef));
    assert!(r.wc_flags.contains(WcFlags::WITH_IMM), "{r:?}");
    assert_eq!(read(&mb, 0, 1000), p);

    // RDMA_WRITE_WITH_IMM: consumes a receive; the data lands at the address.
    b.post_recv(&[RecvWr { wr_id: 3, sgl: &[mb.sge(0, 16).unwrap()] }]).unwrap();
    let p = pattern(3, 500);
    ma.write_at(12288, &p).unwrap();
    let s = [ma.sge(12288, 500).unwrap()];
    a.post_send(&[send_wr(30, SendOp::RdmaWriteWithImm(mb.remote(20480).unwrap(), 77), &s)]).unwrap();
    ok_one(&mut cq_a, 30, WcOpcode::RDMA_WRITE);
    let wc = ok_one(&mut cq_b, 3, WcOpcode::RECV_RDMA_WITH_IMM);
    assert_eq!((wc.imm_data, wc.byte_len), (77, 500));
    assert!(wc.wc_flags.contains(WcFlags::WITH_IMM), "{wc:?}");
    assert_eq!(read(&mb, 20480, 500), p);
}

/// Atomics on an 8-byte word of B; old values land in A. iWARP (siw) has
/// none: the device says `atomic_cap` NONE and both are refused at post.
#[test]
fn rc_atomics() {
    let Some(Loopback { ctx, pd, mut cq_a, mut a, b: _b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(16), 64) else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    let s = [ma.sge(0, 8).unwrap()];
    let remote = mb.remote(64).unwrap();
    if common::is_iwarp(ctx.device()) {
        assert_eq!(ctx.query_device().unwrap().atomic_cap, AtomicCap::None);
        for op in
            [SendOp::AtomicCmpAndSwp { remote, compare: 5, swap: 9 }, SendOp::AtomicFetchAndAdd { remote, add: 3 }]
        {
            let e = a.post_send(&[send_wr(1, op, &s)]).unwrap_err();
            assert_eq!((e.index, e.kind), (0, PostErrorKind::OpcodeNotSupported), "{e}");
        }
        assert_no_more(&mut cq_a);
        return common::not_applicable(ctx.device(), "no atomics on iWARP (atomic_cap NONE, refused at post)");
    }
    assert_ne!(ctx.query_device().unwrap().atomic_cap, AtomicCap::None);
    mb.write_at(64, &5u64.to_ne_bytes()).unwrap();
    a.post_send(&[send_wr(50, SendOp::AtomicCmpAndSwp { remote, compare: 5, swap: 9 }, &s)]).unwrap();
    ok_one(&mut cq_a, 50, WcOpcode::COMP_SWAP);
    assert_eq!(read(&ma, 0, 8), 5u64.to_ne_bytes());
    assert_eq!(read(&mb, 64, 8), 9u64.to_ne_bytes());
    // A failed compare leaves the word alone and still returns it.
    a.post_send(&[send_wr(51, SendOp::AtomicCmpAndSwp { remote, compare: 1, swap: 2 }, &s)]).unwrap();
    ok_one(&mut cq_a, 51, WcOpcode::COMP_SWAP);
    assert_eq!(read(&ma, 0, 8), 9u64.to_ne_bytes());
    assert_eq!(read(&mb, 64, 8), 9u64.to_ne_bytes());
    a.post_send(&[send_wr(52, SendOp::AtomicFetchAndAdd { remote, add: 3 }, &s)]).unwrap();
    ok_one(&mut cq_a, 52, WcOpcode::FETCH_ADD);
    assert_eq!(read(&ma, 0, 8), 9u64.to_ne_bytes());
    assert_eq!(read(&mb, 64, 8), 12u64.to_ne_bytes());
}

/// Zero-length SEND (no SGE), WRITE and READ: each completes with 0 bytes,
/// the SEND consuming a receive, and no memory is touched.
#[test]
fn zero_length_send_write_and_read() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    ma.write_at(0, &[0xa5; 64]).unwrap();
    mb.write_at(0, &[0x5a; 64]).unwrap();
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
    a.post_send(&[send_wr(1, SendOp::Send, &[])]).unwrap();
    assert_eq!(ok_one(&mut cq_a, 1, WcOpcode::SEND).byte_len, 0);
    assert_eq!(ok_one(&mut cq_b, 1, WcOpcode::RECV).byte_len, 0);
    a.post_send(&[send_wr(2, SendOp::RdmaWrite(mb.remote(0).unwrap()), &[])]).unwrap();
    assert_eq!(ok_one(&mut cq_a, 2, WcOpcode::RDMA_WRITE).byte_len, 0);
    a.post_send(&[send_wr(3, SendOp::RdmaRead(mb.remote(0).unwrap()), &[])]).unwrap();
    assert_eq!(ok_one(&mut cq_a, 3, WcOpcode::RDMA_READ).byte_len, 0);
    assert_eq!((read(&ma, 0, 64), read(&mb, 0, 64)), (vec![0xa5; 64], vec![0x5a; 64]));
    assert_no_more(&mut cq_b);
}

/// Messages far larger than the path MTU (rxe) or a TCP segment (siw):
/// a 1 MiB SEND, then a 4 MiB WRITE and READ back.
#[test]
fn large_messages() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    if common::is_iwarp(ctx.device()) {
        // 6.1's siw holds root to RLIMIT_MEMLOCK (8 MiB in the guest) when
        // it pins a region, as ib_umem_get does not: lift it, as root may.
        use nix::libc;
        let r = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: setrlimit reads the struct it is given, nothing else.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) }, 0, "raise RLIMIT_MEMLOCK (as root)");
    }
    const BIG: usize = 4 << 20;
    const SEND: usize = 1 << 20;
    let ma = pd.alloc_mr(2 * BIG, ALL).unwrap();
    let mb = pd.alloc_mr(2 * BIG, ALL).unwrap();
    let p = pattern(8, BIG);
    ma.write_at(0, &p).unwrap();
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(BIG, SEND as u32).unwrap()] }]).unwrap();
    a.post_send(&[send_wr(1, SendOp::Send, &[ma.sge(0, SEND as u32).unwrap()])]).unwrap();
    ok_one(&mut cq_a, 1, WcOpcode::SEND);
    assert_eq!(ok_one(&mut cq_b, 1, WcOpcode::RECV).byte_len as usize, SEND);
    assert!(read(&mb, BIG, SEND) == p[..SEND], "the 1 MiB SEND arrived intact");
    a.post_send(&[send_wr(2, SendOp::RdmaWrite(mb.remote(0).unwrap()), &[ma.sge(0, BIG as u32).unwrap()])]).unwrap();
    ok_one(&mut cq_a, 2, WcOpcode::RDMA_WRITE);
    assert!(read(&mb, 0, BIG) == p, "the 4 MiB WRITE landed intact");
    let s = [ma.sge(BIG, BIG as u32).unwrap()];
    a.post_send(&[send_wr(3, SendOp::RdmaRead(mb.remote(0).unwrap()), &s)]).unwrap();
    assert_eq!(ok_one(&mut cq_a, 3, WcOpcode::RDMA_READ).byte_len as usize, BIG);
    assert!(read(&ma, BIG, BIG) == p, "the 4 MiB READ came back intact");
    assert_no_more(&mut cq_b);
}

/// SEND_WITH_INV naming the receiver's memory region. siw invalidates any
/// region of the QP's PD (siw_invalidate_stag): the receive completes
/// (RECV, and no WITH_INV flag: siw's completion entries carry neither the
/// flag nor the key, as libsiw reports too), after which a WRITE with that
/// rkey fails at the responder. rxe invalidates only memory windows and
/// fast-registration regions (`memory_window` covers the window): a user
/// region's rkey fails the receive with `REM_INV_REQ_ERR`.
#[test]
fn send_with_invalidate_of_a_region() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: cm }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    let target = pd.alloc_mr(4096, ALL).unwrap();
    ma.write_at(0, b"invalidate").unwrap();
    b.post_recv(&[RecvWr { wr_id: 9, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
    let s = [ma.sge(0, 10).unwrap()];
    a.post_send(&[send_wr(8, SendOp::SendWithInv(target.rkey()), &s)]).unwrap();
    let rw = poll_n(&mut cq_b, 1)[0];
    let sw = poll_n(&mut cq_a, 1)[0];
    if !common::is_iwarp(ctx.device()) {
        // rxe invalidates windows and fast-registration regions only: the
        // receive fails, and the sender's request still completes.
        assert_eq!((rw.wr_id, rw.status), (9, WcStatus::REM_INV_REQ_ERR), "{rw:?}");
        assert_eq!(sw.wr_id, 8, "{sw:?}");
        return;
    }
    assert_eq!((sw.wr_id, sw.status, sw.opcode), (8, WcStatus::SUCCESS, WcOpcode::SEND), "{sw:?}");
    assert_eq!((rw.wr_id, rw.status, rw.opcode, rw.byte_len), (9, WcStatus::SUCCESS, WcOpcode::RECV, 10));
    assert!(!rw.wc_flags.contains(WcFlags::WITH_INV), "{rw:?}");
    assert_eq!(read(&mb, 0, 10), b"invalidate");
    // The rkey is dead: a WRITE with it completes at the sender (TCP took
    // it) and the responder terminates the connection; nothing lands.
    a.post_send(&[send_wr(10, SendOp::RdmaWrite(target.remote(0).unwrap()), &s)]).unwrap();
    assert_eq!(ok_one(&mut cq_a, 10, WcOpcode::RDMA_WRITE).byte_len, 10);
    for id in &cm {
        cm_event(id, rverbs::cm::EventKind::Disconnected);
    }
    assert_eq!(read(&target, 0, 10), [0; 10], "nothing landed");
}

#[test]
fn srq_shared_by_two_qps() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_a = ctx.create_cq(64).unwrap();
    let mut cq_b = ctx.create_cq(64).unwrap();
    let mut srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 32, max_sge: 1, srq_limit: 0 }).unwrap();
    let mut with_srq = QpInitAttr::new(QpType::Rc, &cq_b);
    with_srq.srq = Some(&srq);
    let b1 = pd.create_qp(&with_srq).unwrap();
    let b2 = pd.create_qp(&with_srq).unwrap();
    let mut a1 = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let mut a2 = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let opts = ConnectOptions::default();
    let _cm = common::connect_pair(&ctx, &a1, &b1, &opts);
    let _cm = common::connect_pair(&ctx, &a2, &b2, &opts);
    let mb = pd.alloc_mr(32 * 256, ALL).unwrap();
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let recvs: Vec<Sge> = (0..8).map(|i| mb.sge(i * 256, 256).unwrap()).collect();
    for (i, s) in recvs.iter().enumerate() {
        srq.post_recv(&[RecvWr { wr_id: 100 + i as u64, sgl: std::slice::from_ref(s) }]).unwrap();
    }
    let s = [ma.sge(0, 64).unwrap()];
    for i in 0..4 {
        a1.post_send(&[send_wr(i, SendOp::Send, &s)]).unwrap();
        a2.post_send(&[send_wr(10 + i, SendOp::Send, &s)]).unwrap();
    }
    poll_n(&mut cq_a, 8);
    let r = poll_n(&mut cq_b, 8);
    assert!(r.iter().all(|w| w.status == WcStatus::SUCCESS && w.byte_len == 64), "{r:?}");
    let on_b1 = r.iter().filter(|w| w.qp_num == b1.qp_num()).count();
    let on_b2 = r.iter().filter(|w| w.qp_num == b2.qp_num()).count();
    assert_eq!((on_b1, on_b2), (4, 4));
    let ids: HashSet<u64> = r.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (100..108).collect(), "each SRQ receive used once");
    // A QP on an SRQ has no receive queue of its own.
    let mut b1 = b1;
    assert!(b1.post_recv(&[RecvWr { wr_id: 0, sgl: &recvs[..1] }]).is_err());
}

#[test]
fn inline_sends() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Rc, cap(16), 64)
    else {
        return;
    };
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    let max = a.cap().max_inline_data as usize;
    if common::is_iwarp(ctx.device()) {
        // siw: a send entry holds 80 bytes inline; more is refused at create.
        assert_eq!(max, 80, "{:?}", a.cap());
        let mut init = QpInitAttr::new(QpType::Rc, &cq_a);
        init.cap = QpCap { max_inline_data: 81, ..cap(4) };
        let e = pd.create_qp(&init).unwrap_err();
        assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL), "{e}");
        assert!(e.to_string().contains("at most 80 bytes inline"), "{e}");
    } else {
        assert!(max >= 128, "{:?}", a.cap());
    }
    let mut data = pattern(7, max);
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(0, 4096).unwrap()] }]).unwrap();
    a.post_send_inline(5, SendOp::Send, SendFlags::SIGNALED, &data, None).unwrap();
    let sent = data.clone();
    data.fill(0); // the payload was copied at post time
    ok_one(&mut cq_a, 5, WcOpcode::SEND);
    assert_eq!(ok_one(&mut cq_b, 1, WcOpcode::RECV).byte_len as usize, max);
    assert_eq!(read(&mb, 0, max), sent);
    let too_long = vec![0u8; max + 1];
    let e = a.post_send_inline(6, SendOp::Send, SendFlags::SIGNALED, &too_long, None).unwrap_err();
    assert!(matches!(e.kind, rverbs::PostErrorKind::InlineTooLong { .. }), "{e}");
    // INLINE with SGEs through the safe API is refused (the CPU would read them).
    let s = [mb.sge(0, 8).unwrap()];
    let wr = SendWr { flags: SendFlags::INLINE, ..send_wr(7, SendOp::Send, &s) };
    assert_eq!(a.post_send(&[wr]).unwrap_err().kind, rverbs::PostErrorKind::InlineNeedsBytes);
}

#[test]
fn unsignaled_with_a_signaled_one_every_n() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(16), 128)
    else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(64 * 64, ALL).unwrap();
    let s = [ma.sge(0, 32).unwrap()];
    const N: u64 = 8;
    for i in 0..64u64 {
        b.post_recv(&[RecvWr { wr_id: i, sgl: &[mb.sge(i as usize * 64, 64).unwrap()] }]).unwrap();
        let flags = if i % N == N - 1 { SendFlags::SIGNALED } else { SendFlags::empty() };
        let wr = SendWr { wr_id: i, op: SendOp::Send, flags, sgl: &s, ud: None };
        // Keep within the SQ: unsignaled WQEs are released by the next signaled completion.
        a.post_send(&[wr]).unwrap();
        if i % N == N - 1 {
            let wc = ok_one(&mut cq_a, i, WcOpcode::SEND);
            assert_eq!(wc.wr_id % N, N - 1);
        }
    }
    assert_no_more(&mut cq_a);
    assert_eq!(poll_n(&mut cq_b, 64).len(), 64);
}

/// A connected RC pair for the event tests: `b`'s CQ on the completion
/// channel `ch`, `a`'s polled; a 4 KiB region for `a` and `mb_len` bytes for
/// `b`. `_cm` keeps an iWARP pair connected, `_pd` the objects' PD.
struct EventPair {
    ch: rverbs::CompletionChannel,
    cq_a: rverbs::CompletionQueue,
    cq_b: rverbs::CompletionQueue,
    a: rverbs::QueuePair,
    b: rverbs::QueuePair,
    ma: rverbs::MemoryRegion,
    mb: rverbs::MemoryRegion,
    _cm: Vec<rverbs::cm::CmId>,
    _pd: rverbs::ProtectionDomain,
}

/// [`EventPair`] on the tier's device with CQs of `cqe` entries; `None`
/// when there is no device (and none is required).
fn event_pair(cqe: u32, mb_len: usize) -> Option<EventPair> {
    let ctx = common::first_device()?.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let cq_a = ctx.create_cq(cqe).unwrap();
    let cq_b = ctx.create_cq_with(&rverbs::CqInitAttr { cqe, channel: Some(&ch), comp_vector: 0 }).unwrap();
    let a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b)).unwrap();
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(mb_len, ALL).unwrap();
    Some(EventPair { ch, cq_a, cq_b, a, b, ma, mb, _cm, _pd: pd })
}

#[test]
fn solicited_events() {
    let Some(EventPair { ch, mut cq_a, mut cq_b, mut a, mut b, ma, mb, _cm, _pd }) = event_pair(16, 4096) else {
        return;
    };
    let s = [ma.sge(0, 8).unwrap()];
    for i in 0..2 {
        b.post_recv(&[RecvWr { wr_id: i, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
    }
    cq_b.req_notify(true).unwrap();
    a.post_send(&[send_wr(1, SendOp::Send, &s)]).unwrap();
    ok_one(&mut cq_a, 1, WcOpcode::SEND);
    poll_n(&mut cq_b, 1);
    assert_eq!(
        ch.get_cq_event_timeout(200).unwrap(),
        None,
        "an unsolicited message must not wake a solicited-only arm"
    );
    let wr = SendWr { flags: SendFlags::SIGNALED | SendFlags::SOLICITED, ..send_wr(2, SendOp::Send, &s) };
    a.post_send(&[wr]).unwrap();
    ok_one(&mut cq_a, 2, WcOpcode::SEND);
    if common::is_iwarp(a.context().device()) {
        // siw sends the SEND_SE, but its receive completion notifies the
        // CQ as "signaled", never "solicited" (siw_rqe_complete calls
        // siw_cq_notify_now with SIW_WQE_SIGNALLED), so a solicited-only
        // arm does not wake for it; an arm for any completion does.
        poll_n(&mut cq_b, 1);
        assert_eq!(ch.get_cq_event_timeout(1000).unwrap(), None, "siw: no event for a solicited receive");
        b.post_recv(&[RecvWr { wr_id: 3, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
        cq_b.req_notify(false).unwrap();
        let wr = SendWr { flags: SendFlags::SIGNALED | SendFlags::SOLICITED, ..send_wr(3, SendOp::Send, &s) };
        a.post_send(&[wr]).unwrap();
        ok_one(&mut cq_a, 3, WcOpcode::SEND);
    }
    let ev = ch.get_cq_event_timeout(10_000).unwrap().expect("solicited message raises an event");
    assert_eq!(ev.cq_user_handle, cq_b.user_handle());
    cq_b.ack_events(1);
    poll_n(&mut cq_b, 1);
}

/// One request of the randomized run.
#[derive(Clone, Copy)]
enum Op {
    Send,
    Write,
    Read,
}

#[test]
fn hundred_thousand_mixed_operations() {
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Rc, cap(32), 256)
    else {
        return;
    };
    // 100,000 by default; 5,000 on iWARP, where every byte crosses TCP
    // (100,000 took 893 s under TCG on 6.12, against the tier's budget).
    let default = if common::is_iwarp(ctx.device()) { 5_000 } else { 100_000 };
    let total: usize = std::env::var("RVERBS_MIXED_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    const SLOT: usize = 64 * 1024;
    const WINDOW: usize = 16;
    let ma = pd.alloc_mr(SLOT * WINDOW, ALL).unwrap();
    let mb = pd.alloc_mr(SLOT * WINDOW, ALL).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 7;
        rng ^= rng >> 9;
        rng
    };
    let mut seen = HashSet::with_capacity(total);
    let mut done = 0usize;
    let mut bytes = 0u64;
    while done < total {
        let n = WINDOW.min(total - done);
        let mut batch = Vec::with_capacity(n);
        for slot in 0..n {
            // Sizes log-uniform in 1 B ..= 64 KiB.
            let len = (1usize << (next() % 17)).min(SLOT);
            let len = (len + (next() as usize % len)).clamp(1, SLOT);
            let op = [Op::Send, Op::Write, Op::Read][(next() % 3) as usize];
            let id = (done + slot) as u64;
            let data = pattern(id as u32, len);
            let off = slot * SLOT;
            match op {
                Op::Send | Op::Write => ma.write_at(off, &data).unwrap(),
                Op::Read => mb.write_at(off, &data).unwrap(),
            }
            batch.push((id, op, len, off, data));
        }
        // Receives for the sends, then every request in one post call.
        for (id, op, _, off, _) in &batch {
            if let Op::Send = op {
                b.post_recv(&[RecvWr { wr_id: *id, sgl: &[mb.sge(*off, SLOT as u32).unwrap()] }]).unwrap();
            }
        }
        let sges: Vec<[Sge; 1]> =
            batch.iter().map(|(_, _, len, off, _)| [ma.sge(*off, *len as u32).unwrap()]).collect();
        let wrs: Vec<SendWr> = batch
            .iter()
            .zip(&sges)
            .map(|((id, op, _, off, _), s)| {
                let op = match op {
                    Op::Send => SendOp::Send,
                    Op::Write => SendOp::RdmaWrite(mb.remote(*off).unwrap()),
                    Op::Read => SendOp::RdmaRead(mb.remote(*off).unwrap()),
                };
                send_wr(*id, op, s)
            })
            .collect();
        a.post_send(&wrs).unwrap();
        let sends = batch.iter().filter(|b| matches!(b.1, Op::Send)).count();
        for wc in poll_n(&mut cq_a, n) {
            assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
            assert!(seen.insert(wc.wr_id), "wr_id {} completed twice", wc.wr_id);
        }
        let recvs = poll_n(&mut cq_b, sends);
        for wc in &recvs {
            assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
            let (_, _, len, _, _) = batch.iter().find(|b| b.0 == wc.wr_id).expect("a receive we posted");
            assert_eq!(wc.byte_len as usize, *len);
        }
        for (id, op, len, off, data) in &batch {
            let got = match op {
                Op::Send | Op::Write => read(&mb, *off, *len),
                Op::Read => read(&ma, *off, *len),
            };
            assert!(got == *data, "request {id}: {len} bytes corrupted");
            bytes += *len as u64;
        }
        done += n;
    }
    assert_eq!(seen.len(), total, "every request completed exactly once");
    assert_no_more(&mut cq_a);
    assert_no_more(&mut cq_b);
    eprintln!("{total} operations, {bytes} bytes verified");
}

// ---- error completions ----

/// A bad lkey where the device writes local memory (the READ response is
/// scattered by the completer) is a local protection error on both kernels.
/// For a bad lkey on a SEND/WRITE source, rxe reports `LocQpOpErr` (6.1) or
/// flushes the request (`WrFlushErr`, 6.12) instead: checked too, so a
/// change of kernel behaviour shows up here.
#[test]
fn bad_lkey_is_a_local_protection_error() {
    let Some(Loopback { pd, mut cq_a, mut a, b: _b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(8), 16) else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mut s = ma.sge(0, 64).unwrap();
    s.lkey ^= 0x5a5a_0000;
    a.post_send(&[send_wr(1, SendOp::RdmaRead(ma.remote(1024).unwrap()), &[s])]).unwrap();
    let wc = poll_n(&mut cq_a, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::LOC_PROT_ERR), "{wc:?}");

    let Some(Loopback { pd, mut cq_a, mut a, b: _b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(8), 16) else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mut s = ma.sge(0, 64).unwrap();
    s.lkey ^= 0x5a5a_0000;
    a.post_send(&[send_wr(2, SendOp::RdmaWrite(ma.remote(1024).unwrap()), &[s])]).unwrap();
    let wc = poll_n(&mut cq_a, 1)[0];
    assert_eq!(wc.wr_id, 2);
    assert!(matches!(wc.status, WcStatus::LOC_PROT_ERR | WcStatus::LOC_QP_OP_ERR | WcStatus::WR_FLUSH_ERR), "{wc:?}");
}

#[test]
fn rkey_without_remote_access_is_a_remote_access_error() {
    // A region without remote access, then one that allows remote reads
    // but not writes: a WRITE to either is a remote access error.
    for (round, access) in [AccessFlags::LOCAL_WRITE, AccessFlags::REMOTE_READ].into_iter().enumerate() {
        // `b: _b` keeps the peer QP alive: without it nobody answers, and rxe
        // retries forever (it treats retry_cnt 7 as infinite).
        let Some(Loopback { ctx, pd, mut cq_a, mut a, b: _b, cm_ids, .. }) = loopback(QpType::Rc, cap(8), 16) else {
            return;
        };
        let ma = pd.alloc_mr(4096, ALL).unwrap();
        ma.write_at(0, &[0xa5; 64]).unwrap();
        let target = pd.alloc_mr(4096, access).unwrap();
        let wr_id = round as u64 + 1;
        let s = [ma.sge(0, 64).unwrap()];
        a.post_send(&[send_wr(wr_id, SendOp::RdmaWrite(target.remote(0).unwrap()), &s)]).unwrap();
        let wc = poll_n(&mut cq_a, 1)[0];
        if common::is_iwarp(ctx.device()) {
            // siw completes a WRITE once TCP took it; the responder finds
            // the access error, sends a TERMINATE and closes the connection.
            assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::SUCCESS), "{wc:?}");
            for id in &cm_ids {
                cm_event(id, rverbs::cm::EventKind::Disconnected);
            }
        } else {
            assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::REM_ACCESS_ERR), "{wc:?}");
        }
        assert_eq!(read(&target, 0, 64), [0; 64], "round {round}: nothing landed");
    }
}

#[test]
fn small_receive_buffer_is_a_local_length_error() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids, .. }) = loopback(QpType::Rc, cap(8), 16) else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    b.post_recv(&[RecvWr { wr_id: 7, sgl: &[mb.sge(0, 16).unwrap()] }]).unwrap();
    a.post_send(&[send_wr(1, SendOp::Send, &[ma.sge(0, 100).unwrap()])]).unwrap();
    let wc = poll_n(&mut cq_b, 1)[0];
    // IBTA says local length error; rxe (6.1 and 6.12) reports a local QP
    // operation error because its copy_data() fails with EINVAL, which the
    // responder maps to "malformed WQE". rverbs passes on what the kernel wrote.
    assert_eq!(wc.wr_id, 7, "{wc:?}");
    assert!(matches!(wc.status, WcStatus::LOC_LEN_ERR | WcStatus::LOC_QP_OP_ERR), "{wc:?}");
    let wc_b = wc;
    let wc = poll_n(&mut cq_a, 1)[0];
    if let [ida, idb] = &cm_ids[..] {
        // siw reports what IBTA says, a local length error, completes the
        // SEND once TCP took it, and the receiver terminates the connection.
        assert_eq!(wc_b.status, WcStatus::LOC_LEN_ERR, "{wc_b:?}");
        assert_eq!((wc.wr_id, wc.status), (1, WcStatus::SUCCESS), "{wc:?}");
        cm_event(ida, rverbs::cm::EventKind::Disconnected);
        cm_event(idb, rverbs::cm::EventKind::Disconnected);
    } else {
        assert_ne!(wc.status, WcStatus::SUCCESS, "the sender learns of it too: {wc:?}");
    }
}

#[test]
fn no_receive_with_rnr_retry_zero() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_a = ctx.create_cq(16).unwrap();
    let cq_b = ctx.create_cq(16).unwrap();
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b)).unwrap();
    let opts = ConnectOptions { rnr_retry: 0, min_rnr_timer: 1, ..ConnectOptions::default() };
    let cm = common::connect_pair(&ctx, &a, &b, &opts);
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    a.post_send(&[send_wr(1, SendOp::Send, &[ma.sge(0, 8).unwrap()])]).unwrap();
    let wc = poll_n(&mut cq_a, 1)[0];
    if !common::is_iwarp(&dev) {
        assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RNR_RETRY_EXC_ERR), "{wc:?}");
        return;
    }
    // iWARP has no RNR retry (nor an rnr_retry to set): the receiver
    // terminates the connection. The sender's SEND completed once TCP took it.
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::SUCCESS), "{wc:?}");
    for id in &cm {
        cm_event(id, rverbs::cm::EventKind::Disconnected);
    }
    let mut cq_b = cq_b;
    assert_no_more(&mut cq_b);
}

#[test]
fn error_state_flushes_everything_outstanding() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids, .. }) = loopback(QpType::Rc, cap(16), 64) else {
        return;
    };
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    // B: receives that will never be used.
    for i in 0..10 {
        b.post_recv(&[RecvWr { wr_id: 100 + i, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
    }
    // A: receives, outstanding too.
    for i in 0..4 {
        a.post_recv(&[RecvWr { wr_id: 200 + i, sgl: &[ma.sge(1024, 64).unwrap()] }]).unwrap();
    }
    let err = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
    b.modify(&err, QpAttrMask::STATE).unwrap();
    let r = poll_n(&mut cq_b, 10);
    assert!(r.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{r:?}");
    let ids: HashSet<u64> = r.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (100..110).collect());
    let s = [ma.sge(0, 8).unwrap()];
    let wrs: Vec<SendWr> = (0..6).map(|i| send_wr(i, SendOp::Send, &s)).collect();
    if let [ida, idb] = &cm_ids[..] {
        // iWARP: a QP moved to ERR drops the connection; the peer's QP
        // goes to ERR with it, and siw flushes its receives then.
        cm_event(ida, rverbs::cm::EventKind::Disconnected);
        cm_event(idb, rverbs::cm::EventKind::Disconnected);
        let r = poll_n(&mut cq_a, 4);
        assert!(r.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR && w.opcode == WcOpcode::RECV), "{r:?}");
        assert_eq!(r.iter().map(|w| w.wr_id).collect::<HashSet<_>>(), (200..204).collect());
        // Sends posted now, to a QP the kernel has in ERROR (or closing)
        // unseen: the move to ERR completes them, whether siw flushes them
        // itself or leaves them in the ring for rverbs to flush.
        a.post_send(&wrs).unwrap();
        a.modify(&err, QpAttrMask::STATE).unwrap();
        let s = poll_n(&mut cq_a, 6);
        assert!(s.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR && w.opcode == WcOpcode::SEND), "{s:?}");
        assert_eq!(s.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>(), "in order");
    } else {
        // A: sends to a peer in ERR never get acknowledged; moving A to ERR
        // flushes them and the receives, each exactly once (some sends may
        // fail with a transport error first, but every one completes).
        a.post_send(&wrs).unwrap();
        a.modify(&err, QpAttrMask::STATE).unwrap();
        let s = poll_n(&mut cq_a, 10);
        let ids: HashSet<u64> = s.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..6).chain(200..204).collect(), "{s:?}");
        assert!(s.iter().filter(|w| w.status == WcStatus::WR_FLUSH_ERR).count() >= 9, "{s:?}");
    }
    // Posted to a QP in ERR: flushed, each once, on both QPs.
    let more: Vec<SendWr> = (10..13).map(|i| send_wr(i, SendOp::Send, &s)).collect();
    a.post_send(&more).unwrap();
    a.post_recv(&[RecvWr { wr_id: 300, sgl: &[ma.sge(1024, 64).unwrap()] }]).unwrap();
    b.post_recv(&[RecvWr { wr_id: 400, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
    let r = poll_n(&mut cq_a, 4);
    assert!(r.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{r:?}");
    assert_eq!(r.iter().map(|w| w.wr_id).collect::<HashSet<_>>(), [10, 11, 12, 300].into_iter().collect());
    // (An error completion's opcode is undefined: rxe's is not RECV.)
    let r = poll_n(&mut cq_b, 1);
    assert_eq!((r[0].wr_id, r[0].status), (400, WcStatus::WR_FLUSH_ERR), "{r:?}");
    assert_no_more(&mut cq_a);
    assert_no_more(&mut cq_b);
}

#[test]
fn posting_in_the_wrong_state_is_refused() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let m = pd.alloc_mr(4096, ALL).unwrap();
    let s = [m.sge(0, 8).unwrap()];
    let e = qp.post_recv(&[RecvWr { wr_id: 1, sgl: &s }]).unwrap_err();
    assert_eq!(e.kind, rverbs::PostErrorKind::BadState);
    qp.to_init(&ConnectOptions::default()).unwrap();
    qp.post_recv(&[RecvWr { wr_id: 1, sgl: &s }]).unwrap();
    let e = qp.post_send(&[send_wr(1, SendOp::Send, &s)]).unwrap_err();
    assert_eq!(e.kind, rverbs::PostErrorKind::BadState);
}

#[test]
fn full_send_queue_names_the_request() {
    let Some(Loopback { pd, mut cq_a, mut a, b: _b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(4), 64) else {
        return;
    };
    let m = pd.alloc_mr(4096, ALL).unwrap();
    let s = [m.sge(0, 8).unwrap()];
    // rxe on 6.12 reports the ring's capacity; on 6.1 what was asked, while
    // its ring holds the rounded-up number (a power of two of slots, one
    // kept empty), and rverbs fills the ring. siw reports its ring's
    // slots (a power of two, each with its own valid flag: none kept empty).
    let depth = a.cap().max_send_wr as usize;
    let iwarp = common::is_iwarp(&common::first_device().unwrap());
    let ring = if iwarp || common::kernel_version() >= (6, 12) { depth } else { (depth + 1).next_power_of_two() - 1 };
    // Writes need no receives: more than any ring holds, in one call. The
    // free slots are read once per call and the doorbell rung at its end,
    // so the kernel consumes nothing while the call fills the ring.
    let wrs: Vec<SendWr> =
        (0..ring as u64 * 2 + 8).map(|i| send_wr(i, SendOp::RdmaWrite(m.remote(1024).unwrap()), &s)).collect();
    let e = a.post_send(&wrs).expect_err("the ring cannot hold them all");
    assert_eq!((e.kind, e.index), (rverbs::PostErrorKind::QueueFull, ring), "{e:?}, cap {depth}");
    let wcs = poll_n(&mut cq_a, e.index);
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..e.index as u64).collect::<Vec<_>>());
    assert!(wcs.iter().all(|w| w.status == WcStatus::SUCCESS), "{wcs:?}");
    assert_no_more(&mut cq_a);
}

#[test]
fn event_mode_wakes_for_every_armed_completion() {
    let Some(EventPair { ch, mut cq_a, mut cq_b, mut a, mut b, ma, mb, _cm, _pd }) = event_pair(64, 64 * 64) else {
        return;
    };
    const TOTAL: usize = 200;
    // Receives posted so far: the sender's credits. iWARP has no RNR retry
    // (a SEND that finds no receive ends the connection) and a send
    // completes once TCP took it, so the sender never runs ahead of them.
    let posted = AtomicUsize::new(0);
    let repost = |b: &mut rverbs::QueuePair, n: usize| {
        for _ in 0..n {
            let p = posted.load(Ordering::Relaxed);
            b.post_recv(&[RecvWr { wr_id: p as u64, sgl: &[mb.sge(p % 16 * 64, 64).unwrap()] }]).unwrap();
            // Release: the receive is posted before the sender counts it.
            posted.store(p + 1, Ordering::Release);
        }
    };
    repost(&mut b, 16);
    cq_b.req_notify(false).unwrap();
    std::thread::scope(|sc| {
        let waiter = sc.spawn(|| {
            let mut got = 0usize;
            let mut events = 0usize;
            let mut buf = [rverbs::Wc::default(); 16];
            while got < TOTAL {
                let ev = ch.get_cq_event_timeout(30_000).unwrap().expect("a wakeup was lost");
                assert_eq!(ev.cq_user_handle, cq_b.user_handle());
                events += 1;
                cq_b.ack_events(1);
                // Re-arm first, then drain: nothing that arrives in between is missed.
                cq_b.req_notify(false).unwrap();
                loop {
                    let n = cq_b.poll(&mut buf);
                    if n == 0 {
                        break;
                    }
                    assert!(buf[..n].iter().all(|w| w.status == WcStatus::SUCCESS));
                    got += n;
                    repost(&mut b, n);
                }
            }
            (got, events)
        });
        // Bursts of several sends so completions arrive together.
        let s = [ma.sge(0, 16).unwrap()];
        let mut sent = 0;
        while sent < TOTAL {
            let burst = 5.min(TOTAL - sent);
            let start = std::time::Instant::now();
            while posted.load(Ordering::Acquire) < sent + burst {
                let waited = start.elapsed();
                assert!(waited.as_secs() < 120, "no receive posted for {waited:?} (hang detector)");
                std::thread::yield_now();
            }
            let wrs: Vec<SendWr> = (0..burst).map(|i| send_wr((sent + i) as u64, SendOp::Send, &s)).collect();
            a.post_send(&wrs).unwrap();
            assert_eq!(poll_n(&mut cq_a, burst).len(), burst);
            sent += burst;
            // Let completions of several bursts gather between wakeups.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let (got, events) = waiter.join().unwrap();
        assert_eq!(got, TOTAL);
        assert!((1..=TOTAL).contains(&events), "{events} events");
    });
}

/// A blocking channel (libibverbs' kind): `read_cq_event` is one `read()`
/// that sleeps until the armed CQ's completion raises the event; on a
/// non-blocking one it answers `None` at once when nothing is queued.
#[test]
fn blocking_channel_waits_in_one_read() {
    let Some(EventPair { ch, mut cq_a, mut cq_b, mut a, mut b, ma, mb, _cm, _pd }) = event_pair(16, 4096) else {
        return;
    };
    assert_eq!(ch.read_cq_event().unwrap(), None, "non-blocking, nothing queued");
    ch.set_blocking(true).unwrap();
    let mut buf = [rverbs::Wc::default(); 4];
    for round in 0..3u64 {
        b.post_recv(&[RecvWr { wr_id: round, sgl: &[mb.sge(0, 64).unwrap()] }]).unwrap();
        cq_b.req_notify(false).unwrap();
        std::thread::scope(|sc| {
            let sender = sc.spawn(|| {
                // Most likely after the read below went to sleep.
                std::thread::sleep(std::time::Duration::from_millis(50));
                let s = [ma.sge(0, 16).unwrap()];
                a.post_send(&[send_wr(round, SendOp::Send, &s)]).unwrap();
                assert_eq!(poll_n(&mut cq_a, 1).len(), 1);
            });
            let ev =
                if round == 2 { ch.get_cq_event().unwrap() } else { ch.read_cq_event().unwrap().expect("an event") };
            assert_eq!(ev.cq_user_handle, cq_b.user_handle(), "round {round}");
            sender.join().unwrap();
        });
        cq_b.ack_events(1);
        assert_eq!(cq_b.poll(&mut buf), 1, "round {round}");
        assert_eq!((buf[0].wr_id, buf[0].status), (round, WcStatus::SUCCESS));
    }
    ch.set_blocking(false).unwrap();
    assert_eq!(ch.read_cq_event().unwrap(), None, "non-blocking again");
}

/// strace of a 1,000-message run: exactly one `write()` per post call on
/// the data path, and no other syscall at all while posting and polling.
/// siw skips the doorbell while the kernel is still sending; here each
/// post waits for the previous message, so it rings once per post too.
#[test]
fn thousand_messages_under_strace() {
    let Some(dev) = common::first_device() else { return };
    if std::env::var("RVERBS_UNDER_STRACE").is_ok() {
        return run_thousand_messages();
    }
    let exe = std::env::current_exe().unwrap();
    let log = std::env::temp_dir().join(format!("rverbs-dp-strace-{}", std::process::id()));
    let out = std::process::Command::new("strace")
        .args(["-f", "-y", "-o"])
        .arg(&log)
        .arg(&exe)
        .args(["--exact", "thousand_messages_under_strace", "--test-threads=1", "--nocapture"])
        .env("RVERBS_UNDER_STRACE", "1")
        .output()
        .expect("strace must be installed in the VM");
    assert!(out.status.success(), "traced run failed: {}", String::from_utf8_lossy(&out.stderr));
    let trace = std::fs::read_to_string(&log).unwrap();
    let begin = trace.lines().position(|l| l.contains(MARK_BEGIN)).expect("begin marker in the trace");
    let tid = trace.lines().nth(begin).unwrap().split_whitespace().next().unwrap().to_owned();
    let end = trace.lines().position(|l| l.contains(MARK_END)).expect("end marker in the trace");
    let node = format!("<{}>", dev.dev_path().display());
    let window: Vec<&str> =
        trace.lines().skip(begin + 1).take(end - begin - 1).filter(|l| l.starts_with(&tid)).collect();
    let doorbells = window.iter().filter(|l| l.contains("write(") && l.contains(&node)).count();
    let others: Vec<&&str> = window.iter().filter(|l| !(l.contains("write(") && l.contains(&node))).collect();
    assert_eq!(doorbells, MESSAGES, "one doorbell write() per post call");
    assert!(others.is_empty(), "syscalls other than the doorbell on the data path:\n{others:#?}");
    let _ = std::fs::remove_file(&log);
}

const MESSAGES: usize = 1000;
const MARK_BEGIN: &str = "rverbs-datapath-begin";
const MARK_END: &str = "rverbs-datapath-end";

fn run_thousand_messages() {
    let Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. } =
        loopback(QpType::Rc, cap(32), 256).unwrap();
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(64 * 64, ALL).unwrap();
    let s = [ma.sge(0, 64).unwrap()];
    let recv_sges: Vec<[Sge; 1]> = (0..32).map(|i| [mb.sge(i * 64, 64).unwrap()]).collect();
    for (i, sg) in recv_sges.iter().enumerate().take(16) {
        b.post_recv(&[RecvWr { wr_id: i as u64, sgl: sg }]).unwrap();
    }
    let mut wc = [rverbs::Wc::default(); 16];
    // A marker the parent finds in the trace (a failing stat, no side effects).
    let _ = std::fs::metadata(MARK_BEGIN);
    let mut received = 0usize;
    let mut next_recv = 16usize;
    for i in 0..MESSAGES {
        a.post_send(&[send_wr(i as u64, SendOp::Send, &s)]).unwrap();
        // Busy-poll both CQs without any syscall.
        let mut sent_done = false;
        while !sent_done || received <= i {
            let n = cq_a.poll(&mut wc);
            if n > 0 {
                assert!(wc[..n].iter().all(|w| w.status == WcStatus::SUCCESS));
                sent_done = true;
            }
            let n = cq_b.poll(&mut wc);
            for w in &wc[..n] {
                assert_eq!(w.status, WcStatus::SUCCESS);
            }
            for _ in 0..n {
                let sg = &recv_sges[next_recv % 32];
                b.post_recv(&[RecvWr { wr_id: next_recv as u64, sgl: sg }]).unwrap();
                next_recv += 1;
            }
            received += n;
        }
    }
    let _ = std::fs::metadata(MARK_END);
    assert_eq!(received, MESSAGES);
}
