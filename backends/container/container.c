/* container.c - the container backend: stateful sandboxes made of
 * namespaces, an overlay root and cgroups; commands enter from outside.
 *
 * create: a pool thread makes the sandbox's cgroup (below
 * dsec-container.<pid>) and its limits; the loop then clones + execs
 * container-init (helper_dir) in new mount, pid, net (loopback only), uts and
 * ipc namespaces.  It joins the cgroup, builds the root (overlay over
 * container.rootfs, or over a skeleton with the host's /usr, /bin, /lib*
 * bound read-only; the upper dir on a tmpfs of container.disk bytes),
 * enters it (cloned from the base namespace, basens.c: a chroot),
 * unshares its cgroup namespace and stays as the sandbox's pid 1, a child
 * of dsecd that the loop reaps.  Every mount lives in the
 * sandbox's mount namespace only.  The loop reads "ok" from a status pipe,
 * notes pid 1's start time (control.c: what reaches the init later by its
 * pid checks it is still the init's), and completes.
 *
 * exec: the loop makes a per-exec child cgroup, pipes and a stdin memfd and
 * fork + execs container-init exec, which setns()es through a pidfd,
 * chroots to the root fd and forks the command (capabilities dropped,
 * no_new_privs, seccomp).  Output is watched with ev_io and capped, the
 * timeout kills the exec's cgroup (the command's whole tree, not the
 * sandbox), the status comes on a pipe.  Processes an exec leaves behind
 * are killed when it completes: files persist between execs, processes do
 * not.
 *
 * The file operations go, one at a time, to the sandbox's file server
 * (container-files, a command's credentials in the sandbox's namespaces),
 * which resolves with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * from the sandbox's root (be_fs.c).  destroy kills the sandbox's
 * cgroup (pid 1 and with it the namespaces and mounts go), removes the
 * cgroups and the state directory.
 *
 * The code: container.c (configuration, init, fini, stats, the ops table,
 * pool work and deferred completions), spawn.c (starting container-init),
 * basens.c (the mount namespace the inits are cloned from),
 * create.c, exec.c, stream.c (streaming exec), files.c (the file API and
 * the network allowlist), control.c (pause, resume, snapshot, destroy),
 * sessions.c, probe.c (stand-ins of a create's grade_layers, their probes
 * counted); ct.h is their private header.
 */
#include <sys/xattr.h>

#include "ct.h"

/* Every key the backend knows; adding one is adding a row. */
static const struct be_conf_key conf_table[] = {
#define F(f) offsetof(struct ct_conf, f)
	{ "rootfs", BE_K_STR, F(rootfs), "" },
	{ "disk", BE_K_SIZE, F(disk), "256M" },
	{ "memory", BE_K_SIZE, F(memory), "512M" },
	{ "cpus", BE_K_CPUS, F(cpus), "1" },
	{ "pids", BE_K_COUNT, F(pids), "512" },
	{ "nofile", BE_K_COUNT, F(nofile), "1024" },
	{ "uid", BE_K_COUNT, F(uid), "0" },
	{ "gid", BE_K_COUNT, F(gid), "0" },
	{ "max_sandboxes", BE_K_COUNT, F(max_sandboxes), "1024" },
	{ "timeout", BE_K_SECS, F(timeout), "300" },
	{ "network", BE_K_STR, F(network), "none" },
	{ "bridge", BE_K_STR, F(bridge), "dsec0" },
	{ "subnet", BE_K_STR, F(subnet), "10.231.0.0/16" },
	{ "host_port", BE_K_STR, F(host_port), "" },
	{ "userns", BE_K_BOOL, F(userns), "true" },
	{ "uid_base", BE_K_COUNT, F(uid_base), "1000000000" },
	{ "max_sessions", BE_K_COUNT, F(max_sessions), "16" },
	{ "warm_shell", BE_K_BOOL, F(warm_shell), "true" },
	{ "ptys", BE_K_COUNT, F(ptys), "64" },
	{ "base_ns", BE_K_BOOL, F(base_ns), "true" },
	{ "net_reuse", BE_K_BOOL, F(net_reuse), "true" },
	{ "criu", BE_K_STR, F(criu), "" },
#undef F
};

