//! Device, port, GID and P_Key queries: `ibv_query_device`, the
//! `query_device_ex` op, `ibv_query_port` (both the exported 48-byte path
//! and the op the `verbs.h` inline calls), `ibv_query_gid`,
//! `_ibv_query_gid_ex`, `_ibv_query_gid_table`, `ibv_query_gid_type`,
//! `ibv_query_pkey`, `ibv_get_pkey_index`. Return conventions are rdma-core
//! 44's, per function (errno as the `int`, or -1 and errno, or `-errno`).

use core::ffi::{c_char, c_int};
use core::mem::size_of;

use crate::abi::*;
use crate::context::{ctx, Ctx};
use crate::errno::{self, set_errno, EINVAL, ENODATA};
use crate::export::symver;

/// Copies the first `len` bytes of `src` to `dst` and zeroes `dst` from
/// there up to `dst_len` (the caller's size), as rdma-core's size-aware ops do.
///
/// # Safety
/// `dst` is valid for `dst_len` bytes of writes.
unsafe fn copy_sized<T: Copy>(src: &T, dst: *mut u8, dst_len: usize) {
    let n = dst_len.min(size_of::<T>());
    // SAFETY: `src` is `size_of::<T>() >= n` bytes of plain data (the C
    // mirrors have no padding we care to hide: it is zeroed before filling),
    // `dst` holds `dst_len >= n` bytes by the contract.
    unsafe {
        core::ptr::copy_nonoverlapping((src as *const T).cast::<u8>(), dst, n);
        core::ptr::write_bytes(dst.add(n), 0, dst_len - n);
    }
}

