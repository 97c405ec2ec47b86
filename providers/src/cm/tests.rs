//! Golden bytes of every command (header and body as `write()` sends them,
//! hand-computed from the offsets in `shared/reference/rdmacm.md` §A.3),
//! through the mock fd, which records each command.

use std::net::SocketAddr;
use std::sync::Arc;

use rverbs_uapi::rdma_user_cm::*;

use super::*;
use crate::sys::ucma::{Command, UcmaFd};
use crate::sys::ucma_mock::MockUcma;
use crate::{Errno, ErrorKind};

fn fd() -> (UcmaFd, Arc<MockUcma>) {
    let m = MockUcma::new();
    (UcmaFd::mock(m.clone()), m)
}

/// The last command: `(cmd, in, out)` and its body.
fn last(m: &MockUcma) -> ((u32, u16, u16), Vec<u8>) {
    let l = m.log().pop().expect("a command was written");
    ((l.hdr.cmd, l.hdr.r#in, l.hdr.out), l.body)
}

/// `n` zero bytes with `(offset, bytes)` patches.
fn bytes(n: usize, patches: &[(usize, &[u8])]) -> Vec<u8> {
    let mut v = vec![0u8; n];
    for (off, b) in patches {
        v[*off..off + b.len()].copy_from_slice(b);
    }
    v
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// `sockaddr_in` of 192.168.77.1:7174: family 2, port big-endian, address.
const SIN_77_1: [u8; 8] = [2, 0, 0x1c, 0x06, 192, 168, 77, 1];

#[test]
fn create_and_destroy_id() {
    let (fd, m) = fd();
    let id = create_id(&fd, 0x1122_3344_5566_7788, RDMA_PS_TCP as u16, 0).unwrap();
    assert_eq!(id, 1);
    let (h, b) = last(&m);
    assert_eq!(h, (0, 24, 4));
    assert_eq!(b, bytes(24, &[(0, &0x1122_3344_5566_7788u64.to_le_bytes()), (16, &[0x06, 0x01])]));
    assert_eq!(m.uid_of(1), Some(0x1122_3344_5566_7788));

    create_id(&fd, 9, RDMA_PS_UDP as u16, 0).unwrap();
    assert_eq!(&last(&m).1[16..18], &[0x11, 0x01]);

    assert_eq!(destroy_id(&fd, 1).unwrap(), 0);
    let (h, b) = last(&m);
    assert_eq!(h, (1, 16, 4));
    assert_eq!(b, bytes(16, &[(8, &[1])]));
    let e = destroy_id(&fd, 1).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::ENOENT));
    assert!(e.to_string().starts_with("rdma_destroy_id: the kernel has no such CM id"), "{e}");
}

#[test]
fn bind_and_resolve() {
    let (fd, m) = fd();
    let id = create_id(&fd, 1, RDMA_PS_TCP as u16, 0).unwrap();
    bind(&fd, id, &addr("192.168.77.1:7174")).unwrap();
    let (h, b) = last(&m);
    assert_eq!(h, (20, 136, 0));
    assert_eq!(b, bytes(136, &[(0, &[1]), (4, &[16]), (8, &SIN_77_1)]));

    bind(&fd, id, &addr("[fe80::1%3]:80")).unwrap();
    let (_, b) = last(&m);
    let mut ip6 = [0u8; 16];
    ip6[..2].copy_from_slice(&[0xfe, 0x80]);
    ip6[15] = 1;
    assert_eq!(b, bytes(136, &[(0, &[1]), (4, &[28]), (8, &[10, 0, 0, 80]), (16, &ip6), (32, &[3])]));

    resolve_addr(&fd, id, None, &addr("192.168.77.1:7174"), 2000).unwrap();
    let (h, b) = last(&m);
    assert_eq!(h, (21, 272, 0));
    assert_eq!(b, bytes(272, &[(0, &[1]), (4, &2000u32.to_le_bytes()), (10, &[16]), (144, &SIN_77_1)]));

    resolve_addr(&fd, id, Some(&addr("192.168.77.1:0")), &addr("192.168.77.1:7174"), 500).unwrap();
    let (_, b) = last(&m);
    assert_eq!(
        b,
        bytes(
            272,
            &[
                (0, &[1]),
                (4, &500u32.to_le_bytes()),
                (8, &[16, 0, 16]),
                (16, &[2, 0, 0, 0, 192, 168, 77, 1]),
                (144, &SIN_77_1)
            ]
        )
    );

    resolve_route(&fd, id, 2000).unwrap();
    assert_eq!(last(&m), ((4, 8, 0), bytes(8, &[(0, &[1]), (4, &2000u32.to_le_bytes())])));
}

#[test]
fn queries() {
    let (fd, m) = fd();
    let id = create_id(&fd, 1, RDMA_PS_TCP as u16, 0).unwrap();
    let r = rdma_ucm_query_addr_resp {
        node_guid: u64::from_ne_bytes([0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56]),
        port_num: 1,
        ibdev_index: 2,
        src_size: 16,
        src_addr: sockaddr_of(&addr("192.168.77.1:7174")).0,
        ..Default::default()
    };
    m.set_query_addr(r);
    let got = query_addr(&fd, id).unwrap();
    assert_eq!((got.port_num, got.ibdev_index), (1, 2));
    assert_eq!(to_cm_addr(&got.src_addr, got.src_size), CmAddr::Ip(addr("192.168.77.1:7174")));
    assert_eq!(to_cm_addr(&got.dst_addr, got.dst_size), CmAddr::None(0));
    assert_eq!(last(&m), ((19, 16, 280), bytes(16, &[(8, &[1])])));
    query_gid(&fd, id).unwrap();
    assert_eq!(last(&m), ((19, 16, 280), bytes(16, &[(8, &[1]), (12, &[2])])));
    assert!(query_path(&fd, id).unwrap().is_empty());
    assert_eq!(last(&m), ((19, 16, 8 + 6 * 72), bytes(16, &[(8, &[1]), (12, &[1])])));
}

#[test]
fn sockaddr_ib_decodes() {
    let mut s = sockaddr_ib { sib_family: AF_IB, sib_pkey: 0xffffu16.to_be(), ..Default::default() };
    s.sib_addr.sib_raw = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    s.sib_sid = 0x0106_0000_0000_1c06u64.to_be();
    let mut ss = __kernel_sockaddr_storage::default();
    zerocopy::IntoBytes::as_mut_bytes(&mut ss)[..48].copy_from_slice(zerocopy::IntoBytes::as_bytes(&s));
    assert_eq!(to_cm_addr(&ss, 48), CmAddr::Ib { gid: s.sib_addr.sib_raw, pkey: 0xffff, sid: 0x0106_0000_0000_1c06 });
    assert_eq!(to_cm_addr(&ss, 16), CmAddr::None(AF_IB), "a size too small for the family is no address");
}

#[test]
fn connect_listen_accept_reject() {
    let (fd, m) = fd();
    let id = create_id(&fd, 1, RDMA_PS_TCP as u16, 0).unwrap();
    let p = rdma_ucm_conn_param {
        qp_num: 0x11,
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    connect(&fd, id, &p, rdma_ucm_ece::default()).unwrap();
    let (h, b) = last(&m);
    assert_eq!(h, (6, 288, 0));
    assert_eq!(b, bytes(288, &[(0, &[0x11]), (266, &[1, 1, 0, 7, 7, 1]), (272, &[1])]));

    listen(&fd, id, 3).unwrap();
    assert_eq!(last(&m), ((7, 8, 0), bytes(8, &[(0, &[1]), (4, &[3])])));
    listen(&fd, id, -1).unwrap();
    assert_eq!(last(&m).1, bytes(8, &[(0, &[1]), (4, &[0xff; 4])]));

    let child = m.new_child();
    let mut p = rdma_ucm_conn_param { qp_num: 0x12, responder_resources: 1, initiator_depth: 1, ..Default::default() };
    p.private_data[..3].copy_from_slice(b"abc");
    p.private_data_len = 3;
    accept(&fd, child, 0xabc, &p, rdma_ucm_ece { vendor_id: 0x15b3, attr_mod: 2 }).unwrap();
    let (h, b) = last(&m);
    assert_eq!(h, (8, 296, 0));
    assert_eq!(
        b,
        bytes(
            296,
            &[
                (0, &[0xbc, 0x0a]),
                (8, &[0x12]),
                (16, b"abc"),
                (272, &[3, 0, 1, 1]),
                (279, &[1]),
                (280, &[child as u8]),
                (288, &[0xb3, 0x15, 0, 0, 2])
            ]
        )
    );
    assert_eq!(m.uid_of(child), Some(0xabc), "ACCEPT sets the child's uid");

    establish(&fd, id).unwrap();
    assert_eq!(last(&m), ((8, 296, 0), bytes(296, &[(280, &[1])])), "the RTU is an ACCEPT with valid 0");

    reject(&fd, child, b"no", 0).unwrap();
    assert_eq!(last(&m), ((9, 264, 0), bytes(264, &[(0, &[child as u8]), (4, &[2, 0]), (8, b"no")])));
    let n = m.log().len();
    let e = reject(&fd, child, &[0; 256], 0).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Check);
    assert_eq!(m.log().len(), n, "refused before the kernel was asked");

    disconnect(&fd, id).unwrap();
    assert_eq!(last(&m), ((10, 4, 0), bytes(4, &[(0, &[1])])));
}

#[test]
fn qp_attr_options_migrate_notify() {
    let (fd, m) = fd();
    let id = create_id(&fd, 1, RDMA_PS_TCP as u16, 0).unwrap();
    let a = rverbs_uapi::ib_user_verbs::ib_uverbs_qp_attr {
        qp_attr_mask: 0x1 | 0x10 | 0x20 | 0x8,
        qp_access_flags: 0x302,
        ..Default::default()
    };
    m.set_init_qp_attr(1, a);
    let got = init_qp_attr(&fd, id, 1).unwrap();
    assert_eq!((got.qp_attr_mask, got.qp_access_flags), (0x39, 0x302));
    assert_eq!(last(&m), ((11, 16, 144), bytes(16, &[(8, &[1]), (12, &[1])])));

    set_option(&fd, id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &[0x20]).unwrap();
    let l = m.log().pop().unwrap();
    assert_eq!((l.hdr.cmd, l.hdr.r#in, l.hdr.out), (14, 24, 0));
    assert_eq!(l.body, bytes(24, &[(8, &[1]), (20, &[1])]));
    assert_eq!(l.input.as_deref(), Some(&[0x20][..]));
    set_option(&fd, id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &1i32.to_ne_bytes()).unwrap();
    assert_eq!(last(&m).1, bytes(24, &[(8, &[1]), (16, &[1]), (20, &[4])]));

    assert_eq!(migrate_id(&fd, id, 7).unwrap(), 0);
    assert_eq!(last(&m), ((18, 16, 4), bytes(16, &[(8, &[1]), (12, &[7])])));

    notify(&fd, id, 9).unwrap();
    assert_eq!(last(&m), ((15, 8, 0), bytes(8, &[(0, &[1]), (4, &[9])])));

    let mc = join_mcast(&fd, id, 0x55, &addr("239.1.1.1:0"), 0).unwrap();
    assert_eq!(
        last(&m),
        ((22, 152, 4), bytes(152, &[(8, &[0x55]), (16, &[1]), (20, &[16]), (24, &[2, 0, 0, 0, 239, 1, 1, 1])]))
    );
    leave_mcast(&fd, mc).unwrap();
    assert_eq!(last(&m), ((17, 16, 4), bytes(16, &[(8, &[mc as u8])])));
}

#[test]
fn get_event_reads_one_and_says_none_when_empty() {
    let (fd, m) = fd();
    let id = create_id(&fd, 0x77, RDMA_PS_TCP as u16, 0).unwrap();
    assert!(get_event(&fd).unwrap().is_none(), "EAGAIN is no event, not an error");
    assert_eq!(last(&m), ((12, 8, 336), bytes(8, &[])));
    m.push(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    let ev = get_event(&fd).unwrap().unwrap();
    assert_eq!((ev.uid, ev.id, ev.event), (0x77, id, RDMA_CM_EVENT_ADDR_RESOLVED));
    assert!(get_event(&fd).unwrap().is_none());
    assert_eq!(destroy_id(&fd, id).unwrap(), 1, "events_reported counts what GET_EVENT returned");
}

/// The readiness half of the above, apart: it needs `poll()`.
#[test]
#[cfg_attr(miri, ignore = "poll(2), which Miri cannot run; get_event_reads_one_and_says_none_when_empty runs there")]
fn the_fd_is_readable_while_an_event_is_queued() {
    let (fd, m) = fd();
    let id = create_id(&fd, 0x77, RDMA_PS_TCP as u16, 0).unwrap();
    assert!(!fd.wait_readable(0).unwrap());
    m.push(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    assert!(fd.wait_readable(0).unwrap(), "the fd is readable while an event is queued");
    get_event(&fd).unwrap().unwrap();
    assert!(!fd.wait_readable(0).unwrap());
}

/// The response and option pointers go into the body's fields at the
/// command's offsets, in the bytes `write()` sends.
#[test]
fn frames_carry_the_pointers() {
    let mut b = rdma_ucm_create_id { uid: 1, response: 0, ps: 0x106, qp_type: 0, reserved: [0; 5] };
    let mut r = [0u8; 4];
    let mut c = Command {
        cmd: RDMA_USER_CM_CMD_CREATE_ID,
        body: zerocopy::IntoBytes::as_mut_bytes(&mut b),
        resp: Some((8, &mut r)),
        input: None,
    };
    let mut f = [0xaa; 304];
    assert_eq!(c.frame(&mut f, 0x7fff_0000_1000, 0), Ok(32));
    assert_eq!(&f[..8], &[0, 0, 0, 0, 24, 0, 4, 0]);
    assert_eq!(&f[16..24], &0x7fff_0000_1000u64.to_le_bytes());

    let mut s = rdma_ucm_set_option { optval: 0, id: 3, level: 0, optname: 0, optlen: 1 };
    let v = [0x20u8];
    let mut c = Command {
        cmd: RDMA_USER_CM_CMD_SET_OPTION,
        body: zerocopy::IntoBytes::as_mut_bytes(&mut s),
        resp: None,
        input: Some((0, &v)),
    };
    assert_eq!(c.frame(&mut f, 0, 0x5555_0000_2000), Ok(32));
    assert_eq!(&f[..8], &[14, 0, 0, 0, 24, 0, 0, 0]);
    assert_eq!(&f[8..16], &0x5555_0000_2000u64.to_le_bytes());

    // The longest body fits; a longer one is refused, not cut.
    let mut long = [0u8; crate::sys::ucma::MAX_BODY + 1];
    let mut c = Command { cmd: RDMA_USER_CM_CMD_ACCEPT, body: &mut long[..], resp: None, input: None };
    assert_eq!(c.frame(&mut f, 0, 0), Err(Errno::EINVAL));
    let mut c = Command { cmd: RDMA_USER_CM_CMD_ACCEPT, body: &mut long[1..], resp: None, input: None };
    assert_eq!(c.frame(&mut f, 0, 0), Ok(8 + 296));
}

#[test]
fn errors_name_the_call_and_the_address() {
    let (fd, m) = fd();
    let id = create_id(&fd, 1, RDMA_PS_TCP as u16, 0).unwrap();
    m.fail_next(RDMA_USER_CM_CMD_BIND, Errno::EADDRINUSE);
    let e = bind(&fd, id, &addr("0.0.0.0:7174")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rdma_bind_addr: 0.0.0.0:7174 is already bound by another CM id (EADDRINUSE: Address already in use)"
    );
    m.fail_next(RDMA_USER_CM_CMD_RESOLVE_ADDR, Errno::ENODEV);
    let e = resolve_addr(&fd, id, None, &addr("10.9.9.9:1"), 100).unwrap_err();
    assert!(e.to_string().starts_with("rdma_resolve_addr: no RDMA device serves 10.9.9.9:1"), "{e}");
    m.fail_next(RDMA_USER_CM_CMD_CONNECT, Errno::EINVAL);
    assert!(connect(&fd, id, &rdma_ucm_conn_param::default(), rdma_ucm_ece::default()).is_err());
}
