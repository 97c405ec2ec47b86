//! Fails on purpose (it is not run by a plain `cargo test`): `cargo xtask
//! test` runs it through rverbs-vm and checks that the failure's exit code
//! and its output, with the marker it passed in `DOWNSTREAM_MARK` (through
//! `--env`), reach the caller.

#[test]
fn fails_on_purpose() {
    let mark = std::env::var("DOWNSTREAM_MARK").unwrap_or_else(|_| "(DOWNSTREAM_MARK not set)".into());
    let found = rverbs::devices().expect("listing RDMA devices").len();
    println!("this test fails on purpose; {found} RDMA device(s) in this guest");
    panic!("failing on purpose, marker {mark}");
}
