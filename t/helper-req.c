/* helper-req - send one protocol request from the shell, for tests.
 *
 *   helper-req [-q] [--no-v] [--v N] URL OP [ARG...]
 *   helper-req [-q] --raw FILE URL        (send FILE's bytes as the frame; - = stdin)
 *   helper-req -o FILE ...                 (also save result.data's bytes in FILE;
 *                                           bins print as "<N bytes>")
 *   helper-req --dump FILE ...             (also save the whole reply frame in FILE)
 *
 * ARG forms: key=string  key#=integer  key%=float  key?=true|false
 *            key[]=string (appends to an array)  key.sub=string (map entry)
 *            key@=FILE (bin from a file)  key~=N (bin of N 'x' bytes)
 * The reply is printed as one line of JSON (bin and str as strings with
 * escapes).  Exit: 0 ok:true, 1 ok:false, 2 no reply or bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"
#include "proto.h"

static bool elide_bin;	/* -o: print bins by their size */

static void json_str(const char *p, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: fputs("null", stdout); break;
	case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", stdout); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: printf("%llu", (unsigned long long)o->via.u64); break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: printf("%lld", (long long)o->via.i64); break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: printf("%.6g", o->via.f64); break;
	case MSGPACK_OBJECT_STR: json_str(o->via.str.ptr, o->via.str.size); break;
	case MSGPACK_OBJECT_BIN:
		if (elide_bin)
			printf("\"<%u bytes>\"", (unsigned)o->via.bin.size);
		else
			json_str(o->via.bin.ptr, o->via.bin.size);
		break;
	case MSGPACK_OBJECT_ARRAY:
		putchar('[');
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				putchar(',');
			json(&o->via.array.ptr[i]);
		}
		putchar(']');
		break;
	case MSGPACK_OBJECT_MAP:
		putchar('{');
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			if (i)
				putchar(',');
			json(&o->via.map.ptr[i].key);
			putchar(':');
			json(&o->via.map.ptr[i].val);
		}
		putchar('}');
		break;
	default: fputs("\"?\"", stdout); break;
	}
}

static void usage(void)
{
	fputs("usage: helper-req [-q] [-o FILE] [--dump FILE] [--no-v] [--v N] URL OP [key=val|key#=N|key%=F|key?=B|"
	      "key[]=s|key.sub=s|key@=FILE|key~=N]...\n"
	      "       helper-req [-q] --raw FILE URL\n", stderr);
	exit(2);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	struct dsec_buf b;
	char chunk[65536];
	size_t n;

	if (!f) {
		fprintf(stderr, "helper-req: cannot open '%s': %s\n", path, strerror(errno));
		exit(2);
	}
	dsec_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dsec_buf_add(&b, chunk, n);
	if (f != stdin)
		fclose(f);
	return dsec_buf_detach(&b, len);
}

/* Which arguments share a key prefix: packs arrays and maps grouped. */
static size_t key_len(const char *a)
{
	return strcspn(a, "=#%?[.@~");
}

static void pack_scalar(struct dsec_pk *p, char kind, const char *val)
{
	switch (kind) {
	case '#':
		if (val[0] == '-')
			msgpack_pack_int64(&p->pk, strtoll(val, NULL, 10));
		else
			msgpack_pack_uint64(&p->pk, strtoull(val, NULL, 10));
		break;
	case '%': msgpack_pack_double(&p->pk, strtod(val, NULL)); break;
	case '?':
		if (!strcmp(val, "true"))
			msgpack_pack_true(&p->pk);
		else
			msgpack_pack_false(&p->pk);
		break;
	case '@': {
		size_t n;
		char *d = slurp(val, &n);
		dsec_pk_bin(p, d, n);
		free(d);
		break;
	}
	case '~': {
		size_t n = strtoull(val, NULL, 10);
		char *d = xmalloc(n);
		memset(d, 'x', n);
		dsec_pk_bin(p, d, n);
		free(d);
		break;
	}
	default: dsec_pk_str(p, val); break;
	}
}

