//! Helpers of the downstream crate's tests: what a crate that uses rverbs
//! might write. They use only a small part of rverbs' API.
#![allow(dead_code)] // each test binary uses its own part

use rverbs::{
    AccessFlags, CompletionQueue, ConnectOptions, Context, Endpoint, MemoryRegion, ProtectionDomain, QpInitAttr,
    QpType, QueuePair, Wc,
};

/// Region size of each side.
pub const MR_LEN: usize = 4096;

/// Completions polled before giving up (with a millisecond's sleep after
/// each empty poll: a lost completion fails the test instead of hanging it).
const POLL_LIMIT: u32 = 120_000;

/// The first RDMA device, opened; `None` (the test skips) when there is
/// none, unless `RVERBS_REQUIRE_DEVICE=1` (set by rverbs-vm): then it panics.
pub fn open_device() -> Option<Context> {
    let required = std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1");
    match rverbs::devices().expect("listing RDMA devices").into_iter().next() {
        Some(dev) => Some(dev.open().expect("opening the RDMA device")),
        None if required => panic!("RVERBS_REQUIRE_DEVICE=1 but there is no RDMA device"),
        None => {
            eprintln!("skipped: no RDMA device (run the tests with rverbs-vm)");
            None
        }
    }
}

/// One end of an RC connection: its CQ, QP and a registered region.
pub struct Side {
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    pub mr: MemoryRegion,
}

impl Side {
    /// A CQ, an RC QP on it and a region the peer may write to.
    pub fn new(ctx: &Context, pd: &ProtectionDomain) -> Side {
        let cq = ctx.create_cq(16).expect("create_cq");
        let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).expect("create_qp");
        let mr = pd.alloc_mr(MR_LEN, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).expect("alloc_mr");
        Side { cq, qp, mr }
    }

    /// What the peer needs to connect to this side, with its region.
    pub fn endpoint(&self, psn: u32) -> Endpoint {
        self.qp.local_endpoint(psn, &ConnectOptions::default()).expect("local_endpoint").with_memory(&self.mr)
    }

    /// The next completion, which must be a success.
    pub fn poll_one(&mut self) -> Wc {
        let mut wc = [Wc::default(); 1];
        for _ in 0..POLL_LIMIT {
            if self.cq.poll(&mut wc) == 1 {
                return wc[0].ok().expect("a successful completion");
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("no completion after {POLL_LIMIT} polls");
    }

    /// The region's first `len` bytes.
    pub fn read(&self, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.mr.read_at(0, &mut v).expect("read_at");
        v
    }
}
