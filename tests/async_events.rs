//! Async events from the real kernel (VM tier): the SRQ limit event names
//! the SRQ, a CQ overrun names the CQ, SQ drained names the QP by number
//! and handle, port events name the port.

mod common;

use rverbs::{
    AccessFlags, AsyncEventType, ConnectOptions, EventObject, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendFlags, SendOp, SendWr, WcStatus,
};

/// Two connected RC QPs; `b` takes its receives from a 16-entry SRQ that
/// holds 8 of them.
struct SrqPair {
    ctx: rverbs::Context,
    cq_a: rverbs::CompletionQueue,
    cq_b: rverbs::CompletionQueue,
    srq: rverbs::SharedReceiveQueue,
    a: rverbs::QueuePair,
    b: rverbs::QueuePair,
    m: rverbs::MemoryRegion,
    /// iWARP: the CM ids that connected `a` and `b`.
    _cm: Vec<rverbs::cm::CmId>,
}

impl SrqPair {
    fn new() -> Option<SrqPair> {
        let ctx = common::first_device()?.open().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq_a = ctx.create_cq(64).unwrap();
        let cq_b = ctx.create_cq(64).unwrap();
        let mut srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }).unwrap();
        let mut init = QpInitAttr::new(QpType::Rc, &cq_b);
        init.srq = Some(&srq);
        let b = pd.create_qp(&init).unwrap();
        let a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
        let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
        let m = pd.alloc_mr(16 * 64, AccessFlags::LOCAL_WRITE).unwrap();
        for i in 0..8 {
            srq.post_recv(&[RecvWr { wr_id: i, sgl: &[m.sge(i as usize * 64, 64).unwrap()] }]).unwrap();
        }
        Some(SrqPair { ctx, cq_a, cq_b, srq, a, b, m, _cm })
    }

    /// Three SENDs from `a` into the SRQ (5 receives left), completed on
    /// both sides; then the SRQ limit event, which must come.
    fn three_sends_raise_the_limit_event(&mut self) -> rverbs::AsyncEvent {
        assert_eq!(self.ctx.get_async_event_timeout(0).unwrap(), None, "nothing yet");
        let s = [self.m.sge(0, 8).unwrap()];
        for i in 0..3 {
            let wr = SendWr { wr_id: i, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &s, ud: None };
            self.a.post_send(&[wr]).unwrap();
        }
        common::poll_n(&mut self.cq_a, 3);
        common::poll_n(&mut self.cq_b, 3);
        let ev = self.ctx.get_async_event_timeout(10_000).unwrap().expect("SRQ limit event");
        assert_eq!(ev.event_type, AsyncEventType::SrqLimitReached, "{ev:?}");
        ev
    }
}

/// What QUERY_SRQ says of a limit `armed` after its event fired: 0 (the
/// IBTA's one-shot), or on iWARP (siw) the limit as it was armed.
fn fired_limit(ctx: &rverbs::Context, armed: u32) -> u32 {
    if common::is_iwarp(ctx.device()) {
        armed
    } else {
        0
    }
}

#[test]
fn srq_limit_reached_names_the_srq() {
    let Some(mut p) = SrqPair::new() else { return };
    // Arm: fire when fewer than 6 receives remain.
    p.srq.modify_limit(6).unwrap();
    let ev = p.three_sends_raise_the_limit_event();
    assert_eq!(ev.object, EventObject::Srq { user_handle: p.srq.user_handle() });
    // One-shot: disarmed after firing, which query shows as limit 0; siw
    // keeps reporting the limit it was given (siw_query_srq).
    assert_eq!(p.srq.query().unwrap().srq_limit, fired_limit(&p.ctx, 6));
}

/// `SrqControl`: another thread arms the limit (the event then fires on
/// the posts of this one) and queries it; `destroy` answers EBUSY while a
/// clone lives, and the clone still reaches the kernel SRQ after it.
#[test]
fn srq_control_arms_the_limit_from_another_thread() {
    let Some(mut p) = SrqPair::new() else { return };
    let control = p.srq.control().clone();
    let armed = std::thread::spawn(move || {
        control.modify_limit(6).unwrap();
        assert!(control.modify_limit(control.max_wr()).is_err(), "limit must be below the size");
        let limit = control.query().unwrap().srq_limit;
        (control, limit)
    });
    let (control, limit) = armed.join().unwrap();
    assert_eq!(limit, 6, "the other thread's limit");
    let ev = p.three_sends_raise_the_limit_event();
    assert_eq!(ev.object, EventObject::Srq { user_handle: control.user_handle() });
    let SrqPair { srq, a, b, .. } = p;
    drop((a, b));
    let e = srq.destroy().expect_err("a live SrqControl holds the SRQ");
    assert_eq!(e.errno(), Some(rverbs::Errno::EBUSY), "{e}");
    let limit = fired_limit(&p.ctx, 6);
    assert_eq!(control.query().unwrap().srq_limit, limit, "fired and disarmed; the kernel SRQ is still there");
}

