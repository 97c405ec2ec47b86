//! librdmacm's helpers: the kernel's structs (from the RDMA CM's
//! responses) to libibverbs' and back: `ibv_copy_qp_attr_from_kern`,
//! `ibv_copy_ah_attr_from_kern`, `ibv_copy_path_rec_from_kern`,
//! `ibv_copy_path_rec_to_kern`. Field by field, as rdma-core 44 copies
//! them (`ibv_copy_qp_attr_from_kern` leaves `qp_state` alone).

use rverbs_uapi::ib_user_verbs::{ib_uverbs_ah_attr, ib_uverbs_qp_attr};

use crate::abi::{ibv_ah_attr, ibv_qp_attr, ibv_sa_path_rec};
use crate::export::symver;
use rverbs_uapi::rdma_user_cm::ib_user_path_rec;

fn ah_from_kern(dst: &mut ibv_ah_attr, src: &ib_uverbs_ah_attr) {
    dst.grh.dgid = src.grh.dgid;
    dst.grh.flow_label = src.grh.flow_label;
    dst.grh.sgid_index = src.grh.sgid_index;
    dst.grh.hop_limit = src.grh.hop_limit;
    dst.grh.traffic_class = src.grh.traffic_class;
    dst.dlid = src.dlid;
    dst.sl = src.sl;
    dst.src_path_bits = src.src_path_bits;
    dst.static_rate = src.static_rate;
    dst.is_global = src.is_global;
    dst.port_num = src.port_num;
}

fn qp_attr_from_kern(dst: &mut ibv_qp_attr, src: &ib_uverbs_qp_attr) {
    dst.cur_qp_state = src.cur_qp_state;
    dst.path_mtu = src.path_mtu;
    dst.path_mig_state = src.path_mig_state;
    dst.qkey = src.qkey;
    dst.rq_psn = src.rq_psn;
    dst.sq_psn = src.sq_psn;
    dst.dest_qp_num = src.dest_qp_num;
    dst.qp_access_flags = src.qp_access_flags;
    dst.cap.max_send_wr = src.max_send_wr;
    dst.cap.max_recv_wr = src.max_recv_wr;
    dst.cap.max_send_sge = src.max_send_sge;
    dst.cap.max_recv_sge = src.max_recv_sge;
    dst.cap.max_inline_data = src.max_inline_data;
    ah_from_kern(&mut dst.ah_attr, &src.ah_attr);
    ah_from_kern(&mut dst.alt_ah_attr, &src.alt_ah_attr);
    dst.pkey_index = src.pkey_index;
    dst.alt_pkey_index = src.alt_pkey_index;
    dst.en_sqd_async_notify = src.en_sqd_async_notify;
    dst.sq_draining = src.sq_draining;
    dst.max_rd_atomic = src.max_rd_atomic;
    dst.max_dest_rd_atomic = src.max_dest_rd_atomic;
    dst.min_rnr_timer = src.min_rnr_timer;
    dst.port_num = src.port_num;
    dst.timeout = src.timeout;
    dst.retry_cnt = src.retry_cnt;
    dst.rnr_retry = src.rnr_retry;
    dst.alt_port_num = src.alt_port_num;
    dst.alt_timeout = src.alt_timeout;
}

/// Copies the fields both path records have (`$a` from `$b`); the byte
/// order is the wire's on both sides, so values pass through unchanged
/// (`reversible`/`raw_traffic` are `int` on one side, `__u32` on the other).
macro_rules! path_fields {
    ($dst:expr, $src:expr) => {{
        let (d, s) = ($dst, $src);
        d.dgid = s.dgid;
        d.sgid = s.sgid;
        d.dlid = s.dlid;
        d.slid = s.slid;
        d.raw_traffic = s.raw_traffic as _;
        d.flow_label = s.flow_label;
        d.hop_limit = s.hop_limit;
        d.traffic_class = s.traffic_class;
        d.reversible = s.reversible as _;
        d.numb_path = s.numb_path;
        d.pkey = s.pkey;
        d.sl = s.sl;
        d.mtu_selector = s.mtu_selector;
        d.mtu = s.mtu as _;
        d.rate_selector = s.rate_selector;
        d.rate = s.rate;
        d.packet_life_time = s.packet_life_time;
        d.preference = s.preference;
        d.packet_life_time_selector = s.packet_life_time_selector;
    }};
}

/// `void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *, struct ib_uverbs_qp_attr *)`.
unsafe extern "C" fn copy_qp_attr_from_kern(dst: *mut ibv_qp_attr, src: *const ib_uverbs_qp_attr) {
    // SAFETY: both point at the caller's structs (the C contract); NULL is ignored.
    if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
        qp_attr_from_kern(d, s);
    }
}
symver!(copy_qp_attr_from_kern, ibv_copy_qp_attr_from_kern, "IBVERBS_1.0");

