//! `fake-mlx5 [--record FILE] -- PROGRAM ARGS...`: runs a program on the
//! fake ConnectX-5: a fresh sysfs tree (`SYSFS_PATH`) and the preload
//! library (`LD_PRELOAD`, found next to this executable), e.g.
//! `fake-mlx5 -- ibv_devinfo -v` or `fake-mlx5 -- rverbs devinfo -v`.
//! Exits with the program's status.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut record = None;
    let mut program = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--record" => record = args.next(),
            "--" => {
                program.extend(args.by_ref());
                break;
            }
            _ => {
                eprintln!("usage: fake-mlx5 [--record FILE] -- PROGRAM ARGS...");
                return ExitCode::from(2);
            }
        }
    }
    if program.is_empty() {
        eprintln!("usage: fake-mlx5 [--record FILE] -- PROGRAM ARGS...");
        return ExitCode::from(2);
    }
    match run(&program, record.as_deref()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("fake-mlx5: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(program: &[String], record: Option<&str>) -> Result<u8, String> {
    let env = rverbs_mlx5_fake::launch::Env::new()?;
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..]);
    env.apply(&mut cmd);
    if let Some(r) = record {
        cmd.env(rverbs_mlx5_fake::ENV_RECORD, r);
    }
    let status = cmd.status().map_err(|e| format!("cannot run {}: {e}", program[0]))?;
    Ok(status.code().map_or(1, |c| c as u8))
}
