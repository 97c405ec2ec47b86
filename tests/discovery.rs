//! Discovery and device queries against the real kernel (VM tier), checked
//! against sysfs, plus the error paths of opening (these run anywhere).

mod common;

use std::fs;
use std::path::Path;

use rverbs::{DriverId, Errno, GidType, Sysfs};

#[test]
fn device_list_matches_sysfs() {
    let dev = require_device!();
    let all = rverbs::devices().unwrap();
    let in_sysfs = fs::read_dir("/sys/class/infiniband_verbs")
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("uverbs"))
        .count();
    assert_eq!(all.len(), in_sysfs);
    let sys = dev.sysfs_path();
    assert_eq!(dev.node_guid().to_string(), common::sysfs(sys.join("node_guid")));
    assert!(dev.dev_path().exists(), "{} missing", dev.dev_path().display());
    assert_eq!(dev.uverbs_name(), dev.dev_path().file_name().unwrap().to_str().unwrap());
    if dev.name().starts_with("rxe") {
        // Netlink must have told us the driver (RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID).
        assert_eq!(dev.driver(), DriverId::RXE);
        assert_eq!(dev.netdev(), Some(common::sysfs(sys.join("parent")).as_str()));
        assert_eq!(dev.abi_version(), 2);
    }
}

#[test]
fn open_and_query_device() {
    let dev = require_device!();
    let ctx = dev.open().unwrap_or_else(|e| panic!("open {}: {e}", dev.name()));
    assert!(ctx.async_fd().is_some(), "ASYNC_EVENT_ALLOC must give an async fd");
    assert!(ctx.num_comp_vectors() >= 1);
    let attr = ctx.query_device().unwrap();
    assert_eq!(attr.node_guid, dev.node_guid());
    assert!(attr.phys_port_cnt >= 1);
    assert!(attr.max_qp > 0 && attr.max_cqe > 0 && attr.max_mr_size > 0);
    let sys_image = common::sysfs(dev.sysfs_path().join("sys_image_guid"));
    assert_eq!(attr.sys_image_guid.to_string(), sys_image);
    // A second context on the same device is independent.
    let ctx2 = dev.open().unwrap();
    assert_eq!(ctx2.query_device().unwrap().max_qp, attr.max_qp);
}

#[test]
fn port_query_matches_sysfs() {
    let dev = require_device!();
    let ctx = dev.open().unwrap();
    let port = ctx.query_port(1).unwrap();
    let pdir = dev.sysfs_path().join("ports/1");
    // sysfs: "4: ACTIVE"
    let state: u32 = common::sysfs(pdir.join("state")).split(':').next().unwrap().parse().unwrap();
    assert_eq!(u32::from(port.state.raw()), state);
    let phys: u32 = common::sysfs(pdir.join("phys_state")).split(':').next().unwrap().parse().unwrap();
    assert_eq!(u32::from(port.phys_state.raw()), phys);
    let gids = fs::read_dir(pdir.join("gids")).unwrap().count() as u32;
    assert_eq!(port.gid_tbl_len, gids);
    let ll = common::sysfs(pdir.join("link_layer"));
    assert_eq!(format!("{}", port.link_layer), ll);
    // Port 0 and a port past the last one are clear errors, not panics.
    let bad = ctx.query_port(9).unwrap_err();
    assert_eq!(bad.errno(), Some(Errno::EINVAL), "{bad}");
    assert!(bad.to_string().contains("port 9"), "{bad}");
}

#[test]
fn gid_table_matches_sysfs() {
    let dev = require_device!();
    let ctx = dev.open().unwrap();
    let table = ctx.query_gid_table().unwrap();
    assert!(!table.is_empty(), "an active port has at least its link-local GID");
    let pdir = dev.sysfs_path().join("ports/1");
    for e in &table {
        let gid = common::sysfs(pdir.join(format!("gids/{}", e.index)));
        assert_eq!(e.gid.to_string(), gid, "gid {}", e.index);
        let ty = common::sysfs(pdir.join(format!("gid_attrs/types/{}", e.index)));
        // "IB/RoCE v1" is RoCE v1 on RoCE; on iWARP (siw) the kernel's GID
        // entries are IB_GID_TYPE_IB (the netdev's MAC, no RoCE).
        let want = match ty.as_str() {
            "RoCE v2" => GidType::RoceV2,
            _ if common::is_iwarp(&dev) => GidType::Ib,
            _ => GidType::RoceV1,
        };
        assert_eq!(e.gid_type, want, "type of gid {}", e.index);
        // 6.1's siw has no netdev on its GIDs (the read is EINVAL): none either way.
        let ndev = std::fs::read_to_string(pdir.join(format!("gid_attrs/ndevs/{}", e.index))).ok();
        assert_eq!(e.netdev.as_deref(), ndev.as_deref().map(str::trim), "netdev of gid {}", e.index);
        // The single-entry query agrees with the table.
        assert_eq!(ctx.query_gid(1, e.index).unwrap().as_ref(), Some(e));
    }
    if dev.name().starts_with("rxe") {
        // rxe registers RoCE v2 only; the harness gave v0 an IPv4 address, so
        // there is an IPv4-mapped GID.
        assert!(table.iter().all(|e| e.gid_type == GidType::RoceV2));
        assert!(table.iter().any(|e| e.gid.to_ipv4().is_some()), "{table:?}");
    }
    // An empty slot is None, not an error.
    let len = ctx.query_port(1).unwrap().gid_tbl_len;
    let empty = (0..len).find(|i| table.iter().all(|e| e.index != *i));
    if let Some(i) = empty {
        assert_eq!(ctx.query_gid(1, i).unwrap(), None);
    }
}

