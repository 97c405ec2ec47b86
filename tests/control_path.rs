//! The control path against the real kernel (VM tier): every object created,
//! queried where the kernel allows it and destroyed; the QP state machine;
//! bad input with clear errors; no leaked kernel objects.

mod common;

use rverbs::{
    AccessFlags, AhAttr, ConnectOptions, Endpoint, Errno, GlobalRoute, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState,
    QpType,
};

fn open() -> Option<rverbs::Context> {
    let dev = common::first_device()?;
    Some(dev.open().unwrap_or_else(|e| panic!("open {}: {e}", dev.name())))
}

macro_rules! ctx {
    () => {
        match open() {
            Some(c) => c,
            None => return,
        }
    };
}

/// The rxe driver, whose answers where the verbs leave a choice are pinned.
fn is_rxe(ctx: &rverbs::Context) -> bool {
    ctx.device().name().starts_with("rxe")
}

/// Our own endpoint, for loopback connections.
fn local_endpoint(ctx: &rverbs::Context, qpn: u32, psn: u32) -> Endpoint {
    let idx = ctx.default_sgid_index(1).unwrap();
    let gid = ctx.query_gid(1, idx.into()).unwrap().expect("default GID exists").gid;
    Endpoint { lid: ctx.query_port(1).unwrap().lid, qpn, psn, gid, memory: None }
}

#[test]
fn pd_mr_channel_cq_lifecycle() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    // Owned memory.
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let mut mr = pd.alloc_mr(8192, access).unwrap();
    assert_eq!(mr.len(), 8192);
    assert_eq!(mr.addr() % 4096, 0, "owned MRs are page aligned");
    mr.write_at(100, b"rverbs").unwrap();
    let mut back = [0u8; 6];
    mr.read_at(100, &mut back).unwrap();
    assert_eq!(&back, b"rverbs");
    assert!(mr.write_at(8190, b"abc").is_err(), "writes past the end are refused");
    let q = mr.query().unwrap();
    assert_eq!((q.lkey, q.rkey, q.length), (mr.lkey(), mr.rkey(), 8192));
    // 6.1's rxe has no rereg_user_mr (the core answers EOPNOTSUPP); 6.12's
    // changes the access flags.
    let rereg = mr.rereg_access(AccessFlags::LOCAL_WRITE);
    match rereg {
        Ok(()) => assert_eq!(mr.access(), AccessFlags::LOCAL_WRITE),
        Err(ref e) => assert!(e.is_unsupported(), "rereg failed with something other than 'unsupported': {e}"),
    }
    if is_rxe(&ctx) {
        assert_eq!(rereg.is_ok(), common::kernel_version() >= (6, 12), "rxe rereg on this kernel: {rereg:?}");
    }
    mr.dereg().unwrap();
    // Caller memory.
    let mut buf = vec![0u8; 3 * 4096];
    // SAFETY: `buf` outlives the region (dropped at the end of this scope, after `mr2`).
    let mr2 = unsafe { pd.reg_mr(buf.as_mut_ptr().wrapping_add(10), 5000, AccessFlags::LOCAL_WRITE) }.unwrap();
    assert_eq!(mr2.addr(), buf.as_ptr() as u64 + 10);
    drop(mr2);

    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 100, channel: Some(&ch), comp_vector: 0 }).unwrap();
    assert!(cq.cqe() >= 100);
    cq.req_notify(false).unwrap();
    cq.req_notify(true).unwrap();
    assert_eq!(ch.try_get_cq_event().unwrap(), None, "no completion, no event");
    let resize = cq.resize(500);
    match resize {
        Ok(()) => assert!(cq.cqe() >= 500),
        Err(ref e) => assert!(e.is_unsupported(), "resize: {e}"),
    }
    if is_rxe(&ctx) {
        // rxe resizes (6.1 and 6.12), to a power of two of slots, one kept empty.
        assert!(resize.is_ok(), "{resize:?}");
        assert_eq!(cq.cqe(), 511);
    }
    // A second CQ on the same channel.
    let cq2 = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 10, channel: Some(&ch), comp_vector: 0 }).unwrap();
    assert_ne!(cq.user_handle(), cq2.user_handle());
    drop(ch); // the CQs keep the channel alive
    cq.destroy().unwrap();
    cq2.destroy().unwrap();
    pd.dealloc().unwrap();
    assert_eq!(ctx.get_async_event_timeout(0).unwrap(), None);
}

