//! The promise of the control path, checked with strace in the VM: opening
//! and querying a device is `RDMA_VERBS_IOCTL` on the uverbs fd, and on
//! kernels with ioctl there is no `write()` to that fd.

mod common;

#[test]
fn devinfo_uses_ioctl_not_write() {
    let dev = require_device!();
    let out_file = std::env::temp_dir().join(format!("rverbs-strace-{}", std::process::id()));
    let out = common::run(
        "strace",
        &[
            "-f",
            "-y", // print fds with their paths
            "-e",
            "trace=openat,ioctl,write,mmap",
            "-o",
            out_file.to_str().unwrap(),
            &common::rverbs_bin(),
            "devinfo",
            "-v",
        ],
    );
    assert!(out.status.success(), "rverbs devinfo -v failed: {}", String::from_utf8_lossy(&out.stderr));
    let trace = std::fs::read_to_string(&out_file).unwrap();
    let node = dev.dev_path().to_string_lossy().into_owned();
    let on_node: Vec<&str> = trace.lines().filter(|l| l.contains(&format!("<{node}>"))).collect();
    assert!(
        on_node.iter().any(|l| l.contains("ioctl(") && is_verbs_ioctl(l)),
        "no RDMA_VERBS_IOCTL on {node}:\n{trace}"
    );
    let writes: Vec<&&str> = on_node.iter().filter(|l| l.contains("write(")).collect();
    assert!(writes.is_empty(), "write() on {node} although the kernel has ioctl:\n{writes:#?}");
    assert!(trace.lines().any(|l| l.contains("openat(") && l.contains(&node) && l.contains("O_RDWR|O_CLOEXEC")));
    // No libibverbs or provider library is opened.
    assert!(!trace.contains("libibverbs"), "libibverbs touched:\n{trace}");
    let _ = std::fs::remove_file(&out_file);
}

/// strace names the request `RDMA_VERBS_IOCTL` when it knows it, else
/// spells out `_IOC(_IOC_READ|_IOC_WRITE, 0x1b, 0x1, 0x18)`.
fn is_verbs_ioctl(line: &str) -> bool {
    line.contains("RDMA_VERBS_IOCTL") || line.contains("0x1b, 0x1, 0x18") || line.contains("0xc0181b01")
}
