//! The uverbs device node of the fake ConnectX-5: legacy `write()`
//! commands with mlx5_ib's driver data, `ENOTTY` for every ioctl, and the
//! UAR mmaps. One [`Kernel`] per process (a global behind a mutex); each
//! open of the node is a context with its own numbering.
//!
//! Sizes, rounding and checks follow `drivers/infiniband/hw/mlx5` (6.x):
//! a CQ's ring is `roundup_pow_of_two(cqe + 1)` entries of 64 or 128
//! bytes; a QP's buffer is its receive queue (`rq_wqe_count <<
//! rq_wqe_shift`) followed by its send queue (`sq_wqe_count` 64-byte
//! basic blocks); an SRQ's ring is `roundup_pow_of_two(max_wr + 1)`
//! entries; bfregs are handed out as `alloc_bfreg()` does for a v2 context
//! (an unused low-latency register first, then the least-used medium one).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use nix::errno::Errno;
use rverbs_uapi::ib_user_verbs::*;
use rverbs_uapi::mlx5_abi::*;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::attrs;
use crate::ioctl::Mode;
use crate::record::{self, Command, Mmap, Snapshot};
use crate::user::copy_to_user;

/// A command's result: the core answer and the driver answer, each to be cut
/// to the length the caller gave.
type Answer = Result<(Vec<u8>, Vec<u8>), Errno>;

/// A command as it arrived.
pub(crate) struct Parsed {
    pub(crate) code: u32,
    pub(crate) extended: bool,
    pub(crate) core: Vec<u8>,
    pub(crate) drv: Vec<u8>,
    /// Where the core and the driver answers go (0: nowhere).
    pub(crate) core_out: u64,
    pub(crate) drv_out: u64,
    pub(crate) core_out_len: usize,
    pub(crate) drv_out_len: usize,
    /// `write`, `invoke_write` or `ioctl`: how it came.
    pub(crate) path: &'static str,
}

/// The whole fake kernel: contexts by fd, and the log.
#[derive(Default)]
pub struct Kernel {
    contexts: BTreeMap<i32, Ctx>,
    next_ctx: u32,
    log: Snapshot,
}

/// One opened device context.
#[derive(Default)]
struct Ctx {
    id: u32,
    fd: i32,
    opened: bool,
    /// Handles in use (one number space for all objects, as the kernel's
    /// per-file xarray; the lowest free number is taken).
    handles: BTreeSet<u32>,
    pds: BTreeMap<u32, u32>,
    mrs: BTreeMap<u32, record::Mr>,
    cqs: BTreeMap<u32, record::Cq>,
    qps: BTreeMap<u32, record::Qp>,
    srqs: BTreeMap<u32, record::Srq>,
    ahs: BTreeSet<u32>,
    uars: Vec<(u32, u64)>,
    /// Per bfreg: how many QPs use it (`bfregi->count`).
    bfreg_count: Vec<u32>,
    low_lat_bfregs: u32,
    /// The kernel this context talks to (write-only, or ioctl with dynamic UARs).
    mode: Mode,
    /// The CQE version GET_CONTEXT granted.
    cqe_version: u8,
    /// Dynamic UAR pages by handle: (page id, type, mmap pgoff).
    dyn_uars: BTreeMap<u32, (u32, u32, u64)>,
    next_page_id: u32,
    /// Counters for the numbers the device assigns.
    next_pdn: u32,
    next_cqn: u32,
    next_qpn: u32,
    next_srqn: u32,
    next_mkey: u32,
}

static KERNEL: Mutex<Option<Kernel>> = Mutex::new(None);

/// Environment: `0` makes the kernel grant CQE version 0 only (kernels
/// before 4.6); otherwise version 1.
pub const ENV_CQE_VERSION: &str = "RVERBS_FAKE_MLX5_CQE_VERSION";

fn max_cqe_version() -> u8 {
    if std::env::var(ENV_CQE_VERSION).as_deref() == Ok("0") {
        0
    } else {
        1
    }
}

/// The first mmap page offset of dynamic UAR pages (mlx5_ib's
/// `MLX5_IB_MMAP_OFFSET_START << 16`).
const DYN_PGOFF: u64 = 9 << 16;
/// The command an mmap of a dynamic UAR page is recorded with: this plus
/// its type (0 BlueFlame, 1 NC).
pub const DYN_MMAP_COMMAND: u32 = 0x100;

/// The process's fake kernel.
pub fn lock() -> KernelGuard {
    let mut g = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(Kernel::default);
    KernelGuard(g)
}

