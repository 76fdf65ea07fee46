/* swim.c - SWIM membership with the Lifeguard refinements (see swim.h and
 * dsec-gossip(7)).
 *
 * Shape: one struct swim per node; members in an array in probe order
 * (shuffled each round) plus a hash by name; every deadline (next probe,
 * ack wait, gossip, push-pull, each suspicion, each relayed indirect
 * probe) is a struct swim_timer in one binary heap, and the env is asked
 * to wake us at the earliest.  State changes are queued as encoded
 * messages (one per subject member) and piggybacked.
 */
#include "swim_int.h"

/* ---- formulas ---------------------------------------------------------- */

uint64_t swim_suspicion_min(uint32_t mult, size_t n, uint64_t interval)
{
	double scale = fmax(1.0, log10(fmax(1.0, (double)n)));

	return (uint64_t)(mult * scale * (double)interval);
}

/* Lifeguard's decay: from max with no confirmation down to min with k of
 * them, logarithmically (memberlist's remainingSuspicionTime, before the
 * elapsed time is taken off). */
uint64_t swim_suspicion_timeout(uint64_t min, uint64_t max, unsigned k, unsigned confirmations)
{
	if (k == 0)
		return min;
	double frac = log((double)confirmations + 1.0) / log((double)k + 1.0);
	double raw = (double)max - frac * ((double)max - (double)min);
	uint64_t t = (uint64_t)(floor(raw / 1000.0) * 1000.0);	/* whole ms */

	return t < min ? min : t;
}

unsigned swim_retransmit_limit(uint32_t mult, size_t n)
{
	return mult * (unsigned)ceil(log10((double)n + 1.0));
}

const char *swim_state_name(enum swim_state st)
{
	static const char *const names[] = {
		[SWIM_ALIVE] = "alive", [SWIM_SUSPECT] = "suspect",
		[SWIM_DEAD] = "dead", [SWIM_LEFT] = "left",
	};
	return (unsigned)st < DSEC_ARRAY_LEN(names) ? names[st] : "?";
}

const char *swim_event_name(enum swim_event ev)
{
	static const char *const names[] = {
		[SWIM_EV_JOIN] = "join", [SWIM_EV_UPDATE] = "update",
		[SWIM_EV_SUSPECT] = "suspect", [SWIM_EV_DEAD] = "dead",
		[SWIM_EV_LEFT] = "left", [SWIM_EV_ALIVE] = "alive",
	};
	return (unsigned)ev < DSEC_ARRAY_LEN(names) ? names[ev] : "?";
}

/* ---- timers ------------------------------------------------------------ */

static uint64_t now(struct swim *s)
{
	return s->env.now(s->env.ctx);
}

static void heap_swap(struct swim *s, size_t a, size_t b)
{
	struct swim_timer *t = s->heap[a];

	s->heap[a] = s->heap[b];
	s->heap[b] = t;
	s->heap[a]->hidx = a;
	s->heap[b]->hidx = b;
}

