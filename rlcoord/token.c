/* token.c - idempotent creates: a client token names what its first create made.
 *
 * A create may carry "token" (1-128 bytes the client chose, unique per
 * sandbox it means to make).  The first create with a token makes the
 * sandbox; one sent again with it while the first is still making gets the
 * first one's reply when it comes; one sent after gets the sandbox the
 * first made ({id, node, backend, existing: true}).  So a create that
 * timed out on the client and is sent again never makes a second sandbox
 * (nor leaks the first).  A failed create forgets its token (a retry makes
 * a new attempt); so does the destruction of its sandbox.  In a cluster a
 * token has one home, the node that ranks first for it (rendezvous hashing
 * over this node and the alive members, rlc_pin): a create with it is sent
 * there from whichever node it reaches, so a retry through another node
 * finds the first.  A member that joins takes over the tokens it ranks
 * first for: a token create its home does not know is first looked for
 * (token_find) on the alive node that ranks next, its home before the
 * join, and goes there when that node has it.  A create in a lease goes to
 * the lease's node.
 *
 * Two nodes whose views of the cluster differ (one takes the home for
 * dead) may each think itself the token's home, and each asks the other.
 * So the question is a claim: a node records that it is asking before it
 * asks (creates sent meanwhile wait on that record), and the node asked
 * that has no record of the token records the asker as its maker (a
 * claim: a create for it there is sent on to the asker).  When both ask at
 * once, the one that ranks higher for the token makes it and the other
 * sends its creates there.  A claim is forgotten after CLAIM_NS, or when
 * its node is no longer alive.
 */
#include <errno.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define TOKEN_MAX 128
#define CLAIM_NS (600ull * 1000000000ull)	/* how long another node's claim holds */
#define CLAIMS_MAX 65536			/* claims of other nodes held at most */

static size_t bucket(const char *t)
{
	return dsec_fnv1a(DSEC_FNV1A_INIT, t, strlen(t)) % RLC_TOKEN_BUCKETS;
}

static struct rlc_token **find(struct rlc *rl, const char *t)
{
	struct rlc_token **pp = &rl->tokens[bucket(t)];

	while (*pp && strcmp((*pp)->token, t))
		pp = &(*pp)->next;
	return pp;
}

static void token_free(struct rlc *rl, struct rlc_token **pp)
{
	struct rlc_token *k = *pp;

	*pp = k->next;
	if (k->remote)
		rl->nclaims--;
	else
		rl->ntokens--;
	free(k->token);
	free(k->id);
	free(k->claimer);
	free(k);
}

static struct rlc_token *token_new(struct rlc *rl, struct rlc_token **pp, char *t)
{
	struct rlc_token *k = xcalloc(1, sizeof(*k));

	k->token = t;
	k->next = *pp;
	*pp = k;
	rl->ntokens++;
	return k;
}

/* Whether a request can be sent on to m: a member with an address that
 * is not known dead or gone (a suspect one may be alive: it may have just
 * asked). */
static bool reachable(const struct dsecd_member *m)
{
	return m && m->url && m->state != DSECD_MEMBER_DEAD && m->state != DSECD_MEMBER_LEFT;
}

/* The member k's claim names, or NULL when the claim is stale (its node
 * is dead or gone, or the claim is older than CLAIM_NS). */
static struct dsecd_member *claim_live(struct dsecd *d, const struct rlc_token *k)
{
	struct dsecd_member *m = dsecd_member_find(d, k->claimer, strlen(k->claimer));

	if (!reachable(m) || dsec_now_ns() - k->claimed_ns > CLAIM_NS)
		return NULL;
	return m;
}

/* Sends r on to m (it answers with its reply or an error). */
static void send_on(struct dsecd_req *r, struct dsecd_member *m)
{
	struct dsec_err err;

	dsec_err_clear(&err);
	r->d->rlc->tokens_reused++;
	if (dsecd_forward_to(r, m, &err) < 0)
		reply_err(r, &err);
}

