//! Property tests of the ping-pong's TCP exchange (issue 32, hostile
//! bytes): what `read_all` takes from the peer (rdma-core's 52-byte
//! address messages, one, or 256 with `--srq`) over a real loopback TCP
//! connection, when the peer sends noise, good messages with bytes
//! changed, too few bytes, or stops sending without closing. Each read
//! gives the peer's endpoints or a one-line error that names the peer,
//! never a panic, and never waits past `--timeout`.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::proptest_config::config;

/// The loopback listener every case connects to (one per test binary).
fn listener() -> &'static TcpListener {
    static L: OnceLock<TcpListener> = OnceLock::new();
    L.get_or_init(|| TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
}

/// A connected pair: (ours, the peer's). The peer's side resets the
/// connection when dropped (`SO_LINGER` 0), so that the cases leave no
/// `TIME_WAIT` behind to use up the loopback's ports in a long fuzz run.
fn pair() -> (TcpStream, TcpStream) {
    let l = listener();
    let ours = TcpStream::connect(l.local_addr().unwrap()).expect("connect to loopback");
    let (theirs, _) = l.accept().expect("accept on loopback");
    let reset = nix::libc::linger { l_onoff: 1, l_linger: 0 };
    nix::sys::socket::setsockopt(&theirs, nix::sys::socket::sockopt::Linger, &reset).expect("SO_LINGER");
    (ours, theirs)
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (any::<u16>(), 0u32..=0xff_ffff, 0u32..=0xff_ffff, any::<[u8; 16]>()).prop_map(|(lid, qpn, psn, gid)| Endpoint {
        lid,
        qpn,
        psn,
        gid: rverbs::Gid(gid),
        memory: None,
    })
}

/// What the peer sends: its messages (with bytes changed, cut short, or
/// made longer), or noise.
fn wire(mode: Mode) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (vec(endpoint(), 1..3), vec((any::<prop::sample::Index>(), any::<u8>()), 0..3), any::<prop::sample::Index>())
            .prop_map(move |(eps, patches, cut)| {
                let mut b = encode_all(mode, &eps).unwrap();
                for (at, v) in patches {
                    let i = at.index(b.len());
                    b[i] = v;
                }
                // Mostly whole, sometimes cut anywhere.
                if cut.index(4) == 0 {
                    b.truncate(cut.index(b.len() + 1));
                }
                b
            }),
        vec(any::<u8>(), 0..120),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    // `--srq` reads 256 messages a case: a smaller share keeps the cases cheap.
    prop_oneof![2 => Just(Mode::Rc), 2 => Just(Mode::Ud), 1 => Just(Mode::Srq)]
}

/// How long a case may wait for a peer that sends nothing more.
const TIMEOUT: Duration = Duration::from_millis(5);

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_peers_addresses_read_or_fail(
        (mode, bytes) in mode().prop_flat_map(|m| (Just(m), wire(m))),
        // 1 in 100: the peer keeps the connection open, silent.
        stall in prop::bool::weighted(0.01),
    ) {
        let (mut ours, mut theirs) = pair();
        set_read_timeout(&ours, TIMEOUT).unwrap();
        theirs.write_all(&bytes).unwrap();
        if !stall {
            theirs.shutdown(Shutdown::Write).unwrap();
        }
        let start = Instant::now();
        let got = read_all(&mut ours, mode, Peer::Client, TIMEOUT);
        // One timeout per read at most (a silent peer), with room for a
        // loaded machine: a read that waited for ever would not return.
        prop_assert!(start.elapsed() < TIMEOUT + Duration::from_secs(2), "read for {:?}", start.elapsed());
        let count = if mode == Mode::Srq { MAX_QP } else { 1 };
        match got {
            Ok(eps) => {
                prop_assert_eq!(eps.len(), count);
                prop_assert!(bytes.len() >= count * MSG_LEN);
                for (i, e) in eps.iter().enumerate() {
                    let m = &bytes[i * MSG_LEN..(i + 1) * MSG_LEN];
                    prop_assert_eq!(Endpoint::from_text(m).unwrap(), *e);
                }
            }
            Err(e) => {
                prop_assert!(e.contains("client") && !e.contains('\n'), "{}", e);
                if bytes.len() < count * MSG_LEN && !stall {
                    prop_assert!(e.contains("closed the connection") || e.contains("malformed"), "{}", e);
                }
            }
        }
    }
}