static void heap_up(struct swim *s, size_t i)
{
	while (i > 0 && s->heap[(i - 1) / 2]->at > s->heap[i]->at) {
		heap_swap(s, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(struct swim *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < s->nheap && s->heap[l]->at < s->heap[m]->at)
			m = l;
		if (r < s->nheap && s->heap[r]->at < s->heap[m]->at)
			m = r;
		if (m == i)
			return;
		heap_swap(s, i, m);
		i = m;
	}
}

static void timer_init(struct swim_timer *t, timer_fn *fn)
{
	t->hidx = SIZE_MAX;
	t->fn = fn;
}

static void timer_stop(struct swim *s, struct swim_timer *t)
{
	size_t i = t->hidx;

	if (i == SIZE_MAX)
		return;
	t->hidx = SIZE_MAX;
	if (i != --s->nheap) {
		s->heap[i] = s->heap[s->nheap];
		s->heap[i]->hidx = i;
		heap_up(s, i);
		heap_down(s, s->heap[i]->hidx);
	}
}

static void timer_at(struct swim *s, struct swim_timer *t, uint64_t at)
{
	timer_stop(s, t);
	if (s->nheap == s->heap_cap) {
		s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 16;
		s->heap = xrealloc(s->heap, s->heap_cap * sizeof(*s->heap));
	}
	t->at = at;
	t->hidx = s->nheap;
	s->heap[s->nheap++] = t;
	heap_up(s, t->hidx);
}

static void timer_in(struct swim *s, struct swim_timer *t, uint64_t us)
{
	timer_at(s, t, now(s) + us);
}

/* Asks the env for a wake-up at the earliest deadline; called at the end
 * of every entry point. */
void sw_rearm(struct swim *s)
{
	if (s->nheap && s->heap[0]->at != s->timer_asked) {
		s->timer_asked = s->heap[0]->at;
		s->env.set_timer(s->env.ctx, s->timer_asked);
	}
}

void swim_tick(struct swim *s)
{
	uint64_t t = now(s);

	s->timer_asked = 0;
	while (s->nheap && s->heap[0]->at <= t) {
		struct swim_timer *tm = s->heap[0];

		timer_stop(s, tm);
		tm->fn(s, tm);
	}
	sw_rearm(s);
}

/* ---- randomness and awareness ------------------------------------------ */

static uint64_t rnd(struct swim *s, uint64_t n)
{
	return n ? s->env.rand(s->env.ctx) % n : 0;
}

static void awareness_delta(struct swim *s, int d)
{
	if (s->conf.flags & SWIM_NO_AWARENESS)
		return;
	s->awareness += d;
	if (s->awareness < 0)
		s->awareness = 0;
	if (s->awareness > (int)s->conf.awareness_max - 1)
		s->awareness = (int)s->conf.awareness_max - 1;
}

static uint64_t ms(uint32_t v)
{
	return (uint64_t)v * 1000;
}

/* ---- members ----------------------------------------------------------- */

static uint64_t hash_name(const char *name)
{
	uint64_t h = 14695981039346656037ull;	/* FNV-1a */

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 1099511628211ull;
	return h;
}

struct member *sw_find(const struct swim *s, const char *name)
{
	struct member *m = s->hash[hash_name(name) & (s->nbuckets - 1)];

	while (m && strcmp(m->name, name))
		m = m->hnext;
	return m;
}

static void hash_insert(struct swim *s, struct member *m)
{
	struct member **b = &s->hash[hash_name(m->name) & (s->nbuckets - 1)];

	m->hnext = *b;
	*b = m;
}

static void hash_remove(struct swim *s, struct member *m)
{
	struct member **b = &s->hash[hash_name(m->name) & (s->nbuckets - 1)];

	while (*b != m)
		b = &(*b)->hnext;
	*b = m->hnext;
}

static void hash_grow(struct swim *s)
{
	free(s->hash);
	s->nbuckets *= 2;
	s->hash = xcalloc(s->nbuckets, sizeof(*s->hash));
	for (size_t i = 0; i < s->nmembers; i++)
		hash_insert(s, s->members[i]);
}

static void member_view(const struct swim *s, const struct member *m, struct swim_member *out)
{
	*out = (struct swim_member){
		.name = m->name, .addr = m->addr, .incarnation = m->inc, .state = m->state,
		.meta_version = m->meta_ver, .meta = m->meta, .meta_len = m->meta_len,
		.self = m == s->self,
	};
}

static void emit(struct swim *s, enum swim_event ev, const struct member *m)
{
	struct swim_member v;

	if (!s->env.event)
		return;
	member_view(s, m, &v);
	s->env.event(s->env.ctx, ev, &v);
}

static void set_meta(struct member *m, uint64_t ver, const void *meta, size_t len)
{
	free(m->meta);
	m->meta = len ? xmemdup(meta, len) : NULL;
	m->meta_len = len;
	m->meta_ver = ver;
}

/* A new member goes in at a random position of the probe order (the one
 * there moves to the end), so that it is probed within this round with a
 * fair chance wherever the round is. */
static struct member *member_add(struct swim *s, const char *name, const char *addr)
{
	struct member *m = xcalloc(1, sizeof(*m));

	m->name = xstrdup(name);
	m->addr = xstrdup(addr);
	m->state_change = now(s);
	if (s->nmembers == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->members = xrealloc(s->members, s->cap * sizeof(*s->members));
	}
	if (s->nmembers >= s->nbuckets)
		hash_grow(s);
	size_t n = s->nmembers++, off = rnd(s, n + 1);

	if (off != n) {
		s->members[n] = s->members[off];
		s->members[n]->idx = n;
	}
	s->members[off] = m;
	m->idx = off;
	hash_insert(s, m);
	s->st.members = (uint32_t)s->nmembers;
	return m;
}

static void suspicion_free(struct swim *s, struct member *m)
{
	struct suspicion *su = m->susp;

	if (!su)
		return;
	timer_stop(s, &su->t);
	for (unsigned i = 0; i < su->nfrom; i++)
		free(su->from[i]);
	free(su->from);
	free(su);
	m->susp = NULL;
}

static void member_free(struct swim *s, struct member *m)
{
	suspicion_free(s, m);
	free(m->name);
	free(m->addr);
	free(m->meta);
	free(m);
}

static void failed_drop(struct swim *s, size_t i)
{
	free(s->failed[i].name);
	free(s->failed[i].addr);
	s->failed[i] = s->failed[--s->nfailed];
}

static void failed_add(struct swim *s, const struct member *m)
{
	s->failed = xrealloc(s->failed, (s->nfailed + 1) * sizeof(*s->failed));
	s->failed[s->nfailed++] = (struct failed){
		.name = xstrdup(m->name), .addr = xstrdup(m->addr), .since = now(s),
	};
}

/* A member known again is no longer tried as failed. */
static void failed_forget(struct swim *s, const char *name)
{
	for (size_t i = 0; i < s->nfailed; i++)
		if (!strcmp(s->failed[i].name, name)) {
			failed_drop(s, i);
			return;
		}
}

/* ---- packets ----------------------------------------------------------- */

static void tag(const uint8_t *key, size_t klen, const void *data, size_t len,
		uint8_t out[SWIM_TAG_LEN])
{
	unsigned olen = SWIM_TAG_LEN;

	if (!HMAC(EVP_sha256(), key, (int)klen, data, len, out, &olen))
		DSEC_BUG("HMAC-SHA256 failed");
}

/* Is buf[0..len) body + tag under one of the accepted keys?  *body_len
 * gets the body's length. */
bool sw_authentic(struct swim *s, const void *buf, size_t len, size_t *body_len)
{
	uint8_t t[SWIM_TAG_LEN];

	if (len <= SWIM_TAG_LEN)
		return false;
	*body_len = len - SWIM_TAG_LEN;
	for (size_t i = 0; i < s->nkeys; i++) {
		tag(s->keys[i], s->key_len[i], buf, *body_len, t);
		if (!CRYPTO_memcmp(t, (const uint8_t *)buf + *body_len, SWIM_TAG_LEN))
			return true;
	}
	return false;
}

/* Appends the primary key's tag to what sb holds. */
static void seal(struct swim *s, msgpack_sbuffer *sb)
{
	uint8_t t[SWIM_TAG_LEN];

	tag(s->keys[0], s->key_len[0], sb->data, sb->size, t);
	msgpack_sbuffer_write(sb, (const char *)t, SWIM_TAG_LEN);
}

static void msg_init(msgpack_sbuffer *sb, msgpack_packer *pk)
{
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
}

static void pack_str(msgpack_packer *pk, const char *str)
{
	size_t n = strlen(str);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, str, n);
}

