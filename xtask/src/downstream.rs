//! The downstream tier: `tests/downstream` is a crate outside the workspace
//! that depends on rverbs by path, as a user's crate would, and whose
//! `.cargo/config.toml` makes `rverbs-vm run --` its cargo runner. Per
//! kernel, three runs of its `cargo test` and one of `rverbs-vm` itself:
//!
//! 1. `cargo test` as a user types it (the runner from the config file,
//!    `rverbs-vm` found in `$PATH`, the kernel from `RVERBS_VM_KERNEL`): its
//!    tests count as they report;
//! 2. `cargo test --test fails_on_purpose` with the runner
//!    `rverbs-vm run --env DOWNSTREAM_MARK --`: passes when the failure
//!    reaches the caller (cargo fails, rverbs-vm exits 101, the panic with
//!    the marker forwarded through `--env` is in the output): one test;
//! 3. `cargo test --test two_hosts` with `rverbs-vm run --two-hosts --`:
//!    passes when both guests report their test passed: one test;
//! 4. `rverbs-vm run --copy` of a directory under the host's `/tmp` (see
//!    [`tmp_paths`]): one test.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;

use crate::console::{parse_test_line, Counts, LibtestLog, Outcome};
use crate::host_tools::{self, Apt, Profile};
use crate::kernel::{self, Series};
use crate::project::{self, Workspace};
use crate::util::{self, note, Context, Result};

/// The runner variable cargo reads (it beats `.cargo/config.toml`).
const RUNNER_VAR: &str = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER";

/// Variables of the caller that would change what rverbs-vm boots.
const CLEARED: &[&str] = &[RUNNER_VAR, "RVERBS_VM_KERNEL_IMAGE", "RVERBS_VM_MODULES_DIR", "RVERBS_VM_ENV"];

/// Installs the host tools and fetches the kernels (rverbs-vm itself never
/// installs or runs `apt-get update`), builds `rverbs-vm` and links it
/// into `target/vm/bin/`, the directory put first in the downstream runs'
/// `$PATH`. Returns that directory.
pub fn prepare(ws: &Workspace, series: &[Series]) -> Result<PathBuf> {
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    let dirs = ws.dirs()?;
    for &s in series {
        kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
    }
    let exe = project::build_bin(ws, "rverbs-vm", "rverbs-vm")?;
    let dir = util::mkdir(ws.vm_dir().join("bin"))?;
    let link = dir.join("rverbs-vm");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&exe, &link).ctx(format!("linking {}", link.display()))?;
    Ok(dir)
}

/// One `cargo test` of the downstream crate.
struct Ran {
    status: ExitStatus,
    /// stdout and stderr, in the order they came.
    lines: Vec<String>,
}

impl Ran {
    fn has(&self, text: &str) -> bool {
        self.lines.iter().any(|l| l.contains(text))
    }

    /// libtest's results in the lines that start with `prefix`.
    fn libtest(&self, prefix: &str) -> LibtestLog {
        let mut log = LibtestLog::default();
        for l in self.lines.iter().filter_map(|l| l.strip_prefix(prefix)) {
            log.push(l);
        }
        log
    }
}

