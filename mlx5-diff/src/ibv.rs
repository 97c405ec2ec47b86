//! rdma-core 44's C `libibverbs.so.1`, loaded at run time with `dlopen` (no
//! C is linked): its exported verbs as typed function pointers, named as in
//! C, and the `static inline` verbs of `<infiniband/verbs.h>` done the way
//! the header does them, through the context's ops table.
//!
//! The struct layouts are `rverbs-capi`'s `abi` (checked there against
//! gcc's offsets for the 44 headers). Everything stays raw pointers: this is
//! the C side of a differential test, and it must see what C sees.
//!
//! The library is never `dlclose`d: objects it hands out (and the provider
//! libraries it loads) live as long as the process, so every pointer
//! resolved here stays valid for `'static`.

#![allow(non_camel_case_types, dead_code)]

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use core::mem::{offset_of, size_of};
use std::ffi::CString;

pub use capi::abi::{
    ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_global_route, ibv_mr,
    ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_sge,
    ibv_srq, ibv_srq_attr, ibv_srq_init_attr, ibv_wc,
};
use capi::abi::{verbs_context, Slot};
use nix::errno::Errno;
use nix::libc;

/// `union ibv_gid`: 16 bytes, 8-aligned (it holds two `__be64`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

const _: () = assert!(size_of::<ibv_gid>() == 16);

// ---- the exported functions' C signatures (rdma-core 44, verbs.h) ----

