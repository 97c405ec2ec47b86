#!/bin/sh
# perftest's ib_send_bw as capi/tests/c_perftest.rs runs it (-F -n 5, RC,
# GID index 1), RUNS times per library pairing and mode, both sides'
# output and exit codes kept: the experiment behind issue 32 item 5. On
# the host:
#
#   cargo build -p rverbs-capi -p rverbs-vm
#   D=$(mktemp -d)
#   cp target/debug/libibverbs.so $D/libibverbs.so.1
#   cp /lib/x86_64-linux-gnu/libgcc_s.so.1 xtask/scripts/send-bw-loop.sh $D/
#   RUNS=20 target/debug/rverbs-vm run --kernel 6.12 --env RUNS --env SEQ \
#       --env MODES --env ARGS --env HOGS --env STRACE \
#       --copy $D:/opt/sbw -- /bin/sh /opt/sbw/send-bw-loop.sh
#
# SEQ: pairings, each SERVER then CLIENT library, r = rdma-core, v = rverbs
# (default "vv rr vr rv"); MODES: "e p" (-e, polling); ARGS: perftest's
# options besides -d, -x, -e, -p (default "-F -n 5"); HOGS: that many busy
# loops beside perftest (default 0); STRACE=1 runs both
# sides under strace -f (its output is printed for failed runs). One line
# per run, then both sides' output when a side failed:
#   RES mode=e|p srv=r|v cli=r|v srv_rc=N cli_rc=N
L=$(dirname "$(readlink -f "$0")")
RUNS=${RUNS:-10}
SEQ=${SEQ:-vv rr vr rv}
MODES=${MODES:-e p}
ARGS=${ARGS:--F -n 5}
T=$(mktemp -d)
listening() {
    p=$(printf %04X "$1")
    grep -q ":$p [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
lib() { [ "$1" = v ] && echo "env LD_LIBRARY_PATH=$L"; }
st() { [ -n "$STRACE" ] && echo "strace -f -tt -o $T/$1.st"; }
port=21000
# HOGS: that many busy loops beside perftest (a loaded guest)
h=0
while [ "$h" -lt "${HOGS:-0}" ]; do
    sh -c 'while :; do :; done' &
    h=$((h + 1))
done
run=1
while [ "$run" -le "$RUNS" ]; do
    for mode in $MODES; do
        for combo in $SEQ; do
            port=$((port + 1))
            s=${combo%?} c=${combo#?}
            ev=""
            [ "$mode" = e ] && ev=-e
            rm -f "$T"/*.st
            # shellcheck disable=SC2046,SC2086 # word splitting wanted
            $(st srv) $(lib "$s") ib_send_bw -d rxe0 -x 1 $ARGS $ev -p $port >"$T/srv" 2>&1 &
            bg=$!
            i=0
            until listening $port; do
                i=$((i + 1))
                [ $i -le 400 ] || break
                usleep 50000
            done
            # shellcheck disable=SC2046,SC2086
            $(st cli) $(lib "$c") timeout 90 ib_send_bw -d rxe0 -x 1 $ARGS $ev -p $port 127.0.0.1 >"$T/cli" 2>&1
            crc=$?
            wait $bg
            src=$?
            echo "RES run=$run mode=$mode srv=$s cli=$c srv_rc=$src cli_rc=$crc"
            if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
                echo "---- server"
                cat "$T/srv"
                echo "---- client"
                cat "$T/cli"
                for f in "$T"/*.st; do
                    [ -f "$f" ] || continue
                    echo "---- strace $f"
                    cat "$f"
                done
                echo "---- end"
            fi
        done
    done
    run=$((run + 1))
done
