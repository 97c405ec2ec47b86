//! Endpoints: what a peer needs to reach a queue pair, two wire formats for
//! them, and a one-call handshake over a byte stream.
//!
//! Connecting two QPs needs an out-of-band exchange of each side's LID, QP
//! number, first PSN and GID, and usually of the memory the peer may READ or
//! WRITE (address, rkey, length). [`Endpoint`] holds all of it;
//! [`QpControl::local_endpoint`] builds ours, [`QpControl::handshake`]
//! exchanges it over a [`TcpStream`](std::net::TcpStream) (or any
//! `Read + Write` stream) and brings the QP to RTS.
//!
//! Two codecs:
//!
//! * a binary one, [`Endpoint::to_bytes`]/[`Endpoint::from_bytes`]: fixed
//!   size ([`Endpoint::WIRE_LEN`] bytes), a magic, a version, big-endian
//!   fields, and memory when the sender advertised some. Everything a peer
//!   sends is validated; anything else is an [`Error`], never a panic;
//! * rdma-core's ping-pong text, [`Endpoint::to_text`]/[`Endpoint::from_text`]:
//!   the `LID:QPN:PSN:GID` message of `ibv_rc_pingpong` and friends, for
//!   talking to those programs.
//!
//! ## The binary format (version 1)
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `RVEP` |
//! | 4 | 1 | version, 1 |
//! | 5 | 1 | flags: bit 0 = memory present; the other bits must be 0 |
//! | 6 | 2 | LID |
//! | 8 | 4 | QP number (24 bits) |
//! | 12 | 4 | PSN (24 bits) |
//! | 16 | 16 | GID, network order |
//! | 32 | 8 | memory address (0 without memory) |
//! | 40 | 8 | memory length (0 without memory) |
//! | 48 | 4 | memory rkey (0 without memory) |
//!
//! All integers are big-endian. A future version may change the length;
//! the version byte sits before any field that could, so a reader refuses
//! a newer peer by name instead of misreading it.

use core::fmt;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::debug;

use crate::{
    AhAttr, ConnectOptions, Context, Errno, Error, Gid, GlobalRoute, LinkLayer, MemoryRegion, QpControl, QpState,
    QpType, RemoteAddr, Result,
};

/// The largest QP number and PSN: both are 24-bit fields on the wire.
const MAX_24: u32 = 0xff_ffff;

/// Memory a peer may access with RDMA READ, WRITE or atomics: the address,
/// remote key and length of one of its [`MemoryRegion`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RemoteMemory {
    /// Virtual address of the first byte, in the owner's address space.
    pub addr: u64,
    /// The region's remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u64,
}

impl RemoteMemory {
    /// The whole of `mr`.
    pub fn of(mr: &MemoryRegion) -> Self {
        RemoteMemory { addr: mr.addr(), rkey: mr.rkey(), len: mr.len() as u64 }
    }

    /// The target of a READ/WRITE of `len` bytes at `offset`, refused when it
    /// does not lie inside the memory (the peer's NIC would answer with a
    /// remote access error; this says which bytes were wrong, before posting).
    pub fn at(&self, offset: u64, len: u64) -> Result<RemoteAddr> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(RemoteAddr { addr: self.addr + offset, rkey: self.rkey }),
            _ => Err(Error::check("RemoteMemory::at", Errno::ERANGE).with_message(format!(
                "{len} bytes at offset {offset} do not fit in the peer's {} bytes of memory",
                self.len
            ))),
        }
    }
}

impl From<&MemoryRegion> for RemoteMemory {
    fn from(mr: &MemoryRegion) -> Self {
        RemoteMemory::of(mr)
    }
}

/// Everything a peer needs to connect to one of our QPs: LID, QP number,
/// first PSN, GID, and optionally memory it may access.
///
/// Build ours with [`QpControl::local_endpoint`] (or [`Endpoint::of`]), add
/// memory with [`with_memory`](Self::with_memory), exchange it with
/// [`QpControl::handshake`] or by hand with the codecs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// The first PSN this side sends (24 bits); the peer's `rq_psn`.
    pub psn: u32,
    /// GID: on RoCE the address (typically the IPv4-mapped RoCE v2 GID); on
    /// InfiniBand zero unless a GRH is wanted.
    pub gid: Gid,
    /// Memory the peer may access, if this side offers any.
    pub memory: Option<RemoteMemory>,
}

/// The binary format's magic.
const MAGIC: [u8; 4] = *b"RVEP";
/// The binary format's version.
const VERSION: u8 = 1;
/// Flag bit: the memory fields are present.
const FLAG_MEMORY: u8 = 1;

impl Endpoint {
    /// Size of a binary message ([`to_bytes`](Self::to_bytes)).
    pub const WIRE_LEN: usize = 52;
    /// Size of rdma-core's ping-pong message ([`to_text`](Self::to_text)):
    /// `0000:000000:000000:` + 32 hex digits + NUL.
    pub const TEXT_LEN: usize = 52;

