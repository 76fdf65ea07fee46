/* probe.c - the container backend: stand-ins for what a sandbox's
 * grade_layers keep from it, and the count of its probes of them.
 *
 * A create with grade_layers gets from dsecd the names at their top
 * (dsec_be_spec.protect).  For each of them the sandbox's root lacks
 * (/tests, /grader, /answers.json) the sandbox gets a stand-in at that path:
 * an empty directory or file, a node of one FUSE file system the backend
 * serves for all its sandboxes (STATE/probe, mounted at the first such
 * create), bound read-only by the sandbox's init before anything runs in
 * it.  Every open of a stand-in (ls, cat or find of /tests) and every
 * lookup of a name below one (cat /grader/answers.json, an open in a loop)
 * is a request that the kernel sends to the backend, which counts it for
 * the stand-in's sandbox and answers (nothing there: ENOENT), so the count
 * is exact: a lookup that fails is not cached.  What cannot happen:
 *
 *   - a stand-in removed, renamed or replaced: it is a mount point of the
 *     sandbox's own mount namespace (EBUSY), on the root (which cannot be
 *     renamed), read-only, owned by the host's root; the sandbox's
 *     commands make no mount (no capability, the seccomp filter);
 *   - the count forged, reset or suppressed: it is kept here and in dsecd,
 *     reached by nothing in the sandbox; a probe before the first command
 *     is counted (the stand-ins are there before the init reports ready);
 *   - a flood costing the daemon's loop: the requests are answered by a
 *     thread of the backend's own, one round trip each while the prober
 *     waits (its rate is what the thread can answer); the thread puts
 *     the stand-ins it counted on a list and wakes the loop with one
 *     ev_async, which reports at most PROBE_BATCH of them per iteration to
 *     dsecd (host->sandbox_mark), coalescing every probe since the last.
 *
 * The mount points are in a layer of the sandbox's own (STATE/sb.N/pl,
 * the overlay's top lower layer), not in its writable layer: a snapshot,
 * and so a grade, a fork or a checkpoint, has no trace of them.  The grade
 * sandbox is made without grade_layers: it has the real files, and no
 * stand-ins.  An idle sandbox costs no descriptor for this: the backend
 * has one /dev/fuse and one eventfd, whatever the number of stand-ins.
 */
#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <poll.h>
#include <sys/eventfd.h>

#include "ct.h"
#include "ct_root.h"

#define PROBE_BATCH 256			/* stand-ins reported per loop iteration at most */
#define PROBE_READS 64			/* requests answered between looks at the stop */
#define PROBE_IDX_BITS 24		/* a node id: serial << 24 | slot + 2 */
#define PROBE_TTL 86400.0		/* s the kernel keeps a stand-in's entry and attributes */

/* The backend's file of stand-ins. */
struct ct_pfs {
	struct ct_be *be;		/* the backend */
	char *mnt;			/* where it is mounted, STATE/probe */
	struct fuse_session *se;	/* the libfuse session */
	pthread_t thr;			/* answers its requests (pfs_main) */
	int stop_fd;			/* an eventfd: the thread ends */
	pthread_mutex_t mu;		/* guards everything below */
	struct ct_probe **slot;		/* stand-ins by node id's low bits - 2 */
	uint32_t nslot, capslot;	/* slots used (some freed), allocated */
	uint32_t *freed;		/* slots free again */
	uint32_t nfreed;		/* entries of freed */
	uint64_t serial;		/* node ids' high bits, one per stand-in made */
	struct ct_probe *dirty;		/* stand-ins probed since they were last reported */
};

/* One stand-in. */
struct ct_probe {
	uint64_t node;			/* its node id */
	bool dir;			/* a directory, else an empty file */
	char *name;			/* its name at the sandbox's top */
	int fd;				/* its detached mount until the init has it, else -1 */
	struct ct_sb *sb;		/* whose (used on the loop) */
	uint64_t hits;			/* probes of it (pfs->mu) */
	uint64_t told;			/* of them reported to dsecd (pfs->mu) */
	bool dirty;			/* on pfs->dirty (pfs->mu) */
	struct ct_probe *dnext;		/* pfs->dirty (pfs->mu) */
};

