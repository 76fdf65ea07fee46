/* be_path.c - see be_path.h. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "be_path.h"

int be_path_each(const char *cmd, char *const *envp, int (*try)(const char *path, void *arg),
		 void *arg)
{
	const char *path = BE_DEFAULT_PATH;
	char buf[PATH_MAX];
	int rc;

	if (strchr(cmd, '/'))
		return try(cmd, arg);
	for (char *const *e = envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	for (const char *p = path, *end; ; p = end + 1) {
		size_t n;

		end = strchrnul(p, ':');
		n = (size_t)(end - p);
		if (n + strlen(cmd) + 2 <= sizeof(buf)) {
			memcpy(buf, n ? p : ".", n ? n : 1);
			snprintf(buf + (n ? n : 1), sizeof(buf) - (n ? n : 1), "/%s", cmd);
			if ((rc = try(buf, arg)))
				return rc;
		}
		if (!*end)
			return 0;
	}
}

struct exec_try {
	char *const *argv, *const *envp;
	bool denied;			/* a candidate was not executable */
	int err;			/* the first failure other than these */
};

static int exec_one(const char *path, void *arg)
{
	struct exec_try *t = arg;

	execve(path, t->argv, t->envp);
	if (errno == EACCES)
		t->denied = true;
	else if (errno != ENOENT && errno != ENOTDIR)
		return t->err = errno;
	return 0;
}

void be_path_exec(char *const *argv, char *const *envp)
{
	struct exec_try t = { argv, envp, false, 0 };

	be_path_each(argv[0], envp, exec_one, &t);
	errno = t.err ? t.err : t.denied ? EACCES : ENOENT;
}