    /// The endpoint of `qp`, sending from `psn`, as [`QpControl::to_rtr`]
    /// on the peer will need it:
    ///
    /// * LID: the port's (`opts.port`, `QUERY_PORT`);
    /// * GID: the entry `opts.sgid_index` names, or, when that is `None`,
    ///   on RoCE the port's default ([`Context::default_sgid_index`]: the
    ///   IPv4-mapped RoCE v2 GID), on InfiniBand the zero GID (the peer then
    ///   sends no GRH, as rdma-core's examples without `-g`). This is the
    ///   GID index our own [`QpControl::to_rtr`] picks as its source.
    ///
    /// Errors: a PSN over 24 bits; an InfiniBand port without a LID (no
    /// subnet manager); an empty GID entry; the queries' errors.
    pub fn of(qp: &QpControl, psn: u32, opts: &ConnectOptions) -> Result<Endpoint> {
        const VERB: &str = "Endpoint::of";
        if psn > MAX_24 {
            return Err(Error::invalid(VERB, format!("PSN {psn:#x} does not fit in 24 bits (use psn & 0xffffff)")));
        }
        let ctx = qp.context();
        let ethernet = ctx.port_static(opts.port)?.link_layer == LinkLayer::Ethernet;
        // RoCE has no LIDs; InfiniBand's may change (the subnet manager), so ask.
        let lid = if ethernet { 0 } else { ctx.query_port(opts.port)?.lid };
        if !ethernet && lid == 0 {
            return Err(Error::invalid(
                VERB,
                format!("port {} has no LID (InfiniBand: is a subnet manager running?)", opts.port),
            ));
        }
        let sgid_index = match opts.sgid_index {
            Some(i) => Some(i),
            None if ethernet => Some(ctx.default_sgid_index(opts.port)?),
            None => None,
        };
        let gid = match sgid_index {
            None => Gid::default(),
            Some(i) => match ctx.gid_unnamed(opts.port, u32::from(i))? {
                Some(e) => e.gid,
                None => {
                    return Err(Error::check(VERB, Errno::ENODATA).with_message(format!(
                        "GID index {i} of port {} is empty (see `rverbs devinfo -v` for the GID table)",
                        opts.port
                    )))
                }
            },
        };
        Ok(Endpoint { lid, qpn: qp.qp_num(), psn, gid, memory: None })
    }

    /// The same endpoint, offering all of `mr` to the peer. The peer can use
    /// it only as far as `mr`'s access flags allow (`REMOTE_WRITE`, ...).
    pub fn with_memory(self, mr: &MemoryRegion) -> Endpoint {
        Endpoint { memory: Some(RemoteMemory::of(mr)), ..self }
    }

    /// A random 24-bit PSN, as rdma-core's examples pick one
    /// (`lrand48() & 0xffffff`). Random enough that a restarted program does
    /// not reuse the PSNs a stale peer still expects; not cryptographic.
    pub fn random_psn() -> u32 {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        // The pid from the providers' cache: no `getpid()` per QP.
        (RandomState::new().hash_one((n, now, rverbs_providers::sys::current_pid())) as u32) & MAX_24
    }

    /// Checks what both codecs need: QPN and PSN within 24 bits.
    fn check_24(&self, verb: &'static str) -> Result<()> {
        for (what, v) in [("QP number", self.qpn), ("PSN", self.psn)] {
            if v > MAX_24 {
                return Err(Error::invalid(verb, format!("{what} {v:#x} does not fit in 24 bits")));
            }
        }
        Ok(())
    }

