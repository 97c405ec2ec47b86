//! RDMA atomics on a counter in the server's memory: the client adds to it
//! twice with FETCH_AND_ADD and swaps it with COMPARE_AND_SWAP (once
//! matching, once not), and checks the old values each one returns.
//!
//! The counter is an 8-byte aligned word in the responder's byte order
//! (rxe: the host's); the old value lands in the requester's SGE in the
//! same order.
//!
//! ```text
//! cargo run --example atomics                # server, on TCP port 18515
//! cargo run --example atomics -- HOST        # client
//! cargo run --example atomics -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{AccessFlags, ConnectOptions, Endpoint, QpInitAttr, QpType, SendWr};
use util::{Result, Role};

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, |tcp| side(tcp, true), |tcp| side(tcp, false))
}

fn side(mut tcp: TcpStream, server: bool) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    // Atomics need REMOTE_ATOMIC on the target region (and LOCAL_WRITE).
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_ATOMIC)?;
    if server {
        mr.write_at(0, &40u64.to_ne_bytes())?; // the counter, at offset 0
    }
    // ConnectOptions' defaults allow one outstanding READ/atomic each way.
    let opts = ConnectOptions::default();
    let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?.with_memory(&mr);
    let peer = qp.handshake(&mut tcp, &me, &opts)?;

    if server {
        util::barrier(&mut tcp)?; // the client is done
        let mut word = [0u8; 8];
        mr.read_at(0, &mut word)?;
        println!("server: the counter is {}", u64::from_ne_bytes(word));
        assert_eq!(u64::from_ne_bytes(word), 100);
        return Ok(());
    }

    let counter = peer.memory.ok_or("the server offered no memory")?.at(0, 8)?;
    // Each atomic returns the word's old value into one 8-byte SGE.
    let olds: Vec<_> = (0..4).map(|i| mr.sge(8 * i, 8)).collect::<rverbs::Result<_>>()?;
    let ops = [
        SendWr::fetch_add(1, &olds[0..1], counter, 1).signaled(), // 40 -> 41
        SendWr::fetch_add(2, &olds[1..2], counter, 1).signaled(), // 41 -> 42
        SendWr::compare_swap(3, &olds[2..3], counter, 42, 100).signaled(), // equal: 42 -> 100
        SendWr::compare_swap(4, &olds[3..4], counter, 1, 7).signaled(), // not equal: stays 100
    ];
    qp.post_send(&ops)?;
    for _ in 0..ops.len() {
        util::next_wc(&mut cq)?.ok()?;
    }
    let mut old = [0u8; 8];
    for (i, want) in [40u64, 41, 42, 100].into_iter().enumerate() {
        mr.read_at(8 * i, &mut old)?;
        println!("client: atomic {} saw {}", i + 1, u64::from_ne_bytes(old));
        assert_eq!(u64::from_ne_bytes(old), want);
    }
    util::barrier(&mut tcp)
}
