//! Completions as a user reaches for them (VM tier, rxe loopback):
//! `poll_one`, the draining iterator, `wait` (arm → re-poll → sleep) and `wait_any`
//! with and without a timeout, including completions that arrive before
//! the arm, and the error kinds of the control path.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use rverbs::{
    AccessFlags, CompletionQueue, ConnectOptions, CqInitAttr, ErrorKind, QpAttr, QpAttrMask, QpCap, QpInitAttr,
    QpState, QpType, QueuePair, RecvWr, SendWr, TransitionError, Wc, WcOpcode,
};

/// Two RC QPs on one device connected to each other; `b`'s CQ has a
/// completion channel.
struct Pair {
    pd: rverbs::ProtectionDomain,
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    /// iWARP: the CM ids that connected `a` and `b` ([`common::connect_pair`]).
    _cm: Vec<rverbs::cm::CmId>,
}

fn pair(depth: u32) -> Option<Pair> {
    let dev = common::first_device()?;
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let cq_a = ctx.create_cq(2 * depth).unwrap();
    let cq_b = ctx.create_cq_with(&CqInitAttr { cqe: 2 * depth, channel: Some(&ch), comp_vector: 0 }).unwrap();
    let cap = QpCap { max_send_wr: depth, max_recv_wr: depth, ..QpCap::default() };
    let qp = |cq| {
        let mut init = QpInitAttr::new(QpType::Rc, cq);
        init.cap = cap;
        pd.create_qp(&init).unwrap()
    };
    let (a, b) = (qp(&cq_a), qp(&cq_b));
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    Some(Pair { pd, cq_a, cq_b, a, b, _cm })
}

