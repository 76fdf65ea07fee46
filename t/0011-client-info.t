#!/bin/bash
# libdsec's info structs carry what info and list reply: a C program
# (t/helper-info) beside the daemon's own reply (helper-req), field by
# field, on a node with a warm pool, a paused sandbox, labels, a
# trajectory log and a misbehaving command.
. "$(dirname "$0")/lib.sh"

need_cmd helper-info
need_cmd helper-req
[ -x /usr/bin/python3 ] || skip_all "needs /usr/bin/python3 to compare the JSON"
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 12

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set pool=test=2 --set max_sandboxes=77 ||
	{ echo "Bail out! dsecd did not start"; exit 1; }

run helper-req "$DSEC_HOST" create labels.job=j1 labels.step=7 trajectory?=true
ID=$(get id)
run helper-req "$DSEC_HOST" exec id="$ID" argv[]=true step#=1
run helper-req "$DSEC_HOST" exec id="$ID" argv[]=sleep argv[]=5 timeout%=0.2 step#=2
run helper-req "$DSEC_HOST" create
P=$(get id)
run helper-req "$DSEC_HOST" pause id="$P"
is "$RC" 0 "a second sandbox is paused"
# The pool refills once no create came for a moment.
for _ in $(seq 50); do
	run helper-req "$DSEC_HOST" info
	[[ $OUT == *'"ready":2'* ]] && break
	sleep 0.1
done

# compare WHAT C_JSON DAEMON_JSON [DAEMON_JSON_BEFORE]: every field of the
# C side checked against the daemon's reply; prints what differs.  What
# moves on its own (the load average, the room the machine's tasks and
# memory cgroups leave: those of earlier sandboxes go after them) is
# checked against the replies before and after the C call.
compare() {
	/usr/bin/python3 - "$1" "$2" "$3" "${4:-$3}" <<'PY'
import json, sys
what, c, d = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])["result"]
b = json.loads(sys.argv[4])["result"]
bad = []
def eq(name, got, want):
    if isinstance(want, float) or isinstance(got, float):
        # helper-req prints 6 significant digits
        ok = abs(float(got) - float(want)) <= 1e-5 * max(1.0, abs(float(want)))
    else:
        ok = got == want
    if not ok:
        bad.append("%s: C %r, daemon %r" % (name, got, want))
if what == "node":
    for k in ["version", "node", "proto", "pid", "sandboxes", "paused", "max_sandboxes",
              "draining"]:
        eq(k, c[k], d[k])
    cr = d["creates"]
    eq("creates.ok", c["creates_ok"], cr["ok"])
    eq("creates.failed", c["creates_failed"], cr["failed"])
    eq("creates.p50_ms", c["creates_p50_ms"], cr["p50_ms"])
    eq("memory.total", c["mem_total"], d["memory"]["total"])
    def between(name, got, x, y, tol):
        if not (min(x, y) - tol <= got <= max(x, y) + tol):
            bad.append("%s: C %r, daemon %r before and %r after" % (name, got, x, y))
    between("load[0]", c["load1"], b["load"][0], d["load"][0], 1e-5 * max(1.0, d["load"][0]))
    for k in ["nofile", "nofile_hard", "pid_max", "memory_cgroups_max", "room_by"]:
        eq("limits." + k, c[k], d["limits"][k])
    # the machine's tasks, its memory cgroups and the daemon's descriptors
    # move between the calls
    between("limits.room", c["room"], b["limits"]["room"], d["limits"]["room"], 16)
    eq("listen", c["listen"], d["listen"])
    def rows(v, keys):
        return [tuple(e[k] for k in keys) for e in v]
    bk = ["name", "sandboxes", "paused", "pool_target"]
    eq("backends", rows(c["backends"], bk), rows(d["backends"], bk))
    pk = ["backend", "image", "target", "ready", "taken"]
    eq("pools", rows(c["pools"], pk), rows(d["pools"], pk))
    eq("images.present", c["images"]["present"], d.get("images") is not None)
    eq("cluster.membership", c["cluster"]["membership"], d["cluster"]["membership"])
    eq("cluster.placement", c["cluster"]["placement"], d["cluster"]["placement"]["policy"])
    eq("cluster.placed_here", c["cluster"]["placed_here"], d["cluster"]["placement"]["here"])
    eq("cluster.members", c["cluster"]["nmembers"], len(d["cluster"]["members"]))
    eq("cluster.has_gossip", c["cluster"]["has_gossip"], "gossip" in d["cluster"])
    eq("trajectory.present", c["trajectory"]["present"], "trajectory" in d)
    eq("trajectory.durability", c["trajectory"]["durability"], d["trajectory"]["durability"])
    eq("trajectory.entries", c["trajectory"]["entries"], d["trajectory"]["entries"])
    eq("leases.open", c["trajectory"]["leases_open"], d["leases"]["open"])
