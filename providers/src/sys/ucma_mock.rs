//! A model of the kernel's side of `/dev/infiniband/rdma_cm` for host
//! tests (`cfg(test)` or the `ucma-mock` feature; never in a real build).
//!
//! It keeps what the kernel keeps per fd (ids with their uid, the queue of
//! events, how many of each id's events were reported), answers each
//! command as `ucma.c` would for the cases the tests drive, records every
//! command's header and body, and has a readable fd while events are
//! queued (a pipe with one byte per event), so waiting code sees the same
//! readiness it would see on the real node.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;
use rverbs_uapi::ib_user_verbs::ib_uverbs_qp_attr;
use rverbs_uapi::rdma_user_cm::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// One command the mock received.
#[derive(Clone, Debug)]
pub struct Logged {
    /// The header as written.
    pub hdr: rdma_ucm_cmd_hdr,
    /// The body as written (pointer fields hold 0: the mock copies instead).
    pub body: Vec<u8>,
    /// SET_OPTION's value.
    pub input: Option<Vec<u8>>,
}

/// One id the mock knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockId {
    /// The uid events carry (CREATE_ID's, or ACCEPT's for a child).
    pub uid: u64,
    /// The port space it was created with (0 for a child).
    pub ps: u16,
    /// Events of it that GET_EVENT returned.
    pub events_reported: u32,
    /// Whether LISTEN was issued.
    pub listening: bool,
}

#[derive(Default)]
struct State {
    next_id: u32,
    ids: BTreeMap<u32, MockId>,
    destroyed: Vec<u32>,
    events: VecDeque<rdma_ucm_event_resp>,
    log: Vec<Logged>,
    query_addr: Option<rdma_ucm_query_addr_resp>,
    init_qp_attr: BTreeMap<u32, ib_uverbs_qp_attr>,
    fail: Vec<(u32, Errno)>,
    /// Run once after the next command of that number, outside the lock.
    after: Vec<(u32, Hook)>,
}

type Hook = Box<dyn FnOnce() + Send>;

/// The kernel's side of one CM fd.
pub struct MockUcma {
    state: Mutex<State>,
    readable: OwnedFd,
    writer: OwnedFd,
}

impl std::fmt::Debug for MockUcma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockUcma").finish_non_exhaustive()
    }
}

fn read<T: FromBytes>(body: &[u8]) -> Result<T, Errno> {
    T::read_from_prefix(body).map(|(t, _)| t).map_err(|_| Errno::EINVAL)
}

fn answer<T: IntoBytes + zerocopy::Immutable>(resp: Option<&mut [u8]>, v: &T) -> Result<(), Errno> {
    let r = resp.ok_or(Errno::EFAULT)?;
    let b = v.as_bytes();
    if r.len() < b.len().min(4) {
        return Err(Errno::ENOSPC);
    }
    let n = r.len().min(b.len());
    r[..n].copy_from_slice(&b[..n]);
    Ok(())
}

