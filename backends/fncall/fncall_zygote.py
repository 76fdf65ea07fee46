# fncall_zygote.py - the warm python3 template of the fncall backend.
#
# Started by fncall-zygote (the C helper) inside the runtime's isolation:
# private mount/net/ipc/uts namespaces, the minimal read-only root, as root.
# Python takes ~20 ms to start, so calls cannot exec it: this process warms
# up once, then, for every {t:"spawn"} from the helper on fd 3, clones a
# unit with CLONE_PARENT (so the unit is the helper's child) in new pid and
# mount namespaces (uts is the helper's) and answers {t:"pid", pid}.  The
# seccomp filter and no_new_privs are the helper's, inherited through exec.
#
# A unit is pid 1 of its namespace: it mounts /proc, masked as the helper
# lists it in PROC_DIR/plan (be_procmask.h) plus the made-up meminfo of
# its slot, which the spawn request names, and a private /tmp,
# moves into network and IPC namespaces of its own (see be_callns.h),
# waits for {t:"go"} (the helper has placed it in its cgroup), then serves
# calls one after the other: for each it forks a child, which waits for the
# job, drops to the call's uid and runs `code` with exec() in a fresh
# namespace, or execs argv.  When the child ends pid 1 kills whatever else
# is left in the namespace, reports the child's wait status as
# {t:"st", status}, renews /tmp, detaches /work, replaces the network or
# IPC namespace if the call left something in it, resets the pid counter,
# and forks the next child.  Messages are those of be_fncall.h.
import sys
sys.path.append('/usr/lib/python3/dist-packages')

import builtins
import ctypes
import fcntl
import io
import os
import resource
import signal
import socket
import struct
import traceback

import msgpack

# Modules most snippets use, loaded once here so calls do not pay for them.
import collections, functools, itertools, json, math, random, re, string, time  # noqa: E401,F401

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_PARENT = 0x00008000
SIGCHLD = 17
SYS_clone = {'x86_64': 56, 'aarch64': 220}.get(os.uname().machine, 56)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 2, 4, 8, 32, 4096
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x8914, 0x1, 0x40
IPC_SHM_INFO, IPC_MSG_INFO, IPC_SEM_INFO = 14, 12, 19
MQ_EMPTY_SIZE = 40   # "." and "..": see be_callns.c
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 4, 38, 22
SECCOMP_MODE_FILTER = 2
MAX_MSG = 64 * 1024
UNIT_FD = 3
PROC_DIR = '/.dsec/proc'   # FC_PROC_DIR
PROC_PLAN = 'plan'         # FC_PROC_PLAN

libc = ctypes.PyDLL(None, use_errno=True)   # PyDLL: keeps the GIL across calls
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                       ctypes.c_ulong]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_POPULATE_WRITE = 23   # Linux 5.14
pyapi = ctypes.pythonapi


def parse_args(argv):
    cfg = {'uid_base': 2000000000, 'uids': 1, 'scratch': 64 << 20, 'nofile': 256, 'memory': 0}
    it = iter(argv)
    for a in it:
        if a.startswith('--') and a[2:] in cfg:
            cfg[a[2:]] = int(next(it))
        else:
            raise SystemExit('fncall_zygote.py: unknown argument %r' % a)
    return cfg


CFG = parse_args(sys.argv[1:])
os.close(4)   # the seccomp filter's BPF: already loaded by the C helper, inherited


def proc_binds():
    """The bind mounts that mask a unit's /proc but for its meminfo, as the
    C helper lists them once for this kernel: [(src, dst)]."""
    with open(os.path.join(PROC_DIR, PROC_PLAN), 'rb') as f:
        return [tuple(ln.split(b'\t')) for ln in f.read().splitlines() if ln]


PROC_BINDS = proc_binds()


def send(sock, t, **kw):
    kw['t'] = t
    try:
        sock.send(msgpack.packb(kw))
    except OSError:
        pass


def fail(sock, err, msg):
    send(sock, 'err', errno=err, msg=msg)
    os._exit(127)


def mount(src, dst, typ, flags, data):
    if libc.mount(src, dst, typ, flags, data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, 'cannot mount %s: %s' % (dst.decode(), os.strerror(e)))


