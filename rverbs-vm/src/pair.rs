//! Two guests on one virtual wire: each has a virtio NIC (`eth0`) on a QEMU
//! socket network, an address in one /24 and rxe0 on `eth0`, so RoCE v2
//! packets travel between two kernels.
//!
//! Host A (`192.168.78.1`) gets `-netdev socket,listen=127.0.0.1:PORT` and
//! is started first; host B (`192.168.78.2`) gets `connect=` and starts once
//! A's QEMU listens (read from `/proc/net/tcp`, never by connecting: QEMU
//! would take that connection as its peer). What the two run, and how they
//! find each other, is up to their payloads (see [`crate::guest::net_payload`]).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::console::LineKind;
use crate::runner::{self, Guest, Outcome, Payload};
use crate::util::Result;

/// The /24 both hosts sit in.
pub const NET: &str = "192.168.78";
/// The guests' NIC.
pub const NETDEV: &str = "eth0";
/// How long B waits for A's QEMU to listen.
const LISTEN_WAIT: Duration = Duration::from_secs(180);

/// The two hosts' names, A then B.
pub const HOSTS: [&str; 2] = ["A", "B"];

/// The address of host `i` (0 = A, 1 = B), without the prefix length.
pub fn host_ip(i: usize) -> String {
    format!("{NET}.{}", i + 1)
}

/// One wire: the loopback port A listens on.
#[derive(Debug, Clone, Copy)]
pub struct Wire {
    pub port: u16,
}

impl Wire {
    /// A wire on a port of 127.0.0.1 that is free now.
    pub fn new() -> Result<Wire> {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot pick a free port: {e}"))?;
        let port = l.local_addr().map(|a| a.port()).map_err(|e| format!("cannot pick a free port: {e}"))?;
        Ok(Wire { port })
    }

    /// QEMU arguments of host `i` (0 = A listens, 1 = B connects).
    pub fn qemu_args(&self, i: usize) -> Vec<String> {
        let side = if i == 0 { "listen" } else { "connect" };
        vec![
            "-netdev".into(),
            format!("socket,id=n0,{side}=127.0.0.1:{}", self.port),
            "-device".into(),
            format!("virtio-net-pci,netdev=n0,mac=52:54:00:78:00:{:02x}", i + 1),
        ]
    }

    /// True when something listens on 127.0.0.1:`port` (from /proc/net/tcp).
    fn listening(&self) -> bool {
        let want = format!("0100007F:{:04X}", self.port);
        std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
            t.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && w[1] == want && w[3] == "0A"
            })
        })
    }
}

/// Boots A with `payloads[0]`, then B with `payloads[1]` once A's QEMU
/// listens, and waits for both. Each payload's `qemu_args` must hold
/// [`Wire::qemu_args`]. `show` gets every console line with the host's
/// name. `Err` for a host whose boot could not be made at all.
pub fn boot(
    guest: &Guest,
    wire: &Wire,
    payloads: [&Payload; 2],
    show: &(dyn Fn(&str, LineKind, &str) + Sync),
) -> [Result<Outcome>; 2] {
    let boot = |i: usize| runner::run(guest, payloads[i], false, &mut |kind, line| show(HOSTS[i], kind, line));
    std::thread::scope(|sc| {
        let a = sc.spawn(|| boot(0));
        // B's QEMU connects at start-up, so A's must listen first.
        let deadline = Instant::now() + LISTEN_WAIT;
        while !wire.listening() && !a.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let b = if wire.listening() {
            Ok(sc.spawn(|| boot(1)))
        } else {
            Err(format!("host A's QEMU never listened on 127.0.0.1:{} (see its console)", wire.port))
        };
        let b = b.and_then(|h| h.join().unwrap_or_else(|_| Err("host B's runner panicked".into())));
        let a = a.join().unwrap_or_else(|_| Err("host A's runner panicked".into()));
        [a, b]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_arguments() {
        let w = Wire { port: 4321 };
        assert_eq!(w.qemu_args(0)[1], "socket,id=n0,listen=127.0.0.1:4321");
        assert_eq!(w.qemu_args(1)[1], "socket,id=n0,connect=127.0.0.1:4321");
        assert!(w.qemu_args(1)[3].ends_with("mac=52:54:00:78:00:02"));
        assert_eq!((host_ip(0), host_ip(1)), ("192.168.78.1".to_owned(), "192.168.78.2".to_owned()));
    }
}
