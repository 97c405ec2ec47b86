//! RDMA netlink (`NETLINK_RDMA`, the `RDMA_NL_NLDEV` client): asks the kernel
//! which uverbs char device and which driver id belong to an IB device, the
//! way libibverbs' `ibdev_nl.c` does. Messages are raw nlattrs right after the
//! `nlmsghdr` (no genetlink header).

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    getsockname, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use rverbs_uapi::rdma_netlink::*;

const NLMSG_HDRLEN: usize = 16;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// What `RDMA_NLDEV_CMD_GET_CHARDEV` says about one device's uverbs node.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Chardev {
    /// `RDMA_NLDEV_ATTR_CHARDEV_NAME`, e.g. `uverbs0`.
    pub name: String,
    /// `RDMA_NLDEV_ATTR_CHARDEV_ABI`: the driver's uverbs ABI version.
    pub abi: u64,
    /// `RDMA_NLDEV_ATTR_CHARDEV` decoded into (major, minor).
    pub dev: (u32, u32),
    /// `RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID`.
    pub driver_id: Option<u32>,
}

/// One device of an `RDMA_NLDEV_CMD_GET` dump.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NlDevice {
    /// `RDMA_NLDEV_ATTR_DEV_INDEX`.
    pub index: u32,
    /// `RDMA_NLDEV_ATTR_DEV_NAME`.
    pub name: String,
    /// `RDMA_NLDEV_ATTR_NODE_GUID`: the GUID as a host integer, most
    /// significant byte first (the kernel sends `be64_to_cpu(node_guid)`).
    pub node_guid: u64,
    /// `RDMA_NLDEV_ATTR_DEV_NODE_TYPE` (`RDMA_NODE_IB_CA` = 1, ...), 0 when absent.
    pub node_type: u8,
}

fn nlattr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = (4 + payload.len()) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// Builds one request message (`nlmsghdr` + attributes).
pub fn request(op: u32, flags: u16, seq: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (ty, p) in attrs {
        nlattr(&mut body, *ty, p);
    }
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op) as u16).to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend(body);
    m
}

/// One message of a datagram: its `nlmsghdr` fields and payload.
#[derive(Clone, Copy, Debug)]
struct Msg<'a> {
    ty: u16,
    seq: u32,
    pid: u32,
    payload: &'a [u8],
}

/// Splits a datagram into messages.
fn messages(buf: &[u8]) -> impl Iterator<Item = Msg<'_>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes(rest[0..4].try_into().ok()?) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return None;
        }
        let ty = u16::from_ne_bytes(rest[4..6].try_into().ok()?);
        let seq = u32::from_ne_bytes(rest[8..12].try_into().ok()?);
        let pid = u32::from_ne_bytes(rest[12..16].try_into().ok()?);
        let payload = &rest[NLMSG_HDRLEN..len];
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        Some(Msg { ty, seq, pid, payload })
    })
}

/// Takes the messages of one received datagram that answer request `seq`
/// sent from port `pid` into `out`; returns `Some` once the transaction is
/// over (`NLMSG_DONE` of a dump, the `NLMSG_ERROR` ack or error of a single
/// request). Messages of another sequence number or port (the rest of an
/// earlier transaction that was abandoned, e.g. after an error) are
/// skipped, never taken as this request's answer.
///
/// `single`: a request without `NLM_F_ACK` or `NLM_F_DUMP`, whose one
/// reply ends it.
fn absorb(buf: &[u8], seq: u32, pid: u32, single: bool, out: &mut Vec<(u16, Vec<u8>)>) -> Option<Result<(), Errno>> {
    for m in messages(buf) {
        if m.seq != seq || m.pid != pid {
            tracing::trace!(seq = m.seq, pid = m.pid, want_seq = seq, "netlink: skipping a reply to another request");
            continue;
        }
        match m.ty {
            NLMSG_DONE => return Some(Ok(())),
            NLMSG_ERROR => {
                let Some(b) = m.payload.get(..4) else { return Some(Err(Errno::EIO)) };
                let err = i32::from_ne_bytes(b.try_into().unwrap());
                return Some(if err == 0 { Ok(()) } else { Err(Errno::from_raw(-err)) });
            }
            ty => {
                out.push((ty, m.payload.to_vec()));
                if single {
                    return Some(Ok(()));
                }
            }
        }
    }
    None
}

