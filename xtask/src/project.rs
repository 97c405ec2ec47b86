//! The project side: where cargo puts things, building the binaries the
//! guest runs, and the host test tier.

use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use crate::console::LibtestLog;
use crate::util::{self, note, Context, Dirs, Result};
use serde_json::Value as Json;

/// The workspace's directories, from `cargo metadata`.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    /// Honours `CARGO_TARGET_DIR` and cargo config.
    pub target_dir: PathBuf,
}

impl Workspace {
    /// `target/vm`: logs and the initrds of running guests.
    pub fn vm_dir(&self) -> PathBuf {
        self.target_dir.join("vm")
    }

    /// The harness's directories: kernels and initramfs bases in the
    /// user's cache (shared with `rverbs-vm`), logs in `target/vm`.
    pub fn dirs(&self) -> Result<Dirs> {
        Ok(Dirs { cache: util::cache_dir()?, work: self.vm_dir() })
    }
}

/// The cargo that runs us (`$CARGO`), or `cargo`.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Reads the workspace layout with `cargo metadata`.
pub fn workspace() -> Result<Workspace> {
    let out = util::capture(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    let j: Json = serde_json::from_str(&out).ctx("reading cargo metadata")?;
    let field = |k: &str| -> Result<PathBuf> {
        j.get(k).and_then(Json::as_str).map(PathBuf::from).ok_or_else(|| format!("cargo metadata lacks {k}"))
    };
    Ok(Workspace { root: field("workspace_root")?, target_dir: field("target_directory")? })
}

/// A binary to copy into the guest.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// Guest file name (`/tests/<name>`).
    pub name: String,
    pub package: String,
    pub path: PathBuf,
}

/// Runs a cargo build with `--message-format=json-render-diagnostics`
/// and returns the `compiler-artifact` messages (diagnostics still reach
/// the terminal, rendered, on stderr).
fn build_json(ws: &Workspace, args: &[&str]) -> Result<Vec<Json>> {
    let mut cmd = cargo();
    // Cargo's own options go before a `--` (what follows is rustc's, `cargo rustc`).
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    cmd.current_dir(&ws.root).args(&args[..split]).arg("--message-format=json-render-diagnostics").args(&args[split..]);
    let what = util::describe(&cmd);
    note(what.clone());
    let mut child = cmd.stdout(Stdio::piped()).spawn().ctx(format!("starting {what}"))?;
    let mut artifacts = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.ctx("reading cargo's output")?;
        let Ok(msg) = serde_json::from_str::<Json>(&line) else {
            continue;
        };
        if msg.get("reason").and_then(Json::as_str) == Some("compiler-artifact") {
            artifacts.push(msg);
        }
    }
    let status = child.wait().ctx("waiting for cargo")?;
    if !status.success() {
        return Err(format!("`{what}` failed ({status})"));
    }
    Ok(artifacts)
}

/// `cargo build --bin rverbs`: the CLI that goes to /usr/local/bin.
pub fn build_cli(ws: &Workspace) -> Result<PathBuf> {
    build_cli_with(ws, &[])
}

/// `cargo rustc --release --bin rverbs -- -C target-feature=+crt-static`:
/// the CLI for timing runs (`cargo xtask bench`, and `cargo xtask demo`,
/// which compares it with rdma-core's optimised tools), linked statically
/// ([`STATIC_CLI`]).
pub fn build_cli_release(ws: &Workspace) -> Result<PathBuf> {
    build_static_cli_with(ws, &["--release"])
}

/// The release CLI with every `tracing` callsite compiled out
/// (`tracing/release_max_level_off`), in its own target directory so the
/// usual build stays: `cargo xtask bench` compares its per-call costs with
/// the usual build's, whose callsites are there but disabled.
pub fn build_cli_release_without_tracing(ws: &Workspace) -> Result<PathBuf> {
    let dir = ws.target_dir.join("bench-notrace");
    let dir = dir.to_string_lossy().into_owned();
    build_static_cli_with(ws, &["--release", "--features", "tracing/release_max_level_off", "--target-dir", &dir])
}

fn build_cli_with(ws: &Workspace, extra: &[&str]) -> Result<PathBuf> {
    build_bin_with(ws, "rverbs", "rverbs", extra)
}

/// rustc's flag for a statically linked executable: glibc's `libc.a` (in
/// libc6-dev, which rustc's gnu target links against anyway), no
/// `ld.so`. A dynamically linked CLI starts with about 44 syscalls of the
/// dynamic loader (probing `glibc-hwcaps` directories for `libgcc_s` and
/// `libc`, mapping them, relocating), which are most of a ping-pong
/// client's control path. Only the `rverbs` executable gets it (`cargo
/// rustc` passes it to the last crate alone): `capi`'s `libibverbs.so`
/// and the tests stay as they are. The CLI resolves no host names through
/// NSS in the benchmark (numeric addresses only), so static glibc's
/// `dlopen` of NSS modules is never needed there.
pub const STATIC_CLI: [&str; 3] = ["--", "-C", "target-feature=+crt-static"];

