//! Property tests of CM event decoding (issue 32, hostile bytes): whatever
//! the kernel's rdma_cm fd answers to GET_EVENT (any event number, status,
//! uid and kernel id, ours or not, any connection or UD parameters with
//! any private-data length, any ECE) and to the QUERY that follows some
//! events (any addresses, GUID, port), `EventChannel::try_get_event`
//! returns an event, `None` (an id that is gone), or an error, never a
//! panic; the queue drains (no event is read twice, none loops); and
//! every accessor of what it returns, the error it implies included,
//! works. Driven through the model of the kernel's fd (`ucma_mock`).

use proptest::collection::vec;
use proptest::prelude::*;
use rverbs_providers::sys::ucma::UcmaFd;
use rverbs_providers::sys::ucma_mock::MockUcma;
use rverbs_uapi::rdma_user_cm::*;
use zerocopy::FromBytes;

use super::*;
use crate::proptest_config::config;

/// Whose uid / kernel id an event carries.
#[derive(Clone, Copy, Debug)]
enum Who {
    Tcp,
    Udp,
    /// A listener's new child (CONNECT_REQUEST's id).
    Child,
    Zero,
    Any(u32),
}

#[derive(Clone, Debug)]
struct RawEvent {
    uid: Who,
    id: Who,
    event: u32,
    status: u32,
    param: Vec<u32>,
    private_data_len: u8,
    ece: (u32, u32),
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![
        3 => Just(Who::Tcp),
        3 => Just(Who::Udp),
        1 => Just(Who::Child),
        1 => Just(Who::Zero),
        1 => any::<u32>().prop_map(Who::Any),
    ]
}

fn raw_event() -> impl Strategy<Value = RawEvent> {
    let event = prop_oneof![4 => 0u32..17, 1 => any::<u32>()];
    let status = prop_oneof![
        Just(0u32),
        (0i32..200).prop_map(|e| e.wrapping_neg() as u32),
        Just(i32::MIN as u32),
        Just(i32::MAX as u32),
        any::<u32>(),
    ];
    (who(), who(), event, status, vec(any::<u32>(), 76), any::<u8>(), any::<(u32, u32)>()).prop_map(
        |(uid, id, event, status, param, private_data_len, ece)| RawEvent {
            uid,
            id,
            event,
            status,
            param,
            private_data_len,
            ece,
        },
    )
}

/// A QUERY(ADDR) answer: noise, with the families the decoder knows
/// sometimes in place.
fn query_answer() -> impl Strategy<Value = rdma_ucm_query_addr_resp> {
    let family = prop_oneof![Just(AF_INET), Just(AF_INET6), Just(AF_IB), any::<u16>()];
    (vec(any::<u8>(), size_of::<rdma_ucm_query_addr_resp>()), family.clone(), family).prop_map(|(b, sf, df)| {
        let mut r = rdma_ucm_query_addr_resp::read_from_bytes(&b).expect("whole size");
        r.src_addr.ss_family = sf;
        r.dst_addr.ss_family = df;
        r
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_event_decodes_or_fails(
        events in vec(raw_event(), 1..6),
        query in prop::option::of(query_answer()),
        listen in any::<bool>(),
    ) {
        let m = MockUcma::new();
        let ch = EventChannel::from_fd(UcmaFd::mock(m.clone()));
        let tcp = ch.create_id(PortSpace::Tcp).unwrap();
        let udp = ch.create_id(PortSpace::Udp).unwrap();
        if listen {
            tcp.listen(4).unwrap();
        }
        if let Some(q) = query {
            m.set_query_addr(q);
        }
        for e in &events {
            let pick = |w: Who| match w {
                Who::Tcp => (tcp.uid(), tcp.kernel_id()),
                Who::Udp => (udp.uid(), udp.kernel_id()),
                Who::Child => (0, m.new_child()),
                Who::Zero => (0, 0),
                Who::Any(v) => (u64::from(v) << 7 | 3, v),
            };
            let mut ev = rdma_ucm_event_resp {
                uid: pick(e.uid).0,
                id: pick(e.id).1,
                event: e.event,
                status: e.status,
                ..Default::default()
            };
            ev.param.copy_from_slice(&e.param);
            // The private-data length sits at a different place in the
            // two views of the union: set it in the one the id reads.
            let mut c = ev.conn();
            c.private_data_len = e.private_data_len;
            ev.set_conn(&c);
            if matches!(e.uid, Who::Udp) {
                ev.param.copy_from_slice(&e.param);
                let mut u = ev.ud();
                u.private_data_len = e.private_data_len;
                ev.set_ud(&u);
            }
            ev.ece = rdma_ucm_ece { vendor_id: e.ece.0, attr_mod: e.ece.1 };
            m.push_event(ev);
        }
        let mut got = 0;
        for _ in 0..=events.len() {
            match ch.try_get_event() {
                Ok(Some(ev)) => {
                    got += 1;
                    let n = ev.private_data().len();
                    prop_assert!(n <= usize::from(u8::MAX));
                    prop_assert_eq!(ev.kind().raw(), ev.kind().raw());
                    let _ = (ev.status(), ev.ece(), ev.conn_param(), ev.ud_param(), ev.listen_id().map(CmId::uid));
                    if let Some(c) = ev.conn_param() {
                        prop_assert!(c.qp_num <= 0xff_ffff);
                    }
                    if let Some(u) = ev.ud_param() {
                        prop_assert!(u.qp_num <= 0xff_ffff);
                    }
                    let id = ev.id();
                    let _ = (id.local_addr(), id.peer_addr(), id.gids(), id.port_num(), id.node_guid());
                    let _ = format!("{} {:?}", ev.kind(), ev.kind());
                    if let Some(err) = ev.error() {
                        prop_assert!(!err.to_string().is_empty());
                    }
                }
                Ok(None) => {}
                Err(err) => prop_assert!(!err.to_string().is_empty()),
            }
            if m.pending() == 0 {
                break;
            }
        }
        prop_assert_eq!(m.pending(), 0, "events left unread after {} reads", events.len() + 1);
        prop_assert!(got <= events.len());
        prop_assert!(ch.try_get_event().unwrap().is_none());
    }
}
