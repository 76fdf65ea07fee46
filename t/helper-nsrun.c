/* helper-nsrun - run a program as pid 1 of namespaces shaped like a
 * container sandbox's, for the criu tests.
 *
 *   helper-nsrun UID_BASE PROG ARGS...
 *
 * Makes a network namespace owned by the host's user namespace (as the
 * container backend's pooled ones are), then clones PROG into new user,
 * pid, mount, UTS and IPC namespaces: root inside is UID_BASE outside, for
 * 65536 uids and gids; PROG runs as that root, in a session of its own,
 * with no descriptor but 0, 1 and 2.  Prints PROG's pid (the host's) and
 * exits, leaving it running; exit 1 when it could not be started.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sync_fd[2];			/* the parent says go once the maps are written */
static char **prog;			/* PROG ARGS..., NULL-terminated */

static int child(void *arg)
{
	char c;

	(void)arg;
	close(sync_fd[1]);
	if (read(sync_fd[0], &c, 1) != 1)
		_exit(125);
	close(sync_fd[0]);
	if (setsid() < 0 || setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0) {
		fprintf(stderr, "helper-nsrun: cannot become root inside: %s\n", strerror(errno));
		_exit(126);
	}
	syscall(SYS_close_range, 3U, ~0U, 0U);
	execv(prog[0], prog);
	fprintf(stderr, "helper-nsrun: cannot execute '%s': %s\n", prog[0], strerror(errno));
	_exit(127);
}

/* Writes the map of one kind ("uid_map", "gid_map") of pid. */
static int write_map(pid_t pid, const char *kind, unsigned long base)
{
	char path[64], map[64];
	int fd, n, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, kind);
	n = snprintf(map, sizeof(map), "0 %lu 65536\n", base);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, map, (size_t)n) != n)
		rc = -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	static char stack[1 << 16] __attribute__((aligned(16)));
	unsigned long base;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: helper-nsrun UID_BASE PROG ARGS...\n");
		return 2;
	}
	base = strtoul(argv[1], NULL, 10);
	prog = argv + 2;
	if (pipe2(sync_fd, O_CLOEXEC) < 0 || unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "helper-nsrun: %s\n", strerror(errno));
		return 1;
	}
	pid = clone(child, stack + sizeof(stack), CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS |
		    CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD, NULL);
	if (pid < 0) {
		fprintf(stderr, "helper-nsrun: cannot clone: %s\n", strerror(errno));
		return 1;
	}
	close(sync_fd[0]);
	if (write_map(pid, "uid_map", base) < 0 || write_map(pid, "gid_map", base) < 0) {
		fprintf(stderr, "helper-nsrun: cannot write the id maps: %s\n", strerror(errno));
		kill(pid, SIGKILL);
		return 1;
	}
	printf("%d\n", (int)pid);
	fflush(stdout);
	return write(sync_fd[1], "g", 1) == 1 ? 0 : 1;
}
