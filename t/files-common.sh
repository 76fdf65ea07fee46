# t/files-common.sh - the file API (file_stat, file_list, file_mkdir,
# file_remove, file_write with an owner, file_upload, file_download) seen
# end to end on one backend, escapes included, and files and trees larger
# than a frame moved in parts (the test's max_frame is 256K: what the
# parts pass through is 192K at most).  Sourced by a test after
# lib.sh; files_tests runs them after start_dsecd, with BE set to the
# backend and ESC to a regex of how it refuses an escape.  P is the
# sandbox directory the files go in (/work: fncall's files live there).
#
# Every escape attempt aims at $T/host (a file) and $T/hostdir (a tree) on
# the host: each one is refused or stays inside the sandbox, and both are
# unchanged at the end.  FILES_TESTS is the number of tests it runs.

FILES_TESTS=108
STAGE_GRACE=${STAGE_GRACE:-3}

files_tests() {
	P=/work
	hr() { helper-req "$DSEC_HOST" "$@"; }
	hro() { local f=$1; shift; helper-req -o "$f" "$DSEC_HOST" "$@"; }
	sh_in() { dsec-run --id "$id" -c "$1"; }

	mkdir -p "$T/hostdir/sub"
	echo host-secret > "$T/host"
	echo host-file > "$T/hostdir/sub/f"
	host_sum() { (cat "$T/host"; find "$T/hostdir" | sort; cat "$T/hostdir/sub/f") | md5sum; }
	host0=$(host_sum)

	run hr create backend="$BE"
	id=$(printf '%s' "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || bail "cannot create a $BE sandbox: $OUT"

	# ---- round trips: write with owner and mode, stat, list, mkdir, remove
	run hr file_write id="$id" path=$P/a/b.txt data=hello mode#=416 uid#=1234 gid#=4321
	like "$OUT" '"ok":true' "$BE: file_write with mode and owner"
	run hr file_stat id="$id" path=$P/a/b.txt
	like "$OUT" '"name":"b.txt","type":"file","mode":416,"size":5,"uid":1234,"gid":4321,.*"target":null' \
		"$BE: file_stat reports type, mode, size and owner"
	run sh_in "stat -c '%u:%g:%a:%s' $P/a/b.txt"
	is "$OUT" "1234:4321:640:5" "$BE: a command sees the owner and mode file_write set"
	run hr file_write id="$id" path=$P/a/c.txt data=x mode#=2541
	run hr file_stat id="$id" path=$P/a/c.txt
	like "$OUT" '"mode":(2541|493),' "$BE: file_write mode bits (setgid only where the backend allows it)"
	run hr file_write id="$id" path=$P/a/b.txt data=x mode#=4096
	like "$OUT" '"code":"invalid"' "$BE: a mode over 07777 is invalid"
	run hr file_write id="$id" path=$P/a/b.txt data=x uid#=4294967295
	like "$OUT" '"code":"invalid"' "$BE: a uid out of range is invalid"
	run hr file_write id="$id" path=$P/a/ data=x
	like "$OUT" "\"code\":\"invalid\",\"message\":\"cannot write '$P/a/': is a directory\"" \
		"$BE: file_write of a directory path is invalid"
	run hr file_mkdir id="$id" path=$P/m/n/o parents?=true mode#=448 uid#=77 gid#=78
	like "$OUT" '"ok":true' "$BE: file_mkdir with parents"
	run hr file_stat id="$id" path=$P/m/n/o
	like "$OUT" '"type":"dir","mode":448,.*"uid":77,"gid":78' "$BE: the directory has its mode and owner"
	run hr file_mkdir id="$id" path=$P/m/n/o parents?=true
	like "$OUT" '"ok":true' "$BE: file_mkdir with parents accepts an existing directory"
	run hr file_mkdir id="$id" path=$P/m
	like "$OUT" '"code":"exists","message":"cannot create directory .*: file exists"' \
		"$BE: file_mkdir of an existing directory: exists"
	run hr file_mkdir id="$id" path=$P/nope/x
	like "$OUT" '"code":"not_found"' "$BE: file_mkdir without parents needs the parent"
	run sh_in "ln -s a/b.txt $P/lnk; mkfifo $P/fifo"
	run hr file_stat id="$id" path=$P/lnk
	like "$OUT" '"type":"symlink",.*"target":"a/b.txt"' "$BE: file_stat of a symlink reports it and its target"
	run hr file_list id="$id" path=$P
	like "$OUT" '"entries":\[\{"name":"a","type":"dir".*\{"name":"fifo","type":"fifo".*\{"name":"lnk","type":"symlink".*"target":"a/b.txt"\},\{"name":"m","type":"dir".*\],"truncated":false' \
		"$BE: file_list: sorted entries with type, size, mode, target"
	run hr file_list id="$id" path=$P limit#=2
	like "$(printf '%s' "$OUT" | grep -o '"name"' | wc -l):$OUT" '^2:.*"truncated":true' \
		"$BE: file_list limit truncates and says so"
	run hr file_list id="$id" path=$P/a/b.txt
	like "$OUT" '"code":"invalid","message":"cannot list .*: not a directory"' "$BE: file_list of a file: invalid"
	run hr file_remove id="$id" path=$P/m
	like "$OUT" "\"code\":\"invalid\",\"message\":\"cannot remove '$P/m': directory not empty\"" \
		"$BE: file_remove of a non-empty directory: directory not empty"
	run hr file_remove id="$id" path=$P/m recursive?=true
	like "$OUT" '"removed":3' "$BE: file_remove recursive counts what it removed"
	run hr file_remove id="$id" path=$P/m
	like "$OUT" '"code":"not_found"' "$BE: file_remove of what is gone: not_found"
	run hr file_remove id="$id" path=$P/lnk
	run hr file_stat id="$id" path=$P/a/b.txt
	like "$OUT" '"size":5' "$BE: file_remove of a symlink leaves its target"

	# ---- the same through libdsec's calls
	run helper-files "$DSEC_HOST" "$id" $P/client
	is "$RC:$(printf '%s' "$OUT" | grep -vc '^ok ')" "0:0" "$BE: libdsec file calls (helper-files)"
	[ "$RC" = 0 ] || diag "$OUT"

	# ---- files and trees of any size, in parts, through libdsec
	head -c $((40 << 20)) /dev/urandom > "$T/big"
	sum=$(sha256sum < "$T/big" | cut -d' ' -f1)
	run helper-files --big "$T/big" "$DSEC_HOST" "$id" $P/big
	is "$RC:$(printf '%s' "$OUT" | grep -vc '^ok ')" "0:0" \
		"$BE: 40 MiB written, read, appended, downloaded and uploaded as a tree in parts (helper-files --big)"
	[ "$RC" = 0 ] || diag "$OUT"
	is "$(sha256sum < "$T/big.back" | cut -d' ' -f1)" "$sum" \
		"$BE: the 40 MiB of random bytes read back in parts are those written (sha256)"
	run sh_in "sha256sum $P/big/f $P/big-copy/f | cut -d' ' -f1 | uniq"
	is "$OUT" "$sum" "$BE: the sandbox has them, and so has the copy the tree's download and upload made"
	run sh -c "tar -xOf '$T/big.tar' f | sha256sum | cut -d' ' -f1"
	is "$OUT" "$sum" "$BE: the tar downloaded through an archive file holds them"
	run sh_in "find $P -name '.dsec-*' | wc -l"
	is "$OUT" "0" "$BE: no archive staged in the sandbox is left behind"
	n=$((40 << 20))
	run hr file_read id="$id" path=$P/big/f offset#=$((n - 5)) length#=5
	like "$OUT" '"size":5,"eof":true' "$BE: file_read of a file's last bytes: eof"
	run hr file_read id="$id" path=$P/big/f offset#=$((n - 6)) length#=5
	like "$OUT" '"size":5,"eof":false' "$BE: ... of those one byte before: no eof"
	run hr file_read id="$id" path=$P/big/f offset#=$n
	like "$OUT" '"data":"","size":0,"eof":true' "$BE: ... at its end: nothing, eof"
	run hr file_read id="$id" path=$P/big/f
	like "$OUT" '"size":196608,"eof":false' "$BE: ... as much as a reply carries of a longer one: no eof"
	hr file_remove id="$id" path=$P/big recursive?=true >/dev/null
	hr file_remove id="$id" path=$P/big-copy recursive?=true >/dev/null
	hr file_remove id="$id" path=$P/big-copy2 recursive?=true >/dev/null
	run hr file_write id="$id" path=$P/ap data=abc
	run hr file_write id="$id" path=$P/ap data=def append?=true
	run hr file_read id="$id" path=$P/ap
	like "$OUT" '"data":"abcdef","size":6,"eof":true' "$BE: file_write append after a write"
	run hr file_write id="$id" path=$P/a data=x append?=true
	like "$OUT" "\"code\":\"invalid\",\"message\":\"cannot append to '$P/a': is a directory\"" \
		"$BE: an append to a directory is invalid"
	run hr file_read id="$id" path=$P/ap offset#=9223372036854775808
	like "$OUT" '"code":"invalid","message":"offset 9223372036854775808 is past the largest file offset' \
		"$BE: a read at an offset past 2^63 - 1 is invalid"
	run hr file_read id="$id" path=$P/ap offset#=-1
	like "$OUT" '"code":"bad_request","message":"field .offset. must be a non-negative integer' \
		"$BE: a read at a negative offset is a bad request"
	# A command makes a file grow while it is read whole in parts: what
	# comes back is the file as it began, up to an end a part saw.
	sh_in "for i in \$(seq 40); do seq \$((i * 100000)) \$((i * 100000 + 99999)) >> $P/grow; \
sleep 0.1; done" &
	grower=$!
	for i in $(seq 100); do
		hr file_read id="$id" path=$P/grow length#=1 | grep -q '"size":1' && break
		sleep 0.05
	done
	helper-files --cat "$DSEC_HOST" "$id" $P/grow "$T/grow.read" >/dev/null
	wait $grower
	helper-files --cat "$DSEC_HOST" "$id" $P/grow "$T/grow.all" >/dev/null
	got=$(stat -c %s "$T/grow.read" 2>/dev/null || echo 0)
	all=$(stat -c %s "$T/grow.all" 2>/dev/null || echo 0)
	ok $([ "$got" -gt 0 ] && [ "$got" -lt "$all" ] && cmp -s -n "$got" "$T/grow.read" "$T/grow.all"
	     echo $?) "$BE: a file that grows while read whole in parts reads as it began, to an end a part saw ($got of $all bytes)"
	run hr ping
	like "$OUT" '"pong":true,.*"max_frame":262144' "$BE: the daemon serves on, and ping says its max_frame"

	# ---- tar upload and download, plain and zstd
	mkdir -p "$T/src/d/e"
	printf 'one' > "$T/src/d/one"
	printf 'two' > "$T/src/d/e/two"
	chmod 751 "$T/src/d/e"
	ln -s e/two "$T/src/d/l"
	ln "$T/src/d/one" "$T/src/d/hard"
	tar -C "$T/src" -cf "$T/up.tar" d
	run hr file_upload id="$id" path=$P/up data@="$T/up.tar" uid#=501 gid#=502
	like "$OUT" '"ok":true,"result":\{"entries":6\}' "$BE: file_upload extracts every member"
	run sh_in "cd $P/up/d && cat one e/two l hard; echo; stat -c '%u:%g:%a' e e/two; stat -c %h one; readlink l"
	is "$(echo $OUT)" "onetwotwoone 501:502:751 501:502:644 2 e/two" \
		"$BE: uploaded files, modes, owner, symlink and hard link as in the archive"
	run hro "$T/down.tar" file_download id="$id" path=$P/up
	like "$OUT" '"ok":true,"result":\{"data":"<[0-9]+ bytes>","size":[0-9]+,"entries":6\}' "$BE: file_download"
	run tar -tvf "$T/down.tar"
	like "$(echo $OUT)" '^drwxr-xr-x 501/502 .* d/ drwxr-x--x 501/502 .* d/e/ -rw-r--r-- 501/502 3 .* d/e/two -rw-r--r-- 501/502 3 .* d/hard lrwxrwxrwx 501/502 0 .* d/l -> e/two -rw-r--r-- 501/502 3 .* d/one$' \
		"$BE: the downloaded tar holds the tree, modes, owners and the symlink"
	run hro "$T/down.tar.zst" file_download id="$id" path=$P/up/d format=tar.zst
	run sh -c "zstd -dc '$T/down.tar.zst' | tar -tf - | tr '\n' ' '"
	is "$OUT" "e/ e/two hard l one " "$BE: tar.zst download of a directory holds its contents"
	run hr file_upload id="$id" path=$P/up2 data@="$T/down.tar.zst" format=tar.zst
	like "$OUT" '"entries":5' "$BE: tar.zst upload"
	run sh_in "cat $P/up2/l $P/up2/one"
	is "$OUT" "twoone" "$BE: tar.zst round trip"
	run hro "$T/one.tar" file_download id="$id" path=$P/up/d/one
	run tar -tf "$T/one.tar"
	is "$OUT" "one" "$BE: file_download of a file holds it by its name"
	run hr file_upload id="$id" path=$P/up data~=100 format=zip
	like "$OUT" '"code":"invalid","message":"format .zip. is not one of' "$BE: an unknown format is invalid"
	run hr file_upload id="$id" path=$P/up data~=1000
	like "$OUT" '"code":"invalid","message":"cannot upload to' "$BE: bytes that are no tar are invalid"

	# ---- escapes: each refused ($ESC says how this backend refuses) or
	# contained; the host is untouched after each
	escape() {
		local desc=$1; shift
		run hr "$@"
		local how=$(printf '%s' "$OUT" | sed -n 's/.*"code":"\([a-z_]*\)".*/\1/p')
		ok $(printf '%s' "$OUT" | grep -Eq "$ESC" && [ "$(host_sum)" = "$host0" ]; echo $?) \
			"$BE: $desc: ${how:-contained}, host untouched"
		[ "$(host_sum)" = "$host0" ] || diag "reply: $OUT"
	}
	run sh_in "ln -s $T $P/abs; ln -s / $P/rootlink; ln -s /proc/self/root $P/pr; \
	ln -s ../../../../../../../../..$T $P/rel; mkdir -p $P/tree/in; echo x > $P/tree/in/f; \
	ln -s $T/hostdir $P/tree/in/hostlink; ln -s ../../../../../../../../..$T/hostdir $P/tree/rel"
	escape "file_write through '..'" file_write id="$id" path=$P/../../../../../..$T/host data=pwned
	escape "file_write through an absolute symlink" file_write id="$id" path=$P/abs/host data=pwned
	escape "file_write through a symlinked parent (link to /)" file_write id="$id" \
		path=$P/rootlink$T/host data=pwned
	escape "file_write through a relative symlink climbing out" file_write id="$id" path=$P/rel/host \
		data=pwned
	escape "file_read through a link to /proc/self/root" file_read id="$id" path=$P/pr$T/host
	like "$OUT" '"ok":false' "$BE: ... which fails"
	escape "file_write to /proc/self/root/..." file_write id="$id" path=/proc/self/root$T/host data=pwned
	like "$OUT" '"ok":false,"error":\{"code":"(permission|not_found)"' "$BE: ... which fails"
	escape "file_stat through '..'" file_stat id="$id" path=$P/../../../../..$T/host
	escape "file_remove through an absolute symlink" file_remove id="$id" path=$P/abs/hostdir \
		recursive?=true
	escape "file_mkdir through a symlink to /" file_mkdir id="$id" path=$P/rootlink$T/hostdir/new \
		parents?=true
	escape "file_upload through an absolute symlink" file_upload id="$id" path=$P/abs/up \
		data@="$T/up.tar"
	escape "file_download through a relative symlink climbing out" file_download id="$id" \
		path=$P/rel/hostdir
	# A command swaps symlinks to the host in and out while the daemon
	# removes, unpacks, packs and writes in the same place.
	dsec-run --id "$id" --timeout 20 -c "end=\$((\$(date +%s) + 4)); mkdir -p $P/race; \
while [ \$(date +%s) -lt \$end ]; do rm -rf $P/race/d; ln -s $T/hostdir $P/race/d; rm -f $P/race/d; \
mkdir -p $P/race/d/sub; ln -s $T/hostdir $P/race/d/sub/l; rm -rf $P/race/d/sub; \
ln -s $T/hostdir $P/race/d/sub; done" >/dev/null 2>&1 &
	racer=$!
	sleep 0.5
	for i in $(seq 15); do
		hr file_remove id="$id" path=$P/race/d recursive?=true
		hr file_upload id="$id" path=$P/race/d data@="$T/up.tar"
		hr file_write id="$id" path=$P/race/d/sub/host data=pwned
		hr file_mkdir id="$id" path=$P/race/d/sub/d/new parents?=true
		hr file_download id="$id" path=$P/race/d
		hr file_remove id="$id" path=$P/race/d/sub recursive?=true
	done >/dev/null 2>&1
	wait $racer
	is "$(host_sum)" "$host0" "$BE: symlinks swapped in during file operations lead nowhere on the host"
	run hr file_remove id="$id" path=$P/tree recursive?=true
	like "$OUT" '"removed":5' "$BE: recursive remove of a tree holding symlinks to a host directory"
	ok $([ -f "$T/hostdir/sub/f" ]; echo $?) "$BE: ... removes the links, not the host directory"

	# Archives with bad members change nothing, not even their good members.
	python3 - "$T" <<-'EOF'
	import io, sys, tarfile
	t = sys.argv[1]
	def tar(name, members):
	    with tarfile.open(f"{t}/{name}.tar", "w", format=tarfile.GNU_FORMAT) as f:
	        f.addfile(tarfile.TarInfo("good"), io.BytesIO(b""))
	        for n, kind, arg in members:
	            i = tarfile.TarInfo(n)
	            i.type = kind
	            if kind == tarfile.REGTYPE:
	                i.size = len(arg)
	                f.addfile(i, io.BytesIO(arg))
	            else:
	                i.linkname = arg
	                f.addfile(i)
	tar("dotdot", [("../../../../../../../.." + t + "/host", tarfile.REGTYPE, b"pwned")])
	tar("abs", [(t + "/host", tarfile.REGTYPE, b"pwned")])
	tar("symabs", [("l", tarfile.SYMTYPE, t), ("l/host", tarfile.REGTYPE, b"pwned")])
	tar("symin", [("s", tarfile.DIRTYPE, ""), ("l", tarfile.SYMTYPE, "s"), ("l/x", tarfile.REGTYPE, b"x")])
	tar("symlater", [("l/x", tarfile.REGTYPE, b"x"), ("l", tarfile.SYMTYPE, "s")])
	tar("symup", [("l", tarfile.SYMTYPE, "../../../../../../../.." + t)])
	tar("hard", [("h", tarfile.LNKTYPE, "../../../../../../../.." + t + "/host")])
	tar("dev", [("null", tarfile.CHRTYPE, "")])
EOF
	for a in dotdot abs symabs symin symlater symup hard; do
		run hr file_upload id="$id" path=$P/bad-$a data@="$T/$a.tar"
		like "$OUT" '"code":"permission"' "$BE: a tar with a bad member ($a) is refused"
	done
	# The same checks for an archive file in the sandbox (what a client
	# writes there in parts), which goes as soon as it is open.
	run hr file_write id="$id" path=$P/hostile.tar data@="$T/symin.tar"
	run hr file_upload id="$id" path=$P/bad-file archive=$P/hostile.tar remove_archive?=true
	like "$OUT" '"code":"permission","message":"cannot upload to .*: member .l/x. goes through a symlink' \
		"$BE: an archive file with a bad member is refused"
	run hr file_stat id="$id" path=$P/hostile.tar
	like "$OUT" '"code":"not_found"' "$BE: ... and removed (remove_archive)"
	run hr file_upload id="$id" path=$P/bad-dev data@="$T/dev.tar"
	like "$OUT" '"code":"invalid","message":"cannot upload to .*: member .null. is not a file, directory or link' \
		"$BE: a tar with a device is refused"
	run hr file_list id="$id" path=$P/bad-symin
	like "$OUT" '"code":"not_found"' "$BE: a refused archive leaves nothing, not even its good members"
	is "$(host_sum)" "$host0" "$BE: the host file and directory are unchanged"

	files_stage_tests
	is "$(host_sum)" "$host0" "$BE: the host file and directory are unchanged by staged writes"

	run hr destroy id="$id"
}

# Staged writes and downloads (file_write with parts; the daemon's
# stage_grace is STAGE_GRACE seconds): what a reader sees, what a command
# in the sandbox can do to a staged file, and what a client that dies
# half way leaves.
files_stage_tests() {
	sid_of() { printf '%s' "$1" | sed -n 's/.*"stage":"\([0-9a-f]*\)".*/\1/p'; }
	parts_in() { sh_in "ls -a $1 | grep -c '^\.dsec-part-'"; }

	run hr file_write id="$id" path=$P/st data=old
	run hr file_write id="$id" path=$P/st data=abc parts?=true mode#=384
	sid=$(sid_of "$OUT")
	like "$sid" '^[0-9a-f]{16}$' "$BE: file_write with parts: the reply names its stage"
	run hr file_write id="$id" path=$P/st data=def stage="$sid"
	like "$OUT" '"ok":true' "$BE: a later part of a staged write"
	run hr file_read id="$id" path=$P/st
	like "$OUT" '"data":"old"' "$BE: until the last part, readers see the file as it was"
	run sh_in "ls -a $P | grep -c '^\.dsec-part-$sid\$'"
	is "$OUT" 1 "$BE: the parts are in a hidden file beside it"
	run hr file_write id="$id" path=$P/other data=x stage="$sid"
	like "$OUT" "\"code\":\"invalid\",\"message\":\"staged write '$sid' is of '$P/st', not of '$P/other'" \
		"$BE: a part of a stage sent for another path is invalid"
	run hr file_write id="$id" path=$P/st data=ghi stage="$sid" commit?=true
	like "$OUT" '"ok":true' "$BE: the last part commits"
	run hr file_stat id="$id" path=$P/st
	like "$OUT" '"mode":384,"size":9,' "$BE: the file has every part, and the first part's mode"
	run hr file_read id="$id" path=$P/st
	like "$OUT" '"data":"abcdefghi"' "$BE: ... in order"
	run parts_in $P
	is "$OUT" 0 "$BE: nothing is left beside it"
	run hr file_write id="$id" path=$P/st data=x stage="$sid"
	like "$OUT" '"code":"not_found","message":"sandbox .* has no staged write .*: it was committed' \
		"$BE: a part of a committed stage: not_found"

	run hr file_write id="$id" path=$P/st data=zz parts?=true
	sid=$(sid_of "$OUT")
	run hr file_write id="$id" path=$P/st stage="$sid" abort?=true
	like "$OUT" '"ok":true' "$BE: abort ends a staged write"
	run hr file_read id="$id" path=$P/st
	is "$(parts_in $P):$(printf '%s' "$OUT" | grep -c '"data":"abcdefghi"')" "0:1" \
		"$BE: ... leaving the file as it was and nothing beside it"

	# A command in the sandbox changes, removes or swaps the staged file:
	# the part fails and the file is never replaced by what was not sent.
	run hr file_write id="$id" path=$P/st data=abc parts?=true
	sid=$(sid_of "$OUT")
	sh_in "echo more >> $P/.dsec-part-$sid"
	run hr file_write id="$id" path=$P/st data=def stage="$sid" commit?=true
	like "$OUT" '"code":"invalid","message":"cannot write .*: its staged file was changed in the sandbox \(8 bytes where the parts sent 3\)' \
		"$BE: a staged file a command added to fails the part"
	sh_in "rm $P/.dsec-part-$sid; ln -s $T/host $P/.dsec-part-$sid"
	run hr file_write id="$id" path=$P/st data=def stage="$sid" commit?=true
	like "$OUT" '"code":"invalid","message":"cannot write .*: its staged file was changed' \
		"$BE: ... one swapped for a symlink (out of the sandbox) too"
	sh_in "rm $P/.dsec-part-$sid"
	run hr file_write id="$id" path=$P/st data=def stage="$sid" commit?=true
	like "$OUT" '"code":"not_found","message":"cannot write .*: its staged file is gone' \
		"$BE: ... and one removed: not_found"
	run hr file_read id="$id" path=$P/st
	like "$OUT" '"data":"abcdefghi"' "$BE: the file is as it was after each"
	run hr file_write id="$id" path=$P/st stage="$sid" abort?=true

	# Fields that do not go together.
	run hr file_write id="$id" path=$P/st data=x parts?=true stage=0123456789abcdef
	like "$OUT" '"code":"invalid","message":"file_write takes .parts. \(a first part\) or .stage.' \
		"$BE: parts with stage is invalid"
	run hr file_write id="$id" path=$P/st data=x commit?=true
	like "$OUT" '"code":"invalid","message":"file_write.s .commit. and .abort. go with .stage.' \
		"$BE: commit without a stage is invalid"
	run hr file_write id="$id" path=$P/st data=x parts?=true append?=true
	like "$OUT" '"code":"invalid","message":"a staged write replaces the file' \
		"$BE: a staged append is invalid"
	run hr file_write id="$id" path=$P/sub/ data=x parts?=true
	like "$OUT" "\"code\":\"invalid\",\"message\":\"cannot write '$P/sub/': is a directory" \
		"$BE: a staged write of a directory path is invalid"

	# A sandbox has at most 64 stages at once.  Made on one connection:
	# 64 client starts, each a stage's last request, could outlast the
	# 3 s stage_grace on a slow host (they did in make check-v2's guest).
	"$TOP/t/helper-py" - "$DSEC_HOST" "$id" "$P/many" > "$T/stages" 2>&1 <<'PY'
import sys, dsec
url, sid, path = sys.argv[1:4]
with dsec.Client(url) as c:
    w = dict(id=sid, path=path, data=b"x", parts=True)
    stages = [c.call("file_write", w)["stage"] for _ in range(64)]
    print(len(set(s for s in stages if len(s) == 16)))
    try:
        c.call("file_write", w)
        print("a 65th: ok")
    except dsec.DsecError as e:
        print("%s %s" % (e.code, e.message))
    print(sum(1 for s in stages
              if c.call("file_write", dict(id=sid, path=path, stage=s, abort=True)) is not None))
PY
	is "$(sed -n 1p "$T/stages")" 64 "$BE: 64 staged writes at once"
	like "$(sed -n 2p "$T/stages")" '^capacity sandbox .* has 64 staged writes and downloads, the most it may' \
		"$BE: a 65th: capacity"
	is "$(sed -n 3p "$T/stages"):$(parts_in $P)" "64:0" "$BE: aborting them removes their files"

	# An upload of a staged write: the archive never becomes a file.
	echo hello > "$T/sf"; tar -C "$T" -cf "$T/sf.tar" sf
	head -c 4096 "$T/sf.tar" > "$T/sf1"; tail -c +4097 "$T/sf.tar" > "$T/sf2"
	run hr file_write id="$id" path=$P/up/x.tar data@="$T/sf1" parts?=true
	sid=$(sid_of "$OUT")
	run hr file_write id="$id" path=$P/up/x.tar data@="$T/sf2" stage="$sid"
	run hr file_upload id="$id" path=$P/up stage="$sid"
	like "$OUT" '"entries":1' "$BE: file_upload of a staged write"
	run sh_in "cat $P/up/sf; ls -a $P/up | grep -c dsec"
	is "$OUT" "hello
0" "$BE: ... unpacks it and leaves neither the archive nor its staged file"
	run hr file_upload id="$id" path=$P/up stage="$sid"
	like "$OUT" '"code":"not_found","message":"sandbox .* has no staged write' \
		"$BE: ... which it ends"

	# A client that goes silent: after stage_grace its staged file goes.
	run hr file_write id="$id" path=$P/st data=half parts?=true
	sid=$(sid_of "$OUT")
	run hr file_download id="$id" path=$P/up archive=$P/dl.tar stage?=true
	like "$OUT" '"stage":"[0-9a-f]{16}"' "$BE: a staged download names its stage"
	run sh_in "ls -a $P | grep -c '^\.dsec-part-$sid\$'; test -f $P/dl.tar && echo there"
	is "$OUT" "1
there" "$BE: a silent client's staged write and download are there at first"
	# Removed once stage_grace has passed (polled, at most 5 s past it).
	for i in $(seq $(( (STAGE_GRACE + 5) * 5 ))); do
		sleep 0.2
		run sh_in "ls -a $P | grep -c '^\.dsec-part-'; test -e $P/dl.tar || echo gone"
		[ "$OUT" = "0
gone" ] && break
	done
	is "$OUT" "0
gone" "$BE: ... and removed after stage_grace"
	run hr file_read id="$id" path=$P/st
	like "$OUT" '"data":"abcdefghi"' "$BE: ... the file it was to replace as it was"
	run hr file_write id="$id" path=$P/st data=x stage="$sid" commit?=true
	like "$OUT" '"code":"not_found".*left untouched for stage_grace' \
		"$BE: ... and a late part gets not_found"

	# A client killed half way through an upload in parts (libdsec reading
	# a pipe that stops): its staged archive goes after stage_grace.
	head -c $((1 << 20)) /dev/urandom > "$T/kr"
	tar -C "$T" -cf "$T/kr.tar" kr
	rm -f "$T/fifo"; mkfifo "$T/fifo"
	helper-files --upload-stdin "$DSEC_HOST" "$id" $P/killed < "$T/fifo" > /dev/null 2>&1 &
	local kpid=$! i
	exec 7> "$T/fifo"
	head -c $((700 << 10)) "$T/kr.tar" >&7
	for i in $(seq 100); do
		[ "$(parts_in $P/killed 2>/dev/null)" = 1 ] && break
		sleep 0.1
	done
	run parts_in $P/killed
	is "$OUT" 1 "$BE: an upload in parts from a pipe that stops is staged"
	kill -9 $kpid; wait $kpid 2>/dev/null
	exec 7>&-
	for i in $(seq $(( (STAGE_GRACE + 5) * 5 ))); do
		sleep 0.2
		run sh_in "ls -A $P/killed | wc -l"
		[ "$OUT" = 0 ] && break
	done
	is "$OUT" 0 "$BE: the client killed half way leaves nothing after stage_grace"
}
