#!/bin/bash
# container: network namespaces are the backend's, owned by the host's user
# namespace, and a destroyed sandbox's goes to the next create when nothing
# of it is left there (netpool.c): the kernel's teardown of a network
# namespace walks every live one, the cost that grew most with a node's
# population.  A sandbox cannot change its namespace (so it cannot leave
# anything in it for the next) and may still bind the low ports; one that
# leaves a connection in TIME_WAIT, or had an allowlist, is not reused; nor
# any with container.net_reuse=false.
. "$(dirname "$0")/lib.sh"

need_container
[ -x /usr/bin/python3 ] || skip_all "needs /usr/bin/python3"

plan 17

start_dsecd --set backends=container
new() { new_container "$@"; }
# in ID CODE: CODE run by sh in sandbox ID; OUT and RC.
inside() { run dsec-run --id "$1" -c "$2"; }
# The namespace's cookie: never the same for two (an inode number is
# given again once its namespace is gone).
COOKIE='/usr/bin/python3 -c "import socket, struct; print(struct.unpack(\"Q\", socket.socket().getsockopt(1, 71, 8))[0])"'
netns_of() { inside "$1" "$COOKIE"; echo "$OUT"; }
# settle N: until N sandboxes' directories are left (a destroy's reply
# comes before its teardown, which gives its namespace back).
settle() {
	local i
	for i in $(seq 100); do
		[ "$(ls -d "$T"/state/backends/container/sb.* 2>/dev/null | wc -l)" -le "$1" ] && return
		sleep 0.1
	done
}
destroy() { helper-req -q "$DSEC_HOST" destroy id="$1" >/dev/null; settle 0; }

a=$(new)
na=$(netns_of "$a")
like "$na" '^[0-9]+$' "a sandbox has a network namespace"
hostns=$(/usr/bin/python3 -c "import socket, struct; print(struct.unpack('Q', socket.socket().getsockopt(1, 71, 8))[0])")
ok $([ "$na" != "$hostns" ]; echo $?) "... not the host's"
inside "$a" 'ip -o link | cut -d" " -f2,3; cat /proc/sys/net/ipv4/ip_unprivileged_port_start'
is "$(echo $OUT)" "lo: <LOOPBACK,UP,LOWER_UP> 0" "loopback only, up, and every port may be bound"
# A server left listening when the sandbox goes: killed with it, no trace.
inside "$a" '/usr/bin/python3 -c "
import socket, time
s = socket.socket(); s.bind((\"127.0.0.1\", 80)); s.listen()
u = socket.socket(socket.AF_UNIX); u.bind(\"\\0dsec-left\"); u.listen()
print(\"bound\", flush=True)
time.sleep(300)
" > /tmp/srv 2>&1 &
for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /tmp/srv ] && break; sleep 0.2; done; cat /tmp/srv'
is "$OUT" "bound" "root inside binds port 80 and an abstract unix socket"
inside "$a" 'ip link set lo down 2>/dev/null && echo changed
	ip link add dsec0 type dummy 2>/dev/null && echo added
	echo 1 2>/dev/null > /proc/sys/net/ipv4/ip_unprivileged_port_start && echo set
	ip -o link | cut -d" " -f2,3'
is "$(echo $OUT)" "lo: <LOOPBACK,UP,LOWER_UP>" "the sandbox cannot change its network namespace (links, sysctls)"
destroy "$a"
# Its listening socket is freed a grace period (RCU) after its process.
sleep 1
b=$(new)
nb=$(netns_of "$b")
is "$nb" "$na" "the next sandbox gets the destroyed one's namespace"
inside "$b" '/usr/bin/python3 -c "
import socket
s = socket.socket(); s.bind((\"127.0.0.1\", 80)); s.listen()
u = socket.socket(socket.AF_UNIX); u.bind(\"\\0dsec-left\")
print(\"free\")
"; grep -c dsec-left /proc/net/unix'
is "$(echo $OUT)" "free 0" "nothing of the last sandbox is there: its port and socket name are free"
# A connection closed here first stays in TIME_WAIT for a minute.
inside "$b" '/usr/bin/python3 -c "
import socket
s = socket.socket(); s.bind((\"127.0.0.1\", 8080)); s.listen()
c = socket.create_connection((\"127.0.0.1\", 8080)); a, _ = s.accept()
c.close(); a.close(); s.close()
"; grep -c " 06 " /proc/net/tcp'
is "$OUT" "1" "a sandbox leaves a connection in TIME_WAIT"
destroy "$b"
c=$(new)
nc=$(netns_of "$c")
ok $([ "$nc" != "$nb" ]; echo $?) "a namespace with a connection in TIME_WAIT is not given to another"
inside "$c" 'grep -c " 06 " /proc/net/tcp'
is "$OUT" "0" "... the new sandbox sees none"
destroy "$c"

# Many sandboxes one after another take one namespace turn about.
for i in 1 2 3 4 5; do
	dsec-run --backend container -c "$COOKIE" >> "$T/ns"
	settle 0
done
is "$(sort -u "$T/ns" | wc -l)" 1 "five sandboxes one after another share one namespace in turn"
ok $(grep -q 'cannot let sandboxes bind' "$T/dsecd.log"; [ $? = 1 ]; echo $?) \
	"no warning in the log"

if command -v nft >/dev/null && command -v ip >/dev/null; then
	d=$(new --network allowlist --allow 10.99.0.1:80)
	nd=$(netns_of "$d")
	destroy "$d"
	e=$(new)
	ne=$(netns_of "$e")
	ok $([ -n "$nd" ] && [ "$nd" != "$ne" ]; echo $?) \
		"an allowlisted sandbox's namespace (dsecd's veth and rules) is not given to another"
	destroy "$e"
else
	skip "needs ip and nft"
fi

# A lost sandbox (its init killed) frees its namespace with it.
f=$(new)
nf=$(netns_of "$f")
init=$(for d in $(container_cgroups); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | head -1)
kill -9 "$init"
sleep 0.5
destroy "$f"
g=$(new)
ng=$(netns_of "$g")
ok $([ "$ng" != "$nf" ]; echo $?) "a lost sandbox's namespace is not given to another"
destroy "$g"
stop_dsecd

start_dsecd --set backends=container --set container.net_reuse=false
for i in 1 2 3; do
	dsec-run --backend container -c "$COOKIE" >> "$T/ns2"
done
is "$(sort -u "$T/ns2" | wc -l)" 3 "container.net_reuse=false: each sandbox has a namespace of its own"
run dsec-run --backend container -c 'cat /proc/sys/net/ipv4/ip_unprivileged_port_start'
is "$OUT" "0" "... and may bind every port"
stop_dsecd
ok $(grep -q 'survive\|BUG' "$T/dsecd.log"; [ $? = 1 ]; echo $?) "the daemon logged no failure"
