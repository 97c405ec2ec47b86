//! The scale bench's rverbs side (`cargo xtask bench --only scale`, issue
//! #35): what creating and destroying many objects, and registering large
//! buffers, costs through rverbs' Rust API. `capi/examples/scale_c.rs` does
//! the same work through a `libibverbs.so.1` (rdma-core's or rverbs'), so
//! the two print comparable lines.
//!
//! ```text
//! scale_objects objects KIND N [ROUNDS]  # KIND: pd mr cq qp-rc qp-ud srq ah, or all
//! scale_objects memory SIZE REPS [huge]   # SIZE: 4k 1m 64m 1g
//! ```
//!
//! `objects` sets up what KIND needs (device, PD, one CQ for the QPs, one
//! page for the MRs, the port's GID 1 for the AHs), then creates N objects
//! in [`scale_create`] and destroys them in [`scale_destroy`], and prints
//! `SCALE objects KIND rverbs N create_ns=… destroy_ns=… rss_b=… first_ns=… rounds=…`:
//! wall time per object of each loop and the resident memory the create
//! loop added, per object (`/proc/self/statm`). With ROUNDS (default 1)
//! the two loops run that many times: the times are the medians over the
//! rounds, the memory the first round's (the bench gives N = 1 more
//! rounds, where one round is one object). Before the loops, [`warm_up`]
//! creates and destroys one object of KIND, untimed by the loops and
//! uncounted by callgrind; `first_ns` is its time. N = 0 does the set-up
//! and the warm-up alone, the baseline the bench subtracts from a whole
//! run's syscalls (strace); callgrind counts the two loops alone
//! (`--toggle-collect=*scale_*`).
//!
//! `memory` maps SIZE bytes (2 MiB huge pages with `huge`), writes every
//! page, then REPS times registers it (`ibv_reg_mr`), changes its access
//! (`ibv_rereg_mr`, `IBV_REREG_MR_CHANGE_ACCESS`) and deregisters it, and
//! prints `SCALE memory SIZE rverbs REPS reg_ns=… rereg_ns=… dereg_ns=…`,
//! the medians.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use rverbs::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, Context, GlobalRoute, MemoryRegion, ProtectionDomain,
    QpInitAttr, QpType, QueuePair, SharedReceiveQueue, SrqAttr,
};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

const IMPL: &str = "rverbs";
/// The GID index the bench uses everywhere (`-g 1`: RoCE v2, IPv4).
const GID_INDEX: u32 = 1;
const CQE: u32 = 16;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = match a.as_slice() {
        ["objects", kind, n, rest @ ..] if rest.len() <= 1 => count("N", n).and_then(|n| {
            let rounds = rest.first().map_or(Ok(1), |r| count("ROUNDS", r))?;
            if rounds == 0 {
                return Err("ROUNDS must be at least 1".into());
            }
            each(kind, n, rounds)
        }),
        ["memory", size, reps, rest @ ..] if rest.is_empty() || rest == ["huge"] => reps
            .parse()
            .map_err(|_| format!("REPS {reps:?} is not a count").into())
            .and_then(|r| memory(size, r, !rest.is_empty())),
        _ => Err("usage: scale_objects objects KIND N [ROUNDS] | memory SIZE REPS [huge]".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_objects {}: {e}", a.join(" "));
            ExitCode::FAILURE
        }
    }
}

/// `s` as a count, or an error naming `what`.
fn count(what: &str, s: &str) -> Result<usize> {
    s.parse().map_err(|_| format!("{what} {s:?} is not a count").into())
}

/// The kinds, in the order `all` does them.
const KINDS: [&str; 7] = ["pd", "mr", "cq", "qp-rc", "qp-ud", "srq", "ah"];

/// `objects` of one kind, or of every kind in turn (`all`: one process
/// for callgrind, which dumps each count after `scale_counted`).
fn each(kind: &str, n: usize, rounds: usize) -> Result {
    if kind != "all" {
        return objects(kind, n, rounds);
    }
    KINDS.iter().try_for_each(|k| objects(k, n, rounds))
}

/// What the objects of a kind need, made before the timed loops.
struct Setup {
    ctx: Context,
    pd: ProtectionDomain,
    cq: Option<CompletionQueue>,
    /// One page (inside a larger buffer) that every MR registers.
    page: *mut u8,
    ah: Option<AhAttr>,
}