static void ct_free(struct ct_be *be)
{
	free(be->conf.rootfs);
	free(be->conf.network);
	free(be->conf.bridge);
	free(be->conf.subnet);
	free(be->conf.host_port);
	free(be->conf.criu);
	free(be->skel);
	if (be->filter_fd >= 0)
		close(be->filter_fd);
	if (be->preload_fd >= 0)
		close(be->preload_fd);
	if (be->home_fd >= 0)
		close(be->home_fd);
	ct_base_down(be);
	ct_net_fini(be);
	spawn_slots_fini(be);
	for (unsigned i = 0; i < be->nkeep; i++) {
		be_cg_free(be->keep[i].cg);
		be_cg_free(be->keep[i].spare);
	}
	free(be->keep);
	pthread_mutex_destroy(&be->keep_lock);
	free(be->uslots);
	pthread_mutex_destroy(&be->br_lock);
	pthread_mutex_destroy(&be->br.lock);
	free(be);
}

/* ---- pool work and deferred completions --------------------------------- */

static void ct_release(void *be)
{
	ct_free(be);
}

/* Run work on a pool thread, done on the loop (be_task: fini waits for
 * it, and done is skipped once fini began); without a pool thread both run
 * here (done must tolerate it: it never calls a caller's done directly). */
void ct_submit(struct ct_be *be, void (*work)(void *), void (*done)(void *), void *arg)
{
	if (be_task_submit(&be->tasks, work, done, arg) < 0) {
		work(arg);
		if (!be->stopping)
			done(arg);
	}
}

/* A deferred done: the caller's callback (not once fini began, nor when
 * the host cancels it), then the ended command it carried is freed. */
static void pending_run(struct dsec_be_defer *node, bool cancelled)
{
	struct ct_pending *p = dsec_container_of(node, struct ct_pending, node);

	if (!cancelled && !p->be->stopping)
		p->done(p->arg, p->rc, p->rc < 0 ? &p->err : NULL);
	if (p->x)
		exec_free(p->x);
	free(p);
}

/* Queues done(arg, rc, err) on host->defer; x (an ended command, or NULL)
 * is freed after it, so that its handle stays valid until done. */
void defer_x(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
	     const struct dsec_err *err, struct ct_exec *x)
{
	struct ct_pending *p = xcalloc(1, sizeof(*p));

	p->node.fn = pending_run;
	p->be = be;
	p->x = x;
	p->done = done;
	p->arg = arg;
	p->rc = rc;
	if (rc < 0 && err)
		p->err = *err;
	else if (rc < 0)
		dsec_err_setc(&p->err, DSEC_E_BACKEND, -rc, "container: %s", strerror(-rc));
	be->host->defer(be->host, &p->node);
}

void defer(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
	   const struct dsec_err *err)
{
	defer_x(be, done, arg, rc, err, NULL);
}

/* ---- config --------------------------------------------------------------- */

