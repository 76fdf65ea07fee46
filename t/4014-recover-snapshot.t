#!/bin/bash
# recover from a snapshot (rlcoord/recover.c): four gossiping nodes of
# the container backend share an image origin (a directory here; in
# production a distributed file system).  A trainer's sandbox appends a
# line to a file at each step, streams a command, is snapshotted at step
# 5 (the stream's step and end come with the image), takes four more
# steps and a streamed command (read to its end), and its node is killed
# -9.  recover on a peer makes it again of the snapshot's image: the steps up to the snapshot are not run again
# (their lines are in the image) but logged with their old replies, the
# later ones run again (the stream started again and read to its end);
# the file has every line once, and every step the
# trainer sends again is answered from the new log.  A snapshot whose
# image the node cannot find falls back to the create and every step.
# The recovered sandbox's node dies too: recovered again, from its image,
# the steps that came with it logged again and not run.
. "$(dirname "$0")/lib.sh"

WHY=$(container_images_missing)
[ -z "$WHY" ] || skip_all "$WHY"
[ -x "$TOP/dsecd/dsecd" ] || skip_all "needs dsecd/dsecd (make)"
plan 39

P=$(( 21000 + ($$ + 7777) % 20000 ))
head -c 32 /dev/urandom > "$T/key"
mk_small_root "$T/root" sh cat echo wc sleep
mkdir -p "$T/root/data"
run env DSEC_FS3_ORIGIN="$T/origin" dsecctl --store "$T/imp" image import --tag rs:1 "$T/root"
is "$RC" 0 "an image imported into the shared origin"
# NAME PORT UID_BASE: a node of the container backend on the origin.
cnode() {
	start_node "$1" --set backends=container --set default_backend=container \
		--set image_origin="$T/origin" --set container.uid_base="$3" \
		--set gossip_listen="127.0.0.1:$2" --set gossip_seeds="127.0.0.1:$P" \
		--set cluster_key_file="$T/key" --set api_url="ipc://$T/$1.sock" \
		--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s
}
cnode a "$P" 1000000000
cnode b $((P + 1)) 1200000000
cnode c $((P + 2)) 1400000000
cnode d $((P + 3)) 1600000000
# kill9 NAME: a crash of node NAME (reaped quietly).
kill9() {
	local pid
	pid=$(eval echo "\$NODE_PID_$1")
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
}
alive() { echo "\"name\":\"$1\",[^}]*\"state\":\"alive\""; }
all_alive() {
	local n m
	for n in a b c d; do for m in a b c d; do
		[ $n = $m ] || wait_info $n "$(alive $m)" || return 1
	done; done
}
all_alive
ok $? "four nodes know each other alive"

