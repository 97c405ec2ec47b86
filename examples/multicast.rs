//! Multicast: UD datagrams to a group. The server attaches its UD QP to the
//! group `239.1.2.3` (`attach_mcast`, `ibv_attach_mcast`); the client sends
//! one datagram to the group, with no peer QP number: an address handle
//! whose GID is the group's (`::ffff:239.1.2.3`), destination QPN
//! `0xffffff`, and the Q_Key both sides use. Every QP attached to the group,
//! on any host of the subnet, gets a copy.
//!
//! On RoCE the kernel's attach programs the NIC's link-layer filter only:
//! the receiving host must also be a member of the IP group on the RDMA
//! device's interface, or its IP layer drops the datagrams. The RDMA CM's
//! `rdma_join_multicast` does that in the kernel; with plain verbs, as
//! here, a UDP socket that joins the group does it (and must live as long
//! as the attachment).
//!
//! ```text
//! cargo run --example multicast                # server, on TCP port 18515
//! cargo run --example multicast -- HOST        # client
//! cargo run --example multicast -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::{Ipv4Addr, TcpStream, UdpSocket};

use rverbs::{AccessFlags, AhAttr, ConnectOptions, Endpoint, Gid, GlobalRoute, QpInitAttr, QpType, RecvWr, SendWr};
use util::{Result, Role};

/// Room the device writes the Global Route Header into.
const GRH: usize = 40;
/// The group: an administratively scoped IPv4 multicast address.
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);
/// The QP number of a multicast destination.
const MULTICAST_QPN: u32 = 0xff_ffff;

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, |tcp| side(tcp, "server"), |tcp| side(tcp, "client"))
}

fn side(mut tcp: TcpStream, me: &str) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let opts = ConnectOptions::default(); // its qkey is the one both sides use
    let sgid_index = ctx.default_sgid_index(1)?;
    let group = Gid(GROUP.to_ipv6_mapped().octets());

    qp.to_init(&opts)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, (GRH + 256) as u32)?])])?;
    // Readies both QPs (UD needs nothing of the peer's endpoint).
    qp.handshake(&mut tcp, &qp.local_endpoint(Endpoint::random_psn(), &opts)?, &opts)?;

    if me == "server" {
        let local = ctx.query_gid(1, sgid_index.into())?.ok_or("no default GID")?.gid;
        let ip = local.to_ipv4().ok_or("the default GID is not an IPv4 one (RoCE v2 over IPv4)")?;
        let member = UdpSocket::bind((ip, 0))?;
        member.join_multicast_v4(&GROUP, &ip)?;
        qp.attach_mcast(&group, 0)?;
        println!("server: QP {:#x} attached to {}", qp.qp_num(), group.to_inet_string());
        util::barrier(&mut tcp)?; // the client may send now
                                  // A datagram the network or the IP layer dropped never completes
                                  // anything: next_wc fails after its timeout instead of hanging.
        let wc = util::next_wc(&mut cq)?.ok()?;
        let mut msg = vec![0u8; wc.byte_len as usize - GRH];
        mr.read_at(GRH, &mut msg)?;
        println!("server: from QP {:#x} to the group: \"{}\"", wc.src_qp, String::from_utf8_lossy(&msg));
        qp.detach_mcast(&group, 0)?;
        drop(member);
    } else {
        util::barrier(&mut tcp)?; // the server is in the group
        let grh = GlobalRoute { dgid: group, sgid_index, hop_limit: 1, ..Default::default() };
        let ah = pd.create_ah(&AhAttr { port_num: 1, grh: Some(grh), ..Default::default() })?;
        let text = "datagram from the client to the group";
        mr.write_at(1024, text.as_bytes())?;
        let sgl = [mr.sge(1024, text.len() as u32)?];
        qp.post_send(&[SendWr::send(2, &sgl).to(ah.ud_dest(MULTICAST_QPN, opts.qkey)).signaled()])?;
        util::next_wc(&mut cq)?.ok()?;
        println!("client: sent to {}", group.to_inet_string());
    }
    util::barrier(&mut tcp)
}
