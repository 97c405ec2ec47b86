//! What the two libraries are asked to do: a set-up (one QP, its CQ, maybe
//! an SRQ), then steps (posts, completions the fake HCA writes, arms). The
//! fixed scenarios cover each case by name; the random ones draw sequences
//! from a seed.

use rverbs_mlx5_fake::hca::opcode;

/// The QP's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rc,
    Uc,
    Ud,
}

/// Objects made before the steps, and the QP moved to RTS.
#[derive(Clone, Debug)]
pub struct Setup {
    pub kind: Kind,
    pub send_wr: u32,
    pub recv_wr: u32,
    pub send_sge: u32,
    pub recv_sge: u32,
    pub inline: u32,
    pub cqe: u32,
    /// An SRQ (max_wr, max_sge) the QP receives from.
    pub srq: Option<(u32, u32)>,
    pub sig_all: bool,
    /// The source GID index of the address (3: the port's RoCE v2 IPv4
    /// GID; 0 and 2 are RoCE v1, 1 RoCE v2 link-local).
    pub sgid_index: u8,
}

impl Setup {
    pub fn new(kind: Kind) -> Setup {
        Setup {
            kind,
            send_wr: 16,
            recv_wr: 16,
            send_sge: 4,
            recv_sge: 4,
            inline: 64,
            cqe: 64,
            srq: None,
            sig_all: false,
            sgid_index: 3,
        }
    }
}

/// A send operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    Cas,
    Faa,
}

impl Op {
    pub const ALL: [Op; 8] = [Op::Send, Op::SendImm, Op::SendInv, Op::Write, Op::WriteImm, Op::Read, Op::Cas, Op::Faa];

    /// Which transports take it (UC: no READ/atomics; UD: sends only).
    pub fn allowed(self, kind: Kind) -> bool {
        match kind {
            Kind::Rc => true,
            Kind::Uc => matches!(self, Op::Send | Op::SendImm | Op::SendInv | Op::Write | Op::WriteImm),
            Kind::Ud => matches!(self, Op::Send | Op::SendImm),
        }
    }
}

/// A send work request; SGEs are (offset, length) in the shared buffer.
#[derive(Clone, Debug)]
pub struct Wr {
    pub wr_id: u64,
    pub op: Op,
    pub signaled: bool,
    pub solicited: bool,
    pub fence: bool,
    pub inline: bool,
    pub sges: Vec<(u32, u32)>,
    pub imm: u32,
    pub raddr: u64,
    pub rkey: u32,
    pub compare: u64,
    pub swap_add: u64,
}

impl Wr {
    pub fn new(wr_id: u64, op: Op, sges: Vec<(u32, u32)>) -> Wr {
        Wr {
            wr_id,
            op,
            signaled: true,
            solicited: false,
            fence: false,
            inline: false,
            sges,
            imm: 0x1234_5678,
            raddr: 0x7f00_0000_1000,
            rkey: 0x00ab_cd01,
            compare: 0x1111_2222_3333_4444,
            swap_add: 0x5555_6666_7777_8888,
        }
    }
}

/// A receive work request.
#[derive(Clone, Debug)]
pub struct Rwr {
    pub wr_id: u64,
    pub sges: Vec<(u32, u32)>,
}

/// A completion for the fake HCA to write.
#[derive(Clone, Debug)]
pub enum Completion {
    /// The oldest signaled send WQE not yet completed, successfully.
    Send,
    /// A receive (the next receive WQE, or the SRQ's head).
    Recv { opcode: u8, byte_len: u32, imm: u32, src_qp: u32, grh: bool, scatter: u8 },
    /// An error CQE for the oldest outstanding send (requester) or the next
    /// receive (responder).
    Error { requester: bool, syndrome: u8, vendor: u8 },
}

/// One step; after each the two libraries' effects are compared.
#[derive(Clone, Debug)]
pub enum Step {
    Send(Vec<Wr>),
    Recv(Vec<Rwr>),
    SrqRecv(Vec<Rwr>),
    Complete(Completion),
    Arm { solicited: bool },
}

/// A named or seeded case.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub setup: Setup,
    pub steps: Vec<Step>,
}

fn sc(name: impl Into<String>, setup: Setup, steps: Vec<Step>) -> Scenario {
    Scenario { name: name.into(), setup, steps }
}

fn recv_ok(byte_len: u32) -> Step {
    Step::Complete(Completion::Recv { opcode: opcode::RESP_SEND, byte_len, imm: 0, src_qp: 0, grh: false, scatter: 0 })
}