/// More completions than the CQ holds, none polled: rxe (6.1 and 6.12)
/// keeps the first `cqe` completions, drops the others, and raises
/// IB_EVENT_CQ_ERR on the CQ for each one dropped; the QP stays in RTS. The
/// dropped requests never complete: a CQ overrun is the one case where
/// "every request completes exactly once" cannot hold, which is why the
/// verbs make it a fatal, reported error.
#[test]
fn cq_overrun_raises_a_cq_error_event() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut small = ctx.create_cq(2).unwrap();
    let other = ctx.create_cq(16).unwrap();
    let n = small.cqe() as usize;
    let extra = 4;
    let mut init = QpInitAttr::new(QpType::Rc, &small);
    init.cap = QpCap { max_send_wr: (n + extra) as u32, ..QpCap::default() };
    let mut a = pd.create_qp(&init).unwrap();
    let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &other)).unwrap();
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    let m = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let s = [m.sge(0, 8).unwrap()];
    let remote = m.remote(1024).unwrap();
    let wrs: Vec<SendWr> = (0..(n + extra) as u64)
        .map(|i| SendWr { wr_id: i, op: SendOp::RdmaWrite(remote), flags: SendFlags::SIGNALED, sgl: &s, ud: None })
        .collect();
    a.post_send(&wrs).unwrap();
    let mut events = 0;
    while let Some(ev) = ctx.get_async_event_timeout(if events == 0 { 10_000 } else { 1_000 }).unwrap() {
        assert_eq!(ev.event_type, AsyncEventType::CqErr, "{ev:?}");
        assert_eq!(ev.object, EventObject::Cq { user_handle: small.user_handle() });
        events += 1;
    }
    assert_eq!(events, extra, "one CQ error per dropped completion");
    let wcs = common::poll_n(&mut small, n);
    assert!(wcs.iter().all(|w| w.status == WcStatus::SUCCESS), "{wcs:?}");
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (0..n as u64).collect::<Vec<_>>());
    common::assert_no_more(&mut small);
    assert_eq!(a.query(QpAttrMask::STATE).unwrap().qp_state, common::reported_state(&dev, QpState::Rts));
}

/// RTS -> SQD of a UD QP with nothing outstanding: rxe's requester finds
/// the send queue drained and raises SQ drained (6.1 and 6.12), which names
/// the QP by its number and handle. The QP takes the slot of one destroyed
/// before it, under the slot's next generation: a handle of its own.
#[test]
fn sq_drained_names_the_qp_by_number_and_handle() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    if common::is_iwarp(&dev) {
        common::not_applicable(&dev, "no UD QPs on iWARP");
        return;
    }
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let init = QpInitAttr::new(QpType::Ud, &cq);
    let gone = pd.create_qp(&init).unwrap();
    let gone_handle = gone.user_handle();
    gone.destroy().unwrap();
    let qp = pd.create_qp(&init).unwrap();
    assert_ne!(qp.user_handle(), gone_handle);
    let opts = ConnectOptions::default();
    let me = qp.local_endpoint(1, &opts).unwrap();
    qp.to_init(&opts).unwrap();
    qp.to_rtr(&me, &opts).unwrap();
    qp.to_rts(1, &opts).unwrap();
    assert_eq!(ctx.get_async_event_timeout(0).unwrap(), None, "nothing yet");
    let sqd = rverbs::QpAttr { qp_state: QpState::Sqd, ..rverbs::QpAttr::default() };
    qp.modify(&sqd, QpAttrMask::STATE).unwrap();
    let ev = ctx.get_async_event_timeout(10_000).unwrap().expect("SQ drained event");
    assert_eq!(ev.event_type, AsyncEventType::SqDrained, "{ev:?}");
    assert_eq!(ev.object, EventObject::Qp { qp_num: qp.qp_num(), user_handle: qp.user_handle() });
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    pd.dealloc().unwrap();
}

fn ip(args: &[&str]) {
    let out = common::run("/usr/bin/ip", args);
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn port_state(dev: &rverbs::Device) -> String {
    common::sysfs(dev.sysfs_path().join("ports/1/state"))
}

#[test]
fn port_events_name_the_port() {
    let Some(dev) = common::first_device() else { return };
    let Some(netdev) = common::netdev_of(&dev) else {
        assert!(
            !common::device_required() || !(dev.name().starts_with("rxe") || common::is_iwarp(&dev)),
            "rxe and siw have a netdev"
        );
        return;
    };
    let ctx = dev.open().unwrap();
    ip(&["link", "set", &netdev, "down"]);
    let ev = ctx.get_async_event_timeout(10_000).unwrap().expect("port error event");
    ip(&["link", "set", &netdev, "up"]);
    assert_eq!((ev.event_type, ev.object), (AsyncEventType::PortErr, EventObject::Port(1)), "{ev:?}");
    // Back up: PORT_ACTIVE (GID changes may come first).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now()).as_millis() as i32;
        let ev = ctx.get_async_event_timeout(left).unwrap().expect("port active event");
        if ev.event_type == AsyncEventType::PortActive {
            assert_eq!(ev.object, EventObject::Port(1));
            break;
        }
        assert!(matches!(ev.event_type, AsyncEventType::GidChange), "unexpected {ev:?}");
    }
    for _ in 0..100 {
        if port_state(&dev).contains("ACTIVE") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(port_state(&dev).contains("ACTIVE"), "port stays down: {}", port_state(&dev));
}
