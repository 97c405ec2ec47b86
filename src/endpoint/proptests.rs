//! Property tests of the endpoint codecs, what a peer sends before any QP
//! is connected (issue 32, hostile bytes): the binary message
//! (`Endpoint::from_bytes`), rdma-core's ping-pong text
//! (`Endpoint::from_text`) and the exchange over a stream
//! (`Endpoint::exchange`, with a peer that sends garbage, stops halfway,
//! trickles bytes, times out or fails). Each returns an endpoint or an
//! error, never a panic; what is accepted re-encodes to the same message.

use std::io::{self, Read, Write};

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::proptest_config::config;

fn any_endpoint() -> impl Strategy<Value = Endpoint> {
    let memory = prop_oneof![
        Just(None),
        (any::<u64>(), any::<u32>(), any::<u64>())
            .prop_filter_map("wraps", |(addr, rkey, len)| addr.checked_add(len).map(|_| RemoteMemory {
                addr,
                rkey,
                len
            }))
            .prop_map(Some),
    ];
    (any::<u16>(), 0..=MAX_24, 0..=MAX_24, any::<[u8; 16]>(), memory)
        .prop_map(|(lid, qpn, psn, gid, memory)| Endpoint { lid, qpn, psn, gid: Gid(gid), memory })
}

/// Binary messages: noise, a good message with bytes changed, or a good
/// header with noise after it; any length around the real one.
fn binary_message() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..64),
        (any_endpoint(), vec((0..Endpoint::WIRE_LEN, any::<u8>()), 1..4)).prop_map(|(e, patches)| {
            let mut b = e.to_bytes().expect("a valid endpoint").to_vec();
            for (at, v) in patches {
                b[at] = v;
            }
            b
        }),
        (vec(any::<u8>(), Endpoint::WIRE_LEN - 5..Endpoint::WIRE_LEN + 3), any::<u8>()).prop_map(|(rest, flags)| {
            let mut b = b"RVEP\x01".to_vec();
            b.extend(rest);
            b[5] = flags & 3;
            b
        }),
    ]
}

/// Text messages: noise, or text made of the characters the format uses
/// (hex digits, colons, NULs, and a few others), NUL-padded to any length.
fn text_message() -> impl Strategy<Value = Vec<u8>> {
    let chars = prop_oneof![
        6 => prop::sample::select(b"0123456789abcdefABCDEF".to_vec()),
        2 => Just(b':'),
        1 => Just(0u8),
        1 => prop::sample::select(b"xg -+\xff\xc3".to_vec()),
    ];
    prop_oneof![
        vec(any::<u8>(), 0..64),
        (vec(chars, 0..60), Endpoint::TEXT_LEN - 2..Endpoint::TEXT_LEN + 3).prop_map(|(mut t, len)| {
            t.resize(len, 0);
            t
        }),
        (any_endpoint(), vec((0..Endpoint::TEXT_LEN, any::<u8>()), 1..3)).prop_map(|(e, patches)| {
            let mut m = Endpoint { memory: None, ..e }.to_text().expect("a valid endpoint").to_vec();
            for (at, v) in patches {
                m[at] = v;
            }
            m
        }),
    ]
}

/// A peer on a byte stream: hands out `bytes` in `chunks`, then ends
/// with `end`; takes whatever we write.
#[derive(Debug)]
struct Peer {
    bytes: Vec<u8>,
    chunks: Vec<usize>,
    end: End,
    sent: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
enum End {
    Eof,
    TimedOut,
    Reset,
    /// Interrupted once, then end of file (a signal mid-read).
    Interrupted,
}

impl Read for Peer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.bytes.is_empty() || buf.is_empty() {
            return match std::mem::replace(&mut self.end, End::Eof) {
                End::Eof => Ok(0),
                End::TimedOut => Err(io::ErrorKind::WouldBlock.into()),
                End::Reset => Err(io::ErrorKind::ConnectionReset.into()),
                End::Interrupted => Err(io::ErrorKind::Interrupted.into()),
            };
        }
        let want = self.chunks.pop().unwrap_or(usize::MAX).max(1);
        let n = want.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes.drain(..n);
        Ok(n)
    }
}

impl Write for Peer {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.sent.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![Just(End::Eof), Just(End::TimedOut), Just(End::Reset), Just(End::Interrupted)]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn binary_messages_decode_or_fail(b in binary_message()) {
        if let Ok(e) = Endpoint::from_bytes(&b) {
            prop_assert!(e.qpn <= MAX_24 && e.psn <= MAX_24);
            prop_assert_eq!(&e.to_bytes().unwrap()[..], &b[..], "what is accepted re-encodes to itself");
        }
    }

    #[test]
    fn text_messages_decode_or_fail(m in text_message()) {
        match Endpoint::from_text(&m) {
            Ok(e) => {
                prop_assert!(e.qpn <= MAX_24 && e.psn <= MAX_24 && e.memory.is_none());
                // rdma-core's sscanf takes short and upper-case fields: the
                // canonical text of what was read reads back the same.
                prop_assert_eq!(Endpoint::from_text(&e.to_text().unwrap()).unwrap(), e);
            }
            Err(err) => prop_assert!(err.message().starts_with("malformed address \""), "{}", err.message()),
        }
    }

    #[test]
    fn valid_endpoints_round_trip(e in any_endpoint()) {
        prop_assert_eq!(Endpoint::from_bytes(&e.to_bytes().unwrap()).unwrap(), e);
        let plain = Endpoint { memory: None, ..e };
        prop_assert_eq!(Endpoint::from_text(&plain.to_text().unwrap()).unwrap(), plain);
    }

    #[test]
    fn exchange_with_a_hostile_peer_ends(
        mine in any_endpoint(),
        theirs in prop_oneof![binary_message(), any_endpoint().prop_map(|e| e.to_bytes().unwrap().to_vec())],
        chunks in vec(0usize..60, 0..8),
        end in end(),
    ) {
        let mut peer = Peer { bytes: theirs.clone(), chunks, end, sent: Vec::new() };
        match mine.exchange(&mut peer) {
            Ok(e) => {
                prop_assert!(theirs.len() >= Endpoint::WIRE_LEN);
                prop_assert_eq!(Endpoint::from_bytes(&theirs[..Endpoint::WIRE_LEN]).unwrap(), e);
            }
            Err(err) => prop_assert!(!err.message().is_empty()),
        }
        prop_assert_eq!(peer.sent, mine.to_bytes().unwrap().to_vec());
    }
}
