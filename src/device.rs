//! Device discovery: which RDMA devices exist, from sysfs and RDMA netlink,
//! without opening any of them (`ibv_get_device_list`).

use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rverbs_providers::driver::DriverId;
use rverbs_providers::sys::netlink::RdmaNetlink;
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_verbs::IB_USER_VERBS_ABI_VERSION;

use crate::gid::Guid;
use crate::Context;

/// `enum ibv_node_type`, from sysfs `node_type` (`1: CA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeType {
    /// `IBV_NODE_CA`: a channel adapter (HCA, RoCE NIC, rxe).
    Ca,
    /// `IBV_NODE_SWITCH`.
    Switch,
    /// `IBV_NODE_ROUTER`.
    Router,
    /// `IBV_NODE_RNIC`: an iWARP NIC.
    Rnic,
    /// `IBV_NODE_USNIC`.
    Usnic,
    /// `IBV_NODE_USNIC_UDP`.
    UsnicUdp,
    /// `IBV_NODE_UNSPECIFIED`.
    Unspecified,
    /// A value sysfs gave that we don't know.
    Unknown(u32),
}

impl NodeType {
    fn from_sysfs(v: u32) -> Self {
        match v {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            4 => NodeType::Rnic,
            5 => NodeType::Usnic,
            6 => NodeType::UsnicUdp,
            7 => NodeType::Unspecified,
            o => NodeType::Unknown(o),
        }
    }

    /// The transport this node type implies (libibverbs' rule).
    pub fn transport(self) -> Transport {
        match self {
            NodeType::Ca | NodeType::Switch | NodeType::Router => Transport::Ib,
            NodeType::Rnic => Transport::Iwarp,
            NodeType::Usnic => Transport::Usnic,
            NodeType::UsnicUdp => Transport::UsnicUdp,
            NodeType::Unspecified => Transport::Unspecified,
            NodeType::Unknown(_) => Transport::Unknown,
        }
    }
}

/// `enum ibv_transport_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// `IBV_TRANSPORT_IB` (InfiniBand and RoCE).
    Ib,
    /// `IBV_TRANSPORT_IWARP`.
    Iwarp,
    /// `IBV_TRANSPORT_USNIC`.
    Usnic,
    /// `IBV_TRANSPORT_USNIC_UDP`.
    UsnicUdp,
    /// `IBV_TRANSPORT_UNSPECIFIED`.
    Unspecified,
    /// `IBV_TRANSPORT_UNKNOWN`.
    Unknown,
}

