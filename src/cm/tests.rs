//! Host tests of the CM layer against the model of the kernel's rdma_cm fd
//! (`rverbs_providers::sys::ucma_mock`): event decoding (unknown numbers
//! included), the uid table, destroy without waiting, private data limits,
//! migrate, non-blocking reads. What needs a device (QPs, contexts) is in
//! the VM tier (`tests/cm.rs`).

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rverbs_providers::sys::ucma::UcmaFd;
use rverbs_providers::sys::ucma_mock::MockUcma;
use rverbs_providers::{Errno, ErrorKind};
use rverbs_uapi::rdma_user_cm::*;

use super::*;

fn channel() -> (EventChannel, Arc<MockUcma>) {
    let m = MockUcma::new();
    (EventChannel::from_fd(UcmaFd::mock(m.clone())), m)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A QUERY answer that gives an id a device.
fn with_device(m: &MockUcma) {
    m.set_query_addr(rdma_ucm_query_addr_resp {
        node_guid: u64::from_ne_bytes([0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56]),
        port_num: 1,
        ..Default::default()
    });
}

#[test]
fn every_event_number_decodes_and_unknown_ones_are_kept() {
    for n in 0..16 {
        let k = EventKind::from_raw(n);
        assert!(!matches!(k, EventKind::Other(_)), "{n}");
        assert_eq!(k.raw(), n);
        assert!(k.to_string().starts_with("RDMA_CM_EVENT_"), "{k}");
    }
    assert_eq!(EventKind::from_raw(9).to_string(), "RDMA_CM_EVENT_ESTABLISHED");
    for n in [16, 19, 99, u32::MAX] {
        assert_eq!(EventKind::from_raw(n), EventKind::Other(n));
        assert_eq!(EventKind::from_raw(n).raw(), n);
        assert_eq!(EventKind::from_raw(n).to_string(), format!("RDMA_CM_EVENT_UNKNOWN({n})"));
    }

    // Through the channel: a number the library does not know reaches the
    // caller as Other, with its status and private data.
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let mut ev = rdma_ucm_event_resp { uid: id.uid(), id: id.kernel_id(), event: 17, status: 3, ..Default::default() };
    let mut c = rdma_ucm_conn_param::default();
    c.private_data[..2].copy_from_slice(b"hi");
    c.private_data_len = 2;
    ev.set_conn(&c);
    m.push_event(ev);
    let got = ch.try_get_event().unwrap().unwrap();
    assert_eq!(got.kind(), EventKind::Other(17));
    assert_eq!(got.status(), 3);
    assert_eq!(got.private_data(), b"hi");
    assert!(got.id().same_as(&id));
    assert!(got.error().is_none());
}

#[test]
fn reads_are_non_blocking() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    assert!(ch.try_get_event().unwrap().is_none());
    m.push(id.kernel_id(), RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    assert_eq!(ch.try_get_event().unwrap().unwrap().kind(), EventKind::RouteResolved);
    assert!(ch.try_get_event().unwrap().is_none());
}

/// The waiting half of the above, apart: it needs `ppoll()`.
#[test]
#[cfg_attr(miri, ignore = "ppoll(2), which Miri cannot run; reads_are_non_blocking runs there")]
fn reads_are_non_blocking_and_the_fd_says_when_to_read() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    assert!(ch.try_get_event().unwrap().is_none());
    let t = Instant::now();
    assert!(ch.get_event_timeout(Duration::from_millis(30)).unwrap().is_none());
    assert!(t.elapsed() >= Duration::from_millis(30));
    let fd = ch.as_fd();
    assert!(!rverbs_providers::sys::event::wait_readable(fd, 0).unwrap());
    m.push(id.kernel_id(), RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    assert!(rverbs_providers::sys::event::wait_readable(ch.as_fd(), 0).unwrap());
    assert_eq!(ch.get_event().unwrap().kind(), EventKind::RouteResolved);
}

#[test]
fn events_of_dropped_ids_are_dropped_and_a_dead_listeners_request_destroyed() {
    let (ch, m) = channel();
    let a = ch.create_id(PortSpace::Tcp).unwrap();
    let b = ch.create_id(PortSpace::Tcp).unwrap();
    let (ka, kb) = (a.kernel_id(), b.kernel_id());
    // Events the kernel read out before the destroy (a race) for `a`...
    m.push_event(rdma_ucm_event_resp {
        uid: a.uid(),
        id: ka,
        event: RDMA_CM_EVENT_ADDR_RESOLVED,
        ..Default::default()
    });
    let child = m.new_child();
    m.push_event(rdma_ucm_event_resp {
        uid: a.uid(),
        id: child,
        event: RDMA_CM_EVENT_CONNECT_REQUEST,
        ..Default::default()
    });
    m.push(kb, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    let a_uid = a.uid();
    // The mock drops `a`'s own queued events at DESTROY_ID; put one back as
    // if GET_EVENT had raced with it.
    drop(a);
    assert!(m.destroyed().contains(&ka));
    m.push_event(rdma_ucm_event_resp { uid: a_uid, id: ka, event: RDMA_CM_EVENT_DISCONNECTED, ..Default::default() });
    // ...are skipped; b's comes through.
    let ev = ch.try_get_event().unwrap().unwrap();
    assert!(ev.id().same_as(&b));
    assert_eq!(ev.kind(), EventKind::RouteResolved);
    assert!(m.destroyed().contains(&child), "the dead listener's new id was destroyed");
    assert!(ch.try_get_event().unwrap().is_none());
}

#[test]
fn destroy_never_waits_for_kept_events() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let k = id.kernel_id();
    for e in [RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_ERROR] {
        m.push(k, e, -110);
    }
    // Two events read and kept (librdmacm: not acked, so rdma_destroy_id
    // would wait forever); one more still queued in the kernel.
    let e1 = ch.try_get_event().unwrap().unwrap();
    m.push(k, RDMA_CM_EVENT_UNREACHABLE, -110);
    let t = Instant::now();
    let reported = id.clone().destroy().unwrap();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(reported, 1);
    assert_eq!(m.destroyed(), vec![k]);
    assert_eq!(m.pending(), 0, "the kernel dropped the id's unreported event");
    // The kept event still works; the id's commands say it is gone.
    assert_eq!(e1.kind(), EventKind::AddrError);
    assert_eq!(e1.error().unwrap().errno(), Some(Errno::ETIMEDOUT));
    let err = id.resolve_route(Duration::from_secs(1)).unwrap_err();
    assert_eq!((err.kind(), err.errno()), (&ErrorKind::Check, Some(Errno::ENOENT)));
    // Dropping the last handles sends no second DESTROY_ID.
    drop((id, e1));
    assert_eq!(m.destroyed(), vec![k]);
    assert_eq!(m.commands().iter().filter(|&&c| c == RDMA_USER_CM_CMD_DESTROY_ID).count(), 1);
}

#[test]
fn the_last_handle_destroys_the_id_once() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Udp).unwrap();
    let k = id.kernel_id();
    assert_eq!(m.ids()[&k].ps, RDMA_PS_UDP as u16);
    assert_eq!(m.uid_of(k), Some(id.uid()));
    m.push(k, RDMA_CM_EVENT_ADDR_CHANGE, 0);
    let ev = ch.get_event().unwrap();
    let other = id.clone();
    drop(id);
    drop(other);
    assert!(m.destroyed().is_empty(), "the event still holds the id");
    drop(ev);
    assert_eq!(m.destroyed(), vec![k]);
}