static int conf_load(struct ct_be *be, struct dsec_err *err)
{
	struct stat st;
	int rc;

	if ((rc = be_conf_load(be->host, "container", conf_table, DSEC_ARRAY_LEN(conf_table),
				&be->conf, err)) < 0)
		return rc;
	if (be->conf.pids < CT_MIN_PIDS || be->conf.nofile < CT_MIN_NOFILE ||
	    be->conf.memory < CT_MIN_MEMORY || be->conf.disk < CT_MIN_DISK ||
	    be->conf.cpus < CT_MIN_CPUS)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container limits out of range (pids >= %d, nofile >= %d, "
				     "memory >= %lluM, disk >= %lluM, cpus >= %g)", CT_MIN_PIDS,
				     CT_MIN_NOFILE, CT_MIN_MEMORY >> 20, CT_MIN_DISK >> 20,
				     CT_MIN_CPUS);
	/* The default disk shrinks to fit the memory; one set explicitly
	 * must fit (see CT_MEM_RESERVE). */
	if (be->conf.disk + CT_MEM_RESERVE > be->conf.memory) {
		if (be->host->conf_get(be->host, "container.disk"))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "container.disk %" PRIu64 " does not fit "
					     "container.memory %" PRIu64 ": the writable layer is "
					     "in memory and needs disk + %llu MiB of it",
					     be->conf.disk, be->conf.memory, CT_MEM_RESERVE >> 20);
		be->conf.disk = be->conf.memory - CT_MEM_RESERVE;
	}
	if (be->conf.ptys < 1 || be->conf.ptys > (1u << 20))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.ptys %" PRIu64 " is not between 1 and 1048576",
				     be->conf.ptys);
	if (*be->conf.rootfs && (be->conf.rootfs[0] != '/' || stat(be->conf.rootfs, &st) < 0 ||
				 !S_ISDIR(st.st_mode) || strchr(be->conf.rootfs, ',') ||
				 strchr(be->conf.rootfs, ':')))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.rootfs '%s' is not an absolute directory path "
				     "without ',' or ':'", be->conf.rootfs);
	if (strcmp(be->conf.network, "none") && strcmp(be->conf.network, "allowlist"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.network '%s' is not 'none' or 'allowlist'",
				     be->conf.network);
	if (be->conf.userns &&
	    (be->conf.uid_base < 100000 ||
	     be->conf.uid_base + be->conf.max_sandboxes * CT_USTRIDE > UINT32_MAX - 1))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.uid_base %" PRIu64 " must be at least 100000 and "
				     "leave %" PRIu64 " ranges of %u uids, %u apart, below 2^32",
				     be->conf.uid_base, be->conf.max_sandboxes, CT_URANGE, CT_USTRIDE);
	if ((rc = be_bridge_conf(&be->br, be->conf.bridge, be->conf.subnet, be->conf.host_port,
				 err)) < 0) {
		dsec_err_prefix(err, "container.bridge, container.subnet or container.host_port");
		return rc;
	}
	be->br.log = be->host->log;
	return 0;
}

/* ---- init, fini, stats ------------------------------------------------- */

/* With container.userns a sandbox's overlay is mounted in its user
 * namespace (userxattr) and keeps what it must mark (a directory made
 * opaque: replaced, or removed with what the image had in it) in user.*
 * extended attributes of its writable layer, a tmpfs.  tmpfs keeps them
 * from Linux 6.6 on; before, such a removal or replacement fails with EIO
 * inside the sandbox (and through the file API).  Said once at start. */