/// A locked [`Kernel`].
pub struct KernelGuard(MutexGuard<'static, Option<Kernel>>);

impl std::ops::Deref for KernelGuard {
    type Target = Kernel;
    fn deref(&self) -> &Kernel {
        self.0.as_ref().expect("initialised")
    }
}

impl std::ops::DerefMut for KernelGuard {
    fn deref_mut(&mut self) -> &mut Kernel {
        self.0.get_or_insert_with(Kernel::default)
    }
}

fn debug() -> bool {
    std::env::var_os(crate::ENV_DEBUG).is_some_and(|v| v == "1")
}

/// Reads a `T` from the front of `b`, zero-extended when `b` is shorter (the
/// kernel's `copy_from_udata` of a shorter struct from an older library).
fn read_ext<T: FromBytes + IntoBytes + KnownLayout + Immutable + Default>(b: &[u8]) -> T {
    let mut t = T::default();
    let n = b.len().min(std::mem::size_of::<T>());
    t.as_mut_bytes()[..n].copy_from_slice(&b[..n]);
    t
}

/// Legacy commands: (name, core input size, core answer size, whether the
/// input starts with the response pointer).
fn legacy_layout(code: u32) -> Option<(&'static str, usize, usize, bool)> {
    use std::mem::size_of as sz;
    Some(match code {
        IB_USER_VERBS_CMD_GET_CONTEXT => ("GET_CONTEXT", 8, sz::<ib_uverbs_get_context_resp>(), true),
        IB_USER_VERBS_CMD_QUERY_DEVICE => ("QUERY_DEVICE", 8, sz::<ib_uverbs_query_device_resp>(), true),
        IB_USER_VERBS_CMD_QUERY_PORT => {
            ("QUERY_PORT", sz::<ib_uverbs_query_port>(), sz::<ib_uverbs_query_port_resp>(), true)
        }
        IB_USER_VERBS_CMD_ALLOC_PD => ("ALLOC_PD", 8, sz::<ib_uverbs_alloc_pd_resp>(), true),
        IB_USER_VERBS_CMD_DEALLOC_PD => ("DEALLOC_PD", sz::<ib_uverbs_dealloc_pd>(), 0, false),
        IB_USER_VERBS_CMD_CREATE_AH => {
            ("CREATE_AH", sz::<ib_uverbs_create_ah>(), sz::<ib_uverbs_create_ah_resp>(), true)
        }
        IB_USER_VERBS_CMD_DESTROY_AH => ("DESTROY_AH", sz::<ib_uverbs_destroy_ah>(), 0, false),
        IB_USER_VERBS_CMD_REG_MR => ("REG_MR", sz::<ib_uverbs_reg_mr>(), sz::<ib_uverbs_reg_mr_resp>(), true),
        IB_USER_VERBS_CMD_DEREG_MR => ("DEREG_MR", sz::<ib_uverbs_dereg_mr>(), 0, false),
        IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => ("CREATE_COMP_CHANNEL", 8, 4, true),
        IB_USER_VERBS_CMD_CREATE_CQ => {
            ("CREATE_CQ", sz::<ib_uverbs_create_cq>(), sz::<ib_uverbs_create_cq_resp>(), true)
        }
        IB_USER_VERBS_CMD_RESIZE_CQ => {
            ("RESIZE_CQ", sz::<ib_uverbs_resize_cq>(), sz::<ib_uverbs_resize_cq_resp>(), true)
        }
        IB_USER_VERBS_CMD_DESTROY_CQ => {
            ("DESTROY_CQ", sz::<ib_uverbs_destroy_cq>(), sz::<ib_uverbs_destroy_cq_resp>(), true)
        }
        IB_USER_VERBS_CMD_REQ_NOTIFY_CQ => ("REQ_NOTIFY_CQ", sz::<ib_uverbs_req_notify_cq>(), 0, false),
        IB_USER_VERBS_CMD_CREATE_QP => {
            ("CREATE_QP", sz::<ib_uverbs_create_qp>(), sz::<ib_uverbs_create_qp_resp>(), true)
        }
        IB_USER_VERBS_CMD_QUERY_QP => ("QUERY_QP", sz::<ib_uverbs_query_qp>(), sz::<ib_uverbs_query_qp_resp>(), true),
        IB_USER_VERBS_CMD_MODIFY_QP => ("MODIFY_QP", sz::<ib_uverbs_modify_qp>(), 0, false),
        IB_USER_VERBS_CMD_DESTROY_QP => {
            ("DESTROY_QP", sz::<ib_uverbs_destroy_qp>(), sz::<ib_uverbs_destroy_qp_resp>(), true)
        }
        IB_USER_VERBS_CMD_CREATE_SRQ => {
            ("CREATE_SRQ", sz::<ib_uverbs_create_srq>(), sz::<ib_uverbs_create_srq_resp>(), true)
        }
        IB_USER_VERBS_CMD_MODIFY_SRQ => ("MODIFY_SRQ", sz::<ib_uverbs_modify_srq>(), 0, false),
        IB_USER_VERBS_CMD_QUERY_SRQ => {
            ("QUERY_SRQ", sz::<ib_uverbs_query_srq>(), sz::<ib_uverbs_query_srq_resp>(), true)
        }
        IB_USER_VERBS_CMD_DESTROY_SRQ => {
            ("DESTROY_SRQ", sz::<ib_uverbs_destroy_srq>(), sz::<ib_uverbs_destroy_srq_resp>(), true)
        }
        _ => return None,
    })
}

/// The core input size of legacy command `code`.
pub(crate) fn legacy_core_len(code: u32) -> Option<usize> {
    legacy_layout(code).map(|l| l.1)
}

fn ex_name(code: u32) -> &'static str {
    match code {
        IB_USER_VERBS_EX_CMD_QUERY_DEVICE => "EX_QUERY_DEVICE",
        IB_USER_VERBS_EX_CMD_CREATE_CQ => "EX_CREATE_CQ",
        IB_USER_VERBS_EX_CMD_CREATE_QP => "EX_CREATE_QP",
        IB_USER_VERBS_EX_CMD_MODIFY_QP => "EX_MODIFY_QP",
        _ => "EX_UNKNOWN",
    }
}

fn parse(buf: &[u8]) -> Result<Parsed, Errno> {
    let hdr = ib_uverbs_cmd_hdr::read_from_prefix(buf).map_err(|_| Errno::EINVAL)?.0;
    if hdr.command & IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
        let ex = ib_uverbs_ex_cmd_hdr::read_from_prefix(&buf[8..]).map_err(|_| Errno::EINVAL)?.0;
        let core_len = usize::from(hdr.in_words) * 8;
        let drv_len = usize::from(ex.provider_in_words) * 8;
        if buf.len() != 24 + core_len + drv_len {
            return Err(Errno::EINVAL);
        }
        let core_out_len = usize::from(hdr.out_words) * 8;
        return Ok(Parsed {
            code: hdr.command & IB_USER_VERBS_CMD_COMMAND_MASK,
            extended: true,
            core: buf[24..24 + core_len].to_vec(),
            drv: buf[24 + core_len..].to_vec(),
            core_out: ex.response,
            drv_out: ex.response + core_out_len as u64,
            core_out_len,
            drv_out_len: usize::from(ex.provider_out_words) * 8,
            path: "write",
        });
    }
    if usize::from(hdr.in_words) * 4 != buf.len() {
        return Err(Errno::EINVAL);
    }
    let (_, core_in, core_out, has_resp) = legacy_layout(hdr.command).ok_or(Errno::EINVAL)?;
    let body = &buf[8..];
    if body.len() < core_in {
        return Err(Errno::EINVAL);
    }
    let out_len = usize::from(hdr.out_words) * 4;
    if out_len < core_out {
        return Err(Errno::ENOSPC);
    }
    let resp = if has_resp { u64::from_ne_bytes(body[..8].try_into().expect("8 bytes")) } else { 0 };
    Ok(Parsed {
        code: hdr.command,
        extended: false,
        core: body[..core_in].to_vec(),
        drv: body[core_in..].to_vec(),
        core_out: resp,
        drv_out: resp + core_out as u64,
        core_out_len: core_out,
        drv_out_len: out_len - core_out,
        path: "write",
    })
}

