//! Memory regions and addresses against the real kernel (VM tier):
//! deregistration under an RDMA READ in flight, a READ into a deregistered
//! region, transfers through caller
//! memory (`reg_mr` over a `Vec` and an anonymous mapping), one region
//! shared between threads, and a UD send naming a destroyed AH. What rxe
//! does where the verbs leave it open is pinned per kernel (6.1, 6.12).

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{assert_no_more, loopback, pattern, poll_n, Loopback};
use rverbs::{
    AccessFlags, AhAttr, AsyncEventType, ConnectOptions, GlobalRoute, QpAttrMask, QpCap, QpState, QpType, RecvWr,
    SendFlags, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

fn cap(depth: u32) -> QpCap {
    QpCap { max_send_wr: depth, max_recv_wr: depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
}

fn wr<'a>(wr_id: u64, op: SendOp, sgl: &'a [Sge]) -> SendWr<'a> {
    SendWr { wr_id, op, flags: SendFlags::SIGNALED, sgl, ud: None }
}

/// `(major, minor)` of the kernel, for the outcomes that differ.
fn kernel() -> (u32, u32) {
    common::kernel_version()
}

#[test]
fn dereg_while_a_large_read_is_in_flight() {
    let Some(Loopback { ctx, pd, mut cq_a, cq_b: _cq_b, mut a, b: _b, cm_ids: _cm }) = loopback(QpType::Rc, cap(8), 16)
    else {
        return;
    };
    if common::is_iwarp(ctx.device()) {
        // 6.1's siw holds root to RLIMIT_MEMLOCK (8 MiB in the guest) when
        // it pins a region, as ib_umem_get does not: lift it, as root may.
        use nix::libc;
        let r = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: setrlimit reads the struct it is given.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) }, 0, "raise RLIMIT_MEMLOCK (as root)");
    }
    let mrs_before = common::resources_of("mr").len();
    const LEN: usize = 64 << 20;
    let src = pd.alloc_mr(LEN, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).unwrap();
    let dst = pd.alloc_mr(LEN, AccessFlags::LOCAL_WRITE).unwrap();
    let small = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    assert_eq!(common::resources_of("mr").len(), mrs_before + 3);
    const MARK: [u8; 8] = *b"rverbs\x01\x02";
    src.write_at(0, &MARK).unwrap();
    let big = [dst.sge(0, LEN as u32).unwrap()];
    let tail = [small.sge(0, 4096).unwrap()];
    // One 64 MiB READ into `dst`, then two small ones behind it.
    post_three_reads(&mut a, &src, &big, &tail);
    let iwarp = common::is_iwarp(ctx.device());
    if iwarp {
        // siw resolves a READ's sink key once, at the response's first
        // segment, and holds the region from then on. Deregister after that,
        // so the outcome below is the one pinned. (Before it, the READ ends
        // with LOC_PROT_ERR and siw never completes the two behind it: its
        // flush stops at the failed READ's ORQ entry, which it cleared
        // without moving past; 6.1 and 6.12, libsiw alike. docs/SIW.md.)
        wait_for_bytes(&dst, &MARK);
    }
    // rxe (6.1 and 6.12): the deregistration succeeds at once; the READ then
    // fails with a local protection error when its next response finds the
    // key gone (or its first, if none has come yet), and the QP's error
    // state flushes the two behind it. No async event. (The opcode of an
    // error completion is undefined.)
    dst.dereg().expect("deregistering under a READ in flight");
    let wcs = poll_n(&mut cq_a, 3);
    let mut seen: HashMap<u64, WcStatus> = HashMap::new();
    for w in &wcs {
        assert!(seen.insert(w.wr_id, w.status).is_none(), "wr_id {} completed twice: {wcs:?}", w.wr_id);
    }
    // siw (6.1 and 6.12): the READ in flight holds its own reference to
    // the region's memory (siw_mem), so all three READs complete and the QP
    // stays in RTS.
    let want = if iwarp {
        HashMap::from([(1, WcStatus::SUCCESS), (2, WcStatus::SUCCESS), (3, WcStatus::SUCCESS)])
    } else {
        HashMap::from([(1, WcStatus::LOC_PROT_ERR), (2, WcStatus::WR_FLUSH_ERR), (3, WcStatus::WR_FLUSH_ERR)])
    };
    assert_eq!(seen, want, "{wcs:?}");
    assert_no_more(&mut cq_a);
    let state = if iwarp { QpState::Rts } else { QpState::Err };
    assert_eq!(a.query(QpAttrMask::STATE).unwrap().qp_state, common::reported_state(ctx.device(), state));
    assert_eq!(ctx.get_async_event_timeout(200).unwrap(), None);
    drop(a);
    drop((src, small));
    assert_eq!(common::resources_of("mr").len(), mrs_before, "an MR leaked");
}

