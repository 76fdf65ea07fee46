/* loader.c - load backends/NAME.so, check its ABI, give it host services. */
#include <dlfcn.h>
#include <ev.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"

/* What the host keeps per backend for its callbacks (host->ctx). */
struct ld_host {
	struct dsecd *d;			/* the daemon that loaded the backend */
	struct dsec_be_defer *head, **tail;	/* host->defer's calls, in order */
	ev_check check;				/* runs them after each iteration's callbacks */
	ev_idle idle;				/* keeps the loop awake while any are queued */
	bool fini;				/* fini began: a defer is cancelled at once */
};

static const char *host_conf_get(const struct dsec_be_host *host, const char *key)
{
	struct dsecd *d = ((struct ld_host *)host->ctx)->d;

	return dsecd_conf_backend(&d->conf, key);
}

static const char *const *host_conf_keys(const struct dsec_be_host *host)
{
	static const char *const none[] = { NULL };
	struct dsecd *d = ((struct ld_host *)host->ctx)->d;
	char **k = d->conf.be_keys;

	return k ? (const char *const *)k : none;
}

static int host_submit(const struct dsec_be_host *host, void (*work)(void *),
		       void (*done)(void *), void *arg)
{
	struct dsecd *d = ((struct ld_host *)host->ctx)->d;

	return dsecd_pool_submit(d->pool, work, done, arg);
}

static void host_log(int level, const char *fmt, ...) DSEC_PRINTF(2, 3);
static void host_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dsec_logv((enum dsec_log_level)level, fmt, ap);
	va_end(ap);
}

/* The sandbox whose backend sandbox host's backend made as id, or NULL. */
static struct dsecd_sb *host_sb(const struct dsec_be_host *host, const char *id)
{
	struct dsecd *d = ((struct ld_host *)host->ctx)->d;
	struct dsecd_sb *sb = dsecd_sb_lookup(d, id);

	/* A reset sandbox's backend sandbox has another id (sb->be_id). */
	if (sb && sb->be_id)
		sb = NULL;
	for (struct dsecd_sb *s = d->all; !sb && s; s = s->anext)
		if (s->be_id && !strcmp(s->be_id, id) && s->state != SB_DESTROYING)
			sb = s;
	return sb && &sb->be->host == host ? sb : NULL;
}

/* A backend's sandbox died on its own (dsec_be_host.sandbox_lost). */
static void host_sandbox_lost(const struct dsec_be_host *host, const char *id,
			      const struct dsec_err *why)
{
	struct dsecd_sb *sb = host_sb(host, id);

	if (sb)
		dsecd_sb_lost(sb->d, sb, why && why->msg[0] ? why->msg : "its init died");
}

/* A backend counted something of a sandbox outside its commands
 * (dsec_be_host.sandbox_mark). */
static void host_sandbox_mark(const struct dsec_be_host *host, const char *id, uint32_t mark,
			      uint64_t n)
{
	struct dsecd_sb *sb = host_sb(host, id);

	if (sb && mark == DSEC_BE_MARK_PROTECTED_PROBES) {
		sb->probes_counted = true;	/* a first call of 0 says so */
		sb->marks.protected_probes += n;
	}
}

/* host->defer: a FIFO drained by an ev_check, an ev_idle keeping the
 * loop from sleeping while it is not empty (what each backend had for
 * itself before ABI 2). */
static void host_defer(const struct dsec_be_host *host, struct dsec_be_defer *dl)
{
	struct ld_host *l = host->ctx;

	if (l->fini) {
		dl->fn(dl, true);
		return;
	}
	dl->next = NULL;
	*l->tail = dl;
	l->tail = &dl->next;
	ev_idle_start(l->d->loop, &l->idle);
}

/* Pops the first queued call, NULL when none. */
static struct dsec_be_defer *defer_pop(struct ld_host *l)
{
	struct dsec_be_defer *dl = l->head;

	if (dl && !(l->head = dl->next))
		l->tail = &l->head;
	return dl;
}

static void defer_check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct ld_host *l = dsec_container_of(w, struct ld_host, check);
	struct dsec_be_defer *dl;

	while ((dl = defer_pop(l)))
		dl->fn(dl, false);
	ev_idle_stop(loop, &l->idle);
}

static void defer_idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
}

static struct ld_host *ld_host_new(struct dsecd *d)
{
	struct ld_host *l = xcalloc(1, sizeof(*l));

