#!/bin/bash
# The kill-the-trainer scenario with a real trainer loop
# (examples/resumable_trainer.py) driving 64 container sandboxes: kill -9
# of the trainer mid-rollout, its lease lapses and the 64 are paused; the
# trainer started again takes its lease and its sandboxes back (client
# tokens), re-sends every step, and the steps it had sent are answered
# from the trajectory log: each sandbox's trace shows each step once.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 8

start_dsecd --set backends=fncall,container || bail "dsecd did not start"
trainer() {
	timeout 300 helper-py "$TOP/examples/resumable_trainer.py" -H "$DSEC_HOST" --state "$T/job" -n 64 \
		--steps 12 --lease-timeout 1 "$@"
}
entries() { helper-req "$DSEC_HOST" info | grep -o '"trajectory":{[^}]*' | grep -o '"entries":[0-9]*' | cut -d: -f2; }

# helper-py execs python: $! is the trainer itself.
helper-py "$TOP/examples/resumable_trainer.py" -H "$DSEC_HOST" --state "$T/job" -n 64 \
	--steps 12 --lease-timeout 1 --delay 0.3 > "$T/first.out" 2>&1 &
tp=$!
# Killed once the 64 are made and some of their steps logged (64 creates
# and 3 rounds of steps), well before its 12 rounds end.
for i in $(seq 600); do
	n=$(entries); [ "${n:-0}" -ge 256 ] && break
	kill -0 $tp 2>/dev/null || break
	sleep 0.05
done
kill -KILL $tp 2>/dev/null; wait $tp 2>/dev/null
n=$(entries)
ok $([ "${n:-0}" -ge 256 ] && [ "${n:-0}" -lt $((64 + 64 * 12)) ] && echo 0 || echo 1) \
	"the trainer is killed mid-rollout ($n entries logged of $((64 + 64 * 12)))"
lease=$(sed -n 's/.*"lease": *"\([^"]*\)".*/\1/p' "$T/job")
like "$lease" '^[^:]+:l[0-9a-f]+$' "its checkpoint names its lease ($lease)"
for i in $(seq 100); do
	run helper-req "$DSEC_HOST" lease_info "id=$lease"
	[ "$(get state)" = lapsed ] && [ "$(get paused)" = 64 ] && break
	[ $i = 100 ] && diag "lease_info: $OUT"
	sleep 0.1
done
is "$(get state) $(get paused)" "lapsed 64" "its lease lapses: all 64 sandboxes paused"

run trainer
is "$RC" 0 "the trainer started again completes every rollout"
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
like "$OUT" "took back lease $lease" "... with its lease"
like "$OUT" "all 64 rollouts complete, every step once" "... each trace shows each step once: nothing ran twice"
replayed=$(printf '%s\n' "$OUT" | sed -n 's/.*answered from the log \([0-9]*\).*/\1/p')
ok $([ "${replayed:-0}" -ge 192 ] && echo 0 || echo 1) "... the steps logged before the kill were answered from the log ($replayed)"
run helper-req "$DSEC_HOST" list
is "$(printf '%s' "$OUT" | grep -o '"id"' | wc -l)" 0 "the trainer's lease closed: no sandbox left"
