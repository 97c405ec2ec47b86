//! The product's dynamic symbol table against rdma-core 44's
//! (`libibverbs.symbols`, taken with `objdump -T` from Debian's
//! `libibverbs1` 44.0-2), read with binutils' `objdump -T` and `-p`.
//!
//! Host only (a unit test: the VM tier never sees it). It needs the
//! cdylib, which cargo builds for this package's integration tests, so run
//! it as `cargo test -p rverbs-capi` (not `--lib` alone). The oracle:
//! the checked-in list always; in addition, when rdma-core's library is
//! installed (`/usr/lib/x86_64-linux-gnu/libibverbs.so.1`, from
//! `libibverbs1`, which xtask's host-tool check installs with
//! ibverbs-utils), the list must still equal it.

use std::path::{Path, PathBuf};
use std::process::Command;

const RDMA_CORE: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
const NODES: [&str; 13] = [
    "IBVERBS_1.0",
    "IBVERBS_1.1",
    "IBVERBS_1.5",
    "IBVERBS_1.6",
    "IBVERBS_1.7",
    "IBVERBS_1.8",
    "IBVERBS_1.9",
    "IBVERBS_1.10",
    "IBVERBS_1.11",
    "IBVERBS_1.12",
    "IBVERBS_1.13",
    "IBVERBS_1.14",
    "IBVERBS_PRIVATE_34",
];

fn objdump(args: &[&str], file: &Path) -> String {
    let out = Command::new("objdump")
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run objdump (binutils) on {}: {e}", file.display()));
    assert!(
        out.status.success(),
        "objdump {args:?} {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("objdump prints UTF-8")
}

/// `name node DF|DO` of every defined default-version (`NAME@@NODE`)
/// symbol, sorted; the nodes' own `*ABS*` entries (GNU ld emits them, lld
/// does not) are left out.
fn default_exports(file: &Path) -> Vec<String> {
    let mut v: Vec<String> = objdump(&["-T"], file)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 7 || f[1] != "g" || f[3] == "*UND*" {
                return None;
            }
            let (node, name) = (f[f.len() - 2], f[f.len() - 1]);
            (node.starts_with("IBVERBS") && node != name).then(|| format!("{name} {node} {}", f[2]))
        })
        .collect();
    v.sort();
    v
}

/// The version definitions (`objdump -p`), without the file's own entry.
fn version_nodes(file: &Path) -> Vec<String> {
    let p = objdump(&["-p"], file);
    let defs = p.split("Version definitions:").nth(1).expect("the library defines versions");
    defs.lines()
        .take_while(|l| !l.starts_with("Version References"))
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter(|n| n.starts_with("IBVERBS"))
        .map(str::to_owned)
        .collect()
}

fn expected() -> Vec<String> {
    let list = include_str!("../libibverbs.symbols");
    let mut v: Vec<String> = list.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(str::to_owned).collect();
    v.sort();
    v
}

/// `target/<profile>/libibverbs.so`, next to this test binary's `deps/`.
fn product() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    [deps.join("libibverbs.so"), deps.parent().expect("profile dir").join("libibverbs.so")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no libibverbs.so next to {}: run `cargo test -p rverbs-capi` (it builds the cdylib)",
                deps.display()
            )
        })
}

#[test]
fn exports_exactly_rdma_core_44s_default_symbols() {
    let ours = default_exports(&product());
    let want = expected();
    let missing: Vec<&String> = want.iter().filter(|s| !ours.contains(s)).collect();
    let extra: Vec<&String> = ours.iter().filter(|s| !want.contains(s)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing: {missing:#?}\nextra: {extra:#?}");
    assert_eq!(want.len(), 146);
}

#[test]
fn defines_rdma_core_44s_version_nodes_and_soname() {
    let p = product();
    assert_eq!(version_nodes(&p), NODES);
    let dynamic = objdump(&["-p"], &p);
    assert!(dynamic.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["SONAME", "libibverbs.so.1"]));
}

#[test]
fn the_checked_in_list_is_rdma_core_44s() {
    let oracle = Path::new(RDMA_CORE);
    if !oracle.is_file() {
        println!("note: {RDMA_CORE} (Debian libibverbs1) not installed; checked against the list only");
        return;
    }
    let real = std::fs::canonicalize(oracle).unwrap_or_default();
    if !real.to_string_lossy().ends_with(".so.1.14.44.0") {
        println!("note: {} is not rdma-core 44; not compared", real.display());
        return;
    }
    assert_eq!(default_exports(oracle), expected());
    let mut nodes = version_nodes(oracle);
    nodes.retain(|n| n != "libibverbs.so.1");
    assert_eq!(nodes, NODES);
}
