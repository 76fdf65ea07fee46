/* basens.c - the container backend: the mount namespace sandboxes are
 * cloned from.
 *
 * A sandbox's init cloned from dsecd's mount namespace gets a copy of the
 * host's whole tree, and only pivot_root and a detach of the old root take
 * it away again (in a user namespace the copied mounts are locked: nothing
 * but pivot_root may uncover them).  pivot_root walks every thread on the
 * host while it holds the lock every mount on the node takes, so with
 * thousands of sandboxes (and their tasks) it costs milliseconds of each
 * create and holds up the mounts of the creates beside it; copying and
 * detaching the host's tree costs a step per host mount too.
 *
 * So the backend makes, once, a namespace whose root is a small read-only
 * tmpfs holding nothing of the host but what a sandbox's root takes from
 * it by path (ct_root.h: the default root's read-only binds and the device
 * nodes), the node's /sys, a /proc of an empty pid namespace (a user
 * namespace may mount a proc only where one is already fully visible),
 * container-init itself, and the empty mount points a create mounts on
 * (rw, root, lower.N) and criu does (tmp, run: container-criu).  The loop thread enters it for the clone of each
 * init (ct_base_enter, ct_base_leave); the init builds its root there as
 * before and chroots into it: what is left outside its root is that
 * tmpfs, its own layers and its own disk.
 */
#include <sched.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ct.h"
#include "ct_root.h"

/* The builder: a process of its own, in a mount namespace of its own,
 * mounts the tmpfs on STATE/base (covered in that namespace only) before
 * it becomes its root. */
struct base_build {
	struct ct_be *be;
	const char *top;		/* the tmpfs's mount point */
	const char *helper;		/* container-init's path */
	int st;				/* status pipe: "ok" or a message */
	int go;				/* read end: EOF once dsecd has the namespace */
	int close[2];			/* dsecd's ends, closed first */
};

static char base_stack[64 << 10] __attribute__((aligned(16)));

/* The builder is a copy of a daemon with threads: no malloc in it. */
#define BFAIL(b, ...) do {						\
	char m_[512];							\
	int e_ = errno, n_ = snprintf(m_, sizeof(m_), __VA_ARGS__);	\
									\
	if (n_ > 0 && n_ < (int)sizeof(m_) - 40)			\
		snprintf(m_ + n_, sizeof(m_) - (size_t)n_, ": %s",	\
			 strerror(e_ ? e_ : EIO));			\
	(void)!write((b)->st, m_, strlen(m_));				\
	_exit(1);							\
} while (0)

/* mkdir -p of top/rel's parents (rel absolute). */
static int mkparents(const char *top, const char *rel)
{
	char p[PATH_MAX];
	size_t n = strlen(top);

	if (snprintf(p, sizeof(p), "%s%s", top, rel) >= (int)sizeof(p))
		return -1;
	for (char *s = p + n + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

/* host at top/host, as the host has it: a symlink recreated, a directory
 * or file bound read-only (rw: left writable, the device nodes), nothing
 * when the host has none. */
static void mirror(struct base_build *b, const char *host, bool rw)
{
	char dst[PATH_MAX], lnk[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(host, &st) < 0)
		return;
	errno = 0;
	snprintf(dst, sizeof(dst), "%s%s", b->top, host);
	if (mkparents(b->top, host) < 0)
		BFAIL(b, "cannot make the parents of '%s'", dst);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(host, lnk, sizeof(lnk) - 1)) <= 0)
			return;
		lnk[n] = '\0';
		if (symlink(lnk, dst) < 0 && errno != EEXIST)
			BFAIL(b, "cannot make '%s'", dst);
		return;
	}
	if (S_ISDIR(st.st_mode) ? mkdir(dst, 0755) < 0 && errno != EEXIST
				: mknod(dst, S_IFREG | 0644, 0) < 0 && errno != EEXIST)
		BFAIL(b, "cannot make '%s'", dst);
	if (mount(host, dst, NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    (!rw && mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0))
		BFAIL(b, "cannot bind '%s'", host);
}

/* In the empty pid namespace's pid 1: its proc on top/proc. */
static int proc_child(void *arg)
{
	struct base_build *b = arg;
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/proc", b->top);
	_exit(mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? 1 : 0);
}

