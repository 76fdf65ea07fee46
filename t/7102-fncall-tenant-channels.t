#!/bin/bash
# fncall tenants must not reach each other through the kernel's namespaced
# channels: a System V shared memory segment, message queue or semaphore
# set, a POSIX message queue, a TCP listener on 127.0.0.1 or an abstract
# UNIX socket made by one call are invisible to every other call (another
# sandbox's, a one-shot call), at the same time or later, and nothing a
# call's sockets left (TIME_WAIT) shows in the next one.  Inside one call
# loopback and System V IPC still work, and the execs of one sandbox still
# share its files.  One zygote: the worst case, every call of the runtime
# goes through the same pool.
. "$(dirname "$0")/lib.sh"

need_fncall

plan 16

start_dsecd --set backends=fncall --set fncall.zygotes=1 --set fncall.pool_size=4 ||
	bail "dsecd did not start"

# MODE=hold: make every channel (key 0x7102, port 7102, "\0dsec-7102",
# mqueue /dsec7102) with a secret in it, say ready in /work, serve until
# /work/stop or 25 s, print what it served.  MODE=make: make the IPC objects
# and return (they outlive the call).  MODE=probe: try each from outside.
# MODE=loop: a TCP round trip and a shm segment inside one call.
PY='
import ctypes, errno, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
KEY, PORT, ABS, MQ = 0x7102, 7102, "\0dsec-7102", b"/dsec7102"
IPC_CREAT, O_CREAT, O_RDWR = 0o1000, 0o100, 2
def err():
    return errno.errorcode.get(ctypes.get_errno(), "E?")
def make_ipc():
    shm = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    p = libc.shmat(shm, None, 0)
    ctypes.memmove(p, b"SECRET-7102", 11)
    libc.shmdt(ctypes.c_void_p(p))
    libc.msgget(KEY, IPC_CREAT | 0o666)
    libc.semget(KEY, 1, IPC_CREAT | 0o666)
    libc.mq_open(MQ, O_CREAT | O_RDWR, 0o666, None)
def probe():
    r = []
    shm = libc.shmget(KEY, 0, 0)
    r.append("shm=" + (ctypes.string_at(libc.shmat(shm, None, 0), 11).decode() if shm >= 0 else err()))
    r.append("msg=" + ("found" if libc.msgget(KEY, 0) >= 0 else err()))
    r.append("sem=" + ("found" if libc.semget(KEY, 0, 0) >= 0 else err()))
    r.append("mq=" + ("found" if libc.mq_open(MQ, 0, 0, None) >= 0 else err()))
    for name, fam, addr in (("tcp", socket.AF_INET, ("127.0.0.1", PORT)), ("unix", socket.AF_UNIX, ABS)):
        try:
            c = socket.socket(fam)
            c.settimeout(2)
            c.connect(addr)
            r.append(name + "=got " + c.recv(16).decode())
        except OSError as e:
            r.append(name + "=" + errno.errorcode.get(e.errno, str(e)))
    try:
        socket.socket().bind(("127.0.0.1", PORT))
        r.append("bind=ok")
    except OSError as e:
        r.append("bind=" + errno.errorcode.get(e.errno, str(e)))
    r.append("tcp_table=%d" % (len(open("/proc/net/tcp").readlines()) - 1))
    print(" ".join(r))
mode = os.environ["MODE"]
if mode == "make":
    make_ipc()
    print("made")
elif mode == "probe":
    probe()
elif mode == "loop":
    s = socket.socket()
    s.bind(("127.0.0.1", 7103))
    s.listen(1)
    c = socket.create_connection(("127.0.0.1", 7103))
    a, _ = s.accept()
    c.sendall(b"ping")
    got = a.recv(4)
    a.close(); c.close(); s.close()
    shm = libc.shmget(0x7103, 4096, IPC_CREAT | 0o600)
    p = libc.shmat(shm, None, 0)
    ctypes.memmove(p, b"mine", 4)
    print(got.decode(), ctypes.string_at(libc.shmat(shm, None, 0), 4).decode())
else:
    make_ipc()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", PORT))
    s.listen(8)
    u = socket.socket(socket.AF_UNIX)
    u.bind(ABS)
    u.listen(8)
    for l in (s, u):
        l.settimeout(0.1)
    open("ready", "w").close()
    n, end = 0, time.time() + 25
    while time.time() < end and not os.path.exists("stop"):
        for l in (s, u):
            try:
                c, _ = l.accept()
                c.sendall(b"fake")
                c.close()
                n += 1
            except OSError:
                pass
    print("served", n)
