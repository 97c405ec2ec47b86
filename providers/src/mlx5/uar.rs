//! UAR pages and the doorbell / BlueFlame registers in them
//! (providers.md §B.2; rdma-core `mlx5.c mlx5_set_context`,
//! `verbs.c mlx5_alloc_dyn_uar`, `mlx5_insert_dyn_uuars`, `mlx5_get_qp_uar`).
//!
//! Two schemes, chosen by the kernel's `alloc_ucontext` answer:
//!
//! - **dynamic** (`tot_bfregs == 0`, kernel 5.7+): UAR pages are kernel
//!   objects allocated with `MLX5_IB_METHOD_UAR_OBJ_ALLOC` and mapped at the
//!   offset the kernel returns. One NC page per context serves every CQ arm
//!   doorbell (and QPs once the dedicated registers run out, or when the
//!   device has no BlueFlame). QPs get dedicated BlueFlame registers from BF
//!   pages allocated on demand, `num_uars_per_page * 2` registers per page,
//!   at most [`MAX_DEDICATED_BFREGS`] of them; creates name the UAR by page id
//!   (`*_UAR_PAGE_INDEX` flags).
//! - **static** (older kernels): the kernel allocated `tot_bfregs` registers
//!   at context creation; we map all their pages (`mmap` command
//!   `REGULAR_PAGE`, index i) and ring the register the kernel names in
//!   each create-QP answer. CQs arm through page 0.
//!
//! Unsafe code (allowed below): a UAR page is device memory mapped into
//! us; its address is only handed to [`crate::mlx5::mmio::UarMmio`], which
//! does volatile stores.
#![allow(unsafe_code)]

use std::sync::{Arc, Mutex};

use memmap2::MmapRaw;
use rverbs_uapi::mlx5_abi::{MLX5_IB_MMAP_ALLOC_WC, MLX5_IB_MMAP_NC_PAGE, MLX5_IB_MMAP_REGULAR_PAGE};
use rverbs_uapi::mlx5_user_ioctl_cmds::{
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE,
    MLX5_IB_METHOD_UAR_OBJ_ALLOC, MLX5_IB_METHOD_UAR_OBJ_DESTROY, MLX5_IB_OBJECT_UAR,
};
use rverbs_uapi::mlx5_user_ioctl_verbs::{MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC};
use zerocopy::IntoBytes;

use crate::sys::{AttrSlot, IoctlCmd, UverbsFd};
use crate::{Errno, Error, Result};

/// Bytes of one UAR inside a system page (`MLX5_ADAPTER_PAGE_SIZE`).
pub const UAR_SIZE: usize = 4096;
/// Offset of the first doorbell / BlueFlame register in a UAR (`MLX5_BF_OFFSET`).
pub const BF_OFFSET: usize = 0x800;
/// Offset of the CQ arm doorbell in a UAR (`MLX5_CQ_DOORBELL`).
pub const CQ_DOORBELL: usize = 0x20;
/// Registers per UAR (`NUM_BFREGS_PER_UAR`); the static numbering counts these.
pub const BFREGS_PER_UAR: u32 = 4;
/// Registers per UAR that user QPs may use (`MLX5_NUM_NON_FP_BFREGS_PER_UAR`).
pub const NON_FP_BFREGS_PER_UAR: u32 = 2;
/// Register stride in an NC (doorbell-only) UAR (`MLX5_DB_BLUEFLAME_BUFFER_SIZE`).
pub const NC_REG_STRIDE: usize = 0x100;
/// Dedicated (lock-free) BlueFlame registers a context hands out before
/// QPs share the NC page's doorbell register (rdma-core: 4 dedicated +
/// 12 shared-with-lock by default; we use 16 dedicated and no sharing of
/// BlueFlame registers, see docs/MLX5.md).
pub const MAX_DEDICATED_BFREGS: u32 = 16;

/// `pgoff` of an mlx5 UAR mmap, as a byte offset: `((cmd << 8) | index) *
/// page_size`, where `ALLOC_WC` indexes ≥ 256 put the upper index bits at
/// bit 16 (the "extended index"). Other commands take an 8-bit index.
pub fn mmap_offset(cmd: u32, index: u32, page_size: usize) -> Option<u64> {
    let pgoff = if cmd == MLX5_IB_MMAP_ALLOC_WC && index >= 256 {
        (cmd << 8) | (index & 0xff) | ((index >> 8) << 16)
    } else if index < 256 {
        (cmd << 8) | index
    } else {
        return None;
    };
    Some(u64::from(pgoff) * page_size as u64)
}