static void pack_bin(msgpack_packer *pk, const void *d, size_t n)
{
	msgpack_pack_bin(pk, n);
	msgpack_pack_bin_body(pk, d, n);
}

/* Broadcasts for one packet with `avail` bytes left: fewest transmissions
 * first, then newest; each taken counts a transmission and goes once it
 * reached the retransmit limit.  Returns how many it put in take[]. */
static int bcast_cmp(const void *a, const void *b)
{
	const struct bcast *x = a, *y = b;

	if (x->transmits != y->transmits)
		return x->transmits < y->transmits ? -1 : 1;
	return x->id > y->id ? -1 : x->id < y->id;
}

static void bcast_drop(struct bcast *b)
{
	free(b->subject);
	free(b->buf);
}

/* Packs as many queued broadcasts as fit in avail bytes into sb (after
 * an array header the caller wrote with room for the count: we return
 * the count and the caller patches it, see send_msgs). */
static size_t take_broadcasts(struct swim *s, msgpack_sbuffer *sb, size_t avail)
{
	unsigned limit = swim_retransmit_limit(s->conf.retransmit_mult, s->nmembers);
	size_t n = 0, keep = 0;

	if (!s->nqueue)
		return 0;
	qsort(s->queue, s->nqueue, sizeof(*s->queue), bcast_cmp);
	for (size_t i = 0; i < s->nqueue; i++) {
		struct bcast *b = &s->queue[i];

		if (b->len <= avail) {
			msgpack_sbuffer_write(sb, b->buf, b->len);
			avail -= b->len;
			b->transmits++;
			n++;
		}
		if (b->transmits >= limit)
			bcast_drop(b);
		else
			s->queue[keep++] = *b;
	}
	s->nqueue = keep;
	return n;
}

/* Queues a state message about subject, replacing an older one about the
 * same member. */
static void broadcast(struct swim *s, const char *subject, msgpack_sbuffer *msg, bool leave)
{
	for (size_t i = 0; i < s->nqueue; i++)
		if (!strcmp(s->queue[i].subject, subject)) {
			bcast_drop(&s->queue[i]);
			s->queue[i] = s->queue[--s->nqueue];
			break;
		}
	if (s->nqueue == s->qcap) {
		s->qcap = s->qcap ? 2 * s->qcap : 16;
		s->queue = xrealloc(s->queue, s->qcap * sizeof(*s->queue));
	}
	size_t len = msg->size;

	s->queue[s->nqueue++] = (struct bcast){
		.subject = xstrdup(subject), .buf = msgpack_sbuffer_release(msg), .len = len,
		.id = ++s->bcast_id, .leave = leave,
	};
	s->st.broadcasts_queued++;
}

static void pack_alive(msgpack_packer *pk, const struct member *m)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint8(pk, MSG_ALIVE);
	pack_str(pk, m->name);
	pack_str(pk, m->addr);
	msgpack_pack_uint64(pk, m->inc);
	msgpack_pack_uint64(pk, m->meta_ver);
	pack_bin(pk, m->meta, m->meta_len);
}

static void pack_accuse(msgpack_packer *pk, enum msg_type type, const char *name, uint64_t inc,
			const char *from)
{
	msgpack_pack_array(pk, 4);
	msgpack_pack_uint8(pk, type);
	pack_str(pk, name);
	msgpack_pack_uint64(pk, inc);
	pack_str(pk, from);
}

static void broadcast_alive(struct swim *s, const struct member *m)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msg_init(&sb, &pk);
	pack_alive(&pk, m);
	broadcast(s, m->name, &sb, false);
	msgpack_sbuffer_destroy(&sb);
}

static void broadcast_accuse(struct swim *s, enum msg_type type, const char *name, uint64_t inc,
			     const char *from)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msg_init(&sb, &pk);
	pack_accuse(&pk, type, name, inc, from);
	broadcast(s, name, &sb, type == MSG_DEAD && !strcmp(name, from) && !strcmp(name, s->self->name));
	msgpack_sbuffer_destroy(&sb);
}

/* Sends one datagram to addr: the header, the messages in msgs (already
 * encoded, nmsgs of them) and as many broadcasts as fit the MTU, sealed.
 * The array's count is written as a 32-bit header so it can be patched
 * once the broadcasts are known. */
