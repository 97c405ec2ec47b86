//! The connection manager awaited (`rverbs::asynch`'s CM types on tokio)
//! against the kernel's CM over rxe0 (VM tier; feature `tokio`): many
//! clients connecting at once to one `AsyncListener` and echoing through
//! it, accept futures dropped at random points (no request lost or seen
//! twice), the async connect's errors, and one `AsyncCmChannel` carrying
//! both ends of many connections (each event reaching its id, ids dropped
//! with events pending, the listener dropped while its connections live,
//! no kernel object left). Bounded by a timeout (a failure,
//! never a pass on time).

mod common;

/// The VM tier must build this binary with feature `tokio`
/// (xtask/src/project.rs's `TEST_FEATURES`).
#[cfg(not(feature = "tokio"))]
#[test]
fn built_with_feature_tokio() {
    assert!(!common::device_required(), "tests/async_cm.rs was built without feature tokio");
    eprintln!("skipped: built without feature tokio");
}

#[cfg(feature = "tokio")]
mod on_tokio {
    use std::collections::HashSet;
    use std::net::SocketAddr;
    use std::time::Duration;

    use rverbs::asynch::{
        AsyncCmChannel, AsyncCmId, AsyncConnectRequest, AsyncConnection, AsyncCq, AsyncListener, TokioReadiness,
    };
    use rverbs::cm::{CmId, ConnParam, PortSpace};
    use rverbs::{
        AccessFlags, CqInitAttr, Errno, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcStatus,
    };

    use super::common;

    const LIMIT: Duration = Duration::from_secs(300);
    const T: Duration = Duration::from_secs(2);

    /// `port` at the test device's address (rxe0: 192.168.77.1, siw0: 192.168.79.1).
    fn at(port: u16) -> SocketAddr {
        SocketAddr::from((common::device_ipv4(&common::first_device().expect("a device")), port))
    }

