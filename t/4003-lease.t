#!/bin/bash
# Leases (rlcoord/lease.c): a lease not renewed lapses and pauses its
# sandboxes, whose TTLs stop; a renew brings them back on first use; the
# lease's ops pause, resume and close all its sandboxes in one call; a
# lease left to run out destroys its sandboxes at its grace's end; bad
# leases are refused with stable codes.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 18

start_dsecd --set backends=fncall,container || bail "dsecd did not start"
run timeout 120 helper-py "$TOP/t/helper-rl.py" lease "$DSEC_HOST" container
is "$(get state0) $(get n)" "active 2" "a lease with two sandboxes is active ($OUT)"
is "$(get traj)" true "... its sandboxes keep a trajectory by default"
is "$(get state1)" lapsed "not renewed for its timeout, it lapses"
is "$(get paused1)" 2 "... and both its sandboxes are paused"
is "$(get sbstate)" paused "... as the sandbox's info says"
is "$(get alive_past_ttl)" 2 "paused past their ttl of 3 s, they are kept: a paused sandbox's TTL stops"
is "$(get back)" back "renewed, a sandbox runs again on its first use"
is "$(get sbstate2)" running "... resumed"
is "$(get pause) $(get paused2)" "2 2" "lease_pause pauses both in one call"
is "$(get resume) $(get paused3)" "2 0" "lease_resume resumes both"
is "$(get closed) $(get left)" "2 0" "lease_close destroys them"
is "$(get gone)" not_found "... and the lease is gone"
is "$(get lapsed_n) $(get expired_n)" "1 0" "a lease left to run out: its sandbox stays through the grace, then goes"
is "$(get lapses) $(get expired)" "2 1" "info counts lapses and expiries"
is "$(get bad_timeout) $(get bad_grace)" "invalid invalid" "a timeout of 0 or a grace over max_ttl is refused"
is "$(get unknown)" not_found "a create in a lease this node does not have: not_found"
is "$(get foreign)" invalid "... in another node's lease: invalid, naming the node"
like "$(dsecd_log)" "lease .* lapsed \(not renewed for 1.0 s\): pausing its 2 sandboxes" "the log says why they were paused"
