//! A soak: mixed traffic on the first RDMA device for a given time, in
//! rounds, with every byte and every completion checked. `cargo xtask soak`
//! runs it in a guest (and `cargo xtask test` runs two minutes of it).
//!
//! Each round creates its objects, moves data, checks it and destroys them:
//!
//! * RC: completion events (arm, post, `get_cq_event`, ack, poll), SENDs
//!   with immediate data into posted receives, RDMA WRITEs and READs, and
//!   FETCH_ADD / CMP_SWP with every returned old value checked;
//! * an SRQ shared by two RC QPs, fed by two senders;
//! * UD datagrams through an address handle;
//! * an RDMA CM connection (listener thread and client, a message each way,
//!   then a disconnect);
//! * rdma-core's `ibv_rc_pingpong`, `ibv_srq_pingpong` and `ibv_ud_pingpong`
//!   (one per round, in turn; `-c` checks the data) on rverbs' C library,
//!   `/opt/rverbs/lib/libibverbs.so.1`, both sides (not with `--no-capi`).
//!
//! Every message carries its sequence number and a pattern derived from
//! it, so a lost, repeated, misplaced or damaged message shows. Every work
//! request has a wr_id that is posted once in the whole run; a completion
//! whose wr_id is not outstanding is a duplicate, one still outstanding at
//! the end of its round is lost.
//!
//! Every `--sample` seconds it prints a line with the counts, its RSS and
//! the kernel's object counts (`rdma resource show`); at the end a summary.
//! It exits 1 when anything failed: an error, a lost or duplicated
//! completion, kernel objects left over once everything is destroyed, or
//! RSS grown by more than 4 MiB since the end of the warm-up (the first
//! tenth of the run, at least one round).
//!
//! ```text
//! cargo run --example soak -- --seconds 120 [--sample 10] [--no-capi]
//! ```

#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rverbs::cm::{self, ConnParam, Listener};
use rverbs::{
    AccessFlags, CompletionChannel, CompletionQueue, ConnectOptions, Context, CqInitAttr, MemoryRegion,
    ProtectionDomain as Pd, QpInitAttr, QpType, QueuePair, RemoteMemory, SendWr, Sge, SrqAttr, Wc, WcFlags, WcOpcode,
};
use util::Result;

/// How long one completion, event or connection step may take.
const WAIT: Duration = Duration::from_secs(20);
/// One message slot in a region.
const SLOT: usize = 256;
/// Bytes of a region (slots for messages, WRITEs, READs and atomics).
const REGION: usize = 64 * SLOT;
/// UD receives start with the 40-byte GRH.
const GRH: usize = 40;
/// RSS growth allowed after the warm-up.
const RSS_ALLOWANCE_KIB: u64 = 4096;
/// Where rdma-core's tools find rverbs' C library in the guest.
const CAPI_DIR: &str = "/opt/rverbs/lib";
const IBV_TOOLS: [&str; 3] = ["ibv_rc_pingpong", "ibv_srq_pingpong", "ibv_ud_pingpong"];

/// One part of a round.
type Step<'a> = &'a dyn Fn(&mut Ledger, &mut Stats) -> Result;

struct Args {
    duration: Duration,
    sample: Duration,
    capi: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args { duration: Duration::from_secs(60), sample: Duration::from_secs(10), capi: true };
    let mut it = std::env::args().skip(1);
    while let Some(w) = it.next() {
        let mut num = |what: &str| -> Result<u64> {
            let v = it.next().ok_or(format!("{what} needs a value"))?;
            Ok(v.parse().map_err(|_| format!("{what} {v:?}: not a number"))?)
        };
        match w.as_str() {
            "--seconds" => a.duration = Duration::from_secs(num("--seconds")?),
            "--minutes" => a.duration = Duration::from_secs(60 * num("--minutes")?),
            "--sample" => a.sample = Duration::from_secs(num("--sample")?.max(1)),
            "--no-capi" => a.capi = false,
            _ => {
                return Err(format!(
                    "unknown argument {w:?}; usage: soak [--seconds N | --minutes N] [--sample S] [--no-capi]"
                )
                .into())
            }
        }
    }
    Ok(a)
}

/// Completions by wr_id: each wr_id is handed out once and must complete once.
#[derive(Default)]
struct Ledger {
    next: u64,
    outstanding: HashSet<u64>,
    completions: u64,
    lost: u64,
    duplicated: u64,
}

impl Ledger {
    /// Ids start at `base` (threads keep apart).
    fn starting_at(base: u64) -> Ledger {
        Ledger { next: base, ..Default::default() }
    }

    /// A new wr_id, outstanding from now on.
    fn id(&mut self) -> u64 {
        self.next += 1;
        self.outstanding.insert(self.next);
        self.next
    }

