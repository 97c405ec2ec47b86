//! Faults on the real kernel (VM tier, issue 32 item 2), through rverbs'
//! `libibverbs.so.1` and, side by side, rdma-core's: a process SIGKILLed
//! while it holds objects of every kind the library makes leaks nothing;
//! too small an `RLIMIT_MEMLOCK`, an exhausted `RLIMIT_NOFILE` and an mmap
//! that `RLIMIT_AS` refuses fail with the errno rdma-core gives and leave no
//! object in the kernel; rdma-core's `ibv_rc_pingpong` whose server is
//! SIGKILLed mid-stream ends on the client with the retry counter exceeded.
//!
//! The children that are killed or lower their limits are copies of this
//! test binary running [`child_main`] (`RVERBS_FAULTS_CHILD` says what,
//! `RVERBS_FAULTS_LIB` which library: a directory, or `system` for
//! rdma-core's), driving the library as a C program does (`dlopen`, the
//! `verbs.h` layouts and op pointers). They report `@@tag value` lines.

mod common;

use core::ffi::{c_int, c_void};
use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use ibverbs::abi::*;
use nix::libc;

static DEVICE_STATE: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    DEVICE_STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

const CHILD: &str = "RVERBS_FAULTS_CHILD";
const LIB: &str = "RVERBS_FAULTS_LIB";
const REPORT: Duration = Duration::from_secs(60);
/// `IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC`.
const ACCESS_ALL: c_int = 1 | 2 | 4 | 8;

/// The exported functions the children call, from the `dlopen`ed library.
struct Lib {
    get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    reg_mr: unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr,
    create_comp_channel: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel,
    create_cq: unsafe extern "C" fn(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq,
    create_srq: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq,
    create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    query_gid: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut [u8; 16]) -> c_int,
    create_ah: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah,
    free_device_list: unsafe extern "C" fn(*mut *mut ibv_device),
    get_device_name: unsafe extern "C" fn(*mut ibv_device) -> *const core::ffi::c_char,
    close_device: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    dereg_mr: unsafe extern "C" fn(*mut ibv_mr) -> c_int,
    destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    destroy_srq: unsafe extern "C" fn(*mut ibv_srq) -> c_int,
    destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    destroy_ah: unsafe extern "C" fn(*mut ibv_ah) -> c_int,
}

/// # Safety
/// `T` is the C type of the function `name`.
unsafe fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let n = CString::new(name).unwrap();
    // SAFETY: `h` is a live handle, `n` NUL-terminated.
    let p = unsafe { libc::dlsym(h, n.as_ptr()) };
    assert!(!p.is_null(), "{name} is not exported");
    // SAFETY: the caller's contract.
    unsafe { core::mem::transmute_copy(&p) }
}

/// rverbs' library from `dir`, or rdma-core's (`system`: the loader's choice
/// of the soname, this process having no `LD_LIBRARY_PATH`).
fn load(which: &str) -> Lib {
    let path = if which == "system" { "libibverbs.so.1".to_owned() } else { format!("{which}/libibverbs.so.1") };
    let c = CString::new(path.clone()).unwrap();
    // SAFETY: a NUL-terminated path.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {path}");
    // SAFETY: each type is that name's C prototype in verbs.h 44.
    unsafe {
        Lib {
            get_device_list: sym(h, "ibv_get_device_list"),
            open_device: sym(h, "ibv_open_device"),
            alloc_pd: sym(h, "ibv_alloc_pd"),
            reg_mr: sym(h, "ibv_reg_mr"),
            create_comp_channel: sym(h, "ibv_create_comp_channel"),
            create_cq: sym(h, "ibv_create_cq"),
            create_srq: sym(h, "ibv_create_srq"),
            create_qp: sym(h, "ibv_create_qp"),
            modify_qp: sym(h, "ibv_modify_qp"),
            query_gid: sym(h, "ibv_query_gid"),
            create_ah: sym(h, "ibv_create_ah"),
            free_device_list: sym(h, "ibv_free_device_list"),
            get_device_name: sym(h, "ibv_get_device_name"),
            close_device: sym(h, "ibv_close_device"),
            dealloc_pd: sym(h, "ibv_dealloc_pd"),
            dereg_mr: sym(h, "ibv_dereg_mr"),
            destroy_comp_channel: sym(h, "ibv_destroy_comp_channel"),
            destroy_cq: sym(h, "ibv_destroy_cq"),
            destroy_srq: sym(h, "ibv_destroy_srq"),
            destroy_qp: sym(h, "ibv_destroy_qp"),
            destroy_ah: sym(h, "ibv_destroy_ah"),
        }
    }
}