/* ---- the file system (its thread) ------------------------------------------- */

/* The stand-in of node id, or NULL; under mu. */
static struct ct_probe *pfs_find(struct ct_pfs *fs, fuse_ino_t ino)
{
	uint64_t i = (ino & ((1ull << PROBE_IDX_BITS) - 1)) - 2;
	struct ct_probe *p = i < fs->nslot ? fs->slot[i] : NULL;

	return p && p->node == ino ? p : NULL;
}

/* A probe of node ino: counted, and the loop woken to report it.  Whether
 * ino is a stand-in (dir: of that type). */
static bool pfs_hit(struct ct_pfs *fs, fuse_ino_t ino, bool dir)
{
	struct ct_probe *p;
	bool wake = false;

	pthread_mutex_lock(&fs->mu);
	if ((p = pfs_find(fs, ino)) && p->dir == dir) {
		p->hits++;
		if (!p->dirty) {
			p->dirty = true;
			p->dnext = fs->dirty;
			fs->dirty = p;
			wake = true;
		}
	}
	pthread_mutex_unlock(&fs->mu);
	if (wake)
		ev_async_send(fs->be->host->loop, &fs->be->probe_async);
	return p != NULL;
}

static void pfs_attr(fuse_ino_t ino, bool dir, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0700 : dir ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = dir ? 2 : 1;
}

static void pfs_init(void *ud, struct fuse_conn_info *conn)
{
	/* Plain reads and directory reads: every open and lookup comes here. */
	conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_SPLICE_READ |
			FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
}

/* Below the root: the stand-ins by their node id in hex (the backend's own
 * lookups, for the mounts it hands the inits).  Below a stand-in: a probe,
 * and nothing there. */
static void pfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ct_pfs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e = { .attr_timeout = PROBE_TTL, .entry_timeout = PROBE_TTL };
	struct ct_probe *p;
	char *end;

	if (parent != FUSE_ROOT_ID) {
		pfs_hit(fs, parent, true);
		fuse_reply_err(req, ENOENT);
		return;
	}
	errno = 0;
	e.ino = strtoull(name, &end, 16);
	pthread_mutex_lock(&fs->mu);
	p = errno || *end ? NULL : pfs_find(fs, e.ino);
	if (p)
		pfs_attr(e.ino, p->dir, &e.attr);
	pthread_mutex_unlock(&fs->mu);
	if (!p)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_entry(req, &e);
}

static void pfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ct_pfs *fs = fuse_req_userdata(req);
	struct ct_probe *p = NULL;
	struct stat st;

	(void)fi;
	pthread_mutex_lock(&fs->mu);
	if (ino == FUSE_ROOT_ID || (p = pfs_find(fs, ino)))
		pfs_attr(ino, !p || p->dir, &st);
	pthread_mutex_unlock(&fs->mu);
	if (ino != FUSE_ROOT_ID && !p)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, PROBE_TTL);
}

static void pfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ct_pfs *fs = fuse_req_userdata(req);

	if (ino == FUSE_ROOT_ID || pfs_hit(fs, ino, true))
		fuse_reply_open(req, fi);
	else
		fuse_reply_err(req, ENOENT);
}

/* Every directory here is empty: "." and "..". */
static void pfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	char buf[256];
	size_t n = 0;
	struct stat st = { .st_ino = ino, .st_mode = S_IFDIR };

	(void)fi;
	if (off < 1)
		n += fuse_add_direntry(req, buf + n, sizeof(buf) - n, ".", &st, 1);
	if (off < 2)
		n += fuse_add_direntry(req, buf + n, sizeof(buf) - n, "..", &st, 2);
	fuse_reply_buf(req, buf, n < size ? n : 0);
}

static void pfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ct_pfs *fs = fuse_req_userdata(req);

	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		fuse_reply_err(req, EROFS);
	else if (pfs_hit(fs, ino, false))
		fuse_reply_open(req, fi);
	else
		fuse_reply_err(req, ENOENT);
}