/// `void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *, struct ib_uverbs_ah_attr *)`.
unsafe extern "C" fn copy_ah_attr_from_kern(dst: *mut ibv_ah_attr, src: *const ib_uverbs_ah_attr) {
    // SAFETY: both point at the caller's structs (the C contract); NULL is ignored.
    if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
        ah_from_kern(d, s);
    }
}
symver!(copy_ah_attr_from_kern, ibv_copy_ah_attr_from_kern, "IBVERBS_1.1");

/// `void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *, struct ib_user_path_rec *)`.
unsafe extern "C" fn copy_path_rec_from_kern(dst: *mut ibv_sa_path_rec, src: *const ib_user_path_rec) {
    // SAFETY: both point at the caller's structs (the C contract); NULL is ignored.
    if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
        path_fields!(d, s);
    }
}
symver!(copy_path_rec_from_kern, ibv_copy_path_rec_from_kern, "IBVERBS_1.0");

/// `void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *, struct ibv_sa_path_rec *)`.
unsafe extern "C" fn copy_path_rec_to_kern(dst: *mut ib_user_path_rec, src: *const ibv_sa_path_rec) {
    // SAFETY: both point at the caller's structs (the C contract); NULL is ignored.
    if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
        path_fields!(d, s);
    }
}
symver!(copy_path_rec_to_kern, ibv_copy_path_rec_to_kern, "IBVERBS_1.0");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_attr_copies_every_field_but_the_state() {
        let mut k = ib_uverbs_qp_attr {
            qp_state: 3,
            cur_qp_state: 2,
            path_mtu: 5,
            qkey: 0x1111_1111,
            rq_psn: 7,
            sq_psn: 8,
            dest_qp_num: 0x12,
            qp_access_flags: 0xf,
            max_send_wr: 10,
            max_inline_data: 64,
            pkey_index: 3,
            max_rd_atomic: 4,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
            port_num: 1,
            ..Default::default()
        };
        k.ah_attr.grh.dgid = [9; 16];
        k.ah_attr.grh.sgid_index = 1;
        k.ah_attr.is_global = 1;
        k.ah_attr.port_num = 1;
        // SAFETY: all-zero is a valid `ibv_qp_attr` (integers only).
        let mut c: ibv_qp_attr = unsafe { core::mem::zeroed() };
        // SAFETY: both are live locals.
        unsafe { copy_qp_attr_from_kern(&mut c, &k) };
        assert_eq!(c.qp_state, 0, "rdma-core leaves qp_state alone");
        assert_eq!((c.cur_qp_state, c.path_mtu, c.qkey, c.rq_psn, c.sq_psn), (2, 5, 0x1111_1111, 7, 8));
        assert_eq!((c.dest_qp_num, c.qp_access_flags, c.cap.max_send_wr, c.cap.max_inline_data), (0x12, 0xf, 10, 64));
        assert_eq!(
            (c.pkey_index, c.max_rd_atomic, c.timeout, c.retry_cnt, c.rnr_retry, c.port_num),
            (3, 4, 14, 7, 6, 1)
        );
        assert_eq!((c.ah_attr.grh.dgid, c.ah_attr.grh.sgid_index, c.ah_attr.is_global), ([9; 16], 1, 1));
    }

    #[test]
    fn path_records_round_trip() {
        let k = ib_user_path_rec {
            dgid: [1; 16],
            sgid: [2; 16],
            dlid: 0x0300,
            slid: 0x0400,
            raw_traffic: 0,
            flow_label: 0x0500_0000,
            reversible: 1,
            mtu: 4,
            pkey: 0xffff,
            hop_limit: 64,
            traffic_class: 3,
            numb_path: 1,
            sl: 2,
            mtu_selector: 2,
            rate_selector: 2,
            rate: 7,
            packet_life_time_selector: 2,
            packet_life_time: 18,
            preference: 0,
        };
        let mut s = ibv_sa_path_rec::default();
        let mut back = ib_user_path_rec::default();
        // SAFETY: live locals.
        unsafe {
            copy_path_rec_from_kern(&mut s, &k);
            copy_path_rec_to_kern(&mut back, &s);
        }
        assert_eq!((s.mtu, s.pkey, s.hop_limit, s.packet_life_time, s.reversible), (4, 0xffff, 64, 18, 1));
        let bytes = |p: &ib_user_path_rec| {
            // SAFETY: a plain 64-byte struct of integers without padding, borrowed for the read.
            unsafe { core::slice::from_raw_parts((p as *const ib_user_path_rec).cast::<u8>(), 64) }.to_vec()
        };
        assert_eq!(bytes(&back), bytes(&k));
    }
}