#[test]
fn a_connect_request_brings_a_new_id_with_its_own_uid() {
    let (ch, m) = channel();
    with_device(&m);
    let l = ch.create_id(PortSpace::Tcp).unwrap();
    l.bind_addr(addr("0.0.0.0:7174")).unwrap();
    l.listen(3).unwrap();
    let child = m.new_child();
    let mut ev = rdma_ucm_event_resp {
        uid: l.uid(),
        id: child,
        event: RDMA_CM_EVENT_CONNECT_REQUEST,
        ece: rdma_ucm_ece { vendor_id: 7, attr_mod: 1 },
        ..Default::default()
    };
    let mut c =
        rdma_ucm_conn_param { qp_num: 0x1234_5678, responder_resources: 1, initiator_depth: 2, ..Default::default() };
    c.private_data[..4].copy_from_slice(b"ping");
    c.private_data_len = 56; // IB/RoCE: the request's full capacity
    ev.set_conn(&c);
    m.push_event(ev);
    m.clear_log();
    let req = ch.get_event().unwrap();
    assert_eq!(req.kind(), EventKind::ConnectRequest);
    assert!(req.listen_id().unwrap().same_as(&l));
    let cid = req.id().clone();
    assert_eq!(cid.kernel_id(), child);
    assert_ne!(cid.uid(), l.uid());
    assert_eq!(req.private_data().len(), 56);
    assert_eq!(&req.private_data()[..4], b"ping");
    let p = req.conn_param().unwrap();
    assert_eq!((p.qp_num, p.responder_resources, p.initiator_depth), (0x34_5678, 1, 2));
    assert_eq!(req.ece(), (7, 1));
    // rdma_get_cm_event's follow-up: QUERY(ADDR) of the new id; its GIDs
    // (librdmacm's QUERY(GID) here) at the first gids(), once.
    let queries = || -> Vec<(u32, u32)> {
        m.log()
            .iter()
            .filter(|l| l.hdr.cmd != RDMA_USER_CM_CMD_GET_EVENT)
            .map(|l| (l.hdr.cmd, u32::from_ne_bytes(l.body[12..16].try_into().unwrap())))
            .collect()
    };
    assert_eq!(queries(), vec![(RDMA_USER_CM_CMD_QUERY, RDMA_USER_CM_QUERY_ADDR)]);
    assert_eq!(cid.node_guid().unwrap().to_string(), "5054:00ff:fe12:3456");
    let gids = cid.gids();
    assert_eq!(cid.gids(), gids);
    assert_eq!(
        queries(),
        vec![(RDMA_USER_CM_CMD_QUERY, RDMA_USER_CM_QUERY_ADDR), (RDMA_USER_CM_CMD_QUERY, RDMA_USER_CM_QUERY_GID)]
    );

    // The new id's events (after ACCEPT gave the kernel its uid) reach it.
    m.push_event(rdma_ucm_event_resp {
        uid: cid.uid(),
        id: child,
        event: RDMA_CM_EVENT_ESTABLISHED,
        ..Default::default()
    });
    let est = ch.get_event().unwrap();
    assert!(est.id().same_as(&cid));
    // Old kernels: uid 0 with ESTABLISHED, looked up by the kernel id.
    m.push_event(rdma_ucm_event_resp { uid: 0, id: child, event: RDMA_CM_EVENT_ESTABLISHED, ..Default::default() });
    assert!(ch.get_event().unwrap().id().same_as(&cid));
    // Any other event with uid 0 is dropped.
    m.push_event(rdma_ucm_event_resp { uid: 0, id: child, event: RDMA_CM_EVENT_DISCONNECTED, ..Default::default() });
    assert!(ch.try_get_event().unwrap().is_none());
}

