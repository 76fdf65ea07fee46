/* swim_recv.c - libswim's decoding: a datagram or a push-pull message,
 * authenticated, bounded and parsed, and each message in it handed to the
 * state rules of swim.c (see swim.h and dsec-gossip(7)). */
#include "swim_int.h"

/* ---- decoding ---------------------------------------------------------- */

static bool get_u64(const msgpack_object *o, uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return false;
	*out = o->via.u64;
	return true;
}

/* A str of 1..max bytes, copied NUL-terminated into buf (max+1 bytes). */
static bool get_str(const msgpack_object *o, char *buf, size_t max)
{
	if (o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 || o->via.str.size > max ||
	    memchr(o->via.str.ptr, 0, o->via.str.size))
		return false;
	memcpy(buf, o->via.str.ptr, o->via.str.size);
	buf[o->via.str.size] = 0;
	return true;
}

static bool get_bin(const msgpack_object *o, const void **d, size_t *n, size_t max)
{
	if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size > max)
		return false;
	*d = o->via.bin.ptr;
	*n = o->via.bin.size;
	return true;
}

static bool get_u32(const msgpack_object *o, uint32_t *out)
{
	uint64_t v;

	if (!get_u64(o, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* One message of a packet from (from_name, from_addr): false if it is
 * malformed. */
static bool handle_msg(struct swim *s, const msgpack_object *o, const char *from_addr)
{
	char name[SWIM_NAME_MAX + 1], other[SWIM_NAME_MAX + 1], addr[SWIM_ADDR_MAX + 1];
	const msgpack_object *a;
	uint64_t type, inc, ver;
	uint32_t seq;
	const void *meta;
	size_t n, meta_len;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 2)
		return false;
	a = o->via.array.ptr;
	n = o->via.array.size;
	if (!get_u64(&a[0], &type))
		return false;
	switch (type) {
	case MSG_PING:
		if (n != 3 || !get_u32(&a[1], &seq) || !get_str(&a[2], name, SWIM_NAME_MAX))
			return false;
		if (!strcmp(name, s->self->name))
			sw_send_seq(s, from_addr, MSG_ACK, seq);
		return true;
	case MSG_IPING:
		if (n != 5 || !get_u32(&a[1], &seq) || !get_str(&a[2], name, SWIM_NAME_MAX) ||
		    !get_str(&a[3], addr, SWIM_ADDR_MAX) || a[4].type != MSGPACK_OBJECT_BOOLEAN)
			return false;
		sw_on_iping(s, seq, name, addr, from_addr, a[4].via.boolean);
		return true;
	case MSG_ACK:
	case MSG_NACK:
		if (n != 2 || !get_u32(&a[1], &seq))
			return false;
		if (type == MSG_ACK)
			sw_on_ack(s, seq);
		else
			sw_on_nack(s, seq);
		return true;
	case MSG_ALIVE:
		if (n != 6 || !get_str(&a[1], name, SWIM_NAME_MAX) ||
		    !get_str(&a[2], addr, SWIM_ADDR_MAX) || !get_u64(&a[3], &inc) ||
		    !get_u64(&a[4], &ver) || !get_bin(&a[5], &meta, &meta_len, SWIM_META_MAX))
			return false;
		sw_on_alive(s, name, addr, inc, ver, meta, meta_len);
		return true;
	case MSG_SUSPECT:
	case MSG_DEAD:
		if (n != 4 || !get_str(&a[1], name, SWIM_NAME_MAX) || !get_u64(&a[2], &inc) ||
		    !get_str(&a[3], other, SWIM_NAME_MAX))
			return false;
		if (type == MSG_SUSPECT)
			sw_on_suspect(s, name, inc, other);
		else
			sw_on_dead(s, name, inc, other);
		return true;
	}
	return false;
}

/* Authenticates and parses a packet or stream message: the body's array
 * (at least `fields` long, version first) in *up, or false (counted). */
static bool open_packet(struct swim *s, const void *buf, size_t len, msgpack_unpacked *up,
			uint32_t fields)
{
	size_t body, off = 0;

	if (!sw_authentic(s, buf, len, &body)) {
		s->st.dropped_auth++;
		return false;
	}
	msgpack_unpacked_init(up);
	if (!dsec_msgpack_bounded(buf, body) ||
	    msgpack_unpack_next(up, buf, body, &off) != MSGPACK_UNPACK_SUCCESS || off != body ||
	    up->data.type != MSGPACK_OBJECT_ARRAY || up->data.via.array.size != fields ||
	    up->data.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    up->data.via.array.ptr[0].via.u64 != SWIM_PROTO_VERSION) {
		msgpack_unpacked_destroy(up);
		s->st.dropped_malformed++;
		return false;
	}
	return true;
}

void swim_recv(struct swim *s, const void *buf, size_t len)
{
	char name[SWIM_NAME_MAX + 1], addr[SWIM_ADDR_MAX + 1];
	msgpack_unpacked up;
	const msgpack_object *a;

	s->st.pkts_recv++;
	s->st.bytes_recv += len;
	if (!open_packet(s, buf, len, &up, 4))
		goto out;
	a = up.data.via.array.ptr;
	if (!get_str(&a[1], name, SWIM_NAME_MAX) || !get_str(&a[2], addr, SWIM_ADDR_MAX) ||
	    a[3].type != MSGPACK_OBJECT_ARRAY) {
		s->st.dropped_malformed++;
	} else {
		for (uint32_t i = 0; i < a[3].via.array.size; i++)
			if (!handle_msg(s, &a[3].via.array.ptr[i], addr)) {
				s->st.dropped_malformed++;	/* the rest is dropped too */
				break;
			}
	}
	msgpack_unpacked_destroy(&up);
out:
	sw_rearm(s);
}

/* Merges a remote state (memberlist's mergeState: alive as alive, left as
 * left, suspect and dead as suspicions of our own, so that a member's
 * death is never taken from a stale view without a refutation chance). */
static bool merge_state(struct swim *s, const msgpack_object *list)
{
	char name[SWIM_NAME_MAX + 1], addr[SWIM_ADDR_MAX + 1];

	if (list->type != MSGPACK_OBJECT_ARRAY)
		return false;
	for (uint32_t i = 0; i < list->via.array.size; i++) {
		const msgpack_object *e = &list->via.array.ptr[i], *a;
		uint64_t inc, st, ver;
		const void *meta;
		size_t meta_len;

		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 6)
			return false;
		a = e->via.array.ptr;
		if (!get_str(&a[0], name, SWIM_NAME_MAX) || !get_str(&a[1], addr, SWIM_ADDR_MAX) ||
		    !get_u64(&a[2], &inc) || !get_u64(&a[3], &st) || st > SWIM_LEFT ||
		    !get_u64(&a[4], &ver) || !get_bin(&a[5], &meta, &meta_len, SWIM_META_MAX))
			return false;
		if (st == SWIM_LEFT) {
			/* Learn of it first (meta too) so the leave applies. */
			if (!sw_find(s, name))
				continue;
			sw_on_dead(s, name, inc, name);
		} else if (st == SWIM_ALIVE) {
			sw_on_alive(s, name, addr, inc, ver, meta, meta_len);
		} else {
			if (sw_find(s, name))
				sw_on_suspect(s, name, inc, s->self->name);
			struct member *m = sw_find(s, name);

			if (m && meta_len && ver > m->meta_ver)
				sw_on_alive(s, name, addr, m->inc, ver, meta, meta_len);
		}
	}
	s->st.pushpulls++;
	return true;
}

static bool take_state(struct swim *s, const void *buf, size_t len)
{
	msgpack_unpacked up;
	char name[SWIM_NAME_MAX + 1];
	bool ok;

	if (!open_packet(s, buf, len, &up, 5))
		return false;
	const msgpack_object *a = up.data.via.array.ptr;

	ok = get_str(&a[1], name, SWIM_NAME_MAX) && a[3].type == MSGPACK_OBJECT_BOOLEAN &&
	     merge_state(s, &a[4]);
	if (!ok)
		s->st.dropped_malformed++;
	msgpack_unpacked_destroy(&up);
	return ok;
}

int swim_stream_serve(struct swim *s, const void *req, size_t len, void **reply, size_t *reply_len)
{
	msgpack_sbuffer sb;
	size_t body;

	s->st.stream_bytes += len;
	/* Authenticate first: no state of ours goes to a stranger. */
	if (!sw_authentic(s, req, len, &body)) {
		s->st.dropped_auth++;
		sw_rearm(s);
		return -EBADMSG;
	}
	sw_pack_state(s, &sb, false);
	if (!take_state(s, req, len)) {
		msgpack_sbuffer_destroy(&sb);
		sw_rearm(s);
		return -EBADMSG;
	}
	s->st.stream_bytes += sb.size;
	*reply_len = sb.size;
	*reply = msgpack_sbuffer_release(&sb);
	sw_rearm(s);
	return 0;
}

void swim_stream_done(struct swim *s, uint64_t id, int rc, const void *buf, size_t len)
{
	if (rc == 0) {
		s->st.stream_bytes += len;
		take_state(s, buf, len);
	}
	sw_rearm(s);
}