static int base_child(void *arg)
{
	static const char *const tops[] = CT_TOP_DIRS, *const etcd[] = CT_ETC_DIRS,
			  *const etcf[] = CT_ETC_FILES, *const devs[] = CT_DEVS;
	static char pstack[16 << 10] __attribute__((aligned(16)));
	struct base_build *b = arg;
	char p[PATH_MAX], c;
	pid_t pid;
	int st;

	close(b->close[0]);
	close(b->close[1]);
	errno = 0;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("dsec-base", b->top, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0)
		BFAIL(b, "cannot mount the base root on '%s'", b->top);
	/* tmp and run: where criu, run in a sandbox's mount namespace
	 * (criu.c), gets a tmpfs of its own for its probes. */
	for (size_t i = 0; i < CT_MAX_LAYERS + 7; i++) {
		static const char *const names[] = { "rw", "root", "proc", "sys", "etc", "tmp",
						     "run" };

		if (i < 7)
			snprintf(p, sizeof(p), "%s/%s", b->top, names[i]);
		else
			snprintf(p, sizeof(p), "%s/lower.%zu", b->top, i - 7);
		if (mkdir(p, i == 2 ? 0555 : 0755) < 0)
			BFAIL(b, "cannot make '%s'", p);
	}
	for (size_t i = 0; i < DSEC_ARRAY_LEN(tops); i++)
		mirror(b, tops[i], false);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etcd); i++)
		mirror(b, etcd[i], false);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etcf); i++)
		mirror(b, etcf[i], false);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(devs); i++)
		mirror(b, devs[i], true);
	/* container-init, the program the loop thread clones here. */
	snprintf(p, sizeof(p), "%s/" CT_HELPER, b->top);
	if (mknod(p, S_IFREG | 0755, 0) < 0 || mount(b->helper, p, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
		BFAIL(b, "cannot bind '%s'", b->helper);
	snprintf(p, sizeof(p), "%s/sys", b->top);
	if (b->be->sys && mount(b->be->sys, p, NULL, MS_BIND | MS_REC, NULL) < 0)
		BFAIL(b, "cannot bind the node's /sys '%s'", b->be->sys);
	/* A proc of a pid namespace with no process left. */
	if (unshare(CLONE_NEWPID) < 0 ||
	    (pid = clone(proc_child, pstack + sizeof(pstack), 0, b)) < 0 ||
	    waitpid(pid, &st, __WCLONE) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		BFAIL(b, "cannot mount a proc of an empty pid namespace");
	if (mount(NULL, b->top, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  "size=1m,mode=0755") < 0 ||
	    chdir(b->top) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		BFAIL(b, "cannot make the base root the root");
	if (write(b->st, "ok", 2) != 2)
		_exit(1);
	/* Until dsecd has opened our namespace (or is gone). */
	(void)!read(b->go, &c, 1);
	_exit(0);
}

/* Builds a base namespace: its fd in *ns, or -errno with what went wrong
 * in msg (size bytes). */
static int base_build(struct ct_be *be, int *ns, char *msg, size_t size)
{
	int st[2] = { -1, -1 }, go[2] = { -1, -1 }, e = 0;
	_cleanup_free_ char *helper = xasprintf("%s/" CT_HELPER, be->host->helper_dir);
	_cleanup_free_ char *top = xasprintf("%s/base", be->host->state_dir);
	struct base_build b = { be, top, helper, -1, -1, { -1, -1 } };
	char path[64];
	ssize_t n = 0;
	pid_t pid = -1;

	*ns = -1;
	*msg = '\0';
	if ((mkdir(top, 0700) < 0 && errno != EEXIST) || pipe2(st, O_CLOEXEC) < 0 ||
	    pipe2(go, O_CLOEXEC) < 0) {
		e = errno;
		goto out;
	}
	b.st = st[1];
	b.go = go[0];
	b.close[0] = st[0];
	b.close[1] = go[1];
	/* Its own copy of our memory and a mount namespace of its own; no
	 * SIGCHLD: a host on libev's default loop must not reap it. */
	pid = clone(base_child, base_stack + sizeof(base_stack), CLONE_NEWNS, &b);
	e = errno;
	close(st[1]);
	st[1] = -1;
	if (pid < 0)
		goto out;
	n = read(st[0], msg, size - 1);
	msg[n > 0 ? n : 0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	e = 0;
	if (strcmp(msg, "ok"))
		e = EIO;
	else if ((*ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		e = errno;
out:
	if (go[1] >= 0)
		close(go[1]);	/* EOF: it exits */
	if (pid > 0)
		while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
			;
	for (int i = 0; i < 2; i++)
		if (st[i] >= 0)
			close(st[i]);
	if (go[0] >= 0)
		close(go[0]);
	if (*ns >= 0)
		return 0;
	if (!*msg || !strcmp(msg, "ok"))
		snprintf(msg, size, "%s", strerror(e ? e : EIO));
	return -(e ? e : EIO);
}

/* ---- what the base holds of the host, replaced there ------------------------
 *
 * The base namespace holds binds of the host's files (ct_root.h), and a bind
 * holds the file it was made of: one the host replaces (renamed over, as
 * ldconfig does /etc/ld.so.cache and a package upgrade its /etc files) is
 * the old one there, unlinked, and a sandbox's bind of it fails (every
 * create did, until a restart, after any apt run).  So the directories
 * holding them are watched (inotify: a name of ours made, removed or renamed
 * over), and before each clone the events queued are read: the base is made
 * again when one names what it holds.  The read sees every change made
 * before it (inotify queues an event in the call that makes the change), so
 * no create is cloned from a base that lost a file.  container-init itself
 * is not watched: a sandbox's init is the daemon's build until a restart. */

/* Each directory watched and the names in it the base holds. */
static const char *const top_names[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64",
					 "libx32", NULL };
static const char *const etc_names[] = { "alternatives", "ssl", "ld.so.conf.d",
					 "ca-certificates", "python3", "python3.11",
					 "ld.so.cache", "ld.so.conf", "localtime", "os-release",
					 "debian_version", "nsswitch.conf", "mime.types",
					 "protocols", "services", "bash.bashrc", "profile", NULL };
static const char *const dev_names[] = { "null", "zero", "full", "random", "urandom", "tty",
					 NULL };
static const struct {
	const char *dir;			/* watched */
	const char *const *names;		/* what of it the base holds */
} watched[CT_BASE_WATCHES] = { { "/", top_names }, { "/etc", etc_names },
			       { "/dev", dev_names } };

static void base_watch(struct ct_be *be)
{
	const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
			      IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

	if ((be->base_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
		return;
	for (size_t i = 0; i < CT_BASE_WATCHES; i++)
		if ((be->base_wd[i] = inotify_add_watch(be->base_watch, watched[i].dir, mask)) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot watch '%s' (%s): a file the host "
			    "replaces there is seen by new sandboxes after a restart",
			    watched[i].dir, strerror(errno));
}

/* Whether the queued event ev names what the base holds. */
static bool base_event_ours(const struct ct_be *be, const struct inotify_event *ev)
{
	if (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
		return true;
	for (size_t i = 0; i < CT_BASE_WATCHES; i++) {
		if (ev->wd != be->base_wd[i] || !ev->len)
			continue;
		for (const char *const *n = watched[i].names; *n; n++)
			if (!strcmp(ev->name, *n))
				return true;
	}
	return false;
}

void ct_base_check(struct ct_be *be)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool stale = false;
	char msg[512];
	ssize_t n;
	int ns;

	if (be->base_ns < 0 || be->base_watch < 0)
		return;
	while ((n = read(be->base_watch, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n; p += sizeof(struct inotify_event) +
						      ((struct inotify_event *)p)->len)
			stale |= base_event_ours(be, (struct inotify_event *)p);
	if (!stale && !be->base_stale)
		return;
	if (base_build(be, &ns, msg, sizeof(msg)) < 0) {
		/* Tried again at the next create; said once. */
		if (!be->base_stale)
			LOG(be, DSEC_LOG_WARN, "container: the host replaced a file the base mount "
			    "namespace holds, and it cannot be made again (%s); creates may fail "
			    "until it can", msg);
		be->base_stale = true;
		return;
	}
	close(be->base_ns);
	be->base_ns = ns;
	be->base_stale = false;
	be->base_builds++;
	LOG(be, DSEC_LOG_INFO, "container: the host replaced a file the base mount namespace "
	    "holds: made it again");
}

void ct_base_up(struct ct_be *be)
{
	char msg[512];
	int ns;

	be->base_ns = be->host_ns = be->base_watch = -1;
	for (size_t i = 0; i < CT_BASE_WATCHES; i++)
		be->base_wd[i] = -1;
	if (!be->conf.base_ns)
		return;
	base_watch(be);	/* first: a change while it is made makes it again */
	if (base_build(be, &ns, msg, sizeof(msg)) == 0 &&
	    (be->host_ns = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC)) >= 0) {
		be->base_ns = ns;
		be->base_builds = 1;
		return;
	}
	if (ns >= 0) {
		snprintf(msg, sizeof(msg), "%s", strerror(errno));
		close(ns);
	}
	if (be->base_watch >= 0)
		close(be->base_watch);
	be->base_watch = -1;
	LOG(be, DSEC_LOG_WARN, "container: no base mount namespace (%s); each create pivots "
	    "into its root, which costs more as the node fills", msg);
}

void ct_base_down(struct ct_be *be)
{
	_cleanup_free_ char *top = xasprintf("%s/base", be->host->state_dir);

	rmdir(top);	/* the mount on it was the builder's only */
	if (be->base_ns >= 0)
		close(be->base_ns);
	if (be->host_ns >= 0)
		close(be->host_ns);
	if (be->base_watch >= 0)
		close(be->base_watch);
	be->base_ns = be->host_ns = be->base_watch = -1;
}

/* The loop thread into the base namespace, its root and working
 * directory that namespace's root, for a clone.  setns wants the thread's
 * fs its own: threads started since ct_init's unshare share it. */
int ct_base_enter(struct ct_be *be)
{
	if (setns(be->base_ns, CLONE_NEWNS) == 0)
		return 0;
	if (errno != EINVAL || unshare(CLONE_FS) < 0)
		return -1;
	return setns(be->base_ns, CLONE_NEWNS);
}

/* And back: our namespace, its root, our directory.  A loop thread left
 * in the base namespace would resolve every later path there: abort. */
void ct_base_leave(struct ct_be *be)
{
	if (setns(be->host_ns, CLONE_NEWNS) < 0 || fchdir(be->home_fd) < 0)
		DSEC_BUG("cannot go back to the daemon's mount namespace: %s", strerror(errno));
}