/// RESET -> INIT -> RTR -> RTS -> SQD -> ERR -> RESET -> INIT for each type.
fn walk(ctx: &rverbs::Context, qp_type: QpType) {
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(32).unwrap();
    let mut init = QpInitAttr::new(qp_type, &cq);
    init.cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 64 };
    if qp_type != QpType::Rc && common::is_iwarp(ctx.device()) {
        let e = pd.create_qp(&init).unwrap_err();
        assert!(e.is_unsupported(), "{qp_type:?} QP on iWARP: {e}");
        common::not_applicable(ctx.device(), &format!("no {qp_type:?} QPs on iWARP: {e}"));
        return;
    }
    let qp = pd.create_qp(&init).unwrap();
    // QP 0 and 1 are IB's special QPs; iWARP has none (siw's first is 1).
    assert!(qp.qp_num() > u32::from(!common::is_iwarp(ctx.device())));
    let cap = qp.cap();
    assert!(cap.max_send_wr >= 8 && cap.max_recv_wr >= 8 && cap.max_inline_data >= 64, "{cap:?}");
    // siw has no RESET: a new QP is IDLE (common::iwarp_idle_state).
    let new_state = if common::is_iwarp(ctx.device()) { common::iwarp_idle_state() } else { QpState::Reset };
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, new_state);

    let opts = ConnectOptions::default();
    let me = local_endpoint(ctx, qp.qp_num(), 0x123);
    qp.to_init(&opts).unwrap();
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, common::reported_state(ctx.device(), QpState::Init));
    qp.to_rtr(&me, &opts).unwrap();
    if common::is_iwarp(ctx.device()) {
        // No hand-made connection on iWARP: only the kernel's iw_cm moves a
        // QP to RTS; the kernel refuses the modify and the library says why
        // (docs/SIW.md).
        let e = qp.to_rts(0x456, &opts).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
        assert!(e.to_string().contains("connection manager"), "{e}");
        common::not_applicable(ctx.device(), "RTR -> RTS by hand (the CM connects iWARP QPs)");
        return;
    }
    let a = qp.query(QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::DEST_QPN).unwrap();
    assert_eq!(a.qp_state, QpState::Rtr);
    if qp_type != QpType::Ud {
        assert_eq!(a.dest_qp_num, qp.qp_num());
        assert_eq!(a.ah_attr.grh.map(|g| g.dgid), Some(me.gid));
    }
    qp.to_rts(0x456, &opts).unwrap();
    let a = qp.query(QpAttrMask::STATE | QpAttrMask::SQ_PSN).unwrap();
    assert_eq!((a.qp_state, a.sq_psn), (QpState::Rts, 0x456));

    // SQD where the device supports it: rxe (6.1 and 6.12) does, for every
    // QP type, and reports SQD at once (nothing to drain).
    let sqd = QpAttr { qp_state: QpState::Sqd, ..QpAttr::default() };
    match qp.modify(&sqd, QpAttrMask::STATE) {
        Ok(()) => {
            let s = qp.query(QpAttrMask::STATE).unwrap().qp_state;
            assert!(matches!(s, QpState::Sqd | QpState::Rts), "after SQD: {s}");
            if is_rxe(ctx) {
                assert_eq!(s, QpState::Sqd);
            }
        }
        Err(e) => {
            assert!(!is_rxe(ctx), "rxe moves {qp_type:?} QPs to SQD: {e}");
            assert!(e.errno().is_some(), "our validator must allow RTS->SQD: {e}");
        }
    }
    let err = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
    qp.modify(&err, QpAttrMask::STATE).unwrap();
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Err);
    let reset = QpAttr { qp_state: QpState::Reset, ..QpAttr::default() };
    qp.modify(&reset, QpAttrMask::STATE).unwrap();
    qp.to_init(&opts).unwrap();
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Init);
    // The PD is still held by the QP: deallocating it now is EBUSY, as
    // with rdma-core, and it goes with the QP.
    let busy = pd.clone().dealloc().unwrap_err();
    assert_eq!((busy.errno(), busy.kind()), (Some(rverbs::Errno::EBUSY), &rverbs::ErrorKind::Check));
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    pd.dealloc().unwrap();
}

