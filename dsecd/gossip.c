/* gossip.c - the cluster's membership from SWIM gossip (libswim).
 *
 * With gossip_listen set, the node runs libswim on its loop (swim_ev: a
 * UDP socket and a TCP port for push-pull, no threads), joins through
 * gossip_seeds, and keeps the member table (cluster.c) as the gossip says:
 * a member that joins or comes back is alive with the API address its
 * metadata names, one suspected is suspect, one declared dead is dead (its
 * sandboxes answer node_lost), one that left is left.  Its own capacity
 * goes out as its metadata (the format is placing.c's), re-sent under a
 * new version when it changed, at most once a second: the API address,
 * drain state, sandboxes and the limit, per backend its sandboxes and the
 * room it reports, creates in progress, free memory and disk, load.
 * Every packet is authenticated with the cluster key (cluster_key_file;
 * the first of them signs, all are accepted: rotation).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "swim.h"

/* Seconds between looks at whether the capacity changed: a placing node's
 * view of the others is this much behind, plus the gossip's spread (a few
 * 200 ms rounds).  Only a change is sent, so an idle node sends none. */
#define META_PERIOD 0.25
/* Looks between asks of the seeds while the node knows no other (1 s). */
#define REJOIN_TICKS 4

struct dsecd_gossip {
	struct dsecd *d;		/* the daemon */
	struct swim_ev *ev;		/* libswim on the loop */
	ev_timer meta_timer;		/* re-sends the capacity when it changed */
	struct dsecd_cap last;		/* the capacity last sent (its version the latest) */
	char *api;			/* the API address the metadata names */
	struct swim_key keys[SWIM_KEYS_MAX];	/* accepted keys, the first signs */
	size_t nkeys;			/* entries in keys */
	unsigned char keybuf[SWIM_KEYS_MAX][SWIM_KEY_MAX];	/* their bytes */
	bool left;			/* swim_leave was called (leave op, shutdown) */
	unsigned ticks;			/* meta_timer's, counted */
};

/* Reads a key file: its bytes as they are, or hex when the file is hex
 * digits (and a newline); SWIM_KEY_MIN to SWIM_KEY_MAX bytes. */
static int read_key(const char *path, unsigned char *out, size_t *len, struct dsec_err *err)
{
	_cleanup_free_ char *data = NULL;
	size_t n = 0;
	int r;

	if ((r = dsec_read_file(path, &data, &n)) < 0)
		return dsec_err_set(err, -r, "cannot read cluster key '%s': %s", path, strerror(-r));
	while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
		n--;
	bool hex = n && n % 2 == 0 && strspn(data, "0123456789abcdefABCDEF") >= n;
	size_t klen = hex ? n / 2 : n;
	if (klen < SWIM_KEY_MIN || klen > SWIM_KEY_MAX)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cluster key '%s' has %zu bytes: "
				     "%d to %d wanted", path, klen, SWIM_KEY_MIN, SWIM_KEY_MAX);
	for (size_t i = 0; i < klen; i++) {
		unsigned v;
		if (hex) {
			sscanf(data + 2 * i, "%2x", &v);
			out[i] = (unsigned char)v;
		} else {
			out[i] = (unsigned char)data[i];
		}
	}
	*len = klen;
	return 0;
}

/* The API address the others reach this node at: api_url, else the first
 * listen URL that is not ipc://, its wildcard host made the gossip
 * address's. */
static char *api_url(struct dsecd *d, const char *gossip_addr)
{
	if (d->conf.api_url)
		return xstrdup(d->conf.api_url);
	for (char **u = d->conf.listen; u && *u; u++) {
		if (!strncmp(*u, "ipc://", 6) || !strncmp(*u, "inproc://", 9))
			continue;
		const char *h = strstr(*u, "://");
		const char *colon = h ? strrchr(h + 3, ':') : NULL;
		if (!h || !colon)
			continue;
		size_t hl = (size_t)(colon - (h + 3));
		bool wild = (hl == 7 && !strncmp(h + 3, "0.0.0.0", 7)) || (hl == 4 && !strncmp(h + 3, "[::]", 4)) ||
			    hl == 0;
		if (!wild)
			return xstrdup(*u);
		const char *gc = strrchr(gossip_addr, ':');
		return xasprintf("%.*s%.*s%s", (int)(h + 3 - *u), *u,
				 gc ? (int)(gc - gossip_addr) : 0, gossip_addr, colon);
	}
	return xstrdup(d->conf.listen && d->conf.listen[0] ? d->conf.listen[0] : DSEC_DEFAULT_URL);
}

