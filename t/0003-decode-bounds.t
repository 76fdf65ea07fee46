#!/bin/bash
# Small inputs cannot make dsecd allocate without bound: a frame of nils
# (each 1 byte, each a 24-byte object once decoded) and a container header
# claiming more elements than the frame holds are refused before msgpack-c
# allocates, and the daemon's peak memory (its own VmHWM and VmPeak) stays
# within a few frames' worth.
. "$(dirname "$0")/lib.sh"
# Debian's python3 has python3-msgpack (DEB_PACKAGES); another on PATH may not.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
need_cmd "$PY"
plan 12

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
ok $? "dsecd starts"
raw() { helper-req --raw "$1" "$DSEC_HOST"; }
kb() { awk -v k="$1:" '$1 == k { print $2 }' /proc/$DSECD_PID/status; }

# frame FILE KIND N: {"v": 1, "op": "ping", "x": ...} where x is
#   nils   an array of N nils          pairs  a map of N nil: nil entries
#   map32  a map32 header claiming N entries and nothing after it
#   deep   N nested one-element arrays
frame() {
	"$PY" - "$@" <<'EOF'
import struct, sys
path, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
head = b"\x83\xa1v\x01\xa2op\xa4ping\xa1x"
if kind == "nils":
    body = b"\xdd" + struct.pack(">I", n) + b"\xc0" * n
elif kind == "pairs":
    body = b"\xdf" + struct.pack(">I", n) + b"\xc0" * (2 * n)
elif kind == "map32":
    body = b"\xdf" + struct.pack(">I", n)
else:
    body = b"\x91" * n + b"\xc0"
open(path, "wb").write(head + body)
EOF
}

size=$((16 << 20))
frame "$T/nils" nils $((size - 64))
frame "$T/pairs" pairs $((size / 2 - 64))
frame "$T/map32" map32 $((0xc000000))
frame "$T/deep" deep 40
frame "$T/many" nils 70000

hwm0=$(kb VmHWM)
peak0=$(kb VmPeak)
like "$(raw "$T/nils")" '"code":"too_large".*objects' "16 MiB of nils: too_large before decoding"
like "$(raw "$T/pairs")" '"code":"too_large".*objects' "16 MiB of nil: nil map entries: too_large"
# Four at once: none is held while it would be decoded.
pids=
for i in 1 2 3 4; do raw "$T/nils" > "$T/out.$i" & pids="$pids $!"; done
wait $pids
is "$(cat "$T/out."* | grep -c too_large)" 4 "four at once: each refused"
hwm1=$(kb VmHWM)
grow=$(( (hwm1 - hwm0) << 10 ))
# nng holds each frame as it came (4 at once: 64 MiB); decoded they would
# be 24 times that.
ok $([ "$grow" -lt $((2 * 4 * size)) ]; echo $?) \
	"peak RSS grew by $((grow >> 20)) MiB: under twice the 4 frames' size"

like "$(raw "$T/map32")" '"code":"bad_request".*claims' "a 5-byte map32 header claiming 200M entries: bad_request"
peak1=$(kb VmPeak)
vgrow=$(( (peak1 - peak0) << 10 ))
ok $([ "$vgrow" -lt $((1 << 30)) ]; echo $?) \
	"address space peak grew by $((vgrow >> 20)) MiB: no gigabytes reserved for it"
like "$(raw "$T/deep")" '"code":"bad_request".*nests' "40 nested arrays: bad_request"
like "$(raw "$T/many")" '"code":"too_large".*65536' "70000 objects in 70 kB: over the cap of 65536"

# What a legitimate request may hold still fits: 4096 argv elements and
# 4096 env entries.
args=
for i in $(seq 4096); do args="$args argv[]=a"; done
envs=
for i in $(seq 4096); do envs="$envs env.K$i=v"; done
run helper-req "$DSEC_HOST" call $args $envs
like "$OUT" '"ok":true|"code":"(invalid|backend_error)"' "argv and env at their caps still decode"
ok $([ "$(printf '%s' "$OUT" | grep -c 'objects')" = 0 ]; echo $?) "... and are not refused for their size"
like "$(helper-req "$DSEC_HOST" ping)" '"pong":true' "the daemon still serves"
