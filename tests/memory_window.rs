//! Memory windows on rxe (VM tier; n/a on siw, which has none): type 1 windows bound with
//! `QueuePair::bind_mw` and unbound by a zero-length bind; type 2 windows
//! bound by a `BIND_MW` request and revoked by a local invalidation, by the
//! peer's SEND_WITH_INV, and by deallocation. Each time the peer's RDMA
//! WRITE through the window lands while it is bound and fails with
//! `REM_ACCESS_ERR` once it is not (what pyverbs' `MWTest` checks), and the
//! window's own checks refuse what the kernel would (EINVAL) before posting.
//!
//! QP `a` writes into region `target` of QP `b`'s side through `b`'s window;
//! a refused write puts the QPs in error, so each case has a pair of its own.

mod common;

use common::{loopback, poll_n, Loopback};
use rverbs::{
    AccessFlags, MemoryRegion, MemoryWindow, MwType, PostErrorKind, QpCap, QpType, RecvWr, RemoteAddr, SendFlags,
    SendWr, WcFlags, WcOpcode, WcStatus,
};

/// The region windows bind to: remote access only through a window.
const TARGET: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::MW_BIND);
const WINDOW: usize = 256;

struct Case {
    lb: Loopback,
    /// `a`'s source buffer.
    src: MemoryRegion,
    /// `b`'s region the window opens.
    target: MemoryRegion,
}

/// A connected pair with its regions; `None` where the test does not run:
/// no device (and none required), or an iWARP device, which has no memory
/// windows (checked: the kernel refuses ALLOC_MW).
fn case() -> Option<Case> {
    let dev = common::first_device()?;
    if common::is_iwarp(&dev) {
        let pd = dev.open().unwrap().alloc_pd().unwrap();
        let e = pd.alloc_mw(MwType::Type2).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        common::not_applicable(&dev, &format!("no memory windows on iWARP: {e}"));
        return None;
    }
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let lb = loopback(QpType::Rc, cap, 32)?;
    let src = lb.pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let target = lb.pd.alloc_mr(4096, TARGET).unwrap();
    Some(Case { lb, src, target })
}

impl Case {
    /// `a` writes 64 bytes of `fill` at `offset` of the window with `rkey`;
    /// returns the write's completion status.
    fn write_through(&mut self, rkey: u32, offset: usize, fill: u8) -> WcStatus {
        self.src.write_at(0, &[fill; 64]).unwrap();
        let sgl = [self.src.sge(0, 64).unwrap()];
        let remote = RemoteAddr { addr: self.target.addr() + offset as u64, rkey };
        self.lb.a.post_send(&[SendWr::write(7, &sgl, remote).signaled()]).unwrap();
        let wc = poll_n(&mut self.lb.cq_a, 1)[0];
        assert_eq!(wc.wr_id, 7);
        wc.status
    }

    /// Asserts a write lands and is visible in the region.
    fn assert_writable(&mut self, rkey: u32, fill: u8) {
        assert_eq!(self.write_through(rkey, 64, fill), WcStatus::SUCCESS, "a write through the bound window");
        let mut got = [0u8; 64];
        self.target.read_at(64, &mut got).unwrap();
        assert_eq!(got, [fill; 64]);
    }

    /// Asserts a write is refused by the responder and the region unchanged.
    fn assert_refused(&mut self, rkey: u32) {
        let mut before = [0u8; 64];
        self.target.read_at(64, &mut before).unwrap();
        assert_eq!(self.write_through(rkey, 64, 0xee), WcStatus::REM_ACCESS_ERR, "a write through a dead window");
        let mut after = [0u8; 64];
        self.target.read_at(64, &mut after).unwrap();
        assert_eq!(before, after, "the refused write changed the region");
    }