    /// Books one completion; an error status is an error of the round.
    fn complete(&mut self, wc: &Wc, what: &str) -> Result {
        if !self.outstanding.remove(&wc.wr_id) {
            self.duplicated += 1;
            eprintln!("soak: {what}: completion for wr_id {} that is not outstanding: {wc:?}", wc.wr_id);
            return Ok(());
        }
        self.completions += 1;
        if !wc.is_success() {
            return Err(format!("{what}: {}", wc.ok().err().map(|e| e.to_string()).unwrap_or_default()).into());
        }
        Ok(())
    }

    /// The end of a round: whatever is still outstanding is lost, unless the
    /// round failed (then its error counts and the rest is dropped).
    fn settle(&mut self, failed: bool) {
        if !failed && !self.outstanding.is_empty() {
            eprintln!("soak: {} completions lost: wr_ids {:?}", self.outstanding.len(), self.outstanding);
            self.lost += self.outstanding.len() as u64;
        }
        self.outstanding.clear();
    }
}

/// The whole run's counts.
#[derive(Default)]
struct Stats {
    ops: BTreeMap<&'static str, u64>,
    rounds: u64,
    errors: u64,
    completions: u64,
    lost: u64,
    duplicated: u64,
}

impl Stats {
    fn op(&mut self, kind: &'static str, n: u64) {
        *self.ops.entry(kind).or_default() += n;
    }

    fn absorb(&mut self, l: &mut Ledger, failed: bool) {
        l.settle(failed);
        self.completions += std::mem::take(&mut l.completions);
        self.lost += std::mem::take(&mut l.lost);
        self.duplicated += std::mem::take(&mut l.duplicated);
    }

    fn total_ops(&self) -> u64 {
        self.ops.values().sum()
    }
}

/// Bytes of message `seq`: its sequence number, then a pattern of it; the
/// length varies with `seq` between 8 and `max`.
fn message(seq: u64, max: usize) -> Vec<u8> {
    let len = 8 + (seq.wrapping_mul(0x9e37_79b9) as usize % (max - 7));
    let mut m = seq.to_le_bytes().to_vec();
    m.extend(pattern(seq, len - 8));
    m
}

/// `len` bytes that depend on `seed` and on their position.
fn pattern(seed: u64, len: usize) -> impl Iterator<Item = u8> {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    (0..len).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 24) as u8
    })
}

/// Checks the received bytes `got` against message `seq` (from its header)
/// and books it in `expected` (each message once).
fn check_message(got: &[u8], max: usize, expected: &mut HashSet<u64>, what: &str) -> Result<u64> {
    let seq = u64::from_le_bytes(got.get(..8).ok_or(format!("{what}: {} bytes, no header", got.len()))?.try_into()?);
    if !expected.remove(&seq) {
        return Err(format!("{what}: message {seq} was not sent or came twice").into());
    }
    if got != message(seq, max) {
        return Err(format!("{what}: message {seq}: bytes differ from what was sent ({} bytes)", got.len()).into());
    }
    Ok(seq)
}

/// A CQ with its own completion channel.
fn cq_with_channel(ctx: &Context, cqe: u32) -> Result<(CompletionChannel, CompletionQueue)> {
    let ch = ctx.create_comp_channel()?;
    let cq = ctx.create_cq_with(&CqInitAttr { cqe, channel: Some(&ch), ..Default::default() })?;
    Ok((ch, cq))
}

/// Waits for `n` completions of `cq` and books them.
fn reap(cq: &mut CompletionQueue, led: &mut Ledger, n: usize, what: &str) -> Result<Vec<Wc>> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::with_capacity(n);
    let mut buf = [Wc::default(); 16];
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let k = cq.wait_any(&mut buf[..(n - got.len()).min(16)], Some(left))?;
        if k == 0 {
            return Err(format!("{what}: {} of {n} completions within {WAIT:?}", got.len()).into());
        }
        for wc in &buf[..k] {
            led.complete(wc, what)?;
            got.push(*wc);
        }
    }
    Ok(got)
}

/// Nothing more may come: a completion now is one too many.
fn no_more(cq: &mut CompletionQueue, led: &mut Ledger, what: &str) -> Result {
    let mut buf = [Wc::default(); 8];
    loop {
        let k = cq.poll(&mut buf);
        if k == 0 {
            return Ok(());
        }
        for wc in &buf[..k] {
            led.complete(wc, what)?;
        }
    }
}

fn expect_opcode(wcs: &[Wc], op: WcOpcode, what: &str) -> Result {
    match wcs.iter().find(|wc| wc.opcode != op) {
        Some(wc) => Err(format!("{what}: expected {op:?}, got {wc:?}").into()),
        None => Ok(()),
    }
}

fn rc_init(cq: &CompletionQueue, depth: u32) -> QpInitAttr<'_> {
    let mut init = QpInitAttr::new(QpType::Rc, cq);
    init.cap.max_send_wr = depth;
    init.cap.max_recv_wr = depth;
    init
}

