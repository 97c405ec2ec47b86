//! The GID table section of `rverbs devinfo -v`, laid out like the
//! `show_gids` script that NVIDIA/Mellanox OFED ships (it is not part of
//! rdma-core): a tab-separated table with the columns `DEV PORT INDEX GID
//! IPv4 VER DEV`, followed by `n_gids_found=N`.
//!
//! Like the script it prints every valid entry except the all-zero GID and
//! the bare `fe80::` prefix, the GID in sysfs' full form, `v1`/`v2` for the
//! type (an IB entry reads `IB/RoCE v1` in sysfs, hence `v1`), and the
//! entry's netdev. Differences: the IPv4 column is filled only for
//! IPv4-mapped GIDs (`::ffff:a.b.c.d`; the script takes any GID whose
//! first group is `0000`), and rows are in device, port, index order (the
//! script lists sysfs directories in `ls` order: 0, 1, 10, 100, ...).

use std::fmt::Write as _;

use rverbs::{GidEntry, GidType};

/// The two header lines.
pub const HEADER: &str = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n\
                          ---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n";

/// The `VER` column: the part of the sysfs type name from the `v` on.
pub fn version_str(t: GidType) -> &'static str {
    match t {
        GidType::Ib | GidType::RoceV1 => "v1",
        GidType::RoceV2 => "v2",
        #[allow(unreachable_patterns)]
        _ => "",
    }
}

/// Whether `show_gids` would list this entry.
pub fn is_listed(e: &GidEntry) -> bool {
    let fe80_only = {
        let mut bare = [0u8; 16];
        bare[0] = 0xfe;
        bare[1] = 0x80;
        bare
    };
    !e.gid.is_zero() && e.gid.0 != fe80_only
}

/// Writes the table for `rows` (device name, entry), sorted by device (in
/// the order given), port and index.
pub fn write_gid_table(out: &mut String, rows: &[(&str, &GidEntry)]) {
    out.push_str(HEADER);
    let mut n = 0;
    for (dev, e) in rows.iter().filter(|(_, e)| is_listed(e)) {
        let ndev = e.netdev.as_deref().unwrap_or("");
        let ver = version_str(e.gid_type);
        match e.gid.to_ipv4() {
            Some(ip) => {
                let _ = writeln!(out, "{dev}\t{}\t{}\t{}\t{ip} \t{ver}\t{ndev}", e.port, e.index, e.gid);
            }
            None => {
                let _ = writeln!(out, "{dev}\t{}\t{}\t{}\t\t\t{ver}\t{ndev}", e.port, e.index, e.gid);
            }
        }
        n += 1;
    }
    let _ = writeln!(out, "n_gids_found={n}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rverbs::Gid;

    fn entry(port: u32, index: u32, s: &str, t: GidType, ndev: Option<&str>) -> GidEntry {
        GidEntry {
            gid: Gid::parse(s).unwrap(),
            index,
            port,
            gid_type: t,
            netdev_ifindex: if ndev.is_some() { 3 } else { 0 },
            netdev: ndev.map(str::to_string),
        }
    }

    #[test]
    fn table_like_show_gids() {
        let a = entry(1, 0, "fe80::5054:ff:fe12:3456", GidType::RoceV2, Some("v0"));
        let b = entry(1, 1, "::ffff:192.168.77.1", GidType::RoceV2, Some("v0"));
        let c = entry(1, 2, "fe80::", GidType::RoceV1, Some("v0"));
        let d = entry(2, 0, "fe80::2:c903:f:1234", GidType::Ib, None);
        let mut s = String::new();
        write_gid_table(&mut s, &[("rxe0", &a), ("rxe0", &b), ("rxe0", &c), ("mlx4_0", &d)]);
        let want = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n\
---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n\
rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe12:3456\t\t\tv2\tv0\n\
rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:c0a8:4d01\t192.168.77.1 \tv2\tv0\n\
mlx4_0\t2\t0\tfe80:0000:0000:0000:0002:c903:000f:1234\t\t\tv1\t\n\
n_gids_found=3\n";
        assert_eq!(s, want);
    }

    #[test]
    fn empty_table() {
        let mut s = String::new();
        write_gid_table(&mut s, &[]);
        assert_eq!(s, format!("{HEADER}n_gids_found=0\n"));
    }

    #[test]
    fn versions() {
        assert_eq!(version_str(GidType::Ib), "v1");
        assert_eq!(version_str(GidType::RoceV1), "v1");
        assert_eq!(version_str(GidType::RoceV2), "v2");
        assert_eq!(version_str(GidType::Other(7)), "");
    }
}