NOBODY = 65534   # the uid of the rehearsal (learn_pages), no tenant's


def run_job(sock, msg, fds, rehearsal=False):
    """Pid 2: become the call, as the job's uid (its tenant's).  Never
    returns."""
    job = msgpack.unpackb(msg, raw=False)
    uid = job.get('uid')
    if not (rehearsal and uid == NOBODY) and not (
            isinstance(uid, int) and 0 <= uid - CFG['uid_base'] < CFG['uids']):
        fail(sock, 22, "bad job: no uid of the tenants' range")
    names = job.get('fds') or []
    got = dict(zip(names, fds))
    body = job
    if 'body' in got:
        with os.fdopen(got['body'], 'rb') as f:
            body = msgpack.unpackb(f.read(), raw=False)
    argv, code = body.get('argv'), body.get('code')
    env = body.get('env') or []
    cwd = body.get('cwd') or ('/work' if 'tree' in got else '/tmp')
    disk = job.get('disk') or 0
    if disk and disk != CFG['scratch']:
        try:
            mount(None, b'/tmp', None, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                  b'size=%d' % disk)
        except OSError as e:
            fail(sock, e.errno, str(e))
    if 'tree' in got:
        L = ctypes.c_long
        if libc.syscall(L(429), L(got['tree']), b'', L(-100), b'/work', L(4)) != 0:  # move_mount
            e = ctypes.get_errno()
            fail(sock, e, 'cannot attach the sandbox scratch: %s' % os.strerror(e))
    if 'out' not in got or 'err' not in got:
        fail(sock, 22, 'job without stdout or stderr')
    fin = got.get('in')
    if fin is None:
        fin = os.open('/dev/null', os.O_RDONLY)
    os.dup2(fin, 0)
    os.dup2(got['out'], 1)
    os.dup2(got['err'], 2)
    for fd in set(fds) | {fin}:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    try:
        n = job.get('nofile') or CFG['nofile']
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if CFG['memory']:
            m = job.get('memory') or CFG['memory']
            resource.setrlimit(resource.RLIMIT_AS, (m, m))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # The uid change made us non-dumpable (no exec follows to undo it):
        # give the call its own /proc/self back.
        libc.prctl(PR_SET_DUMPABLE, 1, None, 0, 0)
        os.chdir(cwd)
    except OSError as e:
        fail(sock, e.errno or 5, 'cannot set up the call: %s' % e)
    # no_new_privs and the seccomp filter are the C helper's, inherited.
    environ = {}
    for kv in env:
        k, _, v = kv.partition('=')
        environ[k] = v
    os.environ.clear()
    os.environ.update(environ)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if argv:
        try:
            os.execvpe(argv[0], argv, environ)
        except OSError as e:
            fail(sock, e.errno or 2, "cannot execute '%s': %s" % (argv[0], e.strerror))
    sock.close()
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, 'r', closefd=False)),
                                 encoding='utf-8', errors='surrogateescape')
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)),
                                  encoding='utf-8', errors='surrogateescape')
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, 'w', closefd=False)),
                                  encoding='utf-8', errors='backslashreplace',
                                  line_buffering=True)
    sys.argv = ['-c']
    rc = 0
    try:
        glob = {'__name__': '__main__', '__builtins__': builtins}
        exec(compile(code or '', '<code>', 'exec'), glob)
    except SystemExit as e:
        if e.code is None:
            rc = 0
        elif isinstance(e.code, int):
            rc = e.code & 0xff
        else:
            print(e.code, file=sys.stderr)
            rc = 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(rc)


def prewarm():
    """Touch, before the job arrives, the pages a typical call writes.

    Every page pid 2 writes is copied on first write (copy-on-write from
    the template); on hosts where page faults are slow (shadow paging) that
    dominates a call, so pay for it while nobody waits."""
    out = io.StringIO()
    old = sys.stdout
    sys.stdout = out
    try:
        exec(compile('import os, sys\nx = [i * 2 for i in range(100)]\nprint(sum(x), "ok")\n',
                     '<warm>', 'exec'), {'__name__': '__main__', '__builtins__': builtins})
        msgpack.unpackb(msgpack.packb({'t': 'job', 'id': 1, 'fds': ['out', 'err'],
                                       'code': 'x' * 64, 'env': ['A=B'] * 8, 'cwd': '/tmp'}),
                        raw=False)
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)),
                         encoding='utf-8', errors='surrogateescape').detach()
        traceback.format_exception_only(ValueError, ValueError('x'))
        dict(os.environ)
    except Exception:
        pass
    finally:
        sys.stdout = old


