//! A shared receive queue and its limit event. The server's RC QP takes its
//! receive buffers from an SRQ (`ibv_create_srq`) holding 8 of them, armed
//! to raise `SrqLimitReached` when fewer than 6 remain (`ibv_modify_srq`).
//! The client sends 4 messages; after the third the kernel raises the
//! event, which a second server thread waits for (`ibv_get_async_event`)
//! and answers through an `SrqControl`, the SRQ's control handle: it finds
//! the limit disarmed (the event is one-shot) and arms it again, while the
//! first thread keeps polling, with the SRQ's posting side to itself.
//!
//! ```text
//! cargo run --example srq                # server, on TCP port 18515
//! cargo run --example srq -- HOST        # client
//! cargo run --example srq -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{
    AccessFlags, AsyncEventType, ConnectOptions, CqInitAttr, Endpoint, QpInitAttr, QpType, SendWr, SrqAttr, SrqControl,
    WcOpcode,
};
use util::{Result, Role};

/// Messages the client sends.
const MESSAGES: usize = 4;
/// Receives posted to the SRQ before the first message.
const POSTED: u64 = 8;
/// The limit: the event fires when fewer receives than this remain.
const LIMIT: u32 = 6;

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
    let channel = ctx.create_comp_channel()?;
    let mut cq = ctx.create_cq_with(&CqInitAttr { cqe: 16, channel: Some(&channel), ..Default::default() })?;
    let mut srq = pd.create_srq(&SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 })?;
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.srq = Some(&srq); // its receives come from the SRQ
    let qp = pd.create_qp(&init)?;
    let mr = pd.alloc_mr(POSTED as usize * 64, AccessFlags::LOCAL_WRITE)?;
    // The batch: (wr_id, SGE) pairs, which own their SGEs, built in a
    // loop and posted with one call.
    let mut batch = Vec::new();
    for i in 0..POSTED {
        batch.push((i, mr.sge(i as usize * 64, 64)?));
    }
    srq.post_recv_iter(batch)?;
    srq.modify_limit(LIMIT)?; // armed
    let control = srq.control().clone();

    std::thread::scope(|s| {
        let watcher = s.spawn(|| watch(&ctx, &control));
        let opts = ConnectOptions::default();
        let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?;
        let peer = qp.handshake(&mut tcp, &me, &opts)?;
        println!("server: connected to {peer}");
        for _ in 0..MESSAGES {
            let wc = util::next_wc(&mut cq)?.ok()?;
            if wc.opcode != WcOpcode::RECV {
                return Err(format!("server: unexpected completion {wc:?}").into());
            }
            let mut msg = vec![0u8; wc.byte_len as usize];
            mr.read_at(wc.wr_id as usize * 64, &mut msg)?;
            println!("server: buffer {} received \"{}\"", wc.wr_id, String::from_utf8_lossy(&msg));
        }
        watcher.join().map_err(|_| "the watcher thread panicked")??;
        util::barrier(&mut tcp)
    })
}

/// The second server thread: waits for the limit event, then re-arms the
/// SRQ through its control handle.
fn watch(ctx: &rverbs::Context, control: &SrqControl) -> Result {
    let ev = ctx.get_async_event_timeout(10_000)?.ok_or("server: no async event within 10 s")?;
    if ev.event_type != AsyncEventType::SrqLimitReached {
        return Err(format!("server: unexpected async event {ev:?}").into());
    }
    let left = control.query()?.srq_limit;
    println!("server: fewer than {LIMIT} receives left in the SRQ; its limit now {left} (one-shot)");
    control.modify_limit(2)?;
    println!("server: re-armed at {}", control.query()?.srq_limit);
    Ok(())
}

fn client(mut tcp: TcpStream) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let channel = ctx.create_comp_channel()?;
    let mut cq = ctx.create_cq_with(&CqInitAttr { cqe: 16, channel: Some(&channel), ..Default::default() })?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let opts = ConnectOptions::default();
    let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?;
    let peer = qp.handshake(&mut tcp, &me, &opts)?;
    println!("client: connected to {peer}");
    for i in 0..MESSAGES {
        let text = format!("message {i}");
        mr.write_at(i * 64, text.as_bytes())?;
        qp.post_send(&[SendWr::send(i as u64, &[mr.sge(i * 64, text.len() as u32)?]).signaled()])?;
        util::next_wc(&mut cq)?.ok()?;
    }
    util::barrier(&mut tcp)
}
