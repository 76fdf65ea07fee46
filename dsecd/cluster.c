/* cluster.c - the other nodes: the member table and forwarding to owners.
 *
 * Every node runs the same dsecd.  A sandbox id names its owner
 * ("NODE:SERIAL"), so a request on a sandbox of another node goes to that
 * node as it came (route() in ops.c calls dsecd_forward), through one
 * libdsec client per member (lazily connected, with this node's TLS
 * credential for tls+tcp:// addresses) and one completion queue whose
 * eventfd the loop watches: the reply comes back as an event and goes to
 * the client verbatim.  Nothing blocks the loop.
 *
 * The members come from cluster_nodes ("NAME=URL", static) and from SWIM
 * gossip (gossip.c), which keeps each member's state: a request
 * on a sandbox of a member known dead or gone answers node_lost, not
 * not_found.  A forwarded frame carries "fwd" (the node that sent it on):
 * a node never forwards a frame that has it, so two nodes whose tables
 * disagree answer instead of passing a request between them for ever.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "place.h"
#include "proto.h"

/* Seconds a forwarded request's reply may take beyond the request's own
 * timeout (its 'timeout' field, else exec_timeout): less than a client's
 * own slack (libdsec's is 30 s), so that the client hears "unavailable"
 * from this node rather than timing out itself. */
#define FORWARD_SLACK 10.0

static const char *const member_states[] = {
	[DSECD_MEMBER_ALIVE] = "alive",
	[DSECD_MEMBER_SUSPECT] = "suspect",
	[DSECD_MEMBER_DEAD] = "dead",
	[DSECD_MEMBER_LEFT] = "left",
};

const char *dsecd_member_state_name(enum dsecd_member_state s)
{
	return s < DSEC_ARRAY_LEN(member_states) ? member_states[s] : "?";
}

struct dsecd_member *dsecd_member_find(struct dsecd *d, const char *name, size_t len)
{
	for (size_t i = 0; i < d->nmembers; i++)
		if (strlen(d->members[i].name) == len && !memcmp(d->members[i].name, name, len))
			return &d->members[i];
	return NULL;
}

/* The completion queue has replies: each goes back to its client. */
static void cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dsecd *d = dsec_container_of(w, struct dsecd, cq_watcher);
	struct dsec_completion c;

	while (dsec_cq_next(d->cq, &c) == 0) {
		struct dsecd_req *r = c.tag;
		struct dsec_err err;

		d->ops_inflight--;
		r->fwd_call = NULL;
		if (c.rc != 0)
			r->fwd->failed++;
		if (r->placing && dsecd_place_reply(r, c.rc, c.reply, c.reply_len)) {
			dsec_completion_free(&c);
			continue;
		}
		if (c.rc == 0) {
			void *copy = xmalloc(c.reply_len ? c.reply_len : 1);
			memcpy(copy, c.reply, c.reply_len);
			/* Its code, for a batch that needs to know (all or
			 * nothing) and the daemon's own requests (rlcoord's
			 * chains); nothing else looks (metrics count it at the
			 * owner), so other replies are not parsed here. */
			if ((r->parent || r->on_reply) && !r->placing &&
			    dsec_reply_check(r->fwd->c, c.reply, c.reply_len, &err) < 0)
				r->reply_code = err.code ? err.code : DSEC_E_INTERNAL;
			dsecd_req_release_frame(r, copy, c.reply_len);
		} else {
			dsec_err_setc(&err, DSEC_E_UNAVAILABLE, EHOSTUNREACH, "node '%s' (%s) did not "
				      "answer: %s", r->fwd->name, r->fwd->url, c.err->msg);
			reply_err(r, &err);
		}
		dsec_completion_free(&c);
	}
}

struct dsecd_member *dsecd_member_set(struct dsecd *d, const char *name, const char *url,
				      enum dsecd_member_state state)
{
	struct dsecd_member *m;

	if (!strcmp(name, d->conf.node))
		return NULL;
	if (!(m = dsecd_member_find(d, name, strlen(name)))) {
		if (!url)
			return NULL;	/* a member we cannot reach: nothing to route to */
		d->members = xrealloc(d->members, (d->nmembers + 1) * sizeof(*d->members));
		m = &d->members[d->nmembers++];
		*m = (struct dsecd_member){ .name = xstrdup(name), .url = xstrdup(url) };
	} else if (url && strcmp(url, m->url)) {
		/* Its address changed (a restart elsewhere): reconnect. */
		dsec_close(m->c);
		m->c = NULL;
		free(m->url);
		m->url = xstrdup(url);
	}
	m->state = state;
	return m;
}

