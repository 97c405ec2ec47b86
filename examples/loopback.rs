//! A first program: two RC QPs of this process connected to each other in
//! one call (`QpControl::connect_pair`: no TCP, no CM), then an RDMA
//! WRITE from A into B's memory and SENDs with immediate data from A into
//! receives B posted as one batch (`post_recv_iter`). What a test or a
//! single-machine experiment needs; `rdma_write_read` and `rc_send_recv`
//! do the same between two processes.
//!
//! ```text
//! cargo run --example loopback
//! ```

// `pub(crate)`: tests/examples.rs runs this file too. Only `Result` and
// `next_wc` are used here.
#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use rverbs::{AccessFlags, ConnectOptions, QpInitAttr, QpType, RemoteMemory, SendWr, WcFlags, WcOpcode};
use util::Result;

/// SENDs from A, each into one of B's receives.
const MESSAGES: u64 = 4;
/// Bytes of B's region each receive gets.
const SLOT: usize = 64;

fn main() -> Result {
    run()
}

/// The whole program (tests/examples.rs calls it).
pub fn run() -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let (mut cq_a, mut cq_b) = (ctx.create_cq(16)?, ctx.create_cq(16)?);
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a))?;
    let mut b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b))?;
    let ma = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    // B's region: receives in slots 1.., and A may WRITE into it.
    let mb = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    let opts = ConnectOptions::default();

    // Receives go in before anything can arrive: INIT, then one batch of
    // (wr_id, SGE) pairs, built in a loop and posted with one call.
    b.to_init(&opts)?;
    let mut batch = Vec::new();
    for i in 1..=MESSAGES {
        batch.push((i, mb.sge(i as usize * SLOT, SLOT as u32)?));
    }
    b.post_recv_iter(batch)?;

    // RESET/INIT -> RTR -> RTS for both, towards each other.
    let (ea, eb) = a.connect_pair(&b, &opts)?;
    println!("QP {:#x} and QP {:#x} connected", ea.qpn, eb.qpn);

    // An RDMA WRITE into B's slot 0. Between two processes the address
    // and rkey come from the peer's endpoint (`Endpoint::with_memory`).
    ma.write_at(0, b"written by A")?;
    let to = RemoteMemory::of(&mb).at(0, 12)?;
    a.post_send(&[SendWr::write(100, &[ma.sge(0, 12)?], to).signaled()])?;
    util::next_wc(&mut cq_a)?.ok()?; // an error status names itself, the request and the QP
    let mut got = [0u8; 12];
    mb.read_at(0, &mut got)?;
    println!("B's memory holds \"{}\"", String::from_utf8_lossy(&got));

    // SENDs with immediate data, one per receive.
    for i in 1..=MESSAGES {
        let text = format!("message {i}");
        ma.write_at(SLOT, text.as_bytes())?;
        a.post_send(&[SendWr::send(i, &[ma.sge(SLOT, text.len() as u32)?]).imm(i as u32 * 10).signaled()])?;
        util::next_wc(&mut cq_a)?.ok()?;
        let wc = util::next_wc(&mut cq_b)?.ok()?;
        if wc.opcode != WcOpcode::RECV || !wc.wc_flags.contains(WcFlags::WITH_IMM) {
            return Err(format!("expected a receive with immediate data, got {wc:?}").into());
        }
        let mut msg = vec![0u8; wc.byte_len as usize];
        mb.read_at(wc.wr_id as usize * SLOT, &mut msg)?;
        println!("B: receive {} got \"{}\", immediate {}", wc.wr_id, String::from_utf8_lossy(&msg), wc.imm_data);
        if msg != text.as_bytes() || wc.imm_data != i as u32 * 10 {
            return Err(format!("receive {}: not what A sent", wc.wr_id).into());
        }
    }
    Ok(())
}