/// SENDs of `n` messages from `mr`'s slots `0..n` (a fresh sequence number each).
fn post_sends(
    qp: &mut QueuePair,
    mr: &MemoryRegion,
    led: &mut Ledger,
    n: usize,
    dest: Option<rverbs::UdDest<'_>>,
    max: usize,
) -> Result<HashSet<u64>> {
    let mut sent = HashSet::new();
    let mut sgls: Vec<([Sge<'_>; 1], u64)> = Vec::with_capacity(n);
    for j in 0..n {
        let id = led.id();
        let m = message(id, max);
        mr.write_at(j * SLOT, &m)?;
        sgls.push(([mr.sge(j * SLOT, m.len() as u32)?], id));
        sent.insert(id);
    }
    let wrs: Vec<SendWr<'_>> = sgls
        .iter()
        .map(|(sgl, id)| {
            let wr = SendWr::send(*id, sgl).imm(*id as u32).signaled();
            match dest {
                Some(d) => wr.to(d),
                None => wr,
            }
        })
        .collect();
    qp.post_send(&wrs)?;
    Ok(sent)
}

/// The receives `wcs` (whose slot in `mr` is `slot_of[wr_id]`), checked
/// against the messages `sent`.
fn check_receives(
    wcs: &[Wc],
    mr: &MemoryRegion,
    slot_of: &HashMap<u64, usize>,
    skip: usize,
    max: usize,
    sent: &mut HashSet<u64>,
    what: &str,
) -> Result {
    expect_opcode(wcs, WcOpcode::RECV, what)?;
    for wc in wcs {
        let slot = slot_of[&wc.wr_id];
        let len = (wc.byte_len as usize).checked_sub(skip).ok_or(format!("{what}: short receive {wc:?}"))?;
        let mut got = vec![0u8; len];
        mr.read_at(slot * SLOT + skip, &mut got)?;
        let seq = check_message(&got, max, sent, what)?;
        if !wc.wc_flags.contains(WcFlags::WITH_IMM) || wc.imm_data != seq as u32 {
            return Err(format!("{what}: message {seq}: immediate data {:#x} ({:?})", wc.imm_data, wc.wc_flags).into());
        }
    }
    if !sent.is_empty() {
        return Err(format!("{what}: messages {sent:?} never arrived").into());
    }
    Ok(())
}

/// RC between two QPs of this process: events, SEND/RECV, WRITE, READ,
/// atomics.
fn rc_round(ctx: &Context, pd: &Pd, led: &mut Ledger, stats: &mut Stats) -> Result {
    const MSGS: usize = 16;
    let (ch_a, mut cq_a) = cq_with_channel(ctx, 64)?;
    let (ch_b, mut cq_b) = cq_with_channel(ctx, 64)?;
    let mut a = pd.create_qp(&rc_init(&cq_a, 32))?;
    let mut b = pd.create_qp(&rc_init(&cq_b, 32))?;
    let ma = pd.alloc_mr(REGION, AccessFlags::LOCAL_WRITE)?;
    let remote =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let mb = pd.alloc_mr(REGION, remote)?;
    let opts = ConnectOptions::default();
    b.to_init(&opts)?;
    a.connect_pair(&b, &opts)?;

    // Completion events first, on CQs nothing has armed yet: arm both, post
    // a receive and a SEND, read one event from each channel, ack, poll.
    for _ in 0..4 {
        let rid = led.id();
        b.post_recv_iter([(rid, mb.sge(0, SLOT as u32)?)])?;
        cq_a.req_notify(false)?;
        cq_b.req_notify(false)?;
        let sent = post_sends(&mut a, &ma, led, 1, None, SLOT)?;
        for (ch, cq, what) in [(&ch_a, &mut cq_a, "event (send)"), (&ch_b, &mut cq_b, "event (recv)")] {
            let ev =
                ch.get_cq_event_timeout(WAIT.as_millis() as i32)?.ok_or(format!("{what}: no event within {WAIT:?}"))?;
            if ev.cq_user_handle != cq.user_handle() {
                return Err(format!("{what}: event for another CQ ({:#x})", ev.cq_user_handle).into());
            }
            cq.ack_events(1);
            let mut buf = [Wc::default(); 2];
            let k = cq.poll(&mut buf);
            if k != 1 {
                return Err(format!("{what}: {k} completions after the event").into());
            }
            led.complete(&buf[0], what)?;
            if what == "event (recv)" {
                let slots = HashMap::from([(rid, 0)]);
                check_receives(&buf[..1], &mb, &slots, 0, SLOT, &mut sent.clone(), what)?;
            }
        }
        stats.op("cq_event", 2);
    }

    // SEND/RECV: MSGS receives, then MSGS SENDs with immediate data.
    let mut slot_of = HashMap::new();
    let mut batch = Vec::with_capacity(MSGS);
    for j in 0..MSGS {
        let id = led.id();
        slot_of.insert(id, j);
        batch.push((id, mb.sge(j * SLOT, SLOT as u32)?));
    }
    b.post_recv_iter(batch)?;
    let mut sent = post_sends(&mut a, &ma, led, MSGS, None, SLOT)?;
    expect_opcode(&reap(&mut cq_a, led, MSGS, "rc send")?, WcOpcode::SEND, "rc send")?;
    let recvs = reap(&mut cq_b, led, MSGS, "rc recv")?;
    check_receives(&recvs, &mb, &slot_of, 0, SLOT, &mut sent, "rc recv")?;
    stats.op("rc_send", MSGS as u64);

    // WRITE: 8 slots of a's into b's 16.., checked in b's memory.
    const W: usize = 8;
    let base = 16;
    let mut written = Vec::new();
    let mut sgls = Vec::new();
    for j in 0..W {
        let id = led.id();
        let data: Vec<u8> = pattern(id, 1 + (id as usize * 13) % SLOT).collect();
        ma.write_at((base + j) * SLOT, &data)?;
        sgls.push(([ma.sge((base + j) * SLOT, data.len() as u32)?], id, data.len()));
        written.push(data);
    }
    let wrs: Vec<SendWr<'_>> = sgls
        .iter()
        .enumerate()
        .map(|(j, (sgl, id, len))| {
            let to = RemoteMemory::of(&mb).at(((base + j) * SLOT) as u64, *len as u64)?;
            Ok(SendWr::write(*id, sgl, to).signaled())
        })
        .collect::<rverbs::Result<_>>()?;
    a.post_send(&wrs)?;
    expect_opcode(&reap(&mut cq_a, led, W, "write")?, WcOpcode::RDMA_WRITE, "write")?;
    for (j, data) in written.iter().enumerate() {
        let mut got = vec![0u8; data.len()];
        mb.read_at((base + j) * SLOT, &mut got)?;
        if &got != data {
            return Err(format!("write {j}: the target holds other bytes").into());
        }
    }
    stats.op("rdma_write", W as u64);

    // READ: b's 32.. (written by b's CPU) into a's 32...
    let base = 32;
    let mut sources = Vec::new();
    let mut sgls = Vec::new();
    for j in 0..W {
        let id = led.id();
        let data: Vec<u8> = pattern(!id, 1 + (id as usize * 29) % SLOT).collect();
        mb.write_at((base + j) * SLOT, &data)?;
        sgls.push(([ma.sge((base + j) * SLOT, data.len() as u32)?], id, data.len()));
        sources.push(data);
    }
    let wrs: Vec<SendWr<'_>> = sgls
        .iter()
        .enumerate()
        .map(|(j, (sgl, id, len))| {
            let from = RemoteMemory::of(&mb).at(((base + j) * SLOT) as u64, *len as u64)?;
            Ok(SendWr::read(*id, sgl, from).signaled())
        })
        .collect::<rverbs::Result<_>>()?;
    a.post_send(&wrs)?;
    expect_opcode(&reap(&mut cq_a, led, W, "read")?, WcOpcode::RDMA_READ, "read")?;
    for (j, data) in sources.iter().enumerate() {
        let mut got = vec![0u8; data.len()];
        ma.read_at((base + j) * SLOT, &mut got)?;
        if &got != data {
            return Err(format!("read {j}: brought back other bytes").into());
        }
    }
    stats.op("rdma_read", W as u64);

    // Atomics on b's word at slot 48: FETCH_ADDs, a CMP_SWP that swaps and
    // one that does not; the old values land in a's slot 48.
    let word = 48 * SLOT;
    let start = led.next.wrapping_mul(1000);
    mb.write_at(word, &start.to_ne_bytes())?;
    let olds: Vec<[Sge<'_>; 1]> = (0..6).map(|i| Ok([ma.sge(word + 8 * i, 8)?])).collect::<rverbs::Result<_>>()?;
    let target = RemoteMemory::of(&mb).at(word as u64, 8)?;
    let adds = [1u64, 7, 1 << 40, 3];
    let mut wrs = Vec::new();
    let mut want = Vec::new();
    let mut v = start;
    for (i, add) in adds.iter().enumerate() {
        wrs.push(SendWr::fetch_add(led.id(), &olds[i], target, *add).signaled());
        want.push(v);
        v = v.wrapping_add(*add);
    }
    let swapped = v ^ 0x5a5a_5a5a;
    wrs.push(SendWr::compare_swap(led.id(), &olds[4], target, v, swapped).signaled()); // equal: swaps
    want.push(v);
    wrs.push(SendWr::compare_swap(led.id(), &olds[5], target, v, 1).signaled()); // not equal any more
    want.push(swapped);
    a.post_send(&wrs)?;
    let wcs = reap(&mut cq_a, led, wrs.len(), "atomic")?;
    if let Some(wc) = wcs.iter().find(|wc| !matches!(wc.opcode, WcOpcode::FETCH_ADD | WcOpcode::COMP_SWAP)) {
        return Err(format!("atomic: unexpected completion {wc:?}").into());
    }
    let mut w = [0u8; 8];
    for (i, want) in want.iter().enumerate() {
        ma.read_at(word + 8 * i, &mut w)?;
        if u64::from_ne_bytes(w) != *want {
            return Err(format!("atomic {i}: old value {} instead of {want}", u64::from_ne_bytes(w)).into());
        }
    }
    mb.read_at(word, &mut w)?;
    if u64::from_ne_bytes(w) != swapped {
        return Err(format!("atomic: the word ends at {} instead of {swapped}", u64::from_ne_bytes(w)).into());
    }
    stats.op("atomic", wrs.len() as u64);

    no_more(&mut cq_a, led, "rc (after the round)")?;
    no_more(&mut cq_b, led, "rc (after the round)")?;
    Ok(())
}

/// One SRQ behind two RC QPs, each fed by its own sender.
fn srq_round(ctx: &Context, pd: &Pd, led: &mut Ledger, stats: &mut Stats) -> Result {
    const PER: usize = 8;
    let (_ch_s, mut cq_s) = cq_with_channel(ctx, 64)?;
    let (_ch_c, mut cq_c) = cq_with_channel(ctx, 64)?;
    let mut srq = pd.create_srq(&SrqAttr { max_wr: 32, max_sge: 1, srq_limit: 0 })?;
    let mr = pd.alloc_mr(REGION, AccessFlags::LOCAL_WRITE)?;
    let mut slot_of = HashMap::new();
    let mut batch = Vec::new();
    for j in 0..2 * PER {
        let id = led.id();
        slot_of.insert(id, j);
        batch.push((id, mr.sge(j * SLOT, SLOT as u32)?));
    }
    srq.post_recv_iter(batch)?;
    let opts = ConnectOptions::default();
    let mut init = rc_init(&cq_s, 16);
    init.srq = Some(&srq);
    let servers = [pd.create_qp(&init)?, pd.create_qp(&init)?];
    let mut clients = [pd.create_qp(&rc_init(&cq_c, 16))?, pd.create_qp(&rc_init(&cq_c, 16))?];
    let send_mr = pd.alloc_mr(REGION, AccessFlags::LOCAL_WRITE)?;
    let mut sent = HashSet::new();
    for (i, (c, s)) in clients.iter_mut().zip(&servers).enumerate() {
        c.connect_pair(s, &opts)?;
        // Each client its own half of the send region.
        let half = &send_mr;
        let mut ids = HashSet::new();
        let mut sgls = Vec::new();
        for j in 0..PER {
            let id = led.id();
            let m = message(id, SLOT);
            let at = (i * PER + j) * SLOT;
            half.write_at(at, &m)?;
            sgls.push(([half.sge(at, m.len() as u32)?], id));
            ids.insert(id);
        }
        let wrs: Vec<SendWr<'_>> =
            sgls.iter().map(|(sgl, id)| SendWr::send(*id, sgl).imm(*id as u32).signaled()).collect();
        c.post_send(&wrs)?;
        sent.extend(ids);
    }
    expect_opcode(&reap(&mut cq_c, led, 2 * PER, "srq send")?, WcOpcode::SEND, "srq send")?;
    let recvs = reap(&mut cq_s, led, 2 * PER, "srq recv")?;
    let qpns: HashSet<u32> = servers.iter().map(|s| s.qp_num()).collect();
    if let Some(wc) = recvs.iter().find(|wc| !qpns.contains(&wc.qp_num)) {
        return Err(format!("srq recv: completion of another QP {wc:?}").into());
    }
    check_receives(&recvs, &mr, &slot_of, 0, SLOT, &mut sent, "srq recv")?;
    stats.op("srq_recv", 2 * PER as u64);
    no_more(&mut cq_s, led, "srq (after the round)")?;
    no_more(&mut cq_c, led, "srq (after the round)")?;
    Ok(())
}

/// UD datagrams from one QP to another through an address handle.
fn ud_round(ctx: &Context, pd: &Pd, led: &mut Ledger, stats: &mut Stats) -> Result {
    const N: usize = 8;
    let (_ch_e, mut cq_e) = cq_with_channel(ctx, 32)?;
    let (_ch_f, mut cq_f) = cq_with_channel(ctx, 32)?;
    let mut e = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq_e))?;
    let mut f = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq_f))?;
    let me = pd.alloc_mr(REGION, AccessFlags::LOCAL_WRITE)?;
    let mf = pd.alloc_mr(REGION, AccessFlags::LOCAL_WRITE)?;
    let opts = ConnectOptions::default();
    f.to_init(&opts)?;
    let mut slot_of = HashMap::new();
    let mut batch = Vec::new();
    for j in 0..N {
        let id = led.id();
        slot_of.insert(id, j);
        batch.push((id, mf.sge(j * SLOT, SLOT as u32)?));
    }
    f.post_recv_iter(batch)?;
    let (_, ef) = e.connect_pair(&f, &opts)?;
    let ah = pd.create_ah(&ef.ah_attr(ctx, &opts)?)?;
    let max = SLOT - GRH;
    let mut sent = post_sends(&mut e, &me, led, N, Some(ah.ud_dest(ef.qpn, opts.qkey)), max)?;
    expect_opcode(&reap(&mut cq_e, led, N, "ud send")?, WcOpcode::SEND, "ud send")?;
    let recvs = reap(&mut cq_f, led, N, "ud recv")?;
    if let Some(wc) = recvs.iter().find(|wc| wc.src_qp != e.qp_num()) {
        return Err(format!("ud recv: not from QP {:#x}: {wc:?}", e.qp_num()).into());
    }
    check_receives(&recvs, &mf, &slot_of, GRH, max, &mut sent, "ud recv")?;
    stats.op("ud_send", N as u64);
    no_more(&mut cq_e, led, "ud (after the round)")?;
    no_more(&mut cq_f, led, "ud (after the round)")?;
    Ok(())
}