fn errno() -> c_int {
    nix::errno::Errno::last_raw()
}

/// `NULL errno=N` or `ok` for a pointer a verb returned.
fn outcome<T>(p: *mut T) -> String {
    if p.is_null() {
        format!("NULL errno={}", errno())
    } else {
        "ok".to_owned()
    }
}

// ---------------------------------------------------------------------------
// The children.

/// What a child runs; a no-op test otherwise.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    // SAFETY: prctl with integer arguments: die with the test that started us.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let lib = load(&std::env::var(LIB).unwrap());
    // SAFETY: the C API by its contract; everything is leaked on purpose
    // (the process is killed holding it).
    unsafe {
        let mut n = 0;
        let list = (lib.get_device_list)(&mut n);
        assert!(n > 0, "no device through the library");
        let dev = *list;
        match mode.as_str() {
            "hold" => hold(&lib, dev),
            "memlock" => memlock(&lib, dev),
            "nofile" => nofile(&lib, dev),
            "mmap" => mmap(&lib, dev),
            "rc_peer" => rc_peer(&lib, dev),
            "rc_stream" => rc_stream(&lib, dev),
            "release" => release(&lib, list),
            m => panic!("unknown child mode {m}"),
        }
    }
    println!("\n@@ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A context, a PD, a registered region, a completion channel with an
/// armed CQ, a second CQ, an SRQ, an RC QP at RTS (looped back to itself)
/// and an AH.
unsafe fn hold(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract.
    unsafe {
        let ctx = (lib.open_device)(dev);
        assert!(!ctx.is_null());
        let pd = (lib.alloc_pd)(ctx);
        let buf = Vec::leak(vec![0u8; 1 << 16]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        let ch = (lib.create_comp_channel)(ctx);
        let cq = (lib.create_cq)(ctx, 64, core::ptr::null_mut(), ch, 0);
        let cq2 = (lib.create_cq)(ctx, 64, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        assert!(!pd.is_null() && !mr.is_null() && !ch.is_null() && !cq.is_null() && !cq2.is_null());
        type Notify = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
        assert_eq!(core::mem::transmute::<Slot, Notify>((*ctx).ops.req_notify_cq)(cq, 0), 0, "arm");
        let mut sa = ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ibv_srq_attr { max_wr: 16, max_sge: 1, srq_limit: 0 },
        };
        let srq = (lib.create_srq)(pd, &mut sa);
        assert!(!srq.is_null());
        let mut qa = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq2,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: 2,
            sq_sig_all: 0,
        };
        let qp = (lib.create_qp)(pd, &mut qa);
        assert!(!qp.is_null());
        let a = connect(lib, ctx, qp, (*qp).qp_num, 14, 7);
        let mut ah_attr = a.ah_attr;
        let ah = (lib.create_ah)(pd, &mut ah_attr);
        assert!(!ah.is_null(), "create_ah errno {}", errno());
    }
}

/// The next line of stdin, which the test writes when it is time.
fn wait_for_line() -> String {
    let mut l = String::new();
    std::io::stdin().read_line(&mut l).unwrap();
    l.trim().to_owned()
}

/// [`hold`]'s objects on the first device of `list`, each destroyed (and the
/// device closed, the list freed) when the test says `release`; then, when
/// it says `reopen`, the device listed and opened again by name (the test
/// has deleted and re-added it meanwhile): `@@reopened ok` or the errno.
unsafe fn release(lib: &Lib, list: *mut *mut ibv_device) {
    // SAFETY: the caller's contract: a list from the library; each object
    // is destroyed once, after those that use it.
    unsafe {
        let dev = *list;
        let name = std::ffi::CStr::from_ptr((lib.get_device_name)(dev)).to_owned();
        let ctx = (lib.open_device)(dev);
        let pd = (lib.alloc_pd)(ctx);
        let buf = Vec::leak(vec![0u8; 1 << 16]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        let ch = (lib.create_comp_channel)(ctx);
        let cq = (lib.create_cq)(ctx, 64, core::ptr::null_mut(), ch, 0);
        assert!(!ctx.is_null() && !pd.is_null() && !mr.is_null() && !ch.is_null() && !cq.is_null());
        type Notify = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
        assert_eq!(core::mem::transmute::<Slot, Notify>((*ctx).ops.req_notify_cq)(cq, 0), 0, "arm");
        let mut sa = ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ibv_srq_attr { max_wr: 16, max_sge: 1, srq_limit: 0 },
        };
        let srq = (lib.create_srq)(pd, &mut sa);
        let mut qa = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: 2,
            sq_sig_all: 0,
        };
        let qp = (lib.create_qp)(pd, &mut qa);
        assert!(!srq.is_null() && !qp.is_null());
        let a = connect(lib, ctx, qp, (*qp).qp_num, 14, 7);
        let mut ah_attr = a.ah_attr;
        let ah = (lib.create_ah)(pd, &mut ah_attr);
        assert!(!ah.is_null(), "create_ah errno {}", errno());
        println!("\n@@holding");
        assert_eq!(wait_for_line(), "release");
        let r = [
            (lib.destroy_ah)(ah),
            (lib.destroy_qp)(qp),
            (lib.destroy_srq)(srq),
            (lib.destroy_cq)(cq),
            (lib.destroy_comp_channel)(ch),
            (lib.dereg_mr)(mr),
            (lib.dealloc_pd)(pd),
            (lib.close_device)(ctx),
        ];
        (lib.free_device_list)(list);
        println!("@@released {r:?}");
        assert_eq!(wait_for_line(), "reopen");
        let mut n = 0;
        let list = (lib.get_device_list)(&mut n);
        let dev = (0..n as usize)
            .map(|i| *list.add(i))
            .find(|&d| std::ffi::CStr::from_ptr((lib.get_device_name)(d)) == name.as_c_str());
        let reopened = match dev {
            None => "not listed".to_owned(),
            Some(d) => {
                let ctx = (lib.open_device)(d);
                let pd = if ctx.is_null() { core::ptr::null_mut() } else { (lib.alloc_pd)(ctx) };
                outcome(pd)
            }
        };
        println!("@@reopened {reopened}");
        std::process::exit(0);
    }
}

