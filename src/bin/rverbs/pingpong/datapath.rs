//! The data loop (rdma-core's `while (rcnt < iters || scnt < iters)`),
//! one copy per mode, and its errors and stall limit, out of line.

use std::time::Instant;

use rverbs::{
    CompletionChannel, CompletionQueue, MemoryRegion, QueuePair, RecvWr, SendWr, SharedReceiveQueue, Wc, WcStatus,
};

use super::options::Opts;
use super::post::{post_recvs, post_recvs_rq, send_on};
use super::{hot, lib_err, RECV_WRID, SEND_WRID};

/// The exchange's state (rdma-core's loop variables), borrowed from
/// [`run`](super::run): the data loop lives in [`DataPath::run`], one copy per mode.
pub struct DataPath<'a, 'w> {
    pub qps: &'a mut [QueuePair],
    pub srq: &'a mut Option<SharedReceiveQueue>,
    pub mr: &'a MemoryRegion,
    pub payload_off: usize,
    pub inline: bool,
    pub rx_depth: u32,
    pub cq: &'a mut CompletionQueue,
    pub o: &'a Opts,
    pub send_wr: &'a SendWr<'w>,
    pub recv_wr: &'a RecvWr<'w>,
    pub scratch: &'a mut [u8],
    /// Per QP: the work requests (send, receive) still to complete before
    /// the next send.
    pub pending: &'a mut [u64],
    pub wcs: &'a mut [Wc],
    /// Receives posted and not yet completed.
    pub routs: i64,
}

impl DataPath<'_, '_> {
    /// rdma-core's `while (rcnt < iters || scnt < iters)`: completions
    /// (after an event when `EVENTS`), a refill of the receives when they
    /// run low, the next send once a QP's send and receive both completed.
    /// `SRQ`: several QPs on one SRQ (the completion names its QP).
    /// Returns how many events it read (to acknowledge).
    #[inline(never)]
    pub fn run<const EVENTS: bool, const SRQ: bool>(
        &mut self,
        channel: Option<&CompletionChannel>,
    ) -> Result<u32, String> {
        let o = self.o;
        let iters = u64::from(o.iters);
        let nqp = self.qps.len();
        let refill_at = if SRQ { nqp as i64 } else { 1 };
        let rx_depth = i64::from(self.rx_depth);
        let cq_handle = self.cq.user_handle();
        // Event mode: the stall alarm's last look at the counts, and how
        // many alarms in a row found them unchanged.
        let (mut seen, mut quiet) = (0u64, 0u32);
        let (mut rcnt, mut scnt, mut num_events) = (0u64, 0u64, 0u32);
        // The loop's state in locals, not behind `self`: LLVM reloaded the
        // slices' lengths and stored `routs` through the pointer per CQE.
        let (qps, pending, wcs) = (&mut *self.qps, &mut *self.pending, &mut *self.wcs);
        // Without an SRQ there is one QP: its pending bits in a local, not
        // loaded and stored through the slice per completion.
        let mut pending0 = pending[0];
        let mut routs = self.routs;
        while rcnt < iters || scnt < iters {
            let ne = if let (true, Some(ch)) = (EVENTS, channel) {
                // One test for an event; a failure and a stall sorted out
                // of line.
                let ev = match hot::get_cq_event(ch) {
                    Ok(Some(ev)) => ev,
                    Err(e) if e.errno() == Some(rverbs::Errno::EINTR) => {
                        // The stall alarm (every quarter of --timeout) cut
                        // the wait short: four in a row with no completion
                        // in between are a stall.
                        (seen, quiet) = stall_check(o, (seen, quiet), rcnt + scnt, rcnt, scnt)?;
                        continue;
                    }
                    other => return Err(no_event(other)),
                };
                num_events += 1;
                if ev.cq_user_handle != cq_handle {
                    return Err(unknown_cq(ev));
                }
                hot::req_notify(self.cq).map_err(lib_err("Couldn't request CQ notification"))?;
                hot::poll(self.cq, wcs)
            } else {
                let mut n = hot::poll(self.cq, wcs);
                if n == 0 {
                    // The stall limit's clock is read once every 2^20 empty polls
                    // (an empty poll takes nanoseconds, also in a TCG guest: some
                    // milliseconds) and starts at the first such read: a wait
                    // shorter than that reads no clock, which in a guest without
                    // a vDSO clock (6.1's under TCG) is a syscall; every 2^16th
                    // poll made 182 clock_gettime syscalls in a -n 100 run there.
                    // A stall is reported at most one interval after the limit.
                    let mut since = None;
                    let mut spins = 0u32;
                    while n == 0 {
                        spins = spins.wrapping_add(1);
                        if spins % (1 << 20) == 0 && since.get_or_insert_with(Instant::now).elapsed() >= o.timeout {
                            return Err(stalled(o, rcnt, scnt, "completion"));
                        }
                        n = hot::poll(self.cq, wcs);
                    }
                }
                n
            };
            // One bounds check per poll, none per completion.
            for wc in &wcs[..ne] {
                if wc.status != WcStatus::SUCCESS {
                    return Err(failed_wc(wc));
                }
                let (wr_id, qp_num) = (wc.wr_id, wc.qp_num);
                let q = if SRQ {
                    qps.iter()
                        .position(|qp| qp.qp_num() == qp_num)
                        .ok_or_else(|| format!("Couldn't find QPN {qp_num:06x}"))?
                } else {
                    0
                };
                match wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        routs -= 1;
                        if routs <= refill_at {
                            let n = (rx_depth - routs) as u32;
                            let posted = if SRQ {
                                post_recvs(qps, self.srq, self.recv_wr, n)
                            } else {
                                post_recvs_rq(&mut qps[0], self.recv_wr, n)
                            };
                            routs += i64::from(posted);
                            if routs < rx_depth {
                                return Err(format!("Couldn't post receive ({routs})"));
                            }
                        }
                        rcnt += 1;
                    }
                    other => return Err(format!("Completion for unknown wr_id {other}")),
                }
                let p = if SRQ { &mut pending[q] } else { &mut pending0 };
                *p &= !wr_id;
                if scnt < iters && *p == 0 {
                    *p = RECV_WRID | SEND_WRID;
                    send_on(&mut qps[q], self.send_wr, self.inline, self.mr, self.payload_off, self.scratch)?;
                }
            }
        }
        if !SRQ {
            pending[0] = pending0;
        }
        self.routs = routs;
        Ok(num_events)
    }
}