/// What a UAR page is mapped as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UarKind {
    /// Write-combining: BlueFlame copies allowed.
    Bf,
    /// Non-cached: 8-byte doorbells only.
    Nc,
}

#[derive(Debug)]
enum Backing {
    Mapped(#[allow(dead_code)] MmapRaw),
    /// Plain memory standing in for a UAR page (HCA model; nothing reads it).
    #[cfg(any(test, feature = "mock"))]
    Heap(#[allow(dead_code)] HeapPage),
}

/// Heap memory owned through the raw pointer `Box::into_raw` returned: the
/// `UarPage` (and the `Arc` it lives in) never moves a `Box` whose
/// allocation `UarPage::base` points into (a move would retag it as unique:
/// a Stacked Borrows violation).
#[cfg(any(test, feature = "mock"))]
#[derive(Debug)]
struct HeapPage(*mut [u64]);

#[cfg(any(test, feature = "mock"))]
impl Drop for HeapPage {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` in `UarPage::heap`, turned back once,
        // here, when the page goes.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// One mapped system page of UARs.
#[derive(Debug)]
pub struct UarPage {
    // `Option` so `Drop` can unmap before destroying the kernel object.
    map: Option<Backing>,
    base: *mut u8,
    len: usize,
    page_id: u32,
    kind: UarKind,
    destroy: Option<(Arc<UverbsFd>, u32)>,
}

// SAFETY: the page is a mapping owned by this value (or, for the model, heap
// memory it owns); its address is only used for volatile stores by
// `UarMmio`, whose `unsafe` stores carry their own contract.
unsafe impl Send for UarPage {}
// SAFETY: as above; through `&UarPage` the public methods return plain
// numbers and the address goes only to this crate (`base` is pub(crate)).
unsafe impl Sync for UarPage {}

impl UarPage {
    /// Start of the mapping.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }
    /// Length of the mapping.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Dynamic: the kernel's page id of the first 4 KiB UAR in the page;
    /// static: the page's mmap index.
    pub fn page_id(&self) -> u32 {
        self.page_id
    }
    /// How it is mapped.
    pub fn kind(&self) -> UarKind {
        self.kind
    }

    fn from_map(map: MmapRaw, page_id: u32, kind: UarKind, destroy: Option<(Arc<UverbsFd>, u32)>) -> UarPage {
        let base = map.as_mut_ptr();
        let len = map.len();
        UarPage { map: Some(Backing::Mapped(map)), base, len, page_id, kind, destroy }
    }

    /// A page of plain memory with a made-up page id (HCA model).
    #[cfg(any(test, feature = "mock"))]
    pub(crate) fn heap(page_id: u32, kind: UarKind, len: usize) -> UarPage {
        let mem = HeapPage(Box::into_raw(vec![0u64; len / 8].into_boxed_slice()));
        let base = mem.0.cast::<u8>();
        UarPage { map: Some(Backing::Heap(mem)), base, len, page_id, kind, destroy: None }
    }
}

impl Drop for UarPage {
    fn drop(&mut self) {
        drop(self.map.take());
        if let Some((fd, handle)) = self.destroy.take() {
            if fd.skip_destroy_in_child("mlx5dv_devx_free_uar", handle) {
                return;
            }
            let mut cmd = IoctlCmd::new(MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY);
            cmd.in_obj(MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle);
            if let Err(e) = fd.ioctl(&mut cmd) {
                tracing::warn!(handle, errno = ?e, "mlx5: destroying a UAR object failed");
            }
        }
    }
}

/// The out-parameters of `MLX5_IB_METHOD_UAR_OBJ_ALLOC`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UarAllocOut {
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET`.
    pub mmap_offset: u64,
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH`.
    pub mmap_length: u32,
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID`.
    pub page_id: u32,
}

/// Builds `MLX5_IB_OBJECT_UAR` / `MLX5_IB_METHOD_UAR_OBJ_ALLOC` (five
/// mandatory attributes, as rdma-core's `mlx5_alloc_dyn_uar` sends them);
/// returns it with the slot of the new handle.
pub fn uar_alloc_cmd(kind: UarKind, out: &mut UarAllocOut) -> (IoctlCmd<'_>, AttrSlot) {
    let ty = match kind {
        UarKind::Bf => MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF,
        UarKind::Nc => MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC,
    };
    let UarAllocOut { mmap_offset, mmap_length, page_id } = out;
    let mut cmd = IoctlCmd::new(MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    let h = cmd.new_obj(MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE);
    cmd.in_const(MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, u64::from(ty));
    cmd.out_bytes(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, mmap_offset.as_mut_bytes());
    cmd.out_bytes(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, mmap_length.as_mut_bytes());
    cmd.out_bytes(MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, page_id.as_mut_bytes());
    (cmd, h)
}

/// Who answers for UAR pages. Production has one source, the kernel
/// ([`KernelUars`]); the HCA model of the host tests is another, and
/// implements this in `model.rs`, so this module (and the production code
/// above it) knows nothing of the model. Control path only (context open,
/// QP create): a `dyn` here costs the data path nothing.
pub(crate) trait UarSource: std::fmt::Debug + Send + Sync {
    /// Allocates and maps one dynamic UAR page.
    fn alloc_dynamic(&self, kind: UarKind, page_size: usize) -> Result<UarPage>;
    /// Maps static UAR page `index` (best-effort WC; NC first when the
    /// device has no BlueFlame).
    fn map_static(&self, index: u32, page_size: usize, nc_first: bool) -> Result<UarPage>;
}

/// UAR pages from the kernel: `MLX5_IB_METHOD_UAR_OBJ_ALLOC` and an mmap
/// of the uverbs fd (dynamic scheme), or an mmap at the static page's offset.
#[derive(Debug)]
pub(crate) struct KernelUars(pub(crate) Arc<UverbsFd>);

impl UarSource for KernelUars {
    /// Allocates and maps one dynamic UAR page.
    fn alloc_dynamic(&self, kind: UarKind, page_size: usize) -> Result<UarPage> {
        const VERB: &str = "mlx5dv_devx_alloc_uar";
        let fd = &self.0;
        {
            {
                let mut out = UarAllocOut::default();
                let handle = {
                    let (mut cmd, h) = uar_alloc_cmd(kind, &mut out);
                    fd.ioctl(&mut cmd).map_err(|e| {
                        Error::os(VERB, e).with_message(format!("the kernel refused a {kind:?} UAR page"))
                    })?;
                    cmd.data(h) as u32
                };
                let len = (out.mmap_length as usize).max(page_size);
                match fd.mmap(out.mmap_offset, len) {
                    Ok(map) => Ok(UarPage::from_map(map, out.page_id, kind, Some((fd.clone(), handle)))),
                    Err(e) => {
                        let mut cmd = IoctlCmd::new(MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY);
                        cmd.in_obj(MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle);
                        let _ = fd.ioctl(&mut cmd);
                        Err(Error::os(VERB, Errno::from_raw(e.raw_os_error().unwrap_or(5)))
                            .with_message("cannot map a UAR page"))
                    }
                }
            }
        }
    }

    /// Maps static UAR page `index` (best-effort WC; NC first when the
    /// device has no BlueFlame).
    fn map_static(&self, index: u32, page_size: usize, nc_first: bool) -> Result<UarPage> {
        const VERB: &str = "ibv_open_device";
        let fd = &self.0;
        {
            {
                let cmds: &[(u32, UarKind)] = if nc_first {
                    &[(MLX5_IB_MMAP_NC_PAGE, UarKind::Nc), (MLX5_IB_MMAP_REGULAR_PAGE, UarKind::Bf)]
                } else {
                    &[(MLX5_IB_MMAP_REGULAR_PAGE, UarKind::Bf)]
                };
                let mut last = Errno::EINVAL;
                for &(cmd, kind) in cmds {
                    let off = mmap_offset(cmd, index, page_size).ok_or_else(|| Error::check(VERB, Errno::EINVAL))?;
                    match fd.mmap(off, page_size) {
                        Ok(map) => return Ok(UarPage::from_map(map, index, kind, None)),
                        Err(e) => last = Errno::from_raw(e.raw_os_error().unwrap_or(5)),
                    }
                }
                Err(Error::os(VERB, last).with_message(format!("cannot map static UAR page {index}")))
            }
        }
    }
}

/// Where a register lies and how it is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegInfo {
    /// The UAR index the kernel is told: dynamic, the page id of the 4 KiB
    /// UAR holding the register (`bfreg_index` with
    /// `MLX5_QP_FLAG_UAR_PAGE_INDEX`, `uar_page_index` of a CQ); static, the
    /// kernel's bfreg index.
    pub uar_index: u32,
    /// Byte offset of the register from the start of its mapped page.
    pub offset: usize,
    /// BlueFlame buffer size (`bf_reg_size / 2`, the distance between the
    /// two halves the doorbells alternate between), 0 when only 8-byte
    /// doorbells go to one place of this register.
    pub bf_half: usize,
    /// Whether whole WQEs may be copied to it (BlueFlame). False with
    /// `MLX5_SHUT_UP_BF`: 8-byte doorbells only, still alternating halves
    /// as libmlx5 does.
    pub bf_copy: bool,
}

/// A register assigned to one QP (or the CQ arm page). Dedicated
/// registers go back to their pool on drop.
#[derive(Debug)]
pub struct UarReg {
    page: Arc<UarPage>,
    info: RegInfo,
    give_back: Option<Arc<UarPool>>,
}

impl UarReg {
    /// Where it is.
    pub fn info(&self) -> RegInfo {
        self.info
    }
    /// Its page.
    pub(crate) fn page(&self) -> &Arc<UarPage> {
        &self.page
    }
}

impl Drop for UarReg {
    fn drop(&mut self) {
        if let Some(pool) = self.give_back.take() {
            pool.lock().free.push((self.page.clone(), self.info));
        }
    }
}

#[derive(Debug, Default)]
struct Free {
    free: Vec<(Arc<UarPage>, RegInfo)>,
    dedicated: u32,
}

/// The context's UAR pages and register assignment.
#[derive(Debug)]
pub struct UarPool {
    backend: Box<dyn UarSource>,
    page_size: usize,
    bf_reg_size: u32,
    uars_per_page: u32,
    /// Dynamic: the NC page (CQ arms, shared QP doorbells).
    nc: Option<Arc<UarPage>>,
    /// Static: every page the kernel allocated, by index.
    statics: Vec<Arc<UarPage>>,
    tot_bfregs: u32,
    low_lat_bfregs: u32,
    /// `MLX5_SHUT_UP_BF` (rdma-core's knob): no BlueFlame copies; QPs ring
    /// the NC page (dynamic) or NC-mapped pages (static).
    shut_up_bf: bool,
    state: Mutex<Free>,
}

impl UarPool {
    /// Sets up the scheme the kernel chose. `tot_bfregs == 0` → dynamic.
    pub(crate) fn new(
        backend: Box<dyn UarSource>,
        page_size: usize,
        bf_reg_size: u32,
        uars_per_page: u32,
        tot_bfregs: u32,
        low_lat_bfregs: u32,
        shut_up_bf: bool,
    ) -> Result<Arc<UarPool>> {
        let uars_per_page = uars_per_page.max(1);
        let mut pool = UarPool {
            backend,
            page_size,
            bf_reg_size,
            uars_per_page,
            nc: None,
            statics: Vec::new(),
            tot_bfregs,
            low_lat_bfregs,
            shut_up_bf,
            state: Mutex::new(Free::default()),
        };
        if tot_bfregs == 0 {
            // One NC page for the CQ arm doorbells (rdma-core's singleton
            // `nc_uar`); a BF page if the kernel has no NC UARs.
            let nc = match pool.backend.alloc_dynamic(UarKind::Nc, page_size) {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(error = %e, "mlx5: no NC UAR, arming CQs through a BF page");
                    pool.backend.alloc_dynamic(UarKind::Bf, page_size)?
                }
            };
            pool.nc = Some(Arc::new(nc));
        } else {
            let pages = tot_bfregs / (uars_per_page * NON_FP_BFREGS_PER_UAR);
            for i in 0..pages.max(1) {
                pool.statics.push(Arc::new(pool.backend.map_static(i, page_size, bf_reg_size == 0 || shut_up_bf)?));
            }
        }
        Ok(Arc::new(pool))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Free> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True for the dynamic scheme.
    pub fn is_dynamic(&self) -> bool {
        self.nc.is_some()
    }

    /// The page and UAR index CQ arm doorbells go to (arm register at
    /// [`CQ_DOORBELL`] of the first UAR of the page).
    pub(crate) fn cq_page(&self) -> (&Arc<UarPage>, u32) {
        match &self.nc {
            Some(p) => (p, p.page_id),
            None => (&self.statics[0], 0),
        }
    }

    /// The NC page's doorbell register, shared by any number of QPs
    /// (8-byte doorbells only, no halves to alternate).
    fn nc_reg(&self) -> UarReg {
        let page = self.nc.clone().expect("dynamic scheme");
        let info = RegInfo { uar_index: page.page_id, offset: BF_OFFSET, bf_half: 0, bf_copy: false };
        UarReg { page, info, give_back: None }
    }

    /// Dynamic scheme: the register a new QP will ring (a dedicated
    /// BlueFlame register while there are, else the shared NC one).
    /// Static scheme: `None`, the kernel chooses.
    pub(crate) fn qp_reg(self: &Arc<Self>) -> Result<Option<UarReg>> {
        if !self.is_dynamic() {
            return Ok(None);
        }
        if self.bf_reg_size == 0 || self.shut_up_bf {
            return Ok(Some(self.nc_reg()));
        }
        let mut st = self.lock();
        if st.free.is_empty() && st.dedicated < MAX_DEDICATED_BFREGS {
            let page = Arc::new(self.backend.alloc_dynamic(UarKind::Bf, self.page_size)?);
            // rdma-core `mlx5_insert_dyn_uuars`: registers j*4096 + 0x800 +
            // k*bf_reg_size, UAR page id = page_id + j. Pushed in reverse so
            // the lowest comes out first.
            for j in (0..self.uars_per_page).rev() {
                for k in (0..NON_FP_BFREGS_PER_UAR).rev() {
                    let info = RegInfo {
                        uar_index: page.page_id + j,
                        offset: j as usize * UAR_SIZE + BF_OFFSET + k as usize * self.bf_reg_size as usize,
                        bf_half: self.bf_reg_size as usize / 2,
                        bf_copy: true,
                    };
                    if info.offset + self.bf_reg_size as usize <= page.len() {
                        st.free.push((page.clone(), info));
                        st.dedicated += 1;
                    }
                }
            }
        }
        match st.free.pop() {
            Some((page, info)) => Ok(Some(UarReg { page, info, give_back: Some(self.clone()) })),
            None => Ok(Some(self.nc_reg())),
        }
    }

    /// Static scheme: the register the kernel assigned (`bfreg_index` of
    /// the create-QP answer, 4 registers per UAR). Register 0 and registers
    /// shared between QPs take 8-byte doorbells only.
    pub(crate) fn static_reg(&self, bfi: u32) -> Result<UarReg> {
        let per_page = BFREGS_PER_UAR * self.uars_per_page;
        let page = self.statics.get((bfi / per_page) as usize).cloned().ok_or_else(|| {
            Error::check("ibv_create_qp", Errno::EPROTO)
                .with_message(format!("the kernel assigned BlueFlame register {bfi}, which is not mapped"))
        })?;
        let j = (bfi / BFREGS_PER_UAR) % self.uars_per_page;
        let k = bfi % BFREGS_PER_UAR;
        let in_uar = BF_OFFSET + k as usize * self.bf_reg_size as usize;
        let offset = j as usize * UAR_SIZE + in_uar;
        // With MLX5_SHUT_UP_BF the pages are NC and nothing is copied, but
        // the doorbells still alternate halves (libmlx5 gives every register
        // but 0 a `buf_size`).
        let halves = bfi != 0 && self.bf_reg_size != 0 && !self.static_needs_lock(bfi);
        let bf = halves && (page.kind == UarKind::Bf || self.shut_up_bf);
        let info = RegInfo {
            uar_index: bfi,
            offset,
            bf_half: if bf { self.bf_reg_size as usize / 2 } else { 0 },
            bf_copy: bf && !self.shut_up_bf,
        };
        // The window `qp_finish` maps (`UarMmio::new` asserts it): with a
        // 1024- or 2048-byte BlueFlame size the upper registers of the
        // kernel's 4-per-UAR numbering lie past the UAR's end.
        let window = info.bf_half.max(8) * 2;
        if in_uar + window > UAR_SIZE || offset + window > page.len() {
            return Err(Error::check("ibv_create_qp", Errno::EPROTO).with_message(format!(
                "the kernel assigned BlueFlame register {bfi}, which with {}-byte registers lies outside its UAR",
                self.bf_reg_size
            )));
        }
        Ok(UarReg { page, info, give_back: None })
    }

    /// rdma-core `need_uuar_lock`: whether a static register may be shared
    /// by several QPs.
    fn static_needs_lock(&self, bfi: u32) -> bool {
        let i = bfi / 2 + bfi % 2;
        i < self.tot_bfregs.saturating_sub(self.low_lat_bfregs)
    }

    /// Registers handed out as dedicated so far (tests).
    pub fn dedicated_count(&self) -> u32 {
        self.lock().dedicated
    }
}