/// RESET → INIT → RTR → RTS towards QP `dest` of this device (GID index 1,
/// the RoCE v2 GID), with the local ACK `timeout` and `retry` count given.
unsafe fn connect(lib: &Lib, ctx: *mut ibv_context, qp: *mut ibv_qp, dest: u32, timeout: u8, retry: u8) -> ibv_qp_attr {
    // SAFETY: the caller's contract: live objects of `lib`.
    unsafe {
        let sgid = 1;
        let mut gid = [0u8; 16];
        assert_eq!((lib.query_gid)(ctx, 1, sgid, &mut gid), 0);
        let mut a: ibv_qp_attr = core::mem::zeroed();
        a.qp_state = 1;
        a.port_num = 1;
        a.qp_access_flags = ACCESS_ALL as u32;
        assert_eq!((lib.modify_qp)(qp, &mut a, 1 | 8 | 16 | 32), 0, "INIT");
        a.qp_state = 2;
        a.path_mtu = 3;
        a.dest_qp_num = dest;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = sgid as u8;
        a.ah_attr.grh.hop_limit = 1;
        assert_eq!((lib.modify_qp)(qp, &mut a, 1 | 128 | 256 | (1 << 20) | 4096 | (1 << 17) | (1 << 15)), 0, "RTR");
        a.qp_state = 3;
        a.timeout = timeout;
        a.retry_cnt = retry;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        assert_eq!((lib.modify_qp)(qp, &mut a, 1 | 512 | 1024 | 2048 | (1 << 16) | (1 << 13)), 0, "RTS");
        a
    }
}