/* This node's capacity as metadata, under the next version. */
static void pack_meta(struct dsecd_gossip *g, const struct dsecd_cap *c, struct dsec_buf *out)
{
	struct dsec_pk p;
	void *bytes;
	size_t len;

	dsec_pk_init(&p);
	dsecd_cap_pack(c, g->api, &p);
	bytes = dsec_pk_detach(&p, &len);
	dsec_buf_reset(out);
	dsec_buf_add(out, bytes, len);
	free(bytes);
}

static void meta_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_gossip *g = dsec_container_of(w, struct dsecd_gossip, meta_timer);
	struct swim *s = g->ev ? swim_ev_swim(g->ev) : NULL;
	struct dsec_buf now;

	/* Nodes started together may each find no seed up yet: while this one
	 * knows no other, it asks the seeds again every second, not only
	 * at libswim's push-pull (every 30 s). */
	char **seeds = g->d->conf.gossip_seeds;
	if (s && seeds && seeds[0] && swim_alive_count(s) <= 1 && revents &&
	    ++g->ticks % REJOIN_TICKS == 0)
		swim_join(s, (const char *const *)seeds, dsec_strv_len((const char *const *)seeds));

	struct dsecd_cap cap;
	if (revents)
		dsecd_sys_sample(g->d);
	dsecd_cap_self(g->d, &cap);
	if (g->last.known && !dsecd_cap_differs(&cap, &g->last))
		return;
	cap.version = g->last.version + 1;
	dsec_buf_init(&now);
	pack_meta(g, &cap, &now);
	if (now.len <= SWIM_META_MAX && swim_set_meta(swim_ev_swim(g->ev), now.data, now.len) == 0)
		g->last = cap;
	dsec_buf_free(&now);
}

static void event_cb(void *arg, enum swim_event ev, const struct swim_member *m)
{
	struct dsecd_gossip *g = arg;
	struct dsecd *d = g->d;
	enum dsecd_member_state st;

	if (m->self || !dsecd_node_name_ok(m->name))
		return;
	switch (ev) {
	case SWIM_EV_SUSPECT: st = DSECD_MEMBER_SUSPECT; break;
	case SWIM_EV_DEAD: st = DSECD_MEMBER_DEAD; break;
	case SWIM_EV_LEFT: st = DSECD_MEMBER_LEFT; break;
	default: st = DSECD_MEMBER_ALIVE; break;
	}
	struct dsecd_cap cap;
	_cleanup_free_ char *api = NULL;
	dsecd_cap_parse(&cap, m->meta, m->meta_len, &api);
	struct dsecd_member *x = dsecd_member_find(d, m->name, strlen(m->name));
	bool changed = !x || x->state != st || (api && strcmp(api, x->url));
	x = dsecd_member_set(d, m->name, api, st);
	if (!x)
		return;
	if (ev != SWIM_EV_UPDATE)
		log_info("cluster: node %s is %s (gossip %s, API %s)", m->name,
			 dsecd_member_state_name(st), m->addr, x->url ? x->url : "?");
	/* libswim hands over a member's metadata only when newer (a higher
	 * incarnation than the one it holds), so a newer capacity replaces an
	 * older one, never the reverse, also for a restarted node, whose
	 * versions count from 1 again. */
	x->cap = cap;
	x->cap.heard = ev_now(d->loop);
	if (changed)
		dsecd_images_peers(d);	/* the image store's peers: the alive members */
}