static void send_msgs(struct swim *s, const char *addr, const void *msgs, size_t len, size_t nmsgs)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msg_init(&sb, &pk);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint8(&pk, SWIM_PROTO_VERSION);
	pack_str(&pk, s->self->name);
	pack_str(&pk, s->self->addr);
	size_t count_at = sb.size;
	const uint8_t arr32[5] = { 0xdd, 0, 0, 0, 0 };

	msgpack_sbuffer_write(&sb, (const char *)arr32, sizeof(arr32));
	if (len)
		msgpack_sbuffer_write(&sb, msgs, len);
	size_t room = s->conf.mtu - SWIM_TAG_LEN;
	size_t n = nmsgs + (sb.size < room ? take_broadcasts(s, &sb, room - sb.size) : 0);

	if (n == 0) {
		msgpack_sbuffer_destroy(&sb);
		return;
	}
	uint8_t *c = (uint8_t *)sb.data + count_at + 1;

	c[0] = (uint8_t)(n >> 24), c[1] = (uint8_t)(n >> 16), c[2] = (uint8_t)(n >> 8), c[3] = (uint8_t)n;
	seal(s, &sb);
	s->st.pkts_sent++;
	s->st.bytes_sent += sb.size;
	s->env.send(s->env.ctx, addr, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

/* A one-message packet of type with a seq (ack, nack). */
void sw_send_seq(struct swim *s, const char *addr, enum msg_type type, uint32_t seq)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msg_init(&sb, &pk);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint8(&pk, type);
	msgpack_pack_uint32(&pk, seq);
	send_msgs(s, addr, sb.data, sb.size, 1);
	msgpack_sbuffer_destroy(&sb);
}

/* A ping for target, with a suspect message about it if we suspect it
 * (so that it can refute at once). */
static void send_ping(struct swim *s, const struct member *target, uint32_t seq)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n = 1;

	msg_init(&sb, &pk);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint8(&pk, MSG_PING);
	msgpack_pack_uint32(&pk, seq);
	pack_str(&pk, target->name);
	if (target->state == SWIM_SUSPECT) {
		pack_accuse(&pk, MSG_SUSPECT, target->name, target->inc, s->self->name);
		n++;
	}
	send_msgs(s, target->addr, sb.data, sb.size, n);
	msgpack_sbuffer_destroy(&sb);
}

/* ---- state rules (memberlist's aliveNode, suspectNode, deadNode) ------- */

static void refute(struct swim *s, uint64_t accused_inc)
{
	struct member *me = s->self;

	me->inc = (accused_inc >= me->inc ? accused_inc : me->inc) + 1;
	broadcast_alive(s, me);
	awareness_delta(s, 1);
	s->st.refutations++;
}

static void set_state(struct swim *s, struct member *m, enum swim_state st)
{
	m->state = st;
	m->state_change = now(s);
}

void sw_on_alive(struct swim *s, const char *name, const char *addr, uint64_t inc,
		     uint64_t meta_ver, const void *meta, size_t meta_len)
{
	struct member *m = sw_find(s, name);

	if (!m) {
		if (s->leaving)
			return;
		m = member_add(s, name, addr);
		m->inc = inc;
		set_meta(m, meta_ver, meta, meta_len);
		if (s->nfailed)
			failed_forget(s, name);
		broadcast_alive(s, m);
		emit(s, SWIM_EV_JOIN, m);
		return;
	}
	if (m == s->self) {
		/* Our own news coming back, or an older self (before a
		 * restart) with as high an incarnation: outrank it. */
		if (inc < m->inc || (inc == m->inc && meta_ver <= m->meta_ver && !strcmp(addr, m->addr)))
			return;
		if (!s->leaving)
			refute(s, inc);
		return;
	}
	bool news = false, meta_news = meta_ver > m->meta_ver;

	if (inc > m->inc) {
		enum swim_state was = m->state;

		m->inc = inc;
		if (strcmp(addr, m->addr)) {
			free(m->addr);
			m->addr = xstrdup(addr);
		}
		suspicion_free(s, m);
		if (was != SWIM_ALIVE)
			set_state(s, m, SWIM_ALIVE);
		if (meta_news)
			set_meta(m, meta_ver, meta, meta_len);
		news = true;
		if (was != SWIM_ALIVE)
			emit(s, SWIM_EV_ALIVE, m);
		else if (meta_news)
			emit(s, SWIM_EV_UPDATE, m);
	} else if (meta_news) {
		set_meta(m, meta_ver, meta, meta_len);
		news = true;
		emit(s, SWIM_EV_UPDATE, m);
	}
	if (news && m->state == SWIM_ALIVE)
		broadcast_alive(s, m);
}

static void suspicion_fire(struct swim *s, struct swim_timer *t);

/* Starts the suspicion of m by `from`: k confirmations expected (two
 * fewer than the multiplier, as memberlist, since neither we nor the
 * suspect can confirm), none if the cluster is too small for them. */
static void suspicion_start(struct swim *s, struct member *m, const char *from)
{
	struct suspicion *su = xcalloc(1, sizeof(*su));
	size_t n = s->nmembers;
	unsigned k = s->conf.suspicion_mult > 2 ? s->conf.suspicion_mult - 2 : 0;

	if (n < 2 + (size_t)k || (s->conf.flags & SWIM_NO_SUSPICION_SCALING))
		k = 0;
	su->m = m;
	su->start = now(s);
	su->min = swim_suspicion_min(s->conf.suspicion_mult, n, ms(s->conf.probe_interval_ms));
	su->max = su->min * s->conf.suspicion_max_mult;
	su->k = k;
	su->from = xcalloc(k + 1, sizeof(*su->from));
	su->from[su->nfrom++] = xstrdup(from);
	timer_init(&su->t, suspicion_fire);
	timer_at(s, &su->t, su->start + swim_suspicion_timeout(su->min, su->max, k, 0));
	m->susp = su;
}

/* A new, independent confirmation shortens the timeout; true if it was
 * new (then it is passed on). */
static bool suspicion_confirm(struct swim *s, struct suspicion *su, const char *from)
{
	if (su->n >= su->k)
		return false;
	for (unsigned i = 0; i < su->nfrom; i++)
		if (!strcmp(su->from[i], from))
			return false;
	su->from[su->nfrom++] = xstrdup(from);
	su->n++;
	uint64_t at = su->start + swim_suspicion_timeout(su->min, su->max, su->k, su->n), t = now(s);

	timer_at(s, &su->t, at > t ? at : t);
	return true;
}