/// One side of a CM connection: its objects on the id's context.
struct CmSide {
    _ch: CompletionChannel,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

fn cm_side(ctx: &Context) -> Result<(CmSide, QueuePair)> {
    let pd = ctx.alloc_pd()?;
    let (ch, cq) = cq_with_channel(ctx, 16)?;
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4 * SLOT, AccessFlags::LOCAL_WRITE)?;
    Ok((CmSide { _ch: ch, cq, mr }, qp))
}

impl CmSide {
    /// Sends one message to the peer (first when `first`, else after
    /// receiving the peer's) and checks the peer's.
    fn exchange(&mut self, conn: &mut cm::Connection, led: &mut Ledger, rid: u64, first: bool) -> Result {
        let what = if first { "cm client" } else { "cm server" };
        let send = |conn: &mut cm::Connection, led: &mut Ledger| -> Result<u64> {
            let id = led.id();
            let m = message(id, SLOT);
            self.mr.write_at(SLOT, &m)?;
            conn.qp_mut()
                .post_send(&[SendWr::send(id, &[self.mr.sge(SLOT, m.len() as u32)?]).imm(id as u32).signaled()])?;
            Ok(id)
        };
        let mut theirs = HashSet::new();
        if first {
            send(conn, led)?;
            let wcs = reap(&mut self.cq, led, 2, what)?;
            let recv: Vec<Wc> = wcs.into_iter().filter(|wc| wc.opcode == WcOpcode::RECV).collect();
            let seq = self.peek(&recv, what)?;
            theirs.insert(seq);
            check_receives(&recv, &self.mr, &HashMap::from([(rid, 0)]), 0, SLOT, &mut theirs, what)?;
        } else {
            let recv = reap(&mut self.cq, led, 1, what)?;
            let seq = self.peek(&recv, what)?;
            theirs.insert(seq);
            check_receives(&recv, &self.mr, &HashMap::from([(rid, 0)]), 0, SLOT, &mut theirs, what)?;
            send(conn, led)?;
            expect_opcode(&reap(&mut self.cq, led, 1, what)?, WcOpcode::SEND, what)?;
        }
        Ok(())
    }

