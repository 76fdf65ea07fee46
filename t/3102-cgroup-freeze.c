/* 3102-cgroup-freeze.c - be_cgroup's freeze, thaw, reclaim and kill of a
 * frozen group, on the host's own layout (v1 freezer on a v1 or hybrid
 * host, cgroup.freeze on pure v2) and, on a hybrid host, also with the
 * group added to the v2 tree at /sys/fs/cgroup/unified (be_cg_add_unified,
 * as the container backend does) and on a group of that tree alone in v2
 * mode (freeze and kill work there without controllers), so the v1 and
 * v2 drivers both run wherever this can.
 *
 * A busy child sits in a group below the frozen one, as an exec sits
 * below its sandbox; "uses no CPU" is its schedstat run time not moving.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../backends/common/be_cgroup.h"
#include "tap.h"
#include "util.h"

#define PER_SUITE 11

/* Nanoseconds pid has run, or -1. */
static long long run_ns(pid_t pid)
{
	char path[64], buf[128];
	long long ns = -1;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		ns = strtoll(buf, NULL, 10);
	}
	return ns;
}

static void nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* CPU pid used over ms milliseconds. */
static long long cpu_over(pid_t pid, int ms)
{
	long long a = run_ns(pid);

	nap(ms);
	return run_ns(pid) - a;
}

/* Whether pid gets the CPU within ms milliseconds: a busy process on a
 * loaded machine may get a sliver of it in any fixed window, so this
 * waits for 1 ms of its CPU time to pass rather than for a share. */
static bool runs_within(pid_t pid, int ms)
{
	long long a = run_ns(pid);

	for (int t = 0; t < ms && a >= 0; t += 20) {
		nap(20);
		if (run_ns(pid) - a >= 1000000)
			return true;
	}
	return false;
}

static void suite(struct be_cg *cg, const char *label)
{
	struct be_cg *sub = NULL;
	struct dsec_err err;
	pid_t pid;
	int st, rc;
	uint64_t t0;

	rc = be_cg_child(cg, "x.1", true, false, &sub, &err);
	ok(rc == 0, "%s: a child group (as an exec's below its sandbox)", label);
	if (rc < 0) {
		for (int i = 1; i < PER_SUITE; i++)
			ok(0, "%s: skipped after the failure above", label);
		return;
	}
	if ((pid = fork()) == 0) {
		for (;;)
			;
	}
	ok(be_cg_attach(sub, pid) == 0 && runs_within(pid, 10000),
	   "%s: a busy process in the child group runs", label);
	t0 = dsec_now_ns();
	rc = be_cg_freeze(cg, 2000);
	ok(rc == 0, "%s: freeze the parent (%.3f ms)", label, (double)(dsec_now_ns() - t0) / 1e6);
	is_int(cpu_over(pid, 300), 0, "%s: frozen: the process uses no CPU", label);
	ok(be_cg_freeze(cg, 2000) == 0, "%s: freezing a frozen group succeeds", label);
	rc = be_cg_reclaim(cg, NULL, NULL);
	ok(rc == 0 || rc == -EOPNOTSUPP, "%s: reclaim (%s)", label,
	   rc == 0 ? "done" : "no reclaim file in this hierarchy");
	t0 = dsec_now_ns();
	rc = be_cg_thaw(cg);
	ok(rc == 0, "%s: thaw (%.3f ms)", label, (double)(dsec_now_ns() - t0) / 1e6);
	ok(runs_within(pid, 10000), "%s: thawed: the process runs again", label);
	ok(be_cg_thaw(cg) == 0, "%s: thawing a thawed group succeeds", label);
	be_cg_freeze(cg, 2000);
	ok(be_cg_kill(cg) == 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) &&
	   WTERMSIG(st) == SIGKILL, "%s: kill of the frozen group kills its process", label);
	be_cg_free(sub);
	ok(be_cg_remove(cg) == 0, "%s: the frozen, killed group is removed", label);
}

/* The v2 tree of a hybrid host, by hand: the driver opens v2 only where
 * /sys/fs/cgroup itself is cgroup2. */
static struct be_cg *open_unified(const char *name)
{
	const char *root = "/sys/fs/cgroup/unified";
	struct be_cg *cg;
	struct statfs sf;
	char path[256];
	int fd;

	if (statfs(root, &sf) < 0 || sf.f_type != 0x63677270)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", root, name);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return NULL;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return NULL;
	if (faccessat(fd, "cgroup.freeze", F_OK, 0) < 0) {
		close(fd);
		rmdir(path);
		return NULL;
	}
	cg = xcalloc(1, sizeof(*cg));
	cg->mode = BE_CG_V2;
	cg->n = 1;
	snprintf(cg->hname[0], sizeof(cg->hname[0]), "unified");
	cg->dirfd[0] = fd;
	cg->path = xasprintf("/%s", name);
	cg->has_kill = faccessat(fd, "cgroup.kill", F_OK, 0) == 0;
	return cg;
}

int main(void)
{
	struct be_cg *host = NULL, *hyb = NULL, *uni;
	struct dsec_err err;
	char name[64];
	int n = 0;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	snprintf(name, sizeof(name), "dsec-t3102.%d", (int)getpid());
	if (be_cg_open_root(&host, name, &err) < 0 || host->mode == BE_CG_NONE ||
	    be_cg_freeze(host, 2000) == -EOPNOTSUPP) {
		if (host)
			be_cg_remove(host);
		be_cg_free(host);
		host = NULL;
	} else {
		be_cg_thaw(host);
		n += PER_SUITE;
	}
	snprintf(name, sizeof(name), "dsec-t3102h.%d", (int)getpid());
	if (host && host->mode == BE_CG_V1 && be_cg_open_root(&hyb, name, &err) == 0) {
		if (be_cg_add_unified(hyb) == 0 && !strcmp(hyb->hname[hyb->n - 1], "unified")) {
			n += PER_SUITE;
		} else {
			be_cg_remove(hyb);
			be_cg_free(hyb);
			hyb = NULL;
		}
	}
	snprintf(name, sizeof(name), "dsec-t3102u.%d", (int)getpid());
	uni = host && host->mode == BE_CG_V2 ? NULL : open_unified(name);
	if (uni)
		n += PER_SUITE;
	if (!n) {
		printf("1..0 # SKIP no cgroup freezer on this host\n");
		return 0;
	}
	plan(n);
	if (host) {
		suite(host, host->mode == BE_CG_V2 ? "v2" : "v1");
		be_cg_free(host);
	}
	if (hyb) {
		suite(hyb, "v1 + unified (hybrid)");
		be_cg_free(hyb);
	}
	if (uni) {
		suite(uni, "v2 (unified tree of a hybrid host)");
		be_cg_free(uni);
	}
	return done_testing();
}