/// A READ whose sink key is already gone when its response arrives (the
/// Sge names a deregistered region: the kernel checks keys, so this is
/// safe), with two READs behind it.
#[test]
fn read_into_a_deregistered_region() {
    let Some(Loopback { ctx, pd, mut cq_a, cq_b: _cq_b, mut a, b: _b, cm_ids }) = loopback(QpType::Rc, cap(8), 16)
    else {
        return;
    };
    let src = pd.alloc_mr(1 << 20, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).unwrap();
    let gone = pd.alloc_mr(1 << 20, AccessFlags::LOCAL_WRITE).unwrap();
    let small = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let stale = [Sge::new(gone.addr(), 1 << 20, gone.lkey())];
    gone.dereg().unwrap();
    let tail = [small.sge(0, 4096).unwrap()];
    post_three_reads(&mut a, &src, &stale, &tail);
    let status = |wcs: &[rverbs::Wc]| wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>();
    if !common::is_iwarp(ctx.device()) {
        // rxe (6.1 and 6.12): LOC_PROT_ERR at the response, the two behind
        // it flushed, the QP in ERR, no async event.
        let wcs = poll_n(&mut cq_a, 3);
        assert_eq!(
            status(&wcs),
            [(1, WcStatus::LOC_PROT_ERR), (2, WcStatus::WR_FLUSH_ERR), (3, WcStatus::WR_FLUSH_ERR)],
            "{wcs:?}"
        );
        assert_no_more(&mut cq_a);
        assert_eq!(a.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Err);
        assert_eq!(ctx.get_async_event_timeout(200).unwrap(), None);
        return;
    }
    // siw (6.1 and 6.12): LOC_PROT_ERR, a QP access error event, the
    // connection ends (DISCONNECTED at both ends) and the QP is in ERROR.
    // The READs siw had already sent behind the failed one are never
    // completed: it clears the failed READ's ORQ entry without moving past
    // it, and its flush stops there. Those not yet sent are flushed. How
    // many were sent is timing: of wrs 2 and 3, a prefix is lost, the rest
    // flushed (in 12 runs on 6.1 and 6.12, wr 2 lost and wr 3 flushed 11
    // times, both lost once). docs/SIW.md.
    let mut wcs = poll_n(&mut cq_a, 1);
    let ev = ctx.get_async_event_timeout(30_000).unwrap().expect("an async event");
    assert_eq!(ev.event_type, AsyncEventType::QpAccessErr, "{ev:?}");
    let timeout = std::time::Duration::from_secs(30);
    for id in &cm_ids {
        let ev = id.channel().get_event_timeout(timeout).unwrap().expect("DISCONNECTED within 30 s");
        assert_eq!(ev.kind(), rverbs::cm::EventKind::Disconnected, "{ev:?}");
    }
    // siw flushes in the same kernel work that reports the close, right
    // after it: a second for its CQEs.
    let mut buf = [rverbs::Wc::default(); 4];
    for _ in 0..100 {
        let n = cq_a.poll(&mut buf);
        wcs.extend_from_slice(&buf[..n]);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let got = status(&wcs);
    let (err, flushed) = got.split_at(1);
    assert_eq!(err, [(1, WcStatus::LOC_PROT_ERR)], "{wcs:?}");
    let first_flushed = flushed.first().map_or(4, |f| f.0);
    let want: Vec<_> = (first_flushed..=3).map(|id| (id, WcStatus::WR_FLUSH_ERR)).collect();
    assert!(first_flushed >= 2 && flushed == want, "{wcs:?}");
    assert_no_more(&mut cq_a);
    assert_eq!(a.query(QpAttrMask::STATE).unwrap().qp_state, common::reported_state(ctx.device(), QpState::Err));
}

/// Posts three RDMA READs from `src` in one call: wr 1 into `first`, then
/// wrs 2 and 3 (from offsets 0 and 4096) into `tail`.
fn post_three_reads(qp: &mut rverbs::QueuePair, src: &rverbs::MemoryRegion, first: &[Sge], tail: &[Sge]) {
    let read = |offset| SendOp::RdmaRead(src.remote(offset).unwrap());
    qp.post_send(&[wr(1, read(0), first), wr(2, read(0), tail), wr(3, read(4096), tail)]).unwrap();
}

/// Waits until the region's first bytes read `want` (a transfer into it has
/// begun), or panics after a generous bound.
fn wait_for_bytes(mr: &rverbs::MemoryRegion, want: &[u8]) {
    let start = std::time::Instant::now();
    loop {
        if common::read(mr, 0, want.len()) == want {
            return;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(120), "no byte of the READ arrived in 120 s");
        std::thread::yield_now();
    }
}

/// Caller memory over an (unaligned) heap buffer and an anonymous mapping:
/// SEND one way, RDMA WRITE the other, bytes checked through the regions
/// and, once they are gone, in the memory itself.
#[test]
fn transfers_through_caller_memory() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(8), 16)
    else {
        return;
    };
    const LEN: usize = 64 * 1024;
    let mut heap = pattern(1, LEN + 3);
    let mut map = memmap2::MmapOptions::new().len(LEN).map_anon().unwrap();
    map[..LEN / 2].copy_from_slice(&pattern(2, LEN / 2));
    // SAFETY: `heap` and `map` outlive the regions (dropped below first) and
    // are not touched, except through the regions, while the regions exist.
    let (mh, mm) = unsafe {
        (pd.reg_mr(heap.as_mut_ptr().add(3), LEN, ALL).unwrap(), pd.reg_mr(map.as_mut_ptr(), LEN, ALL).unwrap())
    };
    assert_eq!(mh.addr() % 8, (heap.as_ptr() as u64 + 3) % 8);
    // SEND heap[3..3+5000] -> map[40000..].
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mm.sge(40_000, 8192).unwrap()] }]).unwrap();
    a.post_send(&[wr(2, SendOp::Send, &[mh.sge(0, 5000).unwrap()])]).unwrap();
    let wc = poll_n(&mut cq_a, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::SUCCESS), "{wc:?}");
    let wc = poll_n(&mut cq_b, 1)[0];
    assert_eq!((wc.wr_id, wc.status, wc.byte_len), (1, WcStatus::SUCCESS, 5000), "{wc:?}");
    let mut got = vec![0u8; 5000];
    mm.read_at(40_000, &mut got).unwrap();
    assert_eq!(got, pattern(1, LEN + 3)[3..5003]);
    // RDMA WRITE map[0..LEN/2] -> heap region at 7 (unaligned both ends).
    b.post_send(&[wr(3, SendOp::RdmaWrite(mh.remote(7).unwrap()), &[mm.sge(0, (LEN / 2) as u32).unwrap()])]).unwrap();
    let wc = poll_n(&mut cq_b, 1)[0];
    assert_eq!((wc.wr_id, wc.status, wc.opcode), (3, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE), "{wc:?}");
    let mut got = vec![0u8; LEN / 2];
    mh.read_at(7, &mut got).unwrap();
    assert_eq!(got, pattern(2, LEN / 2));
    assert_no_more(&mut cq_a);
    drop((mh, mm));
    let mut want = pattern(1, LEN + 3);
    want[10..10 + LEN / 2].copy_from_slice(&pattern(2, LEN / 2));
    assert!(heap == want, "the heap buffer does not hold what was written");
    let mut want = pattern(2, LEN / 2);
    want.resize(LEN, 0);
    want[40_000..45_000].copy_from_slice(&pattern(1, LEN + 3)[3..5003]);
    assert!(map[..] == want[..], "the mapping does not hold what was sent");
}

