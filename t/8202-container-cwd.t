#!/bin/bash
# A command's working directory that does not exist in the sandbox (or is
# not a directory) is the client's not_found, as dsec-protocol(7) says, on
# every way a command starts: the init, the warm shell, the exec helper
# (a request over 64 KiB), exec_start, session_open, and the sandbox's
# default directory from create.
. "$(dirname "$0")/lib.sh"

need_container

plan 8

start_dsecd --set backends=container || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
mk() { req create backend=container "$@" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
NF='"code":"not_found","message":"cannot [a-z ]+ in sandbox .*cannot chdir to '
id=$(mk)
[ -n "$id" ] || bail "cannot create a sandbox"

run req exec id="$id" argv[]=true cwd=/nope
like "$OUT" "$NF'/nope'" "exec with a missing cwd: not_found"
run req exec id="$id" argv[]=true cwd=/etc/passwd
like "$OUT" "$NF'/etc/passwd': [Nn]ot a directory" "exec with a cwd that is a file: not_found"
big=$(head -c 70000 /dev/zero | tr '\0' x)
run req exec id="$id" argv[]=true cwd=/nope env.BIG="$big"
like "$OUT" "$NF'/nope'" "exec over 64 KiB (the exec helper) with a missing cwd: not_found"
# The warm shell: a template once the sandbox is quiet after a shell command.
dsec-run --id "$id" -c true >/dev/null
warm_shells "$id" >/dev/null
run req exec id="$id" code='grep -q container-preload /proc/$$/maps && echo warm' cwd=/nope
like "$OUT" "$NF'/nope'" "a warm shell command with a missing cwd: not_found"
x=$(req exec_start id="$id" argv[]=true cwd=/nope | sed -n 's/.*"exec":"\([^"]*\)".*/\1/p')
run req exec_read id="$id" exec="$x" wait%=5
like "$OUT" "$NF'/nope'" "exec_start with a missing cwd: exec_read says not_found"
run req session_open id="$id" session=s cwd=/nope
like "$OUT" '"code":"not_found","message":"cannot start shell .*cannot chdir to ./nope.' \
	"session_open with a missing cwd: not_found"
run req exec id="$id" argv[]=pwd cwd=/tmp
like "$OUT" '"stdout":"/tmp\\n"' "an existing cwd is entered"
id2=$(mk cwd=/nope)
run req exec id="$id2" argv[]=true
like "$OUT" "$NF'/nope'" "a create's missing default cwd: exec says not_found"