/// An RC QP on a fresh context, PD, 4 KiB region and CQ of `lib`.
unsafe fn rc_qp(lib: &Lib, dev: *mut ibv_device) -> (*mut ibv_context, *mut ibv_cq, *mut ibv_qp, *mut ibv_mr) {
    // SAFETY: the caller's contract; the buffer is leaked.
    unsafe {
        let ctx = (lib.open_device)(dev);
        let pd = (lib.alloc_pd)(ctx);
        let buf = Vec::leak(vec![0u8; 4096]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        let cq = (lib.create_cq)(ctx, 256, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        let mut qa = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap { max_send_wr: 32, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: 2,
            sq_sig_all: 0,
        };
        let qp = (lib.create_qp)(pd, &mut qa);
        assert!(!ctx.is_null() && !mr.is_null() && !cq.is_null() && !qp.is_null(), "errno {}", errno());
        (ctx, cq, qp, mr)
    }
}

/// The peer that is killed: an RC QP with writable memory, connected to
/// QP `RVERBS_FAULTS_QPN`; reports `@@peer QPN RKEY ADDR`.
unsafe fn rc_peer(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract.
    unsafe {
        let (ctx, _cq, qp, mr) = rc_qp(lib, dev);
        let dest: u32 = std::env::var("RVERBS_FAULTS_QPN").unwrap().parse().unwrap();
        connect(lib, ctx, qp, dest, 12, 2);
        println!("\n@@peer {} {} {}", (*qp).qp_num, (*mr).rkey, (*mr).addr as u64);
    }
}

/// The streaming side: reports `@@qpn`, reads the peer's `QPN RKEY ADDR`
/// on stdin, connects (timeout 12, retry_cnt 2), streams signaled RDMA
/// WRITEs (16 outstanding), says `@@streaming` after 64 completed, and
/// once one failed and every posted one completed, `@@result STATUS OK
/// FLUSHED POSTED ONCE`.
unsafe fn rc_stream(lib: &Lib, dev: *mut ibv_device) {
    type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    // SAFETY: the caller's contract; the op slots hold the library's functions.
    unsafe {
        let (ctx, cq, qp, mr) = rc_qp(lib, dev);
        println!("\n@@qpn {}", (*qp).qp_num);
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        let v: Vec<u64> = line.split_whitespace().map(|w| w.parse().unwrap()).collect();
        connect(lib, ctx, qp, v[0] as u32, 12, 2);
        let post = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        let poll = core::mem::transmute::<Slot, PollCq>((*ctx).ops.poll_cq);
        let mut sge = ibv_sge { addr: (*mr).addr as u64, length: 64, lkey: (*mr).lkey };
        let mut done: Vec<(u64, u32)> = Vec::new();
        let (mut posted, mut failed) = (0u64, false);
        let mut wc: [ibv_wc; 16] = core::mem::zeroed();
        let start = Instant::now();
        let mut said = false;
        while !failed || done.len() < posted as usize {
            if start.elapsed() > Duration::from_secs(120) {
                println!("\n@@result hang {posted} posted, {} done", done.len());
                return;
            }
            if !failed && posted - (done.len() as u64) < 16 {
                let mut wr: ibv_send_wr = core::mem::zeroed();
                wr.wr_id = posted;
                wr.sg_list = &mut sge;
                wr.num_sge = 1;
                wr.opcode = 0; // IBV_WR_RDMA_WRITE
                wr.send_flags = 2; // IBV_SEND_SIGNALED
                wr.wr = [v[2], v[1], 0, 0];
                let mut bad = core::ptr::null_mut();
                if post(qp, &mut wr, &mut bad) == 0 {
                    posted += 1;
                }
            }
            let n = poll(cq, 16, wc.as_mut_ptr());
            assert!(n >= 0, "poll_cq {n}");
            for w in &wc[..n as usize] {
                done.push((w.wr_id, w.status));
                failed |= w.status != 0;
            }
            if !said && done.len() >= 64 {
                said = true;
                println!("\n@@streaming");
            }
        }
        let ok = done.iter().take_while(|d| d.1 == 0).count();
        let flushed = done[ok + 1..].iter().filter(|d| d.1 == 5).count(); // IBV_WC_WR_FLUSH_ERR
        let mut ids: Vec<u64> = done.iter().map(|d| d.0).collect();
        ids.sort_unstable();
        let once = ids == (0..posted).collect::<Vec<_>>();
        println!("\n@@result {} {ok} {flushed} {posted} {once}", done[ok].1);
    }
}

fn set_limit(res: libc::__rlimit_resource_t, soft: u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid resource and out-pointer.
    assert_eq!(unsafe { libc::getrlimit(res, &mut r) }, 0);
    r.rlim_cur = soft;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(res, &r) }, 0, "setrlimit {res} {soft}");
}