/// The created objects, in a vector of their own type (so that each
/// object's memory is its handle's size, not the largest kind's).
enum Objs {
    Pd(Vec<ProtectionDomain>),
    Mr(Vec<MemoryRegion>),
    Cq(Vec<CompletionQueue>),
    Qp(Vec<QueuePair>),
    Srq(Vec<SharedReceiveQueue>),
    Ah(Vec<AddressHandle>),
}

/// `n` results of `make`, or the first error, naming which.
fn make<T>(kind: &str, n: usize, mut make: impl FnMut() -> rverbs::Result<T>) -> Result<Vec<T>> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        v.push(make().map_err(|e| format!("creating {kind} {} of {n}: {e}", i + 1))?);
    }
    Ok(v)
}

/// Sets up, warms up, then `rounds` times creates and destroys `n`
/// objects of `kind`, and prints the line.
fn objects(kind: &str, n: usize, rounds: usize) -> Result {
    if !KINDS.contains(&kind) {
        return Err(format!("unknown kind {kind:?} (pd mr cq qp-rc qp-ud srq ah)").into());
    }
    let ctx = rverbs::devices()?.into_iter().next().ok_or("no RDMA device (is rxe0 set up?)")?.open()?;
    let pd = ctx.alloc_pd()?;
    let cq = if kind.starts_with("qp") { Some(ctx.create_cq(CQE)?) } else { None };
    let ah = if kind == "ah" {
        let gid = ctx.query_gid(1, GID_INDEX)?.ok_or("port 1 has no GID at index 1")?;
        Some(AhAttr {
            port_num: 1,
            grh: Some(GlobalRoute { dgid: gid.gid, sgid_index: GID_INDEX as u8, hop_limit: 64, ..Default::default() }),
            ..Default::default()
        })
    } else {
        None
    };
    let mut buf = vec![0u8; 2 * 4096];
    let off = buf.as_ptr().align_offset(4096);
    let page = buf[off..].as_mut_ptr();
    let setup = Setup { ctx, pd, cq, page, ah };
    let first = warm_up(&setup, kind)?;
    let (mut create, mut destroy, mut rss) = (Vec::new(), Vec::new(), None);
    for _ in 0..rounds {
        let rss0 = rss_bytes()?;
        let t0 = Instant::now();
        let objs = scale_create(&setup, kind, n)?;
        create.push(t0.elapsed().as_nanos());
        let rss1 = rss_bytes()?;
        let t1 = Instant::now();
        scale_destroy(objs)?;
        destroy.push(t1.elapsed().as_nanos());
        scale_counted();
        rss.get_or_insert(rss1 as f64 - rss0 as f64);
    }
    drop(setup);
    drop(buf);
    if n > 0 {
        let per = |v: &mut [u128]| median(v) as f64 / n as f64;
        println!(
            "SCALE objects {kind} {IMPL} {n} create_ns={:.0} destroy_ns={:.0} rss_b={:.1} first_ns={} rounds={rounds}",
            per(&mut create),
            per(&mut destroy),
            rss.unwrap_or(0.0) / n as f64,
            first.as_nanos()
        );
    }
    Ok(())
}

/// Creates and destroys one object of `kind` before the loops: the first
/// of a kind in a process pays page faults and, under TCG, the translation
/// of code it runs for the first time, 9 to 30 times an object's cost
/// (issue 35), which would be all an N = 1 figure measured. Outside
/// [`scale_create`] and [`scale_destroy`], so callgrind does not count it.
/// Its wall time.
fn warm_up(s: &Setup, kind: &str) -> Result<std::time::Duration> {
    let t = Instant::now();
    destroy(create(s, kind, 1)?)?;
    Ok(t.elapsed())
}

/// Creates `n` objects of `kind` (the loop callgrind counts).
#[inline(never)]
fn scale_create(s: &Setup, kind: &str, n: usize) -> Result<Objs> {
    create(s, kind, n)
}

/// Destroys them, in creation order (the loop callgrind counts).
#[inline(never)]
fn scale_destroy(objs: Objs) -> Result {
    destroy(objs)
}