bool rlc_token_create(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct rlc *rl = d->rlc;
	_cleanup_free_ char *t = NULL;
	struct rlc_token **pp, *k;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (dsec_get_text_opt(r->msg.root, "token", TOKEN_MAX, &t, &err) < 0) {
		reply_err(r, &err);
		return true;
	}
	if (!t)
		return false;
	if (!*t || !rl) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, !rl ? "node '%s' keeps no tokens"
			      : "field 'token' is empty%s", !rl ? d->conf.node : "");
		reply_err(r, &err);
		return true;
	}
	pp = find(rl, t);
	if ((k = *pp) && k->maker == r) {
		/* Its own record, made before it asked another node: it makes
		 * the sandbox here. */
		r->rl_token = k;
		return false;
	}
	if (k && k->remote && !k->maker) {
		/* Another node's claim that was not sent on (rlc_token_probe did
		 * not run, or the claim is stale): made here. */
		token_free(rl, pp);
		k = NULL;
	}
	if (k) {
		rl->tokens_reused++;
		if (!k->id) {
			/* Still being made: this one gets that one's reply. */
			r->rl_next = k->waiters;
			k->waiters = r;
			return true;
		}
		struct dsecd_sb *sb = dsecd_sb_lookup(d, k->id);
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_str(&p, "id", k->id);
		dsec_pk_kv_str(&p, "node", d->conf.node);
		dsec_pk_kv_str(&p, "backend", sb ? sb->be->name : "");
		dsec_pk_kv_bool(&p, "existing", true);
		dsec_pk_end(&p);
		r->rl_answered = true;
		req_complete(r, &p);
		return true;
	}
	k = token_new(rl, pp, t);
	t = NULL;
	k->maker = r;
	r->rl_token = k;
	return false;
}

/* The waiters of k get reply (or an error when there is none). */
static void answer_waiters(struct rlc_token *k, const void *reply, size_t len,
			   enum dsec_code code)
{
	struct dsecd_req *w;

	while ((w = k->waiters)) {
		k->waiters = w->rl_next;
		w->rl_next = NULL;
		w->rl_answered = true;
		if (reply) {
			void *copy = xmalloc(len ? len : 1);
			memcpy(copy, reply, len);
			w->reply_code = code;
			dsecd_req_release_frame(w, copy, len);
		} else {
			struct dsec_err err;
			dsec_err_setc(&err, DSEC_E_INTERNAL, EIO, "the create with this token ended "
				      "without a reply");
			reply_err(w, &err);
		}
	}
}

void rlc_token_made(struct dsecd_req *r)
{
	struct rlc *rl = r->d->rlc;
	struct rlc_token *k = r->rl_token;

	if (!k)
		return;
	r->rl_token = NULL;
	k->maker = NULL;
	if (r->reply && r->reply_code == DSEC_E_OK && r->sb && r->sb->state == SB_READY) {
		k->id = xstrdup(r->sb->id);
		free(r->sb->token);
		r->sb->token = xstrdup(k->token);
		answer_waiters(k, r->reply, r->reply_len, r->reply_code);
		return;
	}
	answer_waiters(k, r->reply, r->reply_len, r->reply_code);
	token_free(rl, find(rl, k->token));
}

void rlc_token_gone(struct dsecd *d, struct dsecd_sb *sb)
{
	struct rlc_token **pp;

	if (!sb->token || !d->rlc)
		return;
	pp = find(d->rlc, sb->token);
	if (*pp && (*pp)->id && !strcmp((*pp)->id, sb->id))
		token_free(d->rlc, pp);
	free(sb->token);
	sb->token = NULL;
}

static uint64_t token_rank(const char *node, const char *token, size_t n)
{
	uint64_t h = dsec_fnv1a(DSEC_FNV1A_INIT, node, strlen(node) + 1);
	return dsec_mix64(dsec_fnv1a(h, token, n));
}

/* The alive member that ranks first for token t (n bytes), and that rank
 * in *top; above floor only when with a floor (this node's own rank:
 * NULL when this node ranks first), and never this node. */
static struct dsecd_member *first_member(struct dsecd *d, const char *t, size_t n,
					 const uint64_t *floor, uint64_t *top)
{
	struct dsecd_member *best = NULL;

	*top = floor ? *floor : 0;
	for (size_t i = 0; i < d->nmembers; i++) {
		struct dsecd_member *m = &d->members[i];
		if (m->state != DSECD_MEMBER_ALIVE || !m->url || !strcmp(m->name, d->conf.node))
			continue;
		uint64_t rk = token_rank(m->name, t, n);
		if ((!best && !floor) || rk > *top) {
			*top = rk;
			best = m;
		}
	}
	return best;
}

struct dsecd_member *rlc_pin(struct dsecd_req *r, bool *pinned)
{
	struct dsecd *d = r->d;
	const msgpack_object *lease = dsec_map_get(r->msg.root, "lease");
	const msgpack_object *tok = dsec_map_get(r->msg.root, "token");
	uint64_t self, top;