id=$(at a create image=rs:1 trajectory?=true | idof)
owner=${id%%:*}
like "$owner" '^[abcd]$' "a sandbox with a trajectory on node $owner"
step() { # K: append line-K to /data/f at step K
	at "$owner" exec "id=$id" "argv[]=sh" "argv[]=-c" "argv[]=echo line-$1 >> /data/f" "step#=$1"
}
# readall NODE ID EXEC: a started command's stdout, read until done.
readall() {
	local i out all=
	for i in $(seq 50); do
		out=$(at "$1" exec_read "id=$2" "exec=$3" "wait#=5")
		all="$all$(printf '%s' "$out" | sed -n 's/.*"stdout":"\([^"]*\)".*/\1/p')"
		printf '%s' "$out" | grep -q '"done":true' && break
	done
	echo "$all$(printf '%s' "$out" | grep -o '"exit_code":[0-9]*')"
}
# pre: a streamed command at step 30, before the snapshot (its name in $x).
pre=(exec_start "argv[]=sh" "argv[]=-c" "argv[]=echo pre >> /data/s; echo pre-snap; exit 4" "step#=30")
okc=0
for k in 0 1 2 3 4; do step $k | grep -q '"exit_code":0' && okc=$((okc + 1)); done
run at "$owner" "${pre[0]}" "id=$id" "${pre[@]:1}"
x=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
is "$(readall "$owner" "$id" "$x")" 'pre-snap\n"exit_code":4' "a streamed command at step 30, read to its end"
run at "$owner" snapshot "id=$id" tag=rs-snap:1 "step#=5"
snap=$(printf '%s' "$OUT" | sed -n 's/.*"image":"\(sha256:[0-9a-f]*\)".*/\1/p')
like "$snap" '^sha256:' "steps 0-4 appended, a snapshot at step 5 ($snap)"
for k in 6 7 8; do step $k | grep -q '"exit_code":0' && okc=$((okc + 1)); done
at "$owner" file_write "id=$id" path=/data/g data=after "step#=9" | grep -q '"ok":true' &&
	okc=$((okc + 1))
is "$okc" 9 "steps 6-8 appended and a file written at step 9"
run at "$owner" exec_start "id=$id" "argv[]=sh" "argv[]=-c" \
	"argv[]=echo line-s >> /data/f; echo streamed; exit 2" "step#=20"
x=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
is "$(readall "$owner" "$id" "$x")" 'streamed\n"exit_code":2' "a streamed command at step 20, read to its end"
# in: a command reading its stdin at step 21, its input a step of its own, 22.
in=(exec_start "argv[]=sh" "argv[]=-c" 'argv[]=read l; echo "got $l"; echo $l >> /data/i' "stdin_open?=true" "step#=21")
printf 'in-1\n' > "$T/in1"
run at "$owner" "${in[0]}" "id=$id" "${in[@]:1}"
xi=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
at "$owner" exec_write "id=$id" "exec=$xi" "data@=$T/in1" "eof?=true" "step#=22" >/dev/null
is "$(readall "$owner" "$id" "$xi")" 'got in-1\n"exit_code":0' \
	"a command with stdin_open at step 21 given its input at step 22, read to its end"
# slow: a command that reads its stdin a second after its start (step 23),
# given three inputs of 40,000 bytes (24-26) once it reads (a trainer
# retries an input refused busy).  Sent again back to back by recover,
# the third finds the first two unread: busy, and recover retries it.
slow=(exec_start "argv[]=sh" "argv[]=-c" "argv[]=sleep 1; wc -c" "stdin_open?=true" \
	"output_cap#=40000" "step#=23")
head -c 40000 /dev/zero | tr '\0' a > "$T/in40k"
# write_steps NODE ID EXEC [replayed]: how many of the three inputs were
# taken (each retried while busy), or answered from the log with
# "replayed" given.
write_steps() {
	local k eof n good=0
	for k in 24 25 26; do
		eof=false
		[ $k = 26 ] && eof=true
		for n in $(seq 100); do
			out=$(at "$1" exec_write "id=$2" "exec=$3" "data@=$T/in40k" "eof?=$eof" "step#=$k")
			printf '%s' "$out" | grep -q '"code":"busy"' || break
			sleep 0.1
		done
		if [ -n "${4:-}" ]; then
			printf '%s' "$out" | grep -q "\"ok\":true.*\"replayed\":$k" && good=$((good + 1))
		else
			printf '%s' "$out" | grep -q '"ok":true' && good=$((good + 1))
		fi
	done
	echo $good
}
run at "$owner" "${slow[0]}" "id=$id" "${slow[@]:1}"
xs=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
sleep 1.3
is "$(write_steps "$owner" "$id" "$xs")" 3 "a command reading a second after step 23 given three inputs of 40,000 bytes"
is "$(readall "$owner" "$id" "$xs")" '120000\n"exit_code":0' "... which it read whole"

kill9 $owner
# dead_seen DEAD NODES...: until each of NODES sees DEAD dead.
dead_seen() {
	local dead=$1 n
	shift
	for n in "$@"; do
		wait_info "$n" "\"name\":\"$dead\",[^}]*\"state\":\"dead\"" ||
			printf '# %s still sees %s alive\n' "$n" "$dead" >&2
	done
}
# holder ID NODES...: the first of NODES that keeps a copy of ID's log.
holder() {
	local id=$1 n
	shift
	for n in "$@"; do
		at "$n" trajectory "id=$id" "replica?=true" | grep -q '"ok":true' && { echo "$n"; return; }
	done
}
live=$(echo a b c d | tr ' ' '\n' | grep -v "^$owner$")
dead_seen "$owner" $live
p1=$(holder "$id" $live)
run at "$p1" recover "id=$id"
like "$OUT" '"entries":23,"replayed":14,"skipped":\[\],"differs":\[\],"snapshot":"'"$snap"'","restored":8,"imported":8' \
	"recover on $p1: made of the snapshot; steps 0-5 and 30 and its stream's end logged with their replies, 6-9, the stream at 20 and the ones at 21 and 23 with their input run again (23's third input busy, retried)"
nid=$(printf '%s' "$OUT" | idof)
[ -n "$nid" ] || printf "# recover: %s\n" "$OUT" >&2
nn=${nid%%:*}
run at "$nn" exec "id=$nid" "argv[]=cat" "argv[]=/data/f" "argv[]=/data/g"
is "$(printf '%s' "$OUT" | sed -n 's/.*"stdout":"\([^"]*\)".*/\1/p')" \
	'line-0\nline-1\nline-2\nline-3\nline-4\nline-6\nline-7\nline-8\nline-s\nafter' \
	"the new sandbox's files: each step's line once, from the image or run again"
rep=0
for k in 0 1 2 3 4 6 7 8; do step_out=$(at "$nn" exec "id=$nid" "argv[]=sh" "argv[]=-c" \
	"argv[]=echo line-$k >> /data/f" "step#=$k")
	printf '%s' "$step_out" | grep -q "\"exit_code\":0.*\"replayed\":$k" && rep=$((rep + 1))
done
run at "$nn" snapshot "id=$nid" tag=rs-snap:1 "step#=5"
like "$OUT" "\"image\":\"$snap\".*\"replayed\":5" "the snapshot step sent again: the logged reply"
is "$rep" 8 "the trainer sends steps 0-8 again to the new id: each is answered from the log"
run at "$nn" "${pre[0]}" "id=$nid" "${pre[@]:1}"
x=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
like "$OUT" '"replayed":30' "the step of the stream before the snapshot sent again: its stream, from the log"
is "$(readall "$nn" "$nid" "$x")" 'pre-snap\n"exit_code":4' "... read whole from the log (its end imported)"
run at "$nn" exec "id=$nid" "argv[]=cat" "argv[]=/data/s"
like "$OUT" '"stdout":"pre\\n"' "... and it ran once: its line is in the image"
run at "$nn" exec_start "id=$nid" "argv[]=sh" "argv[]=-c" \
	"argv[]=echo line-s >> /data/f; echo streamed; exit 2" "step#=20"
x=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
like "$OUT" '"replayed":20' "the stream's step sent again: the stream recover started, from the log"
is "$(readall "$nn" "$nid" "$x")" 'streamed\n"exit_code":2' "... read whole from the log"
run at "$nn" "${in[0]}" "id=$nid" "${in[@]:1}"
xi=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
like "$OUT" '"replayed":21' "the step of the command with stdin_open sent again: the one recover started"
run at "$nn" exec_write "id=$nid" "exec=$xi" "data@=$T/in1" "eof?=true" "step#=22"
like "$OUT" '"replayed":22' "... its input step sent again: from the log (recover gave it its input)"
is "$(readall "$nn" "$nid" "$xi")" 'got in-1\n"exit_code":0' "... read whole from the log"
run at "$nn" exec "id=$nid" "argv[]=cat" "argv[]=/data/i"
like "$OUT" '"stdout":"in-1\\n"' "... and its input was read once"
run at "$nn" "${slow[0]}" "id=$nid" "${slow[@]:1}"
xs=$(printf '%s' "$OUT" | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
like "$OUT" '"replayed":23' "the slow reader's step sent again: the one recover started"
is "$(write_steps "$nn" "$nid" "$xs" replayed)" 3 "... its three inputs sent again: answered from the log"
is "$(readall "$nn" "$nid" "$xs")" '120000\n"exit_code":0' "... its whole input counted (recover gave it all)"
run at "$nn" exec "id=$nid" "argv[]=wc" "argv[]=-l" "argv[]=/data/f" "step#=10"
like "$OUT" '"stdout":"9 /data/f\\n"' "... nothing ran twice, and its next step runs"
run at "$nn" info
like "$OUT" '"imported":[1-9]' "info counts the imported steps"

# logged_reply is node to node: a client's is refused, and runs nothing.
run at "$nn" exec "id=$nid" "argv[]=sh" "argv[]=-c" "argv[]=echo forged >> /data/f" "step#=11" \
	"logged_reply=x"
like "$OUT" '"code":"invalid".*node to node' "a client's logged_reply: invalid"
run at "$nn" exec "id=$nid" "argv[]=sh" "argv[]=-c" "argv[]=echo forged >> /data/f" "step#=11" \
	"fwd=$nn" "logged_reply~=64"
like "$OUT" '"code":"invalid".*no reply a log keeps' "... and bytes that are no logged reply, even forwarded: invalid"
run at "$nn" exec_read "id=$nid" exec=x1 "stream_step#=1" "logged_reply=x"
like "$OUT" '"code":"invalid".*node to node' "a client's stream end (exec_read with logged_reply): invalid"
run at "$nn" exec_read "id=$nid" exec=x1 "stream_step#=1" "fwd=$nn" "logged_reply~=64"
like "$OUT" '"code":"invalid".*no stream.s end' "... and bytes that are no stream's end, even forwarded: invalid"
run at "$nn" exec "id=$nid" "argv[]=cat" "argv[]=/data/f"
ok $(printf '%s' "$OUT" | grep -q forged; [ $? = 1 ]; echo $?) "... and their commands did not run"

# dsec-run replay of the recovered sandbox's log: from its create's image
# (not the snapshot's), every entry sent again, imported ones too.
dsec-run -H "ipc://$T/$nn.sock" trajectory "$nid" > "$T/nid.traj"
run dsec-run -H "ipc://$T/$nn.sock" replay "$T/nid.traj"
is "$RC" 0 "dsec-run replay of the recovered log: every result the same ($(tail -1 <<<"$OUT"))"

# A snapshot whose image cannot be found: from the create and every step.
# Made on a live node X other than nn, recovered on the last one, Y, which
# keeps a copy of nid's log too (nid's entries went to X and Y).
others=$(echo $live | tr ' ' '\n' | grep -v "^$nn$")
Y=$(holder "$nid" $others)
X=$(echo $others | tr ' ' '\n' | grep -v "^$Y$")
id2=$(at "$X" create image=rs:1 trajectory?=true "fwd=$X" | idof)
at "$X" exec "id=$id2" "argv[]=sh" "argv[]=-c" "argv[]=echo one >> /data/h" "step#=0" >/dev/null
run at "$X" snapshot "id=$id2" tag=rs-gone:1 "step#=1"
snap2=$(printf '%s' "$OUT" | sed -n 's/.*"image":"sha256:\([0-9a-f]*\)".*/\1/p')
at "$X" exec "id=$id2" "argv[]=sh" "argv[]=-c" "argv[]=echo two >> /data/h" "step#=2" >/dev/null
# The image's manifest gone from the origin (and never in a peer's cache).
find "$T/origin" -name "*$snap2*" -exec rm -rf {} + 2>/dev/null
kill9 $X
dead_seen "$X" "$Y" "$nn"
run at "$Y" recover "id=$id2"
like "$OUT" '"replayed":2,"skipped":\[\{"seq":2,"op":"snapshot"\}\],"differs":\[\],"snapshot":null,"restored":0,"imported":0,"snapshot_missed":' \
	"a snapshot image that cannot be found: made from the create, every step sent again, why said"
nid2=$(printf '%s' "$OUT" | idof)
run at "${nid2%%:*}" exec "id=$nid2" "argv[]=cat" "argv[]=/data/h"
like "$OUT" '"stdout":"one\\ntwo\\n"' "... and its file is whole"

# The recovered sandbox's node dies too: Y, which keeps a copy of its log,
# makes it again of its image (the snapshot), its first six steps logged,
# not run.
stdout_of() { printf '%s' "$1" | sed -n 's/.*"stdout":"\([^"]*\)".*/\1/p'; }
run at "$nn" exec "id=$nid" "argv[]=cat" "argv[]=/data/f"
before=$(stdout_of "$OUT")
kill9 $nn
dead_seen "$nn" "$Y"
run at "$Y" recover "id=$nid"
like "$OUT" '"replayed":20,"skipped":\[\],"differs":\[\],"snapshot":"'"$snap"'","restored":8,"imported":8' \
	"recovered again: of the snapshot (its step logged again), steps 0-5 logged again, the rest run again"
nid3=$(printf '%s' "$OUT" | idof)
run at "$Y" exec "id=$nid3" "argv[]=cat" "argv[]=/data/f"
is "$(stdout_of "$OUT")" "$before" "... its file as it was, each line once"
rep=0
for k in 0 1 2 3 4 6 7 8; do
	at "$Y" exec "id=$nid3" "argv[]=sh" "argv[]=-c" "argv[]=echo line-$k >> /data/f" "step#=$k" |
		grep -q "\"exit_code\":0.*\"replayed\":$k" && rep=$((rep + 1))
done
is "$rep" 8 "... and steps 0-8 sent again are answered from its log"
