/* fncall-preload.so - the template of a shell runtime's units.
 *
 * Executing the shell (fork + exec of dash: an address space to build,
 * the dynamic linker's relocations, CPU feature probing, hundreds of page
 * faults) cost more than everything else in a call on machines where page
 * faults and address-space set-up are slow.  So a unit of a shell runtime
 * executes the shell only once: the zygote starts the unit's pid 1 as
 *
 *     execve(/bin/sh, [sh -c "exit 120" pad...], [LD_PRELOAD=this, DSEC_FNCALL_UNIT=cfg, pad...])
 *
 * and this object's constructor, which runs before the shell's main, never
 * returns in pid 1: it serves the unit's calls one after the other.  For
 * each call pid 1 forks a child, which waits for the job on the unit
 * socket (fd 3), sets the call up (descriptors, sandbox scratch, limits,
 * credentials, working directory), rewrites argc, argv and the environment
 * in place on the initial stack (main has not read them yet) and returns
 * from the constructor: the shell's main then runs the call exactly as if
 * it had been executed with that argv and environment.  A job the template
 * cannot run that way (another program, or more arguments or bytes than
 * the reserved stack area holds) is executed from the child instead, as
 * before.  The child never sees the constructor again and pid 1 never sees
 * a job: nothing of one call is in the memory the next call is forked from.
 *
 * When the child (the call's main process) ends, pid 1 kills everything
 * else in the pid namespace and reaps it, reports the wait status, and
 * makes the unit as new before forking the next child: a fresh /tmp unless
 * the last one is provably untouched, the sandbox scratch detached from
 * /work, and the pid counter of the namespace reset so the next call is
 * pid 2 again.  If any of that fails pid 1 exits, which ends the unit; the
 * zygote makes another.
 *
 * The unit's namespaces, cgroup, seccomp filter and no_new_privs come from
 * the zygote (see fncall-zygote-helper.c); messages are those of
 * be_fncall.h.  No stdio here: the shell owns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/prctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "be_callns.h"
#include "be_fncall.h"
#include "be_io.h"
#include "be_relayout.h"
#include "err.h"
#include "proto.h"
#include "util.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

/* Exit status of pid 1 when it cannot make the unit as new again. */
#define UNIT_BROKEN 125

/* The unit, as pid 1 set it up; read-only in the children. */
static struct {
	uid_t uid_base;		/* first uid (= gid) of the tenants' range */
	unsigned uids;		/* how many; each job names its own */
	uint64_t nofile;	/* default RLIMIT_NOFILE */
	uint64_t scratch;	/* default size of /tmp */
	uint64_t memory;	/* default RLIMIT_AS, 0 = none (cgroups do it) */
	const char *exe;	/* the runtime, as argv[0] of code jobs */
	dev_t exe_dev;		/* the file this process executes */
	ino_t exe_ino;
	struct be_area a;	/* where the calls' argv and environment go */
	struct stat tmp_st;	/* /tmp when it was mounted */
	struct statfs tmp_fs;	/* and its counters */
	int last_pid;		/* /proc/sys/kernel/ns_last_pid, -1 if absent */
	int null_fd;		/* /dev/null, stdin of calls that have none */
	struct be_callns ns;	/* the unit's network and IPC namespaces */
} u = { .last_pid = -1, .null_fd = -1, .ns = BE_CALLNS_INIT };

/* A job as the child reads it. */
struct job {
	struct dsec_msg msg;		/* parsed datagram */
	struct dsec_msg body;		/* parsed body memfd, if any */
	const msgpack_object *m;	/* map holding argv/code/env/cwd */
	int fd_in, fd_out, fd_err, fd_tree;	/* received descriptors or -1 */
	uint64_t nofile, disk, memory;	/* limits, 0 = default */
	uint64_t uid;			/* uid and gid of the call (its tenant's) */
};

static void unit_send(const char *t, int64_t status, int errnum, const char *msg)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, msg ? 3 : 2);
	dsec_pk_kv_str(&p, "t", t);
	if (msg) {
		dsec_pk_kv_i64(&p, "errno", errnum);
		dsec_pk_kv_str(&p, "msg", msg);
	} else {
		dsec_pk_kv_i64(&p, "status", status);
	}
	(void)!send(FC_UNIT_FD, p.sb.data, p.sb.size, MSG_NOSIGNAL);
	dsec_pk_free(&p);
}

