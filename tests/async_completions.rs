//! Completions and async events through `rverbs::asynch` on tokio, against
//! rxe (VM tier; feature `tokio`, which the VM tier builds with): many
//! messages in event mode, futures dropped at random points, many QPs on
//! one CQ and channel, port and SRQ-limit events through the stream. Each
//! test is bounded by a timeout (a failure, never a pass on time).

mod common;

/// The VM tier must build this binary with feature `tokio`
/// (xtask/src/project.rs's `TEST_FEATURES`): without it, these tests would
/// silently not exist.
#[cfg(not(feature = "tokio"))]
#[test]
fn built_with_feature_tokio() {
    assert!(!common::device_required(), "tests/async_completions.rs was built without feature tokio");
    eprintln!("skipped: built without feature tokio");
}

#[cfg(feature = "tokio")]
mod on_tokio {
    use std::collections::HashMap;
    use std::future::poll_fn;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::time::Duration;

    use futures_core::Stream;
    use rverbs::asynch::{AsyncChannel, AsyncCq, AsyncEvents, TokioReadiness};
    use rverbs::{
        AccessFlags, AsyncEventType, CompletionQueue, ConnectOptions, Context, CqInitAttr, EventObject, QpCap,
        QpInitAttr, QpType, QueuePair, RecvWr, SendWr, Wc, WcOpcode,
    };
    use tokio::sync::{mpsc, Semaphore};

    use super::common;

    /// Generous bounds: a lost wakeup fails the test instead of hanging it.
    const LIMIT: Duration = Duration::from_secs(600);