static void pfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)size, (void)off, (void)fi;
	fuse_reply_buf(req, NULL, 0);
}

static const struct fuse_lowlevel_ops pfs_ops = {
	.init = pfs_init,
	.lookup = pfs_lookup,
	.getattr = pfs_getattr,
	.opendir = pfs_opendir,
	.readdir = pfs_readdir,
	.open = pfs_open,
	.read = pfs_read,
};

/* The thread: answers requests until the stop, or the connection's end. */
static void *pfs_main(void *arg)
{
	struct ct_pfs *fs = arg;
	struct fuse_buf buf = { 0 };
	struct pollfd pf[2] = { { .fd = fuse_session_fd(fs->se), .events = POLLIN },
				{ .fd = fs->stop_fd, .events = POLLIN } };
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		for (int i = 0; i < PROBE_READS; i++) {
			int n = fuse_session_receive_buf(fs->se, &buf);

			if (n == -EAGAIN || n == -EINTR)
				break;
			if (n <= 0)
				goto out;
			fuse_session_process_buf(fs->se, &buf);
		}
	}
out:
	free(buf.mem);
	return NULL;
}

/* Detaches what is mounted at mnt (a killed daemon's too). */
static void pfs_detach(const char *mnt)
{
	for (int n = 0; n < 16 && umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; n++)
		;
}

