/* init-tpl.c - container-init's warm shell (ct_exec.h, container-preload.c):
 * once a sandbox ran a shell command and went quiet, the init executes that
 * shell as a template whose waiting children take the next commands that
 * would run the same program with the same credentials.  A part of
 * container-init (container-init-helper.c); what the parts share is in
 * ct_init.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "be_io.h"
#include "be_path.h"
#include "be_relayout.h"
#include "ct_exec.h"
#include "ct_init.h"
#include "util.h"

/* ---- the warm shell (ct_exec.h, container-preload.c) ---------------------- */

#define TPL_IDLE 60000		/* ms without a command before the template stops */
#define TPL_QUIET 200		/* ms without a command before one starts */
#define TPL_SLOTS 256		/* pointer slots of its argv and environment */
#define TPL_AREA (64 << 10)	/* and bytes of their strings */
#define TPL_BAD 8		/* programs remembered as unable to be templates */
#define TPL_READY 4		/* its waiting children we keep track of */

static struct {
	int sock;			/* our end of the template's socket, -1: none */
	pid_t pid;			/* the template, 0: none */
	bool said;			/* it sent a ready child at least once */
	struct {
		pid_t pid;		/* a child of it waiting for a command, 0: none */
		int fd;			/* the socket that reaches only that child */
	} ready[TPL_READY];
	int exe_fd;			/* O_PATH fd of the program it executes, -1: none */
	dev_t dev;			/* that file's identity */
	ino_t ino;
	struct timespec ctime;		/* and its last change, when it was chosen */
	off_t size;			/* and size */
	uint32_t uid, gid, flags;	/* the credentials it took (CT_X_USERNS) */
	uint64_t nofile;
	int64_t last;			/* started or last used (mono_ms) */
	int64_t busy;			/* a command last ran (mono_ms) */
	bool want;			/* start one when the sandbox is quiet */
	char exe[PATH_MAX];		/* what to execute */
	char path[1024];		/* "PATH=..." of the command that asked */
	struct { dev_t dev; ino_t ino; } bad[TPL_BAD];	/* never again */
	unsigned nbad;
} tpl = { .sock = -1, .exe_fd = -1 };

/* Would uid/gid be allowed to execute st's file? */
static bool runnable(const struct stat *st, uid_t uid, gid_t gid)
{
	if (!S_ISREG(st->st_mode))
		return false;
	if (uid == 0)
		return st->st_mode & (S_IXUSR | S_IXGRP | S_IXOTH);
	if (st->st_uid == uid)
		return st->st_mode & S_IXUSR;
	if (st->st_gid == gid)
		return st->st_mode & S_IXGRP;
	return st->st_mode & S_IXOTH;
}

/* The file exec_path(cmd, envp) would execute for uid/gid, found the same
 * way (absolute names and PATH only: a relative one depends on the
 * command's directory): its path in out and its stat in st.  False when
 * none or not sure. */
struct resolve_try {
	uid_t uid;
	gid_t gid;
	char *out;
	size_t len;
	struct stat *st;
};

