//! Linker arguments only (no C is compiled): the version nodes of
//! rdma-core 44's `libibverbs.so.1` and its SONAME. Each export gets its
//! `NAME@@NODE` from a `.symver` in `src/export.rs`.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo::rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibverbs.map");
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo::rerun-if-changed=libibverbs.map");
}