/// The named scenarios: every opcode, 0..max SGEs, inline sizes across WQEBB
/// boundaries, ring wrap, RC/UC/UD, SRQ, both CQE sizes' worth of CQ sizes,
/// every error syndrome, arming.
pub fn fixed() -> Vec<Scenario> {
    let mut v = Vec::new();
    for kind in [Kind::Rc, Kind::Uc, Kind::Ud] {
        for op in Op::ALL.into_iter().filter(|o| o.allowed(kind)) {
            let sges = if matches!(op, Op::Cas | Op::Faa) { vec![(64, 8)] } else { vec![(0, 100)] };
            v.push(sc(
                format!("{kind:?} {op:?}"),
                Setup::new(kind),
                vec![Step::Send(vec![Wr::new(1, op, sges)]), Step::Complete(Completion::Send)],
            ));
        }
        for n in 0..=4u32 {
            let sges = (0..n).map(|i| (i * 256, 100 + i)).collect();
            v.push(sc(
                format!("{kind:?} send with {n} SGEs"),
                Setup::new(kind),
                vec![Step::Send(vec![Wr::new(7, Op::Send, sges)]), Step::Complete(Completion::Send)],
            ));
        }
        for len in [0u32, 1, 12, 16, 28, 44, 60, 64] {
            let mut wr = Wr::new(9, Op::Send, vec![(512, len)]);
            wr.inline = true;
            v.push(sc(format!("{kind:?} inline {len} bytes"), Setup::new(kind), vec![Step::Send(vec![wr])]));
        }
        v.push(sc(
            format!("{kind:?} flags"),
            Setup::new(kind),
            vec![Step::Send(
                [(false, false, false), (true, true, false), (true, false, true), (false, true, true)]
                    .into_iter()
                    .enumerate()
                    .map(|(i, (s, so, f))| {
                        let mut w = Wr::new(i as u64, Op::Send, vec![(0, 32)]);
                        w.signaled = s;
                        w.solicited = so;
                        w.fence = f;
                        w
                    })
                    .collect(),
            )],
        ));
        let mut wrap = Vec::new();
        for i in 0..6u64 {
            wrap.push(Step::Send((0..3).map(|j| Wr::new(i * 3 + j, Op::Send, vec![(0, 8), (64, 8)])).collect()));
            for _ in 0..3 {
                wrap.push(Step::Complete(Completion::Send));
            }
        }
        v.push(sc(format!("{kind:?} send ring wrap"), Setup::new(kind), wrap));
        let mut recv = Vec::new();
        for i in 0..20u64 {
            recv.push(Step::Recv(vec![Rwr { wr_id: 100 + i, sges: vec![(1024, 256), (2048, 16)] }]));
            recv.push(recv_ok(40));
        }
        v.push(sc(format!("{kind:?} receive ring wrap"), Setup::new(kind), recv));
        for syndrome in [0x01u8, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22] {
            v.push(sc(
                format!("{kind:?} send error syndrome {syndrome:#04x}"),
                Setup::new(kind),
                vec![
                    Step::Send(vec![Wr::new(3, Op::Send, vec![(0, 10)])]),
                    Step::Complete(Completion::Error { requester: true, syndrome, vendor: 0x42 }),
                ],
            ));
        }
        v.push(sc(
            format!("{kind:?} receive error"),
            Setup::new(kind),
            vec![
                Step::Recv(vec![Rwr { wr_id: 5, sges: vec![(0, 64)] }]),
                Step::Complete(Completion::Error { requester: false, syndrome: 0x01, vendor: 0x11 }),
            ],
        ));
        let recv_ops: &[u8] = match kind {
            Kind::Ud => &[opcode::RESP_SEND, opcode::RESP_SEND_IMM],
            _ => &[opcode::RESP_SEND, opcode::RESP_SEND_IMM, opcode::RESP_SEND_INV, opcode::RESP_WR_IMM],
        };
        for &op in recv_ops {
            for grh in [false, true] {
                if grh && kind != Kind::Ud {
                    continue;
                }
                v.push(sc(
                    format!("{kind:?} receive opcode {op} grh {grh}"),
                    Setup::new(kind),
                    vec![
                        Step::Recv(vec![Rwr { wr_id: 11, sges: vec![(0, 512)] }]),
                        Step::Complete(Completion::Recv {
                            opcode: op,
                            byte_len: 77,
                            imm: 0xdead_beef,
                            src_qp: 0xab_cdef,
                            grh,
                            scatter: 0,
                        }),
                    ],
                ));
            }
        }
        let mut srq = Setup::new(kind);
        srq.srq = Some((32, 2));
        let mut steps =
            vec![Step::SrqRecv((0..8).map(|i| Rwr { wr_id: 200 + i, sges: vec![(i as u32 * 64, 64)] }).collect())];
        for _ in 0..8 {
            steps.push(recv_ok(33));
        }
        v.push(sc(format!("{kind:?} SRQ receives"), srq, steps));
        for solicited in [false, true] {
            v.push(sc(
                format!("{kind:?} arm solicited={solicited}"),
                Setup::new(kind),
                vec![
                    Step::Arm { solicited },
                    Step::Send(vec![Wr::new(1, Op::Send, vec![(0, 4)])]),
                    Step::Complete(Completion::Send),
                    Step::Arm { solicited },
                ],
            ));
        }
    }
    // Every GID of the port as the source: RoCE v1 and v2, link-local and
    // IPv4 (the address vector's type bits and UDP source port follow).
    for kind in [Kind::Rc, Kind::Ud] {
        for sgid_index in 0..4u8 {
            let mut s = Setup::new(kind);
            s.sgid_index = sgid_index;
            v.push(sc(
                format!("{kind:?} from GID {sgid_index}"),
                s,
                vec![Step::Send(vec![Wr::new(1, Op::Send, vec![(0, 8)])]), Step::Complete(Completion::Send)],
            ));
        }
    }
    // The most SGEs and the most inline data libmlx5 takes in its 512-byte
    // WQEs (it keeps room for a UMR on RC/UC: 20 SGEs, 316 bytes), then
    // beyond what it takes (rverbs' larger limits: a known difference).
    for (kind, sges, inline) in [(Kind::Rc, 20u32, 316u32), (Kind::Uc, 20, 316), (Kind::Ud, 28, 444)] {
        for (sges, inline, name) in [(sges, inline, "the most"), (sges + 1, inline + 16, "beyond libmlx5's most")] {
            let mut s = Setup::new(kind);
            s.send_sge = sges;
            s.inline = 0;
            let list = (0..sges).map(|i| (i * 1024, 16 + i)).collect();
            v.push(sc(
                format!("{kind:?} send with {name} SGEs ({sges})"),
                s,
                vec![Step::Send(vec![Wr::new(1, Op::Send, list)]), Step::Complete(Completion::Send)],
            ));
            let mut s = Setup::new(kind);
            s.send_sge = 1;
            s.inline = inline;
            let mut w = Wr::new(2, Op::Send, vec![(0, inline)]);
            w.inline = true;
            v.push(sc(format!("{kind:?} {name} inline bytes ({inline})"), s, vec![Step::Send(vec![w])]));
        }
    }
    let mut misaligned = Wr::new(1, Op::Faa, vec![(64, 8)]);
    misaligned.raddr |= 4;
    v.push(sc("Rc misaligned atomic", Setup::new(Kind::Rc), vec![Step::Send(vec![misaligned])]));
    for cqe in [1u32, 2, 63, 64, 1000, 4096] {
        let mut s = Setup::new(Kind::Rc);
        s.cqe = cqe;
        v.push(sc(
            format!("Rc CQ of {cqe}"),
            s,
            vec![Step::Send(vec![Wr::new(1, Op::Write, vec![(0, 4)])]), Step::Complete(Completion::Send)],
        ));
    }
    for (sw, rw, ss, rs, inl) in [(1, 1, 1, 1, 0), (64, 64, 30, 30, 512), (100, 33, 7, 3, 200), (8, 0, 2, 0, 28)] {
        let mut s = Setup::new(Kind::Rc);
        (s.send_wr, s.recv_wr, s.send_sge, s.recv_sge, s.inline) = (sw, rw, ss, rs, inl);
        v.push(sc(
            format!("Rc caps {sw}/{rw}/{ss}/{rs}/{inl}"),
            s,
            vec![Step::Send(vec![Wr::new(1, Op::Send, vec![(0, 4)])])],
        ));
    }
    v
}