#[test]
fn rc_state_walk() {
    let ctx = ctx!();
    walk(&ctx, QpType::Rc);
}

#[test]
fn uc_state_walk() {
    let ctx = ctx!();
    walk(&ctx, QpType::Uc);
}

#[test]
fn ud_state_walk() {
    let ctx = ctx!();
    walk(&ctx, QpType::Ud);
}

#[test]
fn srq_with_attached_qps() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 64, max_sge: 2, srq_limit: 0 }).unwrap();
    assert!(srq.max_wr() >= 64);
    srq.modify_limit(8).unwrap();
    let a = srq.query().unwrap();
    assert_eq!(a.srq_limit, 8);
    assert!(a.max_wr >= 64);
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.srq = Some(&srq);
    let qp1 = pd.create_qp(&init).unwrap();
    let qp2 = pd.create_qp(&init).unwrap();
    assert!(srq.modify_limit(srq.max_wr()).is_err(), "limit must be below the size");
    drop(qp1);
    drop(qp2);
    srq.destroy().unwrap();
}

#[test]
fn address_handle_loopback() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    if common::is_iwarp(ctx.device()) {
        let dgid = ctx.query_gid(1, 0).unwrap().expect("GID 0").gid;
        let attr = AhAttr { port_num: 1, grh: Some(GlobalRoute { dgid, ..Default::default() }), ..Default::default() };
        let e = pd.create_ah(&attr).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        return common::not_applicable(ctx.device(), &format!("no address handles on iWARP: {e}"));
    }
    let idx = ctx.default_sgid_index(1).unwrap();
    let dgid = ctx.query_gid(1, idx.into()).unwrap().unwrap().gid;
    let ah = pd
        .create_ah(&AhAttr {
            port_num: 1,
            grh: Some(GlobalRoute { dgid, sgid_index: idx, hop_limit: 64, ..Default::default() }),
            ..Default::default()
        })
        .unwrap();
    if ctx.device().name().starts_with("rxe") {
        assert!(ah.ah_num() > 0, "6.1+ rxe hands out AH numbers");
    }
    ah.destroy().unwrap();
    // RoCE without a GRH is refused before the kernel sees it.
    let e = pd.create_ah(&AhAttr { port_num: 1, ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("GRH"), "{e}");
}

#[test]
fn default_gid_is_ipv4_mapped_roce_v2() {
    let ctx = ctx!();
    if common::is_iwarp(ctx.device()) {
        let e = ctx.query_gid(1, 0).unwrap().expect("GID 0");
        assert_eq!(e.gid_type, rverbs::GidType::Ib, "{e:?}");
        return common::not_applicable(ctx.device(), "iWARP GIDs are the netdev's MAC, not RoCE");
    }
    let idx = ctx.default_sgid_index(1).unwrap();
    let e = ctx.query_gid(1, idx.into()).unwrap().unwrap();
    assert_eq!(e.gid_type, rverbs::GidType::RoceV2);
    assert!(e.gid.to_ipv4().is_some(), "{e:?}");
}

// ---- bad input: a clear error each, nothing leaked ----

#[test]
fn illegal_transition_names_the_states() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let e = qp.modify(&QpAttr { qp_state: QpState::Rts, ..QpAttr::default() }, QpAttrMask::STATE).unwrap_err();
    if common::is_iwarp(ctx.device()) {
        // No IBTA table on iWARP: the kernel refuses RTS by hand (the
        // provider says why), and the QP stays where it was (new, IDLE:
        // common::iwarp_idle_state).
        assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, common::iwarp_idle_state(), "{e}");
        assert!(e.to_string().contains("connection manager"), "{e}");
        return common::not_applicable(ctx.device(), &format!("no IBTA state table on iWARP; the kernel said {e}"));
    }
    let s = e.to_string();
    assert!(s.contains("RESET") && s.contains("RTS"), "{s}");
    assert_eq!(e.errno(), Some(Errno::EINVAL));
    // The QP is untouched.
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, QpState::Reset);
}