static void suspicion_fire(struct swim *s, struct swim_timer *t)
{
	struct suspicion *su = dsec_container_of(t, struct suspicion, t);
	struct member *m = su->m;

	sw_on_dead(s, m->name, m->inc, s->self->name);
}

void sw_on_suspect(struct swim *s, const char *name, uint64_t inc, const char *from)
{
	struct member *m = sw_find(s, name);

	if (!m || inc < m->inc)
		return;
	if (m->susp) {
		if (suspicion_confirm(s, m->susp, from))
			broadcast_accuse(s, MSG_SUSPECT, name, inc, from);
		return;
	}
	if (m->state != SWIM_ALIVE)
		return;
	if (m == s->self) {
		if (!s->leaving)
			refute(s, inc);
		return;
	}
	broadcast_accuse(s, MSG_SUSPECT, name, inc, from);
	m->inc = inc;
	set_state(s, m, SWIM_SUSPECT);
	if (!strcmp(from, s->self->name))
		s->st.suspicions++;
	suspicion_start(s, m, from);
	emit(s, SWIM_EV_SUSPECT, m);
}

void sw_on_dead(struct swim *s, const char *name, uint64_t inc, const char *from)
{
	struct member *m = sw_find(s, name);

	if (!m || inc < m->inc)
		return;
	suspicion_free(s, m);
	if (m->state == SWIM_DEAD || m->state == SWIM_LEFT)
		return;
	bool left = !strcmp(name, from);

	if (m == s->self) {
		if (!s->leaving) {
			refute(s, inc);
			return;
		}
		/* Our own leave: disseminate it. */
	}
	broadcast_accuse(s, MSG_DEAD, name, inc, from);
	m->inc = inc;
	set_state(s, m, left ? SWIM_LEFT : SWIM_DEAD);
	if (!left && !strcmp(from, s->self->name))
		s->st.deaths++;
	if (m != s->self)
		emit(s, left ? SWIM_EV_LEFT : SWIM_EV_DEAD, m);
}

/* ---- probes ------------------------------------------------------------ */

static uint64_t scaled(struct swim *s, uint64_t us)
{
	return us * (uint64_t)(s->awareness + 1);
}

/* Members that may help or be gossiped to: up to k distinct random ones
 * passing ok(), by random tries over the array (at most 3n, as
 * memberlist's kRandomNodes). */
static size_t random_members(struct swim *s, struct member **out, size_t k,
			     bool (*ok)(struct swim *, struct member *, void *), void *arg)
{
	size_t n = 0;

	for (size_t tries = 0; n < k && tries < 3 * s->nmembers; tries++) {
		struct member *m = s->members[rnd(s, s->nmembers)];
		size_t j;

		if (!ok(s, m, arg))
			continue;
		for (j = 0; j < n && out[j] != m; j++)
			;
		if (j == n)
			out[n++] = m;
	}
	return n;
}

static bool helper_ok(struct swim *s, struct member *m, void *target)
{
	return m != s->self && m != target && m->state == SWIM_ALIVE;
}

static void probe_failed(struct swim *s)
{
	struct member *m = sw_find(s, s->probing_name);

	s->st.probes_failed++;
	if (s->expected_nacks > 0)
		awareness_delta(s, (int)(s->expected_nacks - (s->nacks < s->expected_nacks ?
							       s->nacks : s->expected_nacks)));
	else
		awareness_delta(s, 1);
	/* The incarnation probed: a member that restarted and raised it
	 * meanwhile is not suspected for what its old self did not answer.
	 * Already suspect: this is a confirmation. */
	if (m && (m->state == SWIM_ALIVE || m->state == SWIM_SUSPECT))
		sw_on_suspect(s, m->name, s->probe_inc, s->self->name);
}

/* Forgets the dead and the left past gossip_to_dead and reshuffles: the
 * start of each probe round. */
static void new_round(struct swim *s)
{
	uint64_t t = now(s), keep_us = ms(s->conf.gossip_to_dead_ms);
	size_t j = 0;

	for (size_t i = 0; i < s->nmembers; i++) {
		struct member *m = s->members[i];

		if ((m->state == SWIM_DEAD || m->state == SWIM_LEFT) && m != s->self &&
		    t - m->state_change > keep_us) {
			if (m->state == SWIM_DEAD)
				failed_add(s, m);
			hash_remove(s, m);
			if (s->probing == m)
				s->probing = NULL;
			member_free(s, m);
			continue;
		}
		s->members[j++] = m;
	}
	s->nmembers = j;
	s->st.members = (uint32_t)j;
	for (size_t i = j; i > 1; i--) {
		size_t r = rnd(s, i);
		struct member *x = s->members[i - 1];

		s->members[i - 1] = s->members[r];
		s->members[r] = x;
	}
	for (size_t i = 0; i < s->nmembers; i++)
		s->members[i]->idx = i;
	s->probe_idx = 0;
}

/* The next member to probe: round-robin over the shuffled list, skipping
 * ourselves and the dead; NULL if there is none. */
static struct member *next_target(struct swim *s)
{
	for (size_t tries = 0; tries <= s->nmembers; tries++) {
		if (s->probe_idx >= s->nmembers)
			new_round(s);
		struct member *m = s->members[s->probe_idx++];

		if (m != s->self && (m->state == SWIM_ALIVE || m->state == SWIM_SUSPECT))
			return m;
	}
	return NULL;
}

/* The probe period: first settles the previous probe (no ack by now:
 * failed), then pings the next member. */
