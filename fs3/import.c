/* import.c - staging rootfs trees from directories and tars; mkfs.erofs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <pthread.h>

#include <archive.h>
#include <archive_entry.h>

#include "import.h"
#include "log.h"
#include "util.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

/* ---- mkfs.erofs ------------------------------------------------------- */

#define SPAWN_STACK (64u << 10)

/* What the children running mkfs.erofs need. */
struct spawn_args {
	char *const *argv;	/* the command, argv[0] looked up in PATH */
	int logfd;		/* its stdout and stderr */
	char *stack;		/* the grandchild's stack */
};

/* The grandchild: shares our memory until it execs; async-signal-safe only. */
static int exec_child(void *arg)
{
	const struct spawn_args *a = arg;
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;
	int null = open("/dev/null", O_RDONLY);

	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(a->logfd, 1) < 0 || dup2(a->logfd, 2) < 0)
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(a->argv[0], a->argv);
	_exit(127);
}

/* The child: starts the grandchild, waits for it and exits with its status
 * (128 + signal if a signal killed it). */
static int wait_child(void *arg)
{
	struct spawn_args *a = arg;
	pid_t pid = clone(exec_child, a->stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
	int st;

	if (pid < 0)
		_exit(126);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			_exit(126);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Runs argv to completion; *status gets its exit status.
 *
 * dsecd's libev loop reaps every child with waitpid(-1) on SIGCHLD, which
 * would steal our status.  So the direct child is cloned with no exit signal
 * and never execs (exec would make SIGCHLD its exit signal again): such a
 * "clone child" is invisible to waitpid(-1) and seen only by __WCLONE here.
 * It runs the real command as its own child.  Both use CLONE_VM|CLONE_VFORK
 * like posix_spawn: nothing of the daemon's memory is copied. */
static int run_wait(char *const *argv, int logfd, int *status)
{
	char *stacks = xmalloc(2 * SPAWN_STACK);
	struct spawn_args a = { argv, logfd, stacks + SPAWN_STACK };
	sigset_t all, old;
	pid_t pid;
	int r = 0, st;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(wait_child, stacks + SPAWN_STACK, CLONE_VM | CLONE_VFORK, &a);
	if (pid < 0)
		r = -errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (r == 0 && waitpid(pid, &st, __WCLONE) < 0)
		if (errno != EINTR)
			r = -errno;
	free(stacks);
	if (r < 0)
		return r;
	if (!WIFEXITED(st) || WEXITSTATUS(st) == 126)
		return -ECHILD;
	*status = WEXITSTATUS(st);
	return 0;
}

int fs3_mkfs_erofs(const char *root, const char *out, const char *log, struct dsec_err *err)
{
	/* A fixed UUID: two builds of one tree differ only in the build time. */
	char *argv[] = { "mkfs.erofs", "--quiet", "-U", "6473656d-6673-3300-0000-000000000000",
			 "--preserve-mtime", (char *)out, (char *)root, NULL };
	_cleanup_close_ int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int st, r;

	if (fd < 0)
		return dsec_err_set(err, errno, "cannot create '%s': %s", log, strerror(errno));
	if ((r = run_wait(argv, fd, &st)) < 0)
		return dsec_err_set(err, -r, "cannot run mkfs.erofs: %s", strerror(-r));
	if (st == 0)
		return 0;
	_cleanup_free_ char *msg = NULL;
	size_t n = 0;
	if (dsec_read_file(log, &msg, &n) < 0)
		msg = xstrdup("");
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	char *last = strrchr(msg, '\n');
	if (st == 127 && !n)
		return dsec_err_set(err, ENOENT, "cannot run mkfs.erofs: not found (install erofs-utils)");
	return dsec_err_set(err, EIO, "cannot build an erofs image of '%s': mkfs.erofs %s %d%s%s",
			    root, st > 128 ? "killed by signal" : "exited", st > 128 ? st - 128 : st,
			    n ? ": " : "", last ? last + 1 : msg);
}

/* ---- tar ---------------------------------------------------------------- */

/* Normalises an entry path in place: no leading "/" or "./", no "." parts.
 * Returns NULL for paths with a ".." part or nothing left. */
static char *clean_path(char *p)
{
	char *out = p, *w = p;

	while (*p) {
		while (*p == '/')
			p++;
		char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return NULL;
		if (n && !(n == 1 && p[0] == '.')) {
			if (w != out)
				*w++ = '/';
			memmove(w, p, n);
			w += n;
		}
		p = e;
	}
	*w = '\0';
	return *out ? out : NULL;
}

/* Applies a whiteout entry (dir/base) to the tree at root. */
static int whiteout(const char *root, const char *dir, const char *base, struct dsec_err *err)
{
	_cleanup_free_ char *d = xasprintf("%s%s%s", root, *dir ? "/" : "", dir);
	int r;

	if ((r = dsec_mkdir_p(d, 0755)) < 0)
		return dsec_err_set(err, -r, "cannot create '%s': %s", d, strerror(-r));
	if (!strcmp(base, WH_OPAQUE)) {
		if (lsetxattr(d, "trusted.overlay.opaque", "y", 1, 0) < 0)
			return dsec_err_set(err, errno, "cannot mark '%s' opaque: %s", d,
					    strerror(errno));
		return 0;
	}
	_cleanup_free_ char *t = xasprintf("%s/%s", d, base + strlen(WH_PREFIX));
	struct stat sb;
	if (lstat(t, &sb) == 0)
		S_ISDIR(sb.st_mode) ? dsec_rm_rf(t) : unlink(t);
	if (mknod(t, S_IFCHR | 0000, makedev(0, 0)) < 0)
		return dsec_err_set(err, errno, "cannot map whiteout '%s': %s", t, strerror(errno));
	return 0;
}

static int copy_data(struct archive *in, struct archive *out)
{
	const void *p;
	size_t n;
	la_int64_t off;
	int r;

	while ((r = archive_read_data_block(in, &p, &n, &off)) == ARCHIVE_OK)
		if (archive_write_data_block(out, p, n, off) < ARCHIVE_WARN)
			return ARCHIVE_FATAL;
	return r == ARCHIVE_EOF ? ARCHIVE_OK : r;
}

/* Extracts the tar at src into root (an existing, symlink-free directory). */
static int extract_tar(const char *src, const char *root, struct dsec_err *err)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	int r = 0, ar;

	archive_read_support_filter_all(in);
	archive_read_support_format_tar(in);
	/* Numeric owners (no lookup set), nothing through symlinks, no "..". */
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
				       ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
				       ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_FFLAGS |
				       ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				       ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_UNLINK);
	if (archive_read_open_filename(in, src, 1 << 16) != ARCHIVE_OK) {
		r = dsec_err_set(err, archive_errno(in) > 0 ? archive_errno(in) : EINVAL,
				 "cannot read tar '%s': %s", src, archive_error_string(in));
		goto out;
	}
	while ((ar = archive_read_next_header(in, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN) {
		_cleanup_free_ char *name = xstrdup(archive_entry_pathname(e));
		char *p = clean_path(name);
		if (!p && archive_entry_filetype(e) == AE_IFDIR) {
			/* "./": the root's owner, mode and times. */
			archive_entry_set_pathname(e, root);
			if (archive_write_header(out, e) < ARCHIVE_WARN ||
			    archive_write_finish_entry(out) < ARCHIVE_WARN)
				log_warn("cannot set the root of '%s' up: %s", src,
					 archive_error_string(out));
			continue;
		}
		if (!p) {
			r = dsec_err_set(err, EINVAL, "cannot import '%s': entry '%s' leaves the tree",
					 src, archive_entry_pathname(e));
			goto out;
		}
		char *slash = strrchr(p, '/');
		const char *base = slash ? slash + 1 : p;
		if (!strncmp(base, WH_PREFIX, strlen(WH_PREFIX))) {
			if (slash)
				*slash = '\0';
			if ((r = whiteout(root, slash ? p : "", base, err)) < 0)
				goto out;
			continue;
		}
		_cleanup_free_ char *full = xasprintf("%s/%s", root, p);
		archive_entry_set_pathname(e, full);
		const char *hl = archive_entry_hardlink(e);
		_cleanup_free_ char *hlfull = NULL;
		if (hl) {
			_cleanup_free_ char *h = xstrdup(hl);
			char *hp = clean_path(h);
			if (!hp) {
				r = dsec_err_set(err, EINVAL, "cannot import '%s': link '%s' leaves the tree",
						 src, hl);
				goto out;
			}
			hlfull = xasprintf("%s/%s", root, hp);
			archive_entry_set_hardlink(e, hlfull);
		}
		if (archive_write_header(out, e) < ARCHIVE_WARN ||
		    (archive_entry_size(e) > 0 && copy_data(in, out) < ARCHIVE_WARN) ||
		    archive_write_finish_entry(out) < ARCHIVE_WARN) {
			r = dsec_err_set(err, archive_errno(out) > 0 ? archive_errno(out) : EIO,
					 "cannot extract '%s' from '%s': %s", p, src,
					 archive_error_string(out));
			goto out;
		}
	}
	if (ar != ARCHIVE_EOF)
		r = dsec_err_set(err, archive_errno(in) > 0 ? archive_errno(in) : EINVAL,
				 "cannot read tar '%s': %s", src, archive_error_string(in));
out:
	archive_read_free(in);
	archive_write_free(out);
	return r;
}

int fs3_import_stage(const char *src, const char *staging, char ***roots, struct dsec_err *err)
{
	char real[PATH_MAX];
	struct stat sb;
	int r;

	if (stat(src, &sb) < 0)
		return dsec_err_set(err, errno, "cannot import '%s': %s", src, strerror(errno));
	if (S_ISDIR(sb.st_mode)) {
		*roots = xcalloc(2, sizeof(char *));
		(*roots)[0] = xstrdup(src);
		return 0;
	}
	if (!S_ISREG(sb.st_mode))
		return dsec_err_set(err, EINVAL, "cannot import '%s': not a directory or a tar file",
				    src);
	_cleanup_free_ char *l0 = xasprintf("%s/l0", staging);
	if ((r = dsec_mkdir_p(l0, 0755)) < 0)
		return dsec_err_set(err, -r, "cannot create '%s': %s", l0, strerror(-r));
	/* Symlink-free, so that SECURE_SYMLINKS only ever sees the tar's own. */
	if (!realpath(l0, real))
		return dsec_err_set(err, errno, "cannot resolve '%s': %s", l0, strerror(errno));
	if ((r = extract_tar(src, real, err)) < 0)
		return r;
	*roots = xcalloc(2, sizeof(char *));
	(*roots)[0] = xstrdup(real);
	return 0;
}
