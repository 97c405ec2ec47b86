//! rdma-core's fallback rules, checked on a file that is not a uverbs node:
//! `/dev/null` answers every ioctl with `ENOTTY` and swallows writes.

use std::path::Path;

use super::{CmdPath, IoctlCmd, UverbsFd};

fn dev_null() -> UverbsFd {
    UverbsFd::open(Path::new("/dev/null"), 14, None).expect("/dev/null is a char device")
}

#[test]
fn enotty_turns_ioctl_off_for_the_fd() {
    let fd = dev_null();
    let mut cmd = IoctlCmd::new(0, 3);
    // ENOTTY means "no ioctl path": fall back, don't fail.
    assert_eq!(fd.try_ioctl(&mut cmd), Ok(false));
    // Every later method falls back without another syscall.
    let mut cmd = IoctlCmd::new(1, 0);
    assert_eq!(fd.try_ioctl(&mut cmd), Ok(false));
    // A method with no write form is "not supported".
    let mut cmd = IoctlCmd::new(7, 3);
    assert_eq!(fd.ioctl(&mut cmd), Err(nix::errno::Errno::EOPNOTSUPP));
}

#[test]
fn write_commands_fall_back_to_write() {
    let fd = dev_null();
    // INVOKE_WRITE is an ioctl too: with ioctl off, the command goes out as
    // a legacy write() frame (which /dev/null accepts).
    let core_in = [0u8; 8];
    let mut core_out = [0u8; 4];
    assert_eq!(fd.write_cmd(3, &core_in, &mut core_out, &[], &mut []), Ok(CmdPath::Write));
    assert_eq!(fd.write_cmd_ex(1, &core_in, &mut [0u8; 8], &[], &mut []), Ok(CmdPath::Write));
}

#[test]
fn rdev_mismatch_is_refused() {
    // /dev/null is 1:3, not the uverbs node sysfs would name.
    let err = UverbsFd::open(Path::new("/dev/null"), 14, Some((231, 192))).unwrap_err();
    assert_eq!(err, nix::errno::Errno::ENODEV);
    let err = UverbsFd::open(Path::new("/nonexistent-uverbs"), 14, None).unwrap_err();
    assert_eq!(err, nix::errno::Errno::ENOENT);
}