	l->d = d;
	l->tail = &l->head;
	ev_idle_init(&l->idle, defer_idle_cb);
	ev_check_init(&l->check, defer_check_cb);
	ev_check_start(d->loop, &l->check);
	ev_unref(d->loop);	/* the check alone does not keep the loop running */
	return l;
}

/* Before the backend's fini: the calls still queued are cancelled, and so
 * is every defer from now on. */
static void ld_host_fini(struct ld_host *l)
{
	struct dsec_be_defer *dl;

	while ((dl = defer_pop(l)))
		dl->fn(dl, true);
	l->fini = true;
}

static void ld_host_free(struct ld_host *l)
{
	ev_idle_stop(l->d->loop, &l->idle);
	ev_ref(l->d->loop);
	ev_check_stop(l->d->loop, &l->check);
	free(l);
}

static bool valid_name(const char *s, size_t n)
{
	if (n == 0 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static int load_one(struct dsecd *d, const char *name, size_t n, struct dsec_err *err)
{
	struct dsecd_backend *b;
	const struct dsec_be_ops *table;
	struct dsec_be_ops copy = { 0 }, *ops = &copy;
	char *path;
	void *dl;
	int rc;

	if (!valid_name(name, n))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "invalid backend name '%.*s' in 'backends'", (int)n, name);
	if (d->conf.backend_dir[0] != '/')
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "backend_dir '%s' is not an absolute path", d->conf.backend_dir);
	path = xasprintf("%s/%.*s.so", d->conf.backend_dir, (int)n, name);
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		rc = dsec_err_setc(err, DSEC_E_NO_BACKEND, ENOENT, "cannot load backend '%s': %s",
				   path, dlerror());
		free(path);
		return rc;
	}
	table = dlsym(dl, DSEC_BE_SYMBOL);
	if (!table) {
		rc = dsec_err_setc(err, DSEC_E_NO_BACKEND, ENOENT,
				   "cannot load backend '%s': no symbol '%s': %s", path,
				   DSEC_BE_SYMBOL, dlerror());
		goto fail;
	}
	if (table->abi_version != DSEC_BE_ABI) {
		rc = dsec_err_setc(err, DSEC_E_NO_BACKEND, EPROTO,
				   "cannot load backend '%s': ABI version %u, this dsecd speaks %d",
				   path, table->abi_version, DSEC_BE_ABI);
		goto fail;
	}
	if (table->struct_size < DSEC_BE_OPS_MIN_SIZE) {
		rc = dsec_err_setc(err, DSEC_E_NO_BACKEND, EPROTO,
				   "cannot load backend '%s': ops table of %u bytes, need %zu", path,
				   table->struct_size, (size_t)DSEC_BE_OPS_MIN_SIZE);
		goto fail;
	}
	/* A table built before fields were appended: what it lacks is NULL
	 * or 0 to us (a newer one: we know only our part). */
	memcpy(&copy, table, table->struct_size < sizeof(copy) ? table->struct_size : sizeof(copy));
	if (!ops->name || strlen(ops->name) != n || memcmp(ops->name, name, n) || !ops->init ||
	    !ops->fini || !ops->create || !ops->exec || !ops->destroy || !ops->stats) {
		rc = dsec_err_setc(err, DSEC_E_NO_BACKEND, EPROTO,
				   "cannot load backend '%s': its ops table lacks a name matching the "
				   "file or a mandatory operation", path);
		goto fail;
	}
	b = xcalloc(1, sizeof(*b));
	b->name = xstrndup(name, n);
	b->path = path;
	b->dl = dl;
	b->ops_buf = copy;
	b->ops = ops = &b->ops_buf;
	b->state_dir = xasprintf("%s/backends/%s", d->conf.state_dir, b->name);
	if ((rc = dsec_mkdir_p(b->state_dir, 0700)) < 0) {
		dsec_err_set(err, -rc, "cannot create '%s': %s", b->state_dir, strerror(-rc));
		free(b->state_dir);
		free(b->name);
		free(b);
		goto fail;
	}
	b->host = (struct dsec_be_host){
		.abi_version = DSEC_BE_ABI,
		.struct_size = sizeof(struct dsec_be_host),
		.loop = d->loop,
		.state_dir = b->state_dir,
		.helper_dir = d->conf.helper_dir,
		.conf_get = host_conf_get,
		.conf_keys = host_conf_keys,
		.submit = host_submit,
		.log = host_log,
		.sandbox_lost = host_sandbox_lost,
		.sandbox_mark = host_sandbox_mark,
		.ctx = ld_host_new(d),
		.defer = host_defer,
	};
	if ((rc = ops->init(&b->host, &b->be, err)) < 0) {
		dsec_err_prefix(err, "cannot start backend '%s'", b->name);
		ld_host_fini(b->host.ctx);
		ld_host_free(b->host.ctx);
		free(b->state_dir);
		free(b->name);
		free(b);
		goto fail;
	}
	log_info("loaded backend %s from %s: %s", b->name, path,
		 ops->description ? ops->description : "");
	b->next = d->backends;
	d->backends = b;
	return 0;
