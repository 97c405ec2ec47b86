//! Faults on the real kernel (VM tier, issue 32 item 2), through rverbs'
//! `libibverbs.so.1` and, side by side, rdma-core's: a process SIGKILLed
//! while it holds objects of every kind the library makes leaks nothing;
//! too small an `RLIMIT_MEMLOCK`, an exhausted `RLIMIT_NOFILE` and an mmap
//! that `RLIMIT_AS` refuses fail with the errno rdma-core gives and leave no
//! object in the kernel; an RC peer SIGKILLed mid-stream ends the stream in
//! RETRY_EXC_ERR; `rdma link delete` completes once the objects are
//! destroyed; the netdev taken down and up gives PORT_ERR then PORT_ACTIVE
//! and a new connection works; a CM peer SIGKILLed gives the survivor
//! DISCONNECTED (Debian's librdmacm on the library under test); a QP moved
//! to ERR under a running poster completes each accepted send once (the
//! receives posted in ERR are rxe's case, as on rdma-core's library); a CQ
//! overrun gives IBV_EVENT_CQ_ERR naming the CQ.
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
    get_async_event: unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int,
    ack_async_event: unsafe extern "C" fn(*mut ibv_async_event),
}

type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
type PostRecv = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;

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
            get_async_event: sym(h, "ibv_get_async_event"),
            ack_async_event: sym(h, "ibv_ack_async_event"),
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

/// The test device (`RVERBS_TEST_DEVICE`, else the first) in the library's
/// list of `n`.
///
/// # Safety
/// `list` is the library's device list of `n` entries.
unsafe fn test_device_of(lib: &Lib, list: *mut *mut ibv_device, n: c_int) -> *mut ibv_device {
    let want = std::env::var("RVERBS_TEST_DEVICE").ok().filter(|w| !w.is_empty());
    // SAFETY: the caller's contract: `n` live entries.
    unsafe {
        let Some(want) = want else { return *list };
        (0..n as usize)
            .map(|i| *list.add(i))
            .find(|&d| std::ffi::CStr::from_ptr((lib.get_device_name)(d)).to_str() == Ok(want.as_str()))
            .unwrap_or_else(|| panic!("RVERBS_TEST_DEVICE={want} is not in the library's list"))
    }
}

