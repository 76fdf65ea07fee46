# shellcheck shell=sh
# fetch.sh - sourced by deps/*/build.sh: fetch_sources CACHE MIRROR SOURCES VAR
# fetches each file SOURCES lists ("SHA256  FILE" lines, sha256sum -c input;
# blank and '#' lines skipped) from MIRROR into CACHE, once (a cached file
# with the right sum is kept), and checks it against its pinned SHA-256, so
# a changed or truncated download never builds.  VAR names the variable
# that sets MIRROR, for the error message.
fetch_sources() {
	# POSIX sh: no locals; the caller's names are left alone.
	_fcache=$1 _fmirror=$2 _fsources=$3 _fvar=$4
	mkdir -p "$_fcache"
	while read -r _fsum _ffile; do
		case $_fsum in ''|'#'*) continue ;; esac
		if [ -f "$_fcache/$_ffile" ] && echo "$_fsum  $_fcache/$_ffile" | sha256sum -c --status; then
			continue
		fi
		echo "fetching $_fmirror/$_ffile"
		rm -f "$_fcache/$_ffile.part"
		wget -q -O "$_fcache/$_ffile.part" "$_fmirror/$_ffile" || {
			echo "cannot fetch $_fmirror/$_ffile (set $_fvar to a Debian mirror's pool directory of it)" >&2
			rm -f "$_fcache/$_ffile.part"
			exit 1
		}
		if ! echo "$_fsum  $_fcache/$_ffile.part" | sha256sum -c --status; then
			echo "$_ffile from $_fmirror does not match its pinned SHA-256 $_fsum" >&2
			rm -f "$_fcache/$_ffile.part"
			exit 1
		fi
		mv "$_fcache/$_ffile.part" "$_fcache/$_ffile"
	done < "$_fsources"
}
