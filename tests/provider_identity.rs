//! The providers crate's public CQ API ties a driver to its own kernel CQ
//! (audit-2 N9), through `rverbs_providers::provider` directly on a real
//! device (VM tier): `req_notify` and `resize` refuse another CQ's kernel
//! object (and `park` leaves another's driver alone: an mlx5 one parks
//! itself with its own CQ when dropped), and `create_qp` refuses
//! CQs of another uverbs fd. Before, each took any `KernelCq`: an mlx5
//! driver parked with the wrong CQ was freed while its own kernel CQ, and
//! the HCA writing it, lived on.

mod common;

use std::sync::Arc;

use rverbs_providers::provider::{CqCreate, ProviderContext, QpCreate};
use rverbs_providers::qp_state::QpType;
use rverbs_providers::sys::UverbsFd;
use rverbs_providers::Errno;

#[test]
fn a_cq_driver_works_only_with_its_own_kernel_cq() {
    let Some(dev) = common::first_device() else { return };
    let provider = dev.open().expect("open").provider();
    let open = || {
        let fd = Arc::new(UverbsFd::open(dev.dev_path(), dev.driver().0, None).expect("the uverbs node"));
        let (_, p) = ProviderContext::open(&fd, provider).expect("GET_CONTEXT");
        (fd, p.expect("a provider rverbs has"))
    };
    let ((fd_a, pa), (fd_b, pb)) = (open(), open());
    let cq = |fd, p: &ProviderContext, h| {
        let (k, d) = p
            .create_cq(fd, &CqCreate { cqe: 8, user_handle: h, channel: None, comp_vector: 0 }, ())
            .expect("create_cq");
        (k.erase(), d)
    };
    let (k1, mut d1) = cq(&fd_a, &pa, 1);
    let (k2, mut d2) = cq(&fd_a, &pa, 2);
    assert!(d1.is_of(&k1) && !d1.is_of(&k2));
    let e = d1.req_notify(&k2, false).expect_err("another CQ's kernel object");
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
    d1.req_notify(&k1, false).expect("its own");
    let e = d2.resize(&k1, 16).expect_err("another CQ's kernel object");
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
    // Each CQ goes with its own driver: k2 is destroyed, k1 and d1 poll on.
    drop(d2);
    let mut k2 = k2;
    k2.destroy().expect("k2 alone");
    let mut out = [rverbs_providers::wr::Wc::default(); 1];
    assert_eq!(d1.poll(&mut out), 0);

    // A QP of fd_b cannot use fd_a's CQ.
    let pd_b = rverbs_providers::cmd::pd::alloc_pd(&fd_b, &mut []).expect("ALLOC_PD");
    let cap = rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let q: QpCreate = QpCreate {
        qp_type: QpType::Rc,
        pd_handle: pd_b,
        send_cq: k1.clone(),
        recv_cq: k1.clone(),
        srq: None,
        cap,
        sq_sig_all: false,
        user_handle: 3,
    };
    let e = pb.create_qp(&fd_b, q.clone()).map(drop).expect_err("a CQ of another fd");
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
    let (k3, _d3) = cq(&fd_b, &pb, 4);
    let (kq, _sq, _rq) =
        pb.create_qp(&fd_b, QpCreate { send_cq: k3.clone(), recv_cq: k3.clone(), ..q }).expect("its own fd's CQ");
    drop(kq);
    drop((k1, d1));
}