static void probe_fire(struct swim *s, struct swim_timer *t)
{
	if (s->probing_name && !s->probe_acked)
		probe_failed(s);
	free(s->probing_name);
	s->probing_name = NULL;
	s->probing = NULL;
	timer_stop(s, &s->t_ack);
	if (s->leaving)
		return;

	struct member *m = next_target(s);

	timer_in(s, &s->t_probe, scaled(s, ms(s->conf.probe_interval_ms)));
	if (!m)
		return;
	s->probing = m;
	s->probing_name = xstrdup(m->name);
	s->probe_inc = m->inc;
	s->probe_seq = ++s->seq;
	s->probe_acked = false;
	s->expected_nacks = s->nacks = 0;
	s->st.probes++;
	send_ping(s, m, s->probe_seq);
	timer_in(s, &s->t_ack, ms(s->conf.probe_timeout_ms));
}

/* No direct ack in time: ask k helpers. */
static void ack_fire(struct swim *s, struct swim_timer *t)
{
	struct member *m = s->probing_name ? sw_find(s, s->probing_name) : NULL;
	struct member *helpers[16];
	size_t k = s->conf.indirect_checks < 16 ? s->conf.indirect_checks : 16;
	bool nack = !(s->conf.flags & SWIM_NO_NACK);

	if (!m || s->probe_acked)
		return;
	k = random_members(s, helpers, k, helper_ok, m);
	for (size_t i = 0; i < k; i++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;

		msg_init(&sb, &pk);
		msgpack_pack_array(&pk, 5);
		msgpack_pack_uint8(&pk, MSG_IPING);
		msgpack_pack_uint32(&pk, s->probe_seq);
		pack_str(&pk, m->name);
		pack_str(&pk, m->addr);
		if (nack)
			msgpack_pack_true(&pk);
		else
			msgpack_pack_false(&pk);
		send_msgs(s, helpers[i]->addr, sb.data, sb.size, 1);
		msgpack_sbuffer_destroy(&sb);
		s->st.indirect_probes++;
		if (nack)
			s->expected_nacks++;
	}
}

static void relay_free(struct swim *s, struct relay *r)
{
	struct relay **p = &s->relays;

	while (*p != r)
		p = &(*p)->next;
	*p = r->next;
	timer_stop(s, &r->t);
	free(r->req_addr);
	free(r);
}

/* A helper's deadline: at 80 % of the probe timeout the nack (so that it
 * reaches the requester before its probe period ends), at the timeout
 * the relay is forgotten. */
static void relay_fire(struct swim *s, struct swim_timer *t)
{
	struct relay *r = dsec_container_of(t, struct relay, t);

	if (!r->nacked) {
		r->nacked = true;
		if (r->nack)
			sw_send_seq(s, r->req_addr, MSG_NACK, r->req_seq);
		timer_in(s, &r->t, ms(s->conf.probe_timeout_ms) / 5);
		return;
	}
	relay_free(s, r);
}

void sw_on_iping(struct swim *s, uint32_t req_seq, const char *target, const char *taddr,
		     const char *from_addr, bool nack)
{
	struct relay *r = xcalloc(1, sizeof(*r));
	struct member tm = { .name = (char *)target, .addr = (char *)taddr, .state = SWIM_ALIVE };

	r->seq = ++s->seq;
	r->req_seq = req_seq;
	r->req_addr = xstrdup(from_addr);
	r->nack = nack;
	r->next = s->relays;
	s->relays = r;
	timer_init(&r->t, relay_fire);
	timer_in(s, &r->t, ms(s->conf.probe_timeout_ms) * 4 / 5);
	send_ping(s, &tm, r->seq);
}

void sw_on_ack(struct swim *s, uint32_t seq)
{
	if (s->probing_name && seq == s->probe_seq && !s->probe_acked) {
		s->probe_acked = true;
		timer_stop(s, &s->t_ack);
		awareness_delta(s, -1);
		return;
	}
	for (struct relay *r = s->relays; r; r = r->next)
		if (r->seq == seq) {
			sw_send_seq(s, r->req_addr, MSG_ACK, r->req_seq);
			relay_free(s, r);
			return;
		}
}

void sw_on_nack(struct swim *s, uint32_t seq)
{
	if (s->probing_name && seq == s->probe_seq) {
		s->nacks++;
		s->st.nacks_recv++;
	}
}

/* ---- gossip ------------------------------------------------------------ */

static bool gossip_ok(struct swim *s, struct member *m, void *arg)
{
	if (m == s->self)
		return false;
	if (m->state == SWIM_ALIVE || m->state == SWIM_SUSPECT)
		return true;
	return now(s) - m->state_change <= ms(s->conf.gossip_to_dead_ms);
}

static void gossip_now(struct swim *s)
{
	struct member *to[16];
	size_t k = s->conf.gossip_nodes < 16 ? s->conf.gossip_nodes : 16;

	k = random_members(s, to, k, gossip_ok, NULL);
	for (size_t i = 0; i < k && s->nqueue; i++)
		send_msgs(s, to[i]->addr, NULL, 0, 0);
}

static void gossip_fire(struct swim *s, struct swim_timer *t)
{
	gossip_now(s);
	timer_in(s, &s->t_gossip, ms(s->conf.gossip_interval_ms));
}

/* ---- push-pull --------------------------------------------------------- */