    /// The binary message (format above). Refuses a QPN or PSN over 24 bits.
    pub fn to_bytes(&self) -> Result<[u8; Endpoint::WIRE_LEN]> {
        self.check_24("Endpoint::to_bytes")?;
        let mut b = [0u8; Endpoint::WIRE_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[6..8].copy_from_slice(&self.lid.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..32].copy_from_slice(&self.gid.0);
        if let Some(m) = self.memory {
            b[5] = FLAG_MEMORY;
            b[32..40].copy_from_slice(&m.addr.to_be_bytes());
            b[40..48].copy_from_slice(&m.len.to_be_bytes());
            b[48..52].copy_from_slice(&m.rkey.to_be_bytes());
        }
        Ok(b)
    }

    /// Parses a binary message, refusing anything [`to_bytes`](Self::to_bytes)
    /// would not have written: another magic, another version, another
    /// length, unknown flags, a QPN or PSN over 24 bits, memory fields without
    /// the memory flag, memory that wraps around the address space.
    pub fn from_bytes(b: &[u8]) -> Result<Endpoint> {
        let bad = |msg: String| Error::invalid("Endpoint::from_bytes", msg);
        let head = &b[..b.len().min(4)];
        if head != &MAGIC[..head.len()] {
            let hint = if looks_like_text(b) {
                " (it looks like rdma-core's ping-pong text: Endpoint::from_text reads that)"
            } else {
                ""
            };
            return Err(bad(format!("not an rverbs endpoint message: it starts {}{hint}", preview(b))));
        }
        if b.len() > 4 && b[4] != VERSION {
            return Err(bad(format!(
                "endpoint message version {} (this rverbs reads version {VERSION} only: update the older side)",
                b[4]
            )));
        }
        if b.len() != Endpoint::WIRE_LEN {
            let what = if b.len() < Endpoint::WIRE_LEN { "truncated" } else { "over-long" };
            return Err(bad(format!("{what} endpoint message: {} bytes, expected {}", b.len(), Endpoint::WIRE_LEN)));
        }
        let flags = b[5];
        if flags & !FLAG_MEMORY != 0 {
            return Err(bad(format!("endpoint message with unknown flags {:#04x}", flags & !FLAG_MEMORY)));
        }
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let be64 = |i: usize| (u64::from(be32(i)) << 32) | u64::from(be32(i + 4));
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        let (addr, len, rkey) = (be64(32), be64(40), be32(48));
        let memory = if flags & FLAG_MEMORY != 0 {
            if addr.checked_add(len).is_none() {
                return Err(bad(format!("memory of {len} bytes at {addr:#x} wraps around the address space")));
            }
            Some(RemoteMemory { addr, rkey, len })
        } else if (addr, len, rkey) != (0, 0, 0) {
            return Err(bad("endpoint message without memory but with memory fields set".into()));
        } else {
            None
        };
        let e = Endpoint { lid: u16::from_be_bytes([b[6], b[7]]), qpn: be32(8), psn: be32(12), gid: Gid(gid), memory };
        e.check_24("Endpoint::from_bytes")?;
        Ok(e)
    }

    /// rdma-core's ping-pong message: `printf("%04x:%06x:%06x:%s")` of LID,
    /// QPN, PSN and the GID's 16 bytes in memory order as 32 lower-case hex
    /// digits (`gid_to_wire_gid()`), NUL-padded to
    /// [`TEXT_LEN`](Self::TEXT_LEN) bytes, e.g.
    /// `0000:000011:6a5e4c:00000000000000000000ffffc0a84d01\0`. The format
    /// has no room for memory: an endpoint with memory, or with a QPN or PSN
    /// over 24 bits, is refused.
    pub fn to_text(&self) -> Result<[u8; Endpoint::TEXT_LEN]> {
        self.check_24("Endpoint::to_text")?;
        if self.memory.is_some() {
            return Err(Error::invalid(
                "Endpoint::to_text",
                "rdma-core's ping-pong text has no room for memory (use to_bytes, or drop the memory)",
            ));
        }
        let hex: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{:04x}:{:06x}:{:06x}:{hex}", self.lid, self.qpn, self.psn);
        let mut m = [0u8; Endpoint::TEXT_LEN];
        m[..text.len()].copy_from_slice(text.as_bytes());
        Ok(m)
    }

    /// Parses rdma-core's ping-pong message (`%x:%x:%x:%s`, then
    /// `wire_gid_to_gid()`): exactly [`TEXT_LEN`](Self::TEXT_LEN) bytes, the
    /// text up to the first NUL, at most 4/6/6 hex digits for LID/QPN/PSN,
    /// exactly 32 for the GID. Anything else is an error whose
    /// [`message`](Error::message) starts `malformed address "<the text>"`.
    pub fn from_text(m: &[u8]) -> Result<Endpoint> {
        let bad = || {
            let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
            let len = if m.len() == Endpoint::TEXT_LEN {
                String::new()
            } else {
                format!(" of {} bytes instead of {}", m.len(), Endpoint::TEXT_LEN)
            };
            Error::invalid(
                "Endpoint::from_text",
                format!(
                    "malformed address \"{}\"{len} (expected LID:QPN:PSN:GID as 0000:000000:000000:<32 hex digits>, \
                     from an rdma-core-compatible ping-pong)",
                    m[..end].escape_ascii()
                ),
            )
        };
        if m.len() != Endpoint::TEXT_LEN {
            return Err(bad());
        }
        let nul = m.iter().position(|&b| b == 0).ok_or_else(bad)?;
        let text = std::str::from_utf8(&m[..nul]).map_err(|_| bad())?;
        let mut fields = text.split(':');
        let (Some(lid), Some(qpn), Some(psn), Some(gid), None) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(bad());
        };
        let hex = |s: &str, max_digits: usize| {
            if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(s, 16).ok()
        };
        let (Some(lid), Some(qpn), Some(psn)) = (hex(lid, 4), hex(qpn, 6), hex(psn, 6)) else { return Err(bad()) };
        if gid.len() != 32 || !gid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(&gid[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Endpoint { lid: lid as u16, qpn, psn, gid: Gid(g), memory: None })
    }

    /// Sends this endpoint (binary format) and reads the peer's, both at
    /// once: each side writes first, so two peers calling this cannot
    /// deadlock. The building block of [`QpControl::handshake`], for users
    /// who bring their QPs up themselves (or exchange several endpoints).
    ///
    /// A read that times out (the stream's read timeout,
    /// [`TcpStream::set_read_timeout`](std::net::TcpStream::set_read_timeout))
    /// is an `ETIMEDOUT` error; a peer that hangs up mid-message or sends
    /// garbage is an error saying so.
    pub fn exchange<S: Read + Write>(&self, stream: &mut S) -> Result<Endpoint> {
        const VERB: &str = "Endpoint::exchange";
        let mine = self.to_bytes()?;
        stream.write_all(&mine).and_then(|()| stream.flush()).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
                io_error(VERB, "send our endpoint (the peer closed the connection)", &e)
            }
            _ => io_error(VERB, "send our endpoint", &e),
        })?;
        let mut theirs = [0u8; Endpoint::WIRE_LEN];
        read_full(stream, &mut theirs, VERB, "the peer's endpoint")?;
        Endpoint::from_bytes(&theirs)
            .map_err(|e| Error::invalid(VERB, format!("the peer sent an invalid endpoint: {}", e.message())))
    }

    /// The address vector towards this (remote) endpoint, for a UD address
    /// handle (`pd.create_ah(&peer.ah_attr(ctx, &opts)?)`): its LID, our
    /// `opts.sl` and `opts.port`, and a GRH to its GID chosen like
    /// [`QpControl::to_rtr`] chooses one (our `opts.sgid_index`, or the
    /// default on RoCE or when the peer gave a GID), with `opts.hop_limit`
    /// and `opts.traffic_class`.
    pub fn ah_attr(&self, ctx: &Context, opts: &ConnectOptions) -> Result<AhAttr> {
        self.address(ctx, ctx.port_static(opts.port)?.link_layer, opts)
    }

    /// [`ah_attr`](Self::ah_attr) with the port's link layer known.
    pub(crate) fn address(&self, ctx: &Context, link_layer: LinkLayer, opts: &ConnectOptions) -> Result<AhAttr> {
        let sgid_index = match opts.sgid_index {
            Some(i) => Some(i),
            None if link_layer == LinkLayer::Ethernet || !self.gid.is_zero() => {
                Some(ctx.default_sgid_index(opts.port)?)
            }
            None => None,
        };
        let grh = sgid_index.map(|sgid_index| GlobalRoute {
            dgid: self.gid,
            flow_label: 0,
            sgid_index,
            hop_limit: opts.hop_limit,
            traffic_class: opts.traffic_class,
        });
        Ok(AhAttr { dlid: self.lid, sl: opts.sl, port_num: opts.port, grh, ..AhAttr::default() })
    }
}

