//! Property tests of the RDMA netlink reply decoders (issue 32, hostile
//! bytes): a datagram from the kernel split into messages (`messages`),
//! the messages of one transaction picked out of it (`absorb`), a payload
//! split into attributes (`attrs`), a `GET_CHARDEV` payload decoded
//! (`parse_chardev`, and the field readers `RdmaNetlink::devices` uses)
//! and a `SYS_GET` payload's copy-on-fork flag (`copy_on_fork_of`).
//! Whatever the bytes: a value, never a panic, an out-of-bounds slice or an
//! endless loop (each iterator is cut off past the most items the bytes
//! can hold, so a loop that stops advancing fails instead of hanging).

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::proptest_config::config;

/// Our port id and the sequence number the transactions below wait for.
const ME: u32 = 0x1234;
const SEQ: u32 = 7;

/// One message header with chosen fields, then `payload`, then padding to
/// 4 bytes; `len_delta` makes `nlmsg_len` lie (shorter, longer, or 0).
#[derive(Clone, Debug)]
struct RawMsg {
    ty: u16,
    seq: u32,
    pid: u32,
    payload: Vec<u8>,
    len: LenField,
}

#[derive(Clone, Copy, Debug)]
enum LenField {
    True,
    Delta(i32),
    Raw(u32),
}

impl RawMsg {
    fn bytes(&self) -> Vec<u8> {
        let real = NLMSG_HDRLEN + self.payload.len();
        let len = match self.len {
            LenField::True => real as u32,
            LenField::Delta(d) => (real as i64 + i64::from(d)).clamp(0, i64::from(u32::MAX)) as u32,
            LenField::Raw(v) => v,
        };
        let mut m = Vec::with_capacity(real + 3);
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&self.ty.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&self.pid.to_ne_bytes());
        m.extend_from_slice(&self.payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }
}

fn raw_msg() -> impl Strategy<Value = RawMsg> {
    let ty = prop_oneof![Just(NLMSG_ERROR), Just(NLMSG_DONE), Just(0x1401u16), Just(0x140f), any::<u16>()];
    let seq = prop_oneof![3 => Just(SEQ), 1 => any::<u32>()];
    let pid = prop_oneof![3 => Just(ME), 1 => any::<u32>()];
    let len = prop_oneof![
        6 => Just(LenField::True),
        2 => (-20i32..20).prop_map(LenField::Delta),
        1 => any::<u32>().prop_map(LenField::Raw),
    ];
    (ty, seq, pid, vec(any::<u8>(), 0..24), len).prop_map(|(ty, seq, pid, payload, len)| RawMsg {
        ty,
        seq,
        pid,
        payload,
        len,
    })
}

/// A datagram: well-formed-ish messages, sometimes with noise appended.
fn datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (vec(raw_msg(), 0..6), vec(any::<u8>(), 0..8)).prop_map(|(ms, tail)| {
            let mut d: Vec<u8> = ms.iter().flat_map(RawMsg::bytes).collect();
            d.extend(tail);
            d
        }),
        1 => vec(any::<u8>(), 0..96),
    ]
}

/// One attribute with a chosen (possibly lying) `nla_len`.
fn raw_attr() -> impl Strategy<Value = Vec<u8>> {
    let ty = prop_oneof![
        Just(RDMA_NLDEV_ATTR_CHARDEV_NAME as u16),
        Just(RDMA_NLDEV_ATTR_CHARDEV_ABI as u16),
        Just(RDMA_NLDEV_ATTR_CHARDEV as u16),
        Just(RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID as u16),
        Just(RDMA_NLDEV_ATTR_DEV_INDEX as u16),
        Just(RDMA_NLDEV_ATTR_DEV_NAME as u16),
        Just(RDMA_NLDEV_ATTR_NODE_GUID as u16),
        Just(RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK as u16),
        any::<u16>(),
    ];
    let len_delta = prop_oneof![6 => Just(0i32), 1 => -8i32..8, 1 => any::<u16>().prop_map(i32::from)];
    (ty, vec(any::<u8>(), 0..12), len_delta).prop_map(|(ty, v, d)| {
        let real = 4 + v.len() as i32;
        let len = if d > 255 { d } else { (real + d).max(0) } as u16;
        let mut a = Vec::new();
        a.extend_from_slice(&len.to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend(v);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    })
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => vec(raw_attr(), 0..6).prop_map(|v| v.concat()),
        1 => vec(any::<u8>(), 0..64),
    ]
}