    /// `b` posts `wr` and its completion must be a success of `opcode`.
    fn b_completes(&mut self, wr: SendWr<'_>, opcode: WcOpcode) {
        self.lb.b.post_send(&[wr]).unwrap();
        let wc = poll_n(&mut self.lb.cq_b, 1)[0];
        assert_eq!((wc.status, wc.opcode, wc.wr_id), (WcStatus::SUCCESS, opcode, wr.wr_id), "{wc:?}");
    }

    /// A type 2 window of `b`, bound to the first [`WINDOW`] bytes for
    /// remote writes; returns it and the key the bind gave it.
    fn bound_type2(&mut self) -> (MemoryWindow, u32) {
        let mw = self.lb.pd.alloc_mw(MwType::Type2).unwrap();
        let bind = mw.bind_info(&self.target, 0, WINDOW, AccessFlags::REMOTE_WRITE).unwrap();
        self.b_completes(SendWr::bind_mw(3, bind).signaled(), WcOpcode::BIND_MW);
        assert_eq!(mw.rkey(), bind.mw_rkey, "a posted type 2 bind leaves the window's recorded key");
        (mw, bind.new_rkey)
    }
}

#[test]
fn type1_bind_write_then_unbind() {
    let Some(mut c) = case() else { return };
    let mw = c.lb.pd.alloc_mw(MwType::Type1).unwrap();
    assert_eq!(mw.mw_type(), MwType::Type1);
    // Before any bind the window grants nothing.
    let first = mw.rkey();
    let bind = mw.bind_info(&c.target, 0, WINDOW, AccessFlags::REMOTE_WRITE).unwrap();
    let key = c.lb.b.bind_mw(&mw, 1, bind, SendFlags::SIGNALED).unwrap();
    assert_eq!((key, mw.rkey()), (rverbs::inc_rkey(first), key), "bind_mw gives the window its next key");
    let wc = poll_n(&mut c.lb.cq_b, 1)[0];
    assert_eq!((wc.status, wc.opcode, wc.wr_id), (WcStatus::SUCCESS, WcOpcode::BIND_MW, 1), "{wc:?}");
    c.assert_writable(key, 0x5a);
    c.assert_writable(key, 0xa5);
    // A zero-length bind unbinds (pyverbs' invalidate_mw_type1): the old key is dead.
    let unbind = mw.bind_info(&c.target, 0, 0, AccessFlags::empty()).unwrap();
    let next = c.lb.b.bind_mw(&mw, 2, unbind, SendFlags::SIGNALED).unwrap();
    assert_ne!(next, key);
    let wc = poll_n(&mut c.lb.cq_b, 1)[0];
    assert_eq!((wc.status, wc.opcode), (WcStatus::SUCCESS, WcOpcode::BIND_MW), "{wc:?}");
    c.assert_refused(key);
    mw.dealloc().unwrap();
}

#[test]
fn type2_bind_write_then_local_invalidate() {
    let Some(mut c) = case() else { return };
    let (_mw, key) = c.bound_type2();
    c.assert_writable(key, 0x11);
    c.b_completes(SendWr::local_inv(4, key).signaled(), WcOpcode::LOCAL_INV);
    c.assert_refused(key);
}

#[test]
fn type2_remote_invalidate_by_send_with_inv() {
    let Some(mut c) = case() else { return };
    let (_mw, key) = c.bound_type2();
    c.assert_writable(key, 0x22);
    // `b` receives a SEND_WITH_INV of its window's key from `a`.
    let rbuf = c.lb.pd.alloc_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    c.lb.b.post_recv(&[RecvWr::new(9, &[rbuf.sge(0, 64).unwrap()])]).unwrap();
    c.src.write_at(0, b"invalidate").unwrap();
    let sgl = [c.src.sge(0, 10).unwrap()];
    c.lb.a.post_send(&[SendWr::send_inv(8, &sgl, key).signaled()]).unwrap();
    let s = poll_n(&mut c.lb.cq_a, 1)[0];
    assert_eq!((s.status, s.opcode), (WcStatus::SUCCESS, WcOpcode::SEND), "{s:?}");
    let r = poll_n(&mut c.lb.cq_b, 1)[0];
    assert_eq!((r.status, r.opcode, r.byte_len), (WcStatus::SUCCESS, WcOpcode::RECV, 10), "{r:?}");
    assert!(r.wc_flags.contains(WcFlags::WITH_INV), "{r:?}");
    assert_eq!(r.imm_data, key, "the invalidated rkey, in host order");
    c.assert_refused(key);
}

