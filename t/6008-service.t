#!/bin/bash
# make install DESTDIR=...: dsecd.service in SYSTEMDUNITDIR, with the paths
# it was built for, that systemd-analyze verify accepts (no unknown key,
# its commands and man pages there); dsecd --check-config, its
# ExecStartPre, passes on a good configuration and stops on a bad one; the
# Python package in PYTHONDIR imports from there; make uninstall takes
# them away.
. "$(dirname "$0")/lib.sh"

need_cmd make
[ -e "$TOP/build/dsecd.service" ] || skip_all "needs build/dsecd.service (make)"

plan 9

tree_make() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$TOP" -o all \
		PREFIX=/usr/local DESTDIR="$T/dest" "$@"
}
run tree_make install
is "$RC" 0 "make install"
unit="$T/dest/usr/local/lib/systemd/system/dsecd.service"
ok $([ -f "$unit" ]; echo $?) "dsecd.service is installed in SYSTEMDUNITDIR"
like "$(grep '^ExecStart' "$unit" | tr '\n' ' ')" \
	'^ExecStartPre=/usr/local/sbin/dsecd --check-config ExecStart=/usr/local/sbin/dsecd --foreground $' \
	"... running the installed dsecd, its configuration checked first"
if command -v systemd-analyze >/dev/null; then
	# The unit as it would be on the machine: its paths under DESTDIR.
	mkdir -p "$T/verify"
	sed "s|/usr/local/sbin/dsecd|$T/dest/usr/local/sbin/dsecd|" "$unit" > "$T/verify/dsecd.service"
	run env MANPATH="$T/dest/usr/local/share/man" systemd-analyze verify "$T/verify/dsecd.service"
	is "$RC:$OUT" "0:" "systemd-analyze verify accepts it, saying nothing"
else
	skip "needs systemd-analyze"
fi
run "$T/dest/usr/local/sbin/dsecd" --check-config --config /dev/null --state-dir "$T/s"
is "$RC" 0 "dsecd --check-config passes on a good configuration"
printf 'no_such_key = 1\n' > "$T/bad.conf"
run "$T/dest/usr/local/sbin/dsecd" --check-config --config "$T/bad.conf"
like "$RC $OUT" "^[1-9].*no_such_key" "... and stops on a bad one, naming the key"
py="$T/dest/usr/local/lib/python3/dist-packages"
run env PYTHONPATH="$py" DSEC_LIBDSEC="$T/dest/usr/local/lib/libdsec.so.1" helper-py -c \
	'import dsec; print(dsec.__file__)'
is "$RC $OUT" "0 $py/dsec/__init__.py" "the Python package imports from PYTHONDIR"
run tree_make uninstall
is "$RC" 0 "make uninstall"
ok $([ ! -e "$unit" ] && [ ! -e "$py/dsec" ]; echo $?) "... removes the unit and the Python package"