    fn runtime(workers: usize) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap()
    }

    /// The next item of a `Stream` (no futures-util here).
    async fn next_item<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
        poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
    }

    /// Marks `id` seen, failing on a second time.
    fn once(seen: &mut [bool], id: u64, what: &str) {
        let slot = seen.get_mut(id as usize).unwrap_or_else(|| panic!("{what} {id} out of range"));
        assert!(!*slot, "{what} {id} completed twice");
        *slot = true;
    }

    fn cq_on(ctx: &Context, ch: &AsyncChannel<TokioReadiness>, cqe: u32) -> CompletionQueue {
        ctx.create_cq_with(&CqInitAttr { cqe, channel: Some(ch.channel()), ..Default::default() }).unwrap()
    }

    fn rc_qp(pd: &rverbs::ProtectionDomain, cq: &CompletionQueue, send: u32, recv: u32) -> QueuePair {
        let mut init = QpInitAttr::new(QpType::Rc, cq);
        init.cap = QpCap { max_send_wr: send, max_recv_wr: recv, ..QpCap::default() };
        pd.create_qp(&init).unwrap()
    }

    /// 100,000 SENDs from one QP to another, each side's CQ on one shared
    /// channel and waited on by its own task (the send half in one, the
    /// receive half in the other, on a two-thread runtime): every send and
    /// every receive completes exactly once, through the completion stream
    /// in event mode (both CQs acknowledged events).
    #[test]
    fn hundred_thousand_messages_through_the_completion_stream() {
        const N: u64 = 100_000;
        const RECVS: u32 = 128; // receives kept posted; sends are gated by them
        const WINDOW: u32 = 64; // sends in flight
        let Some(dev) = common::first_device() else { return };
        let rt = runtime(2);
        let _guard = rt.enter();
        let ctx = dev.open().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let ch = AsyncChannel::new(ctx.create_comp_channel().unwrap()).unwrap();
        let (cq_s, cq_r) = (cq_on(&ctx, &ch, 256), cq_on(&ctx, &ch, 256));
        let a = rc_qp(&pd, &cq_s, WINDOW, 1);
        let b = rc_qp(&pd, &cq_r, 1, RECVS);
        let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
        let mr = Arc::new(pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap());
        let (mut sq, _) = a.into_split();
        let (_, rq) = b.into_split();
        let mut rq = rq.unwrap();
        let (mut scq, mut rcq) = (ch.attach(cq_s).unwrap(), ch.attach(cq_r).unwrap());
        let credits = Arc::new(Semaphore::new(0));
        for j in 0..RECVS {
            rq.post_recv(&[RecvWr::new(u64::from(j), &[mr.sge(0, 64).unwrap()])]).unwrap();
        }
        credits.add_permits(RECVS as usize);

        let sender = {
            let (mr, credits) = (mr.clone(), credits.clone());
            async move {
                let mut seen = vec![false; N as usize];
                let (mut posted, mut done) = (0u64, 0u64);
                let sgl = [mr.sge(64, 8).unwrap()];
                while done < N {
                    while posted < N && posted - done < u64::from(WINDOW) {
                        // One permit per receive the peer has posted.
                        credits.acquire().await.unwrap().forget();
                        sq.post_send(&[SendWr::send(posted, &sgl).signaled()]).unwrap();
                        posted += 1;
                    }
                    let wc = next_item(&mut scq).await.expect("the stream never ends").unwrap();
                    let wc = wc.ok().unwrap();
                    assert_eq!(wc.opcode, WcOpcode::SEND);
                    once(&mut seen, wc.wr_id, "send");
                    done += 1;
                }
                scq
            }
        };
        let receiver = async move {
            let mut seen = vec![false; (N + u64::from(RECVS)) as usize];
            let mut wcs = [Wc::default(); 32];
            let (mut got, mut next_id) = (0u64, u64::from(RECVS));
            while got < N {
                let n = rcq.wait_any(&mut wcs).await.unwrap();
                for wc in &wcs[..n] {
                    let wc = wc.ok().unwrap();
                    assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RECV, 8));
                    once(&mut seen, wc.wr_id, "receive");
                    got += 1;
                    rq.post_recv(&[RecvWr::new(next_id, &[mr.sge(0, 64).unwrap()])]).unwrap();
                    next_id += 1;
                    credits.add_permits(1);
                }
            }
            rcq
        };
        let (scq, rcq) = rt.block_on(async {
            let s = tokio::spawn(sender);
            let r = tokio::spawn(receiver);
            tokio::time::timeout(LIMIT, async { (s.await.unwrap(), r.await.unwrap()) })
                .await
                .expect("the messages did not all complete within the limit")
        });
        // Event mode: the tasks slept on the channel and took its events (a
        // CQ that never ran empty needs none: on 6.1 one of the two may not).
        let (s, r) = (scq.cq().events_acked(), rcq.cq().events_acked());
        eprintln!("events taken: send CQ {s}, receive CQ {r}");
        assert!(s + r > 0, "no completion event was taken");
    }

    /// xorshift64*, seeded per run.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    /// What a wait races against: ready at once, after a few yields, or a
    /// short timer.
    async fn racer(kind: u64, yields: u64) {
        match kind {
            0 => {}
            1..=6 => {
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                }
            }
            7..=8 => tokio::time::sleep(Duration::ZERO).await,
            _ => tokio::time::sleep(Duration::from_micros(200)).await,
        }
    }

    /// 10,000 waits (`next` and `wait(3)`) dropped at random points by a
    /// `select!` against a short timer or a few yields, while another task
    /// SENDs at random moments: every receive still completes exactly once,
    /// and nothing comes after the last.
    #[test]
    fn dropped_waits_lose_no_completion() {
        const MSGS: u64 = 3_000;
        const DROPS: u64 = 10_000;
        const RECVS: u32 = 64;
        let Some(dev) = common::first_device() else { return };
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
        eprintln!("seed {seed}");
        let rt = runtime(2);
        let _guard = rt.enter();
        let ctx = dev.open().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let ch = AsyncChannel::new(ctx.create_comp_channel().unwrap()).unwrap();
        let (cq_s, cq_r) = (cq_on(&ctx, &ch, 256), cq_on(&ctx, &ch, 256));
        let a = rc_qp(&pd, &cq_s, 64, 1);
        let mut b = rc_qp(&pd, &cq_r, 1, RECVS);
        let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
        let mr = Arc::new(pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap());
        for j in 0..RECVS {
            b.post_recv(&[RecvWr::new(u64::from(j), &[mr.sge(0, 64).unwrap()])]).unwrap();
        }
        let (mut sq, _) = a.into_split();
        let mut scq = ch.attach(cq_s).unwrap();
        let mut rcq = ch.attach(cq_r).unwrap();
        let credits = Arc::new(Semaphore::new(RECVS as usize));

        let sender = {
            let (mr, credits) = (mr.clone(), credits.clone());
            async move {
                let mut rng = Rng(seed ^ 0x5555);
                let sgl = [mr.sge(64, 8).unwrap()];
                let mut done = 0u64;
                for i in 0..MSGS {
                    credits.acquire().await.unwrap().forget();
                    sq.post_send(&[SendWr::send(i, &sgl).signaled()]).unwrap();
                    if rng.below(4) == 0 {
                        racer(rng.below(10), rng.below(4)).await; // a pause
                    }
                    if i + 1 - done >= 32 || i + 1 == MSGS {
                        while done <= i {
                            scq.next().await.unwrap().ok().unwrap();
                            done += 1;
                        }
                    }
                }
            }
        };
        let receiver = async move {
            let mut rng = Rng(seed);
            let mut seen = vec![false; (MSGS + u64::from(RECVS)) as usize];
            let (mut got, mut drops, mut next_id) = (0u64, 0u64, u64::from(RECVS));
            let mut three = [Wc::default(); 3];
            let mut handle = |wc: &Wc, got: &mut u64, b: &mut QueuePair| {
                let wc = wc.ok().unwrap();
                assert_eq!(wc.opcode, WcOpcode::RECV);
                once(&mut seen, wc.wr_id, "receive");
                *got += 1;
                b.post_recv(&[RecvWr::new(next_id, &[mr.sge(0, 64).unwrap()])]).unwrap();
                next_id += 1;
                credits.add_permits(1);
            };
            while got < MSGS || drops < DROPS {
                let (kind, yields) = (rng.below(10), rng.below(4));
                // `wait(3)` only while 3 more are due: it waits for all 3.
                if rng.below(3) == 0 && got + 3 <= MSGS {
                    tokio::select! {
                        biased;
                        r = rcq.wait(&mut three) => {
                            r.unwrap();
                            for wc in three {
                                handle(&wc, &mut got, &mut b);
                            }
                        }
                        () = racer(kind, yields) => drops += 1,
                    }
                } else {
                    tokio::select! {
                        biased;
                        r = rcq.next() => handle(&r.unwrap(), &mut got, &mut b),
                        () = racer(kind, yields) => drops += 1,
                    }
                }
            }
            assert_eq!(got, MSGS);
            // Nothing after the last.
            let extra = tokio::time::timeout(Duration::from_millis(200), rcq.next()).await;
            assert!(extra.is_err(), "a completion after the last: {extra:?}");
            (drops, rcq.buffered(), rcq.cq().events_acked())
        };
        let (drops, buffered, events) = rt.block_on(async {
            let s = tokio::spawn(sender);
            let r = tokio::spawn(receiver);
            tokio::time::timeout(LIMIT, async {
                s.await.unwrap();
                r.await.unwrap()
            })
            .await
            .expect("the receives did not all complete within the limit")
        });
        assert_eq!(buffered, 0);
        eprintln!("{drops} waits dropped, {events} events taken");
    }

    /// 64 QPs (32 connected pairs) whose sends and receives all complete
    /// on one CQ, on one channel: one task waits on the CQ and hands each
    /// completion to the task driving its QP; 32 tasks run ping-pongs at
    /// once on a four-thread runtime. Every completion reaches its QP's
    /// task exactly once, in order.
    #[test]
    fn sixty_four_qps_share_one_cq_and_channel() {
        const PAIRS: usize = 32;
        const ROUNDS: u64 = 16;
        let Some(dev) = common::first_device() else { return };
        let rt = runtime(4);
        let _guard = rt.enter();
        let ctx = dev.open().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx
            .create_cq_with(&CqInitAttr {
                cqe: 4 * PAIRS as u32,
                channel: Some(&ctx.create_comp_channel().unwrap()),
                ..Default::default()
            })
            .unwrap();
        let mut _cm = Vec::new(); // iWARP: the CM ids, kept with the QPs
        let pairs: Vec<(QueuePair, QueuePair)> = (0..PAIRS)
            .map(|_| {
                let (a, b) = (rc_qp(&pd, &cq, 2, 2), rc_qp(&pd, &cq, 2, 2));
                _cm.extend(common::connect_pair(&ctx, &a, &b, &ConnectOptions::default()));
                (a, b)
            })
            .collect();
        assert_eq!(pairs.len() * 2, 64);
        let mut routes: HashMap<u32, mpsc::UnboundedSender<Wc>> = HashMap::new();
        let mut inboxes = Vec::new();
        for (a, b) in &pairs {
            let (ta, ra) = mpsc::unbounded_channel();
            let (tb, rb) = mpsc::unbounded_channel();
            routes.insert(a.qp_num(), ta);
            routes.insert(b.qp_num(), tb);
            inboxes.push((ra, rb));
        }
        let mut acq = AsyncCq::new(cq).unwrap();
        let total = PAIRS as u64 * ROUNDS * 2;
        let dispatcher = async move {
            for _ in 0..total {
                let wc = acq.next().await.unwrap();
                routes[&wc.qp_num].send(wc).unwrap();
            }
            acq
        };
        let mut tasks = Vec::new();
        for ((mut a, mut b), (mut ra, mut rb)) in pairs.into_iter().zip(inboxes) {
            let mr = pd.alloc_mr(256, AccessFlags::LOCAL_WRITE).unwrap();
            tasks.push(async move {
                for round in 0..ROUNDS {
                    b.post_recv(&[RecvWr::new(round, &[mr.sge(0, 64).unwrap()])]).unwrap();
                    let sgl = [mr.sge(128, 16).unwrap()];
                    a.post_send(&[SendWr::send(round, &sgl).signaled()]).unwrap();
                    let s = ra.recv().await.unwrap().ok().unwrap();
                    let r = rb.recv().await.unwrap().ok().unwrap();
                    assert_eq!((s.opcode, s.wr_id, s.qp_num), (WcOpcode::SEND, round, a.qp_num()));
                    assert_eq!((r.opcode, r.wr_id, r.qp_num), (WcOpcode::RECV, round, b.qp_num()));
                }
                assert!(ra.try_recv().is_err() && rb.try_recv().is_err(), "a completion too many");
            });
        }
        let acq = rt.block_on(async {
            let d = tokio::spawn(dispatcher);
            let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
            tokio::time::timeout(LIMIT, async {
                for h in handles {
                    h.await.unwrap();
                }
                d.await.unwrap()
            })
            .await
            .expect("the 64 QPs did not finish within the limit")
        });
        assert!(acq.cq().events_acked() > 0, "no completion event was taken");
    }

    fn ip(args: &[&str]) {
        let out = common::run("/usr/bin/ip", args);
        assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The next event that is not a GID change (port changes bring those).
    async fn next_event(events: &mut AsyncEvents<TokioReadiness>) -> rverbs::AsyncEvent {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), next_item(events))
                .await
                .expect("no async event within 30 s")
                .expect("the stream never ends")
                .unwrap();
            if ev.event_type != AsyncEventType::GidChange {
                return ev;
            }
        }
    }

    /// `ip link set dev v0 down` / `up` under rxe0: PORT_ERR then
    /// PORT_ACTIVE on port 1 arrive through the stream.
    #[test]
    fn port_events_arrive_through_the_stream() {
        let Some(dev) = common::first_device() else { return };
        let Some(netdev) = common::netdev_of(&dev) else {
            assert!(
                !common::device_required() || !(dev.name().starts_with("rxe") || common::is_iwarp(&dev)),
                "rxe and siw have a netdev"
            );
            return;
        };
        let rt = runtime(1);
        let ctx = dev.open().unwrap();
        rt.block_on(async {
            let mut events = AsyncEvents::new(&ctx).unwrap();
            // A second registration of the same fd is refused clearly.
            let again = AsyncEvents::new(&ctx).unwrap_err();
            assert_eq!(again.errno(), Some(rverbs::Errno::EEXIST), "{again}");
            ip(&["link", "set", "dev", &netdev, "down"]);
            let down = next_event(&mut events).await;
            ip(&["link", "set", "dev", &netdev, "up"]);
            assert_eq!((down.event_type, down.object), (AsyncEventType::PortErr, EventObject::Port(1)), "{down:?}");
            let up = next_event(&mut events).await;
            assert_eq!((up.event_type, up.object), (AsyncEventType::PortActive, EventObject::Port(1)), "{up:?}");
        });
        let state = || common::sysfs(dev.sysfs_path().join("ports/1/state"));
        for _ in 0..100 {
            if state().contains("ACTIVE") {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(state().contains("ACTIVE"), "port stays down: {}", state());
    }

    /// The SRQ limit event names the SRQ, through the stream, while the
    /// completions of the SENDs that crossed the limit are awaited too.
    #[test]
    fn srq_limit_event_arrives_through_the_stream() {
        let Some(dev) = common::first_device() else { return };
        let rt = runtime(1);
        let _guard = rt.enter();
        let ctx = dev.open().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let ch = AsyncChannel::new(ctx.create_comp_channel().unwrap()).unwrap();
        let (cq_a, cq_b) = (cq_on(&ctx, &ch, 64), cq_on(&ctx, &ch, 64));
        let mut srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }).unwrap();
        let mut init = QpInitAttr::new(QpType::Rc, &cq_b);
        init.srq = Some(&srq);
        let b = pd.create_qp(&init).unwrap();
        let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
        let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
        let m = pd.alloc_mr(16 * 64, AccessFlags::LOCAL_WRITE).unwrap();
        for i in 0..8 {
            srq.post_recv(&[RecvWr::new(i, &[m.sge(i as usize * 64, 64).unwrap()])]).unwrap();
        }
        srq.modify_limit(6).unwrap();
        let (mut acq_a, mut acq_b) = (ch.attach(cq_a).unwrap(), ch.attach(cq_b).unwrap());
        rt.block_on(async {
            let mut events = AsyncEvents::new(&ctx).unwrap();
            let s = [m.sge(0, 8).unwrap()];
            for i in 0..3 {
                a.post_send(&[SendWr::send(i, &s).signaled()]).unwrap();
            }
            let mut out = [Wc::default(); 3];
            tokio::time::timeout(Duration::from_secs(30), acq_a.wait(&mut out)).await.unwrap().unwrap();
            tokio::time::timeout(Duration::from_secs(30), acq_b.wait(&mut out)).await.unwrap().unwrap();
            assert!(out.iter().all(|w| w.opcode == WcOpcode::RECV), "{out:?}");
            let ev = next_event(&mut events).await;
            assert_eq!(ev.event_type, AsyncEventType::SrqLimitReached, "{ev:?}");
            assert_eq!(ev.object, EventObject::Srq { user_handle: srq.user_handle() });
        });
    }
}
