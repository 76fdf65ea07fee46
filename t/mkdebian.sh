#!/bin/bash
# t/mkdebian.sh - a minimal Debian 12 (bookworm) root with python3 for the
# tests, built once with debootstrap and cached between runs.
#
#   t/mkdebian.sh root DIR       extract the cached root into DIR (new)
#   t/mkdebian.sh docker DIR OUT write OUT, a `docker save` tarball of the
#                                root in DIR: one layer tar, its config
#                                json and manifest.json
#
# The cache is $DSEC_TEST_CACHE/debian-bookworm.tar.zst (default
# /var/cache/dsec-test), made by `debootstrap --variant=minbase
# --include=python3-minimal bookworm` from the Debian mirror apt is
# configured with (the first bookworm entry of /etc/apt/sources.list or
# sources.list.d), and rebuilt only when absent.  A lock serialises
# concurrent callers.  Exit status: 0 done, 77 the mirror is unreachable
# (the caller skips), anything else a failure.  Needs root.
set -eu

CACHE=${DSEC_TEST_CACHE:-/var/cache/dsec-test}
TARBALL=$CACHE/debian-bookworm.tar.zst

die() { echo "mkdebian: $*" >&2; exit 1; }

# The mirror apt uses for bookworm (deb822 .sources or one-line lists).
mirror() {
	local f url
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		url=$(awk 'BEGIN { RS = ""; FS = "\n" }
			/Suites:[^\n]*bookworm( |$|\n)/ && !/Suites:[^\n]*bookworm-security/ {
				for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) {
					sub(/^URIs:[ \t]*/, "", $i); split($i, u, " "); print u[1]; exit
				}
			}' "$f")
		[ -n "$url" ] && { echo "$url"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		url=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {
				if ($(i + 1) == "bookworm") { print $i; exit } break } }' "$f")
		[ -n "$url" ] && { echo "$url"; return; }
	done
	echo http://deb.debian.org/debian
}

build_cache() {
	local url tmp
	url=$(mirror)
	if ! wget -q -T 15 -t 2 -O /dev/null "$url/dists/bookworm/Release"; then
		echo "mkdebian: the Debian mirror '$url' is unreachable" >&2
		exit 77
	fi
	command -v debootstrap >/dev/null || die "needs debootstrap"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d /tmp/snap-debootstrap.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	echo "mkdebian: debootstrap bookworm from $url (once; a few minutes)" >&2
	if ! debootstrap --variant=minbase --include=python3-minimal bookworm "$tmp/root" "$url" \
		>"$tmp/log" 2>&1; then
		tail -20 "$tmp/log" >&2
		die "debootstrap failed"
	fi
	# Not needed to run python3, and large.
	rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*_* \
		"$tmp/root/debootstrap"
	tar --numeric-owner --xattrs --xattrs-include='*' -C "$tmp/root" -cf - . |
		zstd -q -T0 -o "$TARBALL.tmp"
	mv "$TARBALL.tmp" "$TARBALL"
	rm -rf "$tmp"
	trap - EXIT
}

ensure_cache() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	[ -s "$TARBALL" ] || build_cache
	exec 9>&-
}

case ${1-} in
root)
	[ $# = 2 ] || die "usage: mkdebian.sh root DIR"
	ensure_cache
	mkdir -p "$2"
	zstd -dc "$TARBALL" | tar --numeric-owner --xattrs --xattrs-include='*' -C "$2" -xf -
	;;
docker)
	[ $# = 3 ] || die "usage: mkdebian.sh docker DIR OUT"
	src=$2 out=$3
	tmp=$(mktemp -d /tmp/snap-docker.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	tar --numeric-owner --xattrs --xattrs-include='*' -C "$src" -cf "$tmp/layer.tar" .
	diff=$(sha256sum "$tmp/layer.tar" | cut -d' ' -f1)
	mkdir "$tmp/$diff"
	mv "$tmp/layer.tar" "$tmp/$diff/layer.tar"
	cat >"$tmp/config.json" <<EOF
{"architecture":"amd64","os":"linux",
 "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],
  "Cmd":["/bin/bash"],"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["sha256:$diff"]}}
EOF
	cfg=$(sha256sum "$tmp/config.json" | cut -d' ' -f1)
	mv "$tmp/config.json" "$tmp/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["dsec-test/debian:12"],"Layers":["%s/layer.tar"]}]\n' \
		"$cfg" "$diff" >"$tmp/manifest.json"
	tar -C "$tmp" -cf "$out" manifest.json "$cfg.json" "$diff"
	;;
*)
	die "usage: mkdebian.sh root DIR | docker DIR OUT"
	;;
esac