int dsecd_cluster_open(struct dsecd *d, struct dsec_err *err)
{
	int rc;

	for (char **e = d->conf.cluster_nodes; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		_cleanup_free_ char *name = eq ? xstrndup(*e, (size_t)(eq - *e)) : NULL;
		if (!eq || !dsecd_node_name_ok(name) || !eq[1])
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cluster_nodes entry '%s' is "
					     "not NAME=URL (NAME 1-63 of [A-Za-z0-9._-])", *e);
		if ((size_t)(eq - *e) == strlen(d->conf.node) &&
		    !memcmp(*e, d->conf.node, strlen(d->conf.node)))
			continue;	/* this node: one file may serve every node */
		if (dsecd_member_find(d, *e, (size_t)(eq - *e)))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cluster_nodes names node "
					     "'%.*s' twice", (int)(eq - *e), *e);
		d->members = xrealloc(d->members, (d->nmembers + 1) * sizeof(*d->members));
		d->members[d->nmembers++] = (struct dsecd_member){
			.name = xstrndup(*e, (size_t)(eq - *e)),
			.url = xstrdup(eq + 1),
			.state = DSECD_MEMBER_ALIVE,
		};
	}
	if (!d->nmembers && !d->conf.gossip_listen)
		return 0;
	if ((rc = dsec_cq_new(&d->cq, err)) < 0)
		return rc;
	ev_io_init(&d->cq_watcher, cq_cb, dsec_cq_fd(d->cq), EV_READ);
	ev_io_start(d->loop, &d->cq_watcher);
	ev_unref(d->loop);
	if (d->nmembers)
		log_info("cluster: %zu other nodes (cluster_nodes)", d->nmembers);
	return 0;
}

void dsecd_cluster_close(struct dsecd *d)
{
	/* Closing a client ends its calls on the queue: they are answered
	 * (unavailable) while the API endpoint is still open. */
	for (size_t i = 0; i < d->nmembers; i++)
		dsec_close(d->members[i].c);
	if (d->cq) {
		cq_cb(d->loop, &d->cq_watcher, EV_READ);
		ev_ref(d->loop);
		ev_io_stop(d->loop, &d->cq_watcher);
		dsec_cq_free(d->cq);
		d->cq = NULL;
	}
	for (size_t i = 0; i < d->nmembers; i++) {
		free(d->members[i].name);
		free(d->members[i].url);
	}
	free(d->members);
	d->members = NULL;
	d->nmembers = 0;
}

/* r's frame with "fwd" = this node added (one it carries replaced): the
 * owner then never sends it on. */
static void *mark_forwarded(struct dsecd_req *r, size_t *len)
{
	const msgpack_object_map *m = &r->msg.root->via.map;
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 3 &&
		    !memcmp(k->via.str.ptr, "fwd", 3))
			continue;
		dsec_pk_object(&p, k);
		dsec_pk_object(&p, &m->ptr[i].val);
	}
	dsec_pk_kv_str(&p, "fwd", r->d->conf.node);
	dsec_pk_end(&p);
	return dsec_pk_detach(&p, len);
}

bool dsecd_forward(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *id = dsec_map_get(r->msg.root, "id");
	const char *colon;
	struct dsecd_member *m;
	struct dsec_err err;

	if (!id || id->type != MSGPACK_OBJECT_STR)
		return false;	/* the handler says what is wrong */
	colon = memrchr(id->via.str.ptr, ':', id->via.str.size);
	size_t nlen = colon ? (size_t)(colon - id->via.str.ptr) : 0;
	if (!colon || (nlen == strlen(d->conf.node) && !memcmp(id->via.str.ptr, d->conf.node, nlen)))
		return false;	/* ours, or no node named: served (or refused) here */
	if (dsec_map_get(r->msg.root, "fwd"))
		return false;	/* sent on once already: answered here */
	dsec_err_clear(&err);
	if (!(m = dsecd_member_find(d, id->via.str.ptr, nlen))) {
		dsec_err_setc(&err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%.*s' belongs to node "
			      "'%.*s', which is not in this node's cluster",
			      id->via.str.size > 128 ? 128 : (int)id->via.str.size, id->via.str.ptr,
			      nlen > 64 ? 64 : (int)nlen, id->via.str.ptr);
		reply_err(r, &err);
		return true;
	}
	if (m->state == DSECD_MEMBER_DEAD || m->state == DSECD_MEMBER_LEFT) {
		dsec_err_setc(&err, DSEC_E_NODE_LOST, EHOSTDOWN, "sandbox '%.*s' is lost with its "
			      "node '%s', which %s", (int)id->via.str.size, id->via.str.ptr,
			      m->name, m->state == DSECD_MEMBER_DEAD ? "is dead" : "left the cluster");
		reply_err(r, &err);
		return true;
	}
	if (dsecd_forward_to(r, m, &err) < 0)
		reply_err(r, &err);
	return true;
}