/* Our whole state as a sealed stream message. */
void sw_pack_state(struct swim *s, msgpack_sbuffer *sb, bool join)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_uint8(&pk, SWIM_PROTO_VERSION);
	pack_str(&pk, s->self->name);
	pack_str(&pk, s->self->addr);
	if (join)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	msgpack_pack_array(&pk, s->nmembers);
	for (size_t i = 0; i < s->nmembers; i++) {
		struct member *m = s->members[i];

		msgpack_pack_array(&pk, 6);
		pack_str(&pk, m->name);
		pack_str(&pk, m->addr);
		msgpack_pack_uint64(&pk, m->inc);
		msgpack_pack_uint8(&pk, m->state);
		msgpack_pack_uint64(&pk, m->meta_ver);
		pack_bin(&pk, m->meta, m->meta_len);
	}
	seal(s, sb);
}

static int pushpull_to(struct swim *s, const char *addr, bool join)
{
	msgpack_sbuffer sb;
	int rc;

	sw_pack_state(s, &sb, join);
	s->st.stream_bytes += sb.size;
	rc = s->env.stream(s->env.ctx, addr, sb.data, sb.size, ++s->stream_id);
	msgpack_sbuffer_destroy(&sb);
	if (rc == 0)
		s->st.streams_sent++;
	return rc;
}

static bool pushpull_ok(struct swim *s, struct member *m, void *arg)
{
	return m != s->self && m->state == SWIM_ALIVE;
}

/* memberlist's pushPullScale: past 32 members the period grows with
 * log2 n so that the total push-pull load stays about the same. */
static uint64_t pushpull_period(struct swim *s)
{
	uint64_t base = ms(s->conf.pushpull_interval_ms);
	size_t n = s->nmembers;

	if (n <= 32)
		return base;
	return base * ((uint64_t)ceil(log2((double)n) - log2(32.0)) + 1);
}

static void pushpull_fire(struct swim *s, struct swim_timer *t)
{
	struct member *m;

	timer_in(s, &s->t_pushpull, pushpull_period(s));
	if (s->leaving)
		return;
	if (random_members(s, &m, 1, pushpull_ok, NULL) == 1)
		pushpull_to(s, m->addr, false);
	else if (s->nseeds)
		pushpull_to(s, s->seeds[rnd(s, s->nseeds)], true);
}

/* Every reconnect period, a push-pull with one random dead member: one
 * forgotten, or one dead past gossip_to_dead that a long round (they are
 * forgotten only at the end of one) still holds.  Those past the
 * reconnect timeout are dropped first. */
static void reconnect_fire(struct swim *s, struct swim_timer *t)
{
	uint64_t tnow = now(s), limit = (uint64_t)s->conf.reconnect_timeout_s * 1000000;
	uint64_t quiet = ms(s->conf.gossip_to_dead_ms);
	size_t ndead = 0;

	timer_in(s, &s->t_reconnect, ms(s->conf.reconnect_interval_ms));
	for (size_t i = 0; i < s->nfailed;)
		if (tnow - s->failed[i].since > limit)
			failed_drop(s, i);
		else
			i++;
	for (size_t i = 0; i < s->nmembers; i++)
		ndead += s->members[i]->state == SWIM_DEAD && tnow - s->members[i]->state_change > quiet;
	if (s->leaving || !(s->nfailed + ndead))
		return;
	size_t pick = rnd(s, s->nfailed + ndead);

	s->st.reconnects++;
	if (pick < s->nfailed) {
		pushpull_to(s, s->failed[pick].addr, false);
		return;
	}
	pick -= s->nfailed;
	for (size_t i = 0; i < s->nmembers; i++) {
		struct member *m = s->members[i];

		if (m->state == SWIM_DEAD && tnow - m->state_change > quiet && pick-- == 0) {
			pushpull_to(s, m->addr, false);
			return;
		}
	}
}

/* ---- life cycle -------------------------------------------------------- */