/// Whether `dev` is an iWARP device (`IBV_TRANSPORT_IWARP`, 1): its QPs
/// connect through the CM only and it has no address handles.
///
/// # Safety
/// `dev` is a live device of the library.
unsafe fn iwarp(dev: *mut ibv_device) -> bool {
    // SAFETY: the caller's contract.
    unsafe { (*dev).transport_type == 1 }
}

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
        let dev = test_device_of(&lib, list, n);
        match mode.as_str() {
            "hold" => hold(&lib, dev),
            "memlock" => memlock(&lib, dev),
            "nofile" => nofile(&lib, dev),
            "mmap" => mmap(&lib, dev),
            "rc_peer" => rc_peer(&lib, dev),
            "rc_stream" => rc_stream(&lib, dev),
            "release" => release(&lib, list),
            "netdev" => netdev(&lib, dev),
            "overrun" => overrun(&lib, dev),
            "err_race" => err_race(&lib, dev),
            "cm_server" => cm_server(&lib),
            "cm_client" => cm_client(&lib),
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
        // iWARP: no hand-connected QP (the iw_cm connects), no AH.
        if !iwarp(dev) {
            let a = connect(lib, ctx, qp, (*qp).qp_num, 14, 7);
            let mut ah_attr = a.ah_attr;
            let ah = (lib.create_ah)(pd, &mut ah_attr);
            assert!(!ah.is_null(), "create_ah errno {}", errno());
        }
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
        let mut n = 0;
        while !(*list.add(n)).is_null() {
            n += 1;
        }
        let dev = test_device_of(lib, list, n as c_int);
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
        // iWARP: no hand-connected QP (the iw_cm connects), no AH.
        let ah = if iwarp(dev) {
            core::ptr::null_mut()
        } else {
            let a = connect(lib, ctx, qp, (*qp).qp_num, 14, 7);
            let mut ah_attr = a.ah_attr;
            let ah = (lib.create_ah)(pd, &mut ah_attr);
            assert!(!ah.is_null(), "create_ah errno {}", errno());
            ah
        };
        println!("\n@@holding");
        assert_eq!(wait_for_line(), "release");
        let r = [
            if ah.is_null() { 0 } else { (lib.destroy_ah)(ah) },
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

// ---------------------------------------------------------------------------
// Issue 32's last faults through the C library: the netdev flapped, a CQ
// overrun, a QP moved to ERR under a poster, the CM peer SIGKILLed.

/// Whether `fd` becomes readable within `ms` (a hang detector's wait).
fn readable(fd: c_int, ms: c_int) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// The next async event of `ctx` (`ibv_get_async_event`, then
/// `ibv_ack_async_event`) within `ms`: its type and element, or `None`.
unsafe fn next_event(lib: &Lib, ctx: *mut ibv_context, ms: c_int) -> Option<(u32, *mut c_void)> {
    // SAFETY: the caller's contract: `ctx` is a live context of `lib`.
    unsafe {
        if !readable((*ctx).async_fd, ms) {
            return None;
        }
        let mut ev: ibv_async_event = core::mem::zeroed();
        assert_eq!((lib.get_async_event)(ctx, &mut ev), 0, "ibv_get_async_event: errno {}", errno());
        let got = (ev.event_type, ev.element);
        (lib.ack_async_event)(&mut ev);
        Some(got)
    }
}

/// An RC QP of `pd` completing on `send` and `recv`.
unsafe fn qp_on(
    lib: &Lib,
    pd: *mut ibv_pd,
    send: *mut ibv_cq,
    recv: *mut ibv_cq,
    max_send: u32,
    max_recv: u32,
) -> *mut ibv_qp {
    let mut qa = ibv_qp_init_attr {
        qp_context: core::ptr::null_mut(),
        send_cq: send,
        recv_cq: recv,
        srq: core::ptr::null_mut(),
        cap: ibv_qp_cap {
            max_send_wr: max_send,
            max_recv_wr: max_recv,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: 2,
        sq_sig_all: 0,
    };
    // SAFETY: the caller's contract: `pd` and the CQs are live objects of `lib`.
    let qp = unsafe { (lib.create_qp)(pd, &mut qa) };
    assert!(!qp.is_null(), "ibv_create_qp: errno {}", errno());
    qp
}

/// Up to `n` completions of `cq` (`ibv_poll_cq`), polling for `within` at most.
unsafe fn poll_for(cq: *mut ibv_cq, n: usize, within: Duration) -> Vec<(u64, u32)> {
    // SAFETY: the caller's contract: `cq` is live; its context's op slot
    // holds the library's `poll_cq`.
    unsafe {
        let poll = core::mem::transmute::<Slot, PollCq>((*(*cq).context).ops.poll_cq);
        let mut wc: [ibv_wc; 16] = core::mem::zeroed();
        let mut got = Vec::new();
        let start = Instant::now();
        while got.len() < n && start.elapsed() < within {
            let k = poll(cq, 16, wc.as_mut_ptr());
            assert!(k >= 0, "ibv_poll_cq: {k}");
            got.extend(wc[..k as usize].iter().map(|w| (w.wr_id, w.status)));
            if k == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        got
    }
}

/// The completions of `cq` once `n` came (`within` at most), and those
/// one more poll right after gives: completions the test expects no more
/// of (a second flush of one receive, an overrun CQ's extras) come from
/// work the kernel has done by then (it flushes a ring in one go; the
/// overrun's events came first), so they show without waiting `within`
/// for ones that never come.
unsafe fn poll_then_once(cq: *mut ibv_cq, n: usize, within: Duration) -> Vec<(u64, u32)> {
    // SAFETY: the caller's contract: `cq` is live; its context's op slot
    // holds the library's `poll_cq`, which fills at most 16 entries.
    unsafe {
        let mut got = poll_for(cq, n, within);
        if got.len() >= n {
            let poll = core::mem::transmute::<Slot, PollCq>((*(*cq).context).ops.poll_cq);
            let mut wc: [ibv_wc; 16] = core::mem::zeroed();
            let k = poll(cq, 16, wc.as_mut_ptr());
            assert!(k >= 0, "ibv_poll_cq: {k}");
            got.extend(wc[..k as usize].iter().map(|w| (w.wr_id, w.status)));
        }
        got
    }
}

/// A fresh PD, 8 KiB region, two CQs and two RC QPs of `ctx` connected to
/// each other; one signaled RDMA WRITE (`wr_id` 7): its completions.
unsafe fn one_write(lib: &Lib, ctx: *mut ibv_context) -> String {
    // SAFETY: the caller's contract; the buffer is leaked.
    unsafe {
        let pd = (lib.alloc_pd)(ctx);
        let buf = Vec::leak(vec![0u8; 8192]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        let (ca, cb) = (
            (lib.create_cq)(ctx, 8, core::ptr::null_mut(), core::ptr::null_mut(), 0),
            (lib.create_cq)(ctx, 8, core::ptr::null_mut(), core::ptr::null_mut(), 0),
        );
        assert!(!pd.is_null() && !mr.is_null() && !ca.is_null() && !cb.is_null(), "errno {}", errno());
        let (a, b) = (qp_on(lib, pd, ca, ca, 4, 4), qp_on(lib, pd, cb, cb, 4, 4));
        connect(lib, ctx, a, (*b).qp_num, 14, 7);
        connect(lib, ctx, b, (*a).qp_num, 14, 7);
        let mut sge = ibv_sge { addr: (*mr).addr as u64, length: 64, lkey: (*mr).lkey };
        let mut wr: ibv_send_wr = core::mem::zeroed();
        wr.wr_id = 7;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.send_flags = 2; // IBV_SEND_SIGNALED; opcode 0 is IBV_WR_RDMA_WRITE
        wr.wr = [(*mr).addr as u64 + 4096, (*mr).rkey as u64, 0, 0];
        let mut bad = core::ptr::null_mut();
        let rc = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send)(a, &mut wr, &mut bad);
        if rc != 0 {
            return format!("post_send {rc}");
        }
        format!("{:?}", poll_for(ca, 1, REPORT))
    }
}

/// Opens the device (`@@opened`) and reports each async event as `@@event
/// TYPE ELEMENT` until PORT_ACTIVE; once GID index 1 is back, an RDMA WRITE
/// on fresh QPs of the same context: `@@write COMPLETIONS`.
unsafe fn netdev(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract.
    unsafe {
        let ctx = (lib.open_device)(dev);
        assert!(!ctx.is_null(), "ibv_open_device: errno {}", errno());
        println!("\n@@opened");
        loop {
            let Some((t, el)) = next_event(lib, ctx, 45_000) else {
                println!("\n@@event none");
                return;
            };
            // The element is the `port_num` member of the union for port events.
            println!("\n@@event {t} {}", el as usize as u32);
            if t == 9 {
                break; // IBV_EVENT_PORT_ACTIVE
            }
        }
        let start = Instant::now();
        let mut gid = [0u8; 16];
        while (lib.query_gid)(ctx, 1, 1, &mut gid) != 0 || gid == [0; 16] {
            if start.elapsed() > Duration::from_secs(45) {
                println!("\n@@write GID 1 did not come back");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!("\n@@write {}", one_write(lib, ctx));
    }
}

/// Four more signaled RDMA WRITEs than a CQ holds (`cqe` from
/// `ibv_create_cq(2)`), none polled: the async events that follow
/// (`@@overrun CQE POST_RC EVENTS ALL_CQ_ERR ALL_NAME_THE_CQ`), then what
/// the CQ gives (`@@polled N IDS_0_TO_CQE`).
unsafe fn overrun(lib: &Lib, dev: *mut ibv_device) {
    // SAFETY: the caller's contract; the buffer is leaked; `wrs` is not
    // moved while the list that links it is posted.
    unsafe {
        let ctx = (lib.open_device)(dev);
        let pd = (lib.alloc_pd)(ctx);
        let small = (lib.create_cq)(ctx, 2, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        let other = (lib.create_cq)(ctx, 16, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        assert!(!pd.is_null() && !small.is_null() && !other.is_null(), "errno {}", errno());
        let (n, extra) = ((*small).cqe as usize, 4);
        let a = qp_on(lib, pd, small, small, (n + extra) as u32, 1);
        let b = qp_on(lib, pd, other, other, 4, 1);
        connect(lib, ctx, a, (*b).qp_num, 14, 7);
        connect(lib, ctx, b, (*a).qp_num, 14, 7);
        let buf = Vec::leak(vec![0u8; 4096]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let mut sge = ibv_sge { addr: (*mr).addr as u64, length: 8, lkey: (*mr).lkey };
        let mut wrs: Vec<ibv_send_wr> = (0..n + extra)
            .map(|i| {
                let mut wr: ibv_send_wr = core::mem::zeroed();
                wr.wr_id = i as u64;
                wr.sg_list = &mut sge;
                wr.num_sge = 1;
                wr.send_flags = 2;
                wr.wr = [(*mr).addr as u64 + 1024, (*mr).rkey as u64, 0, 0];
                wr
            })
            .collect();
        for i in 1..wrs.len() {
            wrs[i - 1].next = &mut wrs[i];
        }
        let mut bad = core::ptr::null_mut();
        let rc = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send)(a, wrs.as_mut_ptr(), &mut bad);
        let mut events = Vec::new();
        while let Some(e) = next_event(lib, ctx, if events.is_empty() { 10_000 } else { 1_000 }) {
            events.push(e);
        }
        let all_cq_err = events.iter().all(|e| e.0 == 0); // IBV_EVENT_CQ_ERR
        let all_named = events.iter().all(|e| e.1 == small.cast());
        println!("\n@@overrun {n} {rc} {} {all_cq_err} {all_named}", events.len());
        let wcs = poll_then_once(small, n, Duration::from_secs(2));
        let ids_ok = wcs.iter().copied().eq((0..n as u64).map(|i| (i, 0)));
        println!("\n@@polled {} {ids_ok}", wcs.len());
    }
}

/// The receive `wr_id`s are this plus their index; the sends' are the index.
const RECV: u64 = 1 << 32;

/// How many sends, and receives, the poster keeps outstanding at most.
const OUTSTANDING: usize = 48;

/// One thread posts signaled RDMA WRITEs and receives on RC QP `a`
/// ([`OUTSTANDING`] of each at most, polling the CQ between posts) while another
/// moves `a` to ERR once 64 have completed; 200 rounds after that, the
/// poster stops and drains the CQ (until everything accepted completed,
/// or nothing came for 1 s), posts one more send and drains again (5 s).
/// `@@result key=value...`: the counts, and the
/// return codes the posts gave once the QP was in ERR.
unsafe fn err_race(lib: &Lib, dev: *mut ibv_device) {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    // SAFETY: the caller's contract; the buffer is leaked; the other thread
    // only calls `ibv_modify_qp` on `a`, which the verbs allow concurrently
    // with posting and polling.
    unsafe {
        let ctx = (lib.open_device)(dev);
        let pd = (lib.alloc_pd)(ctx);
        let cq = (lib.create_cq)(ctx, 256, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        let cq_b = (lib.create_cq)(ctx, 16, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        assert!(!pd.is_null() && !cq.is_null() && !cq_b.is_null(), "errno {}", errno());
        let a = qp_on(lib, pd, cq, cq, 64, 64);
        let b = qp_on(lib, pd, cq_b, cq_b, 4, 4);
        connect(lib, ctx, a, (*b).qp_num, 14, 7);
        connect(lib, ctx, b, (*a).qp_num, 14, 7);
        let buf = Vec::leak(vec![0u8; 1 << 16]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!mr.is_null());
        let post = core::mem::transmute::<Slot, PostSend>((*ctx).ops.post_send);
        let post_recv = core::mem::transmute::<Slot, PostRecv>((*ctx).ops.post_recv);
        let poll = core::mem::transmute::<Slot, PollCq>((*ctx).ops.poll_cq);
        let seen = Arc::new(AtomicUsize::new(0));
        let moved = Arc::new(AtomicBool::new(false));
        let (s2, m2, modify, qp) = (seen.clone(), moved.clone(), lib.modify_qp, a as usize);
        let other = std::thread::spawn(move || {
            let start = Instant::now();
            while s2.load(Ordering::Acquire) < 64 && start.elapsed() < REPORT {
                std::hint::spin_loop();
            }
            let mut attr: ibv_qp_attr = core::mem::zeroed();
            attr.qp_state = 6; // IBV_QPS_ERR
                               // `qp` is `a`, alive until this thread is joined (the outer SAFETY).
            let rc = modify(qp as *mut ibv_qp, &mut attr, 1);
            m2.store(true, Ordering::Release);
            rc
        });
        let mut sge = ibv_sge { addr: (*mr).addr as u64, length: 64, lkey: (*mr).lkey };
        let sge_p: *mut ibv_sge = &mut sge;
        let (raddr, rkey) = ((*mr).addr as u64 + 4096, (*mr).rkey as u64);
        let write_wr = |id: u64| {
            let mut wr: ibv_send_wr = core::mem::zeroed();
            wr.wr_id = id;
            wr.sg_list = sge_p;
            wr.num_sge = 1;
            wr.send_flags = 2; // IBV_SEND_SIGNALED; opcode 0 is IBV_WR_RDMA_WRITE
            wr.wr = [raddr, rkey, 0, 0];
            wr
        };
        let mut rsge = ibv_sge { addr: (*mr).addr as u64 + 8192, length: 64, lkey: (*mr).lkey };
        // The post's return code per request, in wr_id order.
        let (mut sends, mut recvs): (Vec<c_int>, Vec<c_int>) = (Vec::new(), Vec::new());
        let (mut send_after, mut recv_after) = (BTreeSet::new(), BTreeSet::new());
        // For each receive, how many sends had been posted before it.
        let mut sends_before: Vec<usize> = Vec::new();
        let mut done: Vec<(u64, u32)> = Vec::new();
        let mut wc: [ibv_wc; 32] = core::mem::zeroed();
        let accepted = |v: &Vec<c_int>| v.iter().filter(|&&r| r == 0).count();
        let completed = |d: &Vec<(u64, u32)>, recv: bool| d.iter().filter(|w| (w.0 >= RECV) == recv).count();
        let (start, mut after) = (Instant::now(), 0);
        while after < 200 && start.elapsed() < Duration::from_secs(120) {
            let in_err = moved.load(Ordering::Acquire);
            after += in_err as u32;
            if accepted(&sends) - completed(&done, false) < OUTSTANDING {
                let mut wr = write_wr(sends.len() as u64);
                let mut bad = core::ptr::null_mut();
                let rc = post(a, &mut wr, &mut bad);
                sends.push(rc);
                if in_err {
                    send_after.insert(rc);
                }
            }
            if accepted(&recvs) - completed(&done, true) < OUTSTANDING {
                let mut wr = ibv_recv_wr {
                    wr_id: RECV + recvs.len() as u64,
                    next: core::ptr::null_mut(),
                    sg_list: &mut rsge,
                    num_sge: 1,
                };
                let mut bad = core::ptr::null_mut();
                let rc = post_recv(a, &mut wr, &mut bad);
                recvs.push(rc);
                sends_before.push(sends.len());
                if in_err {
                    recv_after.insert(rc);
                }
            }
            let k = poll(cq, 32, wc.as_mut_ptr());
            assert!(k >= 0, "ibv_poll_cq: {k}");
            done.extend(wc[..k as usize].iter().map(|w| (w.wr_id, w.status)));
            seen.fetch_add(k as usize, Ordering::Release);
        }
        let modify_rc = other.join().unwrap();
        // Drained once; then once more after one last send, whose doorbell
        // lets rxe flush receives posted after the previous one.
        let mut stuck = String::new();
        for last_send in [false, true] {
            if last_send {
                let mut wr = write_wr(sends.len() as u64);
                let mut bad = core::ptr::null_mut();
                let rc = post(a, &mut wr, &mut bad);
                sends.push(rc);
                send_after.insert(rc);
            }
            // Nothing for 5 s ends a drain where receives may never
            // complete (6.1); before the last send, whose doorbell flushes
            // them on 6.12, 1 s: that drain only reports which are still
            // out (`stuck`), and what comes later the second one counts.
            let quiet = Duration::from_secs(if last_send { 5 } else { 1 });
            let (want, mut last) = (accepted(&sends) + accepted(&recvs), Instant::now());
            while done.len() < want && last.elapsed() < quiet {
                let k = poll(cq, 32, wc.as_mut_ptr());
                assert!(k >= 0, "ibv_poll_cq: {k}");
                if k > 0 {
                    last = Instant::now();
                }
                done.extend(wc[..k as usize].iter().map(|w| (w.wr_id, w.status)));
            }
            if !last_send {
                // Each receive not completed yet as `INDEX:SENDS_POSTED_AFTER_IT`.
                let ids: BTreeSet<u64> = done.iter().map(|w| w.0).collect();
                stuck = (0..recvs.len())
                    .filter(|&i| recvs[i] == 0 && !ids.contains(&(RECV + i as u64)))
                    .map(|i| format!("{i}:{}", sends.len() - sends_before[i]))
                    .collect::<Vec<_>>()
                    .join(",");
            }
        }
        let mut per_id: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for &(id, st) in &done {
            per_id.entry(id).or_default().push(st);
        }
        let rc_of = |id: u64| if id >= RECV { recvs.get((id - RECV) as usize) } else { sends.get(id as usize) };
        let dup = per_id.values().filter(|v| v.len() > 1).count();
        let ghost = per_id.keys().filter(|&&id| rc_of(id) != Some(&0)).count();
        let lost_ids = |v: &Vec<c_int>, base: u64| {
            (0..v.len()).filter(|&i| v[i] == 0 && !per_id.contains_key(&(base + i as u64))).collect::<Vec<_>>()
        };
        let lost = |v: &Vec<c_int>, base: u64| lost_ids(v, base).len();
        // Each lost receive as `INDEX:SENDS_POSTED_AFTER_IT`.
        let lost_recv_at: Vec<String> =
            lost_ids(&recvs, RECV).iter().map(|&i| format!("{i}:{}", sends.len() - sends_before[i])).collect();
        let ok_ids: Vec<u64> = done.iter().filter(|w| w.1 == 0).map(|w| w.0).collect();
        let ok_prefix = ok_ids.iter().copied().eq(0..ok_ids.len() as u64);
        let count = |st: u32| done.iter().filter(|w| w.1 == st).count();
        println!(
            "\n@@result modify={modify_rc} sends={} sends_ok={} recvs={} recvs_ok={} success={} flushed={} other={} \
             dup={dup} ghost={ghost} lost_sends={} lost_recvs={} success_prefix={ok_prefix} \
             send_after_err={} recv_after_err={} lost_recv_at={} stuck_before_last_send={stuck}",
            sends.len(),
            accepted(&sends),
            recvs.len(),
            accepted(&recvs),
            count(0),
            count(5),
            done.len() - count(0) - count(5),
            lost(&sends, 0),
            lost(&recvs, RECV),
            joined(&send_after),
            joined(&recv_after),
            lost_recv_at.join(","),
        );
    }
}

/// `1,22`: a set of return codes on one word.
fn joined(s: &std::collections::BTreeSet<c_int>) -> String {
    s.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")
}

/// `struct rdma_conn_param` (librdmacm 44, 24 bytes).
#[repr(C)]
struct ConnParam {
    private_data: *const c_void,
    private_data_len: u8,
    responder_resources: u8,
    initiator_depth: u8,
    flow_control: u8,
    retry_count: u8,
    rnr_retry_count: u8,
    srq: u8,
    qp_num: u32,
}

/// The head of `struct rdma_cm_event`: `id`, `listen_id`, `event`, `status`.
#[repr(C)]
struct CmEvent {
    id: *mut c_void,
    listen_id: *mut c_void,
    event: u32,
    status: c_int,
}

/// The librdmacm functions the CM children call, from Debian's
/// `librdmacm.so.1` loaded after the library under test, so that it runs on
/// that `libibverbs.so.1` (same soname: the loader reuses the loaded one).
struct Cm {
    create_event_channel: unsafe extern "C" fn() -> *mut c_int,
    create_id: unsafe extern "C" fn(*mut c_int, *mut *mut c_void, *mut c_void, c_int) -> c_int,
    bind_addr: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr) -> c_int,
    listen: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    get_cm_event: unsafe extern "C" fn(*mut c_int, *mut *mut CmEvent) -> c_int,
    ack_cm_event: unsafe extern "C" fn(*mut CmEvent) -> c_int,
    resolve_addr: unsafe extern "C" fn(*mut c_void, *mut libc::sockaddr, *mut libc::sockaddr, c_int) -> c_int,
    resolve_route: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    create_qp: unsafe extern "C" fn(*mut c_void, *mut ibv_pd, *mut ibv_qp_init_attr) -> c_int,
    connect: unsafe extern "C" fn(*mut c_void, *mut ConnParam) -> c_int,
    accept: unsafe extern "C" fn(*mut c_void, *mut ConnParam) -> c_int,
    disconnect: unsafe extern "C" fn(*mut c_void) -> c_int,
}

const LIBRDMACM: &str = "librdmacm.so.1";

/// librdmacm, and whether its `ibv_alloc_pd` is `lib`'s (`@@ibverbs same`).
fn load_cm(lib: &Lib) -> Cm {
    let c = CString::new(LIBRDMACM).unwrap();
    // SAFETY: a NUL-terminated name.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {LIBRDMACM}");
    // SAFETY: each type is that name's C prototype in rdma_cma.h 44 (ids
    // and channels as opaque pointers; a channel starts with its fd).
    unsafe {
        let theirs: *mut c_void = sym(h, "ibv_alloc_pd");
        let same = theirs == lib.alloc_pd as *mut c_void;
        println!("\n@@ibverbs {}", if same { "same" } else { "other" });
        Cm {
            create_event_channel: sym(h, "rdma_create_event_channel"),
            create_id: sym(h, "rdma_create_id"),
            bind_addr: sym(h, "rdma_bind_addr"),
            listen: sym(h, "rdma_listen"),
            get_cm_event: sym(h, "rdma_get_cm_event"),
            ack_cm_event: sym(h, "rdma_ack_cm_event"),
            resolve_addr: sym(h, "rdma_resolve_addr"),
            resolve_route: sym(h, "rdma_resolve_route"),
            create_qp: sym(h, "rdma_create_qp"),
            connect: sym(h, "rdma_connect"),
            accept: sym(h, "rdma_accept"),
            disconnect: sym(h, "rdma_disconnect"),
        }
    }
}

/// The test device's address (its netdev's; 192.168.77.1 for rxe0 in the
/// VM), at `RVERBS_FAULTS_PORT`.
fn cm_addr() -> libc::sockaddr_in {
    let port: u16 = std::env::var("RVERBS_FAULTS_PORT").unwrap().parse().unwrap();
    let dev = test_device().expect("the test device");
    let ip: std::net::Ipv4Addr = device_ip(&dev)
        .unwrap_or_else(|| panic!("{}'s netdev has no IPv4 address", dev.name()))
        .parse()
        .expect("an IPv4 address");
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip.octets()) },
        sin_zero: [0; 8],
    }
}

/// The next CM event on `ch` within `ms` (`rdma_get_cm_event`, then
/// `rdma_ack_cm_event`): type, status and id; `None` if none came.
unsafe fn cm_event(cm: &Cm, ch: *mut c_int, ms: c_int) -> Option<(u32, c_int, *mut c_void)> {
    // SAFETY: the caller's contract: `ch` is a live channel, whose first
    // member is its fd.
    unsafe {
        if !readable(*ch, ms) {
            return None;
        }
        let mut ev = core::ptr::null_mut();
        assert_eq!((cm.get_cm_event)(ch, &mut ev), 0, "rdma_get_cm_event: errno {}", errno());
        let got = ((*ev).event, (*ev).status, (*ev).id);
        (cm.ack_cm_event)(ev);
        Some(got)
    }
}

/// A PD, a 16-entry CQ and an RC QP (`rdma_create_qp`) on `id`'s context
/// (`id->verbs`, its first member); a 4 KiB region.
unsafe fn cm_qp(lib: &Lib, cm: &Cm, id: *mut c_void) -> (*mut ibv_qp, *mut ibv_cq, *mut ibv_mr) {
    // SAFETY: the caller's contract: `id` is a live, resolved id; `qp` is
    // its fourth member; the buffer is leaked.
    unsafe {
        let ctx = *id.cast::<*mut ibv_context>();
        let pd = (lib.alloc_pd)(ctx);
        let cq = (lib.create_cq)(ctx, 16, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        let buf = Vec::leak(vec![0u8; 4096]);
        let mr = (lib.reg_mr)(pd, buf.as_mut_ptr().cast(), buf.len(), ACCESS_ALL);
        assert!(!pd.is_null() && !cq.is_null() && !mr.is_null(), "errno {}", errno());
        let mut qa = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: 2,
            sq_sig_all: 0,
        };
        assert_eq!((cm.create_qp)(id, pd, &mut qa), 0, "rdma_create_qp: errno {}", errno());
        (*id.cast::<*mut ibv_qp>().add(3), cq, mr)
    }
}

fn conn_param() -> ConnParam {
    ConnParam {
        private_data: core::ptr::null(),
        private_data_len: 0,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    }
}

/// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the last event of a disconnected IB/RoCE id.
const TIMEWAIT_EXIT: u32 = 15;

/// The survivor: listens (`@@listening`), accepts with one receive posted
/// (`@@established`), then reports the next event after the peer is
/// killed (`@@disconnected TYPE STATUS`), calls `rdma_disconnect` as an
/// application does (`@@after DISCONNECT_RC [LATER EVENTS]`: on IB/RoCE up
/// to TIMEWAIT_EXIT, the id's last event; on iWARP those already queued,
/// the iw_cm having no timewait and no event after DISCONNECTED) and polls
/// the receive (`@@flushed COMPLETIONS`).
unsafe fn cm_server(lib: &Lib) {
    // SAFETY: the caller's contract; each pointer comes from librdmacm.
    unsafe {
        let cm = load_cm(lib);
        let ch = (cm.create_event_channel)();
        let mut listen = core::ptr::null_mut();
        assert!(!ch.is_null() && (cm.create_id)(ch, &mut listen, core::ptr::null_mut(), 0x0106) == 0);
        let mut sa = cm_addr();
        assert_eq!((cm.bind_addr)(listen, (&mut sa as *mut libc::sockaddr_in).cast()), 0, "bind: errno {}", errno());
        assert_eq!((cm.listen)(listen, 1), 0, "rdma_listen: errno {}", errno());
        println!("\n@@listening");
        let (t, st, id) = cm_event(&cm, ch, 45_000).expect("CONNECT_REQUEST");
        assert_eq!((t, st), (4, 0), "CONNECT_REQUEST");
        let (qp, cq, mr) = cm_qp(lib, &cm, id);
        let mut sge = ibv_sge { addr: (*mr).addr as u64, length: 64, lkey: (*mr).lkey };
        let mut wr = ibv_recv_wr { wr_id: 5, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad = core::ptr::null_mut();
        let post_recv = core::mem::transmute::<Slot, PostRecv>((*(*qp).context).ops.post_recv);
        assert_eq!(post_recv(qp, &mut wr, &mut bad), 0, "ibv_post_recv");
        assert_eq!((cm.accept)(id, &mut conn_param()), 0, "rdma_accept: errno {}", errno());
        let ev = cm_event(&cm, ch, 45_000).expect("ESTABLISHED");
        assert_eq!((ev.0, ev.1), (9, 0), "ESTABLISHED");
        println!("\n@@established");
        match cm_event(&cm, ch, 45_000) {
            Some((t, st, _)) => println!("\n@@disconnected {t} {st}"),
            None => {
                println!("\n@@disconnected none");
                return;
            }
        }
        let rc = (cm.disconnect)(id);
        let rc = if rc == 0 { 0 } else { errno() };
        let start = Instant::now();
        let mut later = Vec::new();
        // The wait ends at TIMEWAIT_EXIT, not after 20 s of silence (40 s a
        // library and tier, most of c_faults' time); 20 s is a hang guard.
        let wait = if iwarp((*(*qp).context).device) { 0 } else { 20_000 };
        while let Some((t, st, _)) = cm_event(&cm, ch, wait) {
            later.push(format!("{t}/{st}@{}ms", start.elapsed().as_millis()));
            if t == TIMEWAIT_EXIT {
                break;
            }
        }
        println!("\n@@after {rc} [{}]", later.join(","));
        println!("\n@@flushed {:?}", poll_then_once(cq, 1, Duration::from_secs(5)));
    }
}

/// The peer that is killed: resolves rxe0's address and route, connects an
/// RC QP (`@@connected`).
unsafe fn cm_client(lib: &Lib) {
    // SAFETY: the caller's contract; each pointer comes from librdmacm.
    unsafe {
        let cm = load_cm(lib);
        let ch = (cm.create_event_channel)();
        let mut id = core::ptr::null_mut();
        assert!(!ch.is_null() && (cm.create_id)(ch, &mut id, core::ptr::null_mut(), 0x0106) == 0);
        let mut sa = cm_addr();
        let dst = (&mut sa as *mut libc::sockaddr_in).cast();
        assert_eq!((cm.resolve_addr)(id, core::ptr::null_mut(), dst, 5000), 0, "rdma_resolve_addr: errno {}", errno());
        assert_eq!(cm_event(&cm, ch, 45_000).map(|e| (e.0, e.1)), Some((0, 0)), "ADDR_RESOLVED");
        assert_eq!((cm.resolve_route)(id, 5000), 0, "rdma_resolve_route: errno {}", errno());
        assert_eq!(cm_event(&cm, ch, 45_000).map(|e| (e.0, e.1)), Some((2, 0)), "ROUTE_RESOLVED");
        cm_qp(lib, &cm, id);
        assert_eq!((cm.connect)(id, &mut conn_param()), 0, "rdma_connect: errno {}", errno());
        assert_eq!(cm_event(&cm, ch, 45_000).map(|e| (e.0, e.1)), Some((9, 0)), "ESTABLISHED");
        println!("\n@@connected");
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
    let dev = test_device();
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
    if hand_connected_na() {
        return;
    }
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
    let d = rverbs::device_by_name(&dev).unwrap();
    let netdev = netdev_of(&d).unwrap_or_else(|| panic!("{dev} sits on no netdev"));
    let kind = if is_iwarp(&d) { "siw" } else { "rxe" };
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
                let _ =
                    Command::new("/usr/bin/rdma").args(["link", "add", &dev, "type", kind, "netdev", &netdev]).status();
                panic!("{lib}: rdma link delete still waits after the child released everything");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{lib}: rdma link delete: {status}");
        let add = Command::new("/usr/bin/rdma").args(["link", "add", &dev, "type", kind, "netdev", &netdev]).status();
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

/// Brings the netdev back up when dropped (also when a check fails).
struct Up<'a>(&'a str);

impl Drop for Up<'_> {
    fn drop(&mut self) {
        let _ = Command::new("/usr/bin/ip").args(["link", "set", self.0, "up"]).status();
    }
}

fn ip_link(netdev: &str, up: &str) {
    let out = Command::new("/usr/bin/ip").args(["link", "set", netdev, up]).output().expect("/usr/bin/ip");
    assert!(out.status.success(), "ip link set {netdev} {up}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The netdev under rxe taken down and up, a context of each library open
/// throughout: `ibv_get_async_event` gives IBV_EVENT_PORT_ERR on port 1
/// first, then IBV_EVENT_PORT_ACTIVE on port 1 (IBV_EVENT_GID_CHANGE may
/// come between); then two fresh RC QPs of the same context connect and an
/// RDMA WRITE completes.
#[test]
fn netdev_down_and_up_gives_port_err_then_port_active_on_either_library() {
    if hand_connected_na() {
        return;
    }
    let Some((dev, libs)) = libs() else { return };
    let netdev = netdev_of(&rverbs::device_by_name(&dev).unwrap()).expect("the device sits on a netdev");
    let _g = lock();
    for lib in &libs {
        let mut kid = Kid::spawn("netdev", lib);
        kid.expect("opened");
        let up = Up(&netdev);
        let t = Instant::now();
        ip_link(&netdev, "down");
        let first = kid.expect("event");
        let to_err = t.elapsed();
        let t = Instant::now();
        drop(up);
        assert_eq!(first, "10 1", "{lib}: IBV_EVENT_PORT_ERR on port 1 first");
        let mut between = Vec::new();
        loop {
            let e = kid.expect("event");
            if e == "9 1" {
                break;
            }
            assert!(e.starts_with("18 "), "{lib}: only IBV_EVENT_GID_CHANGE before PORT_ACTIVE: {e}");
            between.push(e);
        }
        let to_active = t.elapsed();
        assert_eq!(kid.expect("write"), "[(7, 0)]", "{lib}: the RDMA WRITE on new QPs after the flap");
        eprintln!(
            "{lib}: PORT_ERR {to_err:?} after `ip link set down`, PORT_ACTIVE {to_active:?} after up \
             ({} GID_CHANGE between); a new RC connection moved data",
            between.len()
        );
    }
}

/// A CM connection (Debian's librdmacm on each library) whose peer process
/// is SIGKILLed: the kernel destroys the peer's id, which sends a DREQ; the
/// survivor's `rdma_get_cm_event` gives RDMA_CM_EVENT_DISCONNECTED (status
/// 0), its `rdma_disconnect` moves the QP to ERR and the posted receive
/// comes back flushed. What follows (TIMEWAIT_EXIT) is reported.
#[test]
fn cm_peer_sigkilled_gives_disconnected_on_either_library() {
    let Some((_dev, libs)) = libs() else { return };
    let rdmacm = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]
        .iter()
        .any(|d| std::path::Path::new(d).join(LIBRDMACM).exists());
    if !need(rdmacm, "Debian's librdmacm.so.1 is not installed (librdmacm1)") {
        return;
    }
    for (i, lib) in libs.iter().enumerate() {
        let port = [("RVERBS_FAULTS_PORT", (20431 + i).to_string())];
        let mut server = Kid::spawn_with("cm_server", lib, &port);
        assert_eq!(server.expect("ibverbs"), "same", "{lib}: librdmacm runs on the library under test");
        server.expect("listening");
        let mut client = Kid::spawn_with("cm_client", lib, &port);
        assert_eq!(client.expect("ibverbs"), "same", "{lib}: librdmacm runs on the library under test");
        client.expect("connected");
        server.expect("established");
        let t = Instant::now();
        client.kill();
        let d = server.expect("disconnected");
        let took = t.elapsed();
        assert_eq!(d, "10 0", "{lib}: RDMA_CM_EVENT_DISCONNECTED, status 0, after the peer was killed");
        let after = server.expect("after");
        let flushed = server.expect("flushed");
        assert_eq!(flushed, "[(5, 5)]", "{lib}: the posted receive flushed (IBV_WC_WR_FLUSH_ERR) once");
        eprintln!(
            "{lib}: DISCONNECTED {took:?} after the kill; rdma_disconnect errno and later events \
             (type/status@ms) {after}; receive {flushed}"
        );
    }
}

/// True (after checking that the device refuses a hand-connected RC QP)
/// when the test device is iWARP, for the tests whose children connect
/// RC QPs by hand.
fn hand_connected_na() -> bool {
    let why = "the children connect RC QPs by hand; iWARP QPs connect through the CM only";
    test_device().is_some_and(|d| not_on_iwarp(&d, why, refuses_rc_by_hand))
}

/// `key=value` words of a `@@result` line.
fn fields(line: &str) -> std::collections::BTreeMap<String, String> {
    line.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// One thread posts RDMA WRITEs and receives through `ibv_post_send` /
/// `ibv_post_recv` while another moves the QP to IBV_QPS_ERR
/// (`ibv_modify_qp`). On each library: no request completes twice, none
/// that a post refused completes, every accepted send completes (SUCCESS
/// in order, then IBV_WC_WR_FLUSH_ERR), and the posts made once the QP is
/// in ERR return what they return on rdma-core's library (0 on both
/// kernels: accepted).
///
/// Receives posted once the QP is in ERR are rxe's case (measured): 6.12
/// flushes them on the next `ibv_post_send` doorbell, so after the
/// poster's last send none is left; 6.1 drains a user QP's receive ring
/// only when the QP is moved to ERR, so on rdma-core's library exactly the
/// [`OUTSTANDING`] receives the poster refilled after that flush never
/// complete. Ours moves the QP to ERR again when a receive is posted to a
/// QP it knows is in ERR, so it loses at most the receives posted while
/// the move was in flight (none once it returned), never more than
/// rdma-core's.
#[test]
fn qp_moved_to_err_while_a_poster_runs_on_either_library() {
    if hand_connected_na() {
        return;
    }
    let Some((_dev, libs)) = libs() else { return };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let stuck_recvs = match release.trim() {
        r if r.starts_with("6.1.") => Some(OUTSTANDING as u64),
        r if r.starts_with("6.12.") => Some(0),
        _ => None,
    };
    let lines: Vec<(&String, String)> = libs
        .iter()
        .map(|lib| {
            let line = Kid::spawn("err_race", lib).expect("result");
            eprintln!("{lib} on {}: {line}", release.trim());
            (lib, line)
        })
        .collect();
    let mut outcome = Vec::new();
    for (lib, line) in &lines {
        let f = fields(line);
        let n = |k: &str| f[k].parse::<u64>().unwrap();
        assert_eq!(f["modify"], "0", "{lib}: ibv_modify_qp to ERR: {line}");
        assert_eq!((n("dup"), n("ghost"), n("other")), (0, 0, 0), "{lib}: none twice, none refused: {line}");
        assert_eq!(n("lost_sends"), 0, "{lib}: every accepted send completes: {line}");
        if let Some(want) = stuck_recvs {
            let lost = n("lost_recvs");
            if *lib == &libs[0] {
                assert!(lost <= want, "{lib}: receives posted in ERR on {release}, at most {want} lost: {line}");
            } else {
                assert_eq!(lost, want, "{lib}: receives posted in ERR on {release}: {line}");
            }
        }
        assert_eq!(f["success_prefix"], "true", "{lib}: SUCCESS in order before the flush: {line}");
        assert!(n("success") >= 64 && n("flushed") > 0, "{lib}: the stream ran, then flushed: {line}");
        outcome.push((f["send_after_err"].clone(), f["recv_after_err"].clone()));
    }
    if let [ours, rdma_core] = &outcome[..] {
        // A field is empty when that run made no such post once the QP was
        // in ERR (the race decides): compare what both runs made.
        let same = |a: &String, b: &String| a.is_empty() || b.is_empty() || a == b;
        assert!(
            same(&ours.0, &rdma_core.0) && same(&ours.1, &rdma_core.1),
            "what posts in ERR return: ours {ours:?} vs rdma-core's {rdma_core:?}"
        );
    }
}

/// More completions than a CQ holds (`ibv_create_cq(2)`, four extra
/// signaled WRITEs, none polled): `ibv_get_async_event` gives one
/// IBV_EVENT_CQ_ERR per dropped completion with `element.cq` the CQ, on
/// each library; the CQ still gives its first `cqe` completions, in order.
/// rxe on 6.1 and 6.12 drops the completions that do not fit (the
/// async_events.rs test of the same name documents it).
#[test]
fn cq_overrun_gives_cq_err_naming_the_cq_on_either_library() {
    if hand_connected_na() {
        return;
    }
    let Some((_dev, libs)) = libs() else { return };
    for lib in &libs {
        let mut kid = Kid::spawn("overrun", lib);
        let r = kid.expect("overrun");
        let polled = kid.expect("polled");
        eprintln!("{lib}: `cqe post_rc events all_cq_err all_name_the_cq` = {r}; `polled in_order` = {polled}");
        let w: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(&w[1..], ["0", "4", "true", "true"], "{lib}: four IBV_EVENT_CQ_ERR naming the CQ: {r}");
        assert_eq!(polled, format!("{} true", w[0]), "{lib}: the first cqe completions, in order");
    }
}