    /// The sequence number in the one receive of `recv` (the peer's ids are
    /// its own).
    fn peek(&self, recv: &[Wc], what: &str) -> Result<u64> {
        if recv.len() != 1 {
            return Err(format!("{what}: {} receives instead of 1", recv.len()).into());
        }
        let mut h = [0u8; 8];
        self.mr.read_at(0, &mut h)?;
        Ok(u64::from_le_bytes(h))
    }
}

/// An RDMA CM connection to a listener on a thread: a message each way,
/// then the client disconnects and the server sees it.
fn cm_round(ip: std::net::IpAddr, led: &mut Ledger, stats: &mut Stats) -> Result {
    let listener = Listener::bind(SocketAddr::new([0, 0, 0, 0].into(), 0))?;
    let port = listener.local_addr().ok_or("the listener has no address")?.port();
    let base = (led.next | (1 << 62)) + 1_000_000;
    let server = std::thread::spawn(move || -> (Ledger, Result<()>) {
        let mut led = Ledger::starting_at(base);
        let r = (|| -> Result {
            let req = listener.get_request(Some(WAIT))?;
            let (mut side, mut qp) = cm_side(&req.context()?)?;
            req.id().attach_qp(&qp)?;
            let rid = led.id();
            qp.post_recv_iter([(rid, side.mr.sge(0, SLOT as u32)?)])?;
            let mut conn = req.accept(qp, &ConnParam::default(), WAIT)?;
            side.exchange(&mut conn, &mut led, rid, false)?;
            if !conn.wait_disconnected(WAIT)? {
                return Err("cm server: no DISCONNECTED".into());
            }
            Ok(())
        })();
        (led, r.map_err(|e| e.to_string().into()))
    });
    let client = (|| -> Result {
        let id = cm::resolve(SocketAddr::new(ip, port), WAIT)?;
        let (mut side, mut qp) = cm_side(&id.context()?)?;
        id.attach_qp(&qp)?;
        let rid = led.id();
        qp.post_recv_iter([(rid, side.mr.sge(0, SLOT as u32)?)])?;
        let mut conn = id.connect_qp(qp, &ConnParam::default(), WAIT)?;
        side.exchange(&mut conn, led, rid, true)?;
        conn.disconnect()?;
        Ok(())
    })();
    let (mut sled, s) = server.join().map_err(|_| "the CM server thread panicked")?;
    stats.absorb(&mut sled, s.is_err());
    client.and(s)?;
    stats.op("cm_connect", 1);
    Ok(())
}

