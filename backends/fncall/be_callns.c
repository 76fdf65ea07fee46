/* be_callns.c - see be_callns.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "be_callns.h"
#include "be_net.h"

/* The root of an empty mqueue fs: "." and ".." (each entry adds
 * DIRENT_SIZE, 20, to the directory's size; ipc/mqueue.c). */
#define MQ_EMPTY_SIZE 40

static void reopen(int *fd, int nfd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = nfd;
}

int be_callns_fresh(struct be_callns *ns, int flags, const char *dir)
{
	flags &= CLONE_NEWNET | CLONE_NEWIPC;
	if (flags && unshare(flags) < 0)
		return -errno;
	if (flags & CLONE_NEWNET) {
		be_lo_up();
		reopen(&ns->sockstat, open("/proc/self/net/sockstat", O_RDONLY | O_CLOEXEC));
		if (ns->sockstat < 0)
			return -errno;
	}
	if (flags & CLONE_NEWIPC) {
		/* An mqueue fs shows the IPC namespace of the process that
		 * mounts it. */
		if (mount("mqueue", dir, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return -errno;
		reopen(&ns->mqueue, open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		if (umount2(dir, MNT_DETACH) < 0 || ns->mqueue < 0)
			return -errno;
	}
	return 0;
}

/* Whether the network namespace holds a socket (open, orphaned, in
 * TIME_WAIT) or fragments.  "sockets: used", "tw" and FRAG's "inuse" are
 * the namespace's own counts; TCP's orphan and alloc are the host's. */
static bool net_used(int fd)
{
	char buf[1024], *frag;
	int used = -1, tw = -1, frags = -1;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return true;
	buf[n] = '\0';
	if (sscanf(buf, "sockets: used %d TCP: inuse %*d orphan %*d tw %d", &used, &tw) != 2 ||
	    !(frag = strstr(buf, "FRAG: inuse ")) || sscanf(frag, "FRAG: inuse %d", &frags) != 1)
		return true;
	return used || tw || frags;
}

/* Whether the IPC namespace holds a System V object or a POSIX message
 * queue.  The _INFO commands count the namespace's objects and need no
 * permission. */
static bool ipc_used(int mqfd)
{
	struct shm_info shm;
	struct msginfo msg;
	struct seminfo sem;
	struct stat st;

	if (shmctl(0, SHM_INFO, (struct shmid_ds *)&shm) < 0 ||
	    msgctl(0, MSG_INFO, (struct msqid_ds *)&msg) < 0 ||
	    semctl(0, 0, SEM_INFO, &sem) < 0 || fstat(mqfd, &st) < 0)
		return true;
	return shm.used_ids || msg.msgpool || sem.semusz || st.st_size != MQ_EMPTY_SIZE;
}

int be_callns_used(const struct be_callns *ns)
{
	return (ns->sockstat < 0 || net_used(ns->sockstat) ? CLONE_NEWNET : 0) |
	       (ns->mqueue < 0 || ipc_used(ns->mqueue) ? CLONE_NEWIPC : 0);
}
