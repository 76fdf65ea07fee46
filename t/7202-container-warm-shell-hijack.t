#!/bin/bash
# An agent tries to make the warm shell run its own program for later
# shell commands (a grader's): it runs a shell command (the init notes that
# shell for a template), points /bin/sh at another program until the
# template has started, then points it back at the noted file.  The
# template must be the file that was noted (opened then, executed from
# that descriptor) and a command is handed to it only while its file is
# unchanged, so the later command runs the real /bin/sh.  In the default
# root the paths every command's shell and dynamic loader go through
# (/bin, /sbin, /lib*, /etc/ld.so.cache, /etc/ld.so.preload) cannot be
# repointed or written.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd bash
need_cmd dash

plan 8

# A root of its own laid out as images are (/bin -> usr/bin), whose /bin
# the sandbox may change: dash as sh, bash beside it (the agent's "other
# program": its $BASH_VERSION gives it away).
mk_small_root "$T/root" dash bash cat grep ln mv mkdir sleep true readlink
mkdir -p "$T/root/usr"
mv "$T/root/bin" "$T/root/usr/bin"
ln -s usr/bin "$T/root/bin"
cp "$T/root/usr/bin/dash" "$T/root/usr/bin/sh"
start_dsecd --set backends=container --set container.rootfs="$T/root" || bail "dsecd did not start"

id=$(dsec-run --backend container --keep -- true 2>&1 >/dev/null | head -1)
id=${id##* }
[ -n "$id" ] || bail "cannot create a sandbox"
# warm: "yes" once the template and a waiting child are there (lib.sh).
# Its look is a shell command of its own: bash or dash, whatever /bin/sh
# is then, never the template's program while /bin/sh is bash.
warm() { [ "$(warm_shells "$id")" -ge 2 ] && echo yes || echo no; }
dr() { dsec-run --id "$id" "$@"; }

run dr -- readlink -f /bin/sh
is "$OUT" "/usr/bin/sh" "/bin/sh is usr/bin/sh (dash); no shell command ran yet"

# The hijack: a command through /bin/sh is noted for a template as it
# starts; it then points /bin at a directory whose sh is bash; the template
# starts once the sandbox is quiet; /bin is pointed back by commands that
# are no shells.
dr -c 'sleep 0.3; mkdir -p /evil; ln -sf /usr/bin/bash /evil/sh; ln -sfn /evil /bin.x; mv -T -f /bin.x /bin' >/dev/null
sleep 1
is "$(warm)" yes "a template started after the shell command"
dr -- ln -sfn usr/bin /bin.y
dr -- mv -T -f /bin.y /bin
SECRET=s3cret
run dr --env SECRET_TOKEN=$SECRET -c 'echo "[$BASH_VERSION]"'
is "$OUT" "[]" "a later command runs /bin/sh (dash), not the program /bin/sh named meanwhile"
run dr -c 'for p in /proc/[0-9]*; do case $(readlink $p/exe) in */bash*) echo bash;; esac; done; echo end'
is "$OUT" "end" "no process of the sandbox (the template included) runs bash"

# Changed in place after the template started: not handed to it.
warm >/dev/null
dr -- ln -f /usr/bin/sh /usr/bin/sh.link2
run dr -c 'grep -q container-preload /proc/$$/maps && echo warm || echo cold'
is "$OUT" "cold" "a template whose file changed since (a new link) gets no command"
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null
stop_dsecd

# The default root: its top-level links and the loader's files are not
# the sandbox's to change.
start_dsecd --set backends=container || bail "dsecd did not start"
run dsec-run --backend container -c '
	for d in /bin /sbin /lib /lib64; do
		[ -e $d ] || continue
		ln -sfn /tmp $d 2>/dev/null && echo "repointed $d"
		mv $d $d.x 2>/dev/null && echo "moved $d"
		rm -rf $d 2>/dev/null; [ -e $d/. ] || echo "removed $d"
		touch $d/dsec-x 2>/dev/null && echo "wrote in $d"
	done
	{ echo x >> /etc/ld.so.preload; } 2>/dev/null && echo "wrote ld.so.preload"
	{ echo x >> /etc/ld.so.cache; } 2>/dev/null && echo "wrote ld.so.cache"
	mv /etc/ld.so.cache /tmp/c 2>/dev/null && echo "moved ld.so.cache"
	echo done'
is "$OUT" "done" "/bin, /sbin, /lib*, /etc/ld.so.cache and /etc/ld.so.preload cannot be changed"
run dsec-run --backend container -c 'test -x /bin/sh && test -e /lib64/ld-linux-x86-64.so.2 -o ! -e /lib64 && echo fine'
is "$OUT" "fine" "... and still serve as before"
run dsec-run --backend container -- sh -c 'cat /etc/ld.so.preload | wc -c'
is "$OUT" "0" "the loader's preload list is empty"