/// rdma-core's ping-pong `tool`, server and client both on rverbs' C
/// library, `-c` checking the data, `-e` waiting on events.
fn capi_round(tool: &str, port: u16, gid: u8, stats: &mut Stats) -> Result {
    const ITERS: u32 = 20;
    let path = format!("/usr/bin/{tool}");
    let args = |client: bool| {
        let mut a: Vec<String> =
            ["-d", "rxe0", "-n", &ITERS.to_string(), "-p", &port.to_string(), "-g", &gid.to_string(), "-c", "-e"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        if tool == "ibv_ud_pingpong" {
            a.extend(["-s".into(), "1024".into()]);
        }
        if client {
            a.push("127.0.0.1".into());
        }
        a
    };
    let spawn = |client: bool| -> Result<Child> {
        Ok(Command::new(&path)
            .args(args(client))
            .env("LD_LIBRARY_PATH", CAPI_DIR)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{path}: {e}"))?)
    };
    let mut server = Reaped(spawn(false)?);
    let start = Instant::now();
    while !listening(port) {
        if start.elapsed() > WAIT || server.0.try_wait()?.is_some() {
            return Err(format!("{tool} server did not listen on {port}: {}", server.finish()?.1).into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = Reaped(spawn(true)?).finish()?;
    let server = server.finish()?;
    for (side, (ok, out)) in [("server", server), ("client", client)] {
        if !ok || !out.contains(&format!("{ITERS} iters in ")) || out.contains("invalid data") {
            return Err(format!("{tool} {side} on rverbs' libibverbs.so.1 failed:\n{out}").into());
        }
    }
    stats.op(
        match tool {
            "ibv_rc_pingpong" => "capi_rc_iter",
            "ibv_srq_pingpong" => "capi_srq_iter",
            _ => "capi_ud_iter",
        },
        u64::from(ITERS),
    );
    Ok(())
}

/// A child that is killed if it is dropped still running.
struct Reaped(Child);

impl Reaped {
    /// Waits (at most [`WAIT`]) and returns (exited 0, stdout and stderr).
    fn finish(&mut self) -> Result<(bool, String)> {
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.0.try_wait()? {
                break Some(st);
            }
            if start.elapsed() > WAIT {
                let _ = self.0.kill();
                let _ = self.0.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            o.read_to_string(&mut out)?;
        }
        if let Some(mut e) = self.0.stderr.take() {
            e.read_to_string(&mut out)?;
        }
        let ok = status.is_some_and(|s| s.success());
        if status.is_none() {
            out.push_str("\n(killed: it ran too long)");
        }
        Ok((ok, out))
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// TCP `port` in LISTEN state (IPv4 or IPv6).
fn listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().skip(1).any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3
                && cols[3] == "0A"
                && cols[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port)
        })
    })
}

/// The kernel's object counts of `dev` (`rdma resource show`:
/// `0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0`).
fn resource_counts(dev: &str) -> Result<Vec<(String, u64)>> {
    let out = Command::new("/usr/bin/rdma").args(["resource", "show"]).output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains(&format!(" {dev}:")))
        .ok_or(format!("{dev} not in rdma resource show: {text}"))?;
    let words: Vec<&str> = line.split_whitespace().skip(2).collect();
    Ok(words.chunks(2).filter_map(|c| Some((c[0].to_owned(), c.get(1)?.parse().ok()?))).collect())
}

fn show_counts(c: &[(String, u64)]) -> String {
    c.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(" ")
}

/// Resident set size in KiB (`/proc/self/statm`'s second field, in pages).
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4
}