fail:
	dlclose(dl);
	free(path);
	return rc;
}

int dsecd_backends_load(struct dsecd *d, struct dsec_err *err)
{
	const char *s = d->conf.backends ? d->conf.backends : "";
	int loaded = 0;

	while (*s) {
		size_t n = strcspn(s, ", ");
		if (n) {
			struct dsec_err e;
			dsec_err_clear(&e);
			if (load_one(d, s, n, &e) < 0)
				log_error("%s", e.msg);
			else
				loaded++;
		}
		s += n;
		s += strspn(s, ", ");
	}
	if (!loaded)
		return dsec_err_setc(err, DSEC_E_NO_BACKEND, ENOENT,
				     "no backend could be loaded from '%s' (backends = %s)",
				     d->conf.backend_dir, d->conf.backends ? d->conf.backends : "");
	for (size_t i = 0; d->conf.be_keys && d->conf.be_keys[i]; i++) {
		const char *k = d->conf.be_keys[i];
		size_t n = strcspn(k, ".");
		struct dsecd_backend *b;
		for (b = d->backends; b; b = b->next)
			if (strlen(b->name) == n && !memcmp(b->name, k, n))
				break;
		if (!b)
			log_warn("config key '%s' is for a backend that is not loaded", k);
	}
	return 0;
}

struct dsecd_backend *dsecd_backend_find(struct dsecd *d, const char *name)
{
	for (struct dsecd_backend *b = d->backends; b; b = b->next)
		if (!strcmp(b->name, name))
			return b;
	return NULL;
}

void dsecd_backends_unload(struct dsecd *d)
{
	while (d->backends) {
		struct dsecd_backend *b = d->backends;
		d->backends = b->next;
		ld_host_fini(b->host.ctx);
		b->ops->fini(b->be);
		ld_host_free(b->host.ctx);
		dlclose(b->dl);
		log_info("unloaded backend %s", b->name);
		free(b->name);
		free(b->path);
		free(b->state_dir);
		free(b);
	}
}

int dsecd_backend_spec_check(const struct dsecd_backend *b, const struct dsec_be_spec *s,
			     struct dsec_err *err)
{
	size_t known = b->ops->spec_size ? b->ops->spec_size : DSEC_BE_SPEC_MIN_SIZE;
	/* Each field appended to the spec, by the request field it carries. */
	static const struct {
		size_t end;
		const char *what;
	} fields[] = {
#define END(f) (offsetof(struct dsec_be_spec, f) + sizeof(((struct dsec_be_spec *)0)->f))
		{ END(layers), "image" },
		{ END(user), "image (its user)" },
		{ END(network), "network" },
		{ END(allow), "allow" },
		{ END(dns), "dns" },
		{ END(seccomp_deny), "seccomp_deny" },
		{ END(cpu_weight), "limits.cpu_weight" },
		{ END(protect), "grade_layers (their stand-ins)" },
#undef END
	};
	const bool set[] = { s->layers, s->user, s->network, s->allow, s->dns, s->seccomp_deny,
			     s->cpu_weight, s->protect };

	_Static_assert(DSEC_ARRAY_LEN(fields) == DSEC_ARRAY_LEN(set), "one flag per field");
	for (size_t i = 0; i < DSEC_ARRAY_LEN(fields); i++)
		if (set[i] && fields[i].end > known)
			return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
					     "backend '%s' was built without '%s' (its sandbox "
					     "spec has %zu bytes): it cannot apply it", b->name,
					     fields[i].what, known);
	return 0;
}