static int resolve_one(const char *path, void *arg)
{
	struct resolve_try *t = arg;

	/* A relative name (an empty PATH entry too) depends on the command's
	 * directory: not ours to know. */
	if (path[0] != '/' || strlen(path) >= t->len)
		return -1;
	if (stat(path, t->st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if (!runnable(t->st, t->uid, t->gid))
		return 0;
	strcpy(t->out, path);
	return 1;
}

static bool resolve(const char *cmd, char **envp, uid_t uid, gid_t gid, char *out, size_t len,
		    struct stat *st)
{
	struct resolve_try t = { uid, gid, out, len, st };

	return be_path_each(cmd, envp, resolve_one, &t) == 1;
}

/* Whether cmd names a shell (the programs worth a template). */
static bool is_shell(const char *cmd)
{
	static const char *const shells[] = { "sh", "bash", "dash", "ash", "zsh", NULL };
	const char *b = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;

	for (int i = 0; shells[i]; i++)
		if (!strcmp(b, shells[i]))
			return true;
	return false;
}

/* Stops the template: its waiting child sees its socket close and ends,
 * and so does the template when it next tells us of one.  Reaped as
 * usual; tpl.pid stays until then. */
static void tpl_stop(void)
{
	for (int i = 0; i < TPL_READY; i++)
		if (tpl.ready[i].pid) {
			close(tpl.ready[i].fd);
			tpl.ready[i].pid = 0;
		}
	if (tpl.sock >= 0)
		close(tpl.sock);
	tpl.sock = -1;
}

/* The program's file goes with the template (or the wish for one). */
static void tpl_forget(void)
{
	if (tpl.exe_fd >= 0)
		close(tpl.exe_fd);
	tpl.exe_fd = -1;
	tpl.want = false;
}

/* Is st the file chosen for the template, unchanged since then (the
 * same inode, not written to, renamed, linked or chmod'ed: all of that
 * moves its ctime)? */
static bool tpl_same(const struct stat *st)
{
	return st->st_dev == tpl.dev && st->st_ino == tpl.ino && st->st_size == tpl.size &&
	       st->st_ctim.tv_sec == tpl.ctime.tv_sec && st->st_ctim.tv_nsec == tpl.ctime.tv_nsec;
}

/* A child of ours ended: was it the template or its waiting child? */
void tpl_reaped(pid_t pid, int st)
{
	for (int i = 0; i < TPL_READY; i++)
		if (tpl.ready[i].pid == pid) {
			close(tpl.ready[i].fd);
			tpl.ready[i].pid = 0;
		}
	if (pid != tpl.pid)
		return;
	/* Never ready: the program cannot be one (a static shell, another
	 * libc, no room); do not try it again. */
	if (!tpl.said && tpl.nbad < TPL_BAD) {
		tpl.bad[tpl.nbad].dev = tpl.dev;
		tpl.bad[tpl.nbad++].ino = tpl.ino;
	}
	(void)st;
	tpl_stop();
	tpl_forget();
	tpl.pid = 0;
}

/* Notes, for a command started the usual way, that its shell could be a
 * template once the sandbox is quiet.  The file is opened now and the
 * template will execute that very file (execveat on the fd), whatever its
 * path names by then: a path swapped meanwhile (an agent pointing /bin/sh
 * at its own program until the template starts, then back) cannot give
 * it another program than the one every hand-over compares with. */
void tpl_note(const struct ct_xmsg *h, char **cmd, char **envp)
{
	struct stat st;
	int fd;

	if (tpl.pid || tpl.want || fcntl(CT_FD_PRELOAD, F_GETFD) < 0 || !is_shell(cmd[0]) ||
	    !resolve(cmd[0], envp, h->uid, h->gid, tpl.exe, sizeof(tpl.exe), &st))
		return;
	if ((fd = open(tpl.exe, O_PATH | O_CLOEXEC)) < 0)
		return;
	if (fstat(fd, &st) < 0 || !runnable(&st, h->uid, h->gid)) {
		close(fd);
		return;
	}
	for (unsigned i = 0; i < tpl.nbad; i++)
		if (tpl.bad[i].dev == st.st_dev && tpl.bad[i].ino == st.st_ino) {
			close(fd);
			return;
		}
	tpl.exe_fd = fd;
	tpl.ctime = st.st_ctim;
	tpl.size = st.st_size;
	snprintf(tpl.path, sizeof(tpl.path), "PATH=" BE_DEFAULT_PATH);
	for (char **e = envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5) && strlen(*e) < sizeof(tpl.path))
			snprintf(tpl.path, sizeof(tpl.path), "%s", *e);
	tpl.dev = st.st_dev;
	tpl.ino = st.st_ino;
	tpl.uid = h->uid;
	tpl.gid = h->gid;
	tpl.flags = h->flags & CT_X_USERNS;
	tpl.nofile = h->nofile;
	tpl.want = true;
}

/* The template's exec arguments, built before its clone (the child shares
 * our memory and must not allocate): the padding is the room its children
 * lay commands out in. */
static char *tpl_argv[4];
static char *tpl_envp[TPL_SLOTS];

static int tpl_child(void *arg)
{
	int sock = *(int *)arg, s, so, ex, nul;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((s = fcntl(sock, F_DUPFD, 100)) < 0 || (so = fcntl(CT_FD_PRELOAD, F_DUPFD, 100)) < 0 ||
	    (ex = fcntl(tpl.exe_fd, F_DUPFD, 100)) < 0 ||
	    (nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 || dup2(nul, 0) < 0 ||
	    dup2(nul, 1) < 0 || dup2(nul, 2) < 0 || dup2(s, CT_TPL_FD) < 0 ||
	    dup2(so, CT_TPL_SO_FD) < 0 || dup3(ex, CT_TPL_EXE_FD, O_CLOEXEC) < 0)
		_exit(126);
	run_command(NULL, -1, tpl.uid, tpl.gid, "/", (rlim_t)tpl.nofile,
		    (tpl.flags & CT_X_USERNS) ? SMALL_CAPS : 0, CT_MARK_TEMPLATE, false, tpl_argv,
		    tpl_envp);
}

/* Starts the template noted by tpl_note. */
static void tpl_start(void)
{
	size_t n = 0;
	int sv[2];
	char *pad;
	pid_t pid;

	struct stat st;

	tpl.want = false;
	if (fstat(tpl.exe_fd, &st) < 0 || !tpl_same(&st))
		return tpl_forget();	/* changed since: the next shell command may note it */
	/* The padding only until the exec copied it (not in the init's
	 * memory for as long as the sandbox lives). */
	pad = mmap(NULL, TPL_AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pad == MAP_FAILED)
		return tpl_forget();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		munmap(pad, TPL_AREA);
		return tpl_forget();
	}
	tpl_argv[0] = tpl.exe;
	tpl_argv[1] = (char *)"-c";
	tpl_argv[2] = (char *)"exit 120";	/* if the object did not load */
	tpl_argv[3] = NULL;
	tpl_envp[n++] = (char *)"LD_PRELOAD=/proc/self/fd/4";
	/* Every symbol resolved once in the template, not in each child. */
	tpl_envp[n++] = (char *)"LD_BIND_NOW=1";
	tpl_envp[n++] = (char *)"DSEC_CT_TEMPLATE=1";
	tpl_envp[n++] = tpl.path;
	be_area_pad(tpl_argv, tpl_envp, n, TPL_SLOTS, pad, TPL_AREA);
	/* xchild's stack: neither runs once clone returned (CLONE_VFORK). */
	pid = clone(tpl_child, xstack + sizeof(xstack),
		    CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, &sv[1], &setup_tid);
	__atomic_store_n(&setup_tid, 0, __ATOMIC_SEQ_CST);
	munmap(pad, TPL_AREA);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return tpl_forget();
	}
	tpl.sock = sv[0];
	tpl.pid = pid;
	tpl.said = false;
	tpl.last = mono_ms();
}