fn create(s: &Setup, kind: &str, n: usize) -> Result<Objs> {
    let objs = match kind {
        "pd" => Objs::Pd(make(kind, n, || s.ctx.alloc_pd())?),
        // SAFETY: `page` is a page of `buf`, which outlives every MR (they
        // are destroyed before it is dropped); nothing reads or writes it
        // while they exist.
        "mr" => Objs::Mr(make(kind, n, || unsafe { s.pd.reg_mr(s.page, 4096, AccessFlags::LOCAL_WRITE) })?),
        "cq" => Objs::Cq(make(kind, n, || s.ctx.create_cq(CQE))?),
        "qp-rc" | "qp-ud" => {
            let t = if kind == "qp-rc" { QpType::Rc } else { QpType::Ud };
            let cq = s.cq.as_ref().ok_or("no CQ")?;
            Objs::Qp(make(kind, n, || s.pd.create_qp(&QpInitAttr::new(t, cq)))?)
        }
        "srq" => Objs::Srq(make(kind, n, || s.pd.create_srq(&SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }))?),
        _ => {
            let attr = s.ah.as_ref().ok_or("no AH attributes")?;
            Objs::Ah(make(kind, n, || s.pd.create_ah(attr))?)
        }
    };
    Ok(black_box(objs))
}

fn destroy(objs: Objs) -> Result {
    match objs {
        Objs::Pd(v) => v.into_iter().try_for_each(|x| x.dealloc()),
        Objs::Mr(v) => v.into_iter().try_for_each(|x| x.dereg()),
        Objs::Cq(v) => v.into_iter().try_for_each(|x| x.destroy()),
        Objs::Qp(v) => v.into_iter().try_for_each(|x| x.destroy()),
        Objs::Srq(v) => v.into_iter().try_for_each(|x| x.destroy()),
        Objs::Ah(v) => v.into_iter().try_for_each(|x| x.destroy()),
    }?;
    Ok(())
}

/// Resident memory (`/proc/self/statm`'s second field, in pages).
fn rss_bytes() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = s.split_whitespace().nth(1).and_then(|p| p.parse().ok()).ok_or("statm unreadable")?;
    Ok(pages * rverbs::page_size() as u64)
}

/// `4k`, `1m`, `64m`, `1g` in bytes.
fn size_of(s: &str) -> Option<usize> {
    let (num, unit) = s.split_at(s.len().checked_sub(1)?);
    let shift = match unit {
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    num.parse::<usize>().ok().map(|n| n << shift)
}

fn memory(size: &str, reps: usize, huge: bool) -> Result {
    let len = size_of(size).ok_or(format!("size {size:?} (4k 1m 64m 1g)"))?;
    if reps == 0 {
        return Err("REPS must be at least 1".into());
    }
    let mut opts = memmap2::MmapOptions::new();
    opts.len(len);
    if huge {
        opts.huge(Some(21));
    }
    let mut map =
        opts.map_anon().map_err(|e| format!("mmap of {len} bytes{}: {e}", if huge { " (huge)" } else { "" }))?;
    // Every page present before the clock starts: the registrations pin,
    // they do not fault in.
    for b in map.iter_mut().step_by(4096) {
        *b = 1;
    }
    let ctx = rverbs::devices()?.into_iter().next().ok_or("no RDMA device (is rxe0 set up?)")?.open()?;
    let pd = ctx.alloc_pd()?;
    let (mut reg, mut rereg, mut dereg) = (Vec::new(), Vec::new(), Vec::new());
    let mut rereg_err = None;
    for _ in 0..reps {
        let t = Instant::now();
        // SAFETY: `map` outlives the region (deregistered below, before
        // the map is dropped), and nothing touches it while it is registered.
        let mut mr = unsafe { pd.reg_mr(map.as_mut_ptr(), len, AccessFlags::LOCAL_WRITE) }?;
        reg.push(t.elapsed().as_nanos());
        let t = Instant::now();
        match mr.rereg_access(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ) {
            Ok(()) => rereg.push(t.elapsed().as_nanos()),
            // rxe before 6.2 has no rereg (EOPNOTSUPP).
            Err(e) => rereg_err = Some(e.errno().map_or(0, |e| e as i32)),
        }
        let t = Instant::now();
        mr.dereg()?;
        dereg.push(t.elapsed().as_nanos());
    }
    let what = if huge { format!("{size}-huge") } else { size.to_owned() };
    let rereg = match rereg_err {
        Some(e) => format!("rereg_errno={e}"),
        None => format!("rereg_ns={}", median(&mut rereg)),
    };
    println!("SCALE memory {what} {IMPL} {reps} reg_ns={} {rereg} dereg_ns={}", median(&mut reg), median(&mut dereg));
    Ok(())
}

fn median(v: &mut [u128]) -> u128 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Called after each destroy loop: callgrind dumps the count of the two
/// loops when it returns (`--dump-after=*::scale_counted`). Not the
/// destroy loop itself: a dump on a toggled function stops its counting.
#[inline(never)]
fn scale_counted() {
    std::hint::black_box(());
}