impl Kernel {
    /// A process opened the node and got `fd`.
    pub fn open(&mut self, fd: i32) {
        let id = self.next_ctx;
        self.next_ctx += 1;
        let mode = crate::ioctl::mode();
        self.contexts.insert(fd, Ctx { id, fd, mode, ..Default::default() });
    }

    /// The kernel mode of `fd`'s context.
    pub(crate) fn mode_of(&self, fd: i32) -> Mode {
        self.contexts.get(&fd).map_or(Mode::Write, |c| c.mode)
    }

    /// The context number of `fd` (`u32::MAX`: none).
    pub(crate) fn ctx_id(&self, fd: i32) -> u32 {
        self.contexts.get(&fd).map_or(u32::MAX, |c| c.id)
    }

    /// A dynamic UAR page of `kind` (`MLX5_IB_UAPI_UAR_ALLOC_TYPE_*`):
    /// (handle, page id, mmap offset). The offset is an mmap entry's key, as
    /// mlx5_ib hands them out (page offsets from `MLX5_IB_MMAP_OFFSET_START
    /// << 16`).
    pub(crate) fn dyn_uar_alloc(&mut self, fd: i32, kind: u32, page: usize) -> Result<(u32, u32, u64), Errno> {
        let ctx = self.contexts.get_mut(&fd).ok_or(Errno::EBADF)?;
        if !ctx.opened || ctx.mode != Mode::Ioctl || kind > 1 {
            return Err(Errno::EINVAL);
        }
        let h = ctx.alloc_handle();
        let page_id = 0x40 + ctx.next_page_id;
        let pgoff = DYN_PGOFF + u64::from(ctx.next_page_id);
        ctx.next_page_id += 1;
        ctx.dyn_uars.insert(h, (page_id, kind, pgoff));
        Ok((h, page_id, pgoff * page as u64))
    }

    /// Frees a dynamic UAR page.
    pub(crate) fn dyn_uar_free(&mut self, fd: i32, handle: u32) -> Result<(), Errno> {
        let ctx = self.contexts.get_mut(&fd).ok_or(Errno::EBADF)?;
        ctx.dyn_uars.remove(&handle).ok_or(Errno::EINVAL)?;
        ctx.handles.remove(&handle);
        Ok(())
    }

    /// Whether `fd` is an open fake node.
    pub fn is_fake(&self, fd: i32) -> bool {
        self.contexts.contains_key(&fd)
    }

    /// The process closed `fd`: the context and its objects go.
    pub fn close(&mut self, fd: i32) -> bool {
        self.contexts.remove(&fd).is_some()
    }

    /// An ioctl on the node: there is no ioctl framework here.
    pub fn ioctl(&mut self, fd: i32, request: u64) -> Errno {
        let ctx = self.contexts.get(&fd).map_or(u32::MAX, |c| c.id);
        self.log.ioctls.push((ctx, request));
        Errno::ENOTTY
    }

    /// An ioctl method the fake does not have: noted, `EPROTONOSUPPORT`.
    pub(crate) fn unsupported(&mut self, fd: i32) -> Errno {
        let ctx = self.contexts.get(&fd).map_or(u32::MAX, |c| c.id);
        self.log.ioctls.push((ctx, u64::from(rverbs_uapi::rdma_user_ioctl_cmds::RDMA_VERBS_IOCTL)));
        Errno::EPROTONOSUPPORT
    }

