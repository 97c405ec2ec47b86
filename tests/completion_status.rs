//! The completion statuses a user sees on soft-RoCE (rxe) for the common
//! mistakes, pinned per kernel: what docs/TROUBLESHOOTING.md and
//! `WcStatus`'s docs say. rverbs passes on what the kernel wrote; where
//! rxe differs from the IBTA meaning (a bad local key flushed on 6.12, a
//! too-small receive as a QP operation error), the test says so and fails
//! when a kernel changes its answer.
//!
//! Every case connects a fresh pair of RC QPs with
//! `QpControl::connect_pair` (an error moves a QP to ERR) and waits with
//! `CompletionQueue::wait_any`; the batches go through `post_recv_iter`
//! and `post_send_iter`.

mod common;

use std::time::Duration;

use rverbs::{
    AccessFlags, CompletionQueue, ConnectOptions, Context, MemoryRegion, ProtectionDomain, QpAttr, QpAttrMask,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, RemoteMemory, SendWr, Sge, Wc, WcStatus,
};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// Two RC QPs of one PD connected to each other, each with its CQ, and a
/// region for each side.
struct Pair {
    ctx: Context,
    pd: ProtectionDomain,
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    ma: MemoryRegion,
    mb: MemoryRegion,
}

fn pair(opts: &ConnectOptions) -> Option<Pair> {
    let ctx = common::first_device()?.open().expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = ctx.create_cq(64).unwrap();
    let cq_b = ctx.create_cq(64).unwrap();
    let mut init = QpInitAttr::new(QpType::Rc, &cq_a);
    init.cap.max_send_wr = 64;
    init.cap.max_recv_wr = 64;
    let a = pd.create_qp(&init).unwrap();
    init.send_cq = &cq_b;
    init.recv_cq = &cq_b;
    let b = pd.create_qp(&init).unwrap();
    let (ea, eb) = a.connect_pair(&b, opts).unwrap();
    assert_eq!((ea.qpn, eb.qpn), (a.qp_num(), b.qp_num()));
    assert_eq!((a.state(), b.state()), (QpState::Rts, QpState::Rts));
    let ma = pd.alloc_mr(4096, ALL).unwrap();
    let mb = pd.alloc_mr(4096, ALL).unwrap();
    Some(Pair { ctx, pd, cq_a, cq_b, a, b, ma, mb })
}

/// The next completion of `cq` (at most 10 s).
fn next(cq: &mut CompletionQueue) -> Wc {
    let mut wc = [Wc::default()];
    let n = cq.wait_any(&mut wc, Some(Duration::from_secs(10))).expect("wait_any");
    assert_eq!(n, 1, "no completion within 10 s");
    wc[0]
}

/// `(6, 12)` on 6.12, `(6, 1)` on 6.1.
fn kernel() -> (u32, u32) {
    common::kernel_version()
}

/// Records the outcome for the docs' table (`--nocapture` shows it).
fn seen(case: &str, side: &str, wc: &Wc) {
    eprintln!("{:?} | {case} | {side}: {:?}", kernel(), wc.status);
}

// ---- local mistakes ----

/// A SEND/WRITE whose source SGE has a wrong lkey (here: a region of
/// another PD). IBTA: local protection error. rxe 6.1: `LOC_QP_OP_ERR`;
/// rxe 6.12: the request is flushed (`WR_FLUSH_ERR`), the QP being in ERR
/// before its completion is made.
#[test]
fn wrong_lkey_on_a_write_source() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let other_pd = p.ctx.alloc_pd().unwrap();
    let foreign = other_pd.alloc_mr(4096, ALL).unwrap();
    let to = RemoteMemory::of(&p.mb).at(0, 64).unwrap();
    p.a.post_send(&[SendWr::write(1, &[foreign.sge(0, 64).unwrap()], to).signaled()]).expect("the post is accepted");
    let wc = next(&mut p.cq_a);
    seen("WRITE, source SGE of another PD", "requester", &wc);
    let want = if kernel() >= (6, 12) { WcStatus::WR_FLUSH_ERR } else { WcStatus::LOC_QP_OP_ERR };
    assert_eq!((wc.wr_id, wc.status), (1, want), "{wc:?}");
    assert_eq!(p.a.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Err);
}

