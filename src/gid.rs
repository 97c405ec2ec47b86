//! GUIDs and GIDs: the 64-bit and 128-bit identifiers of InfiniBand/RoCE.
//!
//! Both are kept as the raw network-order bytes the kernel hands us; the
//! `Display` impls produce the formats rdma-core's tools print.

use core::fmt;

/// A 64-bit globally unique identifier (node GUID, system image GUID, port GUID).
///
/// Stored in network (big-endian) byte order, as `__be64` in the kernel ABI.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Guid(pub [u8; 8]);

impl Guid {
    /// The GUID as a host integer, most significant byte first; `ibv_devices`
    /// prints this with `%016llx`.
    pub fn as_u64(self) -> u64 {
        u64::from_be_bytes(self.0)
    }

    /// Builds a GUID from the raw `__be64` value the kernel wrote (memory order).
    pub fn from_raw_be(raw: u64) -> Self {
        Guid(raw.to_ne_bytes())
    }

    /// Parses sysfs' `xxxx:xxxx:xxxx:xxxx` form.
    pub fn parse_sysfs(s: &str) -> Option<Self> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(&hex, 16).ok().map(|v| Guid(v.to_be_bytes()))
    }
}

/// `xxxx:xxxx:xxxx:xxxx`, the form of sysfs and `ibv_devinfo`.
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

/// A 128-bit global identifier, raw network-order bytes. For RoCE v2 over IPv4
/// it is the IPv4-mapped IPv6 address `::ffff:a.b.c.d`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// True for the all-zero GID (an empty table slot).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The subnet prefix (first 8 bytes) as `ibv_devinfo` prints it... as a GUID-shaped value.
    pub fn subnet_prefix(&self) -> Guid {
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[..8]);
        Guid(b)
    }

    /// The interface id (last 8 bytes).
    pub fn interface_id(&self) -> Guid {
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[8..]);
        Guid(b)
    }

    /// True for a multicast group's GID: `ff00::/8`, or an IPv4-mapped
    /// multicast address (`::ffff:224.0.0.0/100`), the kernel's
    /// `rdma_is_multicast_addr`.
    pub fn is_multicast(&self) -> bool {
        self.0[0] == 0xff || self.to_ipv4().is_some_and(|a| a.is_multicast())
    }

    /// The IPv4 address if this is an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn to_ipv4(&self) -> Option<std::net::Ipv4Addr> {
        std::net::Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// The GID as an IPv6 address.
    pub fn to_ipv6(&self) -> std::net::Ipv6Addr {
        std::net::Ipv6Addr::from(self.0)
    }

    /// The GID as glibc's `inet_ntop(AF_INET6)` writes it, as rdma-core's
    /// ping-pong examples and `ibv_devinfo -v` (RoCE v2 entries) print it: RFC 5952 compression
    /// (`fe80::5054:ff:fe12:3456`, `::`), `::ffff:a.b.c.d` for IPv4-mapped
    /// GIDs, and, unlike Rust's `Ipv6Addr` display, `::a.b.c.d` for the
    /// IPv4-compatible ones (the first 96 bits zero, the next 16 not: `::1`
    /// stays `::1`).
    pub fn to_inet_string(&self) -> String {
        let a = self.to_ipv6();
        let w = a.segments();
        if w[..6].iter().all(|&x| x == 0) && w[6] != 0 {
            format!("::{}", std::net::Ipv4Addr::new(self.0[12], self.0[13], self.0[14], self.0[15]))
        } else {
            a.to_string()
        }
    }

    /// Parses sysfs' `%pI6` form (`0000:0000:0000:0000:0000:ffff:0a00:0001`) or any IPv6 text.
    pub fn parse(s: &str) -> Option<Self> {
        s.trim().parse::<std::net::Ipv6Addr>().ok().map(|a| Gid(a.octets()))
    }
}

/// The full, uncompressed form sysfs and `ibv_devinfo -v` use:
/// `fe80:0000:0000:0000:5054:00ff:fe12:3456`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