    /// Decodes an mmap of the node at byte `offset`: the (command, index)
    /// the mlx5 driver would serve, or its error.
    pub fn mmap_check(&self, fd: i32, offset: u64, len: usize, page_size: usize) -> Result<(u32, u32), Errno> {
        let ctx = self.contexts.get(&fd).ok_or(Errno::EBADF)?;
        if !ctx.opened || !offset.is_multiple_of(page_size as u64) {
            return Err(Errno::EINVAL);
        }
        let pgoff = offset / page_size as u64;
        if pgoff >= DYN_PGOFF {
            // A dynamic UAR page: its mmap entry.
            let &(page_id, kind, _) = ctx.dyn_uars.values().find(|u| u.2 == pgoff).ok_or(Errno::EINVAL)?;
            if len != page_size {
                return Err(Errno::EINVAL);
            }
            return Ok((DYN_MMAP_COMMAND + kind, page_id));
        }
        let command = ((pgoff >> 8) & 0xff) as u32;
        let index = (pgoff & 0xff) as u32;
        match command {
            MLX5_IB_MMAP_REGULAR_PAGE | MLX5_IB_MMAP_WC_PAGE | MLX5_IB_MMAP_NC_PAGE => {
                let pages = ctx.bfreg_count.len() as u32 / 2;
                if index >= pages || len != page_size {
                    return Err(Errno::EINVAL);
                }
                Ok((command, index))
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// Records an mmap of the node (done or failed).
    pub fn mmap_done(&mut self, fd: i32, command: u32, index: u32, len: usize, addr: u64, errno: i32) {
        let Some(ctx) = self.contexts.get_mut(&fd) else { return };
        if errno == 0 {
            ctx.uars.push((index, addr));
        }
        self.log.mmaps.push(Mmap { ctx: ctx.id, command, index, len, addr, errno });
    }

    /// A `write()` of a command to the node: the byte count or the errno.
    ///
    /// # Safety
    /// The command's response pointer must be valid for writes of the
    /// answer lengths its header gives (the kernel's `copy_to_user`, which
    /// here cannot fault).
    pub unsafe fn write(&mut self, fd: i32, buf: &[u8]) -> Result<usize, Errno> {
        let p = parse(buf)?;
        // SAFETY: forwarded.
        unsafe { self.execute(fd, &p) }?;
        Ok(buf.len())
    }

    /// Runs a write command (from `write()` or `INVOKE_WRITE`), answers it
    /// and records it.
    ///
    /// # Safety
    /// `p.core_out`/`p.drv_out` must be valid for writes of their lengths.
    pub(crate) unsafe fn execute(&mut self, fd: i32, p: &Parsed) -> Result<(), Errno> {
        let ctx = self.contexts.get_mut(&fd).ok_or(Errno::EBADF)?;
        let name = if p.extended { ex_name(p.code) } else { legacy_layout(p.code).map_or("?", |l| l.0) };
        let mut rec = Command {
            ctx: ctx.id,
            code: p.code,
            extended: p.extended,
            name: name.to_owned(),
            core_in: p.core.clone(),
            drv_in: p.drv.clone(),
            pointers: pointer_fields(p),
            path: p.path.to_owned(),
            ..Default::default()
        };
        let answer = if p.extended { ctx.extended(p) } else { ctx.legacy(p) };
        let result = match answer {
            Ok((mut core, mut drv)) => {
                core.resize(p.core_out_len, 0);
                drv.truncate(p.drv_out_len);
                // SAFETY: the caller's contract: the answers' places hold
                // core_out_len and drv_out_len bytes.
                unsafe {
                    copy_to_user(p.core_out, &core);
                    copy_to_user(p.drv_out, &drv);
                }
                rec.core_out = core;
                rec.drv_out = drv;
                Ok(())
            }
            Err(e) => {
                rec.errno = e as i32;
                Err(e)
            }
        };
        if debug() {
            eprintln!(
                "fake-mlx5: ctx {} {} core {:02x?} drv {:02x?} -> {:?}",
                rec.ctx, rec.name, rec.core_in, rec.drv_in, result
            );
        }
        self.log.commands.push(rec);
        result
    }

    /// Records a command that was not a write command (an ioctl method).
    pub(crate) fn record(&mut self, rec: Command) {
        if debug() {
            eprintln!("fake-mlx5: ctx {} {} ({}) -> errno {}", rec.ctx, rec.name, rec.path, rec.errno);
        }
        self.log.commands.push(rec);
    }

    /// The log since the last call, and the live contexts.
    pub fn take_log(&mut self) -> Snapshot {
        let mut s = std::mem::take(&mut self.log);
        s.contexts = self.contexts.values().map(Ctx::describe).collect();
        s
    }
}

/// The input ranges that hold the caller's addresses or cookies.
fn pointer_fields(p: &Parsed) -> Vec<(bool, usize, usize)> {
    let mut v = Vec::new();
    if !p.extended && legacy_layout(p.code).is_some_and(|l| l.3) {
        v.push((false, 0, 8));
    }
    let code = p.code;
    if p.extended {
        match code {
            IB_USER_VERBS_EX_CMD_CREATE_CQ | IB_USER_VERBS_EX_CMD_CREATE_QP => v.push((false, 0, 8)),
            _ => {}
        }
    } else {
        match code {
            IB_USER_VERBS_CMD_CREATE_CQ
            | IB_USER_VERBS_CMD_CREATE_QP
            | IB_USER_VERBS_CMD_CREATE_SRQ
            | IB_USER_VERBS_CMD_CREATE_AH => v.push((false, 8, 8)),
            IB_USER_VERBS_CMD_REG_MR => {
                v.push((false, 8, 8));
                v.push((false, 24, 8));
            }
            _ => {}
        }
    }
    match code {
        // mlx5_ib_create_cq / _qp / _srq: buf_addr, db_addr.
        IB_USER_VERBS_CMD_CREATE_CQ | IB_USER_VERBS_CMD_CREATE_QP | IB_USER_VERBS_CMD_CREATE_SRQ => {
            v.push((true, 0, 16));
        }
        // mlx5_ib_resize_cq: buf_addr.
        IB_USER_VERBS_CMD_RESIZE_CQ if !p.extended => v.push((true, 0, 8)),
        _ => {}
    }
    v
}

impl Ctx {
    fn describe(&self) -> record::Context {
        record::Context {
            ctx: self.id,
            fd: self.fd,
            uars: self.uars.clone(),
            cqs: self.cqs.values().cloned().collect(),
            qps: self.qps.values().cloned().collect(),
            srqs: self.srqs.values().cloned().collect(),
            mrs: self.mrs.values().cloned().collect(),
            cqe_version: self.cqe_version,
        }
    }

    fn alloc_handle(&mut self) -> u32 {
        let h = (0..).find(|h| !self.handles.contains(h)).expect("a free handle");
        self.handles.insert(h);
        h
    }

    fn legacy(&mut self, p: &Parsed) -> Answer {
        if !self.opened && p.code != IB_USER_VERBS_CMD_GET_CONTEXT {
            return Err(Errno::EINVAL);
        }
        match p.code {
            IB_USER_VERBS_CMD_GET_CONTEXT => self.get_context(&p.drv),
            IB_USER_VERBS_CMD_QUERY_DEVICE => Ok((attrs::device().as_bytes().to_vec(), Vec::new())),
            IB_USER_VERBS_CMD_QUERY_PORT => {
                let c: ib_uverbs_query_port = read_ext(&p.core);
                if c.port_num != 1 {
                    return Err(Errno::EINVAL);
                }
                Ok((attrs::port().as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_ALLOC_PD => self.alloc_pd(),
            IB_USER_VERBS_CMD_DEALLOC_PD => {
                let c: ib_uverbs_dealloc_pd = read_ext(&p.core);
                self.pds.remove(&c.pd_handle).ok_or(Errno::EINVAL)?;
                self.handles.remove(&c.pd_handle);
                Ok(Default::default())
            }
            IB_USER_VERBS_CMD_REG_MR => self.reg_mr(read_ext(&p.core)),
            IB_USER_VERBS_CMD_DEREG_MR => {
                let c: ib_uverbs_dereg_mr = read_ext(&p.core);
                self.mrs.remove(&c.mr_handle).ok_or(Errno::EINVAL)?;
                self.handles.remove(&c.mr_handle);
                Ok(Default::default())
            }
            IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
                let fd = self.new_fd()?;
                Ok((ib_uverbs_create_comp_channel_resp { fd: fd as u32 }.as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_CREATE_CQ => {
                let c: ib_uverbs_create_cq = read_ext(&p.core);
                let (h, cqe, drv) = self.create_cq(c.cqe, &p.drv)?;
                Ok((ib_uverbs_create_cq_resp { cq_handle: h, cqe, driver_data: [] }.as_bytes().to_vec(), drv))
            }
            IB_USER_VERBS_CMD_RESIZE_CQ => self.resize_cq(read_ext(&p.core), &p.drv),
            IB_USER_VERBS_CMD_DESTROY_CQ => {
                let c: ib_uverbs_destroy_cq = read_ext(&p.core);
                if self.qps.values().any(|q| q.send_cq == c.cq_handle || q.recv_cq == c.cq_handle) {
                    return Err(Errno::EBUSY);
                }
                self.cqs.remove(&c.cq_handle).ok_or(Errno::EINVAL)?;
                self.handles.remove(&c.cq_handle);
                Ok((ib_uverbs_destroy_cq_resp::default().as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_REQ_NOTIFY_CQ => Err(Errno::EOPNOTSUPP),
            IB_USER_VERBS_CMD_CREATE_QP => {
                let c: ib_uverbs_create_qp = read_ext(&p.core);
                let ex = ib_uverbs_ex_create_qp {
                    user_handle: c.user_handle,
                    pd_handle: c.pd_handle,
                    send_cq_handle: c.send_cq_handle,
                    recv_cq_handle: c.recv_cq_handle,
                    srq_handle: c.srq_handle,
                    max_send_wr: c.max_send_wr,
                    max_recv_wr: c.max_recv_wr,
                    max_send_sge: c.max_send_sge,
                    max_recv_sge: c.max_recv_sge,
                    max_inline_data: c.max_inline_data,
                    sq_sig_all: c.sq_sig_all,
                    qp_type: c.qp_type,
                    is_srq: c.is_srq,
                    ..Default::default()
                };
                let (resp, drv) = self.create_qp(&ex, &p.drv)?;
                Ok((resp.as_bytes().to_vec(), drv))
            }
            IB_USER_VERBS_CMD_MODIFY_QP => self.modify_qp(&read_ext(&p.core)),
            IB_USER_VERBS_CMD_QUERY_QP => self.query_qp(read_ext(&p.core)),
            IB_USER_VERBS_CMD_DESTROY_QP => {
                let c: ib_uverbs_destroy_qp = read_ext(&p.core);
                let qp = self.qps.remove(&c.qp_handle).ok_or(Errno::EINVAL)?;
                self.handles.remove(&c.qp_handle);
                if let Some(n) = self.bfreg_count.get_mut(qp.bfreg_index as usize / 4 * 2 + qp.bfreg_index as usize % 4)
                {
                    *n = n.saturating_sub(1);
                }
                Ok((ib_uverbs_destroy_qp_resp::default().as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_CREATE_SRQ => self.create_srq(read_ext(&p.core), &p.drv),
            IB_USER_VERBS_CMD_MODIFY_SRQ => {
                let c: ib_uverbs_modify_srq = read_ext(&p.core);
                self.srqs.get(&c.srq_handle).ok_or(Errno::EINVAL)?;
                // IB_SRQ_MAX_WR: mlx5 cannot resize an SRQ.
                if c.attr_mask & 1 != 0 {
                    return Err(Errno::EINVAL);
                }
                Ok(Default::default())
            }
            IB_USER_VERBS_CMD_QUERY_SRQ => {
                let c: ib_uverbs_query_srq = read_ext(&p.core);
                let s = self.srqs.get(&c.srq_handle).ok_or(Errno::EINVAL)?;
                let r = ib_uverbs_query_srq_resp { max_wr: s.max_wr, max_sge: s.max_sge, ..Default::default() };
                Ok((r.as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_DESTROY_SRQ => {
                let c: ib_uverbs_destroy_srq = read_ext(&p.core);
                self.srqs.remove(&c.srq_handle).ok_or(Errno::EINVAL)?;
                self.handles.remove(&c.srq_handle);
                Ok((ib_uverbs_destroy_srq_resp::default().as_bytes().to_vec(), Vec::new()))
            }
            IB_USER_VERBS_CMD_CREATE_AH => self.create_ah(read_ext(&p.core)),
            IB_USER_VERBS_CMD_DESTROY_AH => {
                let c: ib_uverbs_destroy_ah = read_ext(&p.core);
                if !self.ahs.remove(&c.ah_handle) {
                    return Err(Errno::EINVAL);
                }
                self.handles.remove(&c.ah_handle);
                Ok(Default::default())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    fn extended(&mut self, p: &Parsed) -> Answer {
        if !self.opened {
            return Err(Errno::EINVAL);
        }
        match p.code {
            IB_USER_VERBS_EX_CMD_QUERY_DEVICE => {
                let mut r = attrs::device_ex();
                r.response_length = r.response_length.min(p.core_out_len as u32);
                Ok((r.as_bytes().to_vec(), attrs::mlx5_device().as_bytes().to_vec()))
            }
            IB_USER_VERBS_EX_CMD_CREATE_CQ => {
                let c: ib_uverbs_ex_create_cq = read_ext(&p.core);
                if c.comp_mask != 0 || c.flags != 0 {
                    return Err(Errno::EINVAL);
                }
                let (h, cqe, drv) = self.create_cq(c.cqe, &p.drv)?;
                let r = ib_uverbs_ex_create_cq_resp {
                    base: ib_uverbs_create_cq_resp { cq_handle: h, cqe, driver_data: [] },
                    comp_mask: 0,
                    response_length: std::mem::size_of::<ib_uverbs_ex_create_cq_resp>() as u32,
                };
                Ok((r.as_bytes().to_vec(), drv))
            }
            IB_USER_VERBS_EX_CMD_CREATE_QP => {
                let c: ib_uverbs_ex_create_qp = read_ext(&p.core);
                if c.comp_mask != 0 || c.create_flags != 0 {
                    return Err(Errno::EINVAL);
                }
                let (base, drv) = self.create_qp(&c, &p.drv)?;
                let r = ib_uverbs_ex_create_qp_resp {
                    base,
                    comp_mask: 0,
                    response_length: std::mem::size_of::<ib_uverbs_ex_create_qp_resp>() as u32,
                };
                Ok((r.as_bytes().to_vec(), drv))
            }
            IB_USER_VERBS_EX_CMD_MODIFY_QP => {
                let c: ib_uverbs_ex_modify_qp = read_ext(&p.core);
                self.modify_qp(&c.base)?;
                let r = ib_uverbs_ex_modify_qp_resp {
                    comp_mask: 0,
                    response_length: std::mem::size_of::<ib_uverbs_ex_modify_qp_resp>() as u32,
                };
                Ok((r.as_bytes().to_vec(), Vec::new()))
            }
            _ => Err(Errno::EOPNOTSUPP),
        }
    }

    /// A new fd for the process (the async fd, a completion channel), as
    /// the kernel installs one: the process owns and closes it.
    fn new_fd(&mut self) -> Result<i32, Errno> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new
        // fd, handed to the caller.
        let fd = unsafe { nix::libc::eventfd(0, nix::libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Errno::last());
        }
        Ok(fd)
    }

    /// GET_CONTEXT: mlx5_ib's `alloc_ucontext` without dynamic UARs (the
    /// static bfreg scheme); DEVX is granted as the library asks.
    fn get_context(&mut self, drv: &[u8]) -> Answer {
        if self.opened {
            return Err(Errno::EINVAL);
        }
        if drv.len() < std::mem::size_of::<mlx5_ib_alloc_ucontext_req>() {
            return Err(Errno::EINVAL);
        }
        let req: mlx5_ib_alloc_ucontext_req_v2 = read_ext(drv);
        if req.comp_mask != 0 || req.reserved0 != 0 || req.reserved1 != 0 || req.reserved2 != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        // A 5.7+ kernel takes MLX5_LIB_CAP_DYN_UAR: no static bfregs.
        let dynamic = self.mode == Mode::Ioctl && req.lib_caps & MLX5_LIB_CAP_DYN_UAR != 0;
        // calc_total_bfregs: 4K UARs, one UAR per page, two usable bfregs each.
        let total = if dynamic { 0 } else { req.total_num_bfregs.next_multiple_of(2) };
        if !dynamic && (total == 0 || total > 512 || req.num_low_latency_bfregs > total - 1) {
            return Err(Errno::EINVAL);
        }
        let async_fd = self.new_fd()?;
        self.opened = true;
        self.cqe_version = req.max_cqe_version.min(max_cqe_version());
        self.bfreg_count = vec![0; total as usize];
        self.low_lat_bfregs = req.num_low_latency_bfregs;
        self.next_pdn = 0x10;
        self.next_cqn = 0x400;
        self.next_qpn = 0x1c0;
        self.next_srqn = 0x600;
        self.next_mkey = 0x1000;
        let resp = mlx5_ib_alloc_ucontext_resp {
            qp_tab_size: 1 << 18,
            bf_reg_size: 512,
            tot_bfregs: total,
            cache_line_size: 64,
            max_sq_desc_sz: 512,
            max_rq_desc_sz: 512,
            max_send_wqebb: 1 << 15,
            max_recv_wr: 1 << 15,
            max_srq_recv_wr: 1 << 15,
            num_ports: 1,
            flow_action_flags: 0,
            comp_mask: 0,
            response_length: std::mem::size_of::<mlx5_ib_alloc_ucontext_resp>() as u32,
            cqe_version: self.cqe_version,
            cmds_supp_uhw: (MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | MLX5_USER_CMDS_SUPP_UHW_CREATE_AH) as u8,
            eth_min_inline: MLX5_USER_INLINE_MODE_NONE as u8 + 1,
            clock_info_versions: 0,
            hca_core_clock_offset: 0,
            log_uar_size: 12,
            num_uars_per_page: 1,
            num_dyn_bfregs: 0,
            dump_fill_mkey: 0,
        };
        let core = ib_uverbs_get_context_resp { async_fd: async_fd as u32, num_comp_vectors: 8, driver_data: [] };
        Ok((core.as_bytes().to_vec(), resp.as_bytes().to_vec()))
    }

    fn alloc_pd(&mut self) -> Answer {
        let h = self.alloc_handle();
        let pdn = self.next_pdn;
        self.next_pdn += 1;
        self.pds.insert(h, pdn);
        let core = ib_uverbs_alloc_pd_resp { pd_handle: h, driver_data: [] };
        Ok((core.as_bytes().to_vec(), mlx5_ib_alloc_pd_resp { pdn }.as_bytes().to_vec()))
    }

    fn reg_mr(&mut self, c: ib_uverbs_reg_mr) -> Answer {
        if !self.pds.contains_key(&c.pd_handle) {
            return Err(Errno::EINVAL);
        }
        if c.length == 0 || c.start.checked_add(c.length).is_none() {
            return Err(Errno::EINVAL);
        }
        // Remote write or atomic without local write: the core refuses.
        if c.access_flags & 0xa != 0 && c.access_flags & 1 == 0 {
            return Err(Errno::EINVAL);
        }
        let h = self.alloc_handle();
        let key = (self.next_mkey << 8) | 0x42;
        self.next_mkey += 1;
        let mr = record::Mr {
            handle: h,
            start: c.start,
            length: c.length,
            iova: c.hca_va,
            lkey: key,
            rkey: key,
            access: c.access_flags,
        };
        self.mrs.insert(h, mr);
        let core = ib_uverbs_reg_mr_resp { mr_handle: h, lkey: key, rkey: key, driver_data: [] };
        Ok((core.as_bytes().to_vec(), Vec::new()))
    }

    /// A CQ's ring: `roundup_pow_of_two(cqe + 1)` entries; the handle, the
    /// `cqe` answer and the driver answer.
    fn create_cq(&mut self, cqe: u32, drv: &[u8]) -> Result<(u32, u32, Vec<u8>), Errno> {
        if drv.len() < 24 {
            return Err(Errno::EINVAL);
        }
        let d: mlx5_ib_create_cq = read_ext(drv);
        if cqe == 0 || cqe >= 1 << 22 {
            return Err(Errno::EINVAL);
        }
        let entries = (cqe + 1).next_power_of_two();
        if !(d.cqe_size == 64 || d.cqe_size == 128) || d.buf_addr == 0 || d.db_addr == 0 {
            return Err(Errno::EINVAL);
        }
        if d.cqe_comp_en != 0 || d.flags & !(MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX as u16) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let h = self.alloc_handle();
        let cqn = self.next_cqn;
        self.next_cqn += 1;
        self.cqs.insert(
            h,
            record::Cq {
                handle: h,
                cqn,
                buf_addr: d.buf_addr,
                db_addr: d.db_addr,
                cqe_size: d.cqe_size,
                entries,
                uar_page_index: d.uar_page_index,
            },
        );
        Ok((h, entries - 1, mlx5_ib_create_cq_resp { cqn, reserved: 0 }.as_bytes().to_vec()))
    }

    fn resize_cq(&mut self, c: ib_uverbs_resize_cq, drv: &[u8]) -> Answer {
        let d: mlx5_ib_resize_cq = read_ext(drv);
        let cq = self.cqs.get_mut(&c.cq_handle).ok_or(Errno::EINVAL)?;
        if c.cqe == 0 || c.cqe >= 1 << 22 || !(d.cqe_size == 64 || d.cqe_size == 128) || d.buf_addr == 0 {
            return Err(Errno::EINVAL);
        }
        let entries = (c.cqe + 1).next_power_of_two();
        cq.entries = entries;
        cq.buf_addr = d.buf_addr;
        cq.cqe_size = u32::from(d.cqe_size);
        let r = ib_uverbs_resize_cq_resp { cqe: entries - 1, reserved: 0, driver_data: [] };
        Ok((r.as_bytes().to_vec(), Vec::new()))
    }

    /// `alloc_bfreg()` for a v2 context: an unused low-latency bfreg, else
    /// the least-used medium one, else bfreg 0. Returns the library's index
    /// (`adjust_bfregn`: four per UAR, two of them usable).
    fn alloc_bfreg(&mut self) -> u32 {
        let total = self.bfreg_count.len() as u32;
        let med = total.saturating_sub(self.low_lat_bfregs + 1);
        let first_hi = med + 1;
        let mut pick = None;
        for i in first_hi..total {
            if self.bfreg_count[i as usize] == 0 {
                pick = Some(i);
                break;
            }
        }
        if pick.is_none() && med > 0 {
            let mut min = 1;
            for i in 1..first_hi {
                if self.bfreg_count[i as usize] < self.bfreg_count[min as usize] {
                    min = i;
                }
                if self.bfreg_count[min as usize] == 0 {
                    break;
                }
            }
            pick = Some(min);
        }
        let n = pick.unwrap_or(0);
        self.bfreg_count[n as usize] += 1;
        n / 2 * 4 + n % 2
    }

    fn create_qp(
        &mut self,
        c: &ib_uverbs_ex_create_qp,
        drv: &[u8],
    ) -> Result<(ib_uverbs_create_qp_resp, Vec<u8>), Errno> {
        // IB_QPT_RC 2, UC 3, UD 4.
        if !(2..=4).contains(&c.qp_type) {
            return Err(Errno::EOPNOTSUPP);
        }
        if !self.pds.contains_key(&c.pd_handle)
            || !self.cqs.contains_key(&c.send_cq_handle)
            || !self.cqs.contains_key(&c.recv_cq_handle)
        {
            return Err(Errno::EINVAL);
        }
        let srq = if c.is_srq != 0 {
            self.srqs.get(&c.srq_handle).ok_or(Errno::EINVAL)?;
            Some(c.srq_handle)
        } else {
            None
        };
        if drv.len() < 40 {
            return Err(Errno::EINVAL);
        }
        let d: mlx5_ib_create_qp = read_ext(drv);
        let known =
            MLX5_QP_FLAG_SIGNATURE | MLX5_QP_FLAG_SCATTER_CQE | MLX5_QP_FLAG_BFREG_INDEX | MLX5_QP_FLAG_UAR_PAGE_INDEX;
        if d.flags & !known != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if d.buf_addr == 0 || d.db_addr == 0 || !d.sq_wqe_count.is_power_of_two() || d.sq_wqe_count > 1 << 15 {
            return Err(Errno::EINVAL);
        }
        let has_rq = srq.is_none() && c.max_recv_wr != 0;
        let (rq_cnt, rq_shift) = if has_rq { (d.rq_wqe_count, d.rq_wqe_shift) } else { (0, 0) };
        if has_rq && (!rq_cnt.is_power_of_two() || rq_cnt > 1 << 15 || !(4..=9).contains(&rq_shift)) {
            return Err(Errno::EINVAL);
        }
        if c.max_send_wr > d.sq_wqe_count || (has_rq && c.max_recv_wr > rq_cnt) {
            return Err(Errno::EINVAL);
        }
        let bfreg_index = if d.flags & MLX5_QP_FLAG_BFREG_INDEX != 0 {
            if d.bfreg_index % 4 >= 2 || d.bfreg_index / 4 * 2 >= self.bfreg_count.len() as u32 {
                return Err(Errno::EINVAL);
            }
            d.bfreg_index
        } else if d.flags & MLX5_QP_FLAG_UAR_PAGE_INDEX != 0 {
            // A dynamic UAR page the library allocated: its page id.
            if !self.dyn_uars.values().any(|u| u.0 == d.bfreg_index) {
                return Err(Errno::EINVAL);
            }
            d.bfreg_index
        } else if self.bfreg_count.is_empty() {
            // A dynamic-UAR context names its UAR page.
            return Err(Errno::EINVAL);
        } else {
            self.alloc_bfreg()
        };
        let h = self.alloc_handle();
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        self.qps.insert(
            h,
            record::Qp {
                handle: h,
                qpn,
                qp_type: c.qp_type,
                buf_addr: d.buf_addr,
                db_addr: d.db_addr,
                sq_wqe_cnt: d.sq_wqe_count,
                rq_wqe_cnt: rq_cnt,
                rq_wqe_shift: rq_shift,
                sq_offset: u64::from(rq_cnt) << rq_shift,
                bfreg_index,
                send_cq: c.send_cq_handle,
                recv_cq: c.recv_cq_handle,
                srq,
                state: 0,
                uidx: d.uidx,
            },
        );
        let resp = ib_uverbs_create_qp_resp {
            qp_handle: h,
            qpn,
            max_send_wr: c.max_send_wr,
            max_recv_wr: if has_rq { c.max_recv_wr } else { 0 },
            max_send_sge: c.max_send_sge,
            max_recv_sge: if has_rq { c.max_recv_sge } else { 0 },
            max_inline_data: c.max_inline_data,
            reserved: 0,
            driver_data: [],
        };
        let drv_out = mlx5_ib_create_qp_resp { bfreg_index, ..Default::default() };
        Ok((resp, drv_out.as_bytes().to_vec()))
    }

    fn modify_qp(&mut self, c: &ib_uverbs_modify_qp) -> Answer {
        let qp = self.qps.get_mut(&c.qp_handle).ok_or(Errno::EINVAL)?;
        // IB_QP_STATE
        if c.attr_mask & 1 != 0 {
            if c.qp_state > 6 {
                return Err(Errno::EINVAL);
            }
            qp.state = c.qp_state;
        }
        Ok(Default::default())
    }

    fn query_qp(&mut self, c: ib_uverbs_query_qp) -> Answer {
        let qp = self.qps.get(&c.qp_handle).ok_or(Errno::EINVAL)?;
        let r = ib_uverbs_query_qp_resp { qp_state: qp.state, cur_qp_state: qp.state, ..Default::default() };
        Ok((r.as_bytes().to_vec(), Vec::new()))
    }

    fn create_srq(&mut self, c: ib_uverbs_create_srq, drv: &[u8]) -> Answer {
        if !self.pds.contains_key(&c.pd_handle) {
            return Err(Errno::EINVAL);
        }
        if drv.len() < 24 {
            return Err(Errno::EINVAL);
        }
        let d: mlx5_ib_create_srq = read_ext(drv);
        if d.buf_addr == 0 || d.db_addr == 0 || c.max_wr == 0 || c.max_wr >= 1 << 15 || c.max_sge > 31 {
            return Err(Errno::EINVAL);
        }
        let entries = (c.max_wr + 1).next_power_of_two();
        let h = self.alloc_handle();
        let srqn = self.next_srqn;
        self.next_srqn += 1;
        let max_wr = entries - 1;
        self.srqs.insert(
            h,
            record::Srq {
                handle: h,
                srqn,
                buf_addr: d.buf_addr,
                db_addr: d.db_addr,
                max_wr,
                max_sge: c.max_sge,
                uidx: d.uidx,
                wqe_shift: (16 + 16 * c.max_sge).next_power_of_two().max(32).trailing_zeros(),
            },
        );
        let r = ib_uverbs_create_srq_resp { srq_handle: h, max_wr, max_sge: c.max_sge, srqn, driver_data: [] };
        Ok((r.as_bytes().to_vec(), mlx5_ib_create_srq_resp { srqn, reserved: 0 }.as_bytes().to_vec()))
    }

    /// CREATE_AH: RoCE needs a GRH; the kernel resolves the destination MAC
    /// (here: from a link-local GID's EUI-64, else `02:00` + the GID's last
    /// four bytes).
    fn create_ah(&mut self, c: ib_uverbs_create_ah) -> Answer {
        if !self.pds.contains_key(&c.pd_handle) || c.attr.port_num != 1 || c.attr.is_global == 0 {
            return Err(Errno::EINVAL);
        }
        if usize::from(c.attr.grh.sgid_index) >= attrs::gids().len() {
            return Err(Errno::EINVAL);
        }
        let g = c.attr.grh.dgid;
        let dmac = if g[0] == 0xfe && g[1] == 0x80 {
            [g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]]
        } else {
            [0x02, 0x00, g[12], g[13], g[14], g[15]]
        };
        let h = self.alloc_handle();
        self.ahs.insert(h);
        let drv = mlx5_ib_create_ah_resp {
            response_length: std::mem::size_of::<mlx5_ib_create_ah_resp>() as u32,
            dmac,
            ..Default::default()
        };
        Ok((ib_uverbs_create_ah_resp { ah_handle: h, driver_data: [] }.as_bytes().to_vec(), drv.as_bytes().to_vec()))
    }
}
