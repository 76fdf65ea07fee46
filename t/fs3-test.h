/* fs3-test.h - helpers shared by the fs3 C tests (t/2xxx): trees of files,
 * a private scratch directory, shell commands, mounts. */
#ifndef DSEC_FS3_TEST_H
#define DSEC_FS3_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs3.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char *T;		/* the scratch directory, removed at exit */

#define skip(...) \
	do { printf("ok %d # SKIP ", ++tap_n); printf(__VA_ARGS__); printf("\n"); } while (0)

static void t_cleanup(void)
{
	if (T) {
		dsec_rm_rf(T);
		free(T);
		T = NULL;
	}
}

/* Makes $T under $TMPDIR (default /tmp) and removes it at exit. */
static inline void t_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char *tmpl = xasprintf("%s/fs3-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");

	if (!mkdtemp(tmpl)) {
		printf("Bail out! cannot create '%s': %s\n", tmpl, strerror(errno));
		exit(1);
	}
	T = tmpl;
	atexit(t_cleanup);
}

/* $T/rel as a new string. */
DSEC_PRINTF(1, 2) static inline char *tpath(const char *fmt, ...)
{
	va_list ap;
	char *rel, *p;

	va_start(ap, fmt);
	if (vasprintf(&rel, fmt, ap) < 0)
		abort();
	va_end(ap);
	p = xasprintf("%s/%s", T, rel);
	free(rel);
	return p;
}

/* Writes n bytes of a seeded pseudo-random stream (incompressible) to path,
 * creating its directories. */
static inline void put_random(const char *path, size_t n, uint64_t seed)
{
	char *dir = xstrdup(path), *buf = xmalloc(n ? n : 1);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	int fd;

	*strrchr(dir, '/') = '\0';
	dsec_mkdir_p(dir, 0755);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)(x >> 24);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dsec_write_all(fd, buf, n) < 0)
		printf("# cannot write '%s'\n", path);
	if (fd >= 0)
		close(fd);
	free(buf);
	free(dir);
}

static inline void put_text(const char *path, const char *s)
{
	char *dir = xstrdup(path);
	int fd;

	*strrchr(dir, '/') = '\0';
	dsec_mkdir_p(dir, 0755);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dsec_write_all(fd, s, strlen(s)) < 0)
		printf("# cannot write '%s'\n", path);
	if (fd >= 0)
		close(fd);
	free(dir);
}

/* Runs a shell command; its exit status, -1 if it did not run. */
DSEC_PRINTF(1, 2) static inline int sh(const char *fmt, ...)
{
	va_list ap;
	char *cmd;
	int st;

	va_start(ap, fmt);
	if (vasprintf(&cmd, fmt, ap) < 0)
		abort();
	va_end(ap);
	st = system(cmd);
	if (st != 0)
		printf("# '%s' exited %d\n", cmd, st);
	free(cmd);
	return st == -1 ? -1 : WEXITSTATUS(st);
}

/* Same content? (cmp -s) */
static inline bool same_file(const char *a, const char *b)
{
	return sh("cmp -s '%s' '%s'", a, b) == 0;
}

/* The source (field 10 of mountinfo) of what is mounted at path, NULL if
 * nothing; caller frees.  type, if not NULL, gets its file system type. */
static inline char *mount_source(const char *path, char type[64])
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mp[4096], fst[64], source[4096];
	char *found = NULL;

	while (f && fgets(line, sizeof(line), f)) {
		char *dash = strstr(line, " - ");
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strcmp(mp, path) && dash &&
		    sscanf(dash + 3, "%63s %4095s", fst, source) == 2) {
			free(found);
			found = xstrdup(source);
			if (type)
				snprintf(type, 64, "%s", fst);
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* Imports the tree $T/rel over image base (NULL = none) as tag, its env
 * env (one "K=V", or NULL); prints why it failed. */
static inline int t_import(struct fs3 *fs, const char *rel, const char *base, const char *tag,
			   const char *env)
{
	char *e[] = { (char *)env, NULL };
	struct fs3_import_opts o = { .tag = tag, .base = base, .config.env = env ? e : NULL };
	struct dsec_err err;
	char *p = tpath("%s", rel);
	int r = fs3_import(fs, p, &o, NULL, &err);

	if (r < 0)
		printf("# %s\n", err.msg);
	free(p);
	return r;
}

#endif
