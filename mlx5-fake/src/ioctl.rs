//! `RDMA_VERBS_IOCTL` as a 5.7+ kernel with mlx5_ib answers it (the
//! default; `RVERBS_FAKE_MLX5_KERNEL=write` makes a kernel without the ioctl
//! framework, which answers every ioctl with `ENOTTY`).
//!
//! What it serves: `INVOKE_WRITE` (a write command carried by the ioctl);
//! the native methods both libraries use, translated into their write
//! command's layout and run by the same handlers (`GET_CONTEXT`,
//! `QUERY_PORT`, `CQ/QP/SRQ_CREATE`, the destroy methods), so a command is
//! recorded the same whichever way it came; the ioctl-only methods
//! (`ASYNC_EVENT_ALLOC`, `QUERY_GID_TABLE/ENTRY`, mlx5's
//! `UAR_OBJ_ALLOC/DESTROY` for dynamic UARs). Any other method answers
//! `EPROTONOSUPPORT`, on which both libraries fall back (rdma-core's rule).

use nix::errno::Errno;
use rverbs_uapi::ib_user_ioctl_cmds::*;
use rverbs_uapi::ib_user_ioctl_verbs::{ib_uverbs_gid_entry, ib_uverbs_qp_cap, ib_uverbs_query_port_resp_ex};
use rverbs_uapi::ib_user_verbs::*;
use rverbs_uapi::mlx5_user_ioctl_cmds::*;
use rverbs_uapi::rdma_user_ioctl_cmds::{
    ib_uverbs_attr, ib_uverbs_ioctl_hdr, RDMA_VERBS_IOCTL, UVERBS_ATTR_F_VALID_OUTPUT,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::kernel::{Kernel, Parsed};
use crate::record::Command;

/// Which kernel the fake plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No ioctl framework (before 4.20): legacy `write()` only, static bfregs.
    Write,
    /// The ioctl framework and dynamic UARs (5.7 and later).
    #[default]
    Ioctl,
}

/// Environment: `write` or `ioctl` (the default).
pub const ENV_MODE: &str = "RVERBS_FAKE_MLX5_KERNEL";

/// The mode this process's fake kernel plays.
pub fn mode() -> Mode {
    match std::env::var(ENV_MODE).as_deref() {
        Ok("write") => Mode::Write,
        _ => Mode::Ioctl,
    }
}

/// One attribute of the call, and where it sits in the caller's array.
struct Attr {
    id: u16,
    len: u16,
    data: u64,
    slot: *mut ib_uverbs_attr,
}

/// A call's header and attributes. Invariant (made by [`read_call`], which
/// is `unsafe` for it): every attribute's `slot` and pointer `data` is
/// memory the caller handed over for the call, of the attribute's length.
struct Call {
    object: u16,
    method: u16,
    attrs: Vec<Attr>,
}

impl Call {
    fn get(&self, id: u16) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.id == id)
    }

    /// An input's bytes: inline in `data` up to 8 bytes, else behind it.
    fn bytes(&self, id: u16) -> Option<Vec<u8>> {
        let a = self.get(id)?;
        let len = usize::from(a.len);
        if len <= 8 {
            return Some(a.data.to_ne_bytes()[..len].to_vec());
        }
        // SAFETY: the invariant of `Call` (`read_call`): a pointer input
        // is readable for its length.
        Some(unsafe { crate::hca::read(a.data, len) })
    }

    /// A constant, handle or fd input (the `data` word).
    fn value(&self, id: u16) -> Option<u64> {
        self.get(id).map(|a| a.data)
    }

    /// Writes an output and marks it valid, as the kernel does.
    fn out(&self, id: u16, bytes: &[u8]) {
        let Some(a) = self.get(id) else { return };
        let n = bytes.len().min(usize::from(a.len));
        // SAFETY: the invariant of `Call`: an output's pointer is writable
        // for its length (`n` is at most that), and `slot` is the caller's
        // attribute.
        unsafe {
            crate::user::copy_to_user(a.data, &bytes[..n]);
            (*a.slot).flags |= UVERBS_ATTR_F_VALID_OUTPUT as u16;
        }
    }

    /// Gives a new object's handle or fd back in the attribute's `data`.
    fn set(&self, id: u16, v: u64) {
        if let Some(a) = self.get(id) {
            // SAFETY: the invariant of `Call`: `slot` is the caller's
            // attribute, in the ioctl's writable array.
            unsafe { (*a.slot).data = v };
        }
    }

    fn out_len(&self, id: u16) -> usize {
        self.get(id).map_or(0, |a| usize::from(a.len))
    }
}

