/* be_snap.c - freeze/thaw of a cgroup for snapshots (see be_snap.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "be_snap.h"

static int put(int dirfd, const char *file, const char *val)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC), rc = 0;
	size_t n = strlen(val);

	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		rc = errno ? -errno : -EIO;
	close(fd);
	return rc;
}

static int get(int dirfd, const char *file, char *buf, size_t len)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* The freezer's directory and whether it is v2's. */
static int freezer(const struct be_cg *cg, bool *v2)
{
	*v2 = cg->mode == BE_CG_V2;
	if (cg->mode == BE_CG_NONE || cg->n == 0)
		return -1;
	if (*v2)
		return cg->dirfd[0];
	for (int i = 0; i < cg->n; i++)
		if (!strcmp(cg->hname[i], "freezer"))
			return cg->dirfd[i];
	return -1;
}

static bool frozen(int fd, bool v2)
{
	char buf[512];

	if (v2)
		return get(fd, "cgroup.events", buf, sizeof(buf)) == 0 && strstr(buf, "frozen 1");
	return get(fd, "freezer.state", buf, sizeof(buf)) == 0 && !strncmp(buf, "FROZEN", 6);
}

int be_cg_snap_freeze(struct be_cg *cg, int timeout_ms)
{
	struct timespec nap = { 0, 2 * 1000000L };
	bool v2;
	int fd = freezer(cg, &v2), rc;

	if (fd < 0)
		return -ENOTSUP;
	if ((rc = put(fd, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "1" : "FROZEN")) < 0)
		return rc;
	for (int waited = 0; waited <= timeout_ms; waited += 2) {
		if (frozen(fd, v2))
			return 0;
		/* v1 retries a freeze that a task in the middle of a fork held up. */
		if (!v2 && waited % 100 == 98)
			put(fd, "freezer.state", "FROZEN");
		nanosleep(&nap, NULL);
	}
	be_cg_snap_thaw(cg);
	return -ETIMEDOUT;
}

int be_cg_snap_thaw(struct be_cg *cg)
{
	bool v2;
	int fd = freezer(cg, &v2);

	if (fd < 0)
		return -ENOTSUP;
	return put(fd, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "0" : "THAWED");
}
