//! Host tests of the userspace address vectors (rxe kernels before 5.16):
//! golden `rxe_av` bytes placed by hand (providers.md §A.3/§A.8), the
//! table's numbering, and the send ring copying the vector into the WQE.

use std::cell::Cell;

use crate::rxe::av::{build_av, AvAttr, AvTable, AV_LEN, AV_NUM_FLAG};
use crate::rxe::wqe::{SendLimits, Transport};
use crate::rxe::{Doorbell, Queue, SendRing};
use crate::wr::{PostErrorKind, SendFlags, SendOp, SendWr, Sge, UdDest};
use crate::Errno;

fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

fn link_local(last: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[15] = last;
    g
}

const DMAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

#[test]
fn av_golden_ipv4_mapped() {
    let a = AvAttr {
        port_num: 1,
        dgid: v4_mapped([10, 0, 2, 16]),
        flow_label: 0x12345,
        sgid_index: 1,
        hop_limit: 64,
        traffic_class: 0x20,
        sgid: v4_mapped([10, 0, 2, 15]),
        dmac: DMAC,
    };
    let mut want = [0u8; 88];
    want[0] = 1; // port_num
    want[1] = 1; // network_type: RXE_NETWORK_TYPE_IPV4
    want[2..8].copy_from_slice(&DMAC);
    want[8..24].copy_from_slice(&v4_mapped([10, 0, 2, 16])); // grh.dgid
    want[24..28].copy_from_slice(&0x12345u32.to_le_bytes()); // grh.flow_label
    want[28] = 1; // grh.sgid_index
    want[29] = 64; // grh.hop_limit
    want[30] = 0x20; // grh.traffic_class
    want[32..34].copy_from_slice(&2u16.to_le_bytes()); // sgid_addr.sin_family = AF_INET
    want[36..40].copy_from_slice(&[10, 0, 2, 15]); // sgid_addr.sin_addr (network order)
    want[60..62].copy_from_slice(&2u16.to_le_bytes()); // dgid_addr.sin_family
    want[64..68].copy_from_slice(&[10, 0, 2, 16]); // dgid_addr.sin_addr
    assert_eq!(build_av(&a).0, want);
}

#[test]
fn av_golden_ipv6() {
    let a = AvAttr {
        port_num: 1,
        dgid: link_local(2),
        sgid_index: 0,
        hop_limit: 1,
        sgid: link_local(1),
        dmac: [0; 6],
        ..Default::default()
    };
    let mut want = [0u8; 88];
    want[0] = 1;
    want[1] = 2; // RXE_NETWORK_TYPE_IPV6
    want[8..24].copy_from_slice(&link_local(2));
    want[29] = 1;
    want[32..34].copy_from_slice(&10u16.to_le_bytes()); // sin6_family = AF_INET6
    want[40..56].copy_from_slice(&link_local(1)); // sin6_addr @8 of the union
    want[60..62].copy_from_slice(&10u16.to_le_bytes());
    want[68..84].copy_from_slice(&link_local(2));
    assert_eq!(build_av(&a).0, want);
}

/// The network type follows the destination, as in rdma-core.
#[test]
fn av_network_type_follows_the_destination() {
    let a = AvAttr { dgid: link_local(2), sgid: v4_mapped([10, 0, 0, 1]), ..Default::default() };
    assert_eq!(build_av(&a).0[1], 2);
    let a = AvAttr { dgid: v4_mapped([10, 0, 0, 2]), sgid: link_local(1), ..Default::default() };
    assert_eq!(build_av(&a).0[1], 1);
}

#[test]
fn av_table_numbers_die_with_their_handle() {
    let t = AvTable::new(AV_NUM_FLAG);
    let av1 = build_av(&AvAttr { port_num: 1, ..Default::default() });
    let av2 = build_av(&AvAttr { port_num: 2, ..Default::default() });
    let h1 = t.insert(av1).unwrap();
    let h2 = t.insert(av2).unwrap();
    assert_ne!(h1.num() & AV_NUM_FLAG, 0);
    assert_ne!(h1.num(), h2.num());
    assert_eq!((t.get(h1.num()), t.get(h2.num())), (Some(av1), Some(av2)));
    let old = h1.num();
    drop(h1);
    assert_eq!(t.get(old), None, "a dropped AH's number names nothing");
    // The slot is reused under a new number; the old one stays dead.
    let h3 = t.insert(av2).unwrap();
    assert_eq!(h3.num() & 0xfffff, old & 0xfffff, "same slot");
    assert_ne!(h3.num(), old);
    assert_eq!(t.get(old), None);
    assert_eq!(t.get(h3.num()), Some(av2));
    // Kernel AH numbers (no flag) and garbage are never found.
    assert_eq!(t.get(h3.num() & !AV_NUM_FLAG), None);
    assert_eq!(t.get(0), None);
    assert_eq!(t.get(AV_NUM_FLAG), None);
    assert_eq!(t.get(u32::MAX), None);
}

