#!/bin/sh
# perftest's ib_write_bw in a guest, server and client each on rdma-core's
# libibverbs or on rverbs', in every combination, with rxe's hardware
# counters around each run (retransmissions, duplicates): the experiment
# behind docs/CAPI.md's "6.1's ib_write_bw 4 KiB" paragraph. On the host:
#
#   cargo build --release -p rverbs-capi -p rverbs-vm
#   D=$(mktemp -d)
#   cp target/release/libibverbs.so $D/libibverbs.so.1
#   cp /lib/x86_64-linux-gnu/libgcc_s.so.1 xtask/scripts/write-bw-pairs.sh $D/
#   RUNS=24 target/release/rverbs-vm run --kernel 6.1 --cpus 2 --env RUNS \
#       --env SEQ --env SIZE --env EXTRA --copy $D:/opt/wbw -- /bin/sh /opt/wbw/write-bw-pairs.sh
#
# (libgcc_s goes along because rverbs-vm copies only what /bin/sh needs.)
# Environment: RUNS blocks (default 6); SEQ the combinations of a block,
# each SERVER then CLIENT library, r = rdma-core, v = rverbs (default
# "rr rv vr vv vv rv vr rr": every one twice, mirrored so that none always
# has the same neighbour); SIZE bytes (4096); EXTRA more perftest options
# for both sides (say "-u 20"). One line per run:
#   RES run=N srv=r|v cli=r|v MBps=AVERAGE counter=delta ...
# Pinned as `cargo xtask bench` pins its pairs: server CPU 0, client CPU 1.
L=$(dirname "$(readlink -f "$0")")
C=/sys/class/infiniband/rxe0/ports/1/hw_counters
RUNS=${RUNS:-6}
SIZE=${SIZE:-4096}
SEQ=${SEQ:-rr rv vr vv vv rv vr rr}
T=$(mktemp -d)
snap() { for f in "$C"/*; do echo "$(basename "$f") $(cat "$f")"; done; }
listening() {
    p=$(printf %04X "$1")
    grep -q ":$p [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
lib() { [ "$1" = v ] && echo "env LD_LIBRARY_PATH=$L"; }
port=20000
run=1
while [ "$run" -le "$RUNS" ]; do
    for combo in $SEQ; do
        port=$((port + 1))
        s=${combo%?} c=${combo#?}
        snap >"$T/before"
        # shellcheck disable=SC2046,SC2086 # word splitting wanted
        taskset -c 0 $(lib "$s") ib_write_bw -d rxe0 -x 1 -F $EXTRA -s "$SIZE" -n 1000 -p $port >"$T/srv" 2>&1 &
        bg=$!
        i=0
        until listening $port; do
            i=$((i + 1))
            [ $i -le 400 ] || break
            usleep 50000
        done
        # shellcheck disable=SC2046,SC2086
        taskset -c 1 $(lib "$c") ib_write_bw -d rxe0 -x 1 -F $EXTRA -s "$SIZE" -n 1000 -p $port 127.0.0.1 >"$T/cli" 2>&1
        wait $bg
        snap >"$T/after"
        bw=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { print $4 }' "$T/cli" | tail -1)
        d=$(paste "$T/before" "$T/after" | awk '{ if ($4 - $2 != 0) printf "%s=%d ", $1, $4 - $2 }')
        echo "RES run=$run srv=$s cli=$c MBps=$bw $d"
    done
    run=$((run + 1))
done