#[test]
fn missing_mask_bits_are_named() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    if common::is_iwarp(ctx.device()) {
        // iWARP QPs take STATE and ACCESS alone (no IBTA mask table), and no UD.
        let e = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq)).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        return common::not_applicable(ctx.device(), "no IBTA attribute masks (STATE and ACCESS only), no UD");
    }
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    qp.to_init(&ConnectOptions::default()).unwrap();
    let a = QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() };
    let e = qp.modify(&a, QpAttrMask::STATE | QpAttrMask::PATH_MTU).unwrap_err();
    let s = e.to_string();
    for bit in ["AV", "DEST_QPN", "RQ_PSN", "MAX_DEST_RD_ATOMIC", "MIN_RNR_TIMER"] {
        assert!(s.contains(bit), "{bit} missing from: {s}");
    }
    // An attribute UD does not take at RESET->INIT.
    let ud = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq)).unwrap();
    let a = QpAttr { qp_state: QpState::Init, port_num: 1, qkey: 1, ..QpAttr::default() };
    let mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY | QpAttrMask::AV;
    let e = ud.modify(&a, mask).unwrap_err();
    assert!(e.to_string().contains("does not allow"), "{e}");
}

#[test]
fn caps_above_device_limits() {
    let ctx = ctx!();
    let dev = ctx.query_device().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap.max_send_wr = dev.max_qp_wr + 1;
    let e = pd.create_qp(&init).unwrap_err();
    assert!(e.to_string().contains("max_send_wr"), "{e}");
    init.cap.max_send_wr = 4;
    init.cap.max_recv_sge = dev.max_sge + 1;
    let e = pd.create_qp(&init).unwrap_err();
    assert!(e.to_string().contains("max_recv_sge"), "{e}");

    let e = ctx.create_cq(dev.max_cqe + 1).unwrap_err();
    assert!(e.to_string().contains("max_cqe"), "{e}");
    let e = ctx.create_cq(0).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EINVAL));
    let e = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 8, channel: None, comp_vector: 10_000 }).unwrap_err();
    assert!(e.to_string().contains("completion vector"), "{e}");
}

/// On a context's first QP, before anything asked the device, the kernel
/// (or the provider) checks the caps, as with rdma-core (no
/// `QUERY_DEVICE`), and its refusal reads as the library's check.
#[test]
fn caps_above_device_limits_on_a_fresh_context() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap.max_send_wr = 1 << 30;
    let e = pd.create_qp(&init).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
    assert!(e.to_string().contains("max_send_wr 1073741824 is above the device's limit"), "{e}");
}

#[test]
fn bad_memory_registrations() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let e = pd.alloc_mr(0, AccessFlags::LOCAL_WRITE).unwrap_err();
    assert!(e.to_string().contains("length 0"), "{e}");
    let e = pd.alloc_mr(4096, AccessFlags::REMOTE_WRITE).unwrap_err();
    assert!(e.to_string().contains("LOCAL_WRITE"), "{e}");
    let e = pd.alloc_mr(4096, AccessFlags::REMOTE_ATOMIC).unwrap_err();
    assert!(e.to_string().contains("LOCAL_WRITE"), "{e}");
    // An address range that is not mapped: the kernel cannot pin it.
    // SAFETY: the registration is expected to fail; if it did not, the region
    // would never be touched by us or the device (no work requests).
    let r = unsafe { pd.reg_mr(0x1000 as *mut u8, 4096, AccessFlags::LOCAL_WRITE) };
    let e = r.unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EFAULT), "{e}");
    assert!(e.to_string().contains("not mapped"), "{e}");
}

