/* metrics.c - the Prometheus text endpoint (metrics_listen).
 *
 * nng's HTTP server serves the path of metrics_listen.  Its handler runs
 * on an nng thread and touches nothing of the daemon: it queues the
 * request's aio and wakes the loop (ev_async), which writes the text once
 * for every request queued and finishes them.  So a scrape reads the
 * loop's own state with no lock, and costs the loop what writing the
 * text costs: a pass over the sandbox table (for the counts by state), the
 * counters, the histograms.
 *
 * Names follow Prometheus's conventions: dsec_ prefix, base units
 * (seconds, bytes), _total for counters, histograms with _bucket/_sum/
 * _count, labels for what varies (backend, state, op, code, source).
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "rlc.h"
#include "server.h"

/* Scrapes waiting for the loop, at most; beyond, 503 at once. */
#define METRICS_QUEUE 64

const double dsecd_metric_buckets[DSECD_METRIC_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

struct dsecd_metrics {
	struct dsecd *d;		/* the daemon */
	nng_http_server *srv;		/* nng's server */
	nng_http_handler *h;		/* the path's handler */
	ev_async wake;			/* a scrape is queued */
	pthread_mutex_t mu;		/* guards q, nq, stopping */
	nng_aio *q[METRICS_QUEUE];	/* scrapes waiting for the loop */
	size_t nq;			/* entries in q */
	bool stopping;			/* no more queued */
};

void dsecd_hist_observe(struct dsecd_hist *h, double secs)
{
	int b = 0;

	while (b < DSECD_METRIC_BUCKETS && secs > dsecd_metric_buckets[b])
		b++;
	h->buckets[b]++;
	h->sum += secs;
	h->count++;
}

void dsecd_metrics_request(struct dsecd *d, enum dsec_op op, enum dsec_code code, double secs)
{
	struct dsecd_op_stats *s = &d->op_stats[op];

	if ((unsigned)code < DSEC_E__COUNT)
		s->codes[code]++;
	dsecd_hist_observe(&s->h, secs);
}

/* nng thread: queue the scrape for the loop. */
static void handle(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct dsecd_metrics *m = nng_http_handler_get_data(h);
	bool queued = false;

	pthread_mutex_lock(&m->mu);
	if (!m->stopping && m->nq < METRICS_QUEUE) {
		m->q[m->nq++] = aio;
		queued = true;
	}
	pthread_mutex_unlock(&m->mu);
	if (queued) {
		ev_async_send(m->d->loop, &m->wake);
		return;
	}
	nng_http_res *res;
	if (nng_http_res_alloc_error(&res, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

/* Label values as the text format wants them: \, " and newline escaped. */
static void label(struct dsec_buf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			dsec_buf_addf(b, "\\%c", *v);
		else if (*v == '\n')
			dsec_buf_add(b, "\\n", 2);
		else
			dsec_buf_add(b, v, 1);
	}
}

/* One sample: name{lname="lval"EXTRA} v, lval escaped; extra is more
 * labels as written (",state=\"running\"") or "". */
static void sample(struct dsec_buf *b, const char *name, const char *lname, const char *lval,
		   const char *extra, uint64_t v)
{
	dsec_buf_addf(b, "%s{%s=\"", name, lname);
	label(b, lval);
	dsec_buf_addf(b, "\"%s} %llu\n", extra, (unsigned long long)v);
}

static void head(struct dsec_buf *b, const char *name, const char *type, const char *help)
{
	dsec_buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A histogram's series, cumulative as Prometheus wants them: name_bucket
 * for each bound and +Inf, _sum, _count; its labels k1="v1" (v1 escaped)
 * and, when k2 is not NULL, k2="v2". */
static void hist(struct dsec_buf *b, const char *name, const char *k1, const char *v1,
		 const char *k2, const char *v2, const struct dsecd_hist *h)
{
	struct dsec_buf lab;
	uint64_t cum = 0;

	dsec_buf_init(&lab);
	dsec_buf_addf(&lab, "%s=\"", k1);
	label(&lab, v1);
	dsec_buf_add(&lab, "\"", 1);
	if (k2) {
		dsec_buf_addf(&lab, ",%s=\"", k2);
		label(&lab, v2);
		dsec_buf_add(&lab, "\"", 1);
	}
	for (int i = 0; i <= DSECD_METRIC_BUCKETS; i++) {
		cum += h->buckets[i];
		if (i < DSECD_METRIC_BUCKETS)
			dsec_buf_addf(b, "%s_bucket{%.*s,le=\"%g\"} %llu\n", name, (int)lab.len,
				      lab.data, dsecd_metric_buckets[i], (unsigned long long)cum);
		else
			dsec_buf_addf(b, "%s_bucket{%.*s,le=\"+Inf\"} %llu\n", name, (int)lab.len,
				      lab.data, (unsigned long long)cum);
	}
	dsec_buf_addf(b, "%s_sum{%.*s} %.6f\n", name, (int)lab.len, lab.data, h->sum);
	dsec_buf_addf(b, "%s_count{%.*s} %llu\n", name, (int)lab.len, lab.data,
		      (unsigned long long)h->count);
	dsec_buf_free(&lab);
}

struct sb_counts {
	struct dsecd_backend *be;	/* whose sandboxes */
	uint64_t n[5];			/* creating, running, paused, destroying, failed */
};

static void count_sb(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	struct sb_counts *c = arg;
	int s;

	if (sb->be != c->be || sb->pooled)
		return;
	switch (sb->state) {
	case SB_CREATING: s = 0; break;
	case SB_READY: s = sb->paused ? 2 : 1; break;
	case SB_DESTROYING: s = 3; break;
	default: s = 4; break;
	}
	c->n[s]++;
}

/* The whole page, from the loop's state. */
#define RL(f) offsetof(struct rlc_stats, f)

/* rlcoord's families: one series each, or one per value of label. */
static const struct rl_family {
	const char *name, *type, *help;
	const char *label;		/* NULL: one series, at off[0] */
	const char *vals[4];		/* the label's values, NULL-ended */
	size_t off[4];			/* their counters in struct rlc_stats */
	bool peers;			/* only with gossip */
} rl_families[] = {
	{ "dsec_trajectory_entries_total", "counter",
	  "Trajectory log entries by result: written (durable before their reply), failed "
	  "(the disk refused them; their sandboxes take no more steps).",
	  "result", { "written", "failed" }, { RL(written), RL(failed) }, false },
	{ "dsec_trajectory_bytes_total", "counter", "Bytes of trajectory entries written.",
	  NULL, { NULL }, { RL(bytes) }, false },
	{ "dsec_trajectory_syncs_total", "counter",
	  "Group commits of the trajectory journal (one fdatasync each).",
	  NULL, { NULL }, { RL(syncs) }, false },
	{ "dsec_trajectory_steps_total", "counter",
	  "Steps that ran nothing, by answer: replayed (from the log), joined (the same step "
	  "running), diverged (another request at a logged step), imported (logged by a "
	  "recover from a snapshot).",
	  "answer", { "replayed", "joined", "diverged", "imported" },
	  { RL(replayed), RL(joined), RL(diverged), RL(imported) }, false },
	{ "dsec_trajectory_replication_total", "counter",
	  "Entries by copies before their reply: replicated (on two peers), under_replicated "
	  "(fewer: a peer missing or failing).",
	  "result", { "replicated", "under_replicated" },
	  { RL(replicated), RL(under_replicated) }, true },
	{ "dsec_trajectory_replica_entries_total", "counter",
	  "Entries of other nodes' logs kept here.", NULL, { NULL }, { RL(replica_entries) }, false },
	{ "dsec_leases_open", "gauge", "Sessions (leases) open on the node.",
	  NULL, { NULL }, { RL(leases_open) }, false },
	{ "dsec_lease_events_total", "counter",
	  "Leases by event: lapsed (no heartbeat: their sandboxes paused), expired (the grace "
	  "ended: destroyed).",
	  "event", { "lapsed", "expired" }, { RL(leases_lapsed), RL(leases_expired) }, false },
	{ "dsec_tokens_held", "gauge", "Client tokens of sandboxes made or being made.",
	  NULL, { NULL }, { RL(tokens_held) }, false },
	{ "dsec_token_reuses_total", "counter",
	  "Creates answered by their token (a retry: no second sandbox).",
	  NULL, { NULL }, { RL(tokens_reused) }, false },
};

/* rlcoord's families: what an operator alerts on (log writes that failed,
 * entries not on two peers) and what rollouts did (steps answered from the
 * log, leases that lapsed). */
static void write_rl(struct dsecd *d, struct dsec_buf *b)
{
	struct rlc_stats st;

	if (!rlc_get_stats(d, &st))
		return;
	for (size_t i = 0; i < DSEC_ARRAY_LEN(rl_families); i++) {
		const struct rl_family *f = &rl_families[i];
		const char *base = (const char *)&st;
		uint64_t v;

		if (f->peers && !st.peers)
			continue;
		head(b, f->name, f->type, f->help);
		if (!f->label) {
			memcpy(&v, base + f->off[0], sizeof(v));
			dsec_buf_addf(b, "%s %llu\n", f->name, (unsigned long long)v);
			continue;
		}
		for (size_t k = 0; k < DSEC_ARRAY_LEN(f->vals) && f->vals[k]; k++) {
			memcpy(&v, base + f->off[k], sizeof(v));
			sample(b, f->name, f->label, f->vals[k], "", v);
		}
	}
	head(b, "dsec_trajectory_sync_seconds_total", "counter",
	     "Seconds the trajectory journal's group commits took, summed.");
	dsec_buf_addf(b, "dsec_trajectory_sync_seconds_total %.6f\n", st.sync_seconds);
}

static void write_page(struct dsecd *d, struct dsec_buf *b)
{
	static const char *const states[] = { "creating", "running", "paused", "destroying",
					      "failed" };

	head(b, "dsec_build_info", "gauge", "The dsecd version and the node's name.");
	dsec_buf_addf(b, "dsec_build_info{version=\"%s\",node=\"", DSEC_VERSION);
	label(b, d->conf.node);
	dsec_buf_addf(b, "\"} 1\n");
	head(b, "dsec_uptime_seconds", "gauge", "Seconds since the daemon started.");
	dsec_buf_addf(b, "dsec_uptime_seconds %.3f\n", ev_now(d->loop) - d->started);
	head(b, "dsec_sandboxes", "gauge", "Sandboxes of the node by backend and state.");
	for (struct dsecd_backend *be = d->backends; be; be = be->next) {
		struct sb_counts c = { be, { 0 } };
		dsecd_sb_foreach(d, count_sb, &c);
		for (size_t s = 0; s < DSEC_ARRAY_LEN(states); s++) {
			char extra[32];
			snprintf(extra, sizeof(extra), ",state=\"%s\"", states[s]);
			sample(b, "dsec_sandboxes", "backend", be->name, extra, c.n[s]);
		}
	}
	head(b, "dsec_sandboxes_max", "gauge", "The node's max_sandboxes.");
	dsec_buf_addf(b, "dsec_sandboxes_max %llu\n", (unsigned long long)d->conf.max_sandboxes);
	head(b, "dsec_backend_warm_ready", "gauge", "Warm units a backend has ready.");
	for (struct dsecd_backend *be = d->backends; be; be = be->next) {
		struct dsec_be_stats st;
		memset(&st, 0, sizeof(st));
		be->ops->stats(be->be, &st);
		sample(b, "dsec_backend_warm_ready", "backend", be->name, "", st.pool_ready);
	}
	head(b, "dsec_draining", "gauge", "1 while the node takes no new sandboxes.");
	dsec_buf_addf(b, "dsec_draining %d\n", d->draining ? 1 : 0);
	head(b, "dsec_creates_total", "counter", "Sandbox creates by result.");
	dsec_buf_addf(b, "dsec_creates_total{result=\"ok\"} %llu\n",
		      (unsigned long long)d->creates_ok);
	dsec_buf_addf(b, "dsec_creates_total{result=\"failed\"} %llu\n",
		      (unsigned long long)d->creates_failed);
	head(b, "dsec_admission_refusals_total", "counter",
	     "Creates and calls refused for the node's capacity, by reason.");
	dsec_buf_addf(b, "dsec_admission_refusals_total{reason=\"full\"} %llu\n",
		      (unsigned long long)d->refused_full);
	dsec_buf_addf(b, "dsec_admission_refusals_total{reason=\"draining\"} %llu\n",
		      (unsigned long long)d->refused_draining);
	head(b, "dsec_requests_inflight", "gauge", "API requests received and not yet answered.");
	dsec_buf_addf(b, "dsec_requests_inflight %u\n", dsecd_server_inflight(d->server));
	head(b, "dsec_requests_total", "counter", "API requests answered here, by op and code.");
	for (int op = 0; op < DSEC_OP__COUNT; op++)
		for (int c = 0; c < DSEC_E__COUNT; c++)
			if (d->op_stats[op].codes[c])
				dsec_buf_addf(b, "dsec_requests_total{op=\"%s\",code=\"%s\"} %llu\n",
					      dsecd_ops[op].name, c ? dsec_code_name(c) : "ok",
					      (unsigned long long)d->op_stats[op].codes[c]);
	head(b, "dsec_request_duration_seconds", "histogram",
	     "Time from a request's arrival to its reply, by op.");
	for (int op = 0; op < DSEC_OP__COUNT; op++)
		if (d->op_stats[op].h.count)
			hist(b, "dsec_request_duration_seconds", "op", dsecd_ops[op].name, NULL,
			     NULL, &d->op_stats[op].h);
	static const char *const phases[DSECD_PHASE__COUNT] = {
		[DSECD_PHASE_IMAGE] = "image",
		[DSECD_PHASE_BACKEND] = "backend",
		[DSECD_PHASE_WARM] = "warm",
	};
	head(b, "dsec_create_phase_seconds", "histogram",
	     "Time of a create's phases by backend: image (its layers fetched and mounted), "
	     "backend (the backend's create), warm (a create handed a warm pool's sandbox).");
	for (struct dsecd_backend *be = d->backends; be; be = be->next)
		for (int ph = 0; ph < DSECD_PHASE__COUNT; ph++)
			if (phases[ph] && be->phase[ph].count)
				hist(b, "dsec_create_phase_seconds", "backend", be->name, "phase",
				     phases[ph], &be->phase[ph]);
	head(b, "dsec_first_exec_seconds", "histogram",
	     "Time from a create's arrival to the reply of its sandbox's first command, by "
	     "backend: what a rollout waits for before its first step.");
	for (struct dsecd_backend *be = d->backends; be; be = be->next)
		if (be->phase[DSECD_PHASE_FIRST_EXEC].count)
			hist(b, "dsec_first_exec_seconds", "backend", be->name, NULL, NULL,
			     &be->phase[DSECD_PHASE_FIRST_EXEC]);
	if (d->images) {
		struct fs3_stats st;
		fs3_get_stats(d->images, &st);
		head(b, "dsec_image_fetched_bytes_total", "counter",
		     "Stored bytes of image objects fetched, by source (peer URL or origin).");
		for (size_t i = 0; i < st.nsrc; i++)
			sample(b, "dsec_image_fetched_bytes_total", "source", st.src[i].name, "",
			       st.src[i].bytes);
		head(b, "dsec_image_fetched_objects_total", "counter",
		     "Image objects (chunks, indexes, manifests) fetched, by source.");
		for (size_t i = 0; i < st.nsrc; i++)
			sample(b, "dsec_image_fetched_objects_total", "source", st.src[i].name, "",
			       st.src[i].objects);
		head(b, "dsec_image_served_bytes_total", "counter",
		     "Stored bytes of image objects given to peers (chunk_get).");
		dsec_buf_addf(b, "dsec_image_served_bytes_total %llu\n",
			      (unsigned long long)st.served_bytes);
	}
	head(b, "dsec_cluster_members", "gauge", "Other nodes of the cluster by state.");
	for (int s = DSECD_MEMBER_ALIVE; s <= DSECD_MEMBER_LEFT; s++) {
		unsigned n = 0;
		for (size_t i = 0; i < d->nmembers; i++)
			n += d->members[i].state == (enum dsecd_member_state)s;
		dsec_buf_addf(b, "dsec_cluster_members{state=\"%s\"} %u\n",
			      dsecd_member_state_name(s), n);
	}
	head(b, "dsec_forwarded_total", "counter", "Requests sent on to their owner, by node.");
	for (size_t i = 0; i < d->nmembers; i++)
		sample(b, "dsec_forwarded_total", "node", d->members[i].name, "",
		       d->members[i].forwarded);
	head(b, "dsec_forward_failures_total", "counter",
	     "Requests sent on that got no answer, by node.");
	for (size_t i = 0; i < d->nmembers; i++)
		sample(b, "dsec_forward_failures_total", "node", d->members[i].name, "",
		       d->members[i].failed);
	head(b, "dsec_placements_total", "counter",
	     "Creates and calls placed: kept here, sent away, refused and placed again, no room.");
	sample(b, "dsec_placements_total", "result", "here", "", d->placed_here);
	sample(b, "dsec_placements_total", "result", "away", "", d->placed_away);
	sample(b, "dsec_placements_total", "result", "again", "", d->placed_again);
	sample(b, "dsec_placements_total", "result", "no_room", "", d->placed_none);
	write_rl(d, b);
}

/* Loop: answer every queued scrape with one page. */
static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct dsecd_metrics *m = dsec_container_of(w, struct dsecd_metrics, wake);
	nng_aio *q[METRICS_QUEUE];
	struct dsec_buf page;
	size_t n;

	pthread_mutex_lock(&m->mu);
	n = m->nq;
	memcpy(q, m->q, n * sizeof(*q));
	m->nq = 0;
	pthread_mutex_unlock(&m->mu);
	if (!n)
		return;
	dsec_buf_init(&page);
	write_page(m->d, &page);
	for (size_t i = 0; i < n; i++) {
		nng_http_res *res;
		int rc = nng_http_res_alloc(&res);
		if (rc == 0 && (rc = nng_http_res_set_header(res, "Content-Type",
							     "text/plain; version=0.0.4")) == 0 &&
		    (rc = nng_http_res_copy_data(res, page.data, page.len)) == 0) {
			nng_aio_set_output(q[i], 0, res);
			nng_aio_finish(q[i], 0);
			continue;
		}
		if (res)
			nng_http_res_free(res);
		nng_aio_finish(q[i], rc);
	}
	dsec_buf_free(&page);
}

int dsecd_metrics_open(struct dsecd *d, struct dsec_err *err)
{
	const char *u = d->conf.metrics_listen;
	struct dsecd_metrics *m;
	nng_url *url = NULL;
	int rc;

	if (!u || !*u)
		return 0;
	if ((rc = nng_url_parse(&url, u)) != 0 || strcmp(url->u_scheme, "http") ||
	    !*url->u_path) {
		if (url)
			nng_url_free(url);
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "metrics_listen '%s' is not "
				     "http://HOST:PORT/PATH", u);
	}
	m = xcalloc(1, sizeof(*m));
	m->d = d;
	pthread_mutex_init(&m->mu, NULL);
	ev_async_init(&m->wake, wake_cb);
	const char *what = "start the server";
	if ((rc = nng_http_server_hold(&m->srv, url)) == 0) {
		what = "register its path";
		if ((rc = nng_http_handler_alloc(&m->h, url->u_path, handle)) == 0 &&
		    (rc = nng_http_handler_set_data(m->h, m, NULL)) == 0 &&
		    (rc = nng_http_server_add_handler(m->srv, m->h)) == 0) {
			m->h = NULL;	/* the server's now */
			what = "listen";
			rc = nng_http_server_start(m->srv);
		}
	}
	if (rc != 0) {
		if (m->h)
			nng_http_handler_free(m->h);
		if (m->srv)
			nng_http_server_release(m->srv);
		pthread_mutex_destroy(&m->mu);
		free(m);
		dsec_err_setc(err, rc == NNG_EADDRINUSE ? DSEC_E_EXISTS : DSEC_E_INVALID, EINVAL,
			      "cannot serve metrics on '%s': cannot %s: %s", u, what, nng_strerror(rc));
		nng_url_free(url);
		return -EINVAL;
	}
	nng_url_free(url);
	ev_async_start(d->loop, &m->wake);
	ev_unref(d->loop);
	d->metrics = m;
	log_info("metrics on %s", u);
	return 0;
}

void dsecd_metrics_close(struct dsecd *d)
{
	struct dsecd_metrics *m = d->metrics;

	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	pthread_mutex_unlock(&m->mu);
	/* Scrapes still queued get their page first. */
	wake_cb(d->loop, &m->wake, EV_ASYNC);
	nng_http_server_stop(m->srv);
	nng_http_server_release(m->srv);
	ev_ref(d->loop);
	ev_async_stop(d->loop, &m->wake);
	pthread_mutex_destroy(&m->mu);
	free(m);
	d->metrics = NULL;
}
