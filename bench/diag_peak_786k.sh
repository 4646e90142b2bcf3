#!/bin/sh
# Diagnostic for the pingpong-peak gap (bench/RESULTS.md): one size, 786432 B, on loopback.
# A: NPtcp (best of 3 trial means) vs beoperf at the default --trial-time (10 ms) and at 0.1 s.
# B: beoperf with kernel-autotuned socket buffers vs fixed 4M (Linux grants 8M).
# Servers are started here and stopped by PID.  Usage: sh bench/diag_peak_786k.sh [ROUNDS]
set -eu
S=786432
ROUNDS=${1:-4}
NP_PORT=5012
BE_PORT=5213
DIR=$(mktemp -d)
cd "$DIR"

show() {  # show LABEL PREFIX
    python3 - "$1" "$2.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[2]))
s = d["sizes"][-1]
t = s["time_us"]
print(f"{sys.argv[1]:<34} {s['throughput_bps']['from_median'] / 1e9:5.1f} Gbit/s  median "
      f"{t['median']:6.1f} us  min {t['min']:6.1f}  p90 {t['p90']:6.1f}  samples {s['samples']}"
      f"  trials {s['trials']}  rcvbuf {d['local']['socket']['rcvbuf']}")
EOF
}

echo "A: $S B, NPtcp -l $S -u $S -p 0 vs beoperf pingpong --sizes $S"
for r in $(seq "$ROUNDS"); do
    NPtcp -P $NP_PORT -l $S -u $S -p 0 >/dev/null 2>&1 &
    np=$!
    sleep 0.5
    NPtcp -h 127.0.0.1 -P $NP_PORT -l $S -u $S -p 0 -o np.out >/dev/null 2>&1
    wait $np
    awk -v r="$r" '{printf "round %s %-26s %5.1f Gbit/s  time %6.1f us\n", r, "NPtcp", \
        $2 * 1048576 / 1e9, $3 * 1e6}' np.out
    beoperf serve --bind 127.0.0.1 --port $BE_PORT >/dev/null 2>&1 &
    bs=$!
    sleep 1
    beoperf pingpong 127.0.0.1 --port $BE_PORT --sizes $S -o a >/dev/null 2>&1
    show "round $r beoperf (trial 10 ms)" a
    beoperf pingpong 127.0.0.1 --port $BE_PORT --sizes $S --trial-time 0.1 -o b >/dev/null 2>&1
    show "round $r beoperf --trial-time 0.1" b
    kill $bs
    wait $bs || true
done

echo "B: beoperf pingpong --sizes $S, autotuned vs --rcvbuf 4M --sndbuf 4M"
beoperf serve --bind 127.0.0.1 --port $BE_PORT >/dev/null 2>&1 &
bs=$!
sleep 1
for r in $(seq "$ROUNDS"); do
    beoperf pingpong 127.0.0.1 --port $BE_PORT --sizes $S -o c >/dev/null 2>&1
    show "round $r autotuned" c
    beoperf pingpong 127.0.0.1 --port $BE_PORT --sizes $S --rcvbuf 4M --sndbuf 4M -o d \
        >/dev/null 2>&1
    show "round $r --rcvbuf 4M --sndbuf 4M" d
done
kill $bs
wait $bs || true
rm -rf "$DIR"
