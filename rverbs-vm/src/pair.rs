//! Two guests on one virtual wire: each has a virtio NIC (`eth0`) on a QEMU
//! stream network, an address in one /24 and rxe0 on `eth0`, so RoCE v2
//! packets travel between two kernels.
//!
//! The wire is a unix socket in a new directory of mode 0700 (no TCP port
//! another local user could connect to first and become a guest's peer).
//! Host A (`192.168.78.1`) gets `-netdev stream,server=on` on it and is
//! started first; host B (`192.168.78.2`) gets `server=off` and starts once
//! A's QEMU listens (read from `/proc/net/unix`, never by connecting: QEMU
//! would take that connection as its peer). What the two run, and how they
//! find each other, is up to their payloads (see [`crate::guest::net_payload`]).

use std::path::{Path, PathBuf};
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

/// One wire: the unix socket A listens on, in a directory of its own.
#[derive(Debug)]
pub struct Wire {
    pub socket: PathBuf,
}

impl Wire {
    /// A wire in a new private directory (mode 0700, a random name under
    /// the system's temporary directory: a unix socket's path must stay
    /// under 108 bytes, which a deep work directory would not).
    pub fn new() -> Result<Wire> {
        let dir = crate::util::private_dir(&std::env::temp_dir(), "rverbs-wire-")?;
        Ok(Wire { socket: dir.join("wire.sock") })
    }

    /// QEMU arguments of host `i` (0 = A listens, 1 = B connects).
    pub fn qemu_args(&self, i: usize) -> Vec<String> {
        let server = if i == 0 { "on" } else { "off" };
        vec![
            "-netdev".into(),
            format!("stream,id=n0,server={server},addr.type=unix,addr.path={}", self.socket.display()),
            "-device".into(),
            format!("virtio-net-pci,netdev=n0,mac=52:54:00:78:00:{:02x}", i + 1),
        ]
    }

    /// True when a socket listens at the wire's path (from /proc/net/unix:
    /// flags `00010000` are `__SO_ACCEPTCON`, a listening socket).
    fn listening(&self) -> bool {
        let want = self.socket.to_string_lossy();
        std::fs::read_to_string("/proc/net/unix").is_ok_and(|t| {
            t.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 7 && w[3] == "00010000" && w[7] == want
            })
        })
    }

    /// Where the wire is, for reports.
    pub fn describe(&self) -> String {
        format!("-netdev stream on the unix socket {}", self.socket.display())
    }

    fn dir(&self) -> Option<&Path> {
        self.socket.parent()
    }
}

impl Drop for Wire {
    /// Removes the socket and its directory.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        if let Some(d) = self.dir() {
            let _ = std::fs::remove_dir(d);
        }
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
            Err(format!("host A's QEMU never listened on {} (see its console)", wire.socket.display()))
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
        let w = Wire::new().unwrap();
        let dir = w.socket.parent().unwrap().to_path_buf();
        let at = w.socket.display().to_string();
        assert_eq!(w.qemu_args(0)[1], format!("stream,id=n0,server=on,addr.type=unix,addr.path={at}"));
        assert_eq!(w.qemu_args(1)[1], format!("stream,id=n0,server=off,addr.type=unix,addr.path={at}"));
        assert!(w.qemu_args(1)[3].ends_with("mac=52:54:00:78:00:02"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(!w.listening());
        drop(w);
        assert!(!dir.exists());
        assert_eq!((host_ip(0), host_ip(1)), ("192.168.78.1".to_owned(), "192.168.78.2".to_owned()));
    }
}
