# bench-lib.sh - sourced by the bench scripts: bench_dsecd NAME [ARGS...]
# starts a private dsecd (state in a temporary folder S, fncall by default,
# ARGS added), exports DSEC_HOST, waits until it serves, and stops it and
# removes S at exit.  TOP must be set.
bench_dsecd() {
	local name=$1
	shift
	S=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
	export DSEC_HOST="ipc://$S/dsecd.sock"
	"$TOP/dsecd/dsecd" --foreground --state-dir "$S/state" --listen "$DSEC_HOST" \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --log-level warn \
		"$@" 2>"$S/log" &
	PID=$!
	trap 'kill -TERM $PID 2>/dev/null; wait $PID; rm -rf "$S"' EXIT
	for _ in $(seq 100); do
		"$TOP/tools/dsec-run" --client-timeout 0.5 -- true >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
