#!/bin/bash
# Warm pools (config key "pool"): sandboxes created ahead and handed over on
# create, refilled, invisible until taken; a request the pool cannot serve
# is created cold; bad pool settings stop the daemon at start.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsec-run
need_cmd helper-req
[ -e "$TOP/backends/container.so" ] || skip_all "needs backends/container.so (make)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip_all "needs overlayfs"

plan 15

pool() { helper-req "$DSEC_HOST" info | grep -o '"pools":\[[^]]*\]'; }
wait_ready() {	# wait_ready N: up to 30 s for the pool to hold N
	local i
	for i in $(seq 300); do
		pool | grep -q "\"ready\":$1," && return 0
		sleep 0.1
	done
	return 1
}

start_dsecd --set backends=container --set pool=container=2 || bail "dsecd did not start"
ok $(wait_ready 2; echo $?) "the pool fills to its target"
like "$(pool)" '"backend":"container","image":"","target":2,"ready":2' "info shows the pool"
run helper-req "$DSEC_HOST" list
is "$OUT" '{"ok":true,"result":{"sandboxes":[],"total":0}}' "pooled sandboxes are not listed"

run helper-req "$DSEC_HOST" create backend=container env.A=1 cwd=/tmp
like "$OUT" '"ok":true' "a create is served"
id=$(echo "$OUT" | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
like "$(pool)" '"taken":1' "... from the pool"
run helper-req "$DSEC_HOST" list
like "$OUT" "\"id\":\"$id\"" "the handed-over sandbox is listed"
run dsec-run --id "$id" --env B=2 -c 'echo $A $B; pwd'
is "$(echo $OUT)" "1 2 /tmp" "its create's env and cwd apply to its commands"
helper-req "$DSEC_HOST" session_open id="$id" session=s env.B=3 >/dev/null
run helper-req "$DSEC_HOST" session_exec id="$id" session=s cmd='echo $A $B; pwd'
like "$OUT" '"stdout":"1 3\\n/tmp\\n"' "and to its shell sessions"
ok $(wait_ready 2; echo $?) "the pool refills"

run helper-req "$DSEC_HOST" create backend=container 'limits.memory#=100000000'
like "$OUT" '"ok":true' "a create with limits is served"
like "$(pool)" '"taken":1' "... cold, not from the pool"
run dsec-run --backend container --deny-syscall mkdir --deny-syscall mkdirat -c 'mkdir /tmp/d 2>&1'
like "$RC:$OUT" "1:.*Operation not permitted" "a create with seccomp_deny is made cold and gets its filter"
like "$(pool)" '"taken":1' "... not from the pool"
cg=$(ls -d /sys/fs/cgroup/*/dsec-container.$DSECD_PID /sys/fs/cgroup/*/*/dsec-container.$DSECD_PID \
	/sys/fs/cgroup/*/*/*/dsec-container.$DSECD_PID 2>/dev/null | head -1)
stop_dsecd
ok $([ -n "$cg" ] && [ ! -d "$cg" ]; echo $?) "shutdown destroys pooled sandboxes too (no cgroup left)"

run timeout 60 "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" --listen "ipc://$T/s2.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=container \
	--set pool=nosuch=2
like "$OUT" "pool entry 'nosuch=2': backend 'nosuch' is not loaded" "a pool of an unloaded backend is refused"