/// How the GID entry's packets are framed (`enum ib_uverbs_gid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GidType {
    /// `IB_UVERBS_GID_TYPE_IB`: native InfiniBand (or RoCE v1 on older kernels' sysfs, "IB/RoCE v1").
    Ib,
    /// `IB_UVERBS_GID_TYPE_ROCE_V1`: RoCE v1 (Ethernet type 0x8915).
    RoceV1,
    /// `IB_UVERBS_GID_TYPE_ROCE_V2`: RoCE v2 (UDP port 4791).
    RoceV2,
    /// A value this library does not know.
    Other(u32),
}

impl GidType {
    /// From the kernel's `ib_uverbs_gid_entry.gid_type`.
    pub fn from_kernel(v: u32) -> Self {
        match v {
            0 => GidType::Ib,
            1 => GidType::RoceV1,
            2 => GidType::RoceV2,
            o => GidType::Other(o),
        }
    }

    /// The kernel's `IB_UVERBS_GID_TYPE_*` value.
    pub fn to_kernel(self) -> u32 {
        match self {
            GidType::Ib => 0,
            GidType::RoceV1 => 1,
            GidType::RoceV2 => 2,
            GidType::Other(o) => o,
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GidType::Ib => f.write_str("IB"),
            GidType::RoceV1 => f.write_str("RoCE v1"),
            GidType::RoceV2 => f.write_str("RoCE v2"),
            GidType::Other(v) => write!(f, "unknown({v})"),
        }
    }
}

/// One valid entry of a port's GID table (`struct ib_uverbs_gid_entry`), plus
/// the name of its network device when it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Index in the port's table: what `sgid_index` refers to.
    pub index: u32,
    /// Port number (1-based).
    pub port: u32,
    /// RoCE v1/v2 or IB.
    pub gid_type: GidType,
    /// Interface index of the netdev, 0 for none.
    pub netdev_ifindex: u32,
    /// Name of the netdev (`eth0`), when it has one.
    pub netdev: Option<String>,
}

