//! One scenario through both libraries, and the comparisons after each step.

use std::ffi::{c_char, CStr};
use std::fmt::Write as _;
use std::path::Path;

use rverbs_mlx5_fake::hca;
use rverbs_mlx5_fake::record::{self, Command, Snapshot};

use crate::hca_side::{self, HcaSide};
use crate::ibv::Ibverbs;
use crate::scenario::{Scenario, Step};
use crate::sides::{CLib, Lib, RLib, Shared};

/// The preload library's record, through the functions it exports.
pub struct FakeLog {
    take: extern "C" fn() -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_char),
}

impl FakeLog {
    pub fn find() -> Result<FakeLog, String> {
        let sym = |name: &CStr| {
            // SAFETY: RTLD_DEFAULT and a NUL-terminated name.
            let p = unsafe { nix::libc::dlsym(nix::libc::RTLD_DEFAULT, name.as_ptr()) };
            if p.is_null() {
                Err(format!("{name:?} not found: not running under the fake kernel's preload library"))
            } else {
                Ok(p)
            }
        };
        let take = sym(c"rverbs_fake_mlx5_take_log")?;
        let free = sym(c"rverbs_fake_mlx5_free")?;
        // SAFETY: the preload library defines these two functions with
        // exactly these prototypes.
        unsafe {
            Ok(FakeLog {
                take: std::mem::transmute::<*mut std::ffi::c_void, extern "C" fn() -> *mut c_char>(take),
                free: std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn(*mut c_char)>(free),
            })
        }
    }

    /// The record since the last call.
    pub fn take(&self) -> Snapshot {
        let p = (self.take)();
        if p.is_null() {
            return Snapshot::default();
        }
        // SAFETY: a NUL-terminated string from take_log, freed once below.
        let text = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: `p` came from take_log.
        unsafe { (self.free)(p) };
        record::from_json(&text).unwrap_or_default()
    }
}

/// Hex rows (16 bytes) where `a` and `b` differ.
pub fn hex_diff(a: &[u8], b: &[u8]) -> String {
    let mut s = String::new();
    let n = a.len().max(b.len());
    for row in (0..n).step_by(16) {
        let ra = a.get(row..(row + 16).min(a.len())).unwrap_or(&[]);
        let rb = b.get(row..(row + 16).min(b.len())).unwrap_or(&[]);
        if ra != rb {
            let _ = writeln!(s, "    {row:04x} rdma-core {:02x?}\n         rverbs    {:02x?}", ra, rb);
        }
    }
    s
}

struct Sides<'a> {
    c: CLib<'a>,
    r: RLib,
    cctx: u32,
    rctx: u32,
    ch: HcaSide,
    rh: HcaSide,
}

fn ctx_of(s: &Snapshot, fd: i32) -> Result<record::Context, String> {
    s.contexts.iter().find(|c| c.fd == fd).cloned().ok_or_else(|| format!("no fake context for fd {fd}"))
}

type Norm = (String, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, i32);

/// Differences the HCA cannot see, normalised away (docs/MLX5.md lists
/// them): GET_CONTEXT's DEVX flag (libmlx5 asks for a DEVX context); the
/// numbers of fds the kernel hands out (the process's own).
fn normalise(c: &Command) -> Norm {
    let (mut core, mut drv) = c.masked_in();
    let mut core_out = c.core_out.clone();
    if c.name == "GET_CONTEXT" && drv.len() >= 12 {
        drv[8..12].fill(0);
    }
    if (c.name == "GET_CONTEXT" || c.name == "CREATE_COMP_CHANNEL") && core_out.len() >= 4 {
        core_out[..4].fill(0);
    }
    let mut drv_out = c.drv_out.clone();
    for known in KNOWN {
        if known.command == c.name {
            for &(in_drv, off, len) in known.input {
                let b = if in_drv { &mut drv } else { &mut core };
                if let Some(r) = b.get_mut(off..off + len) {
                    r.fill(0);
                }
            }
            for &(in_drv, off, len) in known.output {
                let b = if in_drv { &mut drv_out } else { &mut core_out };
                let end = (off + len).min(b.len());
                if let Some(r) = b.get_mut(off..end) {
                    r.fill(0);
                }
            }
        }
    }
    (c.name.clone(), core, drv, core_out, drv_out, c.errno)
}

