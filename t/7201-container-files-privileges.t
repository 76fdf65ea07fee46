#!/bin/bash
# The file API of a container sandbox acts with exactly what a command of
# that sandbox has (its uid and gid, no other groups, root's small set of
# capabilities in its user namespace, none without one), never with the
# daemon's: the host's ACPI tables, the PCI config space past what an
# unprivileged reader gets, a directory of /usr closed to the sandbox and
# the host's /etc/ssl/private stay closed; with container.userns=false
# (root inside is the host's root without capabilities) a file the
# sandbox's root cannot read or a directory it cannot write is refused
# with "permission", as for a command; an owner given to write, mkdir or
# upload is one a command could give, and a refused one leaves nothing.
# The sandbox's own files stay readable and writable.  Each case is
# checked against what a command of the same sandbox gets.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd tar

plan 41

hr() { helper-req "$DSEC_HOST" "$@"; }
hro() { local f=$1; shift; helper-req -o "$f" "$DSEC_HOST" "$@"; }
mk() { hr create backend=container | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
# verdict REPLY: ok, denied (permission), not_found, or the reply.
verdict() {
	case $1 in
	*'"ok":true'*) echo ok ;;
	*'"code":"permission"'*) echo denied ;;
	*'"code":"not_found"'*) echo not_found ;;
	*) echo "other: $1" ;;
	esac
}
# cmd SHELL-CODE: ok or denied, as a command of the sandbox $id finds it.
cmd() { dsec-run --id "$id" -c "( $1 ) >/dev/null 2>&1 && echo ok || echo denied" 2>&1; }