/// True when `inner` lies within `outer` (same allocation, in bounds).
fn within(inner: &[u8], outer: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn messages_stay_in_the_datagram_and_end(d in datagram()) {
        // Each message takes at least a 16-byte header.
        let ms: Vec<Msg<'_>> = messages(&d).take(d.len() / NLMSG_HDRLEN + 1).collect();
        prop_assert!(ms.len() <= d.len() / NLMSG_HDRLEN, "{} messages out of {} bytes", ms.len(), d.len());
        for m in &ms {
            prop_assert!(within(m.payload, &d));
        }
    }

    #[test]
    fn absorb_takes_only_this_transactions_replies(d in datagram(), single in any::<bool>()) {
        let mut out = Vec::new();
        let end = absorb(&d, SEQ, ME, single, &mut out);
        // Every payload taken is one of a message of ours, and a single
        // request ends with its first reply.
        let ours: Vec<Msg<'_>> = messages(&d).filter(|m| m.seq == SEQ && m.pid == ME).collect();
        prop_assert!(out.len() <= ours.len());
        for (ty, p) in &out {
            prop_assert!(*ty != NLMSG_DONE && *ty != NLMSG_ERROR);
            prop_assert!(ours.iter().any(|m| m.ty == *ty && m.payload == &p[..]));
        }
        if single && !out.is_empty() {
            prop_assert_eq!(out.len(), 1);
            prop_assert_eq!(end, Some(Ok(())));
        }
    }

    #[test]
    fn attrs_stay_in_the_payload_and_end(p in payload()) {
        let all: Vec<(u16, &[u8])> = attrs(&p).take(p.len() / 4 + 1).collect();
        prop_assert!(all.len() <= p.len() / 4, "{} attributes out of {} bytes", all.len(), p.len());
        for (ty, v) in &all {
            prop_assert!(*ty <= 0x3fff);
            prop_assert!(within(v, &p));
        }
    }

    #[test]
    fn chardev_replies_decode(p in payload()) {
        let c = parse_chardev(&p);
        prop_assert!(!c.name.contains('\0'));
        prop_assert!(c.dev.0 <= 0xfff && c.dev.1 <= 0xf_ffff);
        // The readers `devices` uses: short values read as 0, never past the value.
        for (_, v) in attrs(&p) {
            let _ = (u32_of(v), u64_of(v), str_of(v), v.first().copied().unwrap_or(0));
            if v.len() < 4 {
                prop_assert_eq!(u32_of(v), 0);
            }
            if v.len() < 8 {
                prop_assert_eq!(u64_of(v), 0);
            }
        }
    }

    #[test]
    fn sys_get_replies_decode(p in payload(), v in any::<u8>()) {
        let _ = copy_on_fork_of(&p);
        // Whole attributes, then COPY_ON_FORK: its value decides.
        let whole: Vec<u8> = attrs(&p)
            .flat_map(|(ty, v)| {
                let mut a = ((4 + v.len()) as u16).to_ne_bytes().to_vec();
                a.extend_from_slice(&ty.to_ne_bytes());
                a.extend_from_slice(v);
                a.resize(a.len().next_multiple_of(4), 0);
                a
            })
            .collect();
        let mut q = whole.clone();
        q.extend_from_slice(&[5, 0, RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK as u8, 0, v, 0, 0, 0]);
        let earlier = copy_on_fork_of(&whole);
        prop_assert_eq!(copy_on_fork_of(&q), earlier || v != 0);
    }
}