impl MockUcma {
    /// A fresh fd with no ids and no events; ids are numbered from 1.
    pub fn new() -> Arc<MockUcma> {
        let (readable, writer) = nix::unistd::pipe().expect("pipe for the ucma mock");
        Arc::new(MockUcma { state: Mutex::new(State { next_id: 1, ..State::default() }), readable, writer })
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an event (the fd becomes readable).
    pub fn push_event(&self, ev: rdma_ucm_event_resp) {
        self.st().events.push_back(ev);
        let _ = nix::unistd::write(&self.writer, &[1]);
    }

    /// Queues an event `event` for kernel id `id` with the uid the id has
    /// now, and `status`.
    pub fn push(&self, id: u32, event: u32, status: i32) -> rdma_ucm_event_resp {
        let uid = self.uid_of(id).unwrap_or(0);
        let ev = rdma_ucm_event_resp { uid, id, event, status: status as u32, ..Default::default() };
        self.push_event(ev);
        ev
    }

    /// Every command so far.
    pub fn log(&self) -> Vec<Logged> {
        self.st().log.clone()
    }

    /// The command numbers so far, in order.
    pub fn commands(&self) -> Vec<u32> {
        self.st().log.iter().map(|l| l.hdr.cmd).collect()
    }

    /// Forgets the log.
    pub fn clear_log(&self) {
        self.st().log.clear();
    }

    /// Makes the next `cmd` fail with `e`.
    pub fn fail_next(&self, cmd: u32, e: Errno) {
        self.st().fail.push((cmd, e));
    }

    /// What QUERY(ADDR) and QUERY(GID) answer (default: all zeros).
    pub fn set_query_addr(&self, r: rdma_ucm_query_addr_resp) {
        self.st().query_addr = Some(r);
    }

    /// What INIT_QP_ATTR answers for `state` (default: mask 0).
    pub fn set_init_qp_attr(&self, state: u32, a: ib_uverbs_qp_attr) {
        self.st().init_qp_attr.insert(state, a);
    }

    /// A kernel id as a listener's child would get it (CONNECT_REQUEST's
    /// `id`), uid 0 until ACCEPT.
    pub fn new_child(&self) -> u32 {
        let mut st = self.st();
        let id = st.next_id;
        st.next_id += 1;
        st.ids.insert(id, MockId::default());
        id
    }

    /// The live ids.
    pub fn ids(&self) -> BTreeMap<u32, MockId> {
        self.st().ids.clone()
    }

    /// The ids DESTROY_ID removed, in order.
    pub fn destroyed(&self) -> Vec<u32> {
        self.st().destroyed.clone()
    }

    /// The uid of live id `id`.
    pub fn uid_of(&self, id: u32) -> Option<u64> {
        self.st().ids.get(&id).map(|i| i.uid)
    }

    /// Events queued and not yet read.
    pub fn pending(&self) -> usize {
        self.st().events.len()
    }

    /// Runs `f` once, right after the next command `cmd` is answered and
    /// before the caller's `write()` returns: what another thread could do
    /// while that command is in the kernel.
    pub fn after_next(&self, cmd: u32, f: impl FnOnce() + Send + 'static) {
        self.st().after.push((cmd, Box::new(f)));
    }

    /// One command, as `ucma_write` and the handlers would answer it, then
    /// the [`after_next`](Self::after_next) hook of that command, if any.
    pub(crate) fn command(
        &self,
        hdr: rdma_ucm_cmd_hdr,
        body: &[u8],
        input: Option<&[u8]>,
        resp: Option<&mut [u8]>,
    ) -> Result<(), Errno> {
        let r = self.answer(hdr, body, input, resp);
        let hook = {
            let mut st = self.st();
            st.after.iter().position(|(c, _)| *c == hdr.cmd).map(|i| st.after.remove(i).1)
        };
        if let Some(f) = hook {
            f();
        }
        r
    }

    fn answer(
        &self,
        hdr: rdma_ucm_cmd_hdr,
        body: &[u8],
        input: Option<&[u8]>,
        resp: Option<&mut [u8]>,
    ) -> Result<(), Errno> {
        let mut st = self.st();
        st.log.push(Logged { hdr, body: body.to_vec(), input: input.map(<[u8]>::to_vec) });
        if usize::from(hdr.r#in) != body.len() || hdr.cmd >= 23 {
            return Err(Errno::EINVAL);
        }
        if let Some(i) = st.fail.iter().position(|(c, _)| *c == hdr.cmd) {
            return Err(st.fail.remove(i).1);
        }
        let known = |st: &State, id: u32| if st.ids.contains_key(&id) { Ok(()) } else { Err(Errno::ENOENT) };
        match hdr.cmd {
            RDMA_USER_CM_CMD_CREATE_ID => {
                let c: rdma_ucm_create_id = read(body)?;
                let id = st.next_id;
                st.next_id += 1;
                st.ids.insert(id, MockId { uid: c.uid, ps: c.ps, ..MockId::default() });
                answer(resp, &rdma_ucm_create_id_resp { id })
            }
            RDMA_USER_CM_CMD_DESTROY_ID | RDMA_USER_CM_CMD_LEAVE_MCAST => {
                let c: rdma_ucm_destroy_id = read(body)?;
                let gone = st.ids.remove(&c.id).ok_or(Errno::ENOENT)?;
                st.destroyed.push(c.id);
                // The id's unreported events go with it.
                let before = st.events.len();
                st.events.retain(|e| e.id != c.id);
                for _ in st.events.len()..before {
                    let mut b = [0u8; 1];
                    let _ = nix::unistd::read(self.readable.as_raw_fd(), &mut b);
                }
                answer(resp, &rdma_ucm_destroy_id_resp { events_reported: gone.events_reported })
            }
            RDMA_USER_CM_CMD_GET_EVENT => {
                let Some(ev) = st.events.pop_front() else { return Err(Errno::EAGAIN) };
                let mut b = [0u8; 1];
                let _ = nix::unistd::read(self.readable.as_raw_fd(), &mut b);
                let r = resp.ok_or(Errno::EFAULT)?;
                if r.len() < 324 {
                    st.events.push_front(ev);
                    let _ = nix::unistd::write(&self.writer, &[1]);
                    return Err(Errno::ENOSPC);
                }
                // A CONNECT_REQUEST counts for the listener (its uid).
                if let Some(i) = st.ids.values_mut().find(|i| i.uid == ev.uid && ev.uid != 0) {
                    i.events_reported += 1;
                }
                let n = r.len().min(size_of::<rdma_ucm_event_resp>());
                r[..n].copy_from_slice(&ev.as_bytes()[..n]);
                Ok(())
            }
            RDMA_USER_CM_CMD_QUERY => {
                let c: rdma_ucm_query = read(body)?;
                known(&st, c.id)?;
                match c.option {
                    RDMA_USER_CM_QUERY_ADDR | RDMA_USER_CM_QUERY_GID => {
                        let r = st.query_addr.unwrap_or_default();
                        answer(resp, &r)
                    }
                    RDMA_USER_CM_QUERY_PATH => answer(resp, &rdma_ucm_query_path_resp::new_zeroed()),
                    _ => Err(Errno::ENOSYS),
                }
            }
            RDMA_USER_CM_CMD_INIT_QP_ATTR => {
                let c: rdma_ucm_init_qp_attr = read(body)?;
                known(&st, c.id)?;
                let a = st.init_qp_attr.get(&c.qp_state).copied().unwrap_or_default();
                answer(resp, &a)
            }
            RDMA_USER_CM_CMD_ACCEPT => {
                let c: rdma_ucm_accept = read(body)?;
                let id = st.ids.get_mut(&c.id).ok_or(Errno::ENOENT)?;
                if c.conn_param.valid != 0 {
                    id.uid = c.uid;
                }
                Ok(())
            }
            RDMA_USER_CM_CMD_LISTEN => {
                let c: rdma_ucm_listen = read(body)?;
                st.ids.get_mut(&c.id).ok_or(Errno::ENOENT)?.listening = true;
                Ok(())
            }
            RDMA_USER_CM_CMD_MIGRATE_ID => {
                // The id moves here from another fd (the mock does not see
                // that one): it is known here from now on.
                let c: rdma_ucm_migrate_id = read(body)?;
                st.ids.entry(c.id).or_default();
                answer(resp, &rdma_ucm_migrate_resp { events_reported: 0 })
            }
            RDMA_USER_CM_CMD_JOIN_MCAST => {
                let id = st.next_id;
                st.next_id += 1;
                st.ids.insert(id, MockId::default());
                answer(resp, &rdma_ucm_create_id_resp { id })
            }
            RDMA_USER_CM_CMD_GET_OPTION => Err(Errno::ENOSYS),
            RDMA_USER_CM_CMD_BIND
            | RDMA_USER_CM_CMD_RESOLVE_ADDR
            | RDMA_USER_CM_CMD_RESOLVE_ROUTE
            | RDMA_USER_CM_CMD_CONNECT
            | RDMA_USER_CM_CMD_REJECT
            | RDMA_USER_CM_CMD_DISCONNECT
            | RDMA_USER_CM_CMD_SET_OPTION
            | RDMA_USER_CM_CMD_NOTIFY => {
                let id: u32 = match hdr.cmd {
                    RDMA_USER_CM_CMD_SET_OPTION => read::<rdma_ucm_set_option>(body)?.id,
                    RDMA_USER_CM_CMD_CONNECT => read::<rdma_ucm_connect>(body)?.id,
                    _ => read(body)?,
                };
                known(&st, id)
            }
            _ => Err(Errno::EINVAL),
        }
    }
}

impl AsFd for MockUcma {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.readable.as_fd()
    }
}