int dsecd_forward_to(struct dsecd_req *r, struct dsecd_member *m, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	double wait = d->conf.exec_timeout;
	int rc;

	if (!m->c) {
		/* Lazy: nothing blocks here; a node that is down fails the
		 * request when its time passes. */
		static const struct dsec_connect_opts lazy = { .lazy = true };
		struct dsec_tls tls = { .ca = d->conf.tls_ca, .cert = d->conf.tls_cert };
		if ((rc = dsec_connect_tls(&m->c, m->url, &lazy, &tls, err)) < 0) {
			dsec_err_prefix(err, "cannot reach node '%s'", m->name);
			return rc;
		}
		dsec_set_timeout(m->c, FORWARD_SLACK);
	}
	const msgpack_object *t = dsec_map_get(r->msg.root, "timeout");
	if (t && (t->type == MSGPACK_OBJECT_POSITIVE_INTEGER || t->type == MSGPACK_OBJECT_FLOAT64 ||
		  t->type == MSGPACK_OBJECT_FLOAT32)) {
		double v = t->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)t->via.u64 : t->via.f64;
		if (v > 0 && v < 1e6)
			wait = v;
	}
	size_t len;
	_cleanup_free_ void *frame = mark_forwarded(r, &len);
	if ((rc = dsec_call_async(m->c, d->cq, frame, len, wait + FORWARD_SLACK, r, &r->fwd_call,
				  err)) < 0) {
		dsec_err_prefix(err, "cannot forward to node '%s'", m->name);
		return rc;
	}
	r->fwd = m;
	m->forwarded++;
	d->ops_inflight++;
	return 0;
}

void dsecd_cluster_pack(struct dsecd *d, struct dsec_pk *p)
{
	dsec_pk_str(p, "cluster");
	dsec_pk_map_begin(p);
	dsec_pk_kv_str(p, "membership", d->gossip ? "gossip (SWIM)" : d->nmembers
							? "static (cluster_nodes)" : "none");
	dsec_pk_str(p, "members");
	dsec_pk_array_begin(p);
	for (size_t i = 0; i < d->nmembers; i++) {
		const struct dsecd_member *m = &d->members[i];
		dsec_pk_map_begin(p);
		dsec_pk_kv_str(p, "name", m->name);
		dsec_pk_kv_str(p, "url", m->url);
		dsec_pk_kv_str(p, "state", dsecd_member_state_name(m->state));
		dsec_pk_kv_u64(p, "forwarded", m->forwarded);
		dsec_pk_kv_u64(p, "failed", m->failed);
		dsec_pk_kv_u64(p, "placed", m->placed);
		dsec_pk_kv_u64(p, "refused", m->refused);
		if (m->cap.known) {
			dsec_pk_str(p, "capacity");
			dsec_pk_map_begin(p);
			dsec_pk_kv_u64(p, "version", m->cap.version);
			dsec_pk_kv_double(p, "age_s", ev_now(d->loop) - m->cap.heard);
			dsec_pk_kv_bool(p, "draining", m->cap.draining);
			dsec_pk_kv_u64(p, "sandboxes", m->cap.sandboxes);
			dsec_pk_kv_u64(p, "max", m->cap.max);
			dsec_pk_kv_u64(p, "creating", m->cap.creating);
			dsec_pk_kv_u64(p, "mem_free", m->cap.mem_free);
			dsec_pk_kv_u64(p, "load_permille", m->cap.load);
			dsec_pk_kv_u64(p, "in_flight", d->placer ? place_inflight(d->placer, m->name) : 0);
			dsec_pk_str(p, "images");
			dsec_pk_array_begin(p);
			for (unsigned j = 0; j < m->cap.nimages; j++)
				dsec_pk_str(p, m->cap.images[j]);
			dsec_pk_end(p);
			dsec_pk_end(p);
		}
		dsec_pk_end(p);
	}
	dsec_pk_end(p);
	dsecd_place_pack(d, p);
	dsecd_gossip_pack(d, p);
	dsec_pk_end(p);
}