pub type GetDeviceListFn = unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut ibv_device;
pub type FreeDeviceListFn = unsafe extern "C" fn(list: *mut *mut ibv_device);
pub type GetDeviceNameFn = unsafe extern "C" fn(device: *mut ibv_device) -> *const c_char;
pub type OpenDeviceFn = unsafe extern "C" fn(device: *mut ibv_device) -> *mut ibv_context;
pub type CloseDeviceFn = unsafe extern "C" fn(context: *mut ibv_context) -> c_int;
pub type QueryDeviceFn = unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
/// The exported (compat) `ibv_query_port`: fills only the first 48 bytes
/// (`struct _compat_ibv_port_attr`), up to `flags`.
pub type QueryPortFn = unsafe extern "C" fn(context: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
pub type QueryGidFn =
    unsafe extern "C" fn(context: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
pub type AllocPdFn = unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_pd;
pub type DeallocPdFn = unsafe extern "C" fn(pd: *mut ibv_pd) -> c_int;
pub type RegMrFn = unsafe extern "C" fn(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr;
pub type DeregMrFn = unsafe extern "C" fn(mr: *mut ibv_mr) -> c_int;
pub type CreateCompChannelFn = unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_comp_channel;
pub type DestroyCompChannelFn = unsafe extern "C" fn(channel: *mut ibv_comp_channel) -> c_int;
pub type CreateCqFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq;
pub type ResizeCqFn = unsafe extern "C" fn(cq: *mut ibv_cq, cqe: c_int) -> c_int;
pub type DestroyCqFn = unsafe extern "C" fn(cq: *mut ibv_cq) -> c_int;
pub type CreateQpFn = unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
pub type ModifyQpFn = unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
pub type QueryQpFn = unsafe extern "C" fn(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int;
pub type DestroyQpFn = unsafe extern "C" fn(qp: *mut ibv_qp) -> c_int;
pub type CreateSrqFn = unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
pub type ModifySrqFn = unsafe extern "C" fn(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int;
pub type DestroySrqFn = unsafe extern "C" fn(srq: *mut ibv_srq) -> c_int;
pub type CreateAhFn = unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
pub type DestroyAhFn = unsafe extern "C" fn(ah: *mut ibv_ah) -> c_int;
pub type GetCqEventFn =
    unsafe extern "C" fn(channel: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int;
pub type AckCqEventsFn = unsafe extern "C" fn(cq: *mut ibv_cq, nevents: c_uint);

// ---- the ops-table slots the inline verbs call (`struct ibv_context_ops`) ----

pub type PollCqOp = unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int;
pub type ReqNotifyCqOp = unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int;
pub type PostSendOp =
    unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int;
pub type PostRecvOp =
    unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int;
pub type PostSrqRecvOp =
    unsafe extern "C" fn(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int;

/// Defines [`Ibverbs`] with one public field per exported verb (named as
/// the C function, typed by its signature) and the `dlsym` loop filling them.
macro_rules! ibverbs {
    ($($name:ident: $ty:ty,)*) => {
        /// `libibverbs.so.1`, opened with `dlopen`, and its exported verbs.
        pub struct Ibverbs {
            handle: *mut c_void,
            path: String,
            $(
                #[doc = concat!("`", stringify!($name), "` of the loaded library.")]
                pub $name: $ty,
            )*
        }

        impl Ibverbs {
            /// `dlopen(lib, RTLD_NOW | RTLD_LOCAL)` and `dlsym` of every verb above.
            pub fn load_from(lib: &str) -> Result<Ibverbs, String> {
                let handle = dl_open(lib)?;
                $(
                    let p = dl_sym(handle, lib, stringify!($name))?;
                    // SAFETY: `p` is the non-NULL address of the function
                    // `$name` exported by libibverbs, whose C prototype in
                    // rdma-core 44's verbs.h is the one `$ty` spells out; data
                    // and function pointers have the same size on x86_64.
                    let $name = unsafe { core::mem::transmute::<*mut c_void, $ty>(p) };
                )*
                let mut verbs = Ibverbs { handle, path: String::new(), $($name,)* };
                verbs.path = dl_object_of(verbs.ibv_get_device_list as *const c_void).unwrap_or_else(|| lib.to_owned());
                verbs.check_origin()?;
                Ok(verbs)
            }

            /// The addresses of every resolved verb, with its name.
            fn addresses(&self) -> Vec<(&'static str, *const c_void)> {
                vec![$((stringify!($name), self.$name as *const c_void),)*]
            }
        }
    };
}

ibverbs! {
    ibv_get_device_list: GetDeviceListFn,
    ibv_free_device_list: FreeDeviceListFn,
    ibv_get_device_name: GetDeviceNameFn,
    ibv_open_device: OpenDeviceFn,
    ibv_close_device: CloseDeviceFn,
    ibv_query_device: QueryDeviceFn,
    ibv_query_port: QueryPortFn,
    ibv_query_gid: QueryGidFn,
    ibv_alloc_pd: AllocPdFn,
    ibv_dealloc_pd: DeallocPdFn,
    ibv_reg_mr: RegMrFn,
    ibv_dereg_mr: DeregMrFn,
    ibv_create_comp_channel: CreateCompChannelFn,
    ibv_destroy_comp_channel: DestroyCompChannelFn,
    ibv_create_cq: CreateCqFn,
    ibv_resize_cq: ResizeCqFn,
    ibv_destroy_cq: DestroyCqFn,
    ibv_create_qp: CreateQpFn,
    ibv_modify_qp: ModifyQpFn,
    ibv_query_qp: QueryQpFn,
    ibv_destroy_qp: DestroyQpFn,
    ibv_create_srq: CreateSrqFn,
    ibv_modify_srq: ModifySrqFn,
    ibv_destroy_srq: DestroySrqFn,
    ibv_create_ah: CreateAhFn,
    ibv_destroy_ah: DestroyAhFn,
    ibv_get_cq_event: GetCqEventFn,
    ibv_ack_cq_events: AckCqEventsFn,
}

const INSTALL_HINT: &str = "apt-get install libibverbs1 ibverbs-providers";

/// The last `dlerror()` text, or `""`.
fn dl_error() -> String {
    // SAFETY: dlerror() takes no arguments; it returns NULL or a
    // NUL-terminated string valid until the next dl* call on this thread,
    // copied out before any.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            String::new()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

fn dl_open(lib: &str) -> Result<*mut c_void, String> {
    let name = CString::new(lib).map_err(|_| format!("library name {lib:?} contains a NUL byte"))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("cannot dlopen {lib}: {} ({INSTALL_HINT})", dl_error()));
    }
    Ok(handle)
}

fn dl_sym(handle: *mut c_void, lib: &str, name: &str) -> Result<*mut c_void, String> {
    let cname = CString::new(name).map_err(|_| format!("symbol name {name:?} contains a NUL byte"))?;
    // Clears a stale error first.
    dl_error();
    // SAFETY: `handle` came from a successful dlopen and is never closed;
    // `cname` is NUL-terminated and outlives the call.
    let p = unsafe { libc::dlsym(handle, cname.as_ptr()) };
    if p.is_null() {
        return Err(format!("{lib} has no symbol {name}: {} ({INSTALL_HINT})", dl_error()));
    }
    Ok(p)
}

/// The file of the loaded object containing `addr` (`dladdr`'s `dli_fname`).
fn dl_object_of(addr: *const c_void) -> Option<String> {
    let mut info = libc::Dl_info {
        dli_fname: core::ptr::null(),
        dli_fbase: core::ptr::null_mut(),
        dli_sname: core::ptr::null(),
        dli_saddr: core::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the address (never dereferences it) and
    // writes `info`, a valid, exclusively borrowed Dl_info.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set `dli_fname` to the NUL-terminated path of a loaded
    // object, which stays loaded (nothing here dlcloses).
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

/// The C value structs whose all-zero bytes are a valid value.
///
/// # Safety
/// All-zero bytes must be a valid value of the type (integers, arrays of
/// them, raw pointers, `Option<fn>`).
pub unsafe trait Zeroable: Sized {
    /// The all-zero value, as C's `= {}` / `memset(0)`.
    fn zeroed() -> Self {
        // SAFETY: the implementor promises all-zero bytes are a valid `Self`.
        unsafe { core::mem::zeroed() }
    }
}

macro_rules! zeroable {
    ($($t:ty),*) => {
        $(
            // SAFETY: a #[repr(C)] struct of integers, integer arrays and raw
            // pointers (abi.rs); all-zero is a valid value of each field.
            unsafe impl Zeroable for $t {}
        )*
    };
}

zeroable!(
    ibv_gid,
    ibv_device_attr,
    ibv_port_attr,
    ibv_wc,
    ibv_sge,
    ibv_send_wr,
    ibv_recv_wr,
    ibv_qp_cap,
    ibv_qp_init_attr,
    ibv_global_route,
    ibv_ah_attr,
    ibv_qp_attr,
    ibv_srq_attr,
    ibv_srq_init_attr
);

/// `Err(rc)` for a non-zero C return code.
fn rc(rc: c_int) -> Result<(), i32> {
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}

/// A post's result: `Err((rc, bad_wr))` unless `rc` is 0.
fn bad_wr<W>(rc: c_int, bad: *mut W) -> Result<(), (i32, *mut W)> {
    if rc == 0 {
        Ok(())
    } else {
        Err((rc, bad))
    }
}

/// A pointer result: `Err(errno)` for NULL (read right after the call).
pub fn nonnull<T>(p: *mut T) -> Result<*mut T, Errno> {
    if p.is_null() {
        Err(Errno::last())
    } else {
        Ok(p)
    }
}

/// The list `ibv_get_device_list` returned; `ibv_free_device_list` on drop.
pub struct DeviceList<'a> {
    lib: &'a Ibverbs,
    list: *mut *mut ibv_device,
    len: usize,
}

impl DeviceList<'_> {
    /// The devices (pointers stay valid after the list is freed, as in C:
    /// libibverbs keeps its own reference).
    pub fn devices(&self) -> &[*mut ibv_device] {
        // SAFETY: `list` is the non-NULL array ibv_get_device_list returned
        // with `len` entries (before its NULL terminator), alive until drop.
        unsafe { core::slice::from_raw_parts(self.list, self.len) }
    }

    /// `ibv_get_device_name` of each device.
    pub fn names(&self) -> Vec<String> {
        // SAFETY: every entry is a device of this live list.
        self.devices().iter().map(|&d| unsafe { self.lib.device_name(d) }).collect()
    }

    /// The device named `name` (`ibv_get_device_name`), if listed.
    pub fn find(&self, name: &str) -> Option<*mut ibv_device> {
        // SAFETY: every entry is a device of this live list.
        self.devices().iter().copied().find(|&d| unsafe { self.lib.device_name(d) } == name)
    }
}

impl Drop for DeviceList<'_> {
    fn drop(&mut self) {
        // SAFETY: `list` came from ibv_get_device_list and is freed once.
        unsafe { (self.lib.ibv_free_device_list)(self.list) };
    }
}

/// Reads an ops-table slot as the typed function pointer `$ty`, panicking
/// (where C would jump to NULL) when the provider left it empty.
macro_rules! op {
    ($slot:expr, $ty:ty, $name:literal) => {{
        let slot: Slot = $slot;
        assert!(!slot.is_null(), concat!("ibv_context_ops.", $name, " is NULL"));
        // SAFETY: a non-NULL slot of `struct ibv_context_ops` holds the
        // provider's function with the prototype verbs.h gives the slot,
        // which `$ty` spells out; pointer sizes match on x86_64.
        unsafe { core::mem::transmute::<Slot, $ty>(slot) }
    }};
}

impl Ibverbs {
    /// [`Ibverbs::load_from`] of `libibverbs.so.1`, found by the dynamic
    /// loader's search path.
    pub fn load() -> Result<Ibverbs, String> {
        Ibverbs::load_from("libibverbs.so.1")
    }

    /// The path of the loaded object that holds the verbs (`dladdr`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every verb must lie in one object, the opened library (or one of its
    /// dependencies), not in this executable.
    fn check_origin(&self) -> Result<(), String> {
        let exe = dl_object_of(main_marker as *const c_void);
        for (name, addr) in self.addresses() {
            let obj = dl_object_of(addr);
            if obj.as_deref() != Some(self.path.as_str()) || obj == exe {
                return Err(format!("{name} resolved to {obj:?}, not to {} ({INSTALL_HINT})", self.path));
            }
        }
        Ok(())
    }

    /// `dlsym` of any other symbol of the library (NULL if absent).
    pub fn symbol(&self, name: &str) -> *mut c_void {
        dl_sym(self.handle, &self.path, name).unwrap_or(core::ptr::null_mut())
    }

    /// `ibv_get_device_list(&n)`; `Err(errno)` when it returns NULL (`ENOSYS`:
    /// sysfs has no `class/infiniband_verbs`).
    pub fn device_list(&self) -> Result<DeviceList<'_>, Errno> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter for the count.
        let list = nonnull(unsafe { (self.ibv_get_device_list)(&mut n) })?;
        Ok(DeviceList { lib: self, list, len: usize::try_from(n).unwrap_or(0) })
    }

    /// `ibv_get_device_name(device)` as a `String` (`""` for NULL).
    ///
    /// # Safety
    /// `device` must be a device libibverbs listed.
    pub unsafe fn device_name(&self, device: *mut ibv_device) -> String {
        // SAFETY: the caller passes a listed device, as C's contract asks.
        let name = unsafe { (self.ibv_get_device_name)(device) };
        if name.is_null() {
            return String::new();
        }
        // SAFETY: a non-NULL name points into the device's NUL-terminated
        // `name[64]`, alive as long as the device.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    }

    /// `ibv_open_device` of the device named `name`: `Err` names what failed.
    pub fn open_device_by_name(&self, name: &str) -> Result<*mut ibv_context, String> {
        let list = self.device_list().map_err(|e| format!("ibv_get_device_list: {e}"))?;
        let Some(dev) = list.find(name) else {
            return Err(format!("no device {name} among {:?}", list.names()));
        };
        // SAFETY: `dev` is a device of the live list.
        nonnull(unsafe { (self.ibv_open_device)(dev) }).map_err(|e| format!("ibv_open_device({name}): {e}"))
    }

    /// `ibv_query_device`; `Err(rc)` is C's return value.
    ///
    /// # Safety
    /// `ctx` must be an open context of this library.
    pub unsafe fn query_device(&self, ctx: *mut ibv_context) -> Result<ibv_device_attr, i32> {
        let mut attr = ibv_device_attr::zeroed();
        // SAFETY: `ctx` is open (caller); `attr` is a writable ibv_device_attr.
        rc(unsafe { (self.ibv_query_device)(ctx, &mut attr) })?;
        Ok(attr)
    }

    /// `ibv_query_port` as verbs.h's inline `___ibv_query_port` does it:
    /// `verbs_context.query_port(ctx, port, attr, sizeof attr)` when the
    /// context is extended and has that op, else the exported (compat)
    /// symbol on a zeroed `attr`. `Err(rc)` is C's return value.
    ///
    /// # Safety
    /// `ctx` must be an open context of this library.
    pub unsafe fn query_port(&self, ctx: *mut ibv_context, port: u8) -> Result<ibv_port_attr, i32> {
        let mut attr = ibv_port_attr::zeroed();
        // SAFETY: `ctx` is an open context (caller).
        let ext = unsafe { verbs_ctx(ctx) }.and_then(|vctx| {
            // SAFETY: verbs_ctx only returns the live verbs_context around `ctx`.
            let (sz, op) = unsafe { ((*vctx).sz, (*vctx).query_port) };
            (sz >= size_of::<verbs_context>() - offset_of!(verbs_context, query_port)).then_some(op).flatten()
        });
        let r = match ext {
            // SAFETY: the provider's query_port of this context, given a
            // writable ibv_port_attr and its size.
            Some(f) => unsafe { f(ctx, port, &mut attr, size_of::<ibv_port_attr>()) },
            // SAFETY: the exported compat ibv_query_port writes at most
            // 48 bytes of the (larger, zeroed) ibv_port_attr.
            None => unsafe { (self.ibv_query_port)(ctx, port, &mut attr) },
        };
        rc(r)?;
        Ok(attr)
    }

    /// `ibv_query_gid`; `Err(rc)` is C's return value (-1 in rdma-core 44).
    ///
    /// # Safety
    /// `ctx` must be an open context of this library.
    pub unsafe fn query_gid(&self, ctx: *mut ibv_context, port: u8, index: i32) -> Result<ibv_gid, i32> {
        let mut gid = ibv_gid::zeroed();
        // SAFETY: `ctx` is open (caller); `gid` is a writable union ibv_gid.
        rc(unsafe { (self.ibv_query_gid)(ctx, port, index, &mut gid) })?;
        Ok(gid)
    }

    /// `ibv_query_qp(qp, &attr, mask, &init_attr)`; `Err(rc)` is C's return value.
    ///
    /// # Safety
    /// `qp` must be a live QP of this library.
    pub unsafe fn query_qp(&self, qp: *mut ibv_qp, mask: i32) -> Result<(ibv_qp_attr, ibv_qp_init_attr), i32> {
        let mut attr = ibv_qp_attr::zeroed();
        let mut init = ibv_qp_init_attr::zeroed();
        // SAFETY: `qp` is live (caller); both out-structs are writable.
        rc(unsafe { (self.ibv_query_qp)(qp, &mut attr, mask, &mut init) })?;
        Ok((attr, init))
    }

    /// verbs.h's inline `ibv_post_send`: `qp->context->ops.post_send(qp, wr, &bad)`.
    /// `Err((rc, bad_wr))` on failure.
    ///
    /// # Safety
    /// `qp` must be a live QP of this library and `wr` a valid list whose
    /// buffers stay valid as the provider requires.
    pub unsafe fn post_send(&self, qp: *mut ibv_qp, wr: *mut ibv_send_wr) -> Result<(), (i32, *mut ibv_send_wr)> {
        // SAFETY: a live QP points to its live context (caller).
        let f = op!(unsafe { (*(*qp).context).ops.post_send }, PostSendOp, "post_send");
        let mut bad = core::ptr::null_mut();
        // SAFETY: the provider's post_send for this QP, with the caller's list.
        bad_wr(unsafe { f(qp, wr, &mut bad) }, bad)
    }

    /// verbs.h's inline `ibv_post_recv`: `qp->context->ops.post_recv(qp, wr, &bad)`.
    ///
    /// # Safety
    /// As [`Ibverbs::post_send`].
    pub unsafe fn post_recv(&self, qp: *mut ibv_qp, wr: *mut ibv_recv_wr) -> Result<(), (i32, *mut ibv_recv_wr)> {
        // SAFETY: a live QP points to its live context (caller).
        let f = op!(unsafe { (*(*qp).context).ops.post_recv }, PostRecvOp, "post_recv");
        let mut bad = core::ptr::null_mut();
        // SAFETY: the provider's post_recv for this QP, with the caller's list.
        bad_wr(unsafe { f(qp, wr, &mut bad) }, bad)
    }

    /// verbs.h's inline `ibv_post_srq_recv`: `srq->context->ops.post_srq_recv(srq, wr, &bad)`.
    ///
    /// # Safety
    /// `srq` must be a live SRQ of this library; `wr` as for [`Ibverbs::post_send`].
    pub unsafe fn post_srq_recv(&self, srq: *mut ibv_srq, wr: *mut ibv_recv_wr) -> Result<(), (i32, *mut ibv_recv_wr)> {
        // SAFETY: a live SRQ points to its live context (caller).
        let f = op!(unsafe { (*(*srq).context).ops.post_srq_recv }, PostSrqRecvOp, "post_srq_recv");
        let mut bad = core::ptr::null_mut();
        // SAFETY: the provider's post_srq_recv for this SRQ, with the caller's list.
        bad_wr(unsafe { f(srq, wr, &mut bad) }, bad)
    }

    /// verbs.h's inline `ibv_poll_cq`: `cq->context->ops.poll_cq(cq, wc.len(), wc)`.
    /// C's return value: completions written, or negative on error.
    ///
    /// # Safety
    /// `cq` must be a live CQ of this library.
    pub unsafe fn poll_cq(&self, cq: *mut ibv_cq, wc: &mut [ibv_wc]) -> i32 {
        // SAFETY: a live CQ points to its live context (caller).
        let f = op!(unsafe { (*(*cq).context).ops.poll_cq }, PollCqOp, "poll_cq");
        let n = c_int::try_from(wc.len()).unwrap_or(c_int::MAX);
        // SAFETY: the provider's poll_cq for this CQ, writing at most `n`
        // entries into `wc`.
        unsafe { f(cq, n, wc.as_mut_ptr()) }
    }

    /// verbs.h's inline `ibv_req_notify_cq`: `cq->context->ops.req_notify_cq(cq, solicited_only)`.
    /// C's return value.
    ///
    /// # Safety
    /// `cq` must be a live CQ of this library.
    pub unsafe fn req_notify_cq(&self, cq: *mut ibv_cq, solicited_only: bool) -> i32 {
        // SAFETY: a live CQ points to its live context (caller).
        let f = op!(unsafe { (*(*cq).context).ops.req_notify_cq }, ReqNotifyCqOp, "req_notify_cq");
        // SAFETY: the provider's req_notify_cq for this CQ.
        unsafe { f(cq, c_int::from(solicited_only)) }
    }
}

/// verbs.h's `verbs_get_ctx`: the `verbs_context` around `ctx` when
/// `ctx->abi_compat` says it is extended (`UINTPTR_MAX`).
///
/// # Safety
/// `ctx` must be an open context of this library.
unsafe fn verbs_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: `ctx` is an open context (caller).
    let compat = unsafe { (*ctx).abi_compat };
    if compat as usize != usize::MAX {
        return None;
    }
    // SAFETY: an extended context is the `context` member of a
    // verbs_context (rdma-core's contract), so stepping back by its offset
    // stays inside that allocation.
    Some(unsafe { ctx.byte_sub(offset_of!(verbs_context, context)) }.cast::<verbs_context>())
}

/// A function of this executable, to tell its address range apart.
fn main_marker() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rdma-core library, or `None` (test skipped) where it is not installed.
    fn lib() -> Option<Ibverbs> {
        Ibverbs::load().map_err(|e| eprintln!("skipped: {e}")).ok()
    }

    unsafe extern "C" fn fake_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
        // SAFETY: called by post_send with a valid `bad` out-pointer.
        unsafe { *bad = wr };
        // SAFETY: the test's QP is a live, zeroed ibv_qp.
        unsafe { (*qp).qp_num as c_int }
    }

    unsafe extern "C" fn fake_poll_cq(_cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
        // SAFETY: poll_cq passes its slice's pointer; the test's slice has 2 entries.
        unsafe { (*wc.add(1)).wr_id = 7 };
        n
    }

    unsafe extern "C" fn fake_req_notify(_cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
        40 + solicited_only
    }

    unsafe extern "C" fn fake_query_port(
        _ctx: *mut ibv_context,
        port: u8,
        attr: *mut ibv_port_attr,
        len: usize,
    ) -> c_int {
        // SAFETY: query_port passes a writable ibv_port_attr of `len` bytes.
        unsafe { (*attr).port_cap_flags2 = u16::from(port) << 8 | len as u16 };
        0
    }

    /// The inline verbs read the right ops slots and pass arguments and
    /// results through as verbs.h does.
    #[test]
    fn inline_verbs_use_the_ops_table() {
        let Some(lib) = lib() else { return };
        // SAFETY: all-zero is a valid verbs_context / ibv_qp / ibv_cq (integers,
        // raw pointers, Option<fn>, pthread objects' zero initializers).
        let (mut vctx, mut qp, mut cq) = unsafe {
            (core::mem::zeroed::<verbs_context>(), core::mem::zeroed::<ibv_qp>(), core::mem::zeroed::<ibv_cq>())
        };
        vctx.context.ops.post_send = fake_post_send as Slot;
        vctx.context.ops.poll_cq = fake_poll_cq as Slot;
        vctx.context.ops.req_notify_cq = fake_req_notify as Slot;
        vctx.context.abi_compat = usize::MAX as *mut c_void;
        vctx.sz = size_of::<verbs_context>();
        vctx.query_port = Some(fake_query_port);
        let ctx: *mut ibv_context = &mut vctx.context;
        qp.context = ctx;
        qp.qp_num = 12;
        cq.context = ctx;

        let mut wr = ibv_send_wr::zeroed();
        let wrp: *mut ibv_send_wr = &mut wr;
        // SAFETY: the QP's context is the fake one above, whose ops are set.
        assert_eq!(unsafe { lib.post_send(&mut qp, wrp) }, Err((12, wrp)));
        let mut wc = [ibv_wc::zeroed(); 2];
        // SAFETY: as above.
        assert_eq!(unsafe { lib.poll_cq(&mut cq, &mut wc) }, 2);
        assert_eq!(wc[1].wr_id, 7);
        // SAFETY: as above.
        assert_eq!(unsafe { lib.req_notify_cq(&mut cq, true) }, 41);
        // SAFETY: `ctx` is the fake extended context; its query_port is set.
        let attr = unsafe { lib.query_port(ctx, 3) }.expect("fake query_port");
        assert_eq!(attr.port_cap_flags2, 3 << 8 | 52);
    }

    /// Every verb resolves into libibverbs.so.1, not into this executable.
    #[test]
    fn verbs_resolve_into_the_library() {
        let Some(lib) = lib() else { return };
        assert!(lib.path().contains("libibverbs.so.1"), "{}", lib.path());
        assert!(!lib.symbol("ibv_query_pkey").is_null());
        assert!(lib.symbol("ibv_no_such_verb").is_null());
        // dlsym picks each verb's default version, not the IBVERBS_1.0 compat one.
        for (name, addr) in lib.addresses() {
            let node = if name.contains("comp_channel") { c"IBVERBS_1.0" } else { c"IBVERBS_1.1" };
            let cname = CString::new(name).unwrap();
            // SAFETY: the handle is open; both strings are NUL-terminated.
            let v = unsafe { libc::dlvsym(lib.handle, cname.as_ptr(), node.as_ptr()) };
            assert_eq!(v.cast_const(), addr, "{name}");
        }
    }
}