#[test]
fn gid_index_that_does_not_exist() {
    let ctx = ctx!();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let opts = ConnectOptions { sgid_index: Some(200), ..ConnectOptions::default() };
    qp.to_init(&opts).unwrap();
    let me = local_endpoint(&ctx, qp.qp_num(), 1);
    let e = qp.to_rtr(&me, &opts).unwrap_err();
    assert!(e.to_string().contains("GID index 200 does not exist"), "{e}");
    assert_eq!(qp.query(QpAttrMask::STATE).unwrap().qp_state, common::reported_state(ctx.device(), QpState::Init));
}

/// Counts of kernel objects from iproute2's `rdma resource show`, e.g.
/// `0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0`.
fn resource_counts(dev: &str) -> Vec<(String, u64)> {
    let out = common::run("/usr/bin/rdma", &["resource", "show"]);
    assert!(out.status.success(), "rdma resource show: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.contains(&format!(" {dev}:"))).unwrap_or_else(|| panic!("{dev} not in {text}"));
    let words: Vec<&str> = line.split_whitespace().skip(2).collect();
    words.chunks(2).filter_map(|c| Some((c[0].to_owned(), c.get(1)?.parse().ok()?))).collect()
}

#[test]
fn no_leaks_over_many_create_destroy_cycles() {
    let ctx = ctx!();
    let name = ctx.device().name().to_owned();
    let cycles: usize = std::env::var("RVERBS_LEAK_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let before = resource_counts(&name);
    for i in 0..cycles {
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let cq = ctx.create_cq(4).unwrap();
        // RC and UD in turn; RC only on iWARP (no UD there).
        let ud = i % 2 == 1 && !common::is_iwarp(ctx.device());
        let qp = pd.create_qp(&QpInitAttr::new(if ud { QpType::Ud } else { QpType::Rc }, &cq)).unwrap();
        // Drop order on purpose mixed: children keep parents alive.
        drop(pd);
        drop(cq);
        drop(mr);
        drop(qp);
    }
    // Bad input does not leak either.
    for _ in 0..100 {
        let pd = ctx.alloc_pd().unwrap();
        let _ = pd.alloc_mr(0, AccessFlags::LOCAL_WRITE);
        let _ = ctx.create_cq(u32::MAX);
    }
    let after = resource_counts(&name);
    assert_eq!(before, after, "kernel object counts changed after {cycles} cycles");
}

/// Re-runs the lifecycle test under strace: the control path is ioctl on
/// the uverbs fd, never write().
#[test]
fn control_path_is_ioctl_only() {
    let Some(dev) = common::first_device() else { return };
    if std::env::var("RVERBS_UNDER_STRACE").is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let log = std::env::temp_dir().join(format!("rverbs-cp-strace-{}", std::process::id()));
    let out = std::process::Command::new("strace")
        .args(["-f", "-y", "-e", "trace=openat,ioctl,write,mmap,close", "-o"])
        .arg(&log)
        .arg(&exe)
        .args(["--exact", "pd_mr_channel_cq_lifecycle", "--test-threads=1"])
        .env("RVERBS_UNDER_STRACE", "1")
        .output()
        .expect("strace must be installed in the VM");
    assert!(out.status.success(), "traced run failed: {}", String::from_utf8_lossy(&out.stdout));
    let trace = std::fs::read_to_string(&log).unwrap();
    let node = format!("<{}>", dev.dev_path().display());
    let on_node: Vec<&str> = trace.lines().filter(|l| l.contains(&node)).collect();
    let ioctls = on_node.iter().filter(|l| l.contains("ioctl(")).count();
    assert!(ioctls > 10, "expected the control path's ioctls on {node}:\n{trace}");
    for l in &on_node {
        let allowed = ["ioctl(", "openat(", "mmap(", "close("];
        assert!(allowed.iter().any(|a| l.contains(a)), "unexpected syscall on {node}: {l}");
        if l.contains("ioctl(") {
            assert!(l.contains("RDMA_VERBS_IOCTL") || l.contains("0x1b, 0x1, 0x18") || l.contains("0xc0181b01"), "{l}");
        }
    }
    let _ = std::fs::remove_file(&log);
}