#[test]
fn an_address_without_a_device_is_an_addr_error() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, addr("10.9.9.9:7174"), Duration::from_millis(500)).unwrap();
    m.push(id.kernel_id(), RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    let ev = ch.get_event().unwrap();
    assert_eq!(ev.kind(), EventKind::AddrError, "QUERY found no device: librdmacm's ENODEV");
    let e = ev.error().unwrap();
    assert_eq!(e.errno(), Some(Errno::ENODEV));
    assert!(e.to_string().contains("no RDMA device is on the route to 10.9.9.9:7174"), "{e}");
    assert!(id.context().is_err());

    with_device(&m);
    id.resolve_addr(None, addr("192.168.77.1:7174"), Duration::from_millis(500)).unwrap();
    m.push(id.kernel_id(), RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    assert_eq!(ch.get_event().unwrap().kind(), EventKind::AddrResolved);
    assert_eq!(id.port_num(), Some(1));
}

#[test]
fn error_events_name_the_peer() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, addr("192.168.77.1:7174"), Duration::from_millis(500)).unwrap();
    for (event, status, errno, text) in [
        (RDMA_CM_EVENT_REJECTED, 8, Errno::ECONNREFUSED, "nobody listens at 192.168.77.1:7174"),
        (RDMA_CM_EVENT_REJECTED, -111, Errno::ECONNREFUSED, "nobody listens at 192.168.77.1:7174: its TCP port"),
        (RDMA_CM_EVENT_REJECTED, 28, Errno::ECONNREFUSED, "192.168.77.1:7174 rejected the connection"),
        (RDMA_CM_EVENT_UNREACHABLE, -110, Errno::ETIMEDOUT, "192.168.77.1:7174 is unreachable"),
        (RDMA_CM_EVENT_ADDR_ERROR, -110, Errno::ETIMEDOUT, "192.168.77.1:7174 did not answer"),
        (RDMA_CM_EVENT_ROUTE_ERROR, -101, Errno::ENETUNREACH, "no route to 192.168.77.1:7174"),
        (RDMA_CM_EVENT_CONNECT_ERROR, -22, Errno::EINVAL, "connecting to 192.168.77.1:7174 failed"),
    ] {
        m.push(id.kernel_id(), event, status);
        let ev = ch.get_event().unwrap();
        let e = ev.error().unwrap_or_else(|| panic!("{} is an error", ev.kind()));
        assert_eq!(e.errno(), Some(errno), "{e}");
        assert!(e.to_string().contains(text), "{e}");
        assert!(ev.into_result().is_err());
    }
}

