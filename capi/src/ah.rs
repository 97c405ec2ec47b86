//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`, and from a
//! received UD completion `ibv_init_ah_from_wc` / `ibv_create_ah_from_wc`.

use core::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::abi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_global_route, ibv_grh, ibv_pd, ibv_wc};
use crate::errno::{self, set_errno, EINVAL};
use crate::export::symver;
use crate::pd::pd;
use crate::pool::Pool;
use crate::qp::ah_from_c;
use crate::query::gid_ex;

/// An AH: the C `ibv_ah`, then rverbs' address handle.
#[repr(C)]
pub(crate) struct Ah {
    pub c: ibv_ah,
    pub inner: rverbs::AddressHandle,
}

/// The AHs' memory.
static AHS: Pool<Ah> = Pool::new();

/// # Safety
/// `p` is NULL or an AH `ibv_create_ah` returned and not yet destroyed.
pub(crate) unsafe fn ah<'a>(p: *const ibv_ah) -> Option<&'a Ah> {
    // SAFETY: by the contract, the `ibv_ah` is the first field of a live `Ah`.
    unsafe { p.cast::<Ah>().as_ref() }
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`.
unsafe extern "C" fn create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the C contract, passed on.
    unsafe { create(p, attr) }
}
symver!(create_ah, ibv_create_ah, "IBVERBS_1.1");

/// `ibv_create_ah`, also behind `ibv_create_ah_from_wc`.
///
/// # Safety
/// `p` NULL or a live PD of ours, `attr` NULL or the caller's attributes.
unsafe fn create(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the C contract: a live PD of ours and the caller's attributes.
    let (Some(pd), Some(a)) = (unsafe { pd(p) }, unsafe { attr.as_ref() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let created = pd.inner.create_ah(&ah_from_c(a));
    let inner = match &created {
        Ok(h) => h,
        Err(e) => {
            set_errno(errno::of(e));
            return core::ptr::null_mut();
        }
    };
    pd.users.fetch_add(1, Ordering::AcqRel);
    let c = ibv_ah { context: pd.c.context, pd: p, handle: inner.handle() };
    let h = AHS.alloc_uninit();
    // SAFETY: `h` is a fresh slot for an `Ah`: both fields are written in
    // place (no `memcpy` of the whole) before it is handed out. The rverbs
    // AH is read out of `created`, which is forgotten: it moves, it is not
    // copied.
    unsafe {
        (&raw mut (*h).c).write(c);
        (&raw mut (*h).inner).write(core::ptr::read(inner));
        core::mem::forget(created);
    }
    h.cast()
}

/// The fields `create` writes into an AH's slot: a field added to [`Ah`]
/// fails to compile here until `create` writes it too.
#[allow(dead_code)]
fn all_fields_written(h: Ah) {
    let Ah { c: _, inner: _ } = h;
}

/// `int ibv_destroy_ah(struct ibv_ah *)`: 0 or an errno.
unsafe extern "C" fn destroy_ah(p: *mut ibv_ah) -> c_int {
    if p.is_null() {
        return EINVAL;
    }
    // SAFETY: made by `create` (from `AHS`); the caller gives it up to this call
    // (the C contract), so nothing else reaches it meanwhile.
    let ah = unsafe { &mut *p.cast::<Ah>() };
    if let Err(e) = rverbs::c_support::destroy_ah_now(&mut ah.inner) {
        return errno::of(&e); // the AH stays usable, as with rdma-core
    }
    // SAFETY: an AH's PD outlives it (dealloc answers EBUSY before).
    if let Some(pd) = unsafe { pd(ah.c.pd) } {
        pd.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: as above; the kernel AH is gone.
    unsafe { AHS.free(p.cast::<Ah>()) };
    0
}
symver!(destroy_ah, ibv_destroy_ah, "IBVERBS_1.1");

/// `enum ibv_gid_type_sysfs`: IB or RoCE v1 (0), RoCE v2 (1).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SysfsGidType {
    IbRoceV1,
    RoceV2,
}

/// GID slots searched for the local GID a packet was sent to (an
/// `sgid_index` is a `u8`).
const GID_SEARCH_LIMIT: u32 = 256;

/// The index of `gid` of type `ty` in `port`'s table, as rdma-core's
/// `ibv_find_gid_index`: -1 with errno when it is not there.
fn find_gid_index(context: *mut ibv_context, port: u8, gid: &[u8; 16], ty: SysfsGidType) -> Result<u8, ()> {
    for i in 0..GID_SEARCH_LIMIT {
        match gid_ex(context, port.into(), i) {
            Ok(e) => {
                let (g, t) = e.map_or(([0; 16], SysfsGidType::IbRoceV1), |e| {
                    (e.gid, if e.gid_type == 2 { SysfsGidType::RoceV2 } else { SysfsGidType::IbRoceV1 })
                });
                if &g == gid && t == ty {
                    return Ok(i as u8);
                }
            }
            Err(e) => {
                set_errno(e);
                return Err(());
            }
        }
    }
    set_errno(EINVAL);
    Err(())
}

/// `::ffff:a.b.c.d`.
fn v4_mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

/// Which header a RoCE GRH area holds, as rdma-core's
/// `get_grh_header_version`: 6, 4 (an IPv4 header in its last 20 bytes,
/// trusted when its checksum holds), or None (EPROTONOSUPPORT).
fn grh_version(raw: &[u8; 40]) -> Option<u8> {
    let ip4 = &raw[20..40];
    if raw[0] >> 4 != 6 {
        return (ip4[0] >> 4 == 4).then_some(4);
    }
    if ip4[0] & 0xf != 5 {
        return Some(6);
    }
    let mut sum: u32 = (0..10)
        .filter(|&i| i != 5) // the checksum field counts as 0
        .map(|i| u32::from(u16::from_ne_bytes([ip4[2 * i], ip4[2 * i + 1]])))
        .sum();
    sum = (sum & 0xffff) + (sum >> 16);
    let check = !(sum as u16);
    Some(if check == u16::from_ne_bytes([ip4[10], ip4[11]]) { 4 } else { 6 })
}

/// The GRH fields of `ah` for a packet whose GRH area is `raw`.
fn grh_route(context: *mut ibv_context, port: u8, raw: &[u8; 40], route: &mut ibv_global_route) -> Result<(), ()> {
    let fail = |e| {
        set_errno(e);
        Err(())
    };
    let flow = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
    match grh_version(raw) {
        Some(4) => {
            let ip4 = &raw[20..40];
            let (saddr, daddr) = ([ip4[12], ip4[13], ip4[14], ip4[15]], [ip4[16], ip4[17], ip4[18], ip4[19]]);
            if daddr[0] & 0xf0 == 0xe0 {
                return fail(EINVAL); // multicast: not in the GID table
            }
            route.sgid_index = find_gid_index(context, port, &v4_mapped(daddr), SysfsGidType::RoceV2)?;
            route.dgid = v4_mapped(saddr);
            route.hop_limit = ip4[8];
            route.traffic_class = ip4[1];
            Ok(())
        }
        Some(_) => {
            let (sgid, dgid): ([u8; 16], [u8; 16]) = (raw[8..24].try_into().unwrap(), raw[24..40].try_into().unwrap());
            if dgid[0] == 0xff {
                return fail(EINVAL);
            }
            route.dgid = sgid;
            let ty = match raw[6] {
                17 => SysfsGidType::RoceV2,     // IPPROTO_UDP
                0x1b => SysfsGidType::IbRoceV1, // IB's next header
                _ => return fail(nix::libc::EPROTONOSUPPORT),
            };
            route.sgid_index = find_gid_index(context, port, &dgid, ty)?;
            route.hop_limit = raw[7];
            route.traffic_class = (flow >> 20) as u8;
            Ok(())
        }
        None => fail(nix::libc::EPROTONOSUPPORT),
    }
}

/// `int ibv_init_ah_from_wc(struct ibv_context *, uint8_t port_num, struct
/// ibv_wc *, struct ibv_grh *, struct ibv_ah_attr *)`: the attributes that
/// reach the sender of a received UD message, as rdma-core 44 computes
/// them (with `IBV_WC_GRH`: the sender's GID as `dgid`, the local GID the
/// packet was sent to as `sgid_index`, IPv4 or IPv6 RoCE v2 headers, or
/// IB/RoCE v1); 0, or -1 with errno (EINVAL for a multicast destination or
/// a GID not in the table, EPROTONOSUPPORT for an unknown header).
unsafe extern "C" fn init_ah_from_wc(
    context: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    out: *mut ibv_ah_attr,
) -> c_int {
    // SAFETY: the C contract, passed on.
    unsafe { init(context, port, wc, grh, out) }
}
symver!(init_ah_from_wc, ibv_init_ah_from_wc, "IBVERBS_1.1");

/// `ibv_init_ah_from_wc`, also behind `ibv_create_ah_from_wc`.
///
/// # Safety
/// `wc` NULL or a completion, `grh` NULL or 40 readable bytes, `out` NULL
/// or room for an `ibv_ah_attr`.
unsafe fn init(
    context: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    out: *mut ibv_ah_attr,
) -> c_int {
    // SAFETY: the C contract: `wc` is the caller's completion.
    let Some(w) = (unsafe { wc.as_ref() }) else {
        set_errno(EINVAL);
        return -1;
    };
    if out.is_null() {
        set_errno(EINVAL);
        return -1;
    }
    // SAFETY: the C contract: `grh` NULL or the 40 bytes before the
    // payload, copied out (a receive buffer the device wrote: no reference
    // into it is made).
    let raw: Option<[u8; 40]> = (!grh.is_null()).then(|| unsafe { grh.cast::<[u8; 40]>().read_unaligned() });
    let flow = raw.map_or(0, |r| u32::from_be_bytes([r[0], r[1], r[2], r[3]]));
    let mut a = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: [0; 16],
            flow_label: flow & 0xf_ffff,
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
        },
        dlid: w.slid,
        sl: w.sl,
        src_path_bits: w.dlid_path_bits,
        static_rate: 0,
        is_global: 0,
        port_num: port,
    };
    let mut r = 0;
    if w.wc_flags & 1 != 0 {
        // IBV_WC_GRH
        a.is_global = 1;
        r = match raw {
            Some(raw) => match grh_route(context, port, &raw, &mut a.grh) {
                Ok(()) => 0,
                Err(()) => -1,
            },
            None => {
                set_errno(EINVAL);
                -1
            }
        };
    }
    // SAFETY: `out` is the caller's struct (rdma-core fills it on failure too).
    unsafe { out.write(a) };
    r
}

/// `struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *, struct ibv_wc *,
/// struct ibv_grh *, uint8_t port_num)`: `ibv_init_ah_from_wc` then
/// `ibv_create_ah`; NULL with errno.
unsafe extern "C" fn create_ah_from_wc(p: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut ibv_grh, port: u8) -> *mut ibv_ah {
    // SAFETY: the C contract: a live PD of ours.
    let Some(pd) = (unsafe { pd(p) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let mut a = core::mem::MaybeUninit::<ibv_ah_attr>::uninit();
    // SAFETY: the C contract for `wc` and `grh`; `a` is ours to fill.
    if unsafe { init(pd.c.context, port, wc, grh, a.as_mut_ptr()) } != 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: `init` succeeded, so it wrote `a`.
    unsafe { create(p, a.as_mut_ptr()) }
}
symver!(create_ah_from_wc, ibv_create_ah_from_wc, "IBVERBS_1.1");
