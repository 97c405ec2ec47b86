//! Memory windows: the server opens 256 bytes of a region to the client
//! through a type 2 window (its key travels in the handshake, the region's
//! own key never leaves the server), the client RDMA WRITEs into it, the
//! server reads the bytes and revokes the window with a local invalidation;
//! the client's next write is refused by the server's device
//! (`REM_ACCESS_ERR`), and the server's memory is unchanged.
//!
//! ```text
//! cargo run --example memory_window                # server, on TCP port 18515
//! cargo run --example memory_window -- HOST        # client
//! cargo run --example memory_window -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{
    AccessFlags, ConnectOptions, Endpoint, MwType, QpInitAttr, QpType, QueuePair, RemoteMemory, SendWr, WcStatus,
};
use util::{Result, Role};

/// Bytes the window opens.
const WINDOW: usize = 256;
const MESSAGE: &[u8] = b"written through the server's memory window";

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, server, client)
}

fn server(mut tcp: TcpStream) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    // No remote rights on the region itself: only windows may grant them.
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)?;
    let mw = pd.alloc_mw(MwType::Type2)?;
    // The bind's key is chosen before the bind: it goes out in the handshake.
    let bind = mw.bind_info(&mr, 0, WINDOW, AccessFlags::REMOTE_WRITE)?;
    let opts = ConnectOptions::default();
    let window = RemoteMemory { addr: mr.addr(), rkey: bind.new_rkey, len: WINDOW as u64 };
    let me = Endpoint { memory: Some(window), ..qp.local_endpoint(Endpoint::random_psn(), &opts)? };
    qp.handshake(&mut tcp, &me, &opts)?;
    // A type 2 window is bound through the send queue of the QP it serves.
    qp.post_send(&[SendWr::bind_mw(1, bind).signaled()])?;
    println!("server: window bound ({:?}), key {:#x}", util::next_wc(&mut cq)?.ok()?.opcode, bind.new_rkey);
    util::barrier(&mut tcp)?; // open: the client writes
    util::barrier(&mut tcp)?; // the client wrote
    let mut found = vec![0u8; MESSAGE.len()];
    mr.read_at(0, &mut found)?;
    println!("server: my memory holds \"{}\"", String::from_utf8_lossy(&found));
    assert_eq!(found, MESSAGE);
    qp.post_send(&[SendWr::local_inv(2, bind.new_rkey).signaled()])?;
    println!("server: window revoked ({:?})", util::next_wc(&mut cq)?.ok()?.opcode);
    util::barrier(&mut tcp)?; // closed: the client tries again
    util::barrier(&mut tcp)?; // the client was refused
    mr.read_at(0, &mut found)?;
    assert_eq!(found, MESSAGE, "the refused write changed nothing");
    Ok(())
}

fn client(mut tcp: TcpStream) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16)?;
    let mut qp: QueuePair = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let opts = ConnectOptions::default();
    let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?;
    let peer = qp.handshake(&mut tcp, &me, &opts)?;
    let window = peer.memory.ok_or("the server offered no window")?;
    mr.write_at(0, MESSAGE)?;
    let src = [mr.sge(0, MESSAGE.len() as u32)?];
    let to = window.at(0, MESSAGE.len() as u64)?;
    util::barrier(&mut tcp)?; // the window is open
    qp.post_send(&[SendWr::write(1, &src, to).signaled()])?;
    println!("client: wrote through the window ({:?})", util::next_wc(&mut cq)?.ok()?.opcode);
    util::barrier(&mut tcp)?;
    util::barrier(&mut tcp)?; // the window is closed
    mr.write_at(0, b"too late")?;
    qp.post_send(&[SendWr::write(2, &src, to).signaled()])?;
    let wc = util::next_wc(&mut cq)?; // an error status is what we expect here
    println!("client: the second write: {}", wc.status);
    if wc.status != WcStatus::REM_ACCESS_ERR {
        return Err(format!("the write through a revoked window ended with {}", wc.status).into());
    }
    util::barrier(&mut tcp)
}
