//! What the fake kernel saw, and the objects it holds: the form in which it
//! crosses from the preload library to the test program (JSON).

use serde::{Deserialize, Serialize};

/// One legacy `write()` command, as the kernel received and answered it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Which opened context (0, 1, ... in open order).
    pub ctx: u32,
    /// `IB_USER_VERBS_CMD_*` / `IB_USER_VERBS_EX_CMD_*`.
    pub code: u32,
    pub extended: bool,
    /// The kernel's name of it (`CREATE_CQ`).
    pub name: String,
    pub core_in: Vec<u8>,
    pub drv_in: Vec<u8>,
    /// What was written back (empty on error).
    pub core_out: Vec<u8>,
    pub drv_out: Vec<u8>,
    /// 0, or the errno the write failed with.
    pub errno: i32,
    /// How it came: `write`, `invoke_write` (the ioctl that carries a write
    /// command) or `ioctl` (a native method, recorded in the layout of its
    /// write command where it has one).
    pub path: String,
    /// Byte ranges `(in_driver_data, offset, len)` of the input that hold
    /// addresses of the caller's memory or its own cookies (response
    /// pointer, user_handle, buffer and doorbell addresses, MR start): they
    /// differ between two libraries doing the same work.
    pub pointers: Vec<(bool, usize, usize)>,
}

impl Command {
    /// The input with its [`pointers`](Self::pointers) zeroed: (core, driver).
    pub fn masked_in(&self) -> (Vec<u8>, Vec<u8>) {
        let (mut core, mut drv) = (self.core_in.clone(), self.drv_in.clone());
        for &(in_drv, off, len) in &self.pointers {
            let b = if in_drv { &mut drv } else { &mut core };
            if let Some(r) = b.get_mut(off..off + len) {
                r.fill(0);
            }
        }
        (core, drv)
    }
}

/// An mmap of the device node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mmap {
    pub ctx: u32,
    /// The mlx5 mmap command (`MLX5_IB_MMAP_*`) and index from the offset.
    pub command: u32,
    pub index: u32,
    pub len: usize,
    pub addr: u64,
    /// 0, or the errno the mmap failed with.
    pub errno: i32,
}

/// A CQ as the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cq {
    pub handle: u32,
    pub cqn: u32,
    pub buf_addr: u64,
    pub db_addr: u64,
    pub cqe_size: u32,
    /// Ring entries (a power of two).
    pub entries: u32,
    pub uar_page_index: u16,
}

/// A QP as the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qp {
    pub handle: u32,
    pub qpn: u32,
    /// `IB_QPT_*`.
    pub qp_type: u8,
    pub buf_addr: u64,
    pub db_addr: u64,
    pub sq_wqe_cnt: u32,
    pub rq_wqe_cnt: u32,
    pub rq_wqe_shift: u32,
    /// Byte offset of the send queue in the buffer (after the receive queue).
    pub sq_offset: u64,
    /// The bfreg the kernel gave (the library's index: 4 per UAR).
    pub bfreg_index: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub srq: Option<u32>,
    /// Last state set by MODIFY_QP (`IB_QPS_*`).
    pub state: u8,
    /// The user index the library gave (CQE version 1 completions carry it).
    pub uidx: u32,
}

/// An SRQ as the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Srq {
    pub handle: u32,
    pub srqn: u32,
    pub buf_addr: u64,
    pub db_addr: u64,
    pub max_wr: u32,
    pub max_sge: u32,
    /// The user index the library gave.
    pub uidx: u32,
    /// log2 of the WQE stride: `roundup_pow_of_two(16 + 16 * max_sge)`, at least 32.
    pub wqe_shift: u32,
}

/// A memory region.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mr {
    pub handle: u32,
    pub start: u64,
    pub length: u64,
    pub iova: u64,
    pub lkey: u32,
    pub rkey: u32,
    pub access: u32,
}

/// One opened context's objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    pub ctx: u32,
    /// The fd number the process got for the device node.
    pub fd: i32,
    /// UAR pages mapped: (mmap index, address).
    pub uars: Vec<(u32, u64)>,
    pub cqs: Vec<Cq>,
    pub qps: Vec<Qp>,
    pub srqs: Vec<Srq>,
    pub mrs: Vec<Mr>,
    /// The CQE version GET_CONTEXT granted (1: CQEs carry user indexes).
    pub cqe_version: u8,
}

/// Everything: the log since the last [`take`](crate::kernel::Kernel::take_log)
/// and the live contexts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub commands: Vec<Command>,
    pub mmaps: Vec<Mmap>,
    /// Ioctls refused with `ENOTTY` since the last take: (ctx, request).
    pub ioctls: Vec<(u32, u64)>,
    pub contexts: Vec<Context>,
}

/// The snapshot as one line of JSON.
pub fn to_json(s: &Snapshot) -> Result<String, String> {
    serde_json::to_string(s).map_err(|e| e.to_string())
}

/// A snapshot from [`to_json`]'s text.
pub fn from_json(text: &str) -> Result<Snapshot, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}