/// A 64 KiB `RLIMIT_MEMLOCK` as nobody: a 1 MiB `ibv_reg_mr` fails, a 4 KiB one fits.
unsafe fn memlock(lib: &Lib, dev: *mut ibv_device) {
    set_limit(libc::RLIMIT_MEMLOCK, 64 << 10);
    // SAFETY: the caller's contract; plain syscalls.
    unsafe {
        assert_eq!(libc::setgid(65534), 0);
        assert_eq!(libc::setuid(65534), 0);
        let ctx = (lib.open_device)(dev);
        assert!(!ctx.is_null(), "open as nobody: errno {}", errno());
        let pd = (lib.alloc_pd)(ctx);
        let big = Vec::leak(vec![0u8; 1 << 20]);
        println!("\n@@reg_mr {}", outcome((lib.reg_mr)(pd, big.as_mut_ptr().cast(), big.len(), 1)));
        let small = Vec::leak(vec![0u8; 4096]);
        println!("\n@@small {}", outcome((lib.reg_mr)(pd, small.as_mut_ptr().cast(), small.len(), 1)));
    }
}

/// `RLIMIT_NOFILE` at the open descriptors (then one more): a second
/// `ibv_open_device` and a completion channel fail.
unsafe fn nofile(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract.
    unsafe {
        let ctx = (lib.open_device)(dev);
        let pd = (lib.alloc_pd)(ctx);
        assert!(!pd.is_null());
        let fd = libc::dup(0);
        libc::close(fd);
        set_limit(libc::RLIMIT_NOFILE, fd as u64 + 1);
        println!("\n@@open1 {}", outcome((lib.open_device)(dev)));
        set_limit(libc::RLIMIT_NOFILE, fd as u64);
        println!("\n@@open0 {}", outcome((lib.open_device)(dev)));
        println!("\n@@channel {}", outcome((lib.create_comp_channel)(ctx)));
    }
}

/// `RLIMIT_AS` 1 MiB above `VmSize`: a CQ of rxe's largest size cannot be mapped.
unsafe fn mmap(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract.
    unsafe {
        let ctx = (lib.open_device)(dev);
        let small = (lib.create_cq)(ctx, 16, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        assert!(!small.is_null());
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb: u64 =
            s.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap().trim().trim_end_matches(" kB").parse().unwrap();
        set_limit(libc::RLIMIT_AS, (kb << 10) + (1 << 20));
        println!("\n@@cq {}", outcome((lib.create_cq)(ctx, 32767, core::ptr::null_mut(), core::ptr::null_mut(), 0)));
    }
}

// ---------------------------------------------------------------------------
// The parent side.

/// A copy of this binary running one child mode, its stdout lines delivered as they come.
struct Kid {
    what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    err: Option<JoinHandle<String>>,
}

impl Kid {
    fn spawn(mode: &str, lib: &str) -> Kid {
        Kid::spawn_with(mode, lib, &[])
    }

    fn spawn_with(mode: &str, lib: &str, env: &[(&str, String)]) -> Kid {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new(&exe)
            .args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, mode)
            .env(LIB, lib)
            .env_remove("LD_LIBRARY_PATH")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let err = Some(collect(child.stderr.take().unwrap()));
        Kid { what: format!("child {mode} on {lib}"), child, lines, seen: Vec::new(), err }
    }

    fn expect(&mut self, tag: &str) -> String {
        let deadline = Instant::now() + REPORT;
        let prefix = format!("@@{tag}");
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if let Some(rest) = l.strip_prefix(&prefix) {
                        if rest.is_empty() || rest.starts_with(' ') {
                            return rest.trim_start().to_owned();
                        }
                    }
                }
                Err(_) => {
                    self.kill();
                    let err = self.err.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
                    panic!(
                        "{}: no `{prefix}` line\n--- stdout ---\n{}\n--- stderr ---\n{}",
                        self.what,
                        self.seen.join("\n"),
                        tail(&err, 6000)
                    );
                }
            }
        }
    }

    fn kill(&mut self) {
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// `rdma resource show`'s counts for `dev` (`pd 1 cq 1 qp 1 cm_id 0 ...`).
fn counts(dev: &str) -> Vec<(String, u64)> {
    let out = Command::new("/usr/bin/rdma").args(["resource", "show"]).output().expect("rdma resource show");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.contains(&format!(" {dev}:"))).unwrap_or_else(|| panic!("{dev} not in {text}"));
    let words: Vec<&str> = line.split_whitespace().skip(2).collect();
    words.chunks(2).filter_map(|c| Some((c[0].to_owned(), c.get(1)?.parse().ok()?))).collect()
}

fn count(c: &[(String, u64)], kind: &str) -> u64 {
    c.iter().find(|(k, _)| k == kind).map_or(0, |(_, v)| *v)
}

