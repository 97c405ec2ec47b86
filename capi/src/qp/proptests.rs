//! Property tests of what a C caller hands `ibv_post_send` and
//! `ibv_post_recv` (issue 32, hostile bytes), without a device: the seams
//! are the pure functions of the C structs. `translate` (a request as
//! rverbs' `SendWr`) over any opcode, flags, `num_sge` (negative, zero,
//! up to and past the 32 the library takes, huge), `sg_list` NULL where C
//! allows a pointer, immediate and union words, for RC and UD QPs;
//! `sgl` alone; and `post_recv_list` over linked lists of such requests,
//! with `bad_wr` given or NULL and the queue refusing any request. Each
//! gives a value or an errno with `*bad_wr` at the first request not
//! posted, never a panic or a read past what `num_sge` promised.

use core::ffi::c_int;
use core::ptr;

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

#[path = "../../../src/proptest_config.rs"]
mod proptest_config;
use proptest_config::config;

/// `IBV_ACCESS_ZERO_BASED`, which a window bind refuses.
const ZERO_BASED: u32 = 0x20;

/// Any `num_sge`: the interesting small ones, the limit, negatives, huge.
fn num_sge() -> impl Strategy<Value = c_int> {
    prop_oneof![
        4 => 0..=(MAX_SGE as c_int),
        1 => Just(MAX_SGE as c_int + 1),
        1 => Just(-1),
        1 => Just(c_int::MIN),
        1 => Just(c_int::MAX),
        1 => any::<c_int>(),
    ]
}

/// A request's raw fields (the pointers are filled in by the test).
#[derive(Clone, Debug)]
struct RawSend {
    wr_id: u64,
    opcode: u32,
    send_flags: u32,
    imm_data: u32,
    wr: [u64; 4],
    num_sge: c_int,
    null_sg_list: bool,
    bind: [u64; 6],
    /// BIND_MW: whether `bind_mw.mw` / `bind_info.mr` point at objects.
    mw: bool,
    mr: bool,
}