/// GID choice: which of a port's GIDs rverbs uses when the caller names none.
impl crate::Context {
    /// The GID index rverbs uses by default on `port`: the lowest-index
    /// RoCE v2 GID that is an IPv4-mapped address; else the lowest RoCE v2
    /// GID; else index 0. On InfiniBand ports: 0.
    pub fn default_sgid_index(&self, port: u8) -> rverbs_providers::Result<u8> {
        let table = self.gid_table_unnamed()?;
        let on_port = || table.iter().filter(|e| e.port == u32::from(port));
        let pick = on_port()
            .filter(|e| e.gid_type == GidType::RoceV2 && e.gid.to_ipv4().is_some())
            .map(|e| e.index)
            .min()
            .or_else(|| on_port().filter(|e| e.gid_type == GidType::RoceV2).map(|e| e.index).min())
            .unwrap_or(0);
        u8::try_from(pick)
            .map_err(|_| rverbs_providers::Error::check("default_sgid_index", rverbs_providers::Errno::ERANGE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_formats_like_sysfs() {
        let g = Guid::parse_sysfs("5054:00ff:fe12:3456\n").unwrap();
        assert_eq!(g.to_string(), "5054:00ff:fe12:3456");
        assert_eq!(format!("{:016x}", g.as_u64()), "505400fffe123456");
        assert_eq!(Guid::parse_sysfs("zz"), None);
    }

    #[test]
    fn multicast_gids_are_the_kernels() {
        let g = |s: &str| Gid::parse(s).unwrap();
        assert!(g("ff0e:0000:0000:0000:0000:0000:0000:0001").is_multicast());
        assert!(g("0000:0000:0000:0000:0000:ffff:ef01:0101").is_multicast(), "::ffff:239.1.1.1");
        assert!(!g("0000:0000:0000:0000:0000:ffff:c0a8:4d01").is_multicast(), "::ffff:192.168.77.1");
        assert!(!g("fe80:0000:0000:0000:5054:00ff:fe12:3456").is_multicast());
        assert!(!g("0000:0000:0000:0000:0000:0000:ef01:0101").is_multicast(), "IPv4-compatible is not mapped");
    }

    #[test]
    fn gid_formats_like_sysfs() {
        let s = "0000:0000:0000:0000:0000:ffff:c0a8:4d01";
        let g = Gid::parse(s).unwrap();
        assert_eq!(g.to_string(), s);
        assert_eq!(g.to_ipv4(), Some(std::net::Ipv4Addr::new(192, 168, 77, 1)));
        assert!(!g.is_zero());
        assert!(Gid::default().is_zero());
    }

    #[test]
    fn gid_prints_like_inet_ntop() {
        let t = |s: &str| Gid::parse(s).unwrap().to_inet_string();
        assert_eq!(t("0000:0000:0000:0000:0000:ffff:c0a8:4d01"), "::ffff:192.168.77.1");
        assert_eq!(t("fe80:0000:0000:0000:5054:00ff:fe12:3456"), "fe80::5054:ff:fe12:3456");
        assert_eq!(t("fe80::2:c903:1:2345"), "fe80::2:c903:1:2345");
        assert_eq!(t("::1.2.3.4"), "::1.2.3.4");
        assert_eq!(t("::0102:0304"), "::1.2.3.4");
        assert_eq!(t("::c0a8:4d01"), "::192.168.77.1");
        assert_eq!(t("::1:0"), "::0.1.0.0");
        assert_eq!(t("::1"), "::1");
        assert_eq!(t("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
        assert_eq!(t("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
        assert_eq!(Gid::default().to_inet_string(), "::");
    }

    /// The cases `rverbs devinfo`'s own `inet_ntop6` was checked against
    /// (glibc's output), before it gave way to `to_inet_string`.
    #[test]
    fn inet_string_matches_glibc() {
        let cases = [
            ("fe80:0000:0000:0000:5054:00ff:fe12:3456", "fe80::5054:ff:fe12:3456"),
            ("0000:0000:0000:0000:0000:ffff:0a00:0001", "::ffff:10.0.0.1"),
            ("0000:0000:0000:0000:0000:0000:0a00:0001", "::10.0.0.1"),
            ("0000:0000:0000:0000:0000:0000:0000:0001", "::1"),
            ("0000:0000:0000:0000:0000:0000:0000:0000", "::"),
            ("2001:0db8:0000:0001:0000:0000:0000:0001", "2001:db8:0:1::1"),
            ("2001:0db8:0000:0000:0001:0000:0000:0001", "2001:db8::1:0:0:1"),
            ("2001:0db8:0001:0001:0001:0001:0001:0001", "2001:db8:1:1:1:1:1:1"),
            ("2001:0db8:0000:0001:0001:0001:0001:0001", "2001:db8:0:1:1:1:1:1"),
            ("fe80:0000:0000:0000:0000:0000:0000:0000", "fe80::"),
            ("0000:0000:0000:0000:0000:fffe:0a00:0001", "::fffe:a00:1"),
            ("0001:0000:0000:0000:0000:ffff:0a00:0001", "1::ffff:a00:1"),
            ("0000:0000:0000:0000:0000:ffff:0000:0000", "::ffff:0.0.0.0"),
            ("0000:0000:0000:0000:0001:0000:0000:0000", "::1:0:0:0"),
            ("0000:0000:0000:0001:0000:0000:0000:0000", "0:0:0:1::"),
            ("0001:0000:0000:0001:0000:0000:0000:0001", "1:0:0:1::1"),
            ("0001:0000:0000:0001:0000:0000:0001:0001", "1::1:0:0:1:1"),
        ];
        for (full, want) in cases {
            assert_eq!(Gid::parse(full).unwrap().to_inet_string(), want, "{full}");
        }
    }
}