/// Scenarios whose difference is known and listed in docs/MLX5.md, with the
/// reason; the runner requires them to still differ, so a fix shows.
pub fn known_difference(name: &str) -> Option<&'static str> {
    const PKEY: &str = "libmlx5 reports the low 16 bits of the CQE's imm/inval/pkey word as pkey_index on every \
                        receive, also when it holds an immediate or an rkey; rverbs only on a plain SEND";
    const KNOWN: &[(&str, &str)] = &[
        ("Uc SendInv", "rverbs refuses SEND_WITH_INV on UC (the IBTA defines it for RC); libmlx5 posts it"),
        (
            "Rc send with beyond libmlx5's most SGEs",
            "rverbs keeps no room for UMR WQEs it never posts: RC takes 29 SGEs and 444 inline bytes, libmlx5 20 and 316",
        ),
        ("Rc beyond libmlx5's most inline", "as above, inline"),
        ("Uc send with beyond libmlx5's most SGEs", "as above, on UC: 30 SGEs and 460 inline bytes"),
        ("Uc beyond libmlx5's most inline", "as above, inline on UC"),
        ("misaligned atomic", "rverbs refuses an atomic to an address not 8-aligned at post time; libmlx5 posts it"),
        ("receive opcode 3", PKEY),
        ("receive opcode 4", PKEY),
        ("receive opcode 1", PKEY),
        ("SRQ receives", "libmlx5 keeps a wait queue in the SRQ (2 * max_wr + 1 WQEs) and reuses a freed WQE only through it; rverbs has none"),
    ];
    KNOWN.iter().find(|(pat, _)| name.contains(pat)).map(|(_, why)| *why)
}