/// Reads the header and attributes at `arg`.
///
/// # Safety
/// `arg` must point at an `ib_uverbs_ioctl_hdr` followed by its attributes,
/// and every attribute's pointer at memory of its length, for as long as
/// the [`Call`] is used (its invariant).
unsafe fn read_call(arg: *mut u8) -> Result<Call, Errno> {
    // SAFETY: the caller's contract.
    let hb = unsafe { crate::hca::read(arg as u64, std::mem::size_of::<ib_uverbs_ioctl_hdr>()) };
    let hdr = ib_uverbs_ioctl_hdr::read_from_bytes(&hb).map_err(|_| Errno::EINVAL)?;
    let n = usize::from(hdr.num_attrs);
    if usize::from(hdr.length) != hb.len() + n * 16 {
        return Err(Errno::EINVAL);
    }
    let base = arg.wrapping_add(hb.len()).cast::<ib_uverbs_attr>();
    let mut attrs = Vec::with_capacity(n);
    for i in 0..n {
        let slot = base.wrapping_add(i);
        // SAFETY: inside the caller's array of `num_attrs` attributes.
        let a = unsafe { std::ptr::read_unaligned(slot) };
        attrs.push(Attr { id: a.attr_id, len: a.len, data: a.data, slot });
    }
    Ok(Call { object: hdr.object_id, method: hdr.method_id, attrs })
}

impl Kernel {
    /// An ioctl on the node.
    ///
    /// # Safety
    /// For `RDMA_VERBS_IOCTL`, `arg` must point at the call and every
    /// pointer attribute at memory of its length (the uverbs ABI's contract).
    pub unsafe fn ioctl_call(&mut self, fd: i32, request: u64, arg: *mut u8) -> Result<(), Errno> {
        if !self.is_fake(fd) {
            return Err(Errno::EBADF);
        }
        if self.mode_of(fd) == Mode::Write || request != u64::from(RDMA_VERBS_IOCTL) {
            return Err(self.ioctl(fd, request));
        }
        // SAFETY: the caller's contract is `read_call`'s, for the whole call.
        let call = unsafe { read_call(arg) }?;
        self.dispatch(fd, &call)
    }