/// A difference between the libraries that is known and listed in
/// docs/MLX5.md ("Differences from libmlx5"): the fields are not compared.
struct Known {
    command: &'static str,
    /// (in driver data, offset, length) of the input.
    input: &'static [(bool, usize, usize)],
    output: &'static [(bool, usize, usize)],
}

const KNOWN: &[Known] = &[
    // Queue sizing: libmlx5 sizes a send WQE for its largest (UMR/bind)
    // and reports the inline room that leaves; rverbs sizes for what the
    // QP's caps need. Also libmlx5 asks for scatter-to-CQE on RC.
    // ib_uverbs_create_qp.max_inline_data (core 48), mlx5_ib_create_qp's
    // sq_wqe_count (16) and flags (28); the answer's max_inline_data (24).
    Known { command: "CREATE_QP", input: &[(false, 48, 4), (true, 16, 4), (true, 28, 4)], output: &[(false, 24, 4)] },
    // The user index is the library's own label for the QP (CQE version 1
    // completions carry it back); libmlx5 and rverbs number differently
    // when an SRQ is made first. mlx5_ib_create_qp.uidx (32).
    Known { command: "CREATE_QP", input: &[(true, 32, 4)], output: &[] },
];

/// Queries change nothing the HCA sees, and the libraries make different
/// ones at different times (libmlx5 when it opens a context, rverbs when it
/// first needs an answer, and rverbs checks an address's GID): they are not
/// compared. Every other command is, in order.
fn is_query(name: &str) -> bool {
    matches!(
        name,
        "QUERY_DEVICE"
            | "EX_QUERY_DEVICE"
            | "QUERY_PORT"
            | "QUERY_QP"
            | "QUERY_SRQ"
            | "QUERY_GID_TABLE"
            | "QUERY_GID_ENTRY"
    )
}

fn compare_commands(s: &Snapshot, cctx: u32, rctx: u32, when: &str) -> Result<(), String> {
    let of =
        |ctx: u32| s.commands.iter().filter(|c| c.ctx == ctx && !is_query(&c.name)).map(normalise).collect::<Vec<_>>();
    let (c, r) = (of(cctx), of(rctx));
    if c == r {
        return Ok(());
    }
    let mut out = format!("  commands differ {when}:\n");
    let names = |v: &[Norm]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    if names(&c) != names(&r) {
        let _ = writeln!(out, "    rdma-core: {:?}\n    rverbs:    {:?}", names(&c), names(&r));
    }
    for (a, b) in c.iter().zip(&r) {
        if a != b {
            let _ = writeln!(out, "   {} (errno {} vs {}):", a.0, a.5, b.5);
            for (what, x, y) in [
                ("core in", &a.1, &b.1),
                ("driver in", &a.2, &b.2),
                ("core out", &a.3, &b.3),
                ("driver out", &a.4, &b.4),
            ] {
                if x != y {
                    let _ = write!(out, "   {what}:\n{}", hex_diff(x, y));
                }
            }
        }
    }
    Err(out)
}

/// The padding after an inline segment's data, up to the WQE's DS * 16
/// bytes: the HCA reads the segment's byte count and skips it; libmlx5
/// leaves what the ring held there, rverbs writes zeros. `ctrl` is the
/// WQE's first 16 bytes, to find its BlueFlame copy by.
#[derive(Clone, Debug)]
pub struct Pad {
    ctrl: Vec<u8>,
    range: std::ops::Range<usize>,
}

