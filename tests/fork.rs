//! fork() and RDMA objects (VM tier), libibverbs' `ibv_fork_init` contract:
//! memory rverbs allocates for the device is not inherited by a forked
//! child (`MADV_DONTFORK`), a child that drops the objects it inherited
//! destroys none of the parent's kernel objects, and the parent keeps
//! working on them. The first test needs no device: it runs on any host.

mod common;

use common::{loopback, poll_n, Loopback};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};
use rverbs::{AccessFlags, MemoryRegion, QpCap, QpType, RecvWr, SendFlags, SendOp, SendWr, WcStatus};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_READ);

/// Held by each test for its whole run: the harness runs tests on several
/// threads, and a child forked while the other test's thread held a lock
/// (its output capture, a `Once`, the allocator) inherits that lock held
/// forever. One host CI run hung so, the child asleep on a futex.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends a forked child at once: no exit handlers, no stdio flush (whose
/// locks another thread may have held at the fork).
fn child_exit(code: i32) -> ! {
    // SAFETY: `_exit` takes no pointers and does not return.
    unsafe { nix::libc::_exit(code) }
}

/// What `rdma resource show` says this test owns, per kind.
fn owned() -> Vec<(&'static str, usize)> {
    ["pd", "mr", "cq", "qp"].into_iter().map(|k| (k, common::resources_of(k).len())).collect()
}

/// A SEND from `ma` to `mb` and an RDMA WRITE back, bytes checked.
fn round_trip(lb: &mut Loopback, ma: &MemoryRegion, mb: &MemoryRegion, seed: u8) {
    let msg: Vec<u8> = (0..512).map(|i| (i as u8).wrapping_mul(seed)).collect();
    ma.write_at(0, &msg).unwrap();
    lb.b.post_recv(&[RecvWr { wr_id: 1, sgl: &[mb.sge(0, 4096).unwrap()] }]).unwrap();
    let s = [ma.sge(0, 512).unwrap()];
    lb.a.post_send(&[SendWr { wr_id: 2, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &s, ud: None }]).unwrap();
    let wc = poll_n(&mut lb.cq_a, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::SUCCESS), "{wc:?}");
    let wc = poll_n(&mut lb.cq_b, 1)[0];
    assert_eq!((wc.wr_id, wc.status, wc.byte_len), (1, WcStatus::SUCCESS, 512), "{wc:?}");
    let mut got = vec![0u8; 512];
    mb.read_at(0, &mut got).unwrap();
    assert_eq!(got, msg);
    // RDMA WRITE b -> a at offset 1024.
    let s = [mb.sge(0, 512).unwrap()];
    let wr = SendWr {
        wr_id: 3,
        op: SendOp::RdmaWrite(ma.remote(1024).unwrap()),
        flags: SendFlags::SIGNALED,
        sgl: &s,
        ud: None,
    };
    lb.b.post_send(&[wr]).unwrap();
    let wc = poll_n(&mut lb.cq_b, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::SUCCESS), "{wc:?}");
    ma.read_at(1024, &mut got).unwrap();
    assert_eq!(got, msg);
}

/// Whether `addr` lies in a mapping of this process (`/proc/self/maps`).
fn mapped(addr: u64) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().any(|l| {
        let range = l.split_whitespace().next().unwrap_or("");
        let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
        let parse = |h: &str| u64::from_str_radix(h, 16).unwrap_or(0);
        (parse(lo)..parse(hi)).contains(&addr)
    })
}