mkdir -p "$T/up"
echo up > "$T/up/f"
tar -C "$T/up" -cf "$T/up.tar" f
dsdt=/sys/firmware/acpi/tables/DSDT
pci=$(ls -d /sys/bus/pci/devices/*/config 2>/dev/null | head -1)
# A directory of the host's /usr that only its owner (not root) may list.
closed=$(find /usr -maxdepth 4 -type d ! -perm -o+r ! -user root 2>/dev/null | head -1)

# cases MODE EXP: every operation against a command's verdict; EXP is
# what root inside gets on a file of its own it has no permission bits
# for (ok with a user namespace's CAP_DAC_OVERRIDE, denied without).
cases() {
	local m=$1 exp=$2 c
	id=$(mk)
	[ -n "$id" ] || bail "cannot create a sandbox ($m)"
	dsec-run --id "$id" -c 'mkdir /root/ro && echo x > /root/ro/f && echo x > /root/ro/g &&
		chmod 555 /root/ro && echo s > /root/f0 && chmod 000 /root/f0 &&
		mkdir /root/d0 && echo y > /root/d0/f && chmod 000 /root/d0' >/dev/null 2>&1

	c=$(cmd 'cat /root/f0')
	run hr file_read id="$id" path=/root/f0
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_read of a file root's bits close: as for a command"
	run hro "$T/dl.tar" file_download id="$id" path=/root/f0
	is "$(verdict "$OUT")" "$exp" "$m: file_download of it too"
	c=$(cmd 'echo z > /root/ro/c')
	run hr file_write id="$id" path=/root/ro/new data=z
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_write into a read-only (555) directory"
	c=$(cmd 'mkdir /root/ro/cd')
	run hr file_mkdir id="$id" path=/root/ro/ad
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_mkdir in it"
	c=$(cmd 'rm -f /root/ro/g')
	run hr file_remove id="$id" path=/root/ro/f
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_remove in it"
	run hr file_upload id="$id" path=/root/ro/up data@="$T/up.tar"
	is "$(verdict "$OUT")" "$exp" "$m: file_upload into it"
	c=$(cmd 'ls /root/d0')
	run hr file_list id="$id" path=/root/d0
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_list of a 000 directory"
	c=$(cmd 'stat /root/d0/f')
	run hr file_stat id="$id" path=/root/d0/f
	is "$c:$(verdict "$OUT")" "$exp:$exp" "$m: file_stat through it"

	# Owners: with a user namespace root inside may give any of its ids
	# (CAP_CHOWN there); without one, none but its own.
	c=$(cmd 'touch /root/ch && chown 1234:1234 /root/ch')
	run hr file_write id="$id" path=/root/ow data=x uid#=1234 gid#=1234
	v=$(verdict "$OUT")
	run hr file_stat id="$id" path=/root/ow
	is "$c:$v:$(verdict "$OUT")" "$exp:$exp:$([ "$exp" = ok ] && echo ok || echo not_found)" \
		"$m: file_write giving uid 1234, as chown does (a refused one leaves no file)"
	run hr file_mkdir id="$id" path=/root/od uid#=1234
	v=$(verdict "$OUT")
	run hr file_stat id="$id" path=/root/od
	is "$v:$(verdict "$OUT")" "$exp:$([ "$exp" = ok ] && echo ok || echo not_found)" \
		"$m: file_mkdir giving uid 1234 (a refused one leaves no directory)"
	run hr file_upload id="$id" path=/root/ou data@="$T/up.tar" uid#=1234
	v=$(verdict "$OUT")
	run hr file_stat id="$id" path=/root/ou
	is "$v:$(verdict "$OUT")" "$exp:$([ "$exp" = ok ] && echo ok || echo not_found)" \
		"$m: file_upload giving uid 1234 (a refused one leaves no directory)"
	run hr file_write id="$id" path=/root/dflt data=x
	run hr file_stat id="$id" path=/root/dflt
	like "$OUT" '"uid":0,"gid":0,' "$m: file_write without an owner: the commands' ids"

	# The sandbox's own files stay its own.
	run hr file_write id="$id" path=/tmp/mine data=mine-data mode#=384
	run dsec-run --id "$id" -c 'cat /tmp/mine; echo more >> /tmp/mine'
	v=$OUT
	run hr file_read id="$id" path=/tmp/mine
	like "$v $OUT" '^mine-data .*"data":"mine-datamore\\n"' \
		"$m: what the API writes a command reads and changes, and the API reads it back"

	# The host's files.
	if [ -e "$dsdt" ]; then
		c=$(cmd "cat $dsdt")
		run hr file_read id="$id" path=$dsdt
		is "$c:$(verdict "$OUT" | sed 's/not_found/denied/')" "denied:denied" \
			"$m: the host's ACPI table (root 0400) is closed to commands and the API"
	else
		skip "$m: this host has no $dsdt"
	fi
	if [ -n "$pci" ]; then
		# (cat: wc -c of a file whose size is no multiple of a page
		# trusts st_size, the config space's whole size, and reads
		# nothing: 256 for a PCI device on a guest's q35)
		c=$(dsec-run --id "$id" -c "cat $pci | wc -c" 2>&1)
		run hro "$T/pci" file_read id="$id" path="$pci"
		is "$(wc -c < "$T/pci"):$c" "$c:$c" \
			"$m: the PCI config space: the API reads what a command does ($c bytes, the host's root $(cat "$pci" | wc -c))"
	else
		skip "$m: this host has no PCI devices in /sys"
	fi
	if [ -n "$closed" ]; then
		c=$(cmd "ls $closed")
		run hr file_list id="$id" path="$closed"
		is "$c:$(verdict "$OUT")" "denied:denied" "$m: $closed (closed to others) cannot be listed"
	else
		skip "$m: no directory of /usr here is closed to others"
	fi
	if [ -d /etc/ssl/private ]; then
		run hr file_list id="$id" path=/etc/ssl/private
		v=$OUT
		run hr file_stat id="$id" path=/etc/ssl/private
		like "$v $OUT" '"entries":\[\].*\{"ok":true,.*"mode":320,' \
			"$m: /etc/ssl/private is an empty directory of the sandbox's, not the host's"
	else
		skip "$m: this host has no /etc/ssl/private"
	fi
	hr destroy id="$id" >/dev/null
}

start_dsecd --set backends=container --set container.userns=false || bail "dsecd did not start"
cases "userns off" denied
stop_dsecd

start_dsecd --set backends=container || bail "dsecd did not start"
cases "userns on" ok
id=$(mk)
run dsec-run --id "$id" -c 'ps -eo comm | grep -c container-files'
is "$OUT" "0" "the file server is no process of the sandbox (none to see or signal)"
run hr file_write id="$id" path=/root/x data=x
run pgrep -f "^container-files --uid 0"
ok $([ -n "$OUT" ]; echo $?) "... but the host sees it"
stop_dsecd

# A user other than root: the API writes where that user may, as that user.
start_dsecd --set backends=container --set container.uid=1000 --set container.gid=1000 ||
	bail "dsecd did not start"
id=$(mk)
c=$(cmd 'echo x > /work/c')
run hr file_write id="$id" path=/work/x data=x
is "$c:$(verdict "$OUT")" "denied:denied" "uid 1000: no file_write into root's /work"
run hr file_write id="$id" path=/tmp/x data=x
run2=$(verdict "$OUT")
run hr file_stat id="$id" path=/tmp/x
like "$run2 $OUT" '^ok .*"uid":1000,"gid":1000,' "uid 1000: file_write into /tmp makes a file of uid 1000"
c=$(cmd 'touch /tmp/c && chown 0 /tmp/c')
run hr file_write id="$id" path=/tmp/y data=x uid#=0
is "$c:$(verdict "$OUT")" "denied:denied" "uid 1000: it may not give a file to root"
run hr file_mkdir id="$id" path=/tmp/d gid#=1000
is "$(verdict "$OUT")" "ok" "uid 1000: it may give its own group"
run hr file_read id="$id" path=/tmp/x
like "$OUT" '"data":"x"' "uid 1000: and reads it back"
