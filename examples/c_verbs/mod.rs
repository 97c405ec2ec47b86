//! What the C-side scale programs share (`examples/scale_queues_c.rs`,
//! `capi/examples/scale_c.rs`): `verbs.h`'s structures (rdma-core 44
//! layouts, written out so that the programs link no verbs library of
//! their own), `libibverbs.so.1` found by `dlopen` (`LD_LIBRARY_PATH`
//! picks rverbs' C library), and the errors of the verbs they call.
//!
//! Each program uses a part of it.
#![allow(dead_code)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use std::ffi::CString;

use nix::libc;

pub type Result<T = ()> = std::result::Result<T, String>;
pub type P = *mut c_void;

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (64 bytes).
#[repr(C)]
pub struct QpInitAttr {
    pub qp_context: P,
    pub send_cq: P,
    pub recv_cq: P,
    pub srq: P,
    pub cap: QpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_srq_init_attr` (24 bytes).
#[repr(C)]
pub struct SrqInitAttr {
    pub srq_context: P,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_global_route` (24 bytes, 8-aligned: `union ibv_gid`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct GlobalRoute {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct AhAttr {
    pub grh: GlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: QpCap,
    pub ah_attr: AhAttr,
    pub alt_ah_attr: AhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (128 bytes) with its `wr` union as `rdma`.
#[repr(C)]
pub struct SendWr {
    pub wr_id: u64,
    pub next: *mut SendWr,
    pub sg_list: *mut Sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// The rest of the `wr` union (its `atomic` is 32 bytes), `qp_type` and
    /// the `bind_mw`/`tso` union.
    pub _pad: u32,
    pub _rest: [u64; 9],
}

/// `struct ibv_wc` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

const _: () = assert!(core::mem::size_of::<QpInitAttr>() == 64 && core::mem::size_of::<SrqInitAttr>() == 24);
const _: () = assert!(core::mem::size_of::<GlobalRoute>() == 24 && core::mem::size_of::<AhAttr>() == 32);
const _: () = assert!(core::mem::size_of::<QpAttr>() == 144 && core::mem::offset_of!(QpAttr, ah_attr) == 56);
const _: () =
    assert!(core::mem::offset_of!(QpAttr, pkey_index) == 120 && core::mem::offset_of!(QpAttr, timeout) == 130);
const _: () = assert!(core::mem::size_of::<SendWr>() == 128 && core::mem::offset_of!(SendWr, remote_addr) == 40);
const _: () = assert!(core::mem::size_of::<Wc>() == 48 && core::mem::offset_of!(Wc, qp_num) == 28);

/// `libibverbs.so.1`, `dlopen`ed as the loader finds it.
pub struct Library(P);

impl Library {
    pub fn open() -> Result<Library> {
        // SAFETY: a NUL-terminated literal.
        let h = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror's string is valid until the next dl* call.
            let why = unsafe { std::ffi::CStr::from_ptr(libc::dlerror() as *const c_char) };
            return Err(format!("dlopen libibverbs.so.1: {}", why.to_string_lossy()));
        }
        Ok(Library(h))
    }

    /// The function `name` exports.
    ///
    /// # Safety
    /// `T` is the C type of the function `name`.
    pub unsafe fn sym<T: Copy>(&self, name: &str) -> Result<T> {
        let n = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `self.0` is a live handle (never closed), `n` NUL-terminated.
        let p = unsafe { libc::dlsym(self.0, n.as_ptr()) };
        if p.is_null() {
            return Err(format!("{name} is not exported by libibverbs.so.1"));
        }
        // SAFETY: the caller's contract: `p` is a function of type `T`.
        Ok(unsafe { core::mem::transmute_copy(&p) })
    }

    /// The three functions that open the first device ([`Devices::open_first`]).
    pub fn devices(&self) -> Result<Devices> {
        // SAFETY: each type is that name's C prototype in verbs.h 44.
        unsafe {
            Ok(Devices {
                get_device_list: self.sym("ibv_get_device_list")?,
                free_device_list: self.sym("ibv_free_device_list")?,
                open_device: self.sym("ibv_open_device")?,
            })
        }
    }
}

/// `ibv_get_device_list`, `ibv_free_device_list`, `ibv_open_device`.
pub struct Devices {
    get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut P,
    free_device_list: unsafe extern "C" fn(*mut P),
    open_device: unsafe extern "C" fn(P) -> P,
}

impl Devices {
    /// The first device, opened.
    pub fn open_first(&self) -> Result<P> {
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer.
        let list = unsafe { (self.get_device_list)(&mut n) };
        if list.is_null() || n < 1 {
            return Err(format!("ibv_get_device_list: no RDMA device (is rxe0 set up?) {}", errno()));
        }
        // SAFETY: the list holds `n` >= 1 devices.
        let ctx = unsafe { (self.open_device)(*list) };
        // SAFETY: the list came from ibv_get_device_list; the context keeps
        // what it needs of the device.
        unsafe { (self.free_device_list)(list) };
        ok(ctx, "ibv_open_device")
    }
}

pub fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A pointer a verb returned, or its errno as an error naming the verb.
/// Inline, its error cold: the bench counts every instruction inside its
/// loops, this program's own too, for rdma-core's library and rverbs'
/// alike.
#[inline]
pub fn ok(p: P, verb: &str) -> Result<P> {
    if p.is_null() {
        return Err(null_error(verb));
    }
    Ok(p)
}

#[cold]
fn null_error(verb: &str) -> String {
    format!("{verb} failed: {}", errno())
}

/// A status a verb returned (0, or an errno value; -1 with errno set),
/// inline as [`ok`].
#[inline]
pub fn ok0(rc: c_int, verb: &str) -> Result {
    if rc == 0 {
        return Ok(());
    }
    Err(status_error(rc, verb))
}

#[cold]
fn status_error(rc: c_int, verb: &str) -> String {
    match rc {
        -1 => format!("{verb} failed: {}", errno()),
        e => format!("{verb} failed: {}", std::io::Error::from_raw_os_error(e.abs())),
    }
}
