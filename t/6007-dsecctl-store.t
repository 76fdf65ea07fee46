#!/bin/bash
# Which store dsecctl works on: --store, else STATE_DIR/fs3 of --state-dir
# (where dsecd keeps its images), else $DSEC_FS3_STORE, else
# $DSEC_STATE_DIR/fs3; --store and --state-dir together are a usage error.
. "$(dirname "$0")/lib.sh"

need_cmd dsecctl

plan 8

unset DSEC_FS3_STORE DSEC_STATE_DIR DSEC_FS3_ORIGIN
# ls: the store it opened is the one made (fs3 makes a store on first use).
made() { find "$T" -name lock -printf '%h\n' | sort | tr '\n' ' '; }
each() { rm -rf "$T"/s; mkdir -p "$T/s"; run "$@"; }

each dsecctl --store "$T/s/a" image ls
is "$RC:$(made)" "0:$T/s/a " "--store names the store"
each dsecctl --state-dir "$T/s/st" image ls
is "$RC:$(made)" "0:$T/s/st/fs3 " "--state-dir DIR: the store is DIR/fs3, as dsecd's"
each env DSEC_STATE_DIR="$T/s/env" dsecctl image ls
is "$RC:$(made)" "0:$T/s/env/fs3 " "\$DSEC_STATE_DIR/fs3 without flags"
each env DSEC_STATE_DIR="$T/s/env" DSEC_FS3_STORE="$T/s/fs3env" dsecctl image ls
is "$RC:$(made)" "0:$T/s/fs3env " "\$DSEC_FS3_STORE wins over \$DSEC_STATE_DIR"
each env DSEC_FS3_STORE="$T/s/fs3env" dsecctl --state-dir "$T/s/st" image ls
is "$RC:$(made)" "0:$T/s/st/fs3 " "--state-dir wins over \$DSEC_FS3_STORE"
each env DSEC_STATE_DIR="$T/s/env" dsecctl --store "$T/s/a" image ls
is "$RC:$(made)" "0:$T/s/a " "--store wins over \$DSEC_STATE_DIR"
each dsecctl --store "$T/s/a" --state-dir "$T/s/st" image ls
like "$RC:$OUT" "^2:dsecctl: --store and --state-dir" "--store with --state-dir is a usage error"
run dsecctl --help
like "$OUT" "DSEC_STATE_DIR" "--help names DSEC_STATE_DIR"
