//! The host's mock benches (providers against the mock kernel and the
//! HCA model): their counts, goals and table.

/// The host's mock benches: (provider, case, instructions per operation).
#[derive(Debug, Default)]
pub struct MockCounts {
    pub counts: Vec<(String, String, f64)>,
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
    s
}