fn build_static_cli_with(ws: &Workspace, extra: &[&str]) -> Result<PathBuf> {
    let mut args = vec!["rustc", "--package", "rverbs", "--bin", "rverbs"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&STATIC_CLI);
    find_bin(build_json(ws, &args)?, "rverbs")
}

/// `cargo build --release --package rverbs-capi`: rverbs' optimised
/// `libibverbs.so` (`cargo xtask bench` times rdma-core's programs on it).
pub fn build_capi_release(ws: &Workspace) -> Result<PathBuf> {
    let msgs = build_json(ws, &["build", "--release", "--package", "rverbs-capi"])?;
    msgs.iter()
        .filter(|m| has_kind(m, "cdylib"))
        .flat_map(|m| m.get("filenames").and_then(Json::as_array).into_iter().flatten().filter_map(Json::as_str))
        .find(|f| f.ends_with(".so"))
        .map(PathBuf::from)
        .ok_or_else(|| "cargo built no libibverbs.so for rverbs-capi".to_string())
}

/// `cargo build --package PACKAGE --bin BIN`: the executable's path.
pub fn build_bin(ws: &Workspace, package: &str, bin: &str) -> Result<PathBuf> {
    build_bin_with(ws, package, bin, &[])
}

fn build_bin_with(ws: &Workspace, package: &str, bin: &str, extra: &[&str]) -> Result<PathBuf> {
    let mut args = vec!["build", "--package", package, "--bin", bin];
    args.extend_from_slice(extra);
    find_bin(build_json(ws, &args)?, bin)
}

fn find_bin(msgs: Vec<Json>, bin: &str) -> Result<PathBuf> {
    msgs.iter()
        .filter(|m| target_field(m, "name") == Some(bin) && has_kind(m, "bin"))
        .find_map(executable)
        .ok_or_else(|| format!("cargo built no {bin} executable"))
}

/// What goes to the guest besides the CLI.
#[derive(Debug, Default)]
pub struct GuestBinaries {
    /// Integration tests, for `/tests`.
    pub tests: Vec<Artifact>,
    /// The workspace's examples (those `cargo test` builds: without
    /// `required-features` they lack), for `/examples`.
    pub examples: Vec<Artifact>,
    /// The workspace's C libraries (`capi/`'s `libibverbs.so`), for
    /// [`GUEST_LIB_DIR`] under their SONAME (see [`guest_libs`]).
    pub libs: Vec<Artifact>,
}

/// Where the guest keeps the workspace's C libraries: a test selects one
/// with `LD_LIBRARY_PATH` (rdma-core's tools on rverbs' `libibverbs.so.1`).
pub const GUEST_LIB_DIR: &str = "/opt/rverbs/lib";

/// cdylib file names and the SONAME they are installed under.
const SONAMES: &[(&str, &str)] = &[("libibverbs.so", "libibverbs.so.1")];

/// (guest path, host file) of each C library: `GUEST_LIB_DIR/<SONAME>`.
pub fn guest_libs(built: &GuestBinaries) -> Vec<(String, PathBuf)> {
    built
        .libs
        .iter()
        .filter_map(|l| {
            let file = l.path.file_name()?.to_str()?;
            let soname = SONAMES.iter().find(|(f, _)| *f == file)?.1;
            Some((format!("{GUEST_LIB_DIR}/{soname}"), l.path.clone()))
        })
        .collect()
}

/// The features the test builds turn on (host tier and guest binaries
/// alike, so both build once): `rverbs/tokio` for the async tests and
/// examples (`tests/async_completions.rs`, `examples/async_echo.rs`), which
/// fail in the VM when built without it.
pub const TEST_FEATURES: &str = "rverbs/tokio";

/// `cargo test --workspace --features TEST_FEATURES --no-run`: every integration-test binary (a
/// test target whose source is under a `tests/` directory) and every
/// example it builds. Unit-test binaries stay on the host.
pub fn build_integration_tests(ws: &Workspace) -> Result<GuestBinaries> {
    let msgs = build_json(ws, &["test", "--workspace", "--features", TEST_FEATURES, "--no-run"])?;
    let mut found = GuestBinaries::default();
    for m in &msgs {
        let src = target_field(m, "src_path").map(Path::new);
        if has_kind(m, "cdylib") {
            let so = m.get("filenames").and_then(Json::as_array).into_iter().flatten().filter_map(Json::as_str);
            for f in so.filter(|f| f.ends_with(".so")) {
                let name = target_field(m, "name").unwrap_or_default().to_owned();
                found.libs.push(Artifact { name, package: package_name(m), path: PathBuf::from(f) });
            }
            continue;
        }
        let list = if has_kind(m, "example") {
            &mut found.examples
        } else if has_kind(m, "test") && src.is_some_and(|s| under_tests_dir(s, &ws.root)) {
            &mut found.tests
        } else {
            continue;
        };
        let (Some(path), Some(name)) = (executable(m), target_field(m, "name")) else {
            continue;
        };
        let package = package_name(m);
        list.push(Artifact { name: name.to_owned(), package, path });
    }
    for list in [&mut found.tests, &mut found.examples] {
        disambiguate(list);
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(found)
}

fn target_field<'a>(m: &'a Json, k: &str) -> Option<&'a str> {
    m.get("target")?.get(k)?.as_str()
}

