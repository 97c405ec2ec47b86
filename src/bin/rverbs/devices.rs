//! `rverbs devices`: the output of rdma-core's `ibv_devices`
//! (`libibverbs/examples/device_list.c`): a two-line header, then one line
//! per device with its name left-aligned in 16 columns and the node GUID as
//! 16 lower-case hex digits.

use std::fmt::Write as _;

/// Writes the whole listing for `(name, node GUID as a host integer)` pairs.
pub fn write_devices(out: &mut String, devices: &[(&str, u64)]) {
    let _ = writeln!(out, "    {:<16}\t   node GUID", "device");
    let _ = writeln!(out, "    {:<16}\t----------------", "------");
    for (name, guid) in devices {
        let _ = writeln!(out, "    {name:<16}\t{guid:016x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_ibv_devices() {
        let mut s = String::new();
        write_devices(&mut s, &[("rxe0", 0x505400fffe123456), ("mlx5_a_very_long_name", 0x2c9)]);
        assert_eq!(
            s,
            "    device          \t   node GUID\n\
             \x20   ------          \t----------------\n\
             \x20   rxe0            \t505400fffe123456\n\
             \x20   mlx5_a_very_long_name\t00000000000002c9\n"
        );
    }

    #[test]
    fn no_devices_prints_the_header() {
        let mut s = String::new();
        write_devices(&mut s, &[]);
        assert_eq!(s.lines().count(), 2);
    }
}