fn device_attr_ex(a: &rverbs::DeviceAttr) -> ibv_device_attr_ex {
    // SAFETY: every field of the mirror is an integer or an array of them.
    let mut x: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    let o = &mut x.orig_attr;
    for (d, b) in o.fw_ver.iter_mut().zip(a.fw_ver.bytes().take(63)) {
        *d = b as c_char;
    }
    o.node_guid = u64::from_ne_bytes(a.node_guid.0);
    o.sys_image_guid = u64::from_ne_bytes(a.sys_image_guid.0);
    o.max_mr_size = a.max_mr_size;
    o.page_size_cap = a.page_size_cap;
    o.vendor_id = a.vendor_id;
    o.vendor_part_id = a.vendor_part_id;
    o.hw_ver = a.hw_ver;
    o.max_qp = a.max_qp as c_int;
    o.max_qp_wr = a.max_qp_wr as c_int;
    o.device_cap_flags = a.device_cap_flags;
    o.max_sge = a.max_sge as c_int;
    o.max_sge_rd = a.max_sge_rd as c_int;
    o.max_cq = a.max_cq as c_int;
    o.max_cqe = a.max_cqe as c_int;
    o.max_mr = a.max_mr as c_int;
    o.max_pd = a.max_pd as c_int;
    o.max_qp_rd_atom = a.max_qp_rd_atom as c_int;
    o.max_ee_rd_atom = a.max_ee_rd_atom as c_int;
    o.max_res_rd_atom = a.max_res_rd_atom as c_int;
    o.max_qp_init_rd_atom = a.max_qp_init_rd_atom as c_int;
    o.max_ee_init_rd_atom = a.max_ee_init_rd_atom as c_int;
    o.atomic_cap = a.atomic_cap.raw();
    o.max_ee = a.max_ee as c_int;
    o.max_rdd = a.max_rdd as c_int;
    o.max_mw = a.max_mw as c_int;
    o.max_raw_ipv6_qp = a.max_raw_ipv6_qp as c_int;
    o.max_raw_ethy_qp = a.max_raw_ethy_qp as c_int;
    o.max_mcast_grp = a.max_mcast_grp as c_int;
    o.max_mcast_qp_attach = a.max_mcast_qp_attach as c_int;
    o.max_total_mcast_qp_attach = a.max_total_mcast_qp_attach as c_int;
    o.max_ah = a.max_ah as c_int;
    o.max_fmr = a.max_fmr as c_int;
    o.max_map_per_fmr = a.max_map_per_fmr as c_int;
    o.max_srq = a.max_srq as c_int;
    o.max_srq_wr = a.max_srq_wr as c_int;
    o.max_srq_sge = a.max_srq_sge as c_int;
    o.max_pkeys = a.max_pkeys;
    o.local_ca_ack_delay = a.local_ca_ack_delay;
    o.phys_port_cnt = a.phys_port_cnt;
    x.comp_mask = a.comp_mask;
    x.odp_caps = ibv_odp_caps {
        general_caps: a.odp_caps.general_caps,
        rc_odp_caps: a.odp_caps.rc_odp_caps,
        uc_odp_caps: a.odp_caps.uc_odp_caps,
        ud_odp_caps: a.odp_caps.ud_odp_caps,
    };
    x.completion_timestamp_mask = a.completion_timestamp_mask;
    x.hca_core_clock = a.hca_core_clock;
    x.device_cap_flags_ex = a.device_cap_flags_ex;
    x.tso_caps = ibv_tso_caps { max_tso: a.tso_caps.max_tso, supported_qpts: a.tso_caps.supported_qpts };
    x.rss_caps = ibv_rss_caps {
        supported_qpts: a.rss_caps.supported_qpts,
        max_rwq_indirection_tables: a.rss_caps.max_rwq_indirection_tables,
        max_rwq_indirection_table_size: a.rss_caps.max_rwq_indirection_table_size,
        rx_hash_fields_mask: a.rss_caps.rx_hash_fields_mask,
        rx_hash_function: a.rss_caps.rx_hash_function as u8,
    };
    x.max_wq_type_rq = a.max_wq_type_rq;
    x.packet_pacing_caps = ibv_packet_pacing_caps {
        qp_rate_limit_min: a.packet_pacing_caps.qp_rate_limit_min,
        qp_rate_limit_max: a.packet_pacing_caps.qp_rate_limit_max,
        supported_qpts: a.packet_pacing_caps.supported_qpts,
    };
    x.raw_packet_caps = a.raw_packet_caps;
    x.tm_caps = ibv_tm_caps {
        max_rndv_hdr_size: a.tm_caps.max_rndv_hdr_size,
        max_num_tags: a.tm_caps.max_num_tags,
        flags: a.tm_caps.flags,
        max_ops: a.tm_caps.max_ops,
        max_sge: a.tm_caps.max_sge,
    };
    x.cq_mod_caps =
        ibv_cq_moderation_caps { max_cq_count: a.cq_mod_caps.max_cq_count, max_cq_period: a.cq_mod_caps.max_cq_period };
    x.max_dm_size = a.max_dm_size;
    x.xrc_odp_caps = a.xrc_odp_caps;
    x.phys_port_cnt_ex = a.phys_port_cnt.into();
    x
}

fn query_device_attr(c: &Ctx) -> Result<ibv_device_attr_ex, c_int> {
    c.inner.query_device().map(|a| device_attr_ex(&a)).map_err(|e| errno::of(&e))
}

/// `int ibv_query_device(struct ibv_context *, struct ibv_device_attr *)`: 0 or an errno.
unsafe extern "C" fn query_device(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else { return EINVAL };
    if attr.is_null() {
        return EINVAL;
    }
    match query_device_attr(c) {
        // SAFETY: `attr` points at a caller's `struct ibv_device_attr`.
        Ok(x) => unsafe {
            attr.write(x.orig_attr);
            0
        },
        Err(e) => e,
    }
}
symver!(query_device, ibv_query_device, "IBVERBS_1.1");

/// The `verbs_context.query_device_ex` op: fills `min(attr_size, 400)`
/// bytes and zeroes the rest of the caller's `attr_size`.
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else { return EINVAL };
    // SAFETY: a non-NULL `input` points at the caller's input struct.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return EINVAL;
    }
    if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
        return EINVAL;
    }
    match query_device_attr(c) {
        Ok(x) => {
            // SAFETY: the caller's `attr` holds `attr_size` bytes.
            unsafe { copy_sized(&x, attr.cast(), attr_size) };
            0
        }
        Err(e) => e,
    }
}

