#!/bin/bash
# What a container sandbox's processes learn and reach through /proc.
# A command of one shell session cannot see, and so cannot write the
# memory of (/proc/PID/mem: no Yama here), a process of another session or
# of the sandbox's other commands: each session has a pid namespace and a
# /proc of its own.  And what tells of the host's and other sandboxes'
# activity is masked or made up per sandbox: the kernel command line,
# pressure, disk and interrupt counters, load (zero), memory (the
# sandbox's limit), CPU times (zero) -- in sessions too, and without a user
# namespace too.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd python3

plan 20

start_dsecd --set backends=container --set container.memory=200M || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
id=$(req create backend=container | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
[ -n "$id" ] || bail "cannot create a sandbox"
sx() { local s=$1 c=$2; run req session_exec id="$id" session="$s" cmd="$c"; }
out() { get stdout; }

# The victim: a background process of session b with a marker in memory.
req session_open id="$id" session=a >/dev/null
req session_open id="$id" session=b >/dev/null
sx b 'python3 -c "import time; m = b\"MARK-7203-\" * 4; time.sleep(60)" &'
sleep 0.5
# The attacker: every process its /proc shows whose memory has the marker
# and which it could open for writing (ptrace's attach check: it could
# write there; it does not, so each attack below finds what it may).
ATTACK='python3 -c "
import os, re
hit = []
for p in os.listdir(\"/proc\"):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        maps = open(\"/proc/%s/maps\" % p).read().splitlines()
        mem = open(\"/proc/%s/mem\" % p, \"r+b\", buffering=0)
    except OSError:
        continue
    for l in maps:
        a, b = (int(x, 16) for x in l.split()[0].split(\"-\"))
        if \"rw\" not in l.split()[1]:
            continue
        try:
            mem.seek(a); d = mem.read(b - a)
        except OSError:
            continue
        i = d.find(b\"MARK-7203-\" * 4)
        if i >= 0:
            hit.append(p)
            break
print(\"reached\", *hit) if hit else print(\"none\")
"'
sx a "$ATTACK"
is "$(out)" "none" "session a cannot find (nor write) session b's memory through /proc/PID/mem"
run dsec-run --id "$id" -c "$ATTACK"
is "$OUT" "none" "nor can a command outside the sessions"
sx b "$ATTACK"
like "$(out)" "^reached" "within session b the process is there (the attack itself works)"
sx a 'ps -eo pid,comm --no-headers | wc -l; echo $$'
is "$(echo $(out))" "3 1" "session a's ps shows its shell (pid 1 of its own namespace) and its own command only"
sx b 'ps -eo comm | grep -c python3'
is "$(out)" "1" "a session's background process lives on between its commands"

# What only the host's root may open (the kernel's memory and its maps,
# slabs, timers, sysrq): each is closed to the sandbox or masked (an empty
# file, /dev/null for sysrq-trigger); no byte of the kernel's comes out,
# with a user namespace (root inside is not the host's: they stay closed,
# unmasked) and without one (root is: they are masked).
ROOTONLY='python3 -c "
import os, stat
bad = []
for n in (\"kcore\", \"kpageflags\", \"kpagecount\", \"kpagecgroup\", \"slabinfo\",
          \"timer_list\", \"vmallocinfo\", \"pagetypeinfo\", \"sysrq-trigger\"):
    p = \"/proc/\" + n
    if not os.path.exists(p):
        continue
    try:
        st = os.stat(p)
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3:
            continue
        fd = os.open(p, os.O_RDWR if n == \"sysrq-trigger\" else os.O_RDONLY)
    except OSError:
        continue
    if n == \"sysrq-trigger\" or os.read(fd, 4096):
        bad.append(n)
print(\"open:\", *bad) if bad else print(\"closed\")
"'
run dsec-run --id "$id" -c "$ROOTONLY"
is "$OUT" "closed" "with a user namespace the host root's /proc entries stay closed"

# Masked and virtual /proc, in a command, a session, and without userns.
PROBE='wc -c < /proc/cmdline; cat /proc/diskstats /proc/partitions /proc/vmstat /proc/schedstat /proc/interrupts /proc/softirqs /proc/locks 2>/dev/null | wc -c; ls /proc/pressure 2>/dev/null | wc -l; cat /proc/loadavg; grep MemTotal /proc/meminfo | tr -s " "; grep "^cpu " /proc/stat'
host_cmdline=$(wc -c < /proc/cmdline)
check() {
	local what=$1 mem=$2
	local l
	l=$(printf '%s\n' "$OUT" | sed -n 1p)
	is "$l" "0" "$what: /proc/cmdline is empty (the host's has $host_cmdline bytes)"
	l=$(printf '%s\n' "$OUT" | sed -n 2,3p | tr '\n' ' ')
	is "$l" "0 0 " "$what: diskstats, partitions, vmstat, schedstat, interrupts, softirqs, locks and pressure are empty"
	l=$(printf '%s\n' "$OUT" | sed -n 4p)
	is "$l" "0.00 0.00 0.00 1/1 1" "$what: /proc/loadavg says no load"
	l=$(printf '%s\n' "$OUT" | sed -n 5,6p | tr '\n' '|')
	is "$l" "MemTotal: $mem kB|cpu  0 0 0 0 0 0 0 0 0 0|" \
		"$what: /proc/meminfo has the sandbox's memory limit, /proc/stat no CPU time"
}
run dsec-run --id "$id" -c "$PROBE"
check "a command" 204800
sx a "$PROBE"
OUT=$(out)
check "a session" 204800
run dsec-run --id "$id" -c 'free -m | awk "/^Mem/ {print \$2}"; ps -e >/dev/null && echo ps-works; umount /proc/meminfo 2>/dev/null || echo kept'
is "$(echo $OUT)" "200 ps-works kept" "free(1) sees 200 MiB, ps still works, the masks stay"
req destroy id="$id" >/dev/null
stop_dsecd

start_dsecd --set backends=container --set container.userns=false || bail "dsecd did not start"
run dsec-run --backend container -c "$PROBE"
check "userns off" 524288
run dsec-run --backend container -c "$ROOTONLY"
is "$OUT" "closed" "without one (root is the host's) they are masked"