/// A small deterministic generator (xorshift64*), so a seed names a case.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// A random case: a random set-up and up to 12 steps of posts and
/// completions that stay within the queues' room.
pub fn random(seed: u64) -> Scenario {
    let mut r = Rng::new(seed);
    let kind = [Kind::Rc, Kind::Uc, Kind::Ud][r.below(3) as usize];
    let mut s = Setup::new(kind);
    s.send_wr = 1 + r.below(64) as u32;
    s.recv_wr = 1 + r.below(64) as u32;
    s.send_sge = 1 + r.below(8) as u32;
    s.recv_sge = 1 + r.below(8) as u32;
    s.inline = r.below(257) as u32;
    s.cqe = 256;
    s.sig_all = r.chance(4);
    s.sgid_index = r.below(4) as u8;
    let mut steps = Vec::new();
    let (mut sq_out, mut rq_out) = (0u32, 0u32);
    let mut next_id = 1u64;
    for _ in 0..1 + r.below(12) {
        match r.below(4) {
            0 | 1 => {
                let n = 1 + r.below(4) as u32;
                if sq_out + n > s.send_wr {
                    continue;
                }
                let mut wrs = Vec::new();
                for _ in 0..n {
                    let ops: Vec<Op> = Op::ALL
                        .into_iter()
                        .filter(|o| o.allowed(kind) && !(*o == Op::SendInv && kind == Kind::Uc))
                        .collect();
                    let op = ops[r.below(ops.len() as u64) as usize];
                    let atomic = matches!(op, Op::Cas | Op::Faa);
                    let nsge = if atomic { 1 } else { r.below(u64::from(s.send_sge) + 1) as u32 };
                    let sges = (0..nsge)
                        .map(|_| (r.below(60_000) as u32, if atomic { 8 } else { r.below(4096) as u32 }))
                        .collect();
                    let mut w = Wr::new(next_id, op, sges);
                    next_id += 1;
                    w.signaled = true;
                    w.solicited = r.chance(3);
                    w.fence = r.chance(4);
                    w.imm = r.next() as u32;
                    // rverbs refuses a misaligned atomic at post time (a known
                    // difference, its own named case); the HCA needs 8-byte alignment.
                    w.raddr = if atomic { r.next() & !7 } else { r.next() };
                    w.rkey = r.next() as u32;
                    w.compare = r.next();
                    w.swap_add = r.next();
                    if !atomic && op != Op::Read && s.inline > 0 && r.chance(3) {
                        w.inline = true;
                        let len = r.below(u64::from(s.inline) + 1) as u32;
                        w.sges = vec![(r.below(60_000) as u32, len)];
                    }
                    wrs.push(w);
                }
                sq_out += n;
                steps.push(Step::Send(wrs));
            }
            2 => {
                if rq_out >= s.recv_wr {
                    continue;
                }
                let nsge = 1 + r.below(u64::from(s.recv_sge)) as u32;
                let sges = (0..nsge).map(|_| (r.below(60_000) as u32, r.below(4096) as u32)).collect();
                steps.push(Step::Recv(vec![Rwr { wr_id: next_id, sges }]));
                next_id += 1;
                rq_out += 1;
            }
            _ => {
                if sq_out > 0 && (rq_out == 0 || r.chance(2)) {
                    steps.push(Step::Complete(Completion::Send));
                    sq_out -= 1;
                } else if rq_out > 0 {
                    // RESP_SEND only: with an immediate, libmlx5 also reports
                    // the immediate's low bits as pkey_index (a named known
                    // difference).
                    let ops = [opcode::RESP_SEND; 2];
                    steps.push(Step::Complete(Completion::Recv {
                        opcode: ops[r.below(2) as usize],
                        byte_len: r.below(4096) as u32,
                        imm: r.next() as u32,
                        src_qp: r.below(1 << 24) as u32,
                        grh: kind == Kind::Ud && r.chance(2),
                        scatter: 0,
                    }));
                    rq_out -= 1;
                }
            }
        }
    }
    sc(format!("random seed {seed}"), s, steps)
}