/// An RDMA device found in sysfs; not opened. [`Device::open`] opens it.
#[derive(Clone)]
pub struct Device {
    pub(crate) name: String,
    pub(crate) uverbs_name: String,
    pub(crate) dev_path: PathBuf,
    pub(crate) sysfs_path: PathBuf,
    pub(crate) verbs_sysfs_path: PathBuf,
    pub(crate) node_guid: Guid,
    pub(crate) node_type: NodeType,
    pub(crate) driver: DriverId,
    pub(crate) abi_version: u32,
    pub(crate) core_abi_version: u32,
    pub(crate) rdev: Option<(u32, u32)>,
    /// Read from sysfs on first use ([`Device::netdev`]): most programs
    /// never ask.
    pub(crate) netdev: Arc<OnceLock<Option<String>>>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("uverbs", &self.uverbs_name)
            .field("driver", &self.driver)
            .field("abi", &self.abi_version)
            .field("node_guid", &self.node_guid)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// The IB device name (`rxe0`, `mlx5_0`): `ibv_get_device_name`.
    #[doc(alias = "ibv_get_device_name")]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The uverbs node's name (`uverbs0`).
    pub fn uverbs_name(&self) -> &str {
        &self.uverbs_name
    }
    /// The char device path (`/dev/infiniband/uverbs0`).
    pub fn dev_path(&self) -> &Path {
        &self.dev_path
    }
    /// The device's sysfs directory (`/sys/class/infiniband/rxe0`).
    pub fn sysfs_path(&self) -> &Path {
        &self.sysfs_path
    }
    /// The node GUID: `ibv_get_device_guid`.
    #[doc(alias = "ibv_get_device_guid")]
    pub fn node_guid(&self) -> Guid {
        self.node_guid
    }
    /// The node type.
    pub fn node_type(&self) -> NodeType {
        self.node_type
    }
    /// The transport, derived from the node type.
    pub fn transport(&self) -> Transport {
        self.node_type.transport()
    }
    /// The kernel driver (from RDMA netlink; a sysfs guess where netlink is unavailable).
    pub fn driver(&self) -> DriverId {
        self.driver
    }
    /// The driver's uverbs ABI version (sysfs `uverbsN/abi_version`).
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }
    /// The device's uverbs sysfs directory (`/sys/class/infiniband_verbs/uverbs0`).
    pub fn verbs_sysfs_path(&self) -> &Path {
        &self.verbs_sysfs_path
    }
    /// The network device the RDMA device sits on, when it has one (rxe: its parent netdev).
    /// Read from sysfs on the first call (`parent`, or the PCI function's
    /// `net/`), then kept.
    pub fn netdev(&self) -> Option<&str> {
        self.netdev.get_or_init(|| netdev_of(&self.sysfs_path)).as_deref()
    }

    /// Opens the device: the uverbs fd, the provider's context and the async
    /// event fd (`ibv_open_device`).
    ///
    /// # Errors
    /// A clear [`Error`] naming the device when the node is missing or not a
    /// uverbs node, when permissions deny it, or when the kernel's ABI is one
    /// rverbs does not speak.
    #[doc(alias = "ibv_open_device")]
    pub fn open(&self) -> Result<Context> {
        Context::open(self)
    }
}

/// Where to look for devices: sysfs and the `/dev` directory of the uverbs
/// nodes. [`Sysfs::default`] is the real system; other roots serve containers
/// with sysfs mounted elsewhere, and tests.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
    dev_dir: PathBuf,
    use_netlink: bool,
}

/// The system's sysfs root: `$SYSFS_PATH` where set (as libibverbs'
/// `ibv_get_sysfs_path()`), else `/sys`.
fn sysfs_root() -> PathBuf {
    match std::env::var_os("SYSFS_PATH") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/sys"),
    }
}

impl Default for Sysfs {
    /// The real system: `/sys` (or `$SYSFS_PATH`, as rdma-core), nodes in
    /// `/dev/infiniband`, RDMA netlink first.
    fn default() -> Self {
        Sysfs { root: sysfs_root(), dev_dir: PathBuf::from("/dev/infiniband"), use_netlink: true }
    }
}

/// A sysfs attribute without its trailing newline. Three syscalls (open,
/// one read, close): an attribute is at most a page, and sysfs returns it
/// whole in the first read.
fn read_trim(p: &Path) -> Option<String> {
    let mut f = fs::File::open(p).ok()?;
    let mut buf = [0u8; 4096];
    let n = f.read(&mut buf).ok()?;
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    Some(s.trim_end().to_owned())
}

fn parse_num_prefix(s: &str) -> Option<u32> {
    s.split(':').next()?.trim().parse().ok()
}