int dsecd_gossip_open(struct dsecd *d, struct dsec_err *err)
{
	struct dsecd_gossip *g;
	int rc;

	if (!d->conf.gossip_listen)
		return 0;
	if (!d->conf.cluster_keys || !d->conf.cluster_keys[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "gossip_listen needs the cluster "
				     "key: cluster_key_file");
	g = xcalloc(1, sizeof(*g));
	g->d = d;
	for (char **k = d->conf.cluster_keys; *k; k++) {
		if (g->nkeys == SWIM_KEYS_MAX) {
			rc = dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "at most %d cluster keys",
					   SWIM_KEYS_MAX);
			goto fail;
		}
		size_t len = 0;
		if ((rc = read_key(*k, g->keybuf[g->nkeys], &len, err)) < 0)
			goto fail;
		g->keys[g->nkeys] = (struct swim_key){ g->keybuf[g->nkeys], len };
		g->nkeys++;
	}
	struct swim_ev_conf c = {
		.bind = d->conf.gossip_listen,
		.swim = { .name = d->conf.node, .addr = d->conf.gossip_advertise,
			  .keys = g->keys, .nkeys = g->nkeys,
			  /* memberlist's ratio: an ack is waited for half a period */
			  .probe_interval_ms = (uint32_t)(d->conf.gossip_probe_interval * 1000),
			  .probe_timeout_ms = (uint32_t)(d->conf.gossip_probe_interval * 500),
			  /* and the dead are gossiped to for 30 periods */
			  .gossip_to_dead_ms = (uint32_t)(d->conf.gossip_probe_interval * 30000),
			  .reconnect_interval_ms =
				(uint32_t)(d->conf.gossip_reconnect_interval * 1000) },
		.event = event_cb,
		.arg = g,
	};
	if ((rc = swim_ev_new(&g->ev, d->loop, &c)) < 0) {
		dsec_err_setc(err, rc == -EINVAL ? DSEC_E_INVALID : DSEC_E_EXISTS, -rc,
			      "cannot gossip on '%s': %s", d->conf.gossip_listen, strerror(-rc));
		goto fail;
	}
	g->api = api_url(d, swim_ev_addr(g->ev));
	d->gossip = g;
	meta_cb(d->loop, &g->meta_timer, 0);
	ev_timer_init(&g->meta_timer, meta_cb, META_PERIOD, META_PERIOD);
	ev_timer_start(d->loop, &g->meta_timer);
	ev_unref(d->loop);
	size_t nseeds = dsec_strv_len((const char *const *)d->conf.gossip_seeds);
	if (nseeds && swim_join(swim_ev_swim(g->ev), (const char *const *)d->conf.gossip_seeds,
				nseeds) < 0)
		log_warn("cluster: no seed of gossip_seeds could be asked yet; trying again later");
	log_info("cluster: gossip on %s as %s (API %s), %zu seeds", swim_ev_addr(g->ev),
		 d->conf.node, g->api, nseeds);
	return 0;
fail:
	free(g);
	return rc;
}

const struct dsecd_cap *dsecd_gossip_last(struct dsecd *d)
{
	return d->gossip && d->gossip->last.known ? &d->gossip->last : NULL;
}

uint64_t dsecd_gossip_next_version(struct dsecd *d)
{
	return d->gossip ? d->gossip->last.version + 1 : 0;
}

void dsecd_gossip_leave(struct dsecd *d)
{
	if (d->gossip && !d->gossip->left) {
		d->gossip->left = true;
		swim_leave(swim_ev_swim(d->gossip->ev));
	}
}

bool dsecd_gossip_leaving(struct dsecd *d)
{
	return d->gossip && d->gossip->left && swim_leave_pending(swim_ev_swim(d->gossip->ev));
}

void dsecd_gossip_close(struct dsecd *d)
{
	struct dsecd_gossip *g = d->gossip;

	if (!g)
		return;
	ev_ref(d->loop);
	ev_timer_stop(d->loop, &g->meta_timer);
	swim_ev_free(g->ev);
	free(g->api);
	free(g);
	d->gossip = NULL;
}

void dsecd_gossip_pack(struct dsecd *d, struct dsec_pk *p)
{
	struct swim_stats st;

	if (!d->gossip)
		return;
	swim_stats(swim_ev_swim(d->gossip->ev), &st);
	dsec_pk_str(p, "gossip");
	dsec_pk_map_begin(p);
	dsec_pk_kv_str(p, "address", swim_ev_addr(d->gossip->ev));
	dsec_pk_kv_str(p, "api", d->gossip->api);
	dsec_pk_kv_u64(p, "members", st.members);
	dsec_pk_kv_u64(p, "awareness", st.awareness);
	dsec_pk_kv_u64(p, "packets_sent", st.pkts_sent);
	dsec_pk_kv_u64(p, "bytes_sent", st.bytes_sent);
	dsec_pk_kv_u64(p, "packets_received", st.pkts_recv);
	dsec_pk_kv_u64(p, "dropped_unauthenticated", st.dropped_auth);
	dsec_pk_kv_u64(p, "dropped_malformed", st.dropped_malformed);
	dsec_pk_kv_u64(p, "suspicions", st.suspicions);
	dsec_pk_kv_u64(p, "deaths", st.deaths);
	dsec_pk_end(p);
}