fn raw_send() -> impl Strategy<Value = RawSend> {
    let opcode = prop_oneof![4 => 0u32..11, 1 => any::<u32>()];
    let flags = prop_oneof![0u32..32, any::<u32>()];
    (
        (any::<u64>(), opcode, flags, any::<u32>(), any::<[u64; 4]>()),
        (num_sge(), prop::bool::weighted(0.2), any::<[u64; 6]>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(|((wr_id, opcode, send_flags, imm_data, wr), (num_sge, null_sg_list, bind, mw, mr))| RawSend {
            wr_id,
            opcode,
            send_flags,
            imm_data,
            wr,
            num_sge,
            null_sg_list,
            bind,
            mw,
            mr,
        })
}

/// The caller's memory: an SGE array that holds every entry the library
/// may read (`MAX_SGE`), a memory window and a memory region.
struct Mem {
    sges: [ibv_sge; MAX_SGE],
    mw: ibv_mw,
    mr: ibv_mr,
}

impl Mem {
    fn new(seed: u32) -> Box<Mem> {
        let sge = |i: u32| ibv_sge { addr: u64::from(i) << 12, length: seed ^ i, lkey: seed.rotate_left(i) };
        Box::new(Mem {
            sges: core::array::from_fn(|i| sge(i as u32)),
            mw: ibv_mw { context: ptr::null_mut(), pd: ptr::null_mut(), rkey: seed, handle: 1, mw_type: 1 },
            mr: ibv_mr {
                context: ptr::null_mut(),
                pd: ptr::null_mut(),
                addr: ptr::null_mut(),
                length: 4096,
                handle: 2,
                lkey: !seed,
                rkey: seed,
            },
        })
    }
}

fn send_wr(r: &RawSend, m: &mut Mem) -> ibv_send_wr {
    let mut bind = r.bind;
    // BIND_MW's pointers are live objects or NULL (the C contract).
    bind[0] = if r.mw { ptr::addr_of!(m.mw) as u64 } else { 0 };
    bind[2] = if r.mr { ptr::addr_of!(m.mr) as u64 } else { 0 };
    ibv_send_wr {
        wr_id: r.wr_id,
        next: ptr::null_mut(),
        sg_list: if r.null_sg_list { ptr::null_mut() } else { m.sges.as_mut_ptr() },
        num_sge: r.num_sge,
        opcode: r.opcode,
        send_flags: r.send_flags,
        imm_data: r.imm_data,
        wr: r.wr,
        qp_type: 0,
        bind_mw: bind,
    }
}

/// What `sgl` must answer for (`sg_list` NULL?, `num_sge`).
fn sgl_ok(null: bool, n: c_int) -> bool {
    (0..=MAX_SGE as c_int).contains(&n) && (n == 0 || !null)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sg_lists_are_taken_in_place_or_refused(n in num_sge(), null in prop::bool::weighted(0.3), seed in any::<u32>()) {
        let mut m = Mem::new(seed);
        let list = if null { ptr::null() } else { m.sges.as_mut_ptr().cast_const() };
        // SAFETY: `list` is NULL or holds MAX_SGE entries, all `sgl` may read.
        let got = unsafe { sgl(list, n) };
        prop_assert_eq!(got.is_some(), sgl_ok(null, n));
        if let Some(s) = got {
            prop_assert_eq!(s.len(), n as usize);
            for (a, b) in s.iter().zip(&m.sges) {
                prop_assert_eq!((a.addr, a.length, a.lkey), (b.addr, b.length, b.lkey));
            }
        }
    }

    #[test]
    fn send_requests_translate_or_fail_with_einval(r in raw_send(), ud_qp in any::<bool>(), seed in any::<u32>()) {
        let mut m = Mem::new(seed);
        let mut w = send_wr(&r, &mut m);
        if ud_qp {
            // `wr.ud.ah`: NULL (a live AH needs a device), refused.
            w.wr[0] = 0;
        }
        // SAFETY: `sg_list` is NULL or holds MAX_SGE entries; BIND_MW's
        // pointers are live or NULL; a UD request's AH is NULL.
        let got = unsafe { translate(&w, ud_qp) }.map(|s| {
                assert_eq!(s.wr_id, r.wr_id);
                assert_eq!(s.sgl.len(), r.num_sge as usize);
                assert_eq!(s.flags, SendFlags::from_bits_truncate(r.send_flags));
                assert!(s.ud.is_none());
                let expect = match r.opcode {
                    0 => matches!(s.op, SendOp::RdmaWrite(_)),
                    1 => matches!(s.op, SendOp::RdmaWriteWithImm(_, imm) if imm == u32::from_be(r.imm_data)),
                    2 => s.op == SendOp::Send,
                    3 => matches!(s.op, SendOp::SendWithImm(_)),
                    4 => matches!(s.op, SendOp::RdmaRead(_)),
                    5 => matches!(s.op, SendOp::AtomicCmpAndSwp { .. }),
                    6 => matches!(s.op, SendOp::AtomicFetchAndAdd { .. }),
                    7 => s.op == SendOp::LocalInv(r.imm_data),
                    8 => matches!(s.op, SendOp::BindMw(b) if b.mw_rkey == seed),
                    9 => s.op == SendOp::SendWithInv(r.imm_data),
                    _ => false,
                };
                assert!(expect, "opcode {} gave {:?}", r.opcode, s.op);
            });
        let bind_ok = r.opcode != 8 || (r.mw && (r.bind[5] as u32) & ZERO_BASED == 0);
        let ok = r.opcode <= 9 && bind_ok && sgl_ok(r.null_sg_list, r.num_sge) && !ud_qp;
        match got {
            Ok(()) => prop_assert!(ok, "accepted {:?}", r),
            Err(e) => {
                prop_assert_eq!(e, EINVAL);
                prop_assert!(!ok, "refused {:?}", r);
            }
        }
    }

    #[test]
    fn receive_lists_post_a_prefix_and_name_the_rest(
        reqs in vec((any::<u64>(), num_sge(), prop::bool::weighted(0.15)), 0..8),
        refuse_at in prop::option::of((0usize..8, prop_oneof![Just(true), Just(false)])),
        with_bad_wr in any::<bool>(),
    ) {
        let mut m = Mem::new(7);
        let sges = m.sges.as_mut_ptr();
        let mut wrs: Vec<ibv_recv_wr> = reqs
            .iter()
            .map(|&(wr_id, num_sge, null)| ibv_recv_wr {
                wr_id,
                next: ptr::null_mut(),
                sg_list: if null { ptr::null_mut() } else { sges },
                num_sge,
            })
            .collect();
        // Linked through one raw pointer to the array, so that no later
        // `&mut` retags the requests under the links (Stacked Borrows).
        let base = wrs.as_mut_ptr();
        for i in 1..wrs.len() {
            // SAFETY: `i - 1` and `i` are in bounds of `wrs`.
            unsafe { (*base.add(i - 1)).next = base.add(i) };
        }
        let head = if wrs.is_empty() { ptr::null_mut() } else { base };
        let sentinel = 0x5a5a_usize as *mut ibv_recv_wr;
        let mut bad = sentinel;
        let bad_ptr = if with_bad_wr { &mut bad as *mut *mut ibv_recv_wr } else { ptr::null_mut() };
        let mut posted = Vec::new();
        let post = |r: &RecvWr<'_>| {
            if let Some((at, full)) = refuse_at {
                if posted.len() == at {
                    let kind = if full { rverbs::PostErrorKind::QueueFull } else { rverbs::PostErrorKind::BadState };
                    return Err(rverbs::PostError { index: 0, kind });
                }
            }
            posted.push((r.wr_id, r.sgl.len()));
            Ok(())
        };
        // SAFETY: a NULL-terminated list of live requests whose `sg_list`
        // is NULL or holds MAX_SGE entries; `bad_ptr` is NULL or ours.
        let rc = unsafe { post_recv_list(head, bad_ptr, post) };
        // The first request `sgl` refuses, and the first the queue refuses.
        let bad_sgl = reqs.iter().position(|&(_, n, null)| !sgl_ok(null, n));
        let refused = refuse_at.map(|(at, _)| at).filter(|&at| at < reqs.len());
        let stop = match (bad_sgl, refused) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match stop {
            None => {
                prop_assert_eq!(rc, 0);
                prop_assert_eq!(posted.len(), reqs.len());
                prop_assert_eq!(bad, sentinel, "*bad_wr written on success");
            }
            Some(i) => {
                let want = if bad_sgl == Some(i) {
                    EINVAL
                } else if refuse_at.unwrap().1 {
                    nix::libc::ENOMEM
                } else {
                    EINVAL
                };
                prop_assert_eq!(rc, want);
                prop_assert_eq!(posted.len(), i);
                if with_bad_wr {
                    prop_assert_eq!(bad, base.wrapping_add(i));
                }
            }
        }
        for (p, r) in posted.iter().zip(&reqs) {
            prop_assert_eq!(*p, (r.0, r.1 as usize));
        }
    }
}