#[test]
fn poll_one_and_drain_yield_each_completion_once() {
    let Some(Pair { pd, mut cq_a, mut cq_b, mut a, mut b, _cm, .. }) = pair(8) else { return };
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..3u64 {
        b.post_recv(&[RecvWr::new(100 + i, &[mr.sge(1024 + 64 * i as usize, 64).unwrap()])]).unwrap();
    }
    let sge = [mr.sge(0, 16).unwrap()];
    // Immediate data where the device has it (iWARP has none).
    let imm = !common::is_iwarp(pd.context().device());
    let third = if imm { SendWr::send(3, &sge).imm(0xabcd) } else { SendWr::send(3, &sge) };
    a.post_send(&[SendWr::send(1, &sge).signaled(), SendWr::send(2, &sge).signaled(), third.signaled()]).unwrap();
    let sends: Vec<Wc> = common::poll_n(&mut cq_a, 3);
    assert_eq!(sends.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(cq_a.poll_one().is_none(), "each send completes once");
    // The receives, through poll_one and the iterator.
    while cq_b.drain().next().is_none() {
        std::thread::yield_now();
    }
    let mut rest: Vec<Wc> = Vec::new();
    while rest.len() < 2 {
        rest.extend(cq_b.drain());
    }
    assert_eq!(rest.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [101, 102]);
    assert_eq!((rest[1].opcode, rest[1].imm_data), (WcOpcode::RECV, if imm { 0xabcd } else { 0 }));
    assert!(rest.iter().all(|w| w.ok().is_ok()));
    assert!(cq_b.drain().next().is_none(), "nothing after the last");
}

#[test]
fn wait_sleeps_until_completions_arrive() {
    let Some(Pair { pd, cq_a, mut cq_b, mut a, mut b, _cm, .. }) = pair(64) else { return };
    let mr = pd.alloc_mr(1 << 16, AccessFlags::LOCAL_WRITE).unwrap();
    const N: u64 = 1000;
    let sge = mr.sge(0, 8).unwrap();
    let mut posted = 0u64;
    let post_recvs = |b: &mut QueuePair, posted: &mut u64, upto: u64| {
        while *posted < upto.min(N) {
            b.post_recv(&[RecvWr::new(*posted, &[mr.sge(4096 + 8 * (*posted % 64) as usize, 8).unwrap()])]).unwrap();
            *posted += 1;
        }
    };
    post_recvs(&mut b, &mut posted, 64);
    // The receives posted so far: the sender never sends more. A siw send
    // completes once TCP took it, so its own completions do not pace it,
    // and a SEND that finds no receive ends an iWARP connection (no RNR
    // retry): the receiver's credits, as an iWARP application keeps them.
    let credits = &std::sync::atomic::AtomicU64::new(posted);
    // The sender works on its own thread, a little later, so that the
    // waiter really sleeps on the channel between completions.
    std::thread::scope(|s| {
        let sender = s.spawn(move || {
            let mut cq_a = cq_a;
            std::thread::sleep(Duration::from_millis(100));
            let mut sent = 0u64;
            let mut done = 0u64;
            while done < N {
                while sent < N && sent - done < 32 && sent < credits.load(std::sync::atomic::Ordering::Acquire) {
                    a.post_send(&[SendWr::send(sent, &[sge]).signaled()]).unwrap();
                    sent += 1;
                }
                for wc in cq_a.drain() {
                    wc.ok().unwrap();
                    done += 1;
                }
                std::thread::yield_now();
            }
            (a, cq_a)
        });
        let mut seen = HashSet::new();
        let mut buf = [Wc::default(); 16];
        while (seen.len() as u64) < N {
            // Fill at most what is still due, so `wait` cannot return early.
            let due = (N as usize - seen.len()).min(buf.len());
            let n = cq_b.wait(&mut buf[..due], Some(Duration::from_secs(60))).unwrap();
            assert_eq!(n, due, "wait returned {n} of {due} completions before its timeout: a lost wakeup");
            for wc in &buf[..n] {
                let wc = wc.ok().unwrap();
                assert!(seen.insert(wc.wr_id), "receive {} completed twice", wc.wr_id);
            }
            post_recvs(&mut b, &mut posted, seen.len() as u64 + 64);
            credits.store(posted, std::sync::atomic::Ordering::Release);
        }
        let (_a, mut cq_a) = sender.join().unwrap();
        assert!(cq_a.poll_one().is_none() && cq_b.poll_one().is_none());
    });
    assert!(cq_b.events_acked() > 0, "wait slept on the channel at least once");
    // Nothing due: a timeout returns what it has (nothing), and does not hang.
    let n = cq_b.wait(&mut [Wc::default(); 1], Some(Duration::from_millis(50))).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn wait_takes_completions_that_came_before_it_armed() {
    let Some(Pair { pd, mut cq_a, mut cq_b, mut a, mut b, _cm, .. }) = pair(8) else { return };
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    b.post_recv(&[RecvWr::new(7, &[mr.sge(64, 64).unwrap()])]).unwrap();
    a.post_send(&[SendWr::send(1, &[mr.sge(0, 8).unwrap()]).signaled()]).unwrap();
    common::poll_n(&mut cq_a, 1);
    // The receive completed before anyone armed the CQ: no event will come,
    // so a wait that slept first would hang (until its timeout).
    std::thread::sleep(Duration::from_millis(50));
    let mut wc = [Wc::default(); 1];
    assert_eq!(cq_b.wait(&mut wc, Some(Duration::from_secs(30))).unwrap(), 1);
    assert_eq!(wc[0].wr_id, 7);
}

/// A test that waits in vain prints the rings it shares with the kernel
/// ([`common::stall::report`], which `poll_n` adds to its panic): on rxe
/// and siw a posted receive is there with its wr_id; on mlx5 the rings are
/// the library's memory and only the doorbell pages are listed.
#[test]
fn a_stall_report_shows_the_rings_shared_with_the_kernel() {
    let Some(Pair { pd, mut b, _cm, .. }) = pair(8) else { return };
    const WR_ID: u64 = 0x5eed_c0de_0bad_f00d;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    b.post_recv(&[RecvWr::new(WR_ID, &[mr.sge(0, 64).unwrap()])]).unwrap();
    let report = common::stall::report();
    let listed = report.lines().filter(|l| l.starts_with("-- ") && l.contains(" key ")).count();
    assert!(listed > 0, "{report}");
    if pd.context().device().driver() != rverbs::DriverId::MLX5 {
        let wr_id = common::stall::hex(&WR_ID.to_le_bytes());
        assert!(report.contains(&wr_id), "the receive's wr_id in a ring: {report}");
    }
}

#[test]
fn wait_without_a_channel_is_a_clear_error() {
    let Some(Pair { mut cq_a, _cm, .. }) = pair(4) else { return };
    let e = cq_a.wait(&mut [Wc::default(); 1], Some(Duration::from_millis(10))).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Check);
    assert!(e.to_string().contains("completion channel"), "{e}");
}

#[test]
fn errors_tell_our_checks_from_the_kernel() {
    let Some(Pair { a, pd, _cm, .. }) = pair(4) else { return };
    let dev = pd.context().device().clone();
    if common::is_iwarp(&dev) {
        // No IBTA state table on iWARP: the kernel judges. RTS by hand is
        // the kernel's EINVAL (an Os error), which the provider explains.
        let cq = pd.context().create_cq(4).unwrap();
        let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
        let e = qp.modify(&QpAttr { qp_state: QpState::Rts, ..QpAttr::default() }, QpAttrMask::STATE).unwrap_err();
        assert_eq!((e.kind(), e.errno()), (&ErrorKind::Os, Some(rverbs::Errno::EINVAL)), "{e}");
        assert!(e.to_string().contains("connection manager"), "{e}");
        return common::not_applicable(&dev, "the IBTA state table's errors (iWARP has none)");
    }
    // The state table refuses RTS -> RTR before the kernel sees it.
    let e = a.modify(&QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE).unwrap_err();
    match e.transition_error() {
        Some(TransitionError::Illegal { from: QpState::Rts, to: QpState::Rtr, .. }) => {}
        other => panic!("expected an illegal-transition error, got {other:?} ({e})"),
    }
    assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL));
    // A fresh QP: RESET -> INIT without the required bits names them.
    let cq = pd.context().create_cq(4).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let e = qp.modify(&QpAttr { qp_state: QpState::Init, ..QpAttr::default() }, QpAttrMask::STATE).unwrap_err();
    match e.kind() {
        ErrorKind::Transition(TransitionError::MissingBits { missing, .. }) => {
            assert!(missing.contains(QpAttrMask::PORT | QpAttrMask::PKEY_INDEX), "{missing}")
        }
        other => panic!("expected missing bits, got {other:?}"),
    }
    // A limit rverbs checks: kind Check, with the errno the kernel would give.
    let e = pd.context().create_cq(u32::MAX).unwrap_err();
    assert_eq!((e.kind(), e.errno()), (&ErrorKind::Check, Some(rverbs::Errno::EINVAL)));
    // A kernel refusal: kind Os (registering a range nothing is mapped at).
    // SAFETY: the kernel refuses the range (nothing is mapped at 0x1000), so
    // no region over it ever exists.
    let e = unsafe { pd.reg_mr(0x1000 as *mut u8, 4096, AccessFlags::LOCAL_WRITE) }.unwrap_err();
    assert_eq!((e.kind(), e.errno()), (&ErrorKind::Os, Some(rverbs::Errno::EFAULT)), "{e}");
}

