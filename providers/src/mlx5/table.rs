//! Per-context tables: the resource registry CQs use to find a QP's (or
//! SRQ's) work-request ids, and the user-index allocator.
//!
//! rdma-core keeps `qp_table` (by QPN, CQE version 0) and `uidx_table` (by
//! user index, version 1) and has the CQ cache its last lookup
//! (`cur_rsc`). Here the registry holds `Arc`s; a CQ caches the last one
//! and drops its cache whenever the registry's generation moves (every
//! removal bumps it), so a stale entry is never used. Every bump also
//! closes the poll gate of every CQ of the context (`mem::Gate`), which is
//! how the CQs' one-entry fast path learns of it without loading the
//! generation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::mlx5::mem::Gate;
use crate::mlx5::qp::QpShared;
use crate::mlx5::srq::SrqShared;
use crate::{Errno, Error, Result};

/// QPs by resource number (user index with CQE version 1, QPN with 0) and
/// SRQs by SRQN (what version-0 responder CQEs name).
#[derive(Debug, Default)]
pub struct Registry {
    qps: RwLock<HashMap<u32, Arc<QpShared>>>,
    srqs: RwLock<HashMap<u32, Arc<SrqShared>>>,
    generation: AtomicU64,
    /// Cleans CQs owe (see [`Registry::request_clean`]).
    cleans: Mutex<Vec<CleanReq>>,
    /// The poll gates of the context's CQs, closed on every bump.
    gates: Mutex<Vec<Gate>>,
}

/// CQ `cqn` must drop the completions of `qp` still in its ring. Holding
/// `qp` keeps its resource number (user index) leased until then, so no
/// other QP can be named by those CQEs.
#[derive(Debug)]
struct CleanReq {
    cqn: u32,
    qp: Arc<QpShared>,
}