/// The inline padding of a send WQE (`wqe`: its DS * 16 bytes).
fn inline_pad(wqe: &[u8], qp_type: u8) -> Option<Pad> {
    let op = *wqe.get(3)?;
    let mut off = 16;
    // RDMA WRITE (with immediate) carries a remote-address segment; UD an
    // address vector.
    if matches!(op, 0x08 | 0x09) {
        off += 16;
    }
    if qp_type == 4 {
        off += 48;
    }
    let word = u32::from_be_bytes(wqe.get(off..off + 4)?.try_into().ok()?);
    if word & 0x8000_0000 == 0 {
        return None;
    }
    let end = off + 4 + (word & 0x3ff) as usize;
    (end < wqe.len()).then(|| Pad { ctrl: wqe[..16].to_vec(), range: end..wqe.len() })
}

fn zero(b: &mut [u8], r: std::ops::Range<usize>) {
    let end = r.end.min(b.len());
    if r.start < end {
        b[r.start..end].fill(0);
    }
}

/// Zeroes the inline padding of each BlueFlame copy found in a UAR page
/// (registers at 0x800 + 512 * k, halves of 256 bytes).
fn mask_blueflame(page: &mut [u8], pads: &[Pad]) {
    for base in (0x800..0x1000).step_by(0x100) {
        for p in pads {
            if page.get(base..base + 16) == Some(&p.ctrl[..]) {
                zero(page, base + p.range.start..base + p.range.end);
            }
        }
    }
}

/// Compares every UAR page's bytes (doorbells, BlueFlame copies), then
/// clears both so the next step's stores show.
///
/// # Safety
/// The contexts' UAR mappings must be live.
unsafe fn compare_uars(c: &record::Context, r: &record::Context, when: &str, pads: &[Pad]) -> Result<(), String> {
    let mut out = String::new();
    for &(idx, caddr) in &c.uars {
        let Some(&(_, raddr)) = r.uars.iter().find(|u| u.0 == idx) else {
            let _ = writeln!(out, "  UAR page {idx}: mapped by rdma-core only");
            continue;
        };
        // SAFETY: the caller's contract: both are live UAR pages.
        let (mut a, mut b) = unsafe { (hca::read(caddr, 4096), hca::read(raddr, 4096)) };
        mask_blueflame(&mut a, pads);
        mask_blueflame(&mut b, pads);
        if a != b {
            let _ = write!(out, "  UAR page {idx} {when}:\n{}", hex_diff(&a, &b));
        }
        // SAFETY: as above; the page is ours to clear (nothing reads it).
        unsafe {
            std::ptr::write_bytes(caddr as usize as *mut u8, 0, 4096);
            std::ptr::write_bytes(raddr as usize as *mut u8, 0, 4096);
        }
    }
    for &(idx, _) in &r.uars {
        if !c.uars.iter().any(|u| u.0 == idx) {
            let _ = writeln!(out, "  UAR page {idx}: mapped by rverbs only");
        }
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, a: T, b: T) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(format!("  {what}: rdma-core {a:x?}, rverbs {b:x?}\n"))
    }
}