def written_ranges():
    """The pages this process made its own since the fork: present and
    mapped by it alone (pagemap bits 63 and 56), in its private writable
    mappings, as merged (start, length) ranges."""
    ranges = []
    with open('/proc/self/maps') as f:
        maps = [ln.split() for ln in f]
    fd = os.open('/proc/self/pagemap', os.O_RDONLY | os.O_CLOEXEC)
    try:
        for m in maps:
            if m[1] != 'rw-p':
                continue
            lo, hi = (int(x, 16) for x in m[0].split('-'))
            data = os.pread(fd, (hi - lo) // 4096 * 8, lo // 4096 * 8)
            for i in range(len(data) // 8):
                e = int.from_bytes(data[i * 8:i * 8 + 8], 'little')
                if e >> 63 & 1 and e >> 56 & 1:
                    a = lo + i * 4096
                    if ranges and ranges[-1][0] + ranges[-1][1] == a:
                        ranges[-1][1] += 4096
                    else:
                        ranges.append([a, 4096])
    finally:
        os.close(fd)
    return ranges


def learn_pages():
    """The pages a call's child writes from its fork until its code runs,
    learnt once per unit from a throwaway child that rehearses a typical
    call (a job received and run as run_job() runs one, printing a line to
    /dev/null) and reports them from inside it.  Later children copy those
    pages in one madvise(MADV_POPULATE_WRITE) each instead of one page
    fault each, before their job comes.  Only this trusted child reports:
    nothing a call does can change the list."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            def report():
                os.write(w, b''.join(a.to_bytes(8, 'little') + n.to_bytes(8, 'little')
                                     for a, n in written_ranges()))   # < 64 KiB: fits the pipe
            builtins._dsec_learnt = report
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            null = os.open('/dev/null', os.O_WRONLY)
            job = msgpack.packb({'t': 'job', 'id': 0, 'uid': NOBODY, 'fds': ['out', 'err'], 'memory': 0,
                                 'cpus': 0, 'pids': 0, 'nofile': 0, 'disk': 0,
                                 'code': "import os\nprint(os.environ.get('X', ''))\n"
                                         "_dsec_learnt()\n",
                                 'env': ['PATH=/usr/local/bin:/usr/bin:/bin', 'HOME=/tmp',
                                         'LANG=C.UTF-8', 'X=0'],
                                 'cwd': '/tmp'})
            socket.send_fds(b, [job], [null, null])
            msg, fds, _, _ = socket.recv_fds(a, MAX_MSG, 8)
            run_job(a, msg, fds, rehearsal=True)   # does not return
        except BaseException:
            pass
        os._exit(0)
    os.close(w)
    data = b''
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    if len(data) % 16:
        return []
    return [(int.from_bytes(data[i:i + 8], 'little'), int.from_bytes(data[i + 8:i + 16], 'little'))
            for i in range(0, len(data), 16)]


def populate(ranges):
    """Copy the learnt pages now, then read a byte of each: under shadow
    paging the first access to a page still costs a trap of its own, which
    is better paid here than in the call.  Falls back to prewarm() when the
    kernel cannot (before 5.14) or nothing was learnt."""
    if not ranges:
        prewarm()
        return
    done = []
    for a, n in ranges:
        if libc.madvise(a, n, MADV_POPULATE_WRITE) == 0:
            done.append((a, n))   # mapped and writable here: safe to read
        elif ctypes.get_errno() == 22:
            prewarm()   # EINVAL: no MADV_POPULATE_WRITE here
            return
    peek = ctypes.string_at
    for a, n in done:
        for off in range(0, n, 4096):
            peek(a + off, 1)


def fresh_tmp(state):
    """Renew /tmp unless the last call provably left it untouched."""
    st, fs = os.stat('/tmp'), os.statvfs('/tmp')
    now = (st.st_ino, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns,
           fs.f_blocks, fs.f_bfree, fs.f_files, fs.f_ffree)
    if now == state.get('tmp'):
        return
    if libc.umount2(b'/tmp', 2) != 0:   # MNT_DETACH
        e = ctypes.get_errno()
        raise OSError(e, 'cannot unmount /tmp: %s' % os.strerror(e))
    mount(b'tmpfs', b'/tmp', b'tmpfs', MS_NOSUID | MS_NODEV,
          b'size=%d,mode=1777' % CFG['scratch'])
    st, fs = os.stat('/tmp'), os.statvfs('/tmp')
    state['tmp'] = (st.st_ino, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns,
                    fs.f_blocks, fs.f_bfree, fs.f_files, fs.f_ffree)


def lo_up():
    """Bring up lo in this network namespace (a new one has it down)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack('16sh22x', b'lo', 0))
        flags = struct.unpack('16sh22x', ifr)[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack('16sh22x', b'lo', flags | IFF_UP | IFF_RUNNING))
    finally:
        s.close()


class CallNS:
    """The unit's network and IPC namespaces, as be_callns.c keeps them:
    made when the unit starts, replaced after a call only when the call
    left something in them the next call could meet."""

    def __init__(self):
        self.sockstat = None   # /proc/self/net/sockstat of the network namespace
        self.mqueue = None     # root of an mqueue fs of the IPC namespace

    def fds(self):
        return [fd for fd in (self.sockstat, self.mqueue) if fd is not None]

    def fresh(self, flags):
        flags &= CLONE_NEWNET | CLONE_NEWIPC
        if flags and libc.unshare(flags) != 0:
            e = ctypes.get_errno()
            raise OSError(e, 'cannot unshare namespaces: %s' % os.strerror(e))
        if flags & CLONE_NEWNET:
            lo_up()
            if self.sockstat is not None:
                os.close(self.sockstat)
            self.sockstat = os.open('/proc/self/net/sockstat', os.O_RDONLY | os.O_CLOEXEC)
        if flags & CLONE_NEWIPC:
            mount(b'mqueue', b'/work', b'mqueue', MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            if self.mqueue is not None:
                os.close(self.mqueue)
            self.mqueue = os.open('/work', os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            libc.umount2(b'/work', 2)   # MNT_DETACH: only the fd holds it

    def used(self):
        flags = 0
        try:
            f = os.pread(self.sockstat, 1024, 0).split()
            # sockets: used N / TCP: inuse N orphan N tw N ... / FRAG: inuse N
            if f[2] != b'0' or f[9] != b'0' or f[f.index(b'FRAG:') + 2] != b'0':
                flags |= CLONE_NEWNET
        except (OSError, TypeError, ValueError, IndexError):
            flags |= CLONE_NEWNET
        buf = ctypes.create_string_buffer(128)
        n = ctypes.c_int.from_buffer(buf)
        if libc.shmctl(0, IPC_SHM_INFO, buf) < 0 or n.value:   # used_ids
            flags |= CLONE_NEWIPC
        elif libc.msgctl(0, IPC_MSG_INFO, buf) < 0 or n.value:   # msgpool
            flags |= CLONE_NEWIPC
        elif (libc.semctl(0, 0, IPC_SEM_INFO, buf) < 0 or
              ctypes.c_int.from_buffer(buf, 28).value):   # semusz
            flags |= CLONE_NEWIPC
        elif self.mqueue is None or os.fstat(self.mqueue).st_size != MQ_EMPTY_SIZE:
            flags |= CLONE_NEWIPC
        del n
        return flags


def renew(state, last_pid):
    """After a call: detach /work, renew /tmp, replace the network or IPC
    namespace if the call left something there, restart pids at 2."""
    while libc.umount2(b'/work', 2) == 0:
        pass
    if ctypes.get_errno() != 22:   # EINVAL: nothing mounted there
        raise OSError(ctypes.get_errno(), 'cannot unmount /work')
    fresh_tmp(state)
    ns = state['ns']
    used = ns.used()
    if used:
        ns.fresh(used)
    if last_pid is not None:
        os.pwrite(last_pid, b'1', 0)


def unit_main(sock, meminfo):
    """Pid 1 of a unit: one child per call, forked before the job comes
    (it waits for it), then everything else of the call killed, the status
    reported and the unit renewed.  Pid 1 never sees a job, so nothing of
    one call is in the memory the next is forked from.  meminfo: the made-up
    /proc/meminfo of its slot.  Never returns."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, None, 0, 0)
    os.dup2(sock.fileno(), UNIT_FD, inheritable=False)
    sock.close()
    os.closerange(UNIT_FD + 1, 1 << 16)
    sock = socket.socket(fileno=UNIT_FD)
    libc.prctl(PR_SET_DUMPABLE, 0, None, 0, 0)
    state = {}
    try:
        mount(b'proc', b'/proc', b'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        for src, dst in PROC_BINDS + [(meminfo, b'/proc/meminfo')]:
            mount(src, dst, None, MS_BIND, None)
        mount(b'tmpfs', b'/tmp', b'tmpfs', MS_NOSUID | MS_NODEV,
              b'size=%d,mode=1777' % CFG['scratch'])
        st, fs = os.stat('/tmp'), os.statvfs('/tmp')
        state['tmp'] = (st.st_ino, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns,
                        fs.f_blocks, fs.f_bfree, fs.f_files, fs.f_ffree)
        # The unit's own network and IPC namespaces, made while it warms
        # up, not when a call comes.
        state['ns'] = CallNS()
        state['ns'].fresh(CLONE_NEWNET | CLONE_NEWIPC)
    except OSError as e:
        print('fncall_zygote.py: unit: %s' % e, file=sys.stderr)
        os._exit(1)
    try:
        last_pid = os.open('/proc/sys/kernel/ns_last_pid', os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        last_pid = None
    try:
        # Warm the pages the children will write, while nobody waits.
        msgpack.unpackb(msgpack.packb({'t': 'job', 'argv': ['x'] * 8, 'env': ['K=V'] * 8}))
        ranges = learn_pages()
        renew(state, last_pid)
        if not sock.recv(256):
            os._exit(0)
        while True:
            pid = os.fork()
            if pid == 0:
                for fd in state['ns'].fds() + ([] if last_pid is None else [last_pid]):
                    os.close(fd)
                populate(ranges)
                msg, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 8)
                if not msg:
                    os._exit(0)
                try:
                    run_job(sock, msg, fds)
                except BaseException as e:   # a bug here must not hang the call
                    fail(sock, 5, 'cannot start: %s' % e)
            while True:
                try:
                    p, st = os.waitpid(-1, 0)
                except InterruptedError:
                    continue
                if p == pid:
                    break
            # The call ends with its main process; nothing else of it may
            # outlive it.  All of the namespace descends from us, so no
            # child left means none left (the usual case: no kill).
            try:
                os.waitpid(-1, os.WNOHANG)
                left = True
            except ChildProcessError:
                left = False
            if left:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass   # nothing else was left
            while left:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
                except InterruptedError:
                    continue
            send(sock, 'st', status=st)
            renew(state, last_pid)
    except BaseException:
        pass
    os._exit(125)


def spawn(ctl):
    """Clone one unit as the helper's child; answer with its pid."""
    msg, fds, _, _ = socket.recv_fds(ctl, 256, 1)
    if not msg:
        os._exit(0)   # the helper went away
    if not fds:
        return
    meminfo = msgpack.unpackb(msg, raw=False).get('meminfo', '').encode()
    usock = socket.socket(fileno=fds[0])
    pyapi.PyOS_BeforeFork()
    L = ctypes.c_long
    pid = libc.syscall(L(SYS_clone), L(CLONE_PARENT | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD),
                       L(0), L(0), L(0), L(0))
    if pid == 0:
        pyapi.PyOS_AfterFork_Child()
        ctl.close()
        unit_main(usock, meminfo)
    pyapi.PyOS_AfterFork_Parent()
    usock.close()
    send(ctl, 'pid', pid=max(pid, 0))


def main():
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, None, 0, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    ctl = socket.socket(fileno=3)
    # What a call needs initialised once (codecs, the compiler's and
    # msgpack's first-use state) is done here, where every unit inherits it,
    # rather than again in each call.
    prewarm()
    import gc
    gc.collect()
    gc.freeze()   # keep the collector off the shared pages in units
    send(ctl, 'hello')
    while True:
        spawn(ctl)


if __name__ == '__main__':
    main()
