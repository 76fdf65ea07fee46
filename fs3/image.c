/* image.c - deterministic msgpack encodings of indexes and manifests, tags. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "image.h"
#include "proto.h"

/* Most chunks an index may list and layers a manifest may have: bounds for
 * what a corrupt or hostile object can make us allocate. */
#define FS3_INDEX_CHUNKS_MAX (1u << 22)
#define FS3_LAYERS_MAX 128
#define FS3_STRV_MAX 4096

static int buf_write(void *data, const char *p, size_t n)
{
	dsec_buf_add(data, p, n);
	return 0;
}

static void pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pk_bin(msgpack_packer *pk, const struct fs3_digest *d)
{
	msgpack_pack_bin(pk, FS3_DIGEST_LEN);
	msgpack_pack_bin_body(pk, d->b, FS3_DIGEST_LEN);
}

static void pk_strv(msgpack_packer *pk, char *const *v)
{
	size_t n = v ? dsec_strv_len((const char *const *)v) : 0;

	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		pk_str(pk, v[i]);
}

/* The value of key in a map, NULL if absent. */
static const msgpack_object *get(const msgpack_object *map, const char *key)
{
	size_t kl = strlen(key);

	if (map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == kl &&
		    !memcmp(kv->key.via.str.ptr, key, kl))
			return &kv->val;
	}
	return NULL;
}

static int get_u64(const msgpack_object *o, uint64_t *out)
{
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -EBADMSG;
	*out = o->via.u64;
	return 0;
}

static int get_digest(const msgpack_object *o, struct fs3_digest *d)
{
	if (!o || o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != FS3_DIGEST_LEN)
		return -EBADMSG;
	memcpy(d->b, o->via.bin.ptr, FS3_DIGEST_LEN);
	return 0;
}

static int get_str(const msgpack_object *o, char **out)
{
	if (!o || o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, 0, o->via.str.size))
		return -EBADMSG;
	*out = xstrndup(o->via.str.ptr, o->via.str.size);
	return 0;
}

static int get_strv(const msgpack_object *o, char ***out)
{
	char **v;

	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > FS3_STRV_MAX)
		return -EBADMSG;
	v = xcalloc(o->via.array.size + 1, sizeof(*v));
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		if (get_str(&o->via.array.ptr[i], &v[i]) < 0) {
			dsec_strv_free(v);
			return -EBADMSG;
		}
	}
	*out = v;
	return 0;
}

/* Unpacks one map with "v" == FS3_FORMAT_VERSION and nothing after it. */
static int unpack_root(msgpack_unpacked *u, const void *p, size_t n)
{
	size_t off = 0;
	uint64_t v;

	msgpack_unpacked_init(u);
	if (!dsec_msgpack_bounded(p, n) || msgpack_unpack_next(u, p, n, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != n ||
	    u->data.type != MSGPACK_OBJECT_MAP || get_u64(get(&u->data, "v"), &v) < 0 ||
	    v != FS3_FORMAT_VERSION) {
		msgpack_unpacked_destroy(u);
		return -EBADMSG;
	}
	return 0;
}

void fs3_index_encode(const struct fs3_index *ix, struct dsec_buf *out)
{
	msgpack_packer pk;

	dsec_buf_reset(out);
	msgpack_packer_init(&pk, out, buf_write);
	msgpack_pack_map(&pk, 4);
	pk_str(&pk, "v");
	msgpack_pack_uint32(&pk, FS3_FORMAT_VERSION);
	pk_str(&pk, "layer");
	pk_bin(&pk, &ix->layer);
	pk_str(&pk, "size");
	msgpack_pack_uint64(&pk, ix->size);
	pk_str(&pk, "chunks");
	msgpack_pack_array(&pk, ix->n);
	for (size_t i = 0; i < ix->n; i++) {
		msgpack_pack_array(&pk, 2);
		pk_bin(&pk, &ix->chunks[i].d);
		msgpack_pack_uint32(&pk, ix->chunks[i].len);
	}
}

int fs3_index_decode(const void *p, size_t n, struct fs3_index *ix)
{
	msgpack_unpacked u;
	const msgpack_object *c;
	uint64_t sum = 0;
	int r;

	memset(ix, 0, sizeof(*ix));
	if ((r = unpack_root(&u, p, n)) < 0)
		return r;
	c = get(&u.data, "chunks");
	r = -EBADMSG;
	if (get_digest(get(&u.data, "layer"), &ix->layer) < 0 ||
	    get_u64(get(&u.data, "size"), &ix->size) < 0 ||
	    !c || c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size > FS3_INDEX_CHUNKS_MAX)
		goto out;
	ix->chunks = xcalloc(c->via.array.size, sizeof(*ix->chunks));
	for (uint32_t i = 0; i < c->via.array.size; i++) {
		const msgpack_object *e = &c->via.array.ptr[i];
		uint64_t len;
		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2 ||
		    get_digest(&e->via.array.ptr[0], &ix->chunks[i].d) < 0 ||
		    get_u64(&e->via.array.ptr[1], &len) < 0 || len == 0 || len > FS3_OBJECT_MAX)
			goto out;
		ix->chunks[i].len = (uint32_t)len;
		ix->n++;
		sum += len;
	}
	r = sum == ix->size ? 0 : -EBADMSG;
out:
	msgpack_unpacked_destroy(&u);
	if (r < 0)
		fs3_index_free(ix);
	return r;
}

