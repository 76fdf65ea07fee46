/* be_io.c - see be_io.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_io.h"

bool be_drain(int fd, size_t cap, struct dsec_buf *b, bool *trunc)
{
	char tmp[65536];

	for (;;) {
		ssize_t n = read(fd, tmp, sizeof(tmp));

		if (n > 0) {
			size_t room = b->len < cap ? cap - b->len : 0;
			size_t keep = (size_t)n < room ? (size_t)n : room;

			if (keep)
				dsec_buf_add(b, tmp, keep);
			if (keep < (size_t)n)
				*trunc = true;	/* keep reading: the writer must not block */
			continue;
		}
		if (n == 0)
			return true;
		if (errno == EINTR)
			continue;
		return errno != EAGAIN;
	}
}

int be_read_file(int fd, const char *path, uint64_t offset, uint64_t len, struct dsec_buf *out,
		 struct dsec_err *err)
{
	uint64_t want, got = 0;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "'%s' is not a regular file",
				     path);
	if (offset >= (uint64_t)st.st_size)
		return 0;
	want = (uint64_t)st.st_size - offset;
	if (len && len < want)
		want = len;
	dsec_buf_grow(out, (size_t)want);
	while (got < want) {
		ssize_t n = pread(fd, out->data + out->len, (size_t)(want - got),
				  (off_t)(offset + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return dsec_err_set(err, errno, "cannot read '%s': %s", path, strerror(errno));
		if (n == 0)
			break;
		out->len += (size_t)n;
		got += (uint64_t)n;
	}
	out->data[out->len] = '\0';
	return 0;
}

int be_path_err(struct dsec_err *err, int rc, const char *path, const char *what)
{
	if (rc == -EXDEV || rc == -ELOOP)
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM, "path '%s' escapes the sandbox",
				     path);
	return dsec_err_set(err, -rc, "cannot %s '%s': %s", what, path, strerror(-rc));
}

int be_recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds, int flags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * BE_IO_MAXFDS)];
		struct cmsghdr h;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
			     .msg_controllen = sizeof(cbuf.b) };
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		for (int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < maxfds)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EMSGSIZE;
	}
	return (int)n;
}

int be_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * BE_IO_MAXFDS)];
		struct cmsghdr h;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > BE_IO_MAXFDS)
		return -EINVAL;
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EMSGSIZE;
}

int be_clean_rel(const char *path, bool in_root, char **rel)
{
	_cleanup_free_ char *dup = xstrdup(path);
	struct dsec_buf b;
	char *save = NULL;

	dsec_buf_init(&b);
	for (char *c = strtok_r(dup, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (strcmp(c, "..")) {
			dsec_buf_addf(&b, "%s%s", b.len ? "/" : "", c);
			continue;
		}
		if (!b.len && !in_root) {
			dsec_buf_free(&b);
			return -EPERM;
		}
		char *slash = b.len ? memrchr(b.data, '/', b.len) : NULL;
		b.len = slash ? (size_t)(slash - b.data) : 0;
		if (b.data)
			b.data[b.len] = '\0';
	}
	if (!b.len)
		dsec_buf_add(&b, ".", 1);
	*rel = dsec_buf_detach(&b, NULL);
	return 0;
}

int be_openat2(int dir, const char *path, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = resolve,
	};
	long fd = -1;

	for (int i = 0; i < BE_OPENAT2_TRIES; i++)
		if ((fd = syscall(SYS_openat2, dir, path, &how, sizeof(how))) >= 0 ||
		    (errno != EAGAIN && errno != EINTR))
			break;
	return fd < 0 ? -errno : (int)fd;
}

int be_open_in_root(int rootfd, const char *path, int flags, mode_t mode)
{
	return be_openat2(rootfd, *path ? path : ".", flags, mode,
			  RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}