/// Iterates the attributes of a message payload: (type, value).
pub fn attrs(mut p: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if p.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([p[0], p[1]]) as usize;
        let ty = u16::from_ne_bytes([p[2], p[3]]) & 0x3fff; // drop NLA_F_NESTED/NET_BYTEORDER
        if len < 4 || len > p.len() {
            return None;
        }
        let v = &p[4..len];
        p = &p[len.next_multiple_of(4).min(p.len())..];
        Some((ty, v))
    })
}

fn u32_of(v: &[u8]) -> u32 {
    v.get(..4).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()))
}

fn u64_of(v: &[u8]) -> u64 {
    v.get(..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
}

fn str_of(v: &[u8]) -> String {
    let end = v.iter().position(|&c| c == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

/// Decodes a `GET_CHARDEV` reply payload.
pub fn parse_chardev(payload: &[u8]) -> Chardev {
    let mut c = Chardev::default();
    for (ty, v) in attrs(payload) {
        match u32::from(ty) {
            RDMA_NLDEV_ATTR_CHARDEV_NAME => c.name = str_of(v),
            RDMA_NLDEV_ATTR_CHARDEV_ABI => c.abi = u64_of(v),
            RDMA_NLDEV_ATTR_CHARDEV => {
                let d = u64_of(v);
                c.dev = (((d & 0xfff00) >> 8) as u32, ((d & 0xff) | ((d >> 12) & 0xfff00)) as u32);
            }
            RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID => c.driver_id = Some(u32_of(v)),
            _ => {}
        }
    }
    c
}

/// A `NETLINK_RDMA` socket.
pub struct RdmaNetlink {
    sock: OwnedFd,
    seq: u32,
    /// The port id the kernel gave the socket when the first request
    /// bound it: the `nlmsg_pid` of every reply meant for us.
    pid: Option<u32>,
}

impl RdmaNetlink {
    /// Opens the socket. It is bound by its first request (the kernel
    /// binds an unbound netlink socket on `send`), which saves a `bind`.
    pub fn open() -> Result<Self, Errno> {
        let sock = socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkRDMA)?;
        Ok(RdmaNetlink { sock, seq: 1, pid: None })
    }

    /// Sends a request and collects the payloads of every reply to it
    /// (matched by sequence number and port id) until the kernel says done
    /// (dump) or acks (single request).
    fn transact(&mut self, op: u32, flags: u16, attrs: &[(u16, &[u8])]) -> Result<Vec<(u16, Vec<u8>)>, Errno> {
        self.seq = self.seq.wrapping_add(1);
        let msg = request(op, flags, self.seq, attrs);
        send(self.sock.as_raw_fd(), &msg, MsgFlags::empty())?;
        let pid = match self.pid {
            Some(p) => p,
            None => *self.pid.insert(getsockname::<NetlinkAddr>(self.sock.as_raw_fd())?.pid()),
        };
        let single = flags & (NLM_F_ACK | NLM_F_DUMP) == 0;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = recv(self.sock.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            if n == 0 {
                return Ok(out);
            }
            // A request with NLM_F_ACK ends with NLMSG_ERROR 0 after its
            // reply, one without it with its reply (or an error); a dump
            // ends with NLMSG_DONE: keep reading until then.
            if let Some(end) = absorb(&buf[..n], self.seq, pid, single, &mut out) {
                return end.map(|()| out);
            }
        }
    }

    /// `RDMA_NLDEV_CMD_GET` dump: every RDMA device in this net namespace.
    pub fn devices(&mut self) -> Result<Vec<NlDevice>, Errno> {
        let replies = self.transact(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, &[])?;
        Ok(replies
            .iter()
            .map(|(_, p)| {
                let mut d = NlDevice::default();
                for (ty, v) in attrs(p) {
                    match u32::from(ty) {
                        RDMA_NLDEV_ATTR_DEV_INDEX => d.index = u32_of(v),
                        RDMA_NLDEV_ATTR_DEV_NAME => d.name = str_of(v),
                        RDMA_NLDEV_ATTR_NODE_GUID => d.node_guid = u64_of(v),
                        RDMA_NLDEV_ATTR_DEV_NODE_TYPE => d.node_type = v.first().copied().unwrap_or(0),
                        _ => {}
                    }
                }
                d
            })
            .collect())
    }

    /// `RDMA_NLDEV_CMD_GET_CHARDEV` for `CHARDEV_TYPE = "uverbs"` of device
    /// `index`. Without `NLM_F_ACK`: the reply (or the error) is the whole
    /// answer, one `recv` instead of two.
    pub fn uverbs_chardev(&mut self, index: u32) -> Result<Chardev, Errno> {
        let idx = index.to_ne_bytes();
        let replies = self.transact(
            RDMA_NLDEV_CMD_GET_CHARDEV,
            0,
            &[(RDMA_NLDEV_ATTR_DEV_INDEX as u16, &idx), (RDMA_NLDEV_ATTR_CHARDEV_TYPE as u16, b"uverbs\0")],
        )?;
        replies.first().map(|(_, p)| parse_chardev(p)).ok_or(Errno::ENODATA)
    }

    /// `RDMA_NLDEV_CMD_SYS_GET`: whether the kernel copies pinned pages on
    /// `fork()` (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`, 5.13 and later), so a
    /// child's writes never move registered memory from under the device.
    /// `false` when the kernel does not report it, as libibverbs reads it.
    pub fn copy_on_fork(&mut self) -> Result<bool, Errno> {
        let replies = self.transact(RDMA_NLDEV_CMD_SYS_GET, 0, &[])?;
        Ok(replies.first().is_some_and(|(_, p)| copy_on_fork_of(p)))
    }

    /// `RDMA_NLDEV_CMD_GET_CHARDEV` for `CHARDEV_TYPE = "rdma_cm"`, no
    /// device index: the connection manager's node and ABI. The kernel
    /// loads `rdma_ucm` to answer it (`MODULE_ALIAS_RDMA_CLIENT`), as
    /// librdmacm's `check_abi_version_nl` relies on.
    pub fn rdma_cm_chardev(&mut self) -> Result<Chardev, Errno> {
        let replies = self.transact(
            RDMA_NLDEV_CMD_GET_CHARDEV,
            NLM_F_ACK,
            &[(RDMA_NLDEV_ATTR_CHARDEV_TYPE as u16, b"rdma_cm\0")],
        )?;
        replies.first().map(|(_, p)| parse_chardev(p)).ok_or(Errno::ENODATA)
    }
}

/// `RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK` of a `SYS_GET` reply's payload: a
/// `u8`, non-zero when set; absent on kernels before 5.13.
pub fn copy_on_fork_of(payload: &[u8]) -> bool {
    attrs(payload)
        .any(|(ty, v)| u32::from(ty) == RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK && v.first().is_some_and(|&b| b != 0))
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_on_fork_is_read_from_its_attribute() {
        // RDMA_NLDEV_SYS_ATTR_NETNS_MODE (66, u8 1) then COPY_ON_FORK (93).
        let with = |v: u8| [5, 0, 66, 0, 1, 0, 0, 0, 5, 0, 93, 0, v, 0, 0, 0];
        assert!(copy_on_fork_of(&with(1)));
        assert!(!copy_on_fork_of(&with(0)));
        assert!(!copy_on_fork_of(&with(1)[..8]), "absent: a kernel before 5.13");
    }

    #[test]
    fn get_chardev_request_bytes() {
        let m = request(
            RDMA_NLDEV_CMD_GET_CHARDEV,
            NLM_F_ACK,
            7,
            &[(RDMA_NLDEV_ATTR_DEV_INDEX as u16, &3u32.to_ne_bytes()), (69, b"uverbs\0")],
        );
        let mut want = vec![];
        want.extend_from_slice(&(16u32 + 8 + 12).to_ne_bytes());
        want.extend_from_slice(&0x140fu16.to_ne_bytes()); // (5 << 10) + 15
        want.extend_from_slice(&5u16.to_ne_bytes()); // REQUEST | ACK
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&[8, 0, 1, 0, 3, 0, 0, 0]);
        want.extend_from_slice(&[11, 0, 69, 0, b'u', b'v', b'e', b'r', b'b', b's', 0, 0]);
        assert_eq!(m, want);
    }

    /// One message as the kernel sends it: `nlmsghdr` (`len`, `type`,
    /// `flags`, `seq`, `pid`), then the payload.
    fn msg(ty: u16, seq: u32, pid: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = vec![];
        m.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&pid.to_ne_bytes());
        m.extend_from_slice(payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    /// Replies of another sequence number or port id (the tail of an
    /// abandoned transaction, or someone else's) are skipped, not taken as
    /// this request's answer (audit L11).
    #[test]
    fn replies_to_other_requests_are_skipped() {
        const ME: u32 = 0x1234;
        let mut dgram = msg(0x1401, 6, ME, b"old\0"); // a reply of request 6
        dgram.extend(msg(NLMSG_DONE, 6, ME, &0i32.to_ne_bytes())); // its end
        dgram.extend(msg(0x1401, 7, 99, b"other port\0")); // not ours
        dgram.extend(msg(NLMSG_ERROR, 7, 99, &(-19i32).to_ne_bytes()));
        dgram.extend(msg(0x1401, 7, ME, b"mine\0"));
        let mut out = vec![];
        assert!(absorb(&dgram, 7, ME, false, &mut out).is_none(), "request 7 is not over yet");
        assert_eq!(out, vec![(0x1401, b"mine\0".to_vec())]);
        // The ack ends it; a leftover error of request 6 does not.
        let ack = [msg(NLMSG_ERROR, 6, ME, &(-22i32).to_ne_bytes()), msg(NLMSG_ERROR, 7, ME, &0i32.to_ne_bytes())];
        assert_eq!(absorb(&ack.concat(), 7, ME, false, &mut out), Some(Ok(())));
        assert_eq!(out.len(), 1);
        // Without an ack, the reply itself ends a single request.
        let mut out = vec![];
        let two = [msg(0x140f, 9, 99, b"theirs\0"), msg(0x140f, 9, ME, b"mine\0")].concat();
        assert_eq!(absorb(&two, 9, ME, true, &mut out), Some(Ok(())));
        assert_eq!(out, vec![(0x140f, b"mine\0".to_vec())]);
        // An error answer of ours is reported.
        let mut out = vec![];
        assert_eq!(
            absorb(&msg(NLMSG_ERROR, 8, ME, &(-19i32).to_ne_bytes()), 8, ME, true, &mut out),
            Some(Err(Errno::ENODEV))
        );
    }

    #[test]
    fn parses_chardev_reply() {
        let mut p = vec![];
        nlattr(&mut p, 70, b"uverbs0\0");
        nlattr(&mut p, 0, &[]); // pad attribute before a u64
        nlattr(&mut p, 71, &2u64.to_ne_bytes());
        nlattr(&mut p, 72, &((231u64 << 8) | 192).to_ne_bytes());
        nlattr(&mut p, 73, &14u32.to_ne_bytes());
        let c = parse_chardev(&p);
        assert_eq!(c, Chardev { name: "uverbs0".into(), abi: 2, dev: (231, 192), driver_id: Some(14) });
    }
}
