//! The scale bench's C side (`cargo xtask bench --only scale`, issue #35):
//! the work of `examples/scale_objects.rs` done as a C program does it,
//! through the `ibv_*` functions of a `libibverbs.so.1` it `dlopen`s. Run
//! plainly it measures rdma-core's library (and its rxe provider); with
//! `LD_LIBRARY_PATH=/opt/rverbs/lib` rverbs' C library. The first argument
//! names the implementation in the output lines.
//!
//! ```text
//! scale_c IMPL objects KIND N [ROUNDS] # KIND: pd mr cq qp-rc qp-ud srq ah, or all
//! scale_c IMPL memory SIZE REPS [huge] # SIZE: 4k 1m 64m 1g
//! ```
//!
//! Lines and set-up as `scale_objects`' (see there): `objects` prints
//! `SCALE objects KIND IMPL N create_ns=… destroy_ns=… rss_b=… first_ns=… rounds=…`, `memory`
//! `SCALE memory SIZE IMPL REPS reg_ns=… rereg_ns=… dereg_ns=…`. The
//! structures and the `dlopen` are `examples/c_verbs`'.

use core::ffi::c_int;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use nix::libc;

#[path = "../../examples/c_verbs/mod.rs"]
mod c_verbs;
use c_verbs::{errno, ok, ok0, AhAttr, Devices, GlobalRoute, Library, QpCap, QpInitAttr, Result, SrqInitAttr, P};

const IBV_QPT_RC: u32 = 2;
const IBV_QPT_UD: u32 = 4;
const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
const IBV_ACCESS_REMOTE_READ: c_int = 4;
const IBV_REREG_MR_CHANGE_ACCESS: c_int = 4;
const GID_INDEX: c_int = 1;
const CQE: c_int = 16;

/// The `ibv_*` functions used, from the `dlopen`ed library.
struct Lib {
    dev: Devices,
    close_device: unsafe extern "C" fn(P) -> c_int,
    alloc_pd: unsafe extern "C" fn(P) -> P,
    dealloc_pd: unsafe extern "C" fn(P) -> c_int,
    reg_mr: unsafe extern "C" fn(P, P, usize, c_int) -> P,
    rereg_mr: unsafe extern "C" fn(P, c_int, P, P, usize, c_int) -> c_int,
    dereg_mr: unsafe extern "C" fn(P) -> c_int,
    create_cq: unsafe extern "C" fn(P, c_int, P, P, c_int) -> P,
    destroy_cq: unsafe extern "C" fn(P) -> c_int,
    create_qp: unsafe extern "C" fn(P, *mut QpInitAttr) -> P,
    destroy_qp: unsafe extern "C" fn(P) -> c_int,
    create_srq: unsafe extern "C" fn(P, *mut SrqInitAttr) -> P,
    destroy_srq: unsafe extern "C" fn(P) -> c_int,
    query_gid: unsafe extern "C" fn(P, u8, c_int, *mut [u8; 16]) -> c_int,
    create_ah: unsafe extern "C" fn(P, *mut AhAttr) -> P,
    destroy_ah: unsafe extern "C" fn(P) -> c_int,
}

/// `libibverbs.so.1` as the loader finds it (`LD_LIBRARY_PATH` picks rverbs').
fn load() -> Result<Lib> {
    let h = Library::open()?;
    // SAFETY: each type is that name's C prototype in verbs.h 44.
    unsafe {
        Ok(Lib {
            dev: h.devices()?,
            close_device: h.sym("ibv_close_device")?,
            alloc_pd: h.sym("ibv_alloc_pd")?,
            dealloc_pd: h.sym("ibv_dealloc_pd")?,
            reg_mr: h.sym("ibv_reg_mr")?,
            rereg_mr: h.sym("ibv_rereg_mr")?,
            dereg_mr: h.sym("ibv_dereg_mr")?,
            create_cq: h.sym("ibv_create_cq")?,
            destroy_cq: h.sym("ibv_destroy_cq")?,
            create_qp: h.sym("ibv_create_qp")?,
            destroy_qp: h.sym("ibv_destroy_qp")?,
            create_srq: h.sym("ibv_create_srq")?,
            destroy_srq: h.sym("ibv_destroy_srq")?,
            query_gid: h.sym("ibv_query_gid")?,
            create_ah: h.sym("ibv_create_ah")?,
            destroy_ah: h.sym("ibv_destroy_ah")?,
        })
    }
}