'
CLEAN='shm=ENOENT msg=ENOENT sem=ENOENT mq=ENOENT tcp=ECONNREFUSED unix=ECONNREFUSED bind=ok tcp_table=0'
# clean N DESCRIPTION CMD...: CMD, N times, must print $CLEAN each time.
clean() {
	local n=$1 what=$2 bad=0 seen= out i
	shift 2
	for i in $(seq "$n"); do
		out=$("$@" 2>&1)
		[ "$out" = "$CLEAN" ] || { bad=$((bad + 1)); seen=$out; }
	done
	is "$bad" 0 "$what${seen:+ ($seen)}"
}
mk() {
	local id
	id=$(dsec-run --keep --runtime python3 -c 'pass' 2>&1 >/dev/null | head -1)
	echo "${id##* }"
}
a=$(mk); b=$(mk); c=$(mk)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || bail "cannot create the sandboxes"

# A holds every channel while B, C and one-shot calls look for them.
dsec-run --id "$a" --timeout 40 --env MODE=hold -c "$PY" >"$T/hold.out" 2>&1 &
holder=$!
for i in $(seq 150); do
	[ "$(dsec-run --id "$a" -c 'import os; print(os.path.exists("ready"))' 2>/dev/null)" = True ] && break
	sleep 0.1
done
is "$(dsec-run --id "$a" -c 'import os; print(os.path.exists("ready"))' 2>&1)" "True" \
	"a concurrent exec of the same sandbox sees the holder's file in /work"
clean 6 "6 execs of another sandbox, during the holder's call, reach none of its channels" \
	dsec-run --id "$b" --timeout 20 --env MODE=probe -c "$PY"
clean 6 "... nor do 6 of a third one" dsec-run --id "$c" --timeout 20 --env MODE=probe -c "$PY"
clean 8 "8 one-shot calls during the holder's call reach none of its channels" \
	dsec-run --runtime python3 --timeout 20 --env MODE=probe -c "$PY"
# Several at once, beside the holder (each in a unit of its own).
pids=
for i in $(seq 4); do
	dsec-run --runtime python3 --timeout 20 --env MODE=probe -c "$PY" >"$T/conc.$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
bad=0
for i in $(seq 4); do [ "$(cat "$T/conc.$i")" = "$CLEAN" ] || bad=$((bad + 1)); done
is "$bad" 0 "4 concurrent one-shot calls reach none of them either"
dsec-run --id "$a" -c 'open("stop", "w").close()' >/dev/null 2>&1
wait "$holder"
is "$(cat "$T/hold.out")" "served 0" "the holder's listeners were reached by nobody"

# What calls leave behind: IPC objects outlive their call, TIME_WAIT
# sockets their processes.
run dsec-run --id "$b" --env MODE=make -c "$PY"
is "$OUT" "made" "a sandbox's exec leaves IPC objects behind"
run dsec-run --runtime python3 --env MODE=make -c "$PY"
is "$OUT" "made" "... and so does a one-shot call"
run dsec-run --runtime python3 --env MODE=loop -c "$PY"
is "$OUT" "ping mine" "loopback TCP and System V shared memory work inside one call"
clean 12 "12 later one-shot calls (every unit) meet none of it" \
	dsec-run --runtime python3 --timeout 20 --env MODE=probe -c "$PY"
clean 6 "6 later execs of another sandbox meet none of it" \
	dsec-run --id "$c" --timeout 20 --env MODE=probe -c "$PY"
clean 1 "nor does the next exec of the sandbox that made them (state between execs is files)" \
	dsec-run --id "$b" --timeout 20 --env MODE=probe -c "$PY"

# The sh runtime (a zygote of its own): what ipcmk makes, later calls'
# ipcs does not list.
if command -v ipcs >/dev/null 2>&1 && command -v ipcmk >/dev/null 2>&1; then
	run dsec-run -c 'ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && ipcs -m -q | grep -c "^0x"'
	is "$OUT" "2" "an sh call makes a segment and a queue"
	bad=0
	for i in $(seq 8); do
		[ "$(dsec-run -c 'ipcs -m -q | grep -c "^0x"' 2>&1)" = 0 ] || bad=$((bad + 1))
	done
	is "$bad" 0 "the ipcs of 8 later sh calls lists none"
else
	skip "needs ipcs and ipcmk"
	skip "needs ipcs and ipcmk"
fi
# Within a sandbox, what is documented still holds.
run dsec-run --id "$b" -c 'open("f", "w").write("kept")'
run dsec-run --id "$b" -c 'print(open("/work/f").read())'
is "$OUT" "kept" "a sandbox's files persist between its execs"
run dsec-run --runtime python3 -c 'import socket; a, b = socket.socketpair(); a.send(b"x"); print(b.recv(1).decode())'
is "$OUT" "x" "socketpair works inside a call"
