//! What the examples share: who plays which side, the TCP connection the
//! endpoint handshake runs over (plain `std::net`), waiting for the next
//! completion with a deadline, the device (`RVERBS_DEVICE`, else the
//! first), and for the CM examples' loopback the device's IPv4 address.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use rverbs::{CompletionQueue, Wc};

/// Opens the device `RVERBS_DEVICE` names (`rxe0`, `siw0`), else the first
/// one (`ibv_open_device` on `ibv_get_device_list()[0]`, as rdma-core's
/// examples do without `-d`).
#[allow(dead_code)] // the CM examples reach it only through device_ipv4
pub fn open_device() -> Result<rverbs::Context> {
    let dev = match std::env::var("RVERBS_DEVICE") {
        Ok(name) if !name.is_empty() => rverbs::device_by_name(&name)?,
        _ => rverbs::devices()?.into_iter().next().ok_or("no RDMA device")?,
    };
    Ok(dev.open()?)
}

/// The TCP port rdma-core's ping-pong examples use.
pub const PORT: u16 = 18515;

/// Which side this process plays.
#[derive(Clone, Debug)]
pub enum Role {
    /// Wait for a client on [`PORT`].
    Server,
    /// Connect to the server on this host.
    Client(String),
    /// Both, on two threads of this process (what `cargo xtask test` runs).
    Loopback,
}

impl Role {
    /// `[HOST | --loopback]` from the command line: no argument is the server.
    pub fn from_args() -> Role {
        match std::env::args().nth(1).as_deref() {
            None => Role::Server,
            Some("--loopback") => Role::Loopback,
            Some(host) => Role::Client(host.to_owned()),
        }
    }
}

/// The error type of the examples' `main`s.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long an example waits for a completion or a peer before it fails
/// instead of hanging.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The next completion of `cq`, within [`TIMEOUT`]:
/// `CompletionQueue::wait_any` sleeps on the CQ's completion channel when
/// it has one and polls otherwise, and returns 0 completions only when
/// the time is up. Check the status with `Wc::ok()?`, which turns an
/// error status into an error naming it, the work request and the QP.
#[allow(dead_code)] // not the async example
pub fn next_wc(cq: &mut CompletionQueue) -> Result<Wc> {
    let mut wc = [Wc::default()];
    match cq.wait_any(&mut wc, Some(TIMEOUT))? {
        0 => Err(format!("no completion within {TIMEOUT:?}").into()),
        _ => Ok(wc[0]),
    }
}

/// Runs `server` and `client` as `role` says: for a loopback, the server on
/// a thread listening on an ephemeral port of 127.0.0.1, the client here.
pub fn run<S, C>(role: Role, server: S, client: C) -> Result
where
    S: FnOnce(TcpStream) -> Result + Send + 'static,
    C: FnOnce(TcpStream) -> Result,
{
    match role {
        Role::Server => server(accept(TcpListener::bind(("0.0.0.0", PORT))?)?),
        Role::Client(host) => client(connect(&host, PORT)?),
        Role::Loopback => {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            let port = listener.local_addr()?.port();
            let server = std::thread::spawn(move || accept(listener).and_then(server));
            let c = connect("127.0.0.1", port).and_then(client);
            let s = server.join().map_err(|_| "the server thread panicked")?;
            c.and(s)
        }
    }
}

fn accept(listener: TcpListener) -> Result<TcpStream> {
    let (tcp, peer) = listener.accept()?;
    println!("server: client {peer} connected");
    timeouts(tcp)
}

fn connect(host: &str, port: u16) -> Result<TcpStream> {
    timeouts(TcpStream::connect((host, port))?)
}

/// A peer that stops answering fails the handshake instead of hanging it.
fn timeouts(tcp: TcpStream) -> Result<TcpStream> {
    tcp.set_read_timeout(Some(TIMEOUT))?;
    tcp.set_write_timeout(Some(TIMEOUT))?;
    Ok(tcp)
}

/// One byte each way: neither side goes on (and tears down its QP) before
/// the other got here.
pub fn barrier(tcp: &mut TcpStream) -> Result {
    use std::io::{Read, Write};
    tcp.write_all(b"B")?;
    let mut b = [0u8];
    tcp.read_exact(&mut b)?;
    Ok(())
}

/// An IPv4 address of the device [`open_device`] opens: where a CM
/// example's `--loopback` client connects. RoCE: an IPv4-mapped GID.
/// iWARP (siw, Chelsio, Intel), whose GID holds its netdev's MAC: that
/// netdev's IPv4 address (`getifaddrs`), the netdev found by the name the
/// device gives or, where it gives none (6.1's siw), by that MAC.
#[allow(dead_code)] // the CM examples' loopback only
pub fn device_ipv4() -> Result<std::net::IpAddr> {
    let ctx = open_device()?;
    let gids = ctx.query_gid_table()?;
    if let Some(ip) = gids.iter().find_map(|g| g.gid.to_ipv4()) {
        return Ok(ip.into());
    }
    let ifaces: Vec<_> = nix::ifaddrs::getifaddrs()?.collect();
    let mac = gids.first().map(|g| &g.gid.0[..6]).filter(|m| m.iter().any(|&b| b != 0));
    let by_mac = || {
        let has_mac = |i: &&nix::ifaddrs::InterfaceAddress| {
            i.address.as_ref().and_then(|a| a.as_link_addr()?.addr()).is_some_and(|m| Some(&m[..]) == mac)
        };
        ifaces.iter().find(has_mac).map(|i| i.interface_name.clone())
    };
    let dev = ctx.device().name();
    let netdev = ctx.device().netdev().map(str::to_owned).or_else(by_mac);
    let netdev = netdev.ok_or_else(|| format!("{dev} has no IPv4 GID and no netdev: run the server and a client"))?;
    let ip = ifaces
        .iter()
        .filter(|i| i.interface_name == netdev)
        .find_map(|i| Some(i.address.as_ref()?.as_sockaddr_in()?.ip()))
        .ok_or_else(|| format!("{netdev} (under {dev}) has no IPv4 address: give it one (ip addr add)"))?;
    Ok(ip.into())
}
