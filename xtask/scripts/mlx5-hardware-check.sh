#!/bin/bash
# Runs rverbs on whatever RDMA hardware this host has (meant for a ConnectX):
# lists what is there, then `rverbs devices`, `rverbs devinfo -v`, an RC and a
# UD ping-pong over loopback, and the control-path integration tests.
#
#   cargo build --release --bin rverbs
#   cargo test --release --no-run --test control_path   # prints the test binary
#   xtask/scripts/mlx5-hardware-check.sh target/release/rverbs target/release/deps/control_path-<hash> [OUTDIR]
#
# Everything goes to stdout and, when OUTDIR is given, to files in it.
# Record what happened (and what failed) in docs/MLX5.md.
set -u
RVERBS=$(realpath "${1:?path to the rverbs binary}")
CONTROL=$(realpath "${2:?path to the control_path test binary}")
OUT=${3:-$(mktemp -d)}
mkdir -p "$OUT"
echo "== kernel: $(uname -r)"
echo "== /sys/class/infiniband, /dev/infiniband"; ls /sys/class/infiniband /dev/infiniband 2>&1
echo "== node types"; cat /sys/class/infiniband/*/node_type 2>&1
echo "== drivers"; for d in /sys/class/infiniband/*; do [ -e "$d" ] && echo "$d -> $(readlink -f "$d/device/driver")"; done
echo "== Mellanox PCI functions (vendor 0x15b3)"
for p in /sys/bus/pci/devices/*; do [ "$(cat "$p/vendor" 2>/dev/null)" = 0x15b3 ] && echo "$(basename "$p") $(cat "$p/device")"; done
if ! ls /sys/class/infiniband 2>/dev/null | grep -q .; then
  echo "== no RDMA device: nothing to run"
  exit 0
fi
export RUST_BACKTRACE=1
echo "== rverbs devices"; timeout 20 "$RVERBS" devices 2>&1 | tee "$OUT/devices.txt"
echo "== rverbs devinfo -v"; timeout 20 "$RVERBS" devinfo -v 2>&1 | tee "$OUT/devinfo.txt"
echo "== RC ping-pong, loopback"
timeout 60 "$RVERBS" pingpong -n 1000 -c > "$OUT/rc_server.txt" 2>&1 &
sleep 1
timeout 60 "$RVERBS" pingpong -n 1000 -c 127.0.0.1 2>&1 | tee "$OUT/rc_client.txt"
wait; cat "$OUT/rc_server.txt"
echo "== UD ping-pong, loopback"
timeout 60 "$RVERBS" pingpong --ud -n 1000 -p 18516 > "$OUT/ud_server.txt" 2>&1 &
sleep 1
timeout 60 "$RVERBS" pingpong --ud -n 1000 -p 18516 127.0.0.1 2>&1 | tee "$OUT/ud_client.txt"
wait; cat "$OUT/ud_server.txt"
echo "== control-path tests"
(cd /tmp && RVERBS_REQUIRE_DEVICE=1 RVERBS_BIN="$RVERBS" timeout 300 "$CONTROL" --test-threads=1 2>&1) | tee "$OUT/control_path.txt" | tail -60
echo "== done; outputs in $OUT"
