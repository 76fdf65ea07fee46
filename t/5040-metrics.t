#!/bin/bash
# Prometheus metrics (metrics_listen): the page is valid text exposition
# (promtool check metrics), and a real Prometheus (Debian's package),
# started here on loopback, scrapes dsecd: through its HTTP API the series
# move as sandboxes are made and destroyed and requests answered.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
for c in prometheus promtool; do need_cmd "$c"; done
[ -x /usr/bin/python3 ] || skip_all "needs /usr/bin/python3"
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 23

MPORT=$(( 20000 + $$ % 20000 ))
PPORT=$(( MPORT + 1 ))
fetch() { /usr/bin/python3 -c 'import sys, urllib.request
try: sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
except Exception as e: print("fetch failed:", e); sys.exit(1)' "$1"; }
start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set metrics_listen="http://127.0.0.1:$MPORT/metrics" || bail "dsecd did not start"
like "$(dsecd_log)" "metrics on http://127.0.0.1:$MPORT/metrics" "dsecd serves metrics where metrics_listen says"
req() { helper-req "$DSEC_HOST" "$@"; }
first=$(req create | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
req exec id=x:0000000000000001 'argv[]=true' >/dev/null
req exec id="$first" 'argv[]=true' >/dev/null
req exec id="$first" 'argv[]=true' >/dev/null
fetch "http://127.0.0.1:$MPORT/metrics" > "$T/page"
run promtool check metrics < "$T/page"
is "$RC:$OUT" "0:" "the page passes promtool check metrics"
like "$(cat "$T/page")" $'\ndsec_sandboxes\\{backend="test",state="running"\\} 1\n' "... counts sandboxes by backend and state"
like "$(cat "$T/page")" $'\ndsec_requests_total\\{op="exec",code="not_found"\\} 1\n' "... and requests by op and code"
like "$(cat "$T/page")" 'dsec_request_duration_seconds_bucket\{op="create",le="\+Inf"\} 1' "... with a latency histogram per op"
want='dsec_create_phase_seconds_count\{backend="test",phase="backend"\} 1'
like "$(cat "$T/page")" $'\n'"$want"$'\n' \
	"... the create's phases, by backend (the backend's create: 1)"
like "$(cat "$T/page")" $'\ndsec_first_exec_seconds_count\\{backend="test"\\} 1\n' \
	"... and create -> first exec: one, however many commands the sandbox ran"
run fetch "http://127.0.0.1:$MPORT/other"
like "$OUT" "404" "another path is not found"

# A real Prometheus, scraping every second.
cat > "$T/prom.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: dsec
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
YML
prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/prom" \
	--web.listen-address="127.0.0.1:$PPORT" >"$T/prom.log" 2>&1 &
_node_pids="$_node_pids $!"
for i in $(seq 300); do fetch "http://127.0.0.1:$PPORT/-/ready" >/dev/null 2>&1 && break; sleep 0.1; done
run fetch "http://127.0.0.1:$PPORT/-/ready"
like "$OUT" "Ready" "Prometheus runs" || sed 's/^/# /' "$T/prom.log" >&2
# query EXPR: its value (of the first series), through Prometheus's API.
query() { fetch "http://127.0.0.1:$PPORT/api/v1/query?query=$1" |
	/usr/bin/python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "none")'; }
# until_is EXPR VALUE: waits (30 s at most) for Prometheus to see it (a
# VALUE of "number": any number).
until_is() {
	local v i
	for i in $(seq 60); do
		v=$(query "$1")
		[ "$v" = "$2" ] && break
		[ "$2" = number ] && [[ $v =~ ^[0-9.e-]+$ ]] && break
		sleep 0.5
	done
	echo "$v"
}
is "$(until_is 'up%7Bjob%3D%22dsec%22%7D' 1)" 1 "Prometheus scrapes dsecd (up is 1)"
is "$(until_is 'dsec_sandboxes%7Bstate%3D%22running%22%7D' 1)" 1 "it sees the sandbox there is"
ids=
for i in 1 2; do ids="$ids $(req create | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')"; done
is "$(until_is 'dsec_sandboxes%7Bstate%3D%22running%22%7D' 3)" 3 "... then the two made since"
for id in $ids; do req destroy id="$id" >/dev/null; done
is "$(until_is 'dsec_sandboxes%7Bstate%3D%22running%22%7D' 1)" 1 "... and two fewer once they are destroyed"
is "$(until_is 'dsec_requests_total%7Bop%3D%22create%22%2Ccode%3D%22ok%22%7D' 3)" 3 "creates counted: 3"
is "$(until_is 'dsec_creates_total%7Bresult%3D%22ok%22%7D' 3)" 3 "dsec_creates_total agrees"
v=$(until_is 'histogram_quantile(0.5%2Csum%20by(le)(rate(dsec_request_duration_seconds_bucket%7Bop%3D%22create%22%7D%5B1m%5D)))' number)
like "$v" '^[0-9.e-]+$' "a quantile of create latency comes out of the histogram ($v s)"

# rlcoord: a sandbox with a trajectory takes a step, the trainer sends it
# again (answered from the log), and a lease is open.
tid=$(req create trajectory?=true | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
req exec id="$tid" 'argv[]=true' 'step#=0' >/dev/null
req exec id="$tid" 'argv[]=true' 'step#=0' >/dev/null
req lease_open timeout%=30 >/dev/null
fetch "http://127.0.0.1:$MPORT/metrics" > "$T/page2"
run promtool check metrics < "$T/page2"
is "$RC:$OUT" "0:" "with rlcoord's families the page passes promtool check metrics"
like "$(cat "$T/page2")" $'\ndsec_trajectory_entries_total\\{result="written"\\} 2\n' \
	"... the log's entries written (the create and the step)"
like "$(cat "$T/page2")" $'\ndsec_trajectory_steps_total\\{answer="replayed"\\} 1\n' \
	"... the step sent again, answered from the log"
like "$(cat "$T/page2")" $'\ndsec_trajectory_syncs_total [1-9]' "... the journal's group commits"
like "$(cat "$T/page2")" $'\ndsec_leases_open 1\n' "... and the open lease"
is "$(until_is 'dsec_trajectory_steps_total%7Banswer%3D%22replayed%22%7D' 1)" 1 \
	"Prometheus sees the step answered from the log"

# A bad or taken address stops the daemon at start.
run "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" --listen "ipc://$T/s2.sock" \
	--backend-dir "$TOP/t" --set backends=test --set metrics_listen="http://127.0.0.1:$MPORT/metrics"
like "$RC $(echo $OUT)" "^1 .*cannot serve metrics on 'http://127.0.0.1:$MPORT/metrics'" \
	"a metrics address in use stops a second daemon, saying so"