/// `LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1` (the
/// address line of rdma-core's ping-pong examples), then
/// `, memory 4096 bytes at 0x7f.., rkey 0x..` when there is memory.
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
            self.lid,
            self.qpn,
            self.psn,
            self.gid.to_inet_string()
        )?;
        if let Some(m) = self.memory {
            write!(f, ", memory {} bytes at {:#x}, rkey {:#x}", m.len, m.addr, m.rkey)?;
        }
        Ok(())
    }
}

/// True when `b` starts like `0000:00` (rdma-core's text message).
fn looks_like_text(b: &[u8]) -> bool {
    b.len() >= 5 && b[..4].iter().all(u8::is_ascii_hexdigit) && b[4] == b':'
}

/// The first bytes of a message, escaped, for errors.
fn preview(b: &[u8]) -> String {
    let n = b.len().min(8);
    let more = if b.len() > n { "..." } else { "" };
    format!("\"{}\"{more}", b[..n].escape_ascii())
}

/// An `io::Error` of the handshake's stream as an [`Error`]: the errno when
/// there is one, `ETIMEDOUT` for a read timeout.
fn io_error(verb: &'static str, doing: &str, e: &io::Error) -> Error {
    let errno = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Some(Errno::ETIMEDOUT),
        _ => e.raw_os_error().map(Errno::from_raw),
    };
    let msg = format!("cannot {doing}: {e}");
    match errno {
        Some(n) => Error::os(verb, n).with_message(msg),
        None => Error::invalid(verb, msg),
    }
}

/// Reads exactly `buf.len()` bytes, with errors that say how far it got.
fn read_full<S: Read>(s: &mut S, buf: &mut [u8], verb: &'static str, what: &str) -> Result<()> {
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => {
                return Err(Error::invalid(
                    verb,
                    format!("the peer closed the connection after {n} of the {} bytes of {what}", buf.len()),
                ))
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(Error::os(verb, Errno::ETIMEDOUT).with_message(format!(
                    "timed out waiting for {what} (the stream's read timeout; got {n} of {} bytes)",
                    buf.len()
                )))
            }
            Err(e) => return Err(io_error(verb, &format!("read {what}"), &e)),
        }
    }
    Ok(())
}