/// One region in an `Arc`: a thread fills the next message with
/// `write_at` while the poster sends the previous one and the receiver
/// thread reads what arrived, all at once.
#[test]
fn a_region_shared_between_threads() {
    let Some(Loopback { pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm, .. }) = loopback(QpType::Rc, cap(64), 128)
    else {
        return;
    };
    const MSG: usize = 4096;
    const N: u32 = 50;
    let src = Arc::new(pd.alloc_mr(2 * MSG, ALL).unwrap());
    let dst = Arc::new(pd.alloc_mr(N as usize * MSG, ALL).unwrap());
    for i in 0..N {
        b.post_recv(&[RecvWr { wr_id: u64::from(i), sgl: &[dst.sge(i as usize * MSG, MSG as u32).unwrap()] }]).unwrap();
    }
    let reader = {
        let dst = Arc::clone(&dst);
        std::thread::spawn(move || {
            for w in poll_n(&mut cq_b, N as usize) {
                assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
                let mut got = vec![0u8; MSG];
                dst.read_at(w.wr_id as usize * MSG, &mut got).unwrap();
                assert_eq!(got, pattern(w.wr_id as u32, MSG), "message {}", w.wr_id);
            }
        })
    };
    src.write_at(0, &pattern(0, MSG)).unwrap();
    for i in 0..N {
        let slot = (i as usize % 2) * MSG;
        a.post_send(&[wr(u64::from(i), SendOp::Send, &[src.sge(slot, MSG as u32).unwrap()])]).unwrap();
        // Fill the other slot while this one is on the wire.
        let filler = {
            let src = Arc::clone(&src);
            std::thread::spawn(move || src.write_at(MSG - slot, &pattern(i + 1, MSG)).unwrap())
        };
        let wc = poll_n(&mut cq_a, 1)[0];
        assert_eq!((wc.wr_id, wc.status), (u64::from(i), WcStatus::SUCCESS), "{wc:?}");
        filler.join().unwrap();
    }
    reader.join().unwrap();
}