fn port_attr(p: &rverbs::PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: p.state.raw().into(),
        max_mtu: p.max_mtu.raw().into(),
        active_mtu: p.active_mtu.raw().into(),
        gid_tbl_len: p.gid_tbl_len as c_int,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state.raw(),
        link_layer: p.link_layer.raw(),
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2,
    }
}

/// Queries `port` and writes `len` bytes of `ibv_port_attr` to `out`.
///
/// # Safety
/// `out` is valid for `len` bytes of writes.
unsafe fn query_port_into(context: *mut ibv_context, port: u8, out: *mut u8, len: usize) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else { return EINVAL };
    if out.is_null() {
        return EINVAL;
    }
    match c.inner.query_port(port) {
        Ok(p) => {
            // SAFETY: forwarded from this function's contract.
            unsafe { copy_sized(&port_attr(&p), out, len) };
            0
        }
        Err(e) => errno::of(&e),
    }
}

/// The exported `int ibv_query_port(struct ibv_context *, uint8_t, struct
/// _compat_ibv_port_attr *)`: 48 bytes, up to `flags` (binaries built
/// against headers whose inline finds no `query_port` op call this).
unsafe extern "C" fn query_port(context: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int {
    // SAFETY: the caller's compat struct holds 48 bytes.
    unsafe { query_port_into(context, port, attr.cast(), COMPAT_PORT_ATTR_LEN) }
}
symver!(query_port, ibv_query_port, "IBVERBS_1.1");

/// The `verbs_context.query_port` op the `ibv_query_port` inline calls,
/// with the caller's `sizeof(struct ibv_port_attr)`.
pub(crate) unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    // SAFETY: the caller's struct holds `len` bytes.
    unsafe { query_port_into(context, port, attr.cast(), len) }
}

fn gid_entry(e: &rverbs::GidEntry) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: e.gid.0,
        gid_index: e.index,
        port_num: e.port,
        gid_type: match e.gid_type {
            rverbs::GidType::Ib => 0,
            rverbs::GidType::RoceV1 => 1,
            rverbs::GidType::RoceV2 => 2,
            rverbs::GidType::Other(v) => v,
            _ => u32::MAX,
        },
        ndev_ifindex: e.netdev_ifindex,
    }
}

/// One GID entry: `Ok(None)` for an empty slot (rdma-core's ENODATA).
pub(crate) fn gid_ex(context: *mut ibv_context, port: u32, index: u32) -> Result<Option<ibv_gid_entry>, c_int> {
    // SAFETY: the C contract of every caller: `context` is one we opened.
    let c = unsafe { ctx(context) }.ok_or(EINVAL)?;
    let port = u8::try_from(port).map_err(|_| EINVAL)?;
    match c.inner.query_gid(port, index) {
        Ok(e) => Ok(e.as_ref().map(gid_entry)),
        Err(e) => Err(errno::of(&e)),
    }
}

