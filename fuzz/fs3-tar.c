/* fs3-tar - libFuzzer target: fs3_extract_layer, a layer tar as an image
 * archive from anywhere brings it (paths, links, whiteouts, pax headers,
 * sparse entries), extracted as import does.  It must write nothing outside
 * the layer's tree and leave a tree that can be removed.
 *
 * It runs as root, so it jails itself first: a mount namespace of its own
 * where every mount is read-only but a tmpfs at /dev/shm/fs3-tar (the work
 * directory, canaries beside the tree) and the directories named on the
 * command line (corpus, artifacts), bound writable.  Seeds name
 * /dev/shm/fs3-tar/outside, the canaries' directory, as a link target. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import.h"
#include "log.h"
#include "util.h"

#define WORK "/dev/shm/fs3-tar"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what)
{
	fprintf(stderr, "fs3-tar: cannot %s: %s\n", what, strerror(errno));
	exit(1);
}

/* dir, bound on itself and made writable again in the read-only tree. */
static void writable(const char *dir)
{
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };

	if (mount(dir, dir, NULL, MS_BIND, NULL) < 0 ||
	    mount_setattr(AT_FDCWD, dir, 0, &rw, sizeof(rw)) < 0)
		die("bind a writable directory");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };

	if (geteuid() != 0) {
		fprintf(stderr, "fs3-tar: needs root (owners, device nodes, trusted xattrs)\n");
		exit(1);
	}
	mkdir(WORK, 0700);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make a mount namespace");
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0)
		die("make every mount read-only");
	if (mount("fs3-tar", WORK, "tmpfs", MS_NOSUID, "size=256m,mode=0700") < 0)
		die("mount the work tmpfs");
	for (int i = 1; i < *argc; i++) {
		const char *a = (*argv)[i], *ap = "-artifact_prefix=";
		struct stat st;
		if (!strncmp(a, ap, strlen(ap))) {
			_cleanup_free_ char *d = xstrdup(a + strlen(ap));
			if (strrchr(d, '/'))
				*strrchr(d, '/') = '\0';
			else
				strcpy(d, ".");
			writable(d);
		} else if (a[0] != '-' && stat(a, &st) == 0 && S_ISDIR(st.st_mode)) {
			writable(a);
		}
	}
	dsec_log_set_level(DSEC_LOG_ERROR);
	return 0;
}

/* Exactly the names in want (NULL-terminated) are in dir. */
static bool holds(const char *dir, const char *const *want)
{
	size_t n = 0, k = 0;

	for (const char *const *w = want; *w; w++)
		n++;
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		bool known = false;
		for (const char *const *w = want; *w; w++)
			known |= !strcmp(*w, e->d_name);
		if (!known) {
			closedir(d);
			return false;
		}
		k++;
	}
	closedir(d);
	return k == n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const top[] = { "outside", "in.tar", NULL };
	static const char *const top2[] = { "outside", "in.tar", "root", NULL };
	static const char *const out[] = { "victim", "dir", NULL };
	static const char *const none[] = { NULL };
	struct dsec_err err;
	struct stat st;
	char buf[8] = { 0 };

	/* The canaries: a file and an empty directory beside the tree. */
	dsec_rm_rf(WORK "/outside");
	if (mkdir(WORK "/outside", 0755) < 0 || mkdir(WORK "/outside/dir", 0755) < 0)
		abort();
	int fd = open(WORK "/outside/victim", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "keep", 4) != 4)
		abort();
	close(fd);
	fd = open(WORK "/in.tar", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dsec_write_all(fd, data, size) < 0)
		abort();
	close(fd);
	if (!holds(WORK, top))
		abort();

	fs3_extract_layer(WORK "/in.tar", WORK "/root", 0, &err);

	/* Nothing outside the tree changed... */
	fd = open(WORK "/outside/victim", O_RDONLY);
	if (!(holds(WORK, top) || holds(WORK, top2)) || !holds(WORK "/outside", out) ||
	    !holds(WORK "/outside/dir", none) || fd < 0 || fstat(fd, &st) < 0 ||
	    st.st_nlink != 1 || (st.st_mode & 07777) != 0644 || read(fd, buf, 8) != 4 ||
	    memcmp(buf, "keep", 4)) {
		fprintf(stderr, "fs3-tar: the extraction wrote outside its tree\n");
		abort();
	}
	close(fd);
	/* ... and the tree goes. */
	if (dsec_rm_rf(WORK "/root") < 0 || lstat(WORK "/root", &st) == 0) {
		fprintf(stderr, "fs3-tar: the tree cannot be removed\n");
		abort();
	}
	return 0;
}
