//! The out-of-band exchange over TCP, byte for byte as rdma-core's
//! examples do it (the module docs of [`pingpong`](super) describe the
//! messages): the client's `pp_client_exch_dest()`, the server's
//! `pp_server_exch_dest()`, every read bounded by `--timeout`.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use rverbs::Endpoint;

use super::options::Mode;
use super::setup::PingPong;
use super::{lib_err, MAX_QP};

/// One address message: `"0000:000000:000000:" + 32 hex digits + NUL`
/// ([`Endpoint::to_text`]).
const MSG_LEN: usize = Endpoint::TEXT_LEN;
/// What the client sends after it has the server's address.
const DONE: &[u8; 5] = b"done\0";

/// Which end of the TCP connection we talk to, for messages.
#[derive(Clone, Copy)]
enum Peer {
    Server,
    Client,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Server => "server",
            Peer::Client => "client",
        }
    }
}

fn read_exact_from(s: &mut TcpStream, buf: &mut [u8], peer: Peer, what: &str, timeout: Duration) -> Result<(), String> {
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => {
                return Err(format!(
                    "the {} closed the connection after {n} of the {} bytes of {what}",
                    peer.name(),
                    buf.len()
                ))
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(format!(
                    "no {what} from the {} within {} s (got {n} of {} bytes)",
                    peer.name(),
                    timeout.as_secs(),
                    buf.len()
                ))
            }
            Err(e) => return Err(format!("cannot read {what} from the {}: {e}", peer.name())),
        }
    }
    Ok(())
}

fn write_to(s: &mut TcpStream, buf: &[u8], peer: Peer, what: &str) -> Result<(), String> {
    s.write_all(buf).map_err(|e| format!("cannot send {what} to the {}: {e}", peer.name()))
}

/// Messages on the wire: one per QP, 256 with `--srq` (unused ones zero).
fn encode_all(mode: Mode, mine: &[Endpoint]) -> Result<Vec<u8>, String> {
    let count = if mode == Mode::Srq { MAX_QP } else { 1 };
    let mut v = Vec::with_capacity(count * MSG_LEN);
    for i in 0..count {
        let text = mine.get(i).copied().unwrap_or_default().to_text();
        v.extend_from_slice(&text.map_err(lib_err("Couldn't encode our address"))?);
    }
    Ok(v)
}

fn read_all(s: &mut TcpStream, mode: Mode, peer: Peer, timeout: Duration) -> Result<Vec<Endpoint>, String> {
    let count = if mode == Mode::Srq { MAX_QP } else { 1 };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let mut m = [0u8; MSG_LEN];
        let what = if count == 1 { "its address".to_string() } else { format!("its address [{i}]") };
        read_exact_from(s, &mut m, peer, &what, timeout)?;
        out.push(Endpoint::from_text(&m).map_err(|e| format!("the {} sent a {}", peer.name(), e.message()))?);
    }
    Ok(out)
}

/// A read of the exchange gives up after `timeout` (`SO_RCVTIMEO`). Writes
/// need no limit (one message of at most a few hundred bytes into a fresh
/// connection's buffer never blocks), nor `TCP_NODELAY` (each side sends
/// only after it has read the other's, so Nagle never holds a segment
/// back): each would be one more syscall per side.
fn set_read_timeout(s: &TcpStream, timeout: Duration) -> Result<(), String> {
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())
}

/// `pp_client_exch_dest()`.
pub fn client_exchange(
    host: &str,
    port: u16,
    timeout: Duration,
    mode: Mode,
    mine: &[Endpoint],
) -> Result<Vec<Endpoint>, String> {
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}"))?.collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(mut s) = stream else {
        return Err(match last {
            Some(e) => format!("Couldn't connect to {host}:{port}: {e}"),
            None => format!("Couldn't connect to {host}:{port}: the name has no address"),
        });
    };
    set_read_timeout(&s, timeout)?;
    write_to(&mut s, &encode_all(mode, mine)?, Peer::Server, "our address")?;
    let remote = read_all(&mut s, mode, Peer::Server, timeout).map_err(|e| {
        if e.contains("closed the connection after 0 of") {
            format!(
                "{e} (it gave up on our address: same mode (--ud/--srq, -q) on both sides? \
                 an rdma-core server on RoCE needs -g)"
            )
        } else {
            e
        }
    })?;
    write_to(&mut s, DONE, Peer::Server, "'done'")?;
    Ok(remote)
}

/// Listens on every address of `port` (IPv6 and IPv4 where the kernel
/// has a dual stack), with `SO_REUSEADDR` as rdma-core sets it.
fn listen(port: u16) -> Result<TcpListener, String> {
    let v6 = TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    match v6 {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(format!("Couldn't listen to port {port}: {e}")),
        Err(_) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .map_err(|e| format!("Couldn't listen to port {port}: {e}")),
    }
}

/// `pp_server_exch_dest()`: accept one client, read its address(es),
/// connect, answer with ours, wait for its `done`.
pub fn server_exchange(
    pp: &mut PingPong,
    port: u16,
    timeout: Duration,
    mine: &[Endpoint],
) -> Result<Vec<Endpoint>, String> {
    let listener = listen(port)?;
    let (mut s, _) = loop {
        match listener.accept() {
            Ok(c) => break c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("accept() failed: {e}")),
        }
    };
    drop(listener);
    set_read_timeout(&s, timeout)?;
    let remote = read_all(&mut s, pp.mode, Peer::Client, timeout)?;
    pp.connect(mine, &remote).map_err(|e| format!("Couldn't connect to remote QP: {e}"))?;
    write_to(&mut s, &encode_all(pp.mode, mine)?, Peer::Client, "our address")?;
    let mut done = [0u8; DONE.len()];
    read_exact_from(&mut s, &mut done, Peer::Client, "'done'", timeout)?;
    if &done != DONE {
        return Err(format!("the client sent \"{}\" instead of 'done'", done.escape_ascii()));
    }
    Ok(remote)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_from_the_peer_reads_as_before() {
        // The wording the interop tests (and users' scripts) look for.
        let e = Endpoint::from_text(&[b'?'; MSG_LEN]).unwrap_err();
        assert!(format!("the server sent a {}", e.message()).starts_with("the server sent a malformed address \"???"));
    }

    #[test]
    fn srq_exchanges_256_messages() {
        let mine = [Endpoint { lid: 0, qpn: 0x20, psn: 1, ..Endpoint::default() }];
        let v = encode_all(Mode::Srq, &mine).unwrap();
        assert_eq!(v.len(), 256 * MSG_LEN);
        assert_eq!(&v[..11], b"0000:000020");
        assert_eq!(&v[MSG_LEN..MSG_LEN + 11], b"0000:000000");
        assert_eq!(encode_all(Mode::Rc, &mine).unwrap().len(), MSG_LEN);
    }
}
