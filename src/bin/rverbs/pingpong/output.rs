//! What the program prints: the address lines, the summary in rdma-core's
//! arithmetic and `printf` format, written as it goes.

use std::io::{self, Write};
use std::time::Duration;

use rverbs::Endpoint;

/// `  local address:  LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1`
/// (ibv_ud_pingpong writes `PSN 0x......: GID` there, and so does `--ud`).
pub fn address_line(label: &str, d: &Endpoint, psn_sep: char) -> String {
    format!(
        "  {label} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{psn_sep} GID {}\n",
        d.lid,
        d.qpn,
        d.psn,
        d.gid.to_inet_string()
    )
}

/// The two summary lines, computed like rdma-core (a `float` of
/// microseconds, `size * iters * 2` bytes).
pub fn summary(size: u32, iters: u32, elapsed: Duration) -> String {
    let usec = elapsed.as_micros() as f32;
    let bytes = u64::from(size) * u64::from(iters) * 2;
    let secs = f64::from(usec) / 1_000_000.0;
    let mbit = bytes as f64 * 8.0 / f64::from(usec);
    let per_iter = f64::from(usec / iters as f32);
    format!(
        "{bytes} bytes in {} seconds = {} Mbit/sec\n{iters} iters in {} seconds = {} usec/iter\n",
        c_fixed2(secs),
        c_fixed2(mbit),
        c_fixed2(secs),
        c_fixed2(per_iter)
    )
}

/// `printf("%.2f")`, including its `inf`/`nan`.
fn c_fixed2(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:.2}")
    }
}

/// Writes to stdout as the program goes (ignoring a closed stdout, as
/// rdma-core does).
pub fn say(s: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use super::*;
    use rverbs::Gid;
    #[test]
    fn address_and_summary_lines() {
        let d = Endpoint {
            lid: 0,
            qpn: 0x11,
            psn: 0x6a5e4c,
            gid: Gid::parse("::ffff:192.168.77.1").unwrap(),
            memory: None,
        };
        assert_eq!(
            address_line("local address: ", &d, ','),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1\n"
        );
        assert_eq!(
            address_line("remote address:", &d, ':'),
            "  remote address: LID 0x0000, QPN 0x000011, PSN 0x6a5e4c: GID ::ffff:192.168.77.1\n"
        );
        assert_eq!(
            summary(4096, 1000, Duration::from_micros(120_000)),
            "8192000 bytes in 0.12 seconds = 546.13 Mbit/sec\n1000 iters in 0.12 seconds = 120.00 usec/iter\n"
        );
        assert!(summary(1, 1, Duration::ZERO).contains("= inf Mbit/sec"));
    }
}