#[test]
fn missing_device_is_a_clear_error() {
    let err = rverbs::device_by_name("nosuchdev0").unwrap_err();
    assert_eq!(err.errno(), Some(Errno::ENODEV));
    assert!(err.to_string().contains("'nosuchdev0'"), "{err}");
}

/// Writes a fake sysfs tree: one uverbs node `uverbs0` for IB device `name`.
fn fake_sysfs(root: &Path, core_abi: u32, name: &str, drv_abi: u32, dev: &str) {
    let v = root.join("class/infiniband_verbs");
    fs::create_dir_all(v.join("uverbs0")).unwrap();
    fs::write(v.join("abi_version"), format!("{core_abi}\n")).unwrap();
    fs::write(v.join("uverbs0/ibdev"), format!("{name}\n")).unwrap();
    fs::write(v.join("uverbs0/abi_version"), format!("{drv_abi}\n")).unwrap();
    fs::write(v.join("uverbs0/dev"), format!("{dev}\n")).unwrap();
    let d = root.join("class/infiniband").join(name);
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join("node_guid"), "0011:2233:4455:6677\n").unwrap();
    fs::write(d.join("node_type"), "1: CA\n").unwrap();
    fs::write(d.join("node_desc"), "rxe\n").unwrap();
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rverbs-test-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn node_that_is_not_uverbs_is_refused() {
    // A regular file where the char device should be.
    let root = tmpdir("notchr");
    fake_sysfs(&root, 6, "rxe9", 2, "231:192");
    fs::write(root.join("uverbs0"), b"").unwrap();
    let devs = Sysfs::at(&root, &root).devices().unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].node_guid().to_string(), "0011:2233:4455:6677");
    assert_eq!(devs[0].driver(), DriverId::RXE, "sysfs heuristic: node_desc rxe, no parent device");
    let err = devs[0].open().unwrap_err();
    assert!(err.to_string().contains("not a character device"), "{err}");

    // A char device that is not the one sysfs names: /dev/null (1:3).
    let root = tmpdir("null");
    fake_sysfs(&root, 6, "rxe9", 2, "231:192");
    std::os::unix::fs::symlink("/dev/null", root.join("uverbs0")).unwrap();
    let err = Sysfs::at(&root, &root).devices().unwrap()[0].open().unwrap_err();
    assert_eq!(err.errno(), Some(Errno::ENODEV), "{err}");
    assert!(err.to_string().contains("not the uverbs node"), "{err}");

    // A node that does not exist.
    let root = tmpdir("missing");
    fake_sysfs(&root, 6, "rxe9", 2, "231:192");
    let err = Sysfs::at(&root, &root).devices().unwrap()[0].open().unwrap_err();
    assert_eq!(err.errno(), Some(Errno::ENOENT), "{err}");
}

#[test]
fn unsupported_abi_is_refused_before_any_command() {
    let root = tmpdir("abi");
    fake_sysfs(&root, 5, "rxe9", 2, "231:192");
    let err = Sysfs::at(&root, &root).devices().unwrap()[0].open().unwrap_err();
    assert!(err.to_string().contains("uverbs ABI is version 5"), "{err}");

    let root = tmpdir("drvabi");
    fake_sysfs(&root, 6, "rxe9", 9, "231:192");
    let err = Sysfs::at(&root, &root).devices().unwrap()[0].open().unwrap_err();
    assert!(err.to_string().contains("ABI version 9"), "{err}");
    assert!(err.to_string().contains("1..=2"), "{err}");
}

#[test]
fn no_devices_is_an_empty_list() {
    let root = tmpdir("empty");
    assert!(Sysfs::at(&root, &root).devices().unwrap().is_empty());
}