/* The call cannot start: say why (the zygote reports it) and end. */
static _Noreturn void job_fail(int errnum, const char *fmt, ...) DSEC_PRINTF(2, 3);
static _Noreturn void job_fail(int errnum, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	unit_send("err", 0, errnum, msg);
	_exit(127);
}

static void parse_job(struct job *j, const void *buf, size_t len, const int *fds, int nfds)
{
	const msgpack_object *names;
	struct dsec_err err;
	int fd_body = -1;

	j->fd_in = j->fd_out = j->fd_err = j->fd_tree = -1;
	if (dsec_msg_parse(&j->msg, buf, len, FC_MSG_MAX, &err) < 0)
		job_fail(EINVAL, "bad job: %s", err.msg);
	names = dsec_map_get(j->msg.root, "fds");
	if (names && names->type == MSGPACK_OBJECT_ARRAY) {
		for (uint32_t i = 0; i < names->via.array.size && (int)i < nfds; i++) {
			const msgpack_object *o = &names->via.array.ptr[i];
			const char *s = o->type == MSGPACK_OBJECT_STR ? o->via.str.ptr : "";
			size_t n = o->type == MSGPACK_OBJECT_STR ? o->via.str.size : 0;

			if (n == 2 && !memcmp(s, "in", 2))
				j->fd_in = fds[i];
			else if (n == 3 && !memcmp(s, "out", 3))
				j->fd_out = fds[i];
			else if (n == 3 && !memcmp(s, "err", 3))
				j->fd_err = fds[i];
			else if (n == 4 && !memcmp(s, "tree", 4))
				j->fd_tree = fds[i];
			else if (n == 4 && !memcmp(s, "body", 4))
				fd_body = fds[i];
		}
	}
	dsec_get_u64(j->msg.root, "nofile", &j->nofile, NULL);
	dsec_get_u64(j->msg.root, "disk", &j->disk, NULL);
	dsec_get_u64(j->msg.root, "memory", &j->memory, NULL);
	if (dsec_get_u64(j->msg.root, "uid", &j->uid, NULL) < 0 || j->uid < u.uid_base ||
	    j->uid - u.uid_base >= u.uids)
		job_fail(EINVAL, "bad job: no uid of the tenants' range");
	j->m = j->msg.root;
	if (fd_body >= 0) {
		struct stat st;
		char *b;

		if (fstat(fd_body, &st) < 0 || st.st_size <= 0 || st.st_size > (64 << 20))
			job_fail(EINVAL, "bad job body");
		b = xmalloc((size_t)st.st_size);
		if (pread(fd_body, b, (size_t)st.st_size, 0) != st.st_size)
			job_fail(EIO, "cannot read the job body");
		if (dsec_msg_parse(&j->body, b, (size_t)st.st_size, (size_t)st.st_size, &err) < 0)
			job_fail(EINVAL, "bad job body: %s", err.msg);
		j->m = j->body.root;
		close(fd_body);
	}
}