/// `int ibv_query_gid(struct ibv_context *, uint8_t port, int index, union
/// ibv_gid *)`: 0 (an empty slot reads as the zero GID) or -1 with errno.
unsafe extern "C" fn query_gid(context: *mut ibv_context, port: u8, index: c_int, gid: *mut [u8; 16]) -> c_int {
    if gid.is_null() || index < 0 {
        set_errno(EINVAL);
        return -1;
    }
    match gid_ex(context, port.into(), index as u32) {
        Ok(e) => {
            // SAFETY: `gid` points at the caller's 16-byte union.
            unsafe { gid.write(e.map_or([0; 16], |e| e.gid)) };
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}
symver!(query_gid, ibv_query_gid, "IBVERBS_1.1");

/// `int _ibv_query_gid_ex(ctx, port_num, gid_index, entry, flags,
/// entry_size)` (what the `ibv_query_gid_ex` inline calls): 0, ENODATA for
/// an empty slot, or an errno.
unsafe extern "C" fn query_gid_ex_sym(
    context: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    if flags != 0 {
        return nix::libc::EOPNOTSUPP;
    }
    if entry.is_null() {
        return EINVAL;
    }
    match gid_ex(context, port, index) {
        Ok(Some(e)) => {
            // SAFETY: the caller's entry holds `entry_size` bytes.
            unsafe { copy_sized(&e, entry.cast(), entry_size) };
            0
        }
        Ok(None) => ENODATA,
        Err(e) => e,
    }
}
symver!(query_gid_ex_sym, _ibv_query_gid_ex, "IBVERBS_1.11");

/// `ssize_t _ibv_query_gid_table(ctx, entries, max_entries, flags,
/// entry_size)`: the number of valid entries, or `-errno` (`-EINVAL` when
/// they do not fit).
unsafe extern "C" fn query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else { return -(EINVAL as isize) };
    if flags != 0 {
        return -(nix::libc::EOPNOTSUPP as isize);
    }
    if entry_size < size_of::<ibv_gid_entry>() || (entries.is_null() && max_entries > 0) {
        return -(EINVAL as isize);
    }
    let table = match c.inner.query_gid_table() {
        Ok(t) => t,
        Err(e) => return -(errno::of(&e) as isize),
    };
    if table.len() > max_entries {
        return -(EINVAL as isize);
    }
    for (i, e) in table.iter().enumerate() {
        // SAFETY: the caller's array holds `max_entries > i` entries of
        // `entry_size` bytes each.
        unsafe { copy_sized(&gid_entry(e), entries.cast::<u8>().add(i * entry_size), entry_size) };
    }
    table.len() as isize
}
symver!(query_gid_table, _ibv_query_gid_table, "IBVERBS_1.11");

/// `int ibv_query_gid_type(ctx, port, index, enum ibv_gid_type_sysfs *)`:
/// `IBV_GID_TYPE_SYSFS_IB_ROCE_V1` (0) for IB, RoCE v1 and empty slots,
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (1) for RoCE v2; -1 with errno on error.
unsafe extern "C" fn query_gid_type(context: *mut ibv_context, port: u8, index: u32, ty: *mut u32) -> c_int {
    if ty.is_null() {
        set_errno(EINVAL);
        return -1;
    }
    match gid_ex(context, port.into(), index) {
        Ok(e) => {
            let v = u32::from(e.is_some_and(|e| e.gid_type == 2));
            // SAFETY: `ty` points at the caller's enum.
            unsafe { ty.write(v) };
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}
symver!(query_gid_type, ibv_query_gid_type, "IBVERBS_PRIVATE_34");

/// A P_Key from sysfs (`ports/<port>/pkeys/<index>`, hex), host order.
fn sysfs_pkey(c: &Ctx, port: u8, index: c_int) -> Option<u16> {
    let path = c.inner.device().sysfs_path().join(format!("ports/{port}/pkeys/{index}"));
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    u16::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// `int ibv_query_pkey(ctx, uint8_t port, int index, __be16 *pkey)`: from
/// sysfs, as rdma-core; 0 or -1.
unsafe extern "C" fn query_pkey(context: *mut ibv_context, port: u8, index: c_int, pkey: *mut u16) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else {
        set_errno(EINVAL);
        return -1;
    };
    match sysfs_pkey(c, port, index) {
        Some(v) if !pkey.is_null() => {
            // SAFETY: `pkey` points at the caller's `__be16`.
            unsafe { pkey.write(v.to_be()) };
            0
        }
        _ => -1,
    }
}
symver!(query_pkey, ibv_query_pkey, "IBVERBS_1.1");

/// `int ibv_get_pkey_index(ctx, uint8_t port, __be16 pkey)`: the index of
/// `pkey` in the port's table, or -1.
unsafe extern "C" fn get_pkey_index(context: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else {
        set_errno(EINVAL);
        return -1;
    };
    let mut i = 0;
    while let Some(v) = sysfs_pkey(c, port, i) {
        if v.to_be() == pkey {
            return i;
        }
        i += 1;
    }
    -1
}
symver!(get_pkey_index, ibv_get_pkey_index, "IBVERBS_1.5");
