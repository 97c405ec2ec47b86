//! The host's mock benches (providers against the mock kernel and the
//! HCA model): their counts, goals and table.

/// The host's mock benches: (provider, case, instructions per operation).
#[derive(Debug, Default)]
pub struct MockCounts {
    pub counts: Vec<(String, String, f64)>,
    /// The many-QP poll on the fake ConnectX: (completions a call asks
    /// for, QPs, instructions per CQE in rdma-core's libmlx5, rverbs' Rust
    /// API, rverbs' C library).
    pub many_qp: Vec<(usize, u32, [f64; 3])>,
}

/// The targets of the mock benches (docs/PERFORMANCE.md, docs/MLX5.md).
fn mock_goal(provider: &str, case: &str) -> f64 {
    match (provider, case) {
        ("rxe", "post") => 150.0,
        ("rxe", _) => 60.0,
        ("mlx5", "post") => 60.0,
        _ => 40.0,
    }
}

pub(super) fn mock_table(m: &MockCounts) -> String {
    let mut s = String::from(
        "Providers against the mock kernel (rxe) and the HCA model (mlx5), on the host, instructions per \
         operation ((Ir(2N) − Ir(N)) / N, N = 100,000):\n\n| provider | operation | instructions | goal | met |\n| --- \
         | --- | ---: | --- | --- |\n",
    );
    for (p, case, v) in &m.counts {
        let what = match case.as_str() {
            "post" => "post of one WR",
            "poll16" => "poll, batches of 16, per CQE",
            "poll16plain" => "poll, batches of 16, per CQE without immediate data",
            "poll_one" => "poll_one call that returns one CQE",
            _ => "poll call that returns one CQE",
        };
        let goal = mock_goal(p, case);
        let met = if *v <= goal + 1e-9 { "yes" } else { "**no**" };
        s.push_str(&format!("| {p} | {what} | {v:.1} | ≤ {goal} | {met} |\n"));
    }
    if !m.many_qp.is_empty() {
        s.push_str(&many_qp_table(&m.many_qp));
    }
    s
}

/// The many-QP poll on the fake ConnectX, rdma-core / rverbs / C library.
fn many_qp_table(rows: &[(usize, u32, [f64; 3])]) -> String {
    let mut s = String::from(
        "\nmlx5, one CQ under Q RC QPs on the fake ConnectX (`mlx5-diff --many-qp`: rdma-core 44's libibverbs + \
         libmlx5 and rverbs on one fake kernel, mlx5-diff's fake HCA writing the CQEs): each fill posts one signaled \
         WRITE on every QP 16 times and completes them in that order, so consecutive CQEs name different QPs; polled \
         16 completions a call or one. Instructions per CQE inside the poll calls ((Ir(2N) − Ir(N)) / N, \
         N = 40,960), rdma-core / rverbs' Rust API / rverbs' C library (×: over rdma-core's):\n\n| Q | batches of 16 \
         | × | one a call | × |\n| --: | --: | --: | --: | --: |\n",
    );
    let cell = |batch: usize, q: u32| {
        rows.iter().find(|r| r.0 == batch && r.1 == q).map_or_else(
            || "- | -".to_owned(),
            |(_, _, [c, r, l])| format!("{c:.1} / {r:.1} / {l:.1} | {:.2} / {:.2}", r / c, l / c),
        )
    };
    let mut qs: Vec<u32> = rows.iter().map(|r| r.1).collect();
    qs.sort_unstable();
    qs.dedup();
    for q in qs {
        s.push_str(&format!("| {q} | {} | {} |\n", cell(16, q), cell(1, q)));
    }
    s
}