static uint64_t wall_ms(const struct swim_env *env)
{
	struct timespec ts;

	if (env->wall_ms)
		return env->wall_ms(env->ctx);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#define DEFAULT(field, v) do { if (!c->field) c->field = (v); } while (0)

int swim_set_keys(struct swim *s, const struct swim_key *keys, size_t nkeys)
{
	if (nkeys < 1 || nkeys > SWIM_KEYS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < nkeys; i++)
		if (keys[i].len < SWIM_KEY_MIN || keys[i].len > SWIM_KEY_MAX)
			return -EINVAL;
	for (size_t i = 0; i < nkeys; i++) {
		memcpy(s->keys[i], keys[i].key, keys[i].len);
		s->key_len[i] = keys[i].len;
	}
	s->nkeys = nkeys;
	return 0;
}

int swim_new(struct swim **out, const struct swim_conf *conf, const struct swim_env *env)
{
	struct swim *s;
	struct swim_conf *c;

	if (!conf->name || !conf->addr || !*conf->name || !*conf->addr ||
	    strlen(conf->name) > SWIM_NAME_MAX || strlen(conf->addr) > SWIM_ADDR_MAX ||
	    conf->meta_len > SWIM_META_MAX || !env->now || !env->set_timer || !env->send ||
	    !env->stream || !env->rand)
		return -EINVAL;
	s = xcalloc(1, sizeof(*s));
	if (swim_set_keys(s, conf->keys, conf->nkeys) < 0) {
		free(s);
		return -EINVAL;
	}
	s->env = *env;
	s->conf = *conf;
	c = &s->conf;
	c->keys = NULL;
	c->nkeys = 0;
	c->meta = NULL;
	DEFAULT(probe_interval_ms, 1000);
	DEFAULT(probe_timeout_ms, 500);
	DEFAULT(indirect_checks, 3);
	DEFAULT(suspicion_mult, 4);
	DEFAULT(suspicion_max_mult, 6);
	DEFAULT(retransmit_mult, 4);
	DEFAULT(awareness_max, 8);
	DEFAULT(gossip_interval_ms, 200);
	DEFAULT(gossip_nodes, 3);
	DEFAULT(gossip_to_dead_ms, 30000);
	DEFAULT(pushpull_interval_ms, 30000);
	DEFAULT(reconnect_interval_ms, 30000);
	DEFAULT(reconnect_timeout_s, 86400);
	DEFAULT(mtu, 1400);
	if (c->mtu < 512)
		c->mtu = 512;
	s->nbuckets = 16;
	s->hash = xcalloc(s->nbuckets, sizeof(*s->hash));
	timer_init(&s->t_probe, probe_fire);
	timer_init(&s->t_ack, ack_fire);
	timer_init(&s->t_gossip, gossip_fire);
	timer_init(&s->t_pushpull, pushpull_fire);
	timer_init(&s->t_reconnect, reconnect_fire);

	uint64_t seed = wall_ms(env);

	s->self = member_add(s, conf->name, conf->addr);
	c->name = s->self->name;
	c->addr = s->self->addr;
	s->self->inc = conf->incarnation ? conf->incarnation : seed;
	set_meta(s->self, seed, conf->meta, conf->meta_len);
	/* Start the periods at random phases, as independent nodes would. */
	timer_in(s, &s->t_probe, rnd(s, ms(c->probe_interval_ms)));
	timer_in(s, &s->t_gossip, rnd(s, ms(c->gossip_interval_ms)));
	timer_in(s, &s->t_pushpull, pushpull_period(s) / 2 + rnd(s, pushpull_period(s) / 2));
	timer_in(s, &s->t_reconnect, ms(c->reconnect_interval_ms) / 2 +
		 rnd(s, ms(c->reconnect_interval_ms) / 2));
	sw_rearm(s);
	*out = s;
	return 0;
}

void swim_free(struct swim *s)
{
	if (!s)
		return;
	while (s->relays)
		relay_free(s, s->relays);
	for (size_t i = 0; i < s->nmembers; i++)
		member_free(s, s->members[i]);
	for (size_t i = 0; i < s->nqueue; i++)
		bcast_drop(&s->queue[i]);
	while (s->nfailed)
		failed_drop(s, 0);
	free(s->failed);
	for (size_t i = 0; i < s->nseeds; i++)
		free(s->seeds[i]);
	free(s->seeds);
	free(s->queue);
	free(s->members);
	free(s->hash);
	free(s->heap);
	free(s->probing_name);
	OPENSSL_cleanse(s->keys, sizeof(s->keys));
	free(s);
}

int swim_join(struct swim *s, const char *const *seeds, size_t n)
{
	int started = 0, rc = -EINVAL;

	for (size_t i = 0; i < n; i++) {
		if (!seeds[i] || !*seeds[i] || strlen(seeds[i]) > SWIM_ADDR_MAX ||
		    !strcmp(seeds[i], s->self->addr))
			continue;
		s->seeds = xrealloc(s->seeds, (s->nseeds + 1) * sizeof(*s->seeds));
		s->seeds[s->nseeds++] = xstrdup(seeds[i]);
		rc = pushpull_to(s, seeds[i], true);
		if (rc == 0)
			started++;
	}
	sw_rearm(s);
	return started ? started : rc;
}

void swim_leave(struct swim *s)
{
	if (s->leaving)
		return;
	s->leaving = true;
	timer_stop(s, &s->t_ack);
	timer_stop(s, &s->t_probe);
	sw_on_dead(s, s->self->name, s->self->inc, s->self->name);
	gossip_now(s);
	sw_rearm(s);
}

bool swim_leave_pending(const struct swim *s)
{
	bool queued = false, anyone = false;

	for (size_t i = 0; i < s->nqueue && !queued; i++)
		queued = s->queue[i].leave;
	/* With nobody to gossip to (alone, or every other member long dead)
	 * it would never go out: a leaving daemon need not wait for it. */
	for (size_t i = 0; queued && i < s->nmembers && !anyone; i++)
		anyone = gossip_ok((struct swim *)s, s->members[i], NULL);
	return queued && anyone;
}

int swim_set_meta(struct swim *s, const void *meta, size_t len)
{
	uint64_t ver = wall_ms(&s->env);

	if (len > SWIM_META_MAX)
		return -EINVAL;
	set_meta(s->self, ver > s->self->meta_ver ? ver : s->self->meta_ver + 1, meta, len);
	if (!s->leaving)
		broadcast_alive(s, s->self);
	sw_rearm(s);
	return 0;
}

size_t swim_member_count(const struct swim *s)
{
	return s->nmembers;
}

int swim_member_at(const struct swim *s, size_t i, struct swim_member *out)
{
	if (i >= s->nmembers)
		return -ENOENT;
	member_view(s, s->members[i], out);
	return 0;
}

int swim_member_find(const struct swim *s, const char *name, struct swim_member *out)
{
	struct member *m = sw_find(s, name);

	if (!m)
		return -ENOENT;
	member_view(s, m, out);
	return 0;
}

size_t swim_alive_count(const struct swim *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nmembers; i++)
		n += s->members[i]->state == SWIM_ALIVE || s->members[i]->state == SWIM_SUSPECT;
	return n;
}

void swim_stats(const struct swim *s, struct swim_stats *out)
{
	*out = s->st;
	out->awareness = (uint32_t)s->awareness;
	out->members = (uint32_t)s->nmembers;
}

void swim_get_conf(const struct swim *s, struct swim_conf *out)
{
	*out = s->conf;
}