/// Runs `cargo test ARGS` in `tests/downstream` for `series`, with
/// `runner` as the cargo runner (`None`: the one of its config file) and
/// `env` set; shows libtest's result lines as they come, tagged (a failure
/// marked as such when the run fails `on_purpose`).
fn cargo_test(
    ws: &Workspace,
    bin: &Path,
    series: &str,
    args: &[&str],
    runner: Option<&str>,
    env: &[(&str, &str)],
    on_purpose: bool,
) -> Result<Ran> {
    let dir = ws.root.join("tests/downstream");
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .ctx("building $PATH")?;
    let mut cmd = project::cargo();
    cmd.current_dir(&dir).arg("test").args(args);
    for v in CLEARED {
        cmd.env_remove(v);
    }
    cmd.env("PATH", path)
        .env("CARGO_TARGET_DIR", &ws.target_dir)
        .env("RVERBS_VM_KERNEL", series)
        .env("RVERBS_VM_WORK_DIR", ws.vm_dir())
        // Were the runner ignored, the tests would run here without a
        // device and fail instead of skipping.
        .env("RVERBS_REQUIRE_DEVICE", "1");
    if let Some(r) = runner {
        cmd.env(RUNNER_VAR, r);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!(
        "(cd tests/downstream && {}{})",
        runner.map_or(String::new(), |r| format!("{RUNNER_VAR}=\"{r}\" ")),
        util::describe(&cmd)
    );
    note(&what);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ctx(format!("starting {what}"))?;
    let (tx, rx) = mpsc::channel::<String>();
    let pump = |r: Box<dyn Read + Send>, tx: mpsc::Sender<String>| {
        std::thread::spawn(move || {
            for l in BufReader::new(r).split(b'\n').map_while(|l| l.ok()) {
                let _ = tx.send(String::from_utf8_lossy(&l).trim_end_matches('\r').to_owned());
            }
        })
    };
    let out = pump(Box::new(child.stdout.take().expect("piped")), tx.clone());
    let err = pump(Box::new(child.stderr.take().expect("piped")), tx);
    let tag = format!("[ds {series}]");
    let mut lines = Vec::new();
    for l in rx {
        let bare = l.strip_prefix("[A] ").or_else(|| l.strip_prefix("[B] ")).unwrap_or(&l);
        if let Some((_, outcome)) = parse_test_line(bare) {
            let why = if on_purpose && outcome == Outcome::Failed { " (on purpose)" } else { "" };
            println!("{tag} {l}{why}");
        }
        lines.push(l);
    }
    let _ = (out.join(), err.join());
    let status = child.wait().ctx("waiting for cargo test")?;
    Ok(Ran { status, lines })
}

/// The four runs for kernel `series`: their counts and what went wrong.
pub fn run(ws: &Workspace, bin: &Path, series: &str) -> (Counts, Vec<String>) {
    let mut counts = Counts::default();
    let mut problems = Vec::new();
    let tag = format!("[ds {series}]");
    let mut check = |name: &str, ran: Result<Ran>, verdict: &dyn Fn(&Ran) -> (Counts, Vec<String>)| {
        let (c, p) = match ran {
            Ok(r) => {
                let (c, p) = verdict(&r);
                if !p.is_empty() {
                    println!("{tag} ---- {name}: its output (last 60 lines):");
                    for l in &r.lines[r.lines.len().saturating_sub(60)..] {
                        println!("{tag}   {l}");
                    }
                }
                (c, p)
            }
            Err(e) => (Counts::default(), vec![e]),
        };
        counts += c;
        if !p.is_empty() && c.failed == 0 {
            counts.failed += 1;
        }
        problems.extend(p.into_iter().map(|p| format!("{name}: {p}")));
    };

    let ran = cargo_test(ws, bin, series, &[], None, &[], false);
    check("cargo test", ran, &|r| {
        let log = r.libtest("");
        let mut p = Vec::new();
        if !r.status.success() {
            p.push(format!("cargo test failed ({})", r.status));
        }
        if log.counts.passed == 0 {
            p.push("no test passed".into());
        }
        if !r.has("rverbs-vm: exit 0;") {
            p.push("rverbs-vm never reported a run (was the cargo runner used?)".into());
        }
        (log.counts, p)
    });

    let mark = format!("xtask-{}-{series}", std::process::id());
    let on_purpose = true;
    let runner = "rverbs-vm run --env DOWNSTREAM_MARK --";
    let ran = cargo_test(
        ws,
        bin,
        series,
        &["--test", "fails_on_purpose"],
        Some(runner),
        &[("DOWNSTREAM_MARK", &mark)],
        on_purpose,
    );
    check("fails_on_purpose", ran, &|r| {
        let mut p = Vec::new();
        if r.status.success() {
            p.push("cargo test passed, but the test fails on purpose".into());
        }
        for want in [
            "test fails_on_purpose ... FAILED".to_owned(),
            format!("failing on purpose, marker {mark}"),
            "test result: FAILED. 0 passed; 1 failed".to_owned(),
            "rverbs-vm: exit 101;".to_owned(),
        ] {
            if !r.has(&want) {
                p.push(format!("no {want:?} in the output"));
            }
        }
        one_test(p)
    });

    let ran = cargo_test(ws, bin, series, &["--test", "two_hosts"], Some("rverbs-vm run --two-hosts --"), &[], false);
    check("two_hosts", ran, &|r| {
        let mut p = Vec::new();
        if !r.status.success() {
            p.push(format!("cargo test failed ({})", r.status));
        }
        for host in ["A", "B"] {
            let log = r.libtest(&format!("[{host}] "));
            if log.counts.passed != 1 || log.counts.failed != 0 {
                p.push(format!("host {host}: {}", log.counts.describe()));
            }
        }
        one_test(p)
    });
    let ran = tmp_paths(ws, bin, series);
    check("tmp_paths", ran, &|r| {
        let mut p = Vec::new();
        if !r.status.success() {
            p.push(format!("rverbs-vm failed ({})", r.status));
        }
        for want in [TMP_MARK, "written in the guest /tmp"] {
            if !r.has(want) {
                p.push(format!("no {want:?} in the output"));
            }
        }
        one_test(p)
    });
    (counts, problems)
}

/// The verdict of a run that counts as one test: passed when nothing went
/// wrong (`problems` is empty).
fn one_test(problems: Vec<String>) -> (Counts, Vec<String>) {
    let ok = problems.is_empty();
    (Counts { passed: u64::from(ok), failed: u64::from(!ok), skipped: 0 }, problems)
}

/// What [`tmp_paths`] puts in its file.
const TMP_MARK: &str = "copied from the host's /tmp";

/// `rverbs-vm run --copy DIR -- /bin/sh -c ...` with `DIR` under the host's
/// temporary directory (`/tmp`): the guest must see the file at the same
/// path and still have a writable `/tmp`. A project checked out under
/// `/tmp` has its test programs there, and the guest's `/init` once
/// mounted an empty tmpfs over them (exit 127, "not found").
fn tmp_paths(ws: &Workspace, bin: &Path, series: &str) -> Result<Ran> {
    // A fresh private directory (not a guessable name: this runs as root).
    let dir = crate::util::private_dir(&std::env::temp_dir(), &format!("rverbs-ds-{series}-"))?;
    let file = dir.join("marker");
    std::fs::write(&file, format!("{TMP_MARK}\n")).ctx(format!("writing {}", file.display()))?;
    let script =
        format!("cat {} && echo 'written in the guest /tmp' >/tmp/rverbs-ds-w && cat /tmp/rverbs-ds-w", file.display());
    let mut cmd = std::process::Command::new(bin.join("rverbs-vm"));
    cmd.args(["run", "--kernel", series, "--copy"]).arg(&dir).args(["--", "/bin/sh", "-c", &script]);
    for v in CLEARED {
        cmd.env_remove(v);
    }
    cmd.env("RVERBS_VM_WORK_DIR", ws.vm_dir());
    note(format!("(rverbs-vm with a file under {})", dir.display()));
    let out = cmd.output().ctx("running rverbs-vm");
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok(Ran { status: out.status, lines: text.lines().map(String::from).collect() })
}