	*pinned = false;
	if (lease && lease->type == MSGPACK_OBJECT_STR) {
		const char *p = lease->via.str.ptr, *colon = memchr(p, ':', lease->via.str.size);
		*pinned = true;
		if (!colon || ((size_t)(colon - p) == strlen(d->conf.node) &&
			       !memcmp(p, d->conf.node, (size_t)(colon - p))))
			return NULL;	/* ours, or no node named: the handler says */
		return dsecd_member_find(d, p, (size_t)(colon - p));
	}
	if (!tok || tok->type != MSGPACK_OBJECT_STR || !tok->via.str.size)
		return NULL;
	*pinned = true;
	self = token_rank(d->conf.node, tok->via.str.ptr, tok->via.str.size);
	return first_member(d, tok->via.str.ptr, tok->via.str.size, &self, &top);
}

struct probe {
	struct dsecd_req *r;		/* the create */
	char *node;			/* the node asked */
	char *token;			/* its token */
};

/* r, the maker of k, and k's waiters go on to m; k is forgotten. */
static void send_all_on(struct rlc *rl, struct rlc_token **pp, struct dsecd_member *m)
{
	struct rlc_token *k = *pp;
	struct dsecd_req *r = k->maker, *w;

	r->rl_token = NULL;
	k->maker = NULL;
	w = k->waiters;
	k->waiters = NULL;
	token_free(rl, pp);
	send_on(r, m);
	while (w) {
		struct dsecd_req *next = w->rl_next;

		w->rl_next = NULL;
		send_on(w, m);
		w = next;
	}
}

static void probed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct probe *pr = arg;
	struct dsecd_req *r = pr->r;
	struct dsecd *d = r->d;
	struct rlc *rl = d->rlc;
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);
	_cleanup_free_ char *claimer = NULL;
	struct dsecd_member *to = NULL;
	struct rlc_token **pp, *k;
	bool b;

	(void)code;
	d->ops_inflight--;
	pp = rl ? find(rl, pr->token) : NULL;
	k = pp ? *pp : NULL;
	if (!k || k->maker != r) {	/* the node is closing (rlc_tokens_free) */
		free(pr->node);
		free(pr->token);
		free(pr);
		return rerun(r);
	}
	k->probing = false;
	if (res && ((dsec_get_bool(res, "found", &b, NULL) == 0 && b) ||
		    (dsec_get_bool(res, "pending", &b, NULL) == 0 && b)))
		/* The first create of this token was served there: so is this one. */
		to = dsecd_member_find(d, pr->node, strlen(pr->node));
	else if (res && dsec_get_str(res, "claimer", &claimer, NULL) == 0 &&
		 strcmp(claimer, d->conf.node))
		/* Another node asked there first: it makes it. */
		to = dsecd_member_find(d, claimer, strlen(claimer));
	else if (k->claimer)
		/* A node that ranks higher asked here meanwhile: it makes it. */
		to = dsecd_member_find(d, k->claimer, strlen(k->claimer));
	dsec_msg_free(&m);
	free(pr->node);
	free(pr->token);
	free(pr);
	if (reachable(to))
		return send_all_on(rl, pp, to);
	free(k->claimer);
	k->claimer = NULL;
	rerun(r);	/* nobody else has it: made here (rlc_token_create) */
}

bool rlc_token_probe(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct rlc *rl = d->rlc;
	const msgpack_object *tok = dsec_map_get(r->msg.root, "token");
	struct dsecd_member *m;
	struct rlc_token **pp, *k;
	struct dsec_pk p;
	uint64_t top;
	char *t;

	if (r->op != DSEC_OP_CREATE || r->token_probed || !rl || !d->nmembers ||
	    dsec_has(r->msg.root, "lease") ||
	    !tok || tok->type != MSGPACK_OBJECT_STR || !tok->via.str.size ||
	    tok->via.str.size > TOKEN_MAX)
		return false;
	t = xstrndup(tok->via.str.ptr, tok->via.str.size);
	pp = find(rl, t);
	if ((k = *pp) && k->claimer) {
		/* Another node makes it (its claim here, or this node's yield
		 * to it while asking): this create goes there. */
		if ((m = claim_live(d, k))) {
			free(t);
			send_on(r, m);
			return true;
		}
		if (k->remote)
			token_free(rl, pp);
		k = *pp;
	}
	if (k || !(m = first_member(d, t, strlen(t), NULL, &top))) {
		free(t);
		return false;	/* the handler answers from its record, or makes it */
	}
	/* Recorded before asking: a create sent meanwhile waits on it, and a
	 * node that asks here meanwhile finds it. */
	k = token_new(rl, pp, t);
	k->maker = r;
	k->probing = true;
	struct probe *pr = xcalloc(1, sizeof(*pr));
	pr->r = r;
	pr->node = xstrdup(m->name);
	pr->token = xstrdup(t);
	r->token_probed = true;
	d->ops_inflight++;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "token_find");
	dsec_pk_kv_str(&p, "token", t);
	dsec_pk_kv_str(&p, "to", m->name);
	dsec_pk_kv_str(&p, "from", d->conf.node);
	dsec_pk_kv_double(&p, "timeout", 1);
	dsec_pk_end(&p);
	rlc_send(d, &p, probed, pr, false);
	return true;
}