/* The template says a child is ready (or goes away). */
void tpl_read(void)
{
	struct ct_tready r;
	siginfo_t si = { 0 };
	int fd = -1, nfd = 0, n, slot = -1;

	n = be_recv_fds(tpl.sock, &r, sizeof(r), &fd, 1, &nfd, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EWOULDBLOCK)
		return;
	for (int i = 0; i < TPL_READY; i++)
		if (!tpl.ready[i].pid)
			slot = i;
	/* Only a child of ours that is alive may be sent commands, and no
	 * more of them than the template keeps. */
	if (n != (int)sizeof(r) || nfd != 1 || r.magic != CT_TREADY_MAGIC || r.pid <= 1 ||
	    slot < 0 || waitid(P_PID, (id_t)r.pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
	    si.si_pid) {
		if (nfd)
			close(fd);
		tpl_stop();
		return;
	}
	tpl.ready[slot].pid = r.pid;
	tpl.ready[slot].fd = fd;
	tpl.said = true;
}

/* Hands a request to the template's waiting child if the program is the
 * one it executes and the credentials are those it took.  The child's pid,
 * or 0 (start it the usual way). */
pid_t tpl_dispatch(const struct ct_xmsg *h, char **cmd, char **envp, const void *buf, size_t len,
		   const int *fds, int nfd)
{
	char path[PATH_MAX];
	struct stat st;
	pid_t pid = 0;
	int i;

	for (i = 0; i < TPL_READY && !pid; i++)
		pid = tpl.ready[i].pid;
	/* What the dynamic loader would make of the command's environment
	 * (LD_PRELOAD, LD_LIBRARY_PATH...) a fork of the template never sees. */
	for (char **e = envp; pid && *e; e++)
		if (!strncmp(*e, "LD_", 3))
			return 0;
	if (!pid || h->uid != tpl.uid || h->gid != tpl.gid ||
	    (h->flags & CT_X_USERNS) != tpl.flags || h->nofile != tpl.nofile ||
	    !resolve(cmd[0], envp, h->uid, h->gid, path, sizeof(path), &st) ||
	    st.st_dev != tpl.dev || st.st_ino != tpl.ino)
		return 0;
	/* The command's file is the template's: is it still as it was when
	 * the template executed it?  Written to, linked, renamed or chmod'ed
	 * since, it is no longer that program: stop the template. */
	if (!tpl_same(&st) || fstat(tpl.exe_fd, &st) < 0 || !tpl_same(&st)) {
		tpl_stop();
		return 0;
	}
	i--;
	tpl.ready[i].pid = 0;
	if (be_send_fds(tpl.ready[i].fd, buf, len, fds, nfd, MSG_DONTWAIT) < 0)
		pid = 0;	/* it died meanwhile: its reaping is all there is */
	close(tpl.ready[i].fd);
	tpl.last = mono_ms();
	return pid;
}

/* The warm shell's part of serve's loop (see there): a command that runs
 * or ran since the last turn keeps the sandbox busy; TPL_QUIET ms after
 * the last, with none running and dsecd still there, the template noted by
 * tpl_note starts; TPL_IDLE ms unused, or once dsecd is gone, it stops. */
int tpl_tick(size_t running, bool changed, bool ctl_open)
{
	int64_t now = mono_ms();
	int timeout = -1;

	if (running || changed)
		tpl.busy = now;
	if (tpl.want && !tpl.pid && !running && ctl_open) {
		if (now - tpl.busy >= TPL_QUIET)
			tpl_start();
		else
			timeout = (int)(TPL_QUIET - (now - tpl.busy));
	}
	if (tpl.sock >= 0) {
		int64_t idle = now - tpl.last;

		if (idle >= TPL_IDLE || !ctl_open)
			tpl_stop();
		else
			timeout = (int)(TPL_IDLE - idle);
	}
	return timeout;
}

int tpl_sock(void)
{
	return tpl.sock;
}