    /// The method's handler.
    fn dispatch(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        {
            match (c.object, c.method) {
                (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE) => self.invoke_write(fd, c),
                (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT) => self.get_context(fd, c),
                (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT) => self.query_port(fd, c),
                (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE) => self.gid_table(fd, c),
                (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY) => self.gid_entry(fd, c),
                (UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC) => self.async_alloc(fd, c),
                (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE) => self.cq_create(fd, c),
                (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE) => self.qp_create(fd, c),
                (UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE) => self.srq_create(fd, c),
                (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DESTROY_CQ, UVERBS_ATTR_DESTROY_CQ_RESP)
                }
                (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DESTROY_QP, UVERBS_ATTR_DESTROY_QP_RESP)
                }
                (UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DESTROY_SRQ, UVERBS_ATTR_DESTROY_SRQ_RESP)
                }
                (UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DEALLOC_PD, u16::MAX)
                }
                (UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DEREG_MR, u16::MAX)
                }
                (UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY) => {
                    self.destroy(fd, c, IB_USER_VERBS_CMD_DESTROY_AH, u16::MAX)
                }
                (MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC) => self.uar_alloc(fd, c),
                (MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY) => self.uar_destroy(fd, c),
                // Not a command the HCA sees (libmlx5 asks DEVX for the
                // HCA's capabilities, which the fake has no firmware for):
                // noted with the refused ioctls, not as a command.
                _ => Err(self.unsupported(fd)),
            }
        }
    }

    /// Runs write command `code` with the given core and driver input,
    /// answers of the given lengths; returns the answers (in buffers made
    /// here).
    fn run(
        &mut self,
        fd: i32,
        code: u32,
        (core, drv): (Vec<u8>, Vec<u8>),
        (core_out_len, drv_out_len): (usize, usize),
        path: &'static str,
    ) -> Result<(Vec<u8>, Vec<u8>), Errno> {
        let extended = code & IB_USER_VERBS_CMD_FLAG_EXTENDED != 0;
        let mut core_out = vec![0u8; core_out_len];
        let mut drv_out = vec![0u8; drv_out_len];
        let p = Parsed {
            code: code & !IB_USER_VERBS_CMD_FLAG_EXTENDED,
            extended,
            core,
            drv,
            core_out: if core_out_len > 0 { core_out.as_mut_ptr() as u64 } else { 0 },
            drv_out: if drv_out_len > 0 { drv_out.as_mut_ptr() as u64 } else { 0 },
            core_out_len,
            drv_out_len,
            path,
        };
        // SAFETY: the answers go to the two buffers above, of those lengths.
        unsafe { self.execute(fd, &p) }?;
        Ok((core_out, drv_out))
    }

    /// `INVOKE_WRITE`: `WRITE_CMD`, `CORE_IN/OUT`, `UHW_IN/OUT`.
    fn invoke_write(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let code = c.value(UVERBS_ATTR_WRITE_CMD).ok_or(Errno::EINVAL)? as u32;
        let core = c.bytes(UVERBS_ATTR_CORE_IN).unwrap_or_default();
        // A request shorter than the command's: ENOSPC, before anything
        // runs (libibverbs probes INVOKE_WRITE with an empty QUERY_DEVICE).
        if code & IB_USER_VERBS_CMD_FLAG_EXTENDED == 0
            && crate::kernel::legacy_core_len(code).is_some_and(|n| core.len() < n)
        {
            self.ioctl(fd, u64::from(RDMA_VERBS_IOCTL));
            return Err(Errno::ENOSPC);
        }
        let drv = c.bytes(UVERBS_ATTR_UHW_IN).unwrap_or_default();
        let (o, d) = self.run(
            fd,
            code,
            (core, drv),
            (c.out_len(UVERBS_ATTR_CORE_OUT), c.out_len(UVERBS_ATTR_UHW_OUT)),
            "invoke_write",
        )?;
        c.out(UVERBS_ATTR_CORE_OUT, &o);
        c.out(UVERBS_ATTR_UHW_OUT, &d);

        Ok(())
    }

    /// `GET_CONTEXT`: GET_CONTEXT's handler; the async fd comes separately
    /// (`ASYNC_EVENT_ALLOC`), so the one the handler made is closed.
    fn get_context(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let drv = c.bytes(UVERBS_ATTR_UHW_IN).unwrap_or_default();
        let (o, d) = self.run(
            fd,
            IB_USER_VERBS_CMD_GET_CONTEXT,
            (vec![0; 8], drv),
            (8, c.out_len(UVERBS_ATTR_UHW_OUT)),
            "ioctl",
        )?;
        let resp = ib_uverbs_get_context_resp::read_from_bytes(&o).map_err(|_| Errno::EINVAL)?;
        let _ = nix::unistd::close(resp.async_fd as i32);
        c.out(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &resp.num_comp_vectors.to_ne_bytes());
        c.out(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &0u64.to_ne_bytes());
        c.out(UVERBS_ATTR_UHW_OUT, &d);

        Ok(())
    }

    /// `QUERY_PORT`: QUERY_PORT's answer with the extended fields.
    fn query_port(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let port = c.value(UVERBS_ATTR_QUERY_PORT_PORT_NUM).ok_or(Errno::EINVAL)? as u8;
        let q = ib_uverbs_query_port { response: 0, port_num: port, reserved: [0; 7], driver_data: [] };
        let len = std::mem::size_of::<ib_uverbs_query_port_resp>();
        let (o, _) =
            self.run(fd, IB_USER_VERBS_CMD_QUERY_PORT, (q.as_bytes().to_vec(), Vec::new()), (len, 0), "ioctl")?;
        let mut ex = ib_uverbs_query_port_resp_ex::default();
        ex.legacy_resp = ib_uverbs_query_port_resp::read_from_bytes(&o).map_err(|_| Errno::EINVAL)?;
        ex.active_speed_ex = u32::from(ex.legacy_resp.active_speed);
        c.out(UVERBS_ATTR_QUERY_PORT_RESP, ex.as_bytes());
        Ok(())
    }

    fn gid_entries() -> Vec<ib_uverbs_gid_entry> {
        crate::attrs::gids()
            .into_iter()
            .enumerate()
            .map(|(i, (gid, ty))| ib_uverbs_gid_entry {
                gid,
                gid_index: i as u32,
                port_num: 1,
                gid_type: if ty == "RoCE v2" { 2 } else { 1 },
                netdev_ifindex: 0,
            })
            .collect()
    }

    fn gid_table(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let size = c.value(UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE).ok_or(Errno::EINVAL)? as usize;
        if size < std::mem::size_of::<ib_uverbs_gid_entry>() {
            return Err(Errno::EINVAL);
        }
        let room = c.out_len(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES) / size;
        let entries = Self::gid_entries();
        let n = entries.len().min(room);
        let mut out = vec![0u8; n * size];
        for (i, e) in entries.iter().take(n).enumerate() {
            out[i * size..i * size + std::mem::size_of::<ib_uverbs_gid_entry>()].copy_from_slice(e.as_bytes());
        }
        c.out(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, &out);
        c.out(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &(n as u64).to_ne_bytes());

        self.record_ioctl(fd, "QUERY_GID_TABLE", (size as u64).to_ne_bytes().to_vec(), out, 0);
        Ok(())
    }

    fn gid_entry(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let port = c.value(UVERBS_ATTR_QUERY_GID_ENTRY_PORT).ok_or(Errno::EINVAL)?;
        let index = c.value(UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX).ok_or(Errno::EINVAL)?;
        let input = [port.to_ne_bytes(), index.to_ne_bytes()].concat();
        if port != 1 {
            self.record_ioctl(fd, "QUERY_GID_ENTRY", input, Vec::new(), Errno::EINVAL as i32);
            return Err(Errno::EINVAL);
        }
        match Self::gid_entries().into_iter().find(|e| u64::from(e.gid_index) == index) {
            Some(e) => {
                c.out(UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e.as_bytes());
                self.record_ioctl(fd, "QUERY_GID_ENTRY", input, e.as_bytes().to_vec(), 0);
                Ok(())
            }
            None => {
                self.record_ioctl(fd, "QUERY_GID_ENTRY", input, Vec::new(), Errno::ENODATA as i32);
                Err(Errno::ENODATA)
            }
        }
    }

    fn async_alloc(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        // SAFETY: eventfd takes no pointers; the new fd goes to the caller.
        let efd = unsafe { nix::libc::eventfd(0, nix::libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(Errno::last());
        }
        c.set(UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, efd as u64);
        self.record_ioctl(fd, "ASYNC_EVENT_ALLOC", Vec::new(), Vec::new(), 0);
        Ok(())
    }

    /// `CQ_CREATE` as CREATE_CQ.
    fn cq_create(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let req = ib_uverbs_create_cq {
            response: 0,
            user_handle: c.value(UVERBS_ATTR_CREATE_CQ_USER_HANDLE).unwrap_or(0),
            cqe: c.value(UVERBS_ATTR_CREATE_CQ_CQE).ok_or(Errno::EINVAL)? as u32,
            comp_vector: c.value(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR).unwrap_or(0) as u32,
            comp_channel: c.value(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL).map_or(-1, |v| v as i32),
            reserved: 0,
            driver_data: [],
        };
        if c.value(UVERBS_ATTR_CREATE_CQ_FLAGS).unwrap_or(0) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let drv = c.bytes(UVERBS_ATTR_UHW_IN).unwrap_or_default();
        let len = std::mem::size_of::<ib_uverbs_create_cq_resp>();
        let (o, d) = self.run(
            fd,
            IB_USER_VERBS_CMD_CREATE_CQ,
            (req.as_bytes().to_vec(), drv),
            (len, c.out_len(UVERBS_ATTR_UHW_OUT)),
            "ioctl",
        )?;
        let r = ib_uverbs_create_cq_resp::read_from_bytes(&o).map_err(|_| Errno::EINVAL)?;
        c.set(UVERBS_ATTR_CREATE_CQ_HANDLE, u64::from(r.cq_handle));
        c.out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &r.cqe.to_ne_bytes());
        c.out(UVERBS_ATTR_UHW_OUT, &d);

        Ok(())
    }

    /// `QP_CREATE` as CREATE_QP.
    fn qp_create(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let cap: ib_uverbs_qp_cap = c
            .bytes(UVERBS_ATTR_CREATE_QP_CAP)
            .and_then(|b| ib_uverbs_qp_cap::read_from_bytes(&b).ok())
            .ok_or(Errno::EINVAL)?;
        if c.value(UVERBS_ATTR_CREATE_QP_FLAGS).unwrap_or(0) != 0 || c.get(UVERBS_ATTR_CREATE_QP_SOURCE_QPN).is_some() {
            return Err(Errno::EOPNOTSUPP);
        }
        let srq = c.value(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE);
        let recv_cq = c.value(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE);
        let send_cq = c.value(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE).ok_or(Errno::EINVAL)?;
        let req = ib_uverbs_create_qp {
            response: 0,
            user_handle: c.value(UVERBS_ATTR_CREATE_QP_USER_HANDLE).unwrap_or(0),
            pd_handle: c.value(UVERBS_ATTR_CREATE_QP_PD_HANDLE).ok_or(Errno::EINVAL)? as u32,
            send_cq_handle: send_cq as u32,
            recv_cq_handle: recv_cq.unwrap_or(send_cq) as u32,
            srq_handle: srq.unwrap_or(0) as u32,
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge,
            max_recv_sge: cap.max_recv_sge,
            max_inline_data: cap.max_inline_data,
            sq_sig_all: 0,
            qp_type: c.value(UVERBS_ATTR_CREATE_QP_TYPE).ok_or(Errno::EINVAL)? as u8,
            is_srq: srq.is_some().into(),
            reserved: 0,
            driver_data: [],
        };
        let drv = c.bytes(UVERBS_ATTR_UHW_IN).unwrap_or_default();
        let len = std::mem::size_of::<ib_uverbs_create_qp_resp>();
        let (o, d) = self.run(
            fd,
            IB_USER_VERBS_CMD_CREATE_QP,
            (req.as_bytes().to_vec(), drv),
            (len, c.out_len(UVERBS_ATTR_UHW_OUT)),
            "ioctl",
        )?;
        let r = ib_uverbs_create_qp_resp::read_from_bytes(&o).map_err(|_| Errno::EINVAL)?;
        let rcap = ib_uverbs_qp_cap {
            max_send_wr: r.max_send_wr,
            max_recv_wr: r.max_recv_wr,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline_data: r.max_inline_data,
        };
        c.set(UVERBS_ATTR_CREATE_QP_HANDLE, u64::from(r.qp_handle));
        c.out(UVERBS_ATTR_CREATE_QP_RESP_CAP, rcap.as_bytes());
        c.out(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &r.qpn.to_ne_bytes());
        c.out(UVERBS_ATTR_UHW_OUT, &d);

        Ok(())
    }

    /// `SRQ_CREATE` as CREATE_SRQ (basic SRQs).
    fn srq_create(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        if c.value(UVERBS_ATTR_CREATE_SRQ_TYPE).unwrap_or(0) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let req = ib_uverbs_create_srq {
            response: 0,
            user_handle: c.value(UVERBS_ATTR_CREATE_SRQ_USER_HANDLE).unwrap_or(0),
            pd_handle: c.value(UVERBS_ATTR_CREATE_SRQ_PD_HANDLE).ok_or(Errno::EINVAL)? as u32,
            max_wr: c.value(UVERBS_ATTR_CREATE_SRQ_MAX_WR).ok_or(Errno::EINVAL)? as u32,
            max_sge: c.value(UVERBS_ATTR_CREATE_SRQ_MAX_SGE).ok_or(Errno::EINVAL)? as u32,
            srq_limit: c.value(UVERBS_ATTR_CREATE_SRQ_LIMIT).unwrap_or(0) as u32,
            driver_data: [],
        };
        let drv = c.bytes(UVERBS_ATTR_UHW_IN).unwrap_or_default();
        let len = std::mem::size_of::<ib_uverbs_create_srq_resp>();
        let (o, d) = self.run(
            fd,
            IB_USER_VERBS_CMD_CREATE_SRQ,
            (req.as_bytes().to_vec(), drv),
            (len, c.out_len(UVERBS_ATTR_UHW_OUT)),
            "ioctl",
        )?;
        let r = ib_uverbs_create_srq_resp::read_from_bytes(&o).map_err(|_| Errno::EINVAL)?;
        c.set(UVERBS_ATTR_CREATE_SRQ_HANDLE, u64::from(r.srq_handle));
        c.out(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &r.max_wr.to_ne_bytes());
        c.out(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &r.max_sge.to_ne_bytes());
        c.out(UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, &r.srqn.to_ne_bytes());
        c.out(UVERBS_ATTR_UHW_OUT, &d);

        Ok(())
    }

    /// A destroy method (handle attribute 0) as its write command; `resp`:
    /// the response attribute (`u16::MAX`: none).
    fn destroy(&mut self, fd: i32, c: &Call, code: u32, resp: u16) -> Result<(), Errno> {
        let handle = c.value(0).ok_or(Errno::EINVAL)? as u32;
        let (core, out_len) = match code {
            IB_USER_VERBS_CMD_DESTROY_CQ => (
                ib_uverbs_destroy_cq { response: 0, cq_handle: handle, reserved: 0 }.as_bytes().to_vec(),
                std::mem::size_of::<ib_uverbs_destroy_cq_resp>(),
            ),
            IB_USER_VERBS_CMD_DESTROY_QP => (
                ib_uverbs_destroy_qp { response: 0, qp_handle: handle, reserved: 0 }.as_bytes().to_vec(),
                std::mem::size_of::<ib_uverbs_destroy_qp_resp>(),
            ),
            IB_USER_VERBS_CMD_DESTROY_SRQ => (
                ib_uverbs_destroy_srq { response: 0, srq_handle: handle, reserved: 0 }.as_bytes().to_vec(),
                std::mem::size_of::<ib_uverbs_destroy_srq_resp>(),
            ),
            _ => (handle.to_ne_bytes().to_vec(), 0),
        };
        let (o, _) = self.run(fd, code, (core, Vec::new()), (out_len, 0), "ioctl")?;
        if resp != u16::MAX {
            c.out(resp, &o);
        }
        Ok(())
    }

    /// mlx5's `UAR_OBJ_ALLOC`: a dynamic UAR page (BlueFlame or NC).
    fn uar_alloc(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let kind = c.value(MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE).ok_or(Errno::EINVAL)? as u32;
        let page = page_size();
        let (handle, page_id, offset) = self.dyn_uar_alloc(fd, kind, page)?;
        c.set(MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, u64::from(handle));
        c.out(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &offset.to_ne_bytes());
        c.out(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &(page as u32).to_ne_bytes());
        c.out(MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &page_id.to_ne_bytes());

        let out = [offset.to_ne_bytes().to_vec(), page_id.to_ne_bytes().to_vec()].concat();
        self.record_ioctl(fd, "UAR_OBJ_ALLOC", kind.to_ne_bytes().to_vec(), out, 0);
        Ok(())
    }

    fn uar_destroy(&mut self, fd: i32, c: &Call) -> Result<(), Errno> {
        let handle = c.value(MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE).ok_or(Errno::EINVAL)? as u32;
        let r = self.dyn_uar_free(fd, handle);
        self.record_ioctl(fd, "UAR_OBJ_DESTROY", Vec::new(), Vec::new(), r.err().map_or(0, |e| e as i32));
        r
    }

    fn record_ioctl(&mut self, fd: i32, name: &str, core_in: Vec<u8>, core_out: Vec<u8>, errno: i32) {
        let ctx = self.ctx_id(fd);
        self.record(Command {
            ctx,
            name: name.to_owned(),
            core_in,
            core_out,
            errno,
            path: "ioctl".into(),
            ..Default::default()
        });
    }
}

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}
