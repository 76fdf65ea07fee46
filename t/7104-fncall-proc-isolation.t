#!/bin/bash
# What a fncall call learns of the node and of other tenants through
# /proc: as in a container (t/7203), every entry that tells of the host's
# or other sandboxes' activity is masked -- the kernel command line,
# pressure, disk and interrupt counters, locks, memory zones, ... read as
# empty or cannot be opened -- and meminfo, loadavg and stat are made up:
# the call's memory limit (the runtime's fncall.memory or the request's
# limits.memory), no load, the node's CPUs with no time spent.  In both
# runtimes (sh, python3), in a sandbox's exec and in a one-shot call; one
# unit per runtime, so a call with a limit of its own and the next one
# without run in the same unit and each sees its own.
. "$(dirname "$0")/lib.sh"

need_fncall

plan 18

start_dsecd --set backends=fncall --set fncall.zygotes=1 --set fncall.pool_size=1 \
	--set fncall.memory=200M || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }

# The container's list (be_procmask.c); a name the kernel lacks counts as
# masked.
MASKED='kcore kpagecgroup kpageflags kpagecount sysrq-trigger timer_list sched_debug keys
key-users latency_stats acpi scsi cmdline pressure diskstats partitions vmstat schedstat
interrupts softirqs buddyinfo zoneinfo pagetypeinfo slabinfo vmallocinfo locks swaps cgroups
mdstat'
# Each probe prints: "leaks:" and the masked entries that showed anything,
# /proc/loadavg, MemTotal, /proc/stat's cpu line, the CPUs the runtime counts,
# the inode of /proc/meminfo (its unit's file).
SH_PROBE='leaks=
for f in '$(echo $MASKED)'; do
	p=/proc/$f
	if [ -d "$p" ]; then n=$(ls -A "$p" 2>/dev/null | wc -l); else n=$(cat "$p" 2>/dev/null | wc -c); fi
	[ "$n" = 0 ] || leaks="$leaks $f"
done
echo "leaks:$leaks"
cat /proc/loadavg
grep MemTotal /proc/meminfo | tr -s " "
grep "^cpu " /proc/stat
grep -c "^cpu[0-9]" /proc/stat
stat -c %i /proc/meminfo'
PY_PROBE='import os
leaks = []
for f in "'$(echo $MASKED)'".split():
    p = "/proc/" + f
    try:
        n = len(os.listdir(p)) if os.path.isdir(p) else len(open(p, "rb").read())
    except OSError:
        n = 0
    if n:
        leaks.append(f)
print("leaks:" + "".join(" " + f for f in leaks))
print(open("/proc/loadavg").read(), end="")
print(" ".join([l for l in open("/proc/meminfo") if l.startswith("MemTotal")][0].split()))
print([l for l in open("/proc/stat") if l.startswith("cpu ")][0], end="")
print(os.cpu_count())
print(os.stat("/proc/meminfo").st_ino)'

host_cmdline=$(wc -c < /proc/cmdline)
host_cpus=$(grep -c "^cpu[0-9]" /proc/stat)
# check WHAT KB: the probe's output in $OUT, for a memory limit of KB kB.
check() {
	local what=$1 kb=$2
	is "$(printf '%s\n' "$OUT" | sed -n 1p)" "leaks:" \
		"$what: every masked entry reads empty or cannot be opened (the host's cmdline has $host_cmdline bytes)"
	is "$(printf '%s\n' "$OUT" | sed -n 2p)" "0.00 0.00 0.00 1/1 1" "$what: /proc/loadavg says no load"
	is "$(printf '%s\n' "$OUT" | sed -n 3,5p | tr '\n' '|')" \
		"MemTotal: $kb kB|cpu  0 0 0 0 0 0 0 0 0 0|$host_cpus|" \
		"$what: /proc/meminfo has the call's memory limit, /proc/stat the node's $host_cpus CPUs and no time"
}
# memtotal: the MemTotal line and the inode of the probe's output in $OUT.
memtotal() { printf '%s\n' "$OUT" | sed -n '3p;6p' | tr '\n' ' '; }
# probe RT: the probe of runtime RT as a code snippet.
probe() { if [ "$1" = sh ]; then printf '%s' "$SH_PROBE"; else printf '%s' "$PY_PROBE"; fi; }

for rt in sh python3; do
	id=$(req create backend=fncall runtime=$rt 'limits.memory#=104857600' |
		sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || bail "cannot create a $rt sandbox"
	run dsec-run --id "$id" -c "$(probe $rt)"
	check "$rt, a sandbox's exec" 102400
	req destroy id="$id" >/dev/null
	run dsec-run --runtime $rt -c "$(probe $rt)"
	check "$rt, a one-shot call" 204800
	run req call backend=fncall runtime=$rt 'limits.memory#=157286400' code="$(probe $rt)"
	OUT=$(get stdout)
	m=$(memtotal)
	like "$m" "^MemTotal: 153600 kB [0-9]+ $" "$rt: a call with limits.memory of 150M sees 150M"
	# The next calls go to the unit ready longest: within three, to the
	# one that ran the 150M call (the same meminfo file).
	got= same=no
	for i in 1 2 3; do
		run dsec-run --runtime $rt -c "$(probe $rt)"
		got="$got$(memtotal | cut -d' ' -f1-3)|"
		[ "$(memtotal | cut -d' ' -f4)" = "$(echo "$m" | cut -d" " -f4)" ] && same=yes
	done
	is "$got $same" "MemTotal: 204800 kB|MemTotal: 204800 kB|MemTotal: 204800 kB| yes" \
		"$rt: the next calls without a limit see the runtime's 200M, also in the unit of the 150M call"
done

# What a call may do about it: free(1) and ps(1) work, the masks stay, and
# the made-up files of the other units are not the call's to read.
run dsec-run --runtime sh -c 'free -m | awk "/^Mem/ {print \$2}"; ps -e >/dev/null && echo ps-works
umount /proc/meminfo 2>/dev/null || echo kept; ls /.dsec/proc >/dev/null 2>&1 || echo hidden'
is "$(echo $OUT)" "200 ps-works kept hidden" \
	"free(1) sees 200 MiB, ps(1) works, the masks stay, the other units' files are hidden"
is "$(grep -c "fncall-zygote" "$T/dsecd.log")" 0 "no zygote complained"
