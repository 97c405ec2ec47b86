//! The fake device's sysfs tree. libibverbs scans it when RDMA netlink is
//! unavailable (`SYSFS_PATH=<root>`; the host kernel has no RDMA, so the
//! netlink socket fails by itself), and rverbs reads it through
//! `Sysfs::at(<root>, "/dev/infiniband")`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::attrs;

fn put(root: &Path, rel: &str, text: &str) -> io::Result<()> {
    let p = root.join(rel);
    if let Some(dir) = p.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(p, format!("{text}\n"))
}

fn gid_text(g: &[u8; 16]) -> String {
    g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

/// Writes the tree under `root` (which must exist and be empty).
pub fn build(root: &Path) -> io::Result<()> {
    let g = attrs::NODE_GUID;
    let guid =
        format!("{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
    let uv = format!("class/infiniband_verbs/{}", crate::UVERBS);
    put(root, "class/infiniband_verbs/abi_version", "6")?;
    put(root, &format!("{uv}/ibdev"), crate::IBDEV)?;
    put(root, &format!("{uv}/abi_version"), "1")?;
    put(root, &format!("{uv}/dev"), &format!("{}:{}", crate::DEV_MAJOR, crate::DEV_MINOR))?;
    let ib = format!("class/infiniband/{}", crate::IBDEV);
    put(root, &format!("{ib}/node_type"), "1: CA")?;
    put(root, &format!("{ib}/node_guid"), &guid)?;
    put(root, &format!("{ib}/sys_image_guid"), &guid)?;
    put(root, &format!("{ib}/fw_ver"), "16.35.2000")?;
    put(root, &format!("{ib}/hw_rev"), "0")?;
    put(root, &format!("{ib}/hca_type"), "MT4119")?;
    put(root, &format!("{ib}/board_id"), "MT_0000000080")?;
    put(root, &format!("{ib}/node_desc"), "fake-mlx5 mlx5_9")?;
    // The PCI function: ConnectX-5 (15b3:1017), driven by mlx5_core.
    put(root, &format!("{ib}/device/modalias"), "pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00")?;
    put(root, &format!("{ib}/device/vendor"), "0x15b3")?;
    put(root, &format!("{ib}/device/device"), "0x1017")?;
    let drivers = root.join("bus/pci/drivers/mlx5_core");
    fs::create_dir_all(&drivers)?;
    std::os::unix::fs::symlink("../../../../bus/pci/drivers/mlx5_core", root.join(format!("{ib}/device/driver")))?;
    let port = format!("{ib}/ports/1");
    put(root, &format!("{port}/state"), "4: ACTIVE")?;
    put(root, &format!("{port}/phys_state"), "5: LinkUp")?;
    put(root, &format!("{port}/link_layer"), "Ethernet")?;
    put(root, &format!("{port}/rate"), "100 Gb/sec (4X EDR)")?;
    put(root, &format!("{port}/lid"), "0x0")?;
    put(root, &format!("{port}/sm_lid"), "0x0")?;
    put(root, &format!("{port}/lid_mask_count"), "0")?;
    put(root, &format!("{port}/sm_sl"), "0")?;
    put(root, &format!("{port}/cap_mask"), "0x04010000")?;
    put(root, &format!("{port}/pkeys/0"), "0xffff")?;
    let gids = attrs::gids();
    for i in 0..attrs::GID_TBL_LEN as usize {
        let (text, ty, ndev) = match gids.get(i) {
            Some((g, ty)) => (gid_text(g), *ty, "eth9"),
            None => (gid_text(&[0; 16]), "", ""),
        };
        put(root, &format!("{port}/gids/{i}"), &text)?;
        if !ty.is_empty() {
            put(root, &format!("{port}/gid_attrs/types/{i}"), ty)?;
            put(root, &format!("{port}/gid_attrs/ndevs/{i}"), ndev)?;
        }
    }
    Ok(())
}

/// A fresh directory for a tree, not at a predictable path (`mkdtemp`).
pub fn temp_root() -> io::Result<PathBuf> {
    let base = std::env::temp_dir().join("rverbs-fake-mlx5-XXXXXX");
    nix::unistd::mkdtemp(&base).map_err(io::Error::from)
}