int main(int argc, char **argv)
{
	bool quiet = false, with_v = true;
	long version = 1;
	const char *raw = NULL, *save = NULL, *dump = NULL;
	int i = 1;
	struct dsec_client *c;
	struct dsec_err err;
	void *req, *reply;
	size_t len, rlen;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-q"))
			quiet = true;
		else if (!strcmp(argv[i], "--no-v"))
			with_v = false;
		else if (!strcmp(argv[i], "--v") && i + 1 < argc)
			version = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--raw") && i + 1 < argc)
			raw = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			save = argv[++i];
		else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
			dump = argv[++i];
		else
			usage();
	}
	if (i >= argc || (!raw && i + 1 >= argc))
		usage();
	const char *url = argv[i++];
	if (raw) {
		req = slurp(raw, &len);
	} else {
		const char *op = argv[i++];
		int nargs = argc - i;
		/* Count distinct keys. */
		size_t nkeys = 0;
		for (int a = 0; a < nargs; a++) {
			size_t kl = key_len(argv[i + a]);
			bool seen = false;
			for (int b = 0; b < a; b++)
				if (key_len(argv[i + b]) == kl && !strncmp(argv[i + a], argv[i + b], kl))
					seen = true;
			if (!seen)
				nkeys++;
		}
		struct dsec_pk p;
		dsec_pk_init(&p);
		msgpack_pack_map(&p.pk, nkeys + 1 + with_v);
		if (with_v) {
			dsec_pk_str(&p, "v");
			msgpack_pack_int64(&p.pk, version);
		}
		dsec_pk_kv_str(&p, "op", op);
		for (int a = 0; a < nargs; a++) {
			const char *arg = argv[i + a];
			size_t kl = key_len(arg);
			bool seen = false;
			for (int b = 0; b < a; b++)
				if (key_len(argv[i + b]) == kl && !strncmp(arg, argv[i + b], kl))
					seen = true;
			if (seen)
				continue;
			char kind = arg[kl];
			if (!kind)
				usage();
			dsec_pk_strn(&p, arg, kl);
			if (kind == '[' || kind == '.') {
				/* Gather every argument with this key. */
				size_t n = 0;
				for (int b = a; b < nargs; b++)
					if (key_len(argv[i + b]) == kl && !strncmp(arg, argv[i + b], kl))
						n++;
				if (kind == '[')
					msgpack_pack_array(&p.pk, n);
				else
					msgpack_pack_map(&p.pk, n);
				for (int b = a; b < nargs; b++) {
					const char *e = argv[i + b];
					if (key_len(e) != kl || strncmp(arg, e, kl))
						continue;
					const char *eq = strchr(e + kl, '=');
					if (!eq)
						usage();
					if (kind == '.') {
						const char *sub = e + kl + 1;
						size_t sl = strcspn(sub, "=#%?@~");
						dsec_pk_strn(&p, sub, sl);
						pack_scalar(&p, sub[sl], eq + 1);
					} else {
						dsec_pk_str(&p, eq + 1);
					}
				}
			} else {
				const char *eq = strchr(arg + kl, '=');
				if (!eq)
					usage();
				pack_scalar(&p, kind, eq + 1);
			}
		}
		req = dsec_pk_detach(&p, &len);
	}
	dsec_err_clear(&err);
	if (dsec_connect(&c, url, &err) < 0) {
		fprintf(stderr, "helper-req: %s\n", err.msg);
		free(req);
		return 2;
	}
	dsec_set_timeout(c, getenv("HELPER_REQ_TIMEOUT") ? atof(getenv("HELPER_REQ_TIMEOUT")) : 5);
	if (dsec_raw(c, req, len, &reply, &rlen, &err) < 0) {
		if (!quiet)
			fprintf(stderr, "helper-req: %s\n", err.msg);
		free(req);
		dsec_close(c);
		return 2;
	}
	free(req);
	dsec_close(c);
	if (dump) {
		FILE *f = fopen(dump, "wb");
		if (!f || fwrite(reply, 1, rlen, f) != rlen || fclose(f) != 0) {
			fprintf(stderr, "helper-req: cannot write '%s'\n", dump);
			return 2;
		}
	}
	msgpack_unpacked up;
	size_t off = 0;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, reply, rlen, &off) != MSGPACK_UNPACK_SUCCESS) {
		fprintf(stderr, "helper-req: reply is not msgpack\n");
		return 2;
	}
	const msgpack_object *data = dsec_map_get(dsec_map_get(&up.data, "result"), "data");
	if (save && data && data->type == MSGPACK_OBJECT_BIN) {
		FILE *f = fopen(save, "wb");
		if (!f || fwrite(data->via.bin.ptr, 1, data->via.bin.size, f) != data->via.bin.size ||
		    fclose(f) != 0) {
			fprintf(stderr, "helper-req: cannot write '%s'\n", save);
			return 2;
		}
		elide_bin = true;
	}
	if (!quiet) {
		json(&up.data);
		putchar('\n');
	}
	const msgpack_object *ok = dsec_map_get(&up.data, "ok");
	int rc = ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean ? 0 : 1;
	msgpack_unpacked_destroy(&up);
	free(reply);
	return rc;
}