#[test]
fn type2_dealloc_revokes() {
    let Some(mut c) = case() else { return };
    let (mw, key) = c.bound_type2();
    c.assert_writable(key, 0x33);
    mw.dealloc().unwrap();
    c.assert_refused(key);
}

/// A type 2 window bound twice without an invalidation in between: the
/// kernel refuses the second bind (the window is not free) and the request
/// completes once, with an error: `MW_BIND_ERR`, or `WR_FLUSH_ERR` where the
/// kernel moves the QP to error before completing it (6.12's rxe does).
#[test]
fn type2_second_bind_completes_once_with_an_error() {
    let Some(mut c) = case() else { return };
    let (mw, key) = c.bound_type2();
    let fresh = mw.bind_info(&c.target, 0, 64, AccessFlags::REMOTE_WRITE).unwrap();
    let again = rverbs::MwBind { mw_rkey: key, new_rkey: rverbs::inc_rkey(key), ..fresh };
    c.lb.b.post_send(&[SendWr::bind_mw(5, again).signaled()]).unwrap();
    let wc = poll_n(&mut c.lb.cq_b, 1)[0];
    assert_eq!(wc.wr_id, 5);
    assert!(matches!(wc.status, WcStatus::MW_BIND_ERR | WcStatus::WR_FLUSH_ERR), "{wc:?}");
    common::assert_no_more(&mut c.lb.cq_b);
}

#[test]
fn bad_binds_are_refused_before_the_kernel() {
    let Some(c) = case() else { return };
    let mw = c.lb.pd.alloc_mw(MwType::Type2).unwrap();
    let einval = |r: rverbs::Result<rverbs::MwBind>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.errno(), Some(rverbs::Errno::EINVAL), "{what}: {e}");
        assert!(e.to_string().contains("ibv_bind_mw"), "{what}: {e}");
    };
    einval(mw.bind_info(&c.target, 4000, 200, AccessFlags::REMOTE_WRITE), "a range past the region");
    einval(mw.bind_info(&c.target, usize::MAX, 2, AccessFlags::REMOTE_WRITE), "an overflowing range");
    einval(mw.bind_info(&c.src, 0, 64, AccessFlags::REMOTE_WRITE), "a region without MW_BIND");
    einval(mw.bind_info(&c.target, 0, 64, AccessFlags::REMOTE_WRITE | AccessFlags::ZERO_BASED), "ZERO_BASED");
    einval(mw.bind_info(&c.target, 0, 64, AccessFlags::LOCAL_WRITE), "a local right");
    let other_pd = c.lb.ctx.alloc_pd().unwrap();
    let foreign = other_pd.alloc_mr(4096, TARGET).unwrap();
    einval(mw.bind_info(&foreign, 0, 64, AccessFlags::REMOTE_WRITE), "a region of another PD");
    // Local operations carry no data: refused at post time, nothing posted.
    let bind = mw.bind_info(&c.target, 0, 64, AccessFlags::REMOTE_WRITE).unwrap();
    let sgl = [c.target.sge(0, 8).unwrap()];
    let mut b = c.lb.b;
    for wr in [SendWr { sgl: &sgl, ..SendWr::bind_mw(1, bind) }, SendWr { sgl: &sgl, ..SendWr::local_inv(2, 1) }] {
        assert_eq!(b.post_send(&[wr]).unwrap_err().kind, PostErrorKind::BadLocalOp);
    }
    let mut cq_b = c.lb.cq_b;
    common::assert_no_more(&mut cq_b);
}