/// A source SGE that runs past the end of its region (built raw, since
/// `MemoryRegion::sge` refuses it): 6.1 `LOC_PROT_ERR`, 6.12 flushed.
#[test]
fn source_sge_past_the_region() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let past = Sge::new(p.ma.addr() + 4000, 200, p.ma.lkey());
    let to = RemoteMemory::of(&p.mb).at(0, 200).unwrap();
    p.a.post_send(&[SendWr::write(1, &[past], to).signaled()]).expect("the post is accepted");
    let wc = next(&mut p.cq_a);
    seen("WRITE, source SGE past its region", "requester", &wc);
    let want = if kernel() >= (6, 12) { WcStatus::WR_FLUSH_ERR } else { WcStatus::LOC_PROT_ERR };
    assert_eq!((wc.wr_id, wc.status), (1, want), "{wc:?}");
}

/// A wrong lkey where the device writes local memory (a READ's
/// destination): `LOC_PROT_ERR` on both kernels.
#[test]
fn wrong_lkey_on_a_read_destination() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let mut bad = p.ma.sge(0, 64).unwrap();
    bad.lkey ^= 0x5a5a_0000;
    let from = RemoteMemory::of(&p.mb).at(0, 64).unwrap();
    p.a.post_send(&[SendWr::read(1, &[bad], from).signaled()]).expect("the post is accepted");
    let wc = next(&mut p.cq_a);
    seen("READ, destination with a wrong lkey", "requester", &wc);
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::LOC_PROT_ERR), "{wc:?}");
}

/// A SEND of 100 bytes into a 16-byte receive. IBTA: `LOC_LEN_ERR` at the
/// receiver. rxe (6.1 and 6.12): the receiver gets `LOC_QP_OP_ERR` (its
/// copy fails with EINVAL, which it maps to a malformed WQE), the sender
/// `REM_OP_ERR`.
#[test]
fn receive_too_small() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    p.b.post_recv(&[RecvWr::new(7, &[p.mb.sge(0, 16).unwrap()])]).unwrap();
    p.a.post_send(&[SendWr::send(1, &[p.ma.sge(0, 100).unwrap()]).signaled()]).unwrap();
    let r = next(&mut p.cq_b);
    let s = next(&mut p.cq_a);
    seen("SEND 100 bytes into a 16-byte receive", "receiver", &r);
    seen("SEND 100 bytes into a 16-byte receive", "sender", &s);
    assert_eq!((r.wr_id, r.status), (7, WcStatus::LOC_QP_OP_ERR), "{r:?}");
    assert_eq!((s.wr_id, s.status), (1, WcStatus::REM_OP_ERR), "{s:?}");
}

/// A receive whose SGE is a region of another PD than its QP's, then a
/// SEND: the receiver `LOC_QP_OP_ERR`, the sender `REM_OP_ERR` (both
/// kernels).
#[test]
fn receive_into_a_region_of_another_pd() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let other_pd = p.ctx.alloc_pd().unwrap();
    let foreign = other_pd.alloc_mr(4096, ALL).unwrap();
    p.b.post_recv(&[RecvWr::new(7, &[foreign.sge(0, 64).unwrap()])]).unwrap();
    p.a.post_send(&[SendWr::send(1, &[p.ma.sge(0, 32).unwrap()]).signaled()]).unwrap();
    let r = next(&mut p.cq_b);
    let s = next(&mut p.cq_a);
    seen("receive into a region of another PD", "receiver", &r);
    seen("receive into a region of another PD", "sender", &s);
    assert_eq!((r.wr_id, r.status), (7, WcStatus::LOC_QP_OP_ERR), "{r:?}");
    assert_eq!((s.wr_id, s.status), (1, WcStatus::REM_OP_ERR), "{s:?}");
}