fn has_kind(m: &Json, kind: &str) -> bool {
    m.get("target").and_then(|t| t.get("kind")).and_then(Json::as_array).is_some_and(|k| k.iter().any(|x| x == kind))
}

fn executable(m: &Json) -> Option<PathBuf> {
    m.get("executable")?.as_str().map(PathBuf::from)
}

/// The package name from a `package_id` (either the old `name ver (src)`
/// form or the newer `path+file:///dir#name@ver` form).
fn package_name(m: &Json) -> String {
    let id = m.get("package_id").and_then(Json::as_str).unwrap_or("");
    if let Some((_, frag)) = id.rsplit_once('#') {
        let frag = frag.split('@').next().unwrap_or(frag);
        // `#0.1.0` alone means the name is the directory's.
        if frag.chars().next().is_some_and(|c| !c.is_ascii_digit()) {
            return frag.to_owned();
        }
        let dir = id[..id.len() - frag.len() - 1].trim_end_matches('/');
        return dir.rsplit('/').next().unwrap_or(dir).to_owned();
    }
    id.split_whitespace().next().unwrap_or(id).to_owned()
}

/// True when `src` sits in a `tests` directory (below the workspace).
fn under_tests_dir(src: &Path, root: &Path) -> bool {
    let rel = src.strip_prefix(root).unwrap_or(src);
    let parent = rel.parent().unwrap_or(Path::new(""));
    parent.components().any(|c| c == Component::Normal("tests".as_ref()))
}

/// Two packages may have a test of the same name: prefix those with the
/// package.
fn disambiguate(found: &mut [Artifact]) {
    let names: Vec<String> = found.iter().map(|a| a.name.clone()).collect();
    for a in found.iter_mut() {
        if names.iter().filter(|n| **n == a.name).count() > 1 {
            a.name = format!("{}-{}", a.package, a.name);
        }
    }
}

/// Result of the host tier.
pub struct HostTier {
    pub log: LibtestLog,
    /// Why the tier failed beyond failing tests (cargo's exit status).
    pub error: Option<String>,
}

/// `cargo test --workspace --features TEST_FEATURES --no-fail-fast` without a device: integration
/// tests skip because `RVERBS_REQUIRE_DEVICE` is unset. Output is shown
/// as it comes and parsed.
pub fn host_tier(ws: &Workspace) -> Result<HostTier> {
    let mut cmd = cargo();
    cmd.current_dir(&ws.root)
        .args(["test", "--workspace", "--features", TEST_FEATURES, "--no-fail-fast"])
        .env_remove("RVERBS_REQUIRE_DEVICE")
        .stdout(Stdio::piped());
    note(util::describe(&cmd));
    let mut child = cmd.spawn().ctx("starting cargo test")?;
    let mut log = LibtestLog::default();
    for line in BufReader::new(child.stdout.take().expect("piped")).split(b'\n') {
        let line = String::from_utf8_lossy(&line.ctx("reading cargo test's output")?).into_owned();
        println!("{line}");
        log.push(&line);
    }
    let status = child.wait().ctx("waiting for cargo test")?;
    let error = match status.success() {
        true => None,
        false if log.counts.failed > 0 => None,
        false => Some(format!("cargo test failed ({status}) without a failing test: build error or crash")),
    };
    Ok(HostTier { log, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        let m = |id: &str| serde_json::json!({ "package_id": id });
        assert_eq!(package_name(&m("path+file:///work/main#rverbs@0.1.0")), "rverbs");
        assert_eq!(package_name(&m("path+file:///work/main/uapi#rverbs-uapi@0.1.0")), "rverbs-uapi");
        assert_eq!(package_name(&m("path+file:///work/main/xtask#0.1.0")), "xtask");
        assert_eq!(package_name(&m("rverbs 0.1.0 (path+file:///work/main)")), "rverbs");
    }

    #[test]
    fn integration_tests_only() {
        let root = Path::new("/w");
        assert!(under_tests_dir(Path::new("/w/tests/vm_smoke.rs"), root));
        assert!(under_tests_dir(Path::new("/w/uapi/tests/abi/main.rs"), root));
        assert!(!under_tests_dir(Path::new("/w/src/lib.rs"), root));
        assert!(!under_tests_dir(Path::new("/w/src/tests.rs"), root));
    }
}