/// The fields a completion defines: on error only `wr_id`, `status`,
/// `vendor_err` and `qp_num` (verbs' rule; libmlx5 leaves the rest as the
/// caller's buffer had them).
fn defined(w: &crate::sides::WcView) -> crate::sides::WcView {
    if w.status == 0 {
        return *w;
    }
    crate::sides::WcView {
        wr_id: w.wr_id,
        status: w.status,
        vendor_err: w.vendor_err,
        qp_num: w.qp_num,
        opcode: 0,
        byte_len: 0,
        imm: 0,
        src_qp: 0,
        wc_flags: 0,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// Runs `sc` through both libraries; `Err` is the report.
pub fn run_case(ibv: &Ibverbs, fake: &FakeLog, sysfs: &Path, shared: &mut Shared, sc: &Scenario) -> Result<(), String> {
    fake.take();
    let (c, r) = match (CLib::open(ibv, &sc.setup, shared), RLib::open(&sc.setup, sysfs, shared)) {
        (Ok(c), Ok(r)) => (c, r),
        // Both refuse the set-up: the same refusal is the expected result
        // (the errno each gives is in the command record, compared below).
        (Err(_), Err(_)) => {
            let snap = fake.take();
            let ctxs: Vec<u32> =
                snap.commands.iter().map(|c| c.ctx).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            return match ctxs.as_slice() {
                [a, b] => compare_commands(&snap, *a, *b, "at a refused set-up"),
                _ => Ok(()),
            };
        }
        (Err(e), Ok(_)) => return Err(format!("  rdma-core refuses the set-up, rverbs does not: {e}")),
        (Ok(_), Err(e)) => return Err(format!("  rverbs refuses the set-up, rdma-core does not: {e}")),
    };
    let snap = fake.take();
    let cx = ctx_of(&snap, c.cmd_fd())?;
    let rx = ctx_of(&snap, r.cmd_fd())?;
    let mut s = Sides { c, r, cctx: cx.ctx, rctx: rx.ctx, ch: HcaSide::default(), rh: HcaSide::default() };
    let mut report = String::new();
    if let Err(e) = compare_commands(&snap, s.cctx, s.rctx, "at set-up") {
        report.push_str(&e);
    }
    let mut result = if report.is_empty() { Ok(()) } else { Err(report) };
    for (i, step) in sc.steps.iter().enumerate() {
        if result.is_err() {
            break;
        }
        // SAFETY: both sides' objects are alive until `s` drops below.
        result = unsafe { step_and_compare(&mut s, shared, step, &cx, &rx) }
            .map_err(|e| format!("  step {i} {step:?}:\n{e}"));
        let snap = fake.take();
        if result.is_ok() {
            result = compare_commands(&snap, s.cctx, s.rctx, &format!("at step {i}"));
        }
    }
    let (cctx, rctx) = (s.cctx, s.rctx);
    drop(s);
    let snap = fake.take();
    result?;
    compare_commands(&snap, cctx, rctx, "at tear-down")
}

/// One step on both sides, then the comparisons it calls for.
///
/// # Safety
/// `cx`/`rx` must describe the live objects of `s`.
unsafe fn step_and_compare(
    s: &mut Sides<'_>,
    shared: &Shared,
    step: &Step,
    cx: &record::Context,
    rx: &record::Context,
) -> Result<(), String> {
    let (cqp, rqp) = (&cx.qps[0], &rx.qps[0]);
    let mut out = String::new();
    let mut pads: Vec<Pad> = Vec::new();
    match step {
        Step::Send(wrs) => {
            let (a, b) = (s.c.post_send(wrs, shared), s.r.post_send(wrs, shared));
            same("post_send result", a, b)?;
            let (from_c, from_r) = (s.ch.sq_seen, s.rh.sq_seen);
            // SAFETY: the caller's contract.
            let (wa, wb) = unsafe { (hca_side::take_posted(&mut s.ch, cqp), hca_side::take_posted(&mut s.rh, rqp)) };
            same("WQEs posted", &wa, &wb)?;
            let _ = (from_c, from_r);
            // Each WQE's first DS * 16 bytes: what the HCA reads. The rest
            // of its last basic block is left from earlier WQEs (the rings'
            // sizes differ, see docs/MLX5.md) and is not compared.
            for (a, b) in wa.iter().zip(&wb) {
                let blocks = (a.ds * 16).div_ceil(64).max(1);
                // SAFETY: as above.
                let (mut ba, mut bb) =
                    unsafe { (hca::send_blocks(cqp, a.start, blocks), hca::send_blocks(rqp, b.start, blocks)) };
                ba.truncate(a.ds as usize * 16);
                bb.truncate(b.ds as usize * 16);
                for (w, qp_type) in [(&mut ba, cqp.qp_type), (&mut bb, rqp.qp_type)] {
                    if let Some(p) = inline_pad(w, qp_type) {
                        zero(w, p.range.clone());
                        pads.push(p);
                    }
                    // A BlueFlame copy is whole 64-byte blocks: past DS * 16
                    // it carries what the ring held there.
                    pads.push(Pad { ctrl: w[..16].to_vec(), range: w.len()..blocks as usize * 64 });
                }
                if ba != bb {
                    let _ = write!(
                        out,
                        "  send WQE at {} ({} blocks, ds {}):\n{}",
                        a.start,
                        blocks,
                        a.ds,
                        hex_diff(&ba, &bb)
                    );
                }
            }
            // SAFETY: as above.
            unsafe {
                if let Err(e) = same(
                    "doorbell record",
                    (hca::dbrec(cqp.db_addr, 0), hca::dbrec(cqp.db_addr, 1)),
                    (hca::dbrec(rqp.db_addr, 0), hca::dbrec(rqp.db_addr, 1)),
                ) {
                    out.push_str(&e);
                }
            }
        }
        Step::Recv(wrs) | Step::SrqRecv(wrs) => {
            let srq = matches!(step, Step::SrqRecv(_));
            let (a, b) = (s.c.post_recv(wrs, shared, srq), s.r.post_recv(wrs, shared, srq));
            same("post_recv result", a, b)?;
            if srq {
                let (cs, rs) = (&cx.srqs[0], &rx.srqs[0]);
                let len = ((cs.max_wr + 1) << cs.wqe_shift) as usize;
                // SAFETY: the caller's contract: live SRQ rings and records.
                let (a, b) = unsafe { (hca::read(cs.buf_addr, len), hca::read(rs.buf_addr, len)) };
                if a != b {
                    let _ = write!(out, "  SRQ ring:\n{}", hex_diff(&a, &b));
                }
                // SAFETY: as above.
                unsafe { same("SRQ doorbell record", hca::dbrec(cs.db_addr, 0), hca::dbrec(rs.db_addr, 0))? };
            } else {
                let len = (cqp.rq_wqe_cnt as usize) << cqp.rq_wqe_shift;
                // SAFETY: the caller's contract: live receive rings.
                let (a, b) = unsafe { (hca::read(cqp.buf_addr, len), hca::read(rqp.buf_addr, len)) };
                if a != b {
                    let _ = write!(out, "  receive queue:\n{}", hex_diff(&a, &b));
                }
                // SAFETY: as above.
                unsafe { same("receive doorbell record", hca::dbrec(cqp.db_addr, 0), hca::dbrec(rqp.db_addr, 0))? };
            }
        }
        Step::Complete(c) => {
            let (csrq, rsrq) = (cx.srqs.first(), rx.srqs.first());
            // SAFETY: the caller's contract.
            let (ea, eb) = unsafe {
                (
                    hca_side::next_cqe(&mut s.ch, c, cqp, csrq, cx.cqe_version),
                    hca_side::next_cqe(&mut s.rh, c, rqp, rsrq, rx.cqe_version),
                )
            };
            same("CQE the HCA writes", &ea, &eb)?;
            if let (Some(ea), Some(eb)) = (ea, eb) {
                // SAFETY: live CQ buffers.
                unsafe {
                    hca::write_cqe(&cx.cqs[0], s.ch.cqes, &ea);
                    hca::write_cqe(&rx.cqs[0], s.rh.cqes, &eb);
                }
                s.ch.cqes += 1;
                s.rh.cqes += 1;
            }
            let (wa, wb) = (s.c.poll(4), s.r.poll(4));
            same("completions polled", wa.iter().map(defined).collect::<Vec<_>>(), wb.iter().map(defined).collect())?;
            // SAFETY: live CQ doorbell records.
            unsafe { same("CQ consumer index", hca::dbrec(cx.cqs[0].db_addr, 0), hca::dbrec(rx.cqs[0].db_addr, 0))? };
        }
        Step::Arm { solicited } => {
            let (a, b) = (s.c.arm(*solicited), s.r.arm(*solicited));
            same("arm result", a, b)?;
            // SAFETY: live CQ doorbell records.
            unsafe { same("CQ arm word", hca::dbrec(cx.cqs[0].db_addr, 1), hca::dbrec(rx.cqs[0].db_addr, 1))? };
        }
    }
    // SAFETY: the caller's contract: live UAR pages.
    if let Err(e) = unsafe { compare_uars(cx, rx, "after the step", &pads) } {
        out.push_str(&e);
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}