// ---- remote mistakes ----

/// A WRITE's target: the region, the offset in it and the length.
type Target = fn(&Pair, &ProtectionDomain) -> (MemoryRegion, u64, u32);

/// WRITEs the responder refuses: a region without `REMOTE_WRITE`, a range
/// past the end of the peer's region, an rkey of another PD than the
/// responder QP's. `REM_ACCESS_ERR` at the requester, on both kernels;
/// nothing completes at the responder.
#[test]
fn remote_access_errors() {
    let cases: [(&str, Target); 3] = [
        ("WRITE to a region without REMOTE_WRITE", |p, _| {
            (p.pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).unwrap(), 0, 64)
        }),
        ("WRITE past the end of the peer's region", |p, _| (p.pd.alloc_mr(4096, ALL).unwrap(), 4000, 200)),
        ("WRITE with an rkey of another PD", |_, other| (other.alloc_mr(4096, ALL).unwrap(), 0, 64)),
    ];
    for (what, target) in cases {
        let Some(mut p) = pair(&ConnectOptions::default()) else { return };
        let other_pd = p.ctx.alloc_pd().unwrap();
        let (mr, offset, len) = target(&p, &other_pd);
        // Built by hand: `RemoteMemory::at` would refuse the range past the end.
        let to = rverbs::RemoteAddr { addr: mr.addr() + offset, rkey: mr.rkey() };
        p.a.post_send(&[SendWr::write(1, &[p.ma.sge(0, len).unwrap()], to).signaled()]).unwrap();
        let wc = next(&mut p.cq_a);
        seen(what, "requester", &wc);
        assert_eq!((wc.wr_id, wc.status), (1, WcStatus::REM_ACCESS_ERR), "{what}: {wc:?}");
        common::assert_no_more(&mut p.cq_b);
    }
}

/// A SEND with no receive posted at the peer and `rnr_retry` 0:
/// `RNR_RETRY_EXC_ERR`. (With the default `rnr_retry` 7, rxe retries
/// forever: the SEND waits for a receive.)
#[test]
fn no_receive_posted() {
    let opts = ConnectOptions { rnr_retry: 0, min_rnr_timer: 1, ..ConnectOptions::default() };
    let Some(mut p) = pair(&opts) else { return };
    p.a.post_send(&[SendWr::send(1, &[p.ma.sge(0, 8).unwrap()]).signaled()]).unwrap();
    let wc = next(&mut p.cq_a);
    seen("SEND, no receive posted, rnr_retry 0", "sender", &wc);
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RNR_RETRY_EXC_ERR), "{wc:?}");
}

// ---- the QP in ERR ----

/// Once a QP is in ERR every outstanding request completes with
/// `WR_FLUSH_ERR`, and so does every later send and receive; the posts
/// themselves are accepted.
#[test]
fn a_qp_in_err_flushes() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let sges: Vec<Sge<'_>> = (0..40).map(|i| p.mb.sge(i * 64, 64).unwrap()).collect();
    p.b.post_recv_iter(sges.iter().enumerate().map(|(i, s)| (i as u64, *s))).unwrap();
    p.b.modify(&QpAttr { qp_state: QpState::Err, ..QpAttr::default() }, QpAttrMask::STATE).unwrap();
    let mut wcs = [Wc::default(); 64];
    let mut got = Vec::new();
    while got.len() < 40 {
        let n = p.cq_b.wait_any(&mut wcs, Some(Duration::from_secs(10))).unwrap();
        assert!(n > 0, "{} of 40 flushed receives after 10 s", got.len());
        got.extend_from_slice(&wcs[..n]);
    }
    seen("receives outstanding when the QP goes to ERR", "receiver", &got[0]);
    assert!(got.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{got:?}");
    assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
    // Later posts are accepted too. A send rings the doorbell and the
    // kernel flushes it at once; a receive is pure memory on rxe (no
    // doorbell), so rverbs asks the kernel to flush it with another move
    // to ERR (rdma-core's provider does not: there it never completes).
    p.b.post_send(&[SendWr::send(98, &[p.mb.sge(0, 8).unwrap()]).signaled()]).expect("a post to a QP in ERR");
    let wc = next(&mut p.cq_b);
    seen("a send posted to a QP in ERR", "sender", &wc);
    assert_eq!((wc.wr_id, wc.status), (98, WcStatus::WR_FLUSH_ERR), "{wc:?}");
    p.b.post_recv(&[RecvWr::new(99, &[p.mb.sge(0, 64).unwrap()])]).expect("a post to a QP in ERR");
    let wc = next(&mut p.cq_b);
    seen("a receive posted to a QP in ERR", "receiver", &wc);
    assert_eq!((wc.wr_id, wc.status), (99, WcStatus::WR_FLUSH_ERR), "{wc:?}");
    common::assert_no_more(&mut p.cq_b);
}