#[test]
fn a_ud_send_naming_a_destroyed_ah_is_refused() {
    if let Some(dev) = common::first_device().filter(common::is_iwarp) {
        let ctx = dev.open().unwrap();
        let cq = ctx.create_cq(4).unwrap();
        let e = ctx.alloc_pd().unwrap().create_qp(&rverbs::QpInitAttr::new(QpType::Ud, &cq)).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        return common::not_applicable(&dev, &format!("no UD on iWARP: {e}"));
    }
    let Some(Loopback { ctx, pd, mut cq_a, mut cq_b, mut a, mut b, cm_ids: _cm }) = loopback(QpType::Ud, cap(8), 16)
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
    let ah = pd.create_ah(&attr).unwrap();
    let m = pd.alloc_mr(8192, ALL).unwrap();
    let qkey = ConnectOptions::default().qkey;
    let s = [m.sge(0, 64).unwrap()];
    b.post_recv(&[RecvWr { wr_id: 1, sgl: &[m.sge(4096, 4096).unwrap()] }]).unwrap();
    let send = |id, dest: UdDest<'static>| SendWr { ud: Some(dest), ..wr(id, SendOp::Send, &s) };
    // By number, so that the same destination outlives the AH below.
    let stale = rverbs::UdDest::new(ah.ah_num(), b.qp_num(), qkey);
    a.post_send(&[send(1, stale)]).unwrap();
    assert_eq!(poll_n(&mut cq_a, 1)[0].status, WcStatus::SUCCESS);
    assert_eq!(poll_n(&mut cq_b, 1)[0].status, WcStatus::SUCCESS);
    ah.destroy().unwrap();
    b.post_recv(&[RecvWr { wr_id: 2, sgl: &[m.sge(4096, 4096).unwrap()] }]).unwrap();
    // Posting cannot tell (the number is only an index to the kernel's AH
    // table); the kernel finds no AH under it, fails the request and moves
    // the QP to ERR. 6.1 reports the request as LOC_QP_OP_ERR; 6.12 as
    // flushed (WR_FLUSH_ERR: the QP is in ERR before its completion is
    // made). Nothing reaches the receiver; no async event.
    a.post_send(&[send(2, stale)]).expect("the post itself is accepted");
    let wc = poll_n(&mut cq_a, 1)[0];
    let want = if kernel() >= (6, 12) { WcStatus::WR_FLUSH_ERR } else { WcStatus::LOC_QP_OP_ERR };
    assert_eq!((wc.wr_id, wc.status), (2, want), "{wc:?}");
    assert_no_more(&mut cq_a);
    assert_eq!(a.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Err);
    assert_no_more(&mut cq_b);
    assert_eq!(ctx.get_async_event_timeout(200).unwrap(), None);
}