impl Sysfs {
    /// Devices under `root` (instead of `/sys`) with nodes in `dev_dir`
    /// (instead of `/dev/infiniband`). Netlink is not consulted: driver ids
    /// come from the sysfs heuristics.
    pub fn at(root: impl Into<PathBuf>, dev_dir: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into(), dev_dir: dev_dir.into(), use_netlink: false }
    }

    /// Lists the devices with a uverbs node (`ibv_get_device_list`), in
    /// libibverbs' order: by device index from netlink, by node number from
    /// sysfs. An empty list is not an error.
    ///
    /// On the real system RDMA netlink says everything (as in rdma-core):
    /// an `RDMA_NLDEV_CMD_GET` dump (names, node GUIDs and types) and one
    /// `GET_CHARDEV` per device (the uverbs node, its `dev_t`, the driver
    /// id and ABI version), no sysfs at all. Without netlink (old kernel,
    /// restricted namespace, another root) the sysfs directories are read.
    #[doc(alias = "ibv_get_device_list")]
    pub fn devices(&self) -> Result<Vec<Device>> {
        if self.use_netlink {
            if let Some(devs) = self.netlink_devices() {
                return Ok(devs);
            }
        }
        self.sysfs_devices()
    }

    /// The devices as RDMA netlink describes them; `None` when netlink
    /// cannot answer (or knows of none: sysfs may still).
    fn netlink_devices(&self) -> Option<Vec<Device>> {
        let Ok(mut nl) = RdmaNetlink::open() else {
            tracing::debug!("RDMA netlink unavailable; reading sysfs");
            return None;
        };
        let mut found = nl.devices().ok().filter(|d| !d.is_empty())?;
        // libibverbs' order: ascending device index (its netlink dump, put
        // in a list twice head first), not the uverbs minor, which a device
        // re-added after another (`rdma link add`) takes back.
        found.sort_by_key(|d| d.index);
        let devs: Vec<Device> = found
            .into_iter()
            .filter_map(|d| {
                // A device without a uverbs node has no chardev: not listed.
                let c = nl.uverbs_chardev(d.index).ok().filter(|c| !c.name.is_empty())?;
                let sysfs_path = self.root.join("class/infiniband").join(&d.name);
                let driver = c.driver_id.map_or_else(|| guess_driver(&sysfs_path, &d.name), DriverId);
                Some(Device {
                    dev_path: self.dev_dir.join(&c.name),
                    verbs_sysfs_path: self.root.join("class/infiniband_verbs").join(&c.name),
                    uverbs_name: c.name,
                    node_guid: Guid(d.node_guid.to_be_bytes()),
                    node_type: NodeType::from_sysfs(d.node_type.into()),
                    driver,
                    abi_version: u32::try_from(c.abi).unwrap_or(u32::MAX),
                    // Netlink has no attribute for it, and rdma-core does not
                    // read it either: the core uverbs ABI has been 6 since
                    // long before RDMA netlink could describe uverbs nodes.
                    core_abi_version: IB_USER_VERBS_ABI_VERSION,
                    rdev: Some(c.dev),
                    netdev: Arc::new(OnceLock::new()),
                    name: d.name,
                    sysfs_path,
                })
            })
            .collect();
        Some(devs)
    }

    /// The devices from `class/infiniband_verbs` and `class/infiniband`.
    fn sysfs_devices(&self) -> Result<Vec<Device>> {
        let class = self.root.join("class/infiniband_verbs");
        let core_abi = read_trim(&class.join("abi_version")).and_then(|s| s.parse().ok()).unwrap_or(0);
        let entries = match fs::read_dir(&class) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::os("ibv_get_device_list", Errno::from_raw(e.raw_os_error().unwrap_or(5)))
                    .with_message(format!("cannot read {}", class.display())))
            }
        };
        let mut nodes: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("uverbs"))
            .collect();
        nodes.sort_by_key(|n| n["uverbs".len()..].parse::<u32>().unwrap_or(u32::MAX));
        Ok(nodes.iter().filter_map(|n| self.device(&class, n, core_abi)).collect())
    }

    fn device(&self, class: &Path, uverbs: &str, core_abi: u32) -> Option<Device> {
        let vdir = class.join(uverbs);
        let name = read_trim(&vdir.join("ibdev"))?;
        let sysfs_path = self.root.join("class/infiniband").join(&name);
        let abi_version = read_trim(&vdir.join("abi_version")).and_then(|s| s.parse().ok()).unwrap_or(0);
        let rdev = read_trim(&vdir.join("dev")).and_then(|s| {
            let (a, b) = s.split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        let node_guid =
            read_trim(&sysfs_path.join("node_guid")).and_then(|s| Guid::parse_sysfs(&s)).unwrap_or_default();
        let node_type = read_trim(&sysfs_path.join("node_type"))
            .and_then(|s| parse_num_prefix(&s))
            .map_or(NodeType::Unknown(0), NodeType::from_sysfs);
        let driver = guess_driver(&sysfs_path, &name);
        Some(Device {
            netdev: Arc::new(OnceLock::new()),
            dev_path: self.dev_dir.join(uverbs),
            uverbs_name: uverbs.to_owned(),
            verbs_sysfs_path: vdir,
            name,
            sysfs_path,
            node_guid,
            node_type,
            driver,
            abi_version,
            core_abi_version: core_abi,
            rdev,
        })
    }
}

/// The sysfs heuristic of `uverbs-abi.md` §1.2 for when netlink can't say.
fn guess_driver(sysfs_path: &Path, name: &str) -> DriverId {
    if let Ok(link) = fs::read_link(sysfs_path.join("device/driver")) {
        if link.file_name().is_some_and(|n| n == "mlx5_core") {
            return DriverId::MLX5;
        }
    }
    let no_parent_device = !sysfs_path.join("device").exists();
    let desc_rxe = read_trim(&sysfs_path.join("node_desc")).is_some_and(|d| d == "rxe");
    if no_parent_device && (sysfs_path.join("parent").exists() || desc_rxe || name.starts_with("rxe")) {
        return DriverId::RXE;
    }
    DriverId::UNKNOWN
}

/// The netdev under the device: rxe's `parent` attribute, the PCI
/// function's first `net/` entry, or the netdev of port 1's first GID
/// (siw, which has neither; 6.1's siw leaves it empty too).
fn netdev_of(sysfs_path: &Path) -> Option<String> {
    if let Some(p) = read_trim(&sysfs_path.join("parent")) {
        return Some(p);
    }
    let mut names: Vec<String> = fs::read_dir(sysfs_path.join("device/net"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .next()
        .or_else(|| read_trim(&sysfs_path.join("ports/1/gid_attrs/ndevs/0")).filter(|n| !n.is_empty()))
}

/// Every RDMA device with a uverbs node (`ibv_get_device_list`).
#[doc(alias = "ibv_get_device_list")]
pub fn devices() -> Result<Vec<Device>> {
    Sysfs::default().devices()
}

/// The device called `name` (`rxe0`).
///
/// # Errors
/// `ENODEV` with a message listing the devices that do exist.
pub fn device_by_name(name: &str) -> Result<Device> {
    let all = devices()?;
    let names: Vec<&str> = all.iter().map(|d| d.name()).collect();
    let msg = if names.is_empty() {
        format!("IB device '{name}' wasn't found: there are no RDMA devices (is an RDMA driver loaded?)")
    } else {
        format!("IB device '{name}' wasn't found (devices: {})", names.join(", "))
    };
    all.iter()
        .find(|d| d.name() == name)
        .cloned()
        .ok_or_else(|| Error::check("ibv_open_device", Errno::ENODEV).with_message(msg))
}

#[cfg(test)]
mod netdev_tests {
    use super::*;

    /// A sysfs directory of a device under the test's own temporary path.
    fn fake(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("rverbs-netdev-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (path, text) in files {
            let p = root.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fs::create_dir_all(&root).unwrap();
        root
    }

    #[test]
    fn netdev_from_parent_pci_function_or_first_gid() {
        let rxe = fake("rxe", &[("parent", "v0\n"), ("ports/1/gid_attrs/ndevs/0", "other\n")]);
        assert_eq!(netdev_of(&rxe).as_deref(), Some("v0"));
        let pci = fake("pci", &[("device/net/eth1/x", ""), ("device/net/eth0/x", "")]);
        assert_eq!(netdev_of(&pci).as_deref(), Some("eth0"));
        let siw = fake("siw", &[("ports/1/gid_attrs/ndevs/0", "v2\n")]);
        assert_eq!(netdev_of(&siw).as_deref(), Some("v2"));
        let none = fake("none", &[("ports/1/gid_attrs/ndevs/0", "\n")]);
        assert_eq!(netdev_of(&none), None);
        for d in [rxe, pci, siw, none] {
            let _ = fs::remove_dir_all(d);
        }
    }
}