/// The first device, opened.
fn open(lib: &Lib) -> Result<P> {
    lib.dev.open_first()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = match a.as_slice() {
        [imp, "objects", kind, n, rest @ ..] if rest.len() <= 1 => count("N", n).and_then(|n| {
            let rounds = rest.first().map_or(Ok(1), |r| count("ROUNDS", r))?;
            if rounds == 0 {
                return Err("ROUNDS must be at least 1".into());
            }
            each(imp, kind, n, rounds)
        }),
        [imp, "memory", size, reps, rest @ ..] if rest.is_empty() || rest == ["huge"] => reps
            .parse()
            .map_err(|_| format!("REPS {reps:?} is not a count"))
            .and_then(|r| memory(imp, size, r, !rest.is_empty())),
        _ => Err("usage: scale_c IMPL objects KIND N [ROUNDS] | scale_c IMPL memory SIZE REPS [huge]".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_c {}: {e}", a.join(" "));
            ExitCode::FAILURE
        }
    }
}

/// `s` as a count, or an error naming `what`.
fn count(what: &str, s: &str) -> Result<usize> {
    s.parse().map_err(|_| format!("{what} {s:?} is not a count"))
}

/// The kinds, in the order `all` does them.
const KINDS: [&str; 7] = ["pd", "mr", "cq", "qp-rc", "qp-ud", "srq", "ah"];

/// `objects` of one kind, or of every kind in turn (`all`: one process
/// for callgrind, which dumps each count after `scale_counted`).
fn each(imp: &str, kind: &str, n: usize, rounds: usize) -> Result {
    if kind != "all" {
        return objects(imp, kind, n, rounds);
    }
    KINDS.iter().try_for_each(|k| objects(imp, k, n, rounds))
}

/// What the objects of a kind need, made before the timed loops.
struct Setup<'a> {
    lib: &'a Lib,
    ctx: P,
    pd: P,
    cq: P,
    page: P,
    ah: AhAttr,
}

/// Sets up, warms up, then `rounds` times creates and destroys `n`
/// objects of `kind`, and prints the line (as `scale_objects` does).
fn objects(imp: &str, kind: &str, n: usize, rounds: usize) -> Result {
    if !KINDS.contains(&kind) {
        return Err(format!("unknown kind {kind:?} (pd mr cq qp-rc qp-ud srq ah)"));
    }
    let lib = load()?;
    let ctx = open(&lib)?;
    // SAFETY: `ctx` is an open context.
    let pd = ok(unsafe { (lib.alloc_pd)(ctx) }, "ibv_alloc_pd")?;
    let cq = if kind.starts_with("qp") {
        // SAFETY: as above; no channel, no context.
        ok(unsafe { (lib.create_cq)(ctx, CQE, core::ptr::null_mut(), core::ptr::null_mut(), 0) }, "ibv_create_cq")?
    } else {
        core::ptr::null_mut()
    };
    let mut ah = AhAttr::default();
    if kind == "ah" {
        let mut gid = [0u8; 16];
        // SAFETY: `gid` is 16 writable bytes (`union ibv_gid`).
        ok0(unsafe { (lib.query_gid)(ctx, 1, GID_INDEX, &mut gid) }, "ibv_query_gid")?;
        ah.grh = GlobalRoute { dgid: gid, sgid_index: GID_INDEX as u8, hop_limit: 64, ..Default::default() };
        ah.is_global = 1;
        ah.port_num = 1;
    }
    let mut buf = vec![0u8; 2 * 4096];
    let off = buf.as_ptr().align_offset(4096);
    let page = buf[off..].as_mut_ptr().cast();
    let s = Setup { lib: &lib, ctx, pd, cq, page, ah };
    let first = warm_up(&s, kind)?;
    let (mut create, mut destroy, mut rss) = (Vec::new(), Vec::new(), None);
    for _ in 0..rounds {
        let rss0 = rss_bytes()?;
        let t0 = Instant::now();
        let objs = scale_create(&s, kind, n)?;
        create.push(t0.elapsed().as_nanos());
        let rss1 = rss_bytes()?;
        let t1 = Instant::now();
        scale_destroy(&s, kind, objs)?;
        destroy.push(t1.elapsed().as_nanos());
        scale_counted();
        rss.get_or_insert(rss1 as f64 - rss0 as f64);
    }
    // SAFETY: every object made of them is destroyed.
    unsafe {
        if !cq.is_null() {
            ok0((lib.destroy_cq)(cq), "ibv_destroy_cq")?;
        }
        ok0((lib.dealloc_pd)(pd), "ibv_dealloc_pd")?;
        ok0((lib.close_device)(ctx), "ibv_close_device")?;
    }
    drop(buf);
    if n > 0 {
        let per = |v: &mut [u128]| median(v) as f64 / n as f64;
        println!(
            "SCALE objects {kind} {imp} {n} create_ns={:.0} destroy_ns={:.0} rss_b={:.1} first_ns={} rounds={rounds}",
            per(&mut create),
            per(&mut destroy),
            rss.unwrap_or(0.0) / n as f64,
            first.as_nanos()
        );
    }
    Ok(())
}