#[test]
fn private_data_limits_are_checked_before_the_kernel() {
    let (ch, m) = channel();
    let rc = ch.create_id(PortSpace::Tcp).unwrap();
    let ud = ch.create_id(PortSpace::Udp).unwrap();
    let n = m.log().len();
    let with = |len: usize| ConnParam { private_data: vec![7; len], qp_num: Some(0x11), ..ConnParam::default() };
    for (id, len, what) in [(&rc, 57, "connect"), (&ud, 181, "connect"), (&rc, 197, "accept"), (&ud, 137, "accept")] {
        let r = if what == "connect" { id.connect(&with(len)) } else { id.accept(&with(len)) };
        let e = r.unwrap_err();
        assert_eq!((e.kind(), e.errno()), (&ErrorKind::Check, Some(Errno::EINVAL)), "{e}");
        assert!(e.to_string().contains(&format!("{len} bytes of private data")), "{e}");
        assert!(e.to_string().contains(&format!("at most {}", len - 1)), "{e}");
    }
    let e = rc.reject(&[0; 149]).unwrap_err();
    assert!(e.to_string().contains("a reject of a Tcp id over InfiniBand/RoCE carries at most 148"), "{e}");
    assert_eq!(m.log().len(), n, "nothing reached the kernel");

    // At the limit it goes out (UD needs no device for its depths).
    ud.connect(&with(180)).unwrap();
    let l = m.log().pop().unwrap();
    assert_eq!((l.hdr.cmd, l.body[264], l.body[271]), (RDMA_USER_CM_CMD_CONNECT, 180, 1));
    assert_eq!(&l.body[0..4], &0x11u32.to_ne_bytes());
    rc.reject(&[1; 148]).unwrap();
    assert_eq!(m.log().pop().unwrap().body[4], 148);
}

#[test]
fn without_a_qp_the_qp_number_is_needed() {
    let (ch, _m) = channel();
    let ud = ch.create_id(PortSpace::Udp).unwrap();
    let e = ud.connect(&ConnParam::default()).unwrap_err();
    assert!(e.to_string().contains("no QP is attached"), "{e}");
}

#[test]
fn migrate_moves_the_id_and_its_events() {
    let (a, ma) = channel();
    let (b, mb) = channel();
    let id = a.create_id(PortSpace::Tcp).unwrap();
    id.migrate(&b).unwrap();
    let l = mb.log().pop().unwrap();
    assert_eq!(l.hdr.cmd, RDMA_USER_CM_CMD_MIGRATE_ID);
    assert_eq!(&l.body[8..12], &id.kernel_id().to_ne_bytes());
    assert_eq!(&l.body[12..16], &(a.fd().raw() as u32).to_ne_bytes(), "the old fd, by number");
    assert!(id.channel().same_as(&b));
    // An event for it on the old channel is not found there any more.
    ma.push_event(rdma_ucm_event_resp { uid: id.uid(), id: 1, event: RDMA_CM_EVENT_ADDR_CHANGE, ..Default::default() });
    assert!(a.try_get_event().unwrap().is_none());
    mb.push_event(rdma_ucm_event_resp { uid: id.uid(), id: 1, event: RDMA_CM_EVENT_ADDR_CHANGE, ..Default::default() });
    assert!(b.try_get_event().unwrap().unwrap().id().same_as(&id));
    // Later commands go to the new fd.
    id.set_option(CmOption::Tos(0x20)).unwrap();
    let l = mb.log().pop().unwrap();
    assert_eq!((l.hdr.cmd, l.input), (RDMA_USER_CM_CMD_SET_OPTION, Some(vec![0x20])));
}