void fs3_index_free(struct fs3_index *ix)
{
	free(ix->chunks);
	memset(ix, 0, sizeof(*ix));
}

void fs3_manifest_encode(const struct fs3_manifest *m, struct dsec_buf *out)
{
	const struct fs3_image_config *c = &m->config;
	msgpack_packer pk;

	dsec_buf_reset(out);
	msgpack_packer_init(&pk, out, buf_write);
	msgpack_pack_map(&pk, 3);
	pk_str(&pk, "v");
	msgpack_pack_uint32(&pk, FS3_FORMAT_VERSION);
	pk_str(&pk, "layers");
	msgpack_pack_array(&pk, m->n);
	for (size_t i = 0; i < m->n; i++) {
		msgpack_pack_map(&pk, 3);
		pk_str(&pk, "digest");
		pk_bin(&pk, &m->layers[i].digest);
		pk_str(&pk, "index");
		pk_bin(&pk, &m->layers[i].index);
		pk_str(&pk, "size");
		msgpack_pack_uint64(&pk, m->layers[i].size);
	}
	pk_str(&pk, "config");
	msgpack_pack_map(&pk, 4);
	pk_str(&pk, "env");
	pk_strv(&pk, c->env);
	pk_str(&pk, "cwd");
	pk_str(&pk, c->cwd ? c->cwd : "");
	pk_str(&pk, "user");
	pk_str(&pk, c->user ? c->user : "");
	pk_str(&pk, "entrypoint");
	pk_strv(&pk, c->entrypoint);
}

int fs3_manifest_decode(const void *p, size_t n, struct fs3_manifest *m)
{
	msgpack_unpacked u;
	const msgpack_object *l, *c;
	int r;

	memset(m, 0, sizeof(*m));
	if ((r = unpack_root(&u, p, n)) < 0)
		return r;
	l = get(&u.data, "layers");
	c = get(&u.data, "config");
	r = -EBADMSG;
	if (!l || l->type != MSGPACK_OBJECT_ARRAY || l->via.array.size > FS3_LAYERS_MAX ||
	    !c || c->type != MSGPACK_OBJECT_MAP)
		goto out;
	m->layers = xcalloc(l->via.array.size, sizeof(*m->layers));
	for (uint32_t i = 0; i < l->via.array.size; i++, m->n++) {
		const msgpack_object *e = &l->via.array.ptr[i];
		if (get_digest(get(e, "digest"), &m->layers[i].digest) < 0 ||
		    get_digest(get(e, "index"), &m->layers[i].index) < 0 ||
		    get_u64(get(e, "size"), &m->layers[i].size) < 0)
			goto out;
	}
	if (get_strv(get(c, "env"), &m->config.env) < 0 ||
	    get_str(get(c, "cwd"), &m->config.cwd) < 0 ||
	    get_str(get(c, "user"), &m->config.user) < 0 ||
	    get_strv(get(c, "entrypoint"), &m->config.entrypoint) < 0)
		goto out;
	r = 0;
out:
	msgpack_unpacked_destroy(&u);
	if (r < 0)
		fs3_manifest_free(m);
	return r;
}