// ---- what succeeds ----

/// A batch of 40 WRITEs (two doorbells of `post_send_iter`) all succeed
/// and land; an RC QP connected to itself by `connect_pair` SENDs to
/// itself.
#[test]
fn batches_and_a_qp_connected_to_itself_succeed() {
    let Some(mut p) = pair(&ConnectOptions::default()) else { return };
    let peer = RemoteMemory::of(&p.mb);
    let mut batch = Vec::new();
    for i in 0..40u64 {
        p.ma.write_at(i as usize * 64, &[i as u8; 64]).unwrap();
        batch.push((
            SendWr::write(i, &[], peer.at(i * 64, 64).unwrap()).signaled(),
            p.ma.sge(i as usize * 64, 64).unwrap(),
        ));
    }
    p.a.post_send_iter(batch).unwrap();
    for i in 0..40 {
        let wc = next(&mut p.cq_a);
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::SUCCESS), "{wc:?}");
    }
    let mut back = [0u8; 64];
    for i in 0..40 {
        p.mb.read_at(i * 64, &mut back).unwrap();
        assert_eq!(back, [i as u8; 64], "slot {i}");
    }

    let mut init = QpInitAttr::new(QpType::Rc, &p.cq_a);
    init.cap.max_recv_wr = 4;
    let mut me = p.pd.create_qp(&init).unwrap();
    let fresh = p.pd.create_qp(&init).unwrap();
    me.to_init(&ConnectOptions::default()).unwrap();
    me.post_recv_iter([(10, p.mb.sge(0, 64).unwrap())]).unwrap(); // in INIT, before connecting
    let (e1, e2) = me.connect_pair(&me, &ConnectOptions::default()).unwrap();
    assert_eq!((e1.qpn, e2.qpn), (me.qp_num(), me.qp_num()));
    p.ma.write_at(0, b"to myself").unwrap();
    me.post_send(&[SendWr::send(11, &[p.ma.sge(0, 9).unwrap()]).signaled()]).unwrap();
    let mut wcs = [next(&mut p.cq_a), next(&mut p.cq_a)];
    wcs.sort_by_key(|w| w.wr_id);
    assert_eq!(wcs.map(|w| (w.wr_id, w.status)), [(10, WcStatus::SUCCESS), (11, WcStatus::SUCCESS)], "{wcs:?}");
    assert_eq!(wcs[0].byte_len, 9, "the receive's length");
    let mut got = [0u8; 9];
    p.mb.read_at(0, &mut got).unwrap();
    assert_eq!(&got, b"to myself");

    let e = me.connect(&e1, &e1, &ConnectOptions::default()).unwrap_err();
    assert!(e.message().contains("RESET or INIT"), "{e}");
    let other = p.b.local_endpoint(1, &ConnectOptions::default()).unwrap();
    let e = fresh.connect(&other, &other, &ConnectOptions::default()).unwrap_err();
    assert!(e.message().contains("not this QP's"), "{e}");
}