/// The error for a wait on the (blocking) channel that gave no event and
/// was not the stall alarm's.
#[cold]
fn no_event(got: rverbs::Result<Option<rverbs::CqEvent>>) -> String {
    match got {
        Err(e) => lib_err("Failed to get cq_event")(e),
        _ => "Failed to get cq_event: the channel is non-blocking".into(),
    }
}

/// How many stall alarms in event mode, with no completion in between,
/// make `--timeout`: the alarm comes every quarter of it.
pub const STALL_ALARMS: u32 = 4;

/// Event mode's stall alarm interrupted a wait: `(seen, quiet)`, the count
/// of completions at the last alarm and the alarms in a row that found it
/// unchanged, become the next pair, or the stall's error once `--timeout`
/// has passed with none (reported at most a quarter of it late).
#[cold]
fn stall_check(o: &Opts, (seen, quiet): (u64, u32), done: u64, rcnt: u64, scnt: u64) -> Result<(u64, u32), String> {
    if done != seen {
        return Ok((done, 0));
    }
    if quiet + 1 >= STALL_ALARMS {
        return Err(stalled(o, rcnt, scnt, "completion event"));
    }
    Ok((seen, quiet + 1))
}

#[cold]
fn unknown_cq(ev: rverbs::CqEvent) -> String {
    format!("CQ event for unknown CQ {:#x}", ev.cq_user_handle)
}

/// The error for a completion that failed, with a hint where the cause is usual.
#[cold]
fn failed_wc(wc: &Wc) -> String {
    let hint = match (wc.status, wc.wr_id) {
        (WcStatus::RETRY_EXC_ERR, _) => " (the peer's QP does not answer: is it still running?)",
        (WcStatus::RNR_RETRY_EXC_ERR, _) => " (the peer has no receive posted)",
        // rxe reports an oversized message as a QP operation error.
        (WcStatus::LOC_LEN_ERR | WcStatus::LOC_QP_OP_ERR, RECV_WRID) => {
            " (did the peer send more than -s bytes? give both sides the same -s)"
        }
        _ => "",
    };
    format!("Failed status {} ({}) for wr_id {}{hint}", wc.status, wc.status.0, wc.wr_id)
}

fn stalled(o: &Opts, rcnt: u64, scnt: u64, what: &str) -> String {
    format!(
        "no {what} for {} s after {scnt} of {} sends and {rcnt} of {} receives (is the peer still running? \
         --timeout sets the limit)",
        o.timeout.as_secs(),
        o.iters,
        o.iters
    )
}

#[cfg(test)]
mod tests {
    use super::super::options::{args, parse_args};
    use super::*;
    /// Event mode's stall alarm: four alarms in a row with no completion
    /// in between are a stall; any completion starts the count over.
    #[test]
    fn stall_alarms_count_quiet_quarters() {
        let o = parse_args(&args(&["--timeout", "8"])).unwrap();
        let mut st = (0, 0);
        for _ in 0..3 {
            st = stall_check(&o, st, 0, 0, 0).unwrap();
        }
        assert_eq!(st, (0, 3));
        let e = stall_check(&o, st, 0, 0, 0).unwrap_err();
        assert!(e.contains("no completion event for 8 s after 0 of 1000 sends"), "{e}");
        // Progress at the fourth alarm: not a stall, and three more quiet
        // ones are not either.
        st = stall_check(&o, st, 5, 3, 2).unwrap();
        assert_eq!(st, (5, 0));
        for _ in 0..3 {
            st = stall_check(&o, st, 5, 3, 2).unwrap();
        }
        assert!(stall_check(&o, st, 5, 3, 2).is_err());
    }
}