static void upper_xattr_check(struct ct_be *be)
{
	_cleanup_free_ char *dir = xasprintf("%s/xattr-probe", be->host->state_dir);
	int e = 0;

	while (umount2(dir, MNT_DETACH) == 0)
		;	/* a killed daemon's */
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    mount("dsec-probe", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,mode=0700") < 0)
		return;	/* not known: nothing said */
	if (setxattr(dir, "user.dsec.probe", "y", 1, 0) < 0)
		e = errno;
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	if (e == EOPNOTSUPP)
		LOG(be, DSEC_LOG_WARN, "container: this kernel's tmpfs keeps no user.* extended "
		    "attributes (before Linux 6.6), where a sandbox's overlay marks its "
		    "directories with container.userns: removing or replacing a directory of "
		    "a sandbox's image fails there with EIO; set container.userns = false or "
		    "run Linux 6.6 or later");
}

static void ct_stats(void *vbe, struct dsec_be_stats *out)
{
	struct ct_be *be = vbe;

	memset(out, 0, sizeof(*out));
	out->sandboxes = be->nsbs;
	out->running = be->running;
	out->capacity = be->nsbs < be->conf.max_sandboxes ?
			(uint32_t)(be->conf.max_sandboxes - be->nsbs) : 0;
	out->calls = be->ncalls;
}

static void sys_down(const char *dir);

static void ct_fini(void *vbe)
{
	struct ct_be *be = vbe;

	be->stopping = true;
	ev_timer_stop(be->host->loop, &be->trim_w);
	/* Everything dies with the backend's group.  All of it is gone before
	 * the first group is removed: each removal of a memory cgroup walks
	 * the lists of every file system still mounted, and thousands of
	 * sandboxes dying at once take longer than one be_cg_kill waits. */
	size_t n = 0, k = 0;

	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next)
		n++;
	/* Their inits' watcher threads end first (ct_wait_alone): their
	 * control sockets closed, then a wait for all of them together. */
	pid_t *alone = n ? xcalloc(n, sizeof(*alone)) : NULL;

	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next) {
		ct_ctl_close(sb);
		alone[k++] = ct_alone_pid(sb);
	}
	ct_wait_alone(alone, n);
	free(alone);
	for (int i = 0; be->cg && i < 5 && be_cg_kill(be->cg) < 0; i++)
		;
	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next) {
		drop_held(sb);
		be_sess_set_free(sb->sess);
		sb->sess = NULL;
		while (sb->execs) {
			struct ct_exec *x = sb->execs;

			exec_close(x);
			sb->execs = x->next;
			cgref_put(x->cg);
			exec_free(x);
		}
	}
	files_fini(be, false);
	be_tasks_drain(&be->tasks);
	files_fini(be, true);
	/* Reap every pid 1 first, killed with the backend's group: the loop
	 * will not run again to do it, a daemon that exits leaves unreaped
	 * children as zombies for the host's init, and once they are reaped
	 * their mount namespaces and file systems are gone.  Only then are the
	 * groups removed: the removal of a memory cgroup walks the lists of
	 * every file system still mounted (memcg_reparent_list_lrus), so with
	 * the sandboxes' own still there a shutdown took time in the square of
	 * their number (35 s at 5,000). */
	uint64_t until = dsec_now_ns() + CT_FINI_REAP_NS;

	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next) {
		if (sb->helper <= 0 || sb->cw.ended)
			continue;
		be_child_stop(be->host->loop, &sb->cw);
		for (;;) {
			pid_t r = waitpid(sb->helper, NULL, WNOHANG);

			if (r == sb->helper || (r < 0 && errno != EINTR) || dsec_now_ns() > until)
				break;
			usleep(1000);
		}
		sb->cw.ended = true;	/* reaped, or left: nothing watches it now */
	}
	while (be->sbs) {
		struct ct_sb *sb = be->sbs;

		sb_unlink(sb);
		sb->init_start = 0;
		sb_teardown(sb);
		sb_free(sb);
	}
	ct_probe_fini(be);	/* their stand-ins are gone with them */
	ct_net_stop(be);	/* every namespace dropped together (netpool.c) */
	be_reaper_fini(&be->reap, be->host->loop);	/* what is left goes with the daemon */
	if (be->cg) {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", be->host->state_dir);

		be_cg_kill(be->cg);
		if (be_cg_give_up(be->cg, rec) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove cgroup '%s'", be->cg->path);
		be_cg_free(be->cg);
		be->cg = NULL;
	}
	be_bridge_down(&be->br);
	if (be->skel)
		dsec_rm_rf(be->skel);
	{
		_cleanup_free_ char *sys = xasprintf("%s/sys", be->host->state_dir);

		sys_down(sys);
		rmdir(sys);
		free(be->sys);
		be->sys = NULL;
	}
	ct_criu_down(be);
	if (be_tasks_idle(&be->tasks))
		ct_free(be);
}