else:
    for side in ["info", "list"]:
        s = c[side]
        for k in ["id", "backend", "runtime", "image", "state", "created", "ttl", "idle_ttl",
                  "execs", "running", "streams"]:
            eq(side + "." + k, s[k], d[k])
        want = sorted("%s=%s" % kv for kv in d["labels"].items())
        eq(side + ".labels", sorted(s["labels"]), want)
        m = d["misbehaviour"]
        for k in ["oom_kills", "pids_limited", "output_floods", "timeouts"]:
            eq(side + ".marks." + k, s["marks"][k], m[k])
        eq(side + ".marks.has_egress", s["marks"]["has_egress"], "egress_denied" in m)
        eq(side + ".marks.protected_probes", s["marks"]["protected_probes"],
           min(m.get("protected_probes", 0), 65535))
        t = d.get("trajectory")
        eq(side + ".trajectory.present", s["trajectory"]["present"], t is not None)
        if t:
            for k in ["entries", "steps", "last_step", "bytes", "writable"]:
                eq(side + ".trajectory." + k, s["trajectory"][k], t[k])
    eq("nsessions", c["info"]["nsessions"], len(d["sessions"]))
for e in bad:
    print("# " + e, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

run helper-req "$DSEC_HOST" info
before=$OUT
cjson=$(helper-info "$DSEC_HOST")
is "$?" 0 "dsec_info succeeds"
run helper-req "$DSEC_HOST" info
compare node "$cjson" "$OUT" "$before"
ok $? "dsec_info: every field as info replies it (limits, pools, cluster, trajectory, ...)"
like "$cjson" '"paused": 1.*"max_sandboxes": 77' \
	"... the paused sandbox and max_sandboxes are there"
like "$cjson" '"pools": \[\{"backend": "test", "image": "", "target": 2, "ready": 2' \
	"... and the warm pool, full"

cjson=$(helper-info "$DSEC_HOST" "$ID")
is "$?" 0 "dsec_sandbox_info and dsec_list succeed"
run helper-req "$DSEC_HOST" info id="$ID"
compare sandbox "$cjson" "$OUT"
ok $? "dsec_sandbox_info and dsec_list: every field as info replies it (labels, marks, ...)"
want='"labels": \["(job=j1","step=7|step=7","job=j1)"\].*"timeouts": 1'
like "$cjson" "$want"'.*"steps": 2, "last_step": 2' \
	"... its labels, the timed-out command and the two logged steps are there"

# Pages: 6 sandboxes more, 4 of them labelled.
for i in 1 2 3 4 5 6; do
	if [ "$i" -le 4 ]; then
		run helper-req "$DSEC_HOST" create labels.sweep=s1
	else
		run helper-req "$DSEC_HOST" create
	fi
done
run helper-req "$DSEC_HOST" list
all=$(printf '%s' "$OUT" | grep -o '"id":"[^"]*"' | cut -d'"' -f4 | sort | tr '\n' ' ')
run helper-info "$DSEC_HOST" --page 3
got=$(printf '%s\n' "$OUT" | grep -v '^total' | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
is "$got" "$all" "dsec_list_page: pages of 3 give every sandbox once"
is "$(printf '%s\n' "$OUT" | grep -vc '^total'):$(printf '%s\n' "$OUT" | tail -1)" "3:total 8" \
	"... in 3 pages (8 sandboxes), each with the total"
run helper-info "$DSEC_HOST" --page 3 sweep=s1
is "$(printf '%s\n' "$OUT" | awk '!/^total/ {print NF}' | tr '\n' ' ')" "3 1 " \
	"... with labels: the 4 that have them, in pages of 3 and 1"
run helper-info "$DSEC_HOST" --page 0 sweep=s1 job=j1
is "$OUT" $'\ntotal 0' "... labels no sandbox has all of: an empty page, total 0"

stop_dsecd