/* The PATH of envp, or the default. */
static const char *env_path(char **envp)
{
	for (char **e = envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			return *e + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

/* execve() argv[0] along PATH from envp, as execvpe would with PATH taken
 * from the job's environment rather than ours. */
static int exec_path(char **argv, char **envp)
{
	const char *path = env_path(envp);
	int saved = ENOENT;

	if (strchr(argv[0], '/')) {
		execve(argv[0], argv, envp);
		return -errno;
	}
	for (const char *p = path; ; ) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		char full[PATH_MAX];

		if (snprintf(full, sizeof(full), "%.*s%s%s", (int)n, p, n ? "/" : "",
			     argv[0]) < (int)sizeof(full)) {
			execve(full, argv, envp);
			if (errno == EACCES)
				saved = EACCES;
			else if (errno != ENOENT && errno != ENOTDIR)
				saved = errno;
		}
		if (!c)
			break;
		p = c + 1;
	}
	return -saved;
}

/* Whether st is a regular file that uid (and the same gid) may execute. */
static bool runnable(const struct stat *st, uid_t uid)
{
	if (!S_ISREG(st->st_mode))
		return false;
	if (st->st_uid == uid)
		return st->st_mode & S_IXUSR;
	if (st->st_gid == uid)
		return st->st_mode & S_IXGRP;
	return st->st_mode & S_IXOTH;
}

/* Would exec_path(argv, envp) execute this very program for uid?  *name
 * gets the base name of the path it would use (the process name exec
 * would set). */
static bool is_self(char **argv, char **envp, uid_t uid, char *name, size_t len)
{
	struct stat st;
	const char *found = NULL, *slash;
	char full[PATH_MAX];

	if (strchr(argv[0], '/')) {
		if (stat(argv[0], &st) == 0 && runnable(&st, uid))
			found = argv[0];
	} else {
		for (const char *p = env_path(envp); ; ) {
			const char *c = strchr(p, ':');
			size_t n = c ? (size_t)(c - p) : strlen(p);

			if (snprintf(full, sizeof(full), "%.*s%s%s", (int)n, p, n ? "/" : "",
				     argv[0]) < (int)sizeof(full) &&
			    stat(full, &st) == 0 && runnable(&st, uid)) {
				found = full;
				break;
			}
			if (!c)
				break;
			p = c + 1;
		}
	}
	if (!found || st.st_dev != u.exe_dev || st.st_ino != u.exe_ino)
		return false;
	slash = strrchr(found, '/');
	slash = slash ? slash + 1 : found;
	/* The kernel keeps the first 15 bytes as the process name. */
	memset(name, 0, len);
	memcpy(name, slash, strnlen(slash, len - 1));
	return true;
}

/* The child: wait for the job and become it.  Returns (to the shell's
 * main) only when the template runs the call; else executes or exits. */
static void child_main(void)
{
	static char buf[FC_MSG_MAX];
	struct job j = { 0 };
	int fds[FC_MAX_FDS], nfds, n;
	char **argv = NULL, **envp = NULL, *code = NULL, *cwd = NULL, name[16] = "";
	struct rlimit rl;
	bool self = false;

	n = be_recv_fds(FC_UNIT_FD, buf, sizeof(buf), fds, FC_MAX_FDS, &nfds, 0);
	if (n <= 0)
		_exit(0);	/* the zygote went away */
	parse_job(&j, buf, (size_t)n, fds, nfds);
	if (dsec_get_strv(j.m, "argv", &argv, NULL) < 0 || !argv || !argv[0]) {
		if (dsec_get_str(j.m, "code", &code, NULL) < 0 || !code)
			job_fail(EINVAL, "job has neither argv nor code");
		dsec_strv_free(argv);
		argv = xcalloc(4, sizeof(*argv));
		argv[0] = xstrdup(u.exe);
		argv[1] = xstrdup("-c");
		argv[2] = code;
		self = true;	/* argv[0] is the shell pid 1 executes */
	}
	if (dsec_get_strv(j.m, "env", &envp, NULL) < 0 || !envp)
		envp = xcalloc(1, sizeof(*envp));
	if (dsec_get_str(j.m, "cwd", &cwd, NULL) < 0 || !cwd)
		cwd = xstrdup(j.fd_tree >= 0 ? "/work" : "/tmp");
	if (j.m != j.msg.root)
		dsec_msg_free(&j.body);
	dsec_msg_free(&j.msg);

	if (self) {
		const char *b = strrchr(u.exe, '/');

		memcpy(name, b ? b + 1 : u.exe, strnlen(b ? b + 1 : u.exe, sizeof(name) - 1));
	} else {
		self = is_self(argv, envp, (uid_t)j.uid, name, sizeof(name));
	}
	self = self && be_area_relayout(&u.a, argv, envp);

	if (j.disk && j.disk != u.scratch) {
		char opt[64];

		snprintf(opt, sizeof(opt), "size=%llu", (unsigned long long)j.disk);
		if (mount(NULL, "/tmp", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, opt) < 0)
			job_fail(errno, "cannot resize /tmp: %s", strerror(errno));
	}
	if (j.fd_tree >= 0 &&
	    syscall(SYS_move_mount, j.fd_tree, "", AT_FDCWD, "/work", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		job_fail(errno, "cannot attach the sandbox scratch: %s", strerror(errno));
	if (j.fd_in < 0 && (j.fd_in = u.null_fd) < 0)
		job_fail(EIO, "no /dev/null for standard input");
	if (j.fd_out < 0 || j.fd_err < 0)
		job_fail(EINVAL, "job without stdout or stderr");
	if (dup2(j.fd_in, 0) < 0 || dup2(j.fd_out, 1) < 0 || dup2(j.fd_err, 2) < 0)
		job_fail(errno, "cannot set up stdio: %s", strerror(errno));

	rl.rlim_cur = rl.rlim_max = j.nofile ? j.nofile : u.nofile;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		job_fail(errno, "cannot set the open files limit: %s", strerror(errno));
	if (u.memory) {
		/* No cgroup: the address-space limit is the next best thing. */
		rl.rlim_cur = rl.rlim_max = j.memory ? j.memory : u.memory;
		setrlimit(RLIMIT_AS, &rl);
	}
	/* No supplementary groups, RLIMIT_CORE 0, default signal actions and
	 * an empty mask: pid 1's, inherited. */
	if (setresgid((gid_t)j.uid, (gid_t)j.uid, (gid_t)j.uid) < 0 ||
	    setresuid((uid_t)j.uid, (uid_t)j.uid, (uid_t)j.uid) < 0)
		job_fail(errno, "cannot drop privileges: %s", strerror(errno));
	if (chdir(cwd) < 0)
		job_fail(errno, "cannot change directory to '%s': %s", cwd, strerror(errno));
	free(cwd);
	/* no_new_privs and the seccomp filter are the zygote's, inherited. */
	if (!self) {
		n = -exec_path(argv, envp);
		job_fail(n, "cannot execute '%s': %s", argv[0], strerror(n));
	}
	/* What an exec would have done: close the unit socket and every other
	 * descriptor above stderr (they are close-on-exec), make the process
	 * dumpable again after the uid change (its /proc files are its own),
	 * and name it after the program. */
	syscall(SYS_close_range, 3, ~0U, 0);
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
	dsec_strv_free(argv);
	dsec_strv_free(envp);
}

/* /tmp as a call left it: untouched (no entry made, nothing written, not
 * resized) or replaced by a fresh tmpfs.  0 or -errno. */
static int fresh_tmp(void)
{
	struct stat st;
	struct statfs fs;
	char opt[64];

	if (stat("/tmp", &st) == 0 && statfs("/tmp", &fs) == 0 && st.st_ino == u.tmp_st.st_ino &&
	    st.st_dev == u.tmp_st.st_dev && st.st_nlink == u.tmp_st.st_nlink &&
	    st.st_mtim.tv_sec == u.tmp_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == u.tmp_st.st_mtim.tv_nsec &&
	    st.st_ctim.tv_sec == u.tmp_st.st_ctim.tv_sec &&
	    st.st_ctim.tv_nsec == u.tmp_st.st_ctim.tv_nsec &&
	    fs.f_blocks == u.tmp_fs.f_blocks && fs.f_bfree == u.tmp_fs.f_bfree &&
	    fs.f_files == u.tmp_fs.f_files && fs.f_ffree == u.tmp_fs.f_ffree)
		return 0;
	if (umount2("/tmp", MNT_DETACH) < 0)
		return -errno;
	snprintf(opt, sizeof(opt), "size=%llu,mode=1777", (unsigned long long)u.scratch);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0 ||
	    stat("/tmp", &u.tmp_st) < 0 || statfs("/tmp", &u.tmp_fs) < 0)
		return -errno;
	return 0;
}

/* After a call: detach what it had at /work, renew /tmp, replace the
 * network or IPC namespace if the call left something in it, restart pids
 * at 2.  Everything else of the call died with its processes. */
static int renew(void)
{
	int rc, used;

	while (umount2("/work", MNT_DETACH) == 0)
		;
	if (errno != EINVAL)
		return -errno;
	if ((rc = fresh_tmp()) < 0)
		return rc;
	if ((used = be_callns_used(&u.ns)) && (rc = be_callns_fresh(&u.ns, used, "/work")) < 0)
		return rc;
	if (u.last_pid >= 0 && pwrite(u.last_pid, "1", 1, 0) != 1)
		return -errno;
	return 0;
}

/* Pid 1: fork a child per call, wait for it, clean up.  Returns only in
 * a child that is to run the call. */
static void unit_loop(void)
{
	char buf[256];
	ssize_t n;

	/* Wait until the zygote has put us into our cgroup. */
	do
		n = recv(FC_UNIT_FD, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		_exit(0);
	/* The exec (once per unit) ran at idle priority; the calls do not. */
	struct sched_param sp = { 0 };
	sched_setscheduler(0, SCHED_OTHER, &sp);
	for (;;) {
		pid_t child = fork(), p;
		int st = 0;

		if (child == 0) {
			child_main();
			return;
		}
		if (child < 0) {
			unit_send("err", 0, errno, "cannot fork");
			unit_send("st", 0, 0, NULL);
			_exit(UNIT_BROKEN);
		}
		for (;;) {
			p = waitpid(-1, &st, __WALL);
			if (p == child)
				break;
			if (p < 0 && errno != EINTR)
				_exit(UNIT_BROKEN);
		}
		/* The call ends with its main process: nothing else of it
		 * may outlive it.  All our namespace's processes descend from
		 * us (what the main process left was handed to us when it
		 * died), so no child left means none left: the usual call
		 * costs one wait, not a kill that walks every task. */
		if (!(waitpid(-1, NULL, WNOHANG | __WALL) < 0 && errno == ECHILD)) {
			kill(-1, SIGKILL);
			while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
				;
		}
		unit_send("st", st, 0, NULL);
		if (renew() < 0)
			_exit(UNIT_BROKEN);
	}
}

/* The job's fields the zygote gives pid 1 in DSEC_FNCALL_UNIT:
 * "uid_base uids nofile scratch memory exe". */
static bool parse_unit(const char *s)
{
	unsigned long long v[5];
	int off = 0;

	if (sscanf(s, "%llu %llu %llu %llu %llu %n", &v[0], &v[1], &v[2], &v[3], &v[4], &off) < 5 ||
	    !off || s[off] != '/')
		return false;
	u.uid_base = (uid_t)v[0];
	u.uids = (unsigned)v[1];
	u.nofile = v[2];
	u.scratch = v[3];
	u.memory = v[4];
	u.exe = s + off;
	return true;
}

__attribute__((constructor)) static void fncall_unit(int argc, char **argv, char **envp)
{
	const char *cfg = getenv("DSEC_FNCALL_UNIT");
	static const char title[] = "fncall-unit";
	struct stat st;

	if (!cfg || getpid() != 1)
		return;
	/* The unit socket must not reach what a call executes. */
	if (!parse_unit(cfg) || stat("/proc/self/exe", &st) < 0 ||
	    fcntl(FC_UNIT_FD, F_SETFD, FD_CLOEXEC) < 0)
		_exit(UNIT_BROKEN);
	u.exe_dev = st.st_dev;
	u.exe_ino = st.st_ino;
	u.exe = xstrdup(u.exe);
	be_area_find(&u.a, argc, argv, envp);
	if (stat("/tmp", &u.tmp_st) < 0 || statfs("/tmp", &u.tmp_fs) < 0)
		_exit(UNIT_BROKEN);
	u.last_pid = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	u.null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* The unit's own network and IPC namespaces, made here, while it
	 * warms up, not when a call comes; at normal priority, though: making
	 * them takes global kernel locks (the RTNL among them), which an
	 * idle-priority task on a busy CPU could hold for a long time. */
	struct sched_param sp = { 0 };

	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (be_callns_fresh(&u.ns, CLONE_NEWNET | CLONE_NEWIPC, "/work") < 0)
		_exit(UNIT_BROKEN);
	sched_setscheduler(0, SCHED_IDLE, &sp);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* What every call starts with, set once here for all the children:
	 * no supplementary groups, no core files, default signal actions (the
	 * zygote's unit_main reset them before the exec; we install none) and
	 * an empty signal mask. */
	struct rlimit rl = { 0, 0 };
	sigset_t none;

	if (setgroups(0, NULL) < 0 || setrlimit(RLIMIT_CORE, &rl) < 0)
		_exit(UNIT_BROKEN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* /proc/1/cmdline, which the calls can read, says what we are. */
	be_area_title(&u.a, title);
	prctl(PR_SET_NAME, (unsigned long)title, 0, 0, 0);
	unit_loop();
}