/// Waits (a minute at most) until no count is above `before`.
fn assert_back(dev: &str, before: &[(String, u64)], what: &str) {
    let start = Instant::now();
    loop {
        let now = counts(dev);
        if now.iter().all(|(k, v)| *v <= count(before, k)) {
            return;
        }
        assert!(start.elapsed() < REPORT, "{what}: kernel objects leaked: {before:?} -> {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The device's name, rverbs' library directory, and whether rdma-core's
/// library is there too; `None` after a permitted skip.
fn libs() -> Option<(String, Vec<String>)> {
    let dev = rverbs::devices().ok().and_then(|d| d.into_iter().next());
    if !need(dev.is_some(), "no uverbs device") {
        return None;
    }
    let ours = lib_dir();
    if !need(ours.is_some(), "rverbs' libibverbs.so.1 was not built or installed") {
        return None;
    }
    let rdma_core = ["/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "/lib/x86_64-linux-gnu/libibverbs.so.1"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    let mut l = vec![ours.unwrap().to_string_lossy().into_owned()];
    if need(rdma_core, "rdma-core's libibverbs.so.1 is not installed (Debian: libibverbs1)") {
        l.push("system".to_owned());
    }
    Some((dev.unwrap().name().to_owned(), l))
}

#[test]
fn sigkilled_holding_objects_leaks_nothing_on_either_library() {
    let Some((dev, libs)) = libs() else { return };
    let _g = lock();
    for lib in &libs {
        let before = counts(&dev);
        let mut kid = Kid::spawn("hold", lib);
        kid.expect("ready");
        let during = counts(&dev);
        for kind in ["ctx", "pd", "cq", "qp", "mr", "srq"] {
            assert!(count(&during, kind) > count(&before, kind), "{lib}: the child holds a {kind}: {during:?}");
        }
        kid.kill();
        assert_back(&dev, &before, lib);
        eprintln!("{lib}: before {before:?}, child alive {during:?}, after the kill {:?}", counts(&dev));
    }
}

#[test]
fn limits_fail_with_the_errno_and_leave_nothing_on_either_library() {
    let Some((dev, libs)) = libs() else { return };
    let _g = lock();
    let (enomem, emfile) = (format!("NULL errno={}", libc::ENOMEM), format!("NULL errno={}", libc::EMFILE));
    for lib in &libs {
        let before = counts(&dev);
        let mut kid = Kid::spawn("memlock", lib);
        let (big, small) = (kid.expect("reg_mr"), kid.expect("small"));
        kid.expect("ready");
        let during = counts(&dev);
        eprintln!("{lib}: RLIMIT_MEMLOCK 64 KiB: 1 MiB reg_mr {big}, 4 KiB {small}");
        assert_eq!((big.as_str(), small.as_str()), (enomem.as_str(), "ok"), "{lib}");
        assert_eq!(count(&during, "mr"), count(&before, "mr") + 1, "{lib}: only the 4 KiB region: {during:?}");
        kid.kill();
        assert_back(&dev, &before, lib);

        let mut kid = Kid::spawn("nofile", lib);
        let got: Vec<String> = ["open1", "open0", "channel"].iter().map(|t| kid.expect(t)).collect();
        kid.expect("ready");
        let during = counts(&dev);
        eprintln!("{lib}: RLIMIT_NOFILE: open with one fd left {}, none left {}, channel {}", got[0], got[1], got[2]);
        assert!(got.iter().all(|g| *g == emfile), "{lib}: {got:?}");
        assert_eq!(count(&during, "ctx"), count(&before, "ctx") + 1, "{lib}: only the first context: {during:?}");
        kid.kill();
        assert_back(&dev, &before, lib);

        let mut kid = Kid::spawn("mmap", lib);
        let cq = kid.expect("cq");
        kid.expect("ready");
        let during = counts(&dev);
        eprintln!("{lib}: RLIMIT_AS: a CQ of 32767 {cq}");
        assert_eq!(cq, enomem, "{lib}");
        assert_eq!(count(&during, "cq"), count(&before, "cq") + 1, "{lib}: only the small CQ: {during:?}");
        kid.kill();
        assert_back(&dev, &before, lib);
    }
}

/// RDMA WRITEs stream (on each library) to a QP of another process,
/// which is SIGKILLed after 64 completed: the streaming QP (timeout 12,
/// retry_cnt 2) completes the oldest request with RETRY_EXC_ERR and flushes
/// the rest, each posted request once.
#[test]
fn peer_sigkilled_mid_stream_ends_in_retry_exceeded_on_either_library() {
    let Some((_dev, libs)) = libs() else { return };
    for lib in &libs {
        let mut a = Kid::spawn("rc_stream", lib);
        let qpn = a.expect("qpn");
        let mut b = Kid::spawn_with("rc_peer", lib, &[("RVERBS_FAULTS_QPN", qpn)]);
        let peer = b.expect("peer");
        use std::io::Write;
        writeln!(a.child.stdin.as_mut().unwrap(), "{peer}").unwrap();
        a.expect("streaming");
        let t = Instant::now();
        b.kill();
        let r = a.expect("result");
        let took = t.elapsed();
        eprintln!("{lib}: `status ok flushed posted once` = {r}, {took:?} after the kill");
        let w: Vec<&str> = r.split_whitespace().collect();
        assert_eq!((w[0], w[4]), ("12", "true"), "{lib}: RETRY_EXC_ERR first, each request once: {r}");
        let (ok, flushed, posted): (u64, u64, u64) =
            (w[1].parse().unwrap(), w[2].parse().unwrap(), w[3].parse().unwrap());
        assert_eq!(ok + 1 + flushed, posted, "{lib}: the rest flushed: {r}");
        // Computed: 4.096 µs · 2^12 · (2 + 1) = 50 ms; rxe's timer counts
        // jiffies and a TCG guest runs timers late, so this bound is a hang
        // detector (timeout 0 would retry forever), not a performance limit.
        assert!(took < Duration::from_secs(30), "{lib}: {took:?}");
    }
}

/// Device removal through the C library (rverbs' and rdma-core's): rxe
/// cannot disassociate a context, so `rdma link delete` waits while a
/// process holds the device. A child holds a context, a PD, an MR, an
/// armed CQ on a channel, an SRQ, a connected RC QP and an AH; the delete
/// still waits a second later; once the child has destroyed them all and
/// closed the device (it stays alive), the delete completes: the library
/// keeps no fd, mapping or kernel object. The device re-added with the same
/// name is listed and opened again by the same process.
#[test]
fn link_delete_completes_once_the_objects_are_destroyed_on_either_library() {
    let Some((dev, libs)) = libs() else { return };
    let netdev = rverbs::device_by_name(&dev).unwrap().netdev().expect("rxe has a netdev").to_owned();
    let _g = lock();
    for lib in &libs {
        let mut kid = Kid::spawn("release", lib);
        kid.expect("holding");
        let mut del = Command::new("/usr/bin/rdma").args(["link", "delete", &dev]).spawn().unwrap();
        std::thread::sleep(Duration::from_secs(1));
        assert!(del.try_wait().unwrap().is_none(), "{lib}: the delete returned while the child held objects");
        use std::io::Write;
        let stdin = kid.child.stdin.as_mut().unwrap();
        writeln!(stdin, "release").unwrap();
        let released = kid.expect("released");
        assert_eq!(released, "[0, 0, 0, 0, 0, 0, 0, 0]", "{lib}: every destroy succeeded");
        // A hang detector, not a time limit.
        let start = Instant::now();
        let status = loop {
            if let Some(s) = del.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > REPORT {
                let _ = Command::new("/usr/bin/rdma")
                    .args(["link", "add", &dev, "type", "rxe", "netdev", &netdev])
                    .status();
                panic!("{lib}: rdma link delete still waits after the child released everything");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{lib}: rdma link delete: {status}");
        let add = Command::new("/usr/bin/rdma").args(["link", "add", &dev, "type", "rxe", "netdev", &netdev]).status();
        assert!(add.unwrap().success(), "rdma link add");
        // The port comes up and its GIDs come back before the child looks.
        let start = Instant::now();
        while !std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/ports/1/state"))
            .unwrap_or_default()
            .contains("ACTIVE")
        {
            assert!(start.elapsed() < REPORT, "{dev} did not come back");
            std::thread::sleep(Duration::from_millis(100));
        }
        writeln!(kid.child.stdin.as_mut().unwrap(), "reopen").unwrap();
        assert_eq!(kid.expect("reopened"), "ok", "{lib}: the re-added device opens in the same process");
        eprintln!("{lib}: the delete waited for the objects, then completed; the re-added device opened");
    }
}