    fn ready() -> bool {
        if common::first_device().is_none() {
            return false;
        }
        if !std::path::Path::new("/dev/infiniband/rdma_cm").exists() {
            assert!(!common::device_required(), "RVERBS_REQUIRE_DEVICE=1 but /dev/infiniband/rdma_cm is missing");
            return false;
        }
        true
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// The CQ (sleeping on a channel of its own) and region of a QP.
    struct Side {
        cq: AsyncCq<TokioReadiness>,
        mr: MemoryRegion,
    }

    /// A QP on `id`'s device, attached to `id` (INIT) with one receive
    /// posted, and its [`Side`].
    fn side(id: &CmId) -> (QueuePair, Side) {
        let ctx = id.context().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let ch = ctx.create_comp_channel().unwrap();
        let cq = ctx.create_cq_with(&CqInitAttr { cqe: 8, channel: Some(&ch), ..Default::default() }).unwrap();
        let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
        id.attach_qp(&qp).unwrap();
        let mr = pd.alloc_mr(256, AccessFlags::LOCAL_WRITE).unwrap();
        qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64).unwrap()])]).unwrap();
        (qp, Side { cq: AsyncCq::new(cq).unwrap(), mr })
    }

    /// Posts a signaled SEND (work request 2) of `len` bytes at `off`.
    fn send(conn: &mut AsyncConnection, s: &Side, off: usize, len: u32) {
        conn.post_send(&[SendWr::send(2, &[s.mr.sge(off, len).unwrap()]).signaled()]).unwrap();
    }

    /// The next completion of `s`, which must be a success.
    async fn next_ok(s: &mut Side) -> rverbs::Wc {
        let wc = s.cq.next().await.unwrap();
        assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
        wc
    }

    /// The server's echo SEND (work request 2) completes: SUCCESS, or
    /// WR_FLUSH_ERR when the client, which has its echo once the message
    /// arrived, disconnects before the ACK reaches us (the DREQ moves our QP
    /// to ERR; seen on 6.12's rxe under TCG).
    async fn echo_sent(s: &mut Side) {
        let wc = s.cq.next().await.unwrap();
        assert_eq!(wc.wr_id, 2, "{wc:?}");
        assert!(matches!(wc.status, WcStatus::SUCCESS | WcStatus::WR_FLUSH_ERR), "{wc:?}");
    }

    /// The server's end of one connection: accept, wait for the client's
    /// message, send it back, wait for the client's disconnect.
    async fn echo(req: AsyncConnectRequest) {
        let (qp, mut s) = side(req.id());
        let mut conn = req.accept(qp, &ConnParam::default()).await.unwrap();
        let wc = next_ok(&mut s).await;
        assert_eq!(wc.wr_id, 1);
        send(&mut conn, &s, 0, wc.byte_len);
        echo_sent(&mut s).await;
        conn.disconnected().await.unwrap();
    }

    /// A server task per request ([`echo`]).
    async fn serve(mut listener: AsyncListener, clients: usize) {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let req = listener.accept().await.unwrap();
            tasks.push(tokio::spawn(echo(req)));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }

    /// A client: connect by address, send "client N", get it back, disconnect.
    async fn client(port: u16, n: usize) {
        let id = AsyncCmId::resolve(at(port), T).await.unwrap();
        let (qp, mut s) = side(id.id());
        // The client's number in the request's private data.
        let param = ConnParam { private_data: vec![n as u8], ..ConnParam::default() };
        let mut conn = id.connect_qp(qp, &param).await.unwrap();
        let msg = format!("client {n}");
        s.mr.write_at(128, msg.as_bytes()).unwrap();
        send(&mut conn, &s, 128, msg.len() as u32);
        let mut got = HashSet::new();
        for _ in 0..2 {
            got.insert(next_ok(&mut s).await.wr_id);
        }
        assert_eq!(got, HashSet::from([1, 2]), "the echo and our send");
        let mut back = vec![0u8; msg.len()];
        s.mr.read_at(0, &mut back).unwrap();
        assert_eq!(back, msg.as_bytes());
        conn.disconnect().unwrap();
        conn.disconnected().await.unwrap();
    }

    #[test]
    fn many_clients_connect_at_once_and_echo_through_one_listener() {
        if !ready() {
            return;
        }
        const CLIENTS: usize = 8;
        runtime().block_on(async {
            tokio::time::timeout(LIMIT, async {
                let listener = AsyncListener::bind(at(20301)).unwrap();
                let server = tokio::spawn(serve(listener, CLIENTS));
                let clients: Vec<_> = (0..CLIENTS).map(|n| tokio::spawn(client(20301, n))).collect();
                for c in clients {
                    c.await.unwrap();
                }
                server.await.unwrap();
            })
            .await
            .expect("the test ran past its bound");
        });
    }

    /// `accept()` raced against a short timer, many times: every request
    /// is handed out exactly once.
    #[test]
    fn dropped_accept_futures_lose_no_request() {
        if !ready() {
            return;
        }
        const CLIENTS: usize = 6;
        runtime().block_on(async {
            tokio::time::timeout(LIMIT, async {
                let mut listener = AsyncListener::bind(at(20302)).unwrap();
                // Staggered, so that many accept futures are dropped in between.
                let clients: Vec<_> = (0..CLIENTS)
                    .map(|n| {
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(20 * n as u64)).await;
                            client(20302, n).await
                        })
                    })
                    .collect();
                let mut served = Vec::new();
                let mut seen = HashSet::new();
                let mut dropped = 0u32;
                let mut tick = 0u64;
                while served.len() < CLIENTS {
                    tick += 1;
                    // 0..3 ms: often before a request is in, sometimes while one is.
                    let nap = Duration::from_micros((tick * 7919) % 3000);
                    tokio::select! {
                        r = listener.accept() => {
                            let req = r.unwrap();
                            // By the client's number: kernel ids are reused once a
                            // finished connection's id is destroyed.
                            assert!(seen.insert(req.private_data()[0]), "a request handed out twice");
                            served.push(tokio::spawn(echo(req)));
                        }
                        _ = tokio::time::sleep(nap) => dropped += 1,
                    }
                }
                eprintln!("{dropped} accept futures dropped");
                assert!(dropped > 0, "the race never dropped a future: the test tested nothing");
                for t in clients.into_iter().chain(served) {
                    t.await.unwrap();
                }
            })
            .await
            .expect("the test ran past its bound");
        });
    }

    #[test]
    fn async_connect_errors_name_the_address() {
        if !ready() {
            return;
        }
        runtime().block_on(async {
            tokio::time::timeout(LIMIT, async {
                // Nobody listens: REJECTED, reason 8.
                let id = AsyncCmId::resolve(at(20303), T).await.unwrap();
                let (qp, _s) = side(id.id());
                let e = id.connect_qp(qp, &ConnParam::default()).await.unwrap_err();
                assert_eq!(e.errno(), Some(Errno::ECONNREFUSED), "{e}");
                assert!(e.to_string().contains(&format!("nobody listens at {}", at(20303))), "{e}");
                // Nobody answers ARP: ADDR_ERROR within the resolve timeout.
                let e = AsyncCmId::resolve("192.168.77.99:20304".parse().unwrap(), Duration::from_millis(500))
                    .await
                    .unwrap_err();
                assert!(e.to_string().contains("192.168.77.99:20304"), "{e}");
                // Private data over the limit: refused before the kernel.
                let id = AsyncCmId::resolve(at(20303), T).await.unwrap();
                let (qp, _s) = side(id.id());
                // IB CM's REQ carries 56 bytes, iWARP's MPA request 248.
                let transport = id.id().context().unwrap().device().transport();
                let max = rverbs::cm::private_data_limit(PortSpace::Tcp, transport, rverbs::cm::PrivateDataIn::Connect);
                let long = ConnParam { private_data: vec![0; max + 1], ..ConnParam::default() };
                let e = id.connect_qp(qp, &long).await.unwrap_err();
                assert!(e.to_string().contains(&format!("at most {max}")), "{e}");
            })
            .await
            .expect("the test ran past its bound");
        });
    }

    /// Both ends of 12 connections on one `AsyncCmChannel` (the listener,
    /// its accepted ids and the clients: one fd, their events interleaved):
    /// each connection echoes its own message; the listener is dropped
    /// while they live; then half are dropped by the client without reading
    /// an event (the server sees DISCONNECTED), half disconnected by the
    /// server, whose end is dropped with its DISCONNECTED (and
    /// TIMEWAIT_EXIT) unread (the client sees DISCONNECTED). Afterwards no
    /// CM id, QP or CQ of the test is left in the kernel.
    #[test]
    fn one_channel_routes_both_ends_of_many_connections_and_leaks_nothing() {
        if !ready() {
            return;
        }
        let dev = common::first_device().unwrap();
        let before = common::resource_counts(dev.name());
        const N: usize = 12;
        runtime().block_on(async {
            tokio::time::timeout(LIMIT, async {
                let ch = AsyncCmChannel::new().unwrap();
                let mut listener = AsyncListener::bind_on(&ch, at(20305), PortSpace::Tcp, 0).unwrap();
                let clients: Vec<_> = (0..N)
                    .map(|n| {
                        let ch = ch.clone();
                        tokio::spawn(async move {
                            let id = AsyncCmId::resolve_on(&ch, at(20305), T).await.unwrap();
                            let (qp, s) = side(id.id());
                            let param = ConnParam { private_data: vec![n as u8], ..ConnParam::default() };
                            (id.connect_qp(qp, &param).await.unwrap(), s)
                        })
                    })
                    .collect();
                let mut servers = Vec::new();
                for _ in 0..N {
                    let req = listener.accept().await.unwrap();
                    let n = usize::from(req.private_data()[0]);
                    let (qp, s) = side(req.id());
                    let accepted = req.accept(qp, &ConnParam::default());
                    servers.push((n, tokio::spawn(async move { (accepted.await.unwrap(), s) })));
                }
                // The listener goes; its connections stay routed.
                drop(listener);
                let mut cli = Vec::new();
                for c in clients {
                    cli.push(Some(c.await.unwrap()));
                }
                let mut srv: Vec<Option<(AsyncConnection, Side)>> = (0..N).map(|_| None).collect();
                for (n, t) in servers {
                    srv[n] = Some(t.await.unwrap());
                }
                // Each client sends its number; its server echoes it.
                for (n, c) in cli.iter_mut().enumerate() {
                    let (c, s) = c.as_mut().unwrap();
                    s.mr.write_at(128, &[n as u8]).unwrap();
                    send(c, s, 128, 1);
                }
                for (n, c) in srv.iter_mut().enumerate() {
                    let (c, s) = c.as_mut().unwrap();
                    let wc = next_ok(s).await;
                    assert_eq!(wc.wr_id, 1);
                    let mut got = [0u8];
                    s.mr.read_at(0, &mut got).unwrap();
                    assert_eq!(usize::from(got[0]), n, "connection {n} got another's message");
                    send(c, s, 0, 1);
                    assert_eq!(next_ok(s).await.wr_id, 2);
                }
                for c in &mut cli {
                    let (_, s) = c.as_mut().unwrap();
                    let mut ids = HashSet::new();
                    for _ in 0..2 {
                        ids.insert(next_ok(s).await.wr_id);
                    }
                    assert_eq!(ids, HashSet::from([1, 2]));
                }
                for n in 0..N {
                    let (mut s_conn, _ss) = srv[n].take().unwrap();
                    let (mut c_conn, _cs) = cli[n].take().unwrap();
                    if n % 2 == 0 {
                        // The client goes without reading an event.
                        drop(c_conn);
                        s_conn.disconnected().await.unwrap();
                    } else {
                        s_conn.disconnect().unwrap();
                        c_conn.disconnected().await.unwrap();
                        // The server's end goes with its events unread.
                        drop(s_conn);
                    }
                }
            })
            .await
            .expect("the test ran past its bound");
        });
        common::assert_no_growth(dev.name(), &before);
    }
}