#[derive(Default)]
struct Rings(Cell<u32>);

impl Doorbell for Rings {
    fn ring(&self, _qp_handle: u32) -> Result<(), Errno> {
        self.0.set(self.0.get() + 1);
        Ok(())
    }
}

const UD: SendLimits = SendLimits { transport: Transport::Ud, max_sge: 4, max_inline: 64 };
const SGE: [Sge<'static>; 1] = [Sge::new(0x1000, 64, 7)];

fn slot(q: &Queue, i: u32) -> Vec<u8> {
    // SAFETY: slot `i` of a heap queue nothing else writes now; a copy.
    unsafe { core::slice::from_raw_parts(q.elem_ptr(i), q.elem_size()).to_vec() }
}

fn ud_send(wr_id: u64, ah_num: u32) -> SendWr<'static> {
    let ud = UdDest::new(ah_num, 0x123, 0x1111_1111);
    SendWr { wr_id, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &SGE, ud: Some(ud) }
}

#[test]
fn ud_post_copies_the_vector_and_leaves_ah_num_zero() {
    let t = AvTable::new(AV_NUM_FLAG);
    let av = build_av(&AvAttr { port_num: 1, dgid: v4_mapped([10, 0, 2, 16]), hop_limit: 64, ..Default::default() });
    let h = t.insert(av).unwrap();
    let mut s = SendRing::new(Queue::new_heap(8, 9), UD, Rings::default(), 0).with_av_table(t.clone());
    // SAFETY: not INLINE: nothing is read from the SGEs.
    unsafe { s.post(&[ud_send(1, h.num()), ud_send(2, 5)]) }.unwrap();
    assert_eq!(s.doorbell().0.get(), 1, "one doorbell for the list");
    let w = slot(s.queue(), 0);
    assert_eq!(&w[24..32], &[0x23, 0x01, 0, 0, 0x11, 0x11, 0x11, 0x11], "remote_qpn, remote_qkey");
    assert_eq!(&w[36..40], &[0; 4], "ah_num 0: the kernel reads the vector");
    assert_eq!(&w[56..56 + AV_LEN], &av.0[..], "wr.ud.av");
    // A kernel-numbered AH in the same list: its number, no vector.
    let w = slot(s.queue(), 1);
    assert_eq!(&w[36..40], &5u32.to_le_bytes());
    assert!(w[56..56 + AV_LEN].iter().all(|&b| b == 0));
}

#[test]
fn ud_post_refuses_a_dead_or_foreign_vector() {
    let t = AvTable::new(AV_NUM_FLAG);
    let h = t.insert(build_av(&AvAttr::default())).unwrap();
    let dead = h.num();
    drop(h);
    let mut s = SendRing::new(Queue::new_heap(8, 9), UD, Rings::default(), 0).with_av_table(t.clone());
    // SAFETY: not INLINE.
    let e = unsafe { s.post(&[ud_send(1, 9), ud_send(2, dead), ud_send(3, 9)]) }.unwrap_err();
    assert_eq!((e.index, e.kind), (1, PostErrorKind::BadDestination));
    assert_eq!(s.queue().producer_own(), 1, "the one before it is posted, none after");
    // A ring without a table (another context's AH, or none) refuses them too.
    let live = t.insert(build_av(&AvAttr::default())).unwrap();
    let mut bare = SendRing::new(Queue::new_heap(8, 9), UD, Rings::default(), 0);
    // SAFETY: not INLINE.
    let e = unsafe { bare.post(&[ud_send(1, live.num())]) }.unwrap_err();
    assert_eq!((e.index, e.kind), (0, PostErrorKind::BadDestination));
    assert_eq!(bare.doorbell().0.get(), 0);
}