/// The handshake's last byte: this side is at RTS.
const READY: u8 = b'R';
/// Sent instead of [`READY`] when this side failed once the exchange began.
const FAILED: u8 = b'X';

impl QpControl {
    /// This QP's [`Endpoint`], sending from `psn`: see [`Endpoint::of`].
    pub fn local_endpoint(&self, psn: u32, opts: &ConnectOptions) -> Result<Endpoint> {
        Endpoint::of(self, psn, opts)
    }

    /// Connects this QP to a peer in one call over `stream` (a
    /// [`TcpStream`](std::net::TcpStream), or anything `Read + Write`):
    ///
    /// 1. RESET → INIT ([`to_init`](Self::to_init)) when the QP is in RESET;
    ///    a QP already in INIT is left there, so **receives can be posted
    ///    before the handshake**: call `to_init` yourself, post them, then
    ///    handshake (a receive must be posted before the peer's first SEND
    ///    arrives, and a SEND can arrive as soon as the handshake returns on
    ///    the peer's side);
    /// 2. sends `local` and reads the peer's endpoint ([`Endpoint::exchange`],
    ///    binary format);
    /// 3. RC/UC: INIT → RTR towards the peer ([`to_rtr`](Self::to_rtr)),
    ///    RTR → RTS from `local.psn` ([`to_rts`](Self::to_rts)). UD has no
    ///    peer in its QP state: the handshake brings the QP to RTS all the
    ///    same and returns the peer's endpoint, from which the caller builds
    ///    an address handle ([`Endpoint::ah_attr`]) and a
    ///    [`UdDest`](crate::UdDest) with the peer's QPN and `opts.qkey`;
    /// 4. a one-byte barrier: each side writes one byte once it is at RTS and
    ///    waits for the other's. When `handshake` returns `Ok`, both QPs are
    ///    at RTS (so at RTR: ready to receive), and either side may send.
    ///
    /// Returns the peer's endpoint, with the memory it advertised, if any.
    /// The stream stays open and is the caller's again (a second barrier
    /// before teardown, so neither side destroys its QP under the other's
    /// last operations, is a good use of it).
    ///
    /// Timeouts are the stream's: set
    /// [`set_read_timeout`](std::net::TcpStream::set_read_timeout) (and
    /// `set_write_timeout`) before calling; without one, a peer that never
    /// answers blocks this call forever. A timed-out read is an `ETIMEDOUT`
    /// error naming the step.
    ///
    /// Errors name what failed: the QP's type or state before anything is
    /// sent (`QpControl::handshake`), the TCP step or the peer's message
    /// (`Endpoint::exchange`), a transition (`ibv_modify_qp`, the kernel's
    /// errno, and which transition towards which peer), the barrier (the
    /// peer hung up, or reported that its own handshake failed). After a
    /// failure once the exchange began, this side tells the peer (one
    /// failure byte in place of the barrier's) so its handshake fails
    /// promptly too. The QP is left in whatever state it reached; it is not
    /// destroyed (that is the caller's, by dropping it).
    ///
    /// ```no_run
    /// use std::net::TcpStream;
    /// use rverbs::*;
    ///
    /// # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    /// let ctx = rverbs::devices()?.into_iter().next().ok_or("no device")?.open()?;
    /// let pd = ctx.alloc_pd()?;
    /// let cq = ctx.create_cq(16)?;
    /// let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    /// let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// let opts = ConnectOptions::default();
    ///
    /// qp.to_init(&opts)?; // so that a receive can be posted before the peer sends
    /// qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64)?])])?;
    ///
    /// let mut tcp = TcpStream::connect("192.168.77.1:18515")?;
    /// tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    /// let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?.with_memory(&mr);
    /// let peer = qp.handshake(&mut tcp, &me, &opts)?;
    ///
    /// // Both QPs are at RTS: WRITE into the memory the peer advertised.
    /// let target = peer.memory.ok_or("the peer offered no memory")?.at(0, 5)?;
    /// mr.write_at(1024, b"hello")?;
    /// let sgl = [mr.sge(1024, 5)?];
    /// qp.post_send(&[SendWr::write(2, &sgl, target).signaled()])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn handshake<S: Read + Write>(
        &self,
        stream: &mut S,
        local: &Endpoint,
        opts: &ConnectOptions,
    ) -> Result<Endpoint> {
        const VERB: &str = "QueuePair::handshake";
        let _span = tracing::debug_span!("handshake", qpn = self.qp_num()).entered();
        if !matches!(self.qp_type(), QpType::Rc | QpType::Uc | QpType::Ud) {
            return Err(Error::check(VERB, Errno::EOPNOTSUPP)
                .with_message(format!("the handshake connects RC, UC and UD QPs, not {}", self.qp_type())));
        }
        if local.qpn != self.qp_num() {
            return Err(Error::invalid(
                VERB,
                format!("the local endpoint is QP {:#x}'s, not this QP's ({:#x})", local.qpn, self.qp_num()),
            ));
        }
        match self.state() {
            QpState::Reset => self.to_init(opts).map_err(|e| in_step(e, "RESET -> INIT"))?,
            QpState::Init => {}
            s => {
                return Err(Error::invalid(
                    VERB,
                    format!("QP {:#x} is in {s}: the handshake starts from RESET or INIT", self.qp_num()),
                ))
            }
        }
        let peer = match local.exchange(stream).and_then(|peer| {
            debug!(local = %local, peer = %peer, "endpoints exchanged");
            self.ready(local, &peer, opts).map(|()| peer)
        }) {
            Ok(peer) => peer,
            Err(e) => {
                // Best effort: the peer's handshake then fails at once
                // instead of at its read timeout.
                let _ = stream.write_all(&[FAILED]).and_then(|()| stream.flush());
                return Err(e);
            }
        };
        stream
            .write_all(&[READY])
            .and_then(|()| stream.flush())
            .map_err(|e| io_error(VERB, "send our ready byte", &e))?;
        let mut b = [0u8];
        read_full(stream, &mut b, VERB, "the peer's ready byte").map_err(|e| {
            if e.errno().is_none() {
                e.with_message(
                    "the peer closed the connection instead of sending its ready byte (its handshake failed?)",
                )
            } else {
                e
            }
        })?;
        match b[0] {
            READY => {
                debug!("peer ready");
                Ok(peer)
            }
            FAILED => Err(Error::invalid(
                VERB,
                format!("the peer (QP {:#x}) failed its side of the handshake; its own error says why", peer.qpn),
            )),
            other => Err(Error::invalid(VERB, format!("the peer sent byte {other:#04x} instead of its ready byte"))),
        }
    }

    /// INIT → RTR → RTS towards `peer` (UD: without it).
    fn ready(&self, local: &Endpoint, peer: &Endpoint, opts: &ConnectOptions) -> Result<()> {
        let towards = format!("INIT -> RTR towards QP {:#x}", peer.qpn);
        self.to_rtr(peer, opts).map_err(|e| in_step(e, &towards))?;
        self.to_rts(local.psn, opts).map_err(|e| in_step(e, "RTR -> RTS"))
    }
}