/* The default root's skeleton, shared by its sandboxes as the overlay's
 * lower layer (container-init skel): made afresh at each start, so a change
 * of the host's /etc shows in sandboxes made after it.  Without it each
 * sandbox makes its own in its tmpfs, slower and in memory of its own. */
static void make_skel(struct ct_be *be)
{
	_cleanup_free_ char *dir = xasprintf("%s/skel", be->host->state_dir);
	char *const argv[] = { (char *)CT_HELPER, (char *)"skel", dir, NULL };
	char *const envp[] = { NULL };
	int st[2], fds[4], ws = -1;
	char msg[512] = "";
	ssize_t n;
	pid_t pid;

	dsec_rm_rf(dir);
	if (pipe2(st, O_CLOEXEC) < 0)
		return;
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = st[1];
	pid = spawn_helper(be, argv, envp, fds, 4, 0, NULL);
	close(st[1]);
	if (pid > 0 && (n = read(st[0], msg, sizeof(msg) - 1)) > 0)
		msg[n] = '\0';
	close(st[0]);
	while (pid > 0 && waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (pid > 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		be->skel = xstrdup(dir);
		return;
	}
	LOG(be, DSEC_LOG_WARN, "container: cannot make the shared root skeleton '%s' (%s); "
	    "each sandbox makes its own", dir, *msg ? msg : "the helper failed");
	dsec_rm_rf(dir);
}

/* ---- the node's /sys ---------------------------------------------------------
 *
 * One sysfs, read-only, of a network namespace with nothing but loopback,
 * with /sys/firmware (the host's ACPI, DMI and EFI tables) masked, mounted
 * at STATE/sys once: every sandbox binds it as its /sys (container-init)
 * rather than mount a sysfs of its own, each a file system more for the
 * kernel to keep a shrinker and lists of in every memory cgroup, and to
 * walk past at every other sysfs mount. */

static void *sys_thread(void *arg)
{
	const char *dir = arg;
	char p[PATH_MAX];

	/* This thread's own network namespace: sysfs shows the mounter's. */
	if (unshare(CLONE_NEWNET) < 0 ||
	    mount("sysfs", dir, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return (void *)(intptr_t)errno;
	snprintf(p, sizeof(p), "%s/firmware", dir);
	if (mount("dsec-mask", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=0,mode=0555") < 0 ||
	    mount(NULL, dir, NULL, MS_PRIVATE | MS_REC, NULL) < 0) {
		int e = errno;

		umount2(dir, MNT_DETACH);
		return (void *)(intptr_t)e;
	}
	return NULL;
}

static void sys_down(const char *dir)
{
	while (umount2(dir, MNT_DETACH) == 0)
		;	/* a killed daemon's too */
}

static void sys_up(struct ct_be *be)
{
	_cleanup_free_ char *dir = xasprintf("%s/sys", be->host->state_dir);
	pthread_t t;
	void *rc = NULL;

	sys_down(dir);
	if (mkdir(dir, 0555) < 0 && errno != EEXIST)
		rc = (void *)(intptr_t)errno;
	else if ((errno = pthread_create(&t, NULL, sys_thread, dir)) != 0)
		rc = (void *)(intptr_t)errno;
	else
		pthread_join(t, &rc);
	if (rc)
		LOG(be, DSEC_LOG_WARN, "container: cannot mount the sandboxes' shared /sys at "
		    "'%s' (%s); each sandbox mounts its own", dir, strerror((int)(intptr_t)rc));
	else
		be->sys = xstrdup(dir);
}

/* For a create: the node's /sys bound at sb->dir/sys, where its helper,
 * in a user namespace that may not walk the state directory's path, finds
 * it (in its copy of our mount namespace) to bind as its own /sys; the
 * bind is gone from ours once the helper is cloned (sys_unlend). */
bool sys_lend(struct ct_sb *sb)
{
	_cleanup_free_ char *p = NULL;

	if (!sb->be->sys)
		return false;
	p = xasprintf("%s/sys", sb->dir);
	if ((mkdir(p, 0555) < 0 && errno != EEXIST) ||
	    mount(sb->be->sys, p, NULL, MS_BIND | MS_REC, NULL) < 0) {
		rmdir(p);
		return false;
	}
	return true;
}

void sys_unlend(struct ct_sb *sb)
{
	_cleanup_free_ char *p = xasprintf("%s/sys", sb->dir);

	/* Not rmdir: that would take the mount from the helper's copy too
	 * (the kernel detaches mounts on a removed directory everywhere);
	 * the teardown removes the directory. */
	umount2(p, MNT_DETACH);
}

/* Directories left by a daemon killed before fini: their mounts lived in
 * namespaces that died with their processes, so they are empty. */
static void remove_stale(struct ct_be *be)
{
	DIR *d = opendir(be->host->state_dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;

		/* A killed daemon's sandboxes, and the checkpoints of its forks
		 * with processes (rlcoord's, in the backend's directory). */
		if (!strncmp(de->d_name, "fork.", 5)) {
			p = xasprintf("%s/%s", be->host->state_dir, de->d_name);
			if (dsec_rm_rf(p) < 0)
				LOG(be, DSEC_LOG_WARN, "container: cannot remove stale '%s'", p);
			continue;
		}
		if (strncmp(de->d_name, "sb.", 3))
			continue;
		p = xasprintf("%s/%s", be->host->state_dir, de->d_name);
		{
			_cleanup_free_ char *sys = xasprintf("%s/sys", p);

			sys_down(sys);	/* lent when the daemon was killed (sys_lend) */
		}
		if (dsec_rm_rf(p) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove stale '%s'", p);
	}
	if (d)
		closedir(d);
}

static int ct_init(const struct dsec_be_host *host, void **out, struct dsec_err *err)
{
	struct ct_be *be = xcalloc(1, sizeof(*be));
	_cleanup_free_ char *helper = NULL;
	char name[64];
	int rc;

	be->host = host;
	be->filter_fd = be->preload_fd = be->home_fd = be->slot0 = -1;
	be->base_ns = be->host_ns = be->base_watch = -1;
	be_tasks_init(&be->tasks, host, &be->stopping, true, ct_release, be);
	pthread_mutex_init(&be->br_lock, NULL);
	pthread_mutex_init(&be->keep_lock, NULL);
	ct_net_init(be);
	if (host->abi_version != DSEC_BE_ABI || host->struct_size < sizeof(*host)) {
		free(be);
		return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL, "container: host ABI mismatch");
	}
	if ((rc = conf_load(be, err)) < 0)
		goto fail;
	be->uslots = xcalloc(be->conf.max_sandboxes / 8 + 1, 1);
	if (geteuid() != 0) {
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, EPERM,
				   "container needs root (namespaces, mounts, cgroups)");
		goto fail;
	}
	/* A working directory of the loop thread's own, for enter_dir. */
	if (unshare(CLONE_FS) < 0 ||
	    (be->home_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = dsec_err_set(err, errno, "container: cannot keep a directory of our own: %s",
				  strerror(errno));
		goto fail;
	}
	if (spawn_slots_init(be) < 0)
		LOG(be, DSEC_LOG_WARN, "container: no spawn slots (%s): each spawn copies and "
		    "closes every descriptor of dsecd", strerror(errno));
	helper = xasprintf("%s/" CT_HELPER, host->helper_dir);
	if (access(helper, X_OK) < 0) {
		rc = dsec_err_set(err, errno, "container: cannot run '%s': %s", helper,
				  strerror(errno));
		goto fail;
	}
	snprintf(name, sizeof(name), "dsec-container.%d", (int)getpid());
	if ((rc = be_cg_open_root(&be->cg, name, err)) < 0)
		goto fail;
	if (be->cg->mode == BE_CG_NONE) {
		be_cg_free(be->cg);
		be->cg = NULL;
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				   "container needs a usable cgroup hierarchy (limits, kill)");
		goto fail;
	}
	/* Hybrid host: pause and kill through the v2 tree (see be_cgroup.h). */
	if ((rc = be_cg_add_unified(be->cg)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot use the unified cgroup tree: %s; "
		    "pause uses the v1 freezer", strerror(-rc));
	/* What a killed daemon left: its groups (and whatever still runs in
	 * them), its sandboxes' directories, its bridge and NAT table. */
	{
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", host->state_dir);
		int n = be_cg_remove_stale(be->cg, "dsec-container.");

		if ((rc = be_cg_take_over(be->cg, rec)) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot record our cgroups in '%s': %s", rec,
			    strerror(-rc));
		if ((n += rc > 0 ? rc : 0) > 0)
			LOG(be, DSEC_LOG_INFO, "container: removed %d cgroup trees a killed daemon "
			    "left", n);
	}
	remove_stale(be);
	if (be_bridge_remove_stale(&be->br))
		LOG(be, DSEC_LOG_INFO, "container: removed the bridge '%s' and its NAT table, left by "
		    "a killed daemon", be->br.name);
	if (!*be->conf.rootfs)
		make_skel(be);
	sys_up(be);
	ct_net_up(be);
	ct_criu_up(be);
	ct_base_up(be);
	/* Every sandbox's commands get this filter (but those with
	 * seccomp_deny): compiled once, read by each init. */
	if ((rc = be_seccomp_container_export(NULL, &be->filter_fd)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot compile the seccomp filter ahead (%s); "
		    "each sandbox compiles its own", strerror(-rc));
	/* The warm shell's object, for every init (ct_exec.h). */
	if (be->conf.warm_shell) {
		_cleanup_free_ char *so = xasprintf("%s/" CT_PRELOAD, host->helper_dir);

		if ((be->preload_fd = open(so, O_RDONLY | O_CLOEXEC)) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot open '%s' (%s); no warm shells",
			    so, strerror(errno));
	}
	ct_probe_init(be);
	if (be->conf.userns)
		upper_xattr_check(be);
	LOG(be, DSEC_LOG_INFO, "container: cgroup %s '%s', root %s",
	    be->cg->mode == BE_CG_V2 ? "v2" :
	    be->cg->n && !strcmp(be->cg->hname[be->cg->n - 1], "unified") ? "v1 + v2 (hybrid)" :
	    "v1", be->cg->path,
	    *be->conf.rootfs ? be->conf.rootfs : "assembled from the host");
	*out = be;
	return 0;

fail:
	ct_free(be);
	return rc;
}

__attribute__((visibility("default")))
const struct dsec_be_ops dsec_backend = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.spec_size = sizeof(struct dsec_be_spec),
	.name = "container",
	.description = "stateful sandboxes: namespaces, an overlay root, cgroups, exec from outside",
	.init = ct_init,
	.fini = ct_fini,
	.create = ct_create,
	.exec = ct_exec,
	.file_read = ct_file_read,
	.file_write = ct_file_write,
	.pause = ct_pause,
	.resume = ct_resume,
	.destroy = ct_destroy,
	.stats = ct_stats,
	.call = NULL,
	.net_allow = ct_net_allow,
	.caps = DSEC_BE_CAP_LAYERS | DSEC_BE_CAP_PROTECT,
	.file = ct_file,
	.session_open = ct_session_open,
	.session_exec = ct_session_exec,
	.session_close = ct_session_close,
	.session_list = ct_session_list,
	.snapshot = ct_snapshot,
	.exec_start = ct_exec_start,
	.exec_signal = ct_exec_signal,
	.exec_resize = ct_exec_resize,
	.usage = ct_usage,
	.checkpoint = ct_checkpoint,
	.restore = ct_restore,
};