/* Forgets the stale claims of other nodes. */
static void claims_sweep(struct dsecd *d)
{
	struct rlc *rl = d->rlc;

	for (size_t b = 0; b < RLC_TOKEN_BUCKETS; b++)
		for (struct rlc_token **pp = &rl->tokens[b]; *pp;)
			if ((*pp)->remote && !claim_live(d, *pp))
				token_free(rl, pp);
			else
				pp = &(*pp)->next;
}

/* token_find at the node asked, with 'from' (the asker, which would make
 * it): what it answers, recording the claim it grants.  A token unknown
 * here is granted to the asker; one this node is asking about too goes to
 * the one of the two that ranks higher for it. */
static void find_claim(struct dsecd *d, const char *t, const char *from, struct dsec_pk *p)
{
	struct rlc *rl = d->rlc;
	struct rlc_token **pp = find(rl, t), *k = *pp;
	bool can = reachable(dsecd_member_find(d, from, strlen(from)));
	size_t n = strlen(t);

	if (k && k->remote && !claim_live(d, k)) {
		token_free(rl, pp);
		k = NULL;
	}
	if (!k && !can) {
		/* An asker this node cannot send creates to sends its own here:
		 * this node makes it. */
		dsec_pk_kv_bool(p, "found", false);
		dsec_pk_kv_bool(p, "pending", false);
		dsec_pk_kv_str(p, "claimer", d->conf.node);
		return;
	}
	if (!k && rl->nclaims >= CLAIMS_MAX)
		claims_sweep(d);
	if (!k && rl->nclaims >= CLAIMS_MAX) {
		/* Full of fresh claims: the asker makes it, unrecorded. */
		dsec_pk_kv_bool(p, "found", false);
		dsec_pk_kv_bool(p, "pending", false);
		return;
	}
	if (!k) {
		pp = find(rl, t);
		k = token_new(rl, pp, xstrdup(t));
		k->remote = true;
		rl->ntokens--;
		rl->nclaims++;
	}
	/* This node yields only to one it can send its creates to. */
	if (!k->id && !k->claimer &&
	    (k->remote || (k->probing && can &&
			   token_rank(d->conf.node, t, n) < token_rank(from, t, n)))) {
		k->claimer = xstrdup(from);
		k->claimed_ns = dsec_now_ns();
	}
	dsec_pk_kv_bool(p, "found", k->id);
	dsec_pk_kv_bool(p, "pending", !k->id && !k->claimer);
	if (k->id)
		dsec_pk_kv_str(p, "id", k->id);
	else if (k->claimer)
		dsec_pk_kv_str(p, "claimer", k->claimer);
}

void op_token_find(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	_cleanup_free_ char *t = NULL, *to = NULL, *from = NULL;
	struct rlc_token *k = NULL;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (dsec_get_text(r->msg.root, "token", TOKEN_MAX, &t, &err) < 0 ||
	    dsec_get_str_opt(r->msg.root, "to", &to, &err) < 0 ||
	    dsec_get_str_opt(r->msg.root, "from", &from, &err) < 0)
		return reply_err(r, &err);
	if (to && strcmp(to, d->conf.node) && !dsec_has(r->msg.root, "fwd")) {
		struct dsecd_member *m = dsecd_member_find(d, to, strlen(to));
		if (m && m->state == DSECD_MEMBER_ALIVE && m->url) {
			if (dsecd_forward_to(r, m, &err) < 0)
				reply_err(r, &err);
			return;
		}
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	/* When 'to' is another node (not sent on), nobody known has it. */
	bool here = d->rlc && (!to || !strcmp(to, d->conf.node));
	if (here && from && *from && strcmp(from, d->conf.node)) {
		find_claim(d, t, from, &p);
	} else {
		if (here && (k = *find(d->rlc, t)) && k->remote)
			k = NULL;
		dsec_pk_kv_bool(&p, "found", k && k->id);
		dsec_pk_kv_bool(&p, "pending", k && !k->id);
		if (k && k->id)
			dsec_pk_kv_str(&p, "id", k->id);
	}
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void rlc_tokens_free(struct rlc *rl)
{
	for (size_t b = 0; b < RLC_TOKEN_BUCKETS; b++)
		while (rl->tokens[b])
			token_free(rl, &rl->tokens[b]);
}