/// An event that another thread reads from the new channel while
/// MIGRATE_ID is still in the kernel finds the id (audit-2 N8): the id is
/// registered there before the command. It used to be registered after,
/// and the event was dropped as one of an id that is gone.
#[test]
fn an_event_read_from_the_new_channel_during_migrate_finds_the_id() {
    let (a, _ma) = channel();
    let (b, mb) = channel();
    let id = a.create_id(PortSpace::Tcp).unwrap();
    let (uid, kernel_id) = (id.uid(), id.kernel_id());
    let seen = Arc::new(std::sync::Mutex::new(None));
    let (b2, mb2, seen2) = (b.clone(), mb.clone(), seen.clone());
    mb.after_next(RDMA_USER_CM_CMD_MIGRATE_ID, move || {
        mb2.push_event(rdma_ucm_event_resp {
            uid,
            id: kernel_id,
            event: RDMA_CM_EVENT_ADDR_CHANGE,
            ..Default::default()
        });
        *seen2.lock().unwrap() = Some(b2.try_get_event().unwrap().map(|e| e.id().uid()));
    });
    id.migrate(&b).unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(Some(uid)), "the event read during the migrate names the id");
    // A failed migrate leaves the id where it was, known only there.
    let (c, mc) = channel();
    mc.fail_next(RDMA_USER_CM_CMD_MIGRATE_ID, Errno::EINVAL);
    assert!(id.migrate(&c).is_err());
    assert!(id.channel().same_as(&b));
    mc.push_event(rdma_ucm_event_resp { uid, id: kernel_id, event: RDMA_CM_EVENT_ADDR_CHANGE, ..Default::default() });
    assert!(c.try_get_event().unwrap().is_none(), "not registered on the channel it did not move to");
}

#[test]
fn options_go_out_as_librdmacm_sends_them() {
    let (ch, m) = channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    for (opt, name, val) in [
        (CmOption::Tos(32), RDMA_OPTION_ID_TOS, vec![32]),
        (CmOption::ReuseAddr(true), RDMA_OPTION_ID_REUSEADDR, 1i32.to_ne_bytes().to_vec()),
        (CmOption::AfOnly(false), RDMA_OPTION_ID_AFONLY, 0i32.to_ne_bytes().to_vec()),
        (CmOption::AckTimeout(14), RDMA_OPTION_ID_ACK_TIMEOUT, vec![14]),
    ] {
        id.set_option(opt).unwrap();
        let l = m.log().pop().unwrap();
        assert_eq!(&l.body[12..16], &RDMA_OPTION_ID.to_ne_bytes());
        assert_eq!(&l.body[16..20], &name.to_ne_bytes());
        assert_eq!(&l.body[20..24], &(val.len() as u32).to_ne_bytes());
        assert_eq!(l.input, Some(val));
    }
}

#[test]
fn the_kernels_qp_attributes_keep_flush_bits_and_drop_kernel_only_mask_bits() {
    let a = rverbs_uapi::ib_user_verbs::ib_uverbs_qp_attr {
        qp_state: 1,
        qp_access_flags: 0x302, // REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT (6.12's rxe)
        qp_attr_mask: 0x39 | (1 << 21) | (1 << 23),
        port_num: 1,
        ..Default::default()
    };
    let (attr, mask) = qp::from_kernel(&a);
    assert_eq!(
        attr.qp_access_flags,
        crate::AccessFlags::REMOTE_WRITE | crate::AccessFlags::FLUSH_GLOBAL | crate::AccessFlags::FLUSH_PERSISTENT
    );
    assert_eq!(attr.qp_access_flags.bits(), 0x302);
    assert_eq!(
        mask,
        crate::QpAttrMask::STATE
            | crate::QpAttrMask::ACCESS_FLAGS
            | crate::QpAttrMask::PKEY_INDEX
            | crate::QpAttrMask::PORT
    );
    assert_eq!((attr.qp_state, attr.port_num), (crate::QpState::Init, 1));
}

#[test]
fn limits_table() {
    use crate::Transport::{Ib, Iwarp};
    assert_eq!(private_data_limit(PortSpace::Tcp, Ib, PrivateDataIn::Connect), 56);
    assert_eq!(private_data_limit(PortSpace::Tcp, Ib, PrivateDataIn::Accept), 196);
    assert_eq!(private_data_limit(PortSpace::Udp, Ib, PrivateDataIn::Connect), 180);
    assert_eq!(private_data_limit(PortSpace::Udp, Ib, PrivateDataIn::Accept), 136);
    assert_eq!(private_data_limit(PortSpace::Tcp, Ib, PrivateDataIn::Reject), 148);
    assert_eq!(private_data_limit(PortSpace::Tcp, Iwarp, PrivateDataIn::Connect), 248);
}