fn main() {
    match run() {
        Ok(true) => println!("soak: PASS"),
        Ok(false) => {
            println!("soak: FAIL");
            std::process::exit(1);
        }
        Err(e) => {
            println!("soak: FAIL: {e}");
            std::process::exit(1);
        }
    }
}

/// The soak; `Ok(false)` when a check of the summary failed.
fn run() -> Result<bool> {
    let args = parse_args()?;
    let dev = rverbs::devices()?.into_iter().next().ok_or("no RDMA device")?;
    let dev_name = dev.name().to_owned();
    let before = resource_counts(&dev_name)?;
    let rss_start = rss_kib();
    println!(
        "soak: {} s on {dev_name}, a sample every {} s, C library {}; objects at the start: {}; RSS {rss_start} KiB",
        args.duration.as_secs(),
        args.sample.as_secs(),
        if args.capi { "on" } else { "off" },
        show_counts(&before)
    );
    if args.capi && !std::path::Path::new(CAPI_DIR).join("libibverbs.so.1").is_file() {
        return Err(format!("{CAPI_DIR}/libibverbs.so.1 is missing (--no-capi runs without it)").into());
    }
    let mut stats = Stats::default();
    let mut led = Ledger::default();
    let started = Instant::now();
    let warmup = (args.duration / 10).max(Duration::from_secs(1));
    let mut rss_warm: Option<u64> = None;
    let mut next_sample = started + args.sample;
    let mut max_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut round_counts = Vec::new();
    {
        let ctx = dev.open()?;
        let ip = util::device_ipv4()?;
        let gid = ctx.default_sgid_index(1)?;
        while started.elapsed() < args.duration && stats.errors < 10 {
            let round = stats.rounds;
            let r = (|| -> Result {
                let pd = ctx.alloc_pd()?;
                let steps: [(&str, Step<'_>); 5] = [
                    ("rc", &|l, s| rc_round(&ctx, &pd, l, s)),
                    ("srq", &|l, s| srq_round(&ctx, &pd, l, s)),
                    ("ud", &|l, s| ud_round(&ctx, &pd, l, s)),
                    ("cm", &|l, s| cm_round(ip, l, s)),
                    ("capi", &|_, s| {
                        if args.capi {
                            let tool = IBV_TOOLS[round as usize % IBV_TOOLS.len()];
                            capi_round(tool, 19700 + (round % 200) as u16, gid, s)
                        } else {
                            Ok(())
                        }
                    }),
                ];
                for (name, step) in steps {
                    let r = step(&mut led, &mut stats).map_err(|e| format!("round {round}, {name}: {e}"));
                    stats.absorb(&mut led, r.is_err());
                    r?;
                }
                Ok(())
            })();
            stats.rounds += 1;
            if let Err(e) = r {
                stats.errors += 1;
                eprintln!("soak: error: {e}");
                println!("soak: error: {e}");
            }
            let now = Instant::now();
            if rss_warm.is_none() && now - started >= warmup {
                rss_warm = Some(rss_kib());
            }
            if now >= next_sample {
                next_sample = now + args.sample;
                let counts = resource_counts(&dev_name)?;
                for (k, v) in &counts {
                    let m = max_counts.entry(k.clone()).or_default();
                    *m = (*m).max(*v);
                }
                round_counts = counts.clone();
                println!(
                    "soak: {:>5} s  rounds {}  ops {}  completions {}  errors {}  lost {}  dup {}  rss {} KiB  objects: {}",
                    started.elapsed().as_secs(),
                    stats.rounds,
                    stats.total_ops(),
                    stats.completions,
                    stats.errors,
                    stats.lost,
                    stats.duplicated,
                    rss_kib(),
                    show_counts(&counts)
                );
            }
        }
    }
    let rss_end = rss_kib();
    let rss_warm = rss_warm.unwrap_or(rss_end);
    // Every object is destroyed: the counts go back to the start's (the
    // kernel may finish a teardown a moment later).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (after, grown) = loop {
        let now = resource_counts(&dev_name)?;
        let grown: Vec<String> = now
            .iter()
            .filter(|(k, v)| before.iter().find(|(b, _)| b == k).map_or(*v > 0, |(_, bv)| v > bv))
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if grown.is_empty() || Instant::now() > deadline {
            break (now, grown);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let secs = started.elapsed().as_secs_f64();
    println!("soak: summary after {secs:.0} s, {} rounds", stats.rounds);
    for (k, v) in &stats.ops {
        println!("soak:   {k:<14} {v:>10}  ({:.1}/s)", *v as f64 / secs);
    }
    println!("soak:   {:<14} {:>10}", "operations", stats.total_ops());
    println!("soak:   {:<14} {:>10}", "completions", stats.completions);
    println!("soak:   {:<14} {:>10}", "errors", stats.errors);
    println!("soak:   {:<14} {:>10}", "lost", stats.lost);
    println!("soak:   {:<14} {:>10}", "duplicated", stats.duplicated);
    println!("soak:   RSS KiB: start {rss_start}, after warm-up {rss_warm}, end {rss_end}");
    println!("soak:   objects at the start: {}", show_counts(&before));
    println!("soak:   objects between rounds (last sample): {}", show_counts(&round_counts));
    println!(
        "soak:   objects between rounds, most seen: {}",
        max_counts.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(" ")
    );
    println!("soak:   objects at the end: {}", show_counts(&after));
    let mut failed = Vec::new();
    if stats.errors > 0 {
        failed.push(format!("{} errors", stats.errors));
    }
    if stats.lost > 0 || stats.duplicated > 0 {
        failed.push(format!("{} lost, {} duplicated completions", stats.lost, stats.duplicated));
    }
    if !grown.is_empty() {
        failed.push(format!("kernel objects left over: {}", grown.join(", ")));
    }
    if rss_end > rss_warm + RSS_ALLOWANCE_KIB {
        failed.push(format!("RSS grew by {} KiB after the warm-up", rss_end - rss_warm));
    }
    if stats.rounds == 0 || stats.total_ops() == 0 {
        failed.push("no round ran".into());
    }
    if !failed.is_empty() {
        println!("soak: failed: {}", failed.join("; "));
    }
    Ok(failed.is_empty())
}