/// Creates and destroys one object of `kind` before the loops, as the
/// Rust program does (`examples/scale_objects.rs`, `warm_up`): outside
/// [`scale_create`] and [`scale_destroy`], so callgrind does not count it.
/// Its wall time.
fn warm_up(s: &Setup, kind: &str) -> Result<std::time::Duration> {
    let t = Instant::now();
    destroy(s, kind, create(s, kind, 1)?)?;
    Ok(t.elapsed())
}

/// Creates `n` objects of `kind` (the loop callgrind counts).
#[inline(never)]
fn scale_create(s: &Setup, kind: &str, n: usize) -> Result<Vec<P>> {
    create(s, kind, n)
}

/// Destroys them, in creation order (the loop callgrind counts).
#[inline(never)]
fn scale_destroy(s: &Setup, kind: &str, objs: Vec<P>) -> Result {
    destroy(s, kind, objs)
}

fn create(s: &Setup, kind: &str, n: usize) -> Result<Vec<P>> {
    let l = s.lib;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `ctx`, `pd` and `cq` are live; `page` is a page of the
        // caller's buffer, which outlives every MR; the attributes are
        // initialised verbs.h structures.
        let (p, verb) = unsafe {
            match kind {
                "pd" => ((l.alloc_pd)(s.ctx), "ibv_alloc_pd"),
                "mr" => ((l.reg_mr)(s.pd, s.page, 4096, IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"),
                "cq" => ((l.create_cq)(s.ctx, CQE, core::ptr::null_mut(), core::ptr::null_mut(), 0), "ibv_create_cq"),
                "qp-rc" | "qp-ud" => {
                    let mut a = QpInitAttr {
                        qp_context: core::ptr::null_mut(),
                        send_cq: s.cq,
                        recv_cq: s.cq,
                        srq: core::ptr::null_mut(),
                        cap: QpCap {
                            max_send_wr: 16,
                            max_recv_wr: 16,
                            max_send_sge: 1,
                            max_recv_sge: 1,
                            max_inline_data: 0,
                        },
                        qp_type: if kind == "qp-rc" { IBV_QPT_RC } else { IBV_QPT_UD },
                        sq_sig_all: 0,
                    };
                    ((l.create_qp)(s.pd, &mut a), "ibv_create_qp")
                }
                "srq" => {
                    let mut a =
                        SrqInitAttr { srq_context: core::ptr::null_mut(), max_wr: 16, max_sge: 1, srq_limit: 0 };
                    ((l.create_srq)(s.pd, &mut a), "ibv_create_srq")
                }
                _ => {
                    let mut a = s.ah;
                    ((l.create_ah)(s.pd, &mut a), "ibv_create_ah")
                }
            }
        };
        v.push(ok(p, verb).map_err(|e| format!("creating {kind} {} of {n}: {e}", i + 1))?);
    }
    Ok(black_box(v))
}

fn destroy(s: &Setup, kind: &str, objs: Vec<P>) -> Result {
    let l = s.lib;
    for o in objs {
        // SAFETY: `o` is a live object of `kind`, destroyed once.
        let (rc, verb) = unsafe {
            match kind {
                "pd" => ((l.dealloc_pd)(o), "ibv_dealloc_pd"),
                "mr" => ((l.dereg_mr)(o), "ibv_dereg_mr"),
                "cq" => ((l.destroy_cq)(o), "ibv_destroy_cq"),
                "qp-rc" | "qp-ud" => ((l.destroy_qp)(o), "ibv_destroy_qp"),
                "srq" => ((l.destroy_srq)(o), "ibv_destroy_srq"),
                _ => ((l.destroy_ah)(o), "ibv_destroy_ah"),
            }
        };
        ok0(rc, verb)?;
    }
    Ok(())
}

/// Resident memory (`/proc/self/statm`'s second field, in pages).
fn rss_bytes() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").map_err(|e| format!("/proc/self/statm: {e}"))?;
    let pages: u64 = s.split_whitespace().nth(1).and_then(|p| p.parse().ok()).ok_or("statm unreadable")?;
    // SAFETY: sysconf has no memory-safety preconditions.
    Ok(pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64)
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

fn memory(imp: &str, size: &str, reps: usize, huge: bool) -> Result {
    let len = size_of(size).ok_or(format!("size {size:?} (4k 1m 64m 1g)"))?;
    if reps == 0 {
        return Err("REPS must be at least 1".into());
    }
    let flags = libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS
        | if huge { libc::MAP_HUGETLB | (21 << libc::MAP_HUGE_SHIFT) } else { 0 };
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let map = unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    if map == libc::MAP_FAILED {
        return Err(format!("mmap of {len} bytes{}: {}", if huge { " (huge)" } else { "" }, errno()));
    }
    // Every page present before the clock starts: the registrations pin,
    // they do not fault in.
    for off in (0..len).step_by(4096) {
        // SAFETY: `off` < `len`, inside the writable mapping.
        unsafe { map.cast::<u8>().add(off).write_volatile(1) };
    }
    let lib = load()?;
    let ctx = open(&lib)?;
    // SAFETY: `ctx` is an open context.
    let pd = ok(unsafe { (lib.alloc_pd)(ctx) }, "ibv_alloc_pd")?;
    let (mut reg, mut rereg, mut dereg) = (Vec::new(), Vec::new(), Vec::new());
    let mut rereg_err = None;
    for _ in 0..reps {
        let t = Instant::now();
        // SAFETY: `map..map+len` is mapped until the munmap below, after
        // the region is deregistered.
        let mr = ok(unsafe { (lib.reg_mr)(pd, map, len, IBV_ACCESS_LOCAL_WRITE) }, "ibv_reg_mr")?;
        reg.push(t.elapsed().as_nanos());
        let t = Instant::now();
        let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
        // SAFETY: a live MR; an access change leaves pd/addr/length unused.
        let rc = unsafe {
            (lib.rereg_mr)(mr, IBV_REREG_MR_CHANGE_ACCESS, core::ptr::null_mut(), core::ptr::null_mut(), 0, access)
        };
        if rc == 0 {
            rereg.push(t.elapsed().as_nanos());
        } else {
            // rdma-core 44's rxe provider has no rereg_mr: the verb fails
            // with IBV_REREG_MR_ERR_CMD and errno EOPNOTSUPP.
            rereg_err = Some(errno().raw_os_error().unwrap_or(0));
        }
        let t = Instant::now();
        // SAFETY: a live MR, deregistered once.
        ok0(unsafe { (lib.dereg_mr)(mr) }, "ibv_dereg_mr")?;
        dereg.push(t.elapsed().as_nanos());
    }
    // SAFETY: nothing registered is left; the mapping is ours.
    unsafe {
        ok0((lib.dealloc_pd)(pd), "ibv_dealloc_pd")?;
        ok0((lib.close_device)(ctx), "ibv_close_device")?;
        libc::munmap(map, len);
    }
    let what = if huge { format!("{size}-huge") } else { size.to_owned() };
    let rereg = match rereg_err {
        Some(e) => format!("rereg_errno={e}"),
        None => format!("rereg_ns={}", median(&mut rereg)),
    };
    println!("SCALE memory {what} {imp} {reps} reg_ns={} {rereg} dereg_ns={}", median(&mut reg), median(&mut dereg));
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