void fs3_manifest_free(struct fs3_manifest *m)
{
	free(m->layers);
	fs3_image_config_free(&m->config);
	memset(m, 0, sizeof(*m));
}

static char **strv_copy(char *const *v)
{
	size_t n = v ? dsec_strv_len((const char *const *)v) : 0;
	char **c = xcalloc(n + 1, sizeof(*c));

	for (size_t i = 0; i < n; i++)
		c[i] = xstrdup(v[i]);
	return c;
}

void fs3_config_copy(struct fs3_image_config *dst, const struct fs3_image_config *src)
{
	dst->env = strv_copy(src->env);
	dst->cwd = xstrdup(src->cwd ? src->cwd : "");
	dst->user = xstrdup(src->user ? src->user : "");
	dst->entrypoint = strv_copy(src->entrypoint);
}

void fs3_config_merge(struct fs3_image_config *dst, const struct fs3_image_config *base,
		      const struct fs3_image_config *over)
{
	size_t nb = base->env ? dsec_strv_len((const char *const *)base->env) : 0;
	size_t no = over->env ? dsec_strv_len((const char *const *)over->env) : 0, k = 0;

	dst->env = xcalloc(nb + no + 1, sizeof(char *));
	for (size_t i = 0; i < nb; i++) {
		size_t kl = strcspn(base->env[i], "=");
		bool replaced = false;
		for (size_t j = 0; j < no && !replaced; j++)
			replaced = !strncmp(over->env[j], base->env[i], kl) && over->env[j][kl] == '=';
		if (!replaced)
			dst->env[k++] = xstrdup(base->env[i]);
	}
	for (size_t j = 0; j < no; j++)
		dst->env[k++] = xstrdup(over->env[j]);
	dst->cwd = xstrdup(over->cwd && *over->cwd ? over->cwd : base->cwd ? base->cwd : "");
	dst->user = xstrdup(over->user && *over->user ? over->user : base->user ? base->user : "");
	dst->entrypoint = strv_copy(over->entrypoint && *over->entrypoint ? over->entrypoint
									   : base->entrypoint);
}

void fs3_image_config_free(struct fs3_image_config *c)
{
	if (c->env)
		dsec_strv_free(c->env);
	if (c->entrypoint)
		dsec_strv_free(c->entrypoint);
	free(c->cwd);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

/* name: lowercase components [a-z0-9._-] separated by single '/', each
 * starting with a letter or digit; tag: [A-Za-z0-9_][A-Za-z0-9._-]*. */
static bool valid_name(const char *s, size_t n)
{
	bool start = true;

	if (n == 0 || n > 200)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (start && !alnum)
			return false;
		if (c == '/') {
			if (i == n - 1)
				return false;
			start = true;
			continue;
		}
		if (!alnum && c != '.' && c != '_' && c != '-')
			return false;
		start = false;
	}
	return true;
}

static bool valid_tag(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

char *fs3_tag_file(const char *ref)
{
	const char *colon = strrchr(ref, ':');
	const char *tag = colon ? colon + 1 : "latest";
	size_t n = colon ? (size_t)(colon - ref) : strlen(ref);
	char *f;

	/* "sha256:..." is a digest, never a tag. */
	if (!valid_name(ref, n) || !valid_tag(tag) || (n == 6 && !strncmp(ref, "sha256", 6)))
		return NULL;
	f = xasprintf("%.*s:%s", (int)n, ref, tag);
	for (char *p = f; *p; p++)
		if (*p == '/')
			*p = '+';
	return f;
}

char *fs3_tag_from_file(const char *file)
{
	char *s = xstrdup(file), *t;

	for (char *p = s; *p; p++)
		if (*p == '+')
			*p = '/';
	t = fs3_tag_file(s);
	if (!t || !strchr(s, ':')) {
		free(t);
		free(s);
		return NULL;
	}
	free(t);
	return s;
}
