#!/bin/bash
# dsecd's configuration: embedded defaults, dsecd.conf, flags, and the
# errors a user sees for bad settings.
. "$(dirname "$0")/lib.sh"
plan 36

D="$TOP/dsecd/dsecd"
run "$D" --check-config --config /dev/null
is "$RC" 0 "--check-config runs with no config file"
like "$OUT" 'listen = ipc:///run/dsec/dsecd.sock' "the default listen address is the local socket"
like "$OUT" 'max_frame = 16777216' "the default max_frame is 16M"
like "$OUT" 'backends = fncall,container' "fncall and container are loaded by default"

cat > "$T/a.conf" <<'CONF'
# a comment
node = alpha
listen = tcp://127.0.0.1:7001
listen = ipc:///tmp/x.sock
idle_ttl = 90s
fncall.pool_size = 3
CONF
run "$D" --check-config --config "$T/a.conf"
like "$OUT" 'node = alpha' "the config file sets keys"
like "$OUT" 'listen = tcp://127.0.0.1:7001' "listen is repeatable (1)"
like "$OUT" 'listen = ipc:///tmp/x.sock' "listen is repeatable (2)"
like "$OUT" 'idle_ttl = 90s' "durations are parsed"
like "$OUT" 'fncall.pool_size = 3' "backend keys are kept for the backend"
run "$D" --check-config --config "$T/a.conf" --node beta --listen tcp://127.0.0.1:7002 --set idle_ttl=2m
like "$OUT" 'node = beta' "a flag overrides the file"
ok "$(echo "$OUT" | grep -c '^listen = ' | grep -qx 1; echo $?)" "--listen replaces the file's list"
like "$OUT" 'idle_ttl = 120s' "--set overrides the file"

# fs3's peers: one line may list several; each line adds.
run "$D" --check-config --config /dev/null
like "$OUT" 'image_fetch_timeout = 5s' "the default fetch timeout is 5 s"
ok "$(echo "$OUT" | grep -q '^image_peers'; echo $((!$?)))" "no peers by default"
printf 'image_peers = tcp://10.0.0.2:7000, ipc:///tmp/p.sock\nimage_peers = tcp://10.0.0.3:7000\nimage_fetch_timeout = 1500ms\n' > "$T/p.conf"
run "$D" --check-config --config "$T/p.conf"
like "$(echo $OUT)" 'image_peers = tcp://10.0.0.2:7000 image_peers = ipc:///tmp/p.sock image_peers = tcp://10.0.0.3:7000' \
	"image_peers: a comma-separated list, repeatable, in order"
like "$OUT" 'image_fetch_timeout = 1.5s' "image_fetch_timeout is a duration"
run "$D" --check-config --config /dev/null --set image_fetch_timeout=soon
like "$RC:$OUT" "^2:.*invalid value 'soon' for 'image_fetch_timeout'" "a bad fetch timeout is refused"

# Gossip's timing: durations, bounded.
run "$D" --check-config --config /dev/null
like "$(echo $OUT)" 'gossip_probe_interval = 1s gossip_reconnect_interval = 30s' \
	"gossip probes every second and tries a dead member again every 30 s by default"
run "$D" --check-config --config /dev/null --set gossip_probe_interval=250ms
like "$OUT" 'gossip_probe_interval = 0.25s' "gossip_probe_interval is a duration"
run "$D" --check-config --config /dev/null --set gossip_probe_interval=50ms
like "$RC:$OUT" "^2:.*gossip_probe_interval must be between 100ms and 1m" "... of 100ms at least"
run "$D" --check-config --config /dev/null --set gossip_reconnect_interval=0
like "$RC:$OUT" "^2:.*gossip_reconnect_interval must be between 1s and 1d" "a reconnect interval under 1s is refused"

printf 'node = a\nbogus line\n' > "$T/b.conf"
run "$D" --check-config --config "$T/b.conf"
like "$RC:$OUT" "^2:.*b.conf:2: expected 'key = value'" "a malformed line is reported with file and line, status 2"
run "$D" --check-config --config /dev/null --set nosuchkey=1
like "$RC:$OUT" "^2:.*unknown key 'nosuchkey'" "an unknown key is refused"
run "$D" --check-config --config /dev/null --set max_frame=lots
like "$RC:$OUT" "^2:.*invalid value 'lots' for 'max_frame'" "a bad size is refused"
run "$D" --check-config --config /dev/null --node 'bad name'
like "$RC:$OUT" "^2:.*invalid node name" "a bad node name is refused"
run "$D" --check-config --config /dev/null --set default_backend=
like "$RC:$OUT" "^2:.*'default_backend' must not be empty" "an empty required key is refused"
run "$D" --check-config --config "$T/missing.conf"
like "$RC:$OUT" "^2:.*cannot read config" "a missing --config file is an error"

# Loading: a backend that is not there, and capacity.
run timeout 60 "$D" --foreground --config /dev/null --state-dir "$T/s1" --listen "ipc://$T/s1.sock" \
	--backend-dir "$TOP/t" --set backends=nosuch
like "$RC:$(echo "$OUT" | tr '\n' ' ')" "^1:.*cannot load backend '$TOP/t/nosuch.so'.*no backend could be loaded" \
	"a missing backend is named with dlerror, and no backend is fatal"
start_dsecd --backend-dir "$TOP/t" --set backends=test,nosuch --set default_backend=test --set max_sandboxes=2
helper-req "$DSEC_HOST" create >/dev/null; helper-req "$DSEC_HOST" create >/dev/null
like "$(helper-req "$DSEC_HOST" create)" '"code":"capacity"' "max_sandboxes is enforced with capacity"
run timeout 60 "$D" --foreground --config /dev/null --state-dir "$T/state" --listen "ipc://$T/other.sock" \
	--backend-dir "$TOP/t" --set backends=test
like "$RC:$OUT" "^1:.*another dsecd is using state directory" "a second dsecd on the same state directory is refused"
like "$(helper-req "$DSEC_HOST" ping)" '"pong":true' "... and the first one keeps serving"

# The socket: mode 0600 by default, socket_mode and socket_group change it.
is "$(stat -c %a "$T/dsecd.sock")" "600" "the ipc socket is mode 0600 by default"
stop_dsecd
start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set socket_mode=0660 --set socket_group=daemon --set log_file="$T/d.log"
is "$(stat -c '%a %G' "$T/dsecd.sock")" "660 daemon" "socket_mode and socket_group apply"
# SIGHUP reopens the log file (rotation).
mv "$T/d.log" "$T/d.log.1"
kill -HUP "$DSECD_PID"
for _ in $(seq 50); do [ -s "$T/d.log" ] && break; sleep 0.1; done
like "$(cat "$T/d.log" 2>/dev/null)" "log file reopened" "SIGHUP reopens the log file"
# A daemon killed with SIGKILL leaves its socket; the next one takes it over.
kill -KILL "$DSECD_PID"; wait "$DSECD_PID" 2>/dev/null; DSECD_PID=
ok "$([ -S "$T/dsecd.sock" ]; echo $?)" "SIGKILL leaves the socket file behind"
start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
like "$(helper-req "$DSEC_HOST" ping)" '"pong":true' "a new dsecd listens on a stale socket"