/* On a pool thread: the file system, mounted and answering.  0 or -errno. */
static int pfs_start(struct ct_be *be, struct ct_pfs **out, struct dsec_err *err)
{
	char *argv[] = { (char *)"dsec-probe", (char *)"-o",
			 (char *)"ro,allow_other,default_permissions,fsname=dsec,subtype=dsec", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct ct_pfs *fs = xcalloc(1, sizeof(*fs));
	struct stat st;
	int rc;

	fs->be = be;
	fs->mnt = xasprintf("%s/probe", be->host->state_dir);
	fs->stop_fd = -1;
	pthread_mutex_init(&fs->mu, NULL);
	pfs_detach(fs->mnt);
	if (mkdir(fs->mnt, 0700) < 0 && errno != EEXIST) {
		rc = dsec_err_set(err, errno, "cannot create '%s': %s", fs->mnt, strerror(errno));
		goto fail;
	}
	fs->se = fuse_session_new(&args, &pfs_ops, sizeof(pfs_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se || fuse_session_mount(fs->se, fs->mnt) != 0) {
		rc = dsec_err_set(err, ENODEV, "cannot mount the stand-ins' file system at '%s' "
				  "(is /dev/fuse there?)", fs->mnt);
		goto fail;
	}
	if ((fs->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0 ||
	    fcntl(fuse_session_fd(fs->se), F_SETFL, O_NONBLOCK) < 0 ||
	    (errno = pthread_create(&fs->thr, NULL, pfs_main, fs)) != 0) {
		rc = dsec_err_set(err, errno, "cannot serve the stand-ins' file system: %s",
				  strerror(errno));
		fuse_session_unmount(fs->se);
		goto fail;
	}
	/* The first stat waits for the thread's answer to the kernel's INIT. */
	if (stat(fs->mnt, &st) < 0)
		LOG(be, DSEC_LOG_WARN, "container: the stand-ins' file system does not answer: %s",
		    strerror(errno));
	*out = fs;
	return 0;
fail:
	if (fs->se)
		fuse_session_destroy(fs->se);
	if (fs->stop_fd >= 0)
		close(fs->stop_fd);
	pthread_mutex_destroy(&fs->mu);
	rmdir(fs->mnt);
	free(fs->mnt);
	free(fs);
	return rc;
}

/* ---- stand-ins of a sandbox --------------------------------------------------- */

/* Whether sb's image has name at its top: the topmost layer that has an
 * entry of that name decides (a whiteout, a 0/0 character device, is
 * none). */
static bool root_has(char *const *layers, const char *name)
{
	struct stat st;

	for (size_t i = 0; layers && layers[i]; i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", layers[i], name);

		if (lstat(p, &st) == 0)
			return !(S_ISCHR(st.st_mode) && st.st_rdev == 0);
	}
	return false;
}

/* A new stand-in in fs, its node id set; under mu. */
static struct ct_probe *probe_new(struct ct_pfs *fs, bool dir, const char *name)
{
	struct ct_probe *p = xcalloc(1, sizeof(*p));
	uint32_t i;

	if (fs->nfreed) {
		i = fs->freed[--fs->nfreed];
	} else {
		if (fs->nslot == fs->capslot) {
			fs->capslot = fs->capslot ? 2 * fs->capslot : 64;
			fs->slot = xrealloc(fs->slot, fs->capslot * sizeof(*fs->slot));
			fs->freed = xrealloc(fs->freed, fs->capslot * sizeof(*fs->freed));
		}
		DSEC_ASSERT(fs->nslot < (1u << PROBE_IDX_BITS) - 2);
		i = fs->nslot++;
	}
	fs->slot[i] = p;
	p->node = (++fs->serial << PROBE_IDX_BITS) | (i + 2);
	p->dir = dir;
	p->name = xstrdup(name);
	p->fd = -1;
	return p;
}

/* Takes p out of fs (under mu) and frees it. */
static void probe_free(struct ct_pfs *fs, struct ct_probe *p)
{
	uint32_t i = (uint32_t)(p->node & ((1ull << PROBE_IDX_BITS) - 1)) - 2;

	fs->slot[i] = NULL;
	fs->freed[fs->nfreed++] = i;
	if (p->dirty)
		for (struct ct_probe **pp = &fs->dirty; *pp; pp = &(*pp)->dnext)
			if (*pp == p) {
				*pp = p->dnext;
				break;
			}
	if (p->fd >= 0)
		close(p->fd);
	free(p->name);
	free(p);
}

/* The detached read-only mount of p's node, for the init. */
static int probe_mount(struct ct_pfs *fs, struct ct_probe *p)
{
	struct mount_attr ma = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					     MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
				 .propagation = MS_PRIVATE };
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%" PRIx64, fs->mnt, p->node);
	if ((fd = (int)syscall(SYS_open_tree, AT_FDCWD, path,
			       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0)
		return -errno;
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	p->fd = fd;
	return 0;
}

/* The layer of sb's mount points, sb->dir/pl, with an empty directory or
 * file at each stand-in's name; it goes on top of sb's lower layers. */
static int probe_layer(struct ct_sb *sb, struct dsec_err *err)
{
	_cleanup_free_ char *pl = xasprintf("%s/pl", sb->dir);

	if (mkdir(pl, 0755) < 0 && errno != EEXIST)
		return dsec_err_set(err, errno, "cannot create '%s': %s", pl, strerror(errno));
	for (size_t i = 0; i < sb->nprobes; i++) {
		struct ct_probe *p = sb->probes[i];
		_cleanup_free_ char *q = xasprintf("%s/%s", pl, p->name);
		int fd = -1;

		if (p->dir ? mkdir(q, 0555) < 0 && errno != EEXIST
			   : (fd = open(q, O_WRONLY | O_CREAT | O_CLOEXEC, 0444)) < 0)
			return dsec_err_set(err, errno, "cannot create '%s': %s", q,
					    strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	if (sb->layers) {
		size_t n = dsec_strv_len((const char *const *)sb->layers);
		char **v = xcalloc(n + 2, sizeof(*v));

		v[0] = dsec_steal_pointer(&pl);
		memcpy(v + 1, sb->layers, n * sizeof(*v));
		free(sb->layers);
		sb->layers = v;
	} else {
		char *lower = xasprintf("%s:%s", pl, sb->lower);

		free(sb->lower);
		sb->lower = lower;
	}
	return 0;
}

/* The stand-ins of sb (on a pool thread): each of sb->protect its image
 * (layers, top first) lacks, CT_PROBES_MAX at most; their nodes, mounts and
 * mount points.  0 or -errno with *err; the caller drops what was made. */
static int probe_make(struct ct_sb *sb, char *const *layers, struct dsec_err *err)
{
	struct ct_be *be = sb->be;
	static const char *const own_names[] = CT_OWN_TOP;
	const char *want[CT_PROBES_MAX];
	size_t n = 0;
	struct ct_pfs *fs;
	int rc;

	for (char **e = sb->protect; *e && n < CT_PROBES_MAX; e++) {
		const char *name = *e + 2;
		bool own = false;

		if (((*e)[0] != 'd' && (*e)[0] != 'f') || (*e)[1] != '/' || !*name ||
		    strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
		    strlen(name) > NAME_MAX)
			continue;
		for (size_t i = 0; i < DSEC_ARRAY_LEN(own_names); i++)
			own |= !strcmp(name, own_names[i]);
		if (!own && !root_has(layers, name))
			want[n++] = *e;
	}
	if (!n)
		return 0;
	if (dsec_strv_len((const char *const *)layers) + 1 > CT_MAX_LAYERS)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "its image has no room for one "
				     "more layer");
	/* Held while fs is used here: fini takes it away under it. */
	pthread_mutex_lock(&be->pfs_lock);
	if (be->stopping)
		rc = dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "container is stopping");
	else
		rc = be->pfs ? 0 : pfs_start(be, &be->pfs, err);
	if (rc == 0) {
		fs = be->pfs;
		sb->probes = xcalloc(n, sizeof(*sb->probes));
		pthread_mutex_lock(&fs->mu);
		for (size_t i = 0; i < n; i++) {
			sb->probes[i] = probe_new(fs, want[i][0] == 'd', want[i] + 2);
			sb->probes[i]->sb = sb;
		}
		sb->nprobes = n;
		pthread_mutex_unlock(&fs->mu);
		for (size_t i = 0; i < n && rc == 0; i++)
			if ((rc = probe_mount(fs, sb->probes[i])) < 0)
				dsec_err_set(err, -rc, "cannot make the stand-in of '/%s': %s",
					     sb->probes[i]->name, strerror(-rc));
	}
	pthread_mutex_unlock(&be->pfs_lock);
	return rc < 0 ? rc : probe_layer(sb, err);
}

void ct_probe_add(struct ct_sb *sb)
{
	char **split = NULL;
	struct dsec_err err;

	if (!sb->protect)
		return;
	if (!sb->layers && sb->lower) {
		size_t n = 1;

		for (const char *c = sb->lower; *c; c++)
			n += *c == ':';
		split = xcalloc(n + 1, sizeof(*split));
		n = 0;
		for (const char *c = sb->lower; ; c += strcspn(c, ":") + 1) {
			split[n++] = xstrndup(c, strcspn(c, ":"));
			if (!c[strcspn(c, ":")])
				break;
		}
	}
	dsec_err_clear(&err);
	if (probe_make(sb, sb->layers ? sb->layers : split, &err) < 0) {
		_cleanup_free_ char *pl = xasprintf("%s/pl", sb->dir);

		LOG(sb->be, DSEC_LOG_WARN, "container: sandbox '%s' gets no stand-ins of its "
		    "grade_layers and its probes of them are not counted: %s", sb->id, err.msg);
		ct_probe_drop(sb);
		dsec_rm_rf(pl);
	}
	dsec_strv_free(split);
}

size_t ct_probe_spec(const struct ct_sb *sb, char *buf, size_t len)
{
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sb->nprobes && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%c%s", i ? "/" : "",
				      sb->probes[i]->dir ? 'd' : 'f', sb->probes[i]->name);
	return n;
}

int ct_probe_send(struct ct_sb *sb, int sock)
{
	int fds[CT_PROBES_MAX], rc;

	for (size_t i = 0; i < sb->nprobes; i++)
		fds[i] = sb->probes[i]->fd;
	rc = be_send_fds(sock, "P", 1, fds, (int)sb->nprobes, 0);
	for (size_t i = 0; i < sb->nprobes; i++) {
		close(sb->probes[i]->fd);
		sb->probes[i]->fd = -1;
	}
	return rc < 0 ? rc : 0;
}

void ct_probe_ready(struct ct_sb *sb)
{
	const struct dsec_be_host *host = sb->be->host;

	if (!sb->protect)
		return;
	if (host->struct_size >= offsetof(struct dsec_be_host, sandbox_mark) +
	    sizeof(host->sandbox_mark) && host->sandbox_mark)
		host->sandbox_mark(host, sb->id, DSEC_BE_MARK_PROTECTED_PROBES, 0);
}

void ct_probe_drop(struct ct_sb *sb)
{
	struct ct_pfs *fs = sb->be->pfs;

	if (fs && sb->nprobes) {
		pthread_mutex_lock(&fs->mu);
		for (size_t i = 0; i < sb->nprobes; i++)
			probe_free(fs, sb->probes[i]);
		pthread_mutex_unlock(&fs->mu);
	}
	free(sb->probes);
	sb->probes = NULL;
	sb->nprobes = 0;
	dsec_strv_free(sb->protect);
	sb->protect = NULL;
}

/* ---- reports to dsecd (the loop) ----------------------------------------------- */

/* The stand-ins probed since the last report, PROBE_BATCH at most an
 * iteration: what each had since, to dsecd. */
static void probe_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct ct_be *be = dsec_container_of(w, struct ct_be, probe_async);
	const struct dsec_be_host *host = be->host;
	struct ct_pfs *fs = be->pfs;
	struct { struct ct_sb *sb; uint64_t n; } got[PROBE_BATCH];
	size_t n = 0;
	bool more;

	(void)revents;
	if (!fs)
		return;
	pthread_mutex_lock(&fs->mu);
	while (fs->dirty && n < PROBE_BATCH) {
		struct ct_probe *p = fs->dirty;

		fs->dirty = p->dnext;
		p->dirty = false;
		got[n].sb = p->sb;
		got[n++].n = p->hits - p->told;
		p->told = p->hits;
	}
	more = fs->dirty != NULL;
	pthread_mutex_unlock(&fs->mu);
	if (more)
		ev_async_send(loop, w);
	if (host->struct_size < offsetof(struct dsec_be_host, sandbox_mark) +
	    sizeof(host->sandbox_mark) || !host->sandbox_mark)
		return;
	/* The stand-ins are freed on this thread only: each got[] is alive. */
	for (size_t i = 0; i < n; i++)
		if (got[i].n)
			host->sandbox_mark(host, got[i].sb->id, DSEC_BE_MARK_PROTECTED_PROBES,
					   got[i].n);
}

void ct_probe_init(struct ct_be *be)
{
	_cleanup_free_ char *mnt = xasprintf("%s/probe", be->host->state_dir);

	pfs_detach(mnt);	/* a killed daemon's, whose connection is gone */
	rmdir(mnt);
	pthread_mutex_init(&be->pfs_lock, NULL);
	ev_async_init(&be->probe_async, probe_async_cb);
	ev_async_start(be->host->loop, &be->probe_async);
	ev_unref(be->host->loop);	/* it alone does not keep the loop running */
}

void ct_probe_fini(struct ct_be *be)
{
	struct ct_pfs *fs = be->pfs;
	uint64_t one = 1;

	if (ev_is_active(&be->probe_async)) {
		ev_ref(be->host->loop);
		ev_async_stop(be->host->loop, &be->probe_async);
	}
	pthread_mutex_lock(&be->pfs_lock);
	be->pfs = NULL;
	pthread_mutex_unlock(&be->pfs_lock);
	if (!fs)
		return;
	if (write(fs->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(fs->thr, NULL);
	else
		pthread_detach(fs->thr);
	fuse_session_unmount(fs->se);
	fuse_session_destroy(fs->se);	/* closes /dev/fuse: what is left fails ENOTCONN */
	close(fs->stop_fd);
	rmdir(fs->mnt);
	for (uint32_t i = 0; i < fs->nslot; i++)
		if (fs->slot[i])
			probe_free(fs, fs->slot[i]);
	pthread_mutex_destroy(&fs->mu);
	free(fs->slot);
	free(fs->freed);
	free(fs->mnt);
	free(fs);
}