impl Registry {
    /// Registers a QP under `rsn`.
    ///
    /// Refused with `EBUSY` while a clean is still owed for an earlier QP of
    /// the same resource number: with CQE version 0 that is the QPN, which
    /// the kernel may give again right after a destroy, and the clean
    /// matches CQEs by it, so it would also remove the new QP's
    /// completions (audit L5). A user index (version 1) cannot collide: the
    /// request holds the old one's lease. The check is made under the QP
    /// map's lock, which the old QP's removal (after its clean request)
    /// also takes, so no request can slip in between.
    pub(crate) fn insert_qp(&self, rsn: u32, qp: Arc<QpShared>) -> Result<()> {
        let mut m = self.qps.write().unwrap_or_else(|p| p.into_inner());
        if m.contains_key(&rsn) {
            return Err(Error::os("ibv_create_qp", Errno::EEXIST)
                .with_message(format!("resource number {rsn:#x} is already registered")));
        }
        let owed =
            self.cleans.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|r| r.qp.rsn() == rsn).map(|r| r.cqn);
        if let Some(cqn) = owed {
            return Err(Error::check("ibv_create_qp", Errno::EBUSY).with_message(format!(
                "the kernel gave QP number {rsn:#x} again before CQ {cqn:#x} dropped the completions its \
                 previous QP left: poll that CQ (an empty slice is enough), then create the QP again"
            )));
        }
        m.insert(rsn, qp);
        Ok(())
    }

    /// Looks a QP up.
    #[inline]
    pub(crate) fn qp(&self, rsn: u32) -> Option<Arc<QpShared>> {
        self.qps.read().unwrap_or_else(|p| p.into_inner()).get(&rsn).cloned()
    }

    /// Registers an SRQ under its SRQN.
    pub(crate) fn insert_srq(&self, srqn: u32, srq: Arc<SrqShared>) {
        self.srqs.write().unwrap_or_else(|p| p.into_inner()).insert(srqn, srq);
    }

    /// Removes an SRQ; bumps the generation.
    pub(crate) fn remove_srq(&self, srqn: u32) -> Option<Arc<SrqShared>> {
        let r = self.srqs.write().unwrap_or_else(|p| p.into_inner()).remove(&srqn);
        self.bump();
        r
    }

    /// Looks an SRQ up.
    #[inline]
    pub(crate) fn srq(&self, srqn: u32) -> Option<Arc<SrqShared>> {
        self.srqs.read().unwrap_or_else(|p| p.into_inner()).get(&srqn).cloned()
    }

    /// Changes on every removal (and clean request). SeqCst (a plain load
    /// on x86_64, `ldar` on aarch64): it acquires what was published before
    /// the bump, and it is the load after the gate store in `Cq::set_gate`.
    #[inline(always)]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Moves the generation, then closes every CQ's poll gate. Both SeqCst:
    /// a poller that opens its gate after this close (in the gate word's
    /// order) then loads the generation and sees the move (`Cq::set_gate`),
    /// and one that opened it before has it closed here; either way a
    /// poll that starts after this returns finds the gate closed or the
    /// cache already dropped.
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        for g in self.gates.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            g.close();
        }
    }

    /// Registers a CQ's poll gate (before the CQ reads the generation it
    /// starts from).
    pub(crate) fn add_gate(&self, gate: Gate) {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).push(gate);
    }

    /// Forgets the gate whose [`Gate::id`] is `id` (its CQ drops).
    pub(crate) fn remove_gate(&self, id: usize) {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).retain(|g| g.id() != id);
    }

    /// Removes QP `qp` if it is the one registered under its resource
    /// number; bumps the generation.
    pub(crate) fn remove_qp_if(&self, qp: &Arc<QpShared>) -> bool {
        let mut m = self.qps.write().unwrap_or_else(|p| p.into_inner());
        let mine = matches!(m.get(&qp.rsn()), Some(q) if Arc::ptr_eq(q, qp));
        if mine {
            m.remove(&qp.rsn());
        }
        drop(m);
        self.bump();
        mine
    }

    /// Asks CQ `cqn` to clean `qp` out of its ring ([`Cq::clean_qp`]) the
    /// next time its poller runs: for a safe layer whose CQ poller cannot be
    /// reached when a QP is destroyed or reset (the CQ is polled through
    /// `&mut` without a lock). Bumps the generation, which `Cq::poll` of a
    /// batch checks on every call and which closes the gate the one-entry
    /// poll compares with anyway, so the clean costs the fast path nothing.
    /// A request already pending for the same CQ and QP is not repeated.
    ///
    /// [`Cq::clean_qp`]: crate::mlx5::Cq::clean_qp
    pub(crate) fn request_clean(&self, cqn: u32, qp: &Arc<QpShared>) {
        let mut c = self.cleans.lock().unwrap_or_else(|p| p.into_inner());
        if !c.iter().any(|r| r.cqn == cqn && Arc::ptr_eq(&r.qp, qp)) {
            c.push(CleanReq { cqn, qp: qp.clone() });
        }
        drop(c);
        // After the push: a poller that sees the new generation finds it.
        self.bump();
    }

    /// The QPs CQ `cqn` has to clean (left pending until [`cleans_done`](Self::cleans_done)).
    pub(crate) fn cleans_for(&self, cqn: u32) -> Vec<Arc<QpShared>> {
        let c = self.cleans.lock().unwrap_or_else(|p| p.into_inner());
        c.iter().filter(|r| r.cqn == cqn).map(|r| r.qp.clone()).collect()
    }

    /// CQ `cqn` cleaned `done`: drops those requests (and their QP references).
    pub(crate) fn cleans_done(&self, cqn: u32, done: &[Arc<QpShared>]) {
        let mut c = self.cleans.lock().unwrap_or_else(|p| p.into_inner());
        c.retain(|r| !(r.cqn == cqn && done.iter().any(|q| Arc::ptr_eq(q, &r.qp))));
    }

    /// Drops every request naming CQ `cqn` (it is being destroyed: no
    /// poller will run). Returns how many there were.
    pub(crate) fn drop_cleans(&self, cqn: u32) -> usize {
        let mut c = self.cleans.lock().unwrap_or_else(|p| p.into_inner());
        let before = c.len();
        c.retain(|r| r.cqn != cqn);
        before - c.len()
    }

    /// Whether some CQ still owes a clean of `qp`.
    pub(crate) fn clean_pending(&self, qp: &Arc<QpShared>) -> bool {
        self.cleans.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|r| Arc::ptr_eq(&r.qp, qp))
    }

    /// Registered QPs (tests).
    pub fn qp_count(&self) -> usize {
        self.qps.read().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Hands out user indexes `0..0xffffff` (the kernel rejects ≥ 0xffffff with
/// CQE version 1; `0xffffff` itself means "none" with version 0).
#[derive(Debug, Default)]
pub struct IdAlloc {
    state: Mutex<(u32, Vec<u32>)>,
}

/// `MLX5_IB_DEFAULT_UIDX`: "no user index" (CQE version 0).
pub const NO_UIDX: u32 = 0x00ff_ffff;

impl IdAlloc {
    /// A fresh allocator.
    pub fn new() -> Arc<IdAlloc> {
        Arc::new(IdAlloc::default())
    }

    /// One index, returned on drop of the lease.
    pub fn alloc(self: &Arc<Self>, verb: &'static str) -> Result<IdLease> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let id = match st.1.pop() {
            Some(id) => id,
            None if st.0 < NO_UIDX => {
                st.0 += 1;
                st.0 - 1
            }
            None => return Err(Error::os(verb, Errno::ENOMEM).with_message("no free mlx5 user index")),
        };
        Ok(IdLease { alloc: self.clone(), id })
    }
}

/// A user index in use.
#[derive(Debug)]
pub struct IdLease {
    alloc: Arc<IdAlloc>,
    id: u32,
}

impl IdLease {
    /// The index.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl Drop for IdLease {
    fn drop(&mut self) {
        self.alloc.state.lock().unwrap_or_else(|p| p.into_inner()).1.push(self.id);
    }
}