#[test]
fn a_child_dropping_inherited_objects_leaves_the_parents_alone() {
    let _serial = one_at_a_time();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let Some(mut lb) = loopback(QpType::Rc, cap, 16) else { return };
    let ma = lb.pd.alloc_mr(4096, ALL).unwrap();
    let mb = lb.pd.alloc_mr(4096, ALL).unwrap();
    // Caller memory too: the child gets its own copy of this (no DONTFORK).
    let mut heap = vec![0u8; 8192];
    // SAFETY: `heap` outlives the region (dropped after it at the end) and is
    // not touched while the region exists.
    let mc = unsafe { lb.pd.reg_mr(heap.as_mut_ptr(), heap.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    round_trip(&mut lb, &ma, &mb, 3);

    let before = owned();
    assert_eq!(before, [("pd", 1), ("mr", 3), ("cq", 2), ("qp", 2)], "what this test made");

    // SAFETY: the child only drops values and exits. The test
    // harness's other threads hold no lock the drops take (rverbs' locks are
    // per object and only this thread uses these objects), and the child
    // never returns into the harness.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                // Memory rverbs allocated is MADV_DONTFORK: not in the
                // child at all. Caller memory is (no madvise on it).
                if mapped(ma.addr()) || mapped(mb.addr()) {
                    return 2;
                }
                if !mapped(mc.addr()) {
                    return 3;
                }
                drop(mc);
                drop(ma);
                drop(mb);
                drop(lb);
                0
            }))
            .unwrap_or(1);
            child_exit(code);
        }
        ForkResult::Parent { child } => {
            let status = waitpid(child, None).expect("waitpid");
            let why = match status {
                WaitStatus::Exited(_, 1) => "the child's drops panicked",
                WaitStatus::Exited(_, 2) => "the child inherited memory from alloc_mr (not MADV_DONTFORK)",
                WaitStatus::Exited(_, 3) => "the child lacks the reg_mr caller memory",
                _ => "the child crashed or was killed",
            };
            assert_eq!(status, WaitStatus::Exited(child, 0), "{why}");
        }
    }

    // The kernel objects are all still the parent's...
    assert_eq!(owned(), before, "the child destroyed some of the parent's objects");
    // ...and they work: same QPs, CQs and regions.
    round_trip(&mut lb, &ma, &mb, 7);
    drop(mc);
    assert_eq!(heap, vec![0u8; 8192], "nothing wrote to the caller memory");
    drop((ma, mb, lb));
    assert_eq!(owned(), [("pd", 0), ("mr", 0), ("cq", 0), ("qp", 0)], "the parent's own drops destroy everything");
}

/// The six destroy commands, on a fd whose every command fails: `/dev/full`
/// answers ioctls with `ENOTTY` (so commands fall back to `write()`) and
/// writes with `ENOSPC`. Runs on any host, no device needed.
fn destroy_all(fd: &rverbs_providers::sys::UverbsFd) -> Vec<(&'static str, rverbs::Result<()>)> {
    use rverbs_providers::cmd;
    vec![
        ("destroy_qp", cmd::qp::destroy_qp(fd, 1).map(drop)),
        ("destroy_srq", cmd::srq::destroy_srq(fd, 1).map(drop)),
        ("destroy_cq", cmd::cq::destroy_cq(fd, 1).map(drop)),
        ("destroy_ah", cmd::ah::destroy_ah(fd, 1)),
        ("dereg_mr", cmd::mr::dereg_mr(fd, 1)),
        ("dealloc_pd", cmd::pd::dealloc_pd(fd, 1)),
    ]
}

#[test]
fn destroy_commands_are_skipped_in_a_forked_child() {
    let _serial = one_at_a_time();
    let fd = rverbs_providers::sys::UverbsFd::open(std::path::Path::new("/dev/full"), 14, None)
        .expect("/dev/full is a char device");
    assert!(!fd.in_forked_child());
    // In the opener each command reaches the fd (and fails there).
    for (verb, r) in destroy_all(&fd) {
        let e = r.expect_err(verb);
        assert_eq!(e.errno(), Some(rverbs::Errno::ENOSPC), "{verb}: {e}");
    }
    // SAFETY: the child only runs the commands above (no locks other
    // threads may hold: the fd's own state is this thread's) and exits.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = std::panic::catch_unwind(|| {
                if !fd.in_forked_child() {
                    return 2;
                }
                // Skipped: `Ok` without a syscall.
                if destroy_all(&fd).iter().all(|(_, r)| r.is_ok()) {
                    0
                } else {
                    3
                }
            })
            .unwrap_or(1);
            child_exit(code);
        }
        ForkResult::Parent { child } => {
            let status = waitpid(child, None).expect("waitpid");
            assert_eq!(status, WaitStatus::Exited(child, 0), "2: not seen as a child, 3: a destroy reached the fd");
        }
    }
}