#[test]
fn wait_any_returns_what_is_there_in_both_modes() {
    let Some(Pair { pd, mut cq_a, mut cq_b, mut a, mut b, _cm, .. }) = pair(8) else { return };
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let mut out = [Wc::default(); 8];
    // Nothing due: both modes give up at the deadline with nothing.
    assert_eq!(cq_b.wait_any(&mut out, Some(Duration::from_millis(50))).unwrap(), 0, "channel mode");
    assert_eq!(cq_a.wait_any(&mut out, Some(Duration::from_millis(50))).unwrap(), 0, "polling mode");
    for i in 0..3u64 {
        b.post_recv(&[RecvWr::new(10 + i, &[mr.sge(1024 + 64 * i as usize, 64).unwrap()])]).unwrap();
    }
    let sge = [mr.sge(0, 8).unwrap()];
    // Channel mode: the sends come later, from another thread, so the
    // waiter sleeps; it returns as soon as one receive is there, not when
    // `out` (8) is full.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            a.post_send(&[SendWr::send(1, &sge).signaled(), SendWr::send(2, &sge).signaled()]).unwrap();
        });
        let mut got = 0;
        while got < 2 {
            let n = cq_b.wait_any(&mut out, Some(Duration::from_secs(60))).unwrap();
            assert!(n >= 1, "wait_any returned nothing before its deadline: a lost wakeup");
            got += n;
        }
        assert_eq!(got, 2);
    });
    // Polling mode (no channel on cq_a): the two sends' completions.
    let mut got = 0;
    while got < 2 {
        let n = cq_a.wait_any(&mut out, Some(Duration::from_secs(60))).unwrap();
        assert!(n >= 1, "polling wait_any returned nothing before its deadline");
        assert!(out[..n].iter().all(|w| w.is_success()));
        got += n;
    }
    // An empty buffer asks for nothing and gets nothing at once.
    assert_eq!(cq_b.wait_any(&mut [], None).unwrap(), 0);
}