/// The same error, its message prefixed with the handshake step.
fn in_step(e: Error, step: &str) -> Error {
    let msg = format!("during the handshake, {step}: {}", e.message());
    e.with_message(msg)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn roce() -> Endpoint {
        Endpoint { lid: 0, qpn: 0x11, psn: 0x6a5e4c, gid: Gid::parse("::ffff:192.168.77.1").unwrap(), memory: None }
    }

    fn with_mem() -> Endpoint {
        Endpoint {
            lid: 0x1234,
            qpn: 0xabcdef,
            psn: 0xffffff,
            gid: Gid::parse("fe80::2:c903:1:2345").unwrap(),
            memory: Some(RemoteMemory { addr: 0x7f00_1234_5000, rkey: 0xdead_beef, len: 4096 }),
        }
    }

    #[test]
    fn binary_round_trips() {
        for e in [roce(), with_mem(), Endpoint::default()] {
            let b = e.to_bytes().unwrap();
            assert_eq!(b.len(), Endpoint::WIRE_LEN);
            assert_eq!(Endpoint::from_bytes(&b).unwrap(), e);
        }
    }

    #[test]
    fn binary_layout_is_the_documented_one() {
        let b = with_mem().to_bytes().unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(b"RVEP");
        want.extend_from_slice(&[1, 1, 0x12, 0x34]);
        want.extend_from_slice(&[0x00, 0xab, 0xcd, 0xef, 0x00, 0xff, 0xff, 0xff]);
        want.extend_from_slice(&Gid::parse("fe80::2:c903:1:2345").unwrap().0);
        want.extend_from_slice(&[0, 0, 0x7f, 0, 0x12, 0x34, 0x50, 0]);
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x10, 0]);
        want.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&b[..], &want[..]);
        let b = roce().to_bytes().unwrap();
        assert_eq!(b[5], 0, "no memory flag");
        assert_eq!(&b[32..], &[0; 20]);
    }

    #[test]
    fn binary_refuses_out_of_range_values() {
        let e = Endpoint { qpn: 0x100_0000, ..roce() };
        assert!(e.to_bytes().unwrap_err().message().contains("QP number 0x1000000 does not fit in 24 bits"));
        let e = Endpoint { psn: u32::MAX, ..roce() };
        assert!(e.to_bytes().unwrap_err().message().contains("PSN 0xffffffff"));
        let mut b = roce().to_bytes().unwrap();
        b[8] = 1; // QPN 0x01000011
        assert!(Endpoint::from_bytes(&b).unwrap_err().message().contains("QP number"));
        let mut b = roce().to_bytes().unwrap();
        b[12] = 0x80;
        assert!(Endpoint::from_bytes(&b).unwrap_err().message().contains("PSN"));
    }

    fn err(b: &[u8]) -> String {
        let e = Endpoint::from_bytes(b).unwrap_err();
        assert_eq!(e.verb(), "Endpoint::from_bytes");
        e.message().to_owned()
    }

    #[test]
    fn binary_refuses_malformed_messages() {
        let good = with_mem().to_bytes().unwrap();
        assert!(err(&[]).contains("truncated endpoint message: 0 bytes, expected 52"));
        assert!(err(b"RV").contains("truncated endpoint message: 2 bytes, expected 52"));
        assert!(err(&good[..51]).contains("truncated endpoint message: 51 bytes"));
        let mut long = good.to_vec();
        long.push(0);
        assert!(err(&long).contains("over-long endpoint message: 53 bytes"));
        let mut v = good;
        v[4] = 2;
        assert!(err(&v).contains("version 2 (this rverbs reads version 1 only"), "{}", err(&v));
        assert!(err(&v[..5]).contains("version 2"), "a newer version is named even when its length differs");
        let mut f = good;
        f[5] = 0x83;
        assert!(err(&f).contains("unknown flags 0x82"));
        let mut m = roce().to_bytes().unwrap();
        m[50] = 1;
        assert!(err(&m).contains("without memory but with memory fields set"));
        let wrap = Endpoint { memory: Some(RemoteMemory { addr: u64::MAX, rkey: 1, len: 2 }), ..roce() };
        assert!(err(&wrap.to_bytes().unwrap()).contains("wraps around"));
        let text = roce().to_text().unwrap();
        let e = err(&text);
        assert!(
            e.contains("not an rverbs endpoint message: it starts \"0000:000\"...") && e.contains("from_text"),
            "{e}"
        );
        assert!(!err(b"\x01\n\xff").contains('\n'));
    }

    /// A small xorshift: deterministic "random" bytes without a dependency.
    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    #[test]
    fn binary_never_panics_on_truncations_or_noise() {
        let good = with_mem().to_bytes().unwrap();
        for n in 0..good.len() {
            assert!(Endpoint::from_bytes(&good[..n]).is_err(), "{n} bytes");
            assert!(Endpoint::from_text(&good[..n]).is_err());
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut accepted = 0;
        for i in 0..20_000 {
            let mut b = [0u8; Endpoint::WIRE_LEN + 8];
            for x in b.iter_mut() {
                *x = xorshift(&mut seed) as u8;
            }
            let len = (xorshift(&mut seed) % b.len() as u64) as usize + 1;
            if i % 2 == 0 {
                // Keep the header valid half of the time, to reach the later checks.
                b[..5].copy_from_slice(b"RVEP\x01");
            }
            if let Ok(e) = Endpoint::from_bytes(&b[..len]) {
                accepted += 1;
                assert_eq!(e.to_bytes().unwrap()[..], b[..len], "what is accepted re-encodes to itself");
            }
            let _ = Endpoint::from_text(&b[..len]);
        }
        // Flipping single bits of a good message: every result either fails
        // or re-encodes to exactly the flipped message.
        for bit in 0..good.len() * 8 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            if let Ok(e) = Endpoint::from_bytes(&b) {
                accepted += 1;
                assert_eq!(e.to_bytes().unwrap(), b);
            }
        }
        assert!(accepted > 0);
    }

    #[test]
    fn text_is_rdma_cores_message() {
        let m = roce().to_text().unwrap();
        assert_eq!(m.len(), 52);
        assert_eq!(&m[..51], b"0000:000011:6a5e4c:00000000000000000000ffffc0a84d01");
        assert_eq!(m[51], 0);
        assert_eq!(Endpoint::from_text(&m).unwrap(), roce());
        let ib = Endpoint { memory: None, ..with_mem() };
        let m = ib.to_text().unwrap();
        assert_eq!(&m[..51], b"1234:abcdef:ffffff:fe800000000000000002c90300012345");
        assert_eq!(Endpoint::from_text(&m).unwrap(), ib);
        // The all-zero entries srq_pingpong pads with.
        let z = Endpoint::default().to_text().unwrap();
        assert_eq!(&z[..19], b"0000:000000:000000:");
        assert_eq!(Endpoint::from_text(&z).unwrap(), Endpoint::default());
        // Shorter fields (rdma-core's sscanf takes them).
        let mut s = [0u8; 52];
        s[..38].copy_from_slice(b"1:2:3:00000000000000000000ffffc0a84d01");
        let e = Endpoint::from_text(&s).unwrap();
        assert_eq!((e.lid, e.qpn, e.psn), (1, 2, 3));
    }

    #[test]
    fn text_refuses_what_it_cannot_carry() {
        assert!(with_mem().to_text().unwrap_err().message().contains("no room for memory"));
        assert!(Endpoint { qpn: 0x100_0000, ..roce() }.to_text().is_err());
    }

    fn text_err(m: &[u8]) -> String {
        let e = Endpoint::from_text(m).unwrap_err();
        assert_eq!(e.verb(), "Endpoint::from_text");
        assert!(e.message().starts_with("malformed address \""), "{e}");
        assert!(!e.message().contains('\n'));
        e.message().to_owned()
    }

    #[test]
    fn text_garbage_is_refused() {
        let mut m = [b'x'; 52];
        text_err(&m);
        m[10] = 0;
        assert!(text_err(&m).contains("\"xxxxxxxxxx\""));
        let mut short = [0u8; 52];
        short[..18].copy_from_slice(b"0000:000011:6a5e4c");
        text_err(&short);
        let mut badgid = Endpoint::default().to_text().unwrap();
        badgid[20] = b'g';
        text_err(&badgid);
        let mut five = Endpoint::default().to_text().unwrap();
        five[51] = b':';
        text_err(&five);
        let mut ctl = [0u8; 52];
        ctl[..3].copy_from_slice(b"\x01\n\xff");
        assert!(text_err(&ctl).contains("\\x01\\n\\xff"));
        let mut long_lid = [0u8; 52];
        long_lid[..12].copy_from_slice(b"00000:1:2:00");
        text_err(&long_lid);
        let good = roce().to_text().unwrap();
        assert!(text_err(&good[..51]).contains("of 51 bytes instead of 52"));
        let mut long = good.to_vec();
        long.push(0);
        text_err(&long);
    }

    #[test]
    fn conversions_and_display() {
        assert_eq!(roce().to_string(), "LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1");
        assert!(with_mem().to_string().ends_with(", memory 4096 bytes at 0x7f0012345000, rkey 0xdeadbeef"));
    }

    #[test]
    fn remote_memory_is_range_checked() {
        let m = RemoteMemory { addr: 0x1000, rkey: 7, len: 100 };
        assert_eq!(m.at(0, 100).unwrap(), RemoteAddr { addr: 0x1000, rkey: 7 });
        assert_eq!(m.at(99, 1).unwrap().addr, 0x1063);
        assert_eq!(m.at(100, 0).unwrap().addr, 0x1064);
        assert_eq!(m.at(99, 2).unwrap_err().errno(), Some(Errno::ERANGE));
        assert!(m.at(u64::MAX, 2).is_err());
    }

    #[test]
    fn random_psns_are_24_bit_and_vary() {
        let v: Vec<u32> = (0..64).map(|_| Endpoint::random_psn()).collect();
        assert!(v.iter().all(|&p| p <= MAX_24));
        let mut d = v.clone();
        d.sort_unstable();
        d.dedup();
        assert!(d.len() > 60, "{v:?}");
    }

    #[test]
    fn exchange_over_a_socket_pair() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || with_mem().exchange(&mut b).unwrap());
        assert_eq!(roce().exchange(&mut a).unwrap(), with_mem());
        assert_eq!(t.join().unwrap(), roce());
    }

    #[test]
    fn exchange_with_a_bad_peer() {
        // Hangs up mid-message.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(&with_mem().to_bytes().unwrap()[..20]).unwrap();
        b.shutdown(std::net::Shutdown::Write).unwrap();
        let e = roce().exchange(&mut a).unwrap_err();
        assert_eq!(e.verb(), "Endpoint::exchange");
        assert!(
            e.message().contains("the peer closed the connection after 20 of the 52 bytes of the peer's endpoint"),
            "{e}"
        );
        // Garbage.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(&[b'?'; 52]).unwrap();
        let e = roce().exchange(&mut a).unwrap_err();
        assert!(e.message().starts_with("the peer sent an invalid endpoint: not an rverbs endpoint message"), "{e}");
        // Silence: the stream's read timeout.
        let (mut a, _b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(std::time::Duration::from_millis(10))).unwrap();
        let e = roce().exchange(&mut a).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::ETIMEDOUT));
        assert!(
            e.message()
                .contains("timed out waiting for the peer's endpoint (the stream's read timeout; got 0 of 52 bytes)"),
            "{e}"
        );
        // A peer that is gone before we write.
        let (mut a, b) = UnixStream::pair().unwrap();
        drop(b);
        let e = roce().exchange(&mut a).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::EPIPE), "{e}");
        assert!(e.message().starts_with("cannot send our endpoint (the peer closed the connection): "), "{e}");
    }
}
