/* client-int.h - libdsec: what the typed calls' files share (client-ops.c,
 * client-files.c, client-rl.c): a reply being read and its checked
 * getters.  Not installed; the names are libdsec's own (hidden in
 * libdsec.so). */
#ifndef DSEC_CLIENT_INT_H
#define DSEC_CLIENT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <nng/nng.h>

#include "dsec.h"
#include "proto.h"

/* A reply being read: the parsed frame and its result map. */
struct reply {
	const char *url;		/* the client's address, for messages */
	struct dsec_msg msg;		/* owns the decoded objects */
	nng_msg *raw;			/* the frame bytes, or NULL */
	size_t len;			/* their length */
	const msgpack_object *result;	/* the result map (ok replies) */
	const char *bad;		/* the first result field of the wrong type, or NULL */
};

void dcl_reply_free(struct reply *r);
/* Sends the packed request p (consumed) and decodes the reply into r (free
 * it with dcl_reply_free whatever the result).  extra = seconds the request
 * itself may take. */
int dcl_roundtrip(struct dsec_client *c, struct dsec_pk *p, double extra, struct reply *r,
		  struct dsec_err *err);
/* The same for an op whose result carries lists (info, list). */
int dcl_roundtrip_list(struct dsec_client *c, struct dsec_pk *p, struct reply *r,
		       struct dsec_err *err);
/* The protocol error of a result without key where op's always has it. */
int dcl_no_field(const struct reply *r, const char *op, const char *key, struct dsec_err *err);
/* rc, or when it is 0 the error of the first field of the wrong type. */
int dcl_reply_done(const struct reply *r, const char *op, int rc, struct dsec_err *err);
/* Getters of fields that may be absent (the default), marking the reply bad
 * for one of the wrong type. */
void dcl_mark_bad(struct reply *r, int rc, const char *key);
char *dcl_get_str_or(struct reply *r, const msgpack_object *map, const char *key,
		     const char *dflt);
double dcl_get_double_or(struct reply *r, const msgpack_object *map, const char *key,
			 double dflt);
uint64_t dcl_get_u64_or(struct reply *r, const msgpack_object *map, const char *key,
			uint64_t dflt);
void dcl_get_bool_or(struct reply *r, const msgpack_object *map, const char *key, bool *out);
/* A string the result always has: *out (caller frees), or the error. */
int dcl_get_str_need(struct reply *r, const char *op, const char *key, char **out,
		     struct dsec_err *err);
/* The bytes of key, which the result always has, appended to out. */
int dcl_get_bin_need(struct reply *r, const char *op, const char *key, struct dsec_buf *out,
		     struct dsec_err *err);
/* Starts a request on sandbox id with key: val, more arguments to follow
 * (file ops: path; streaming exec: exec); its map counts them. */
void dcl_pk_id_key(struct dsec_pk *p, const char *op, const char *id, const char *key,
		   const char *val);
/* The maps of the list at key (see client-ops.c). */
int dcl_get_list(struct reply *r, const char *op, const msgpack_object *map, const char *key,
		 bool need, size_t min_bytes, const msgpack_object **entries, size_t *n,
		 struct dsec_err *err);
int dcl_check_timeout(double timeout, struct dsec_err *err);
/* A command's fields into the open request map, and its result out of r. */
void dcl_pack_exec(struct dsec_pk *p, const struct dsec_cmd *q);
int dcl_unpack_exec(struct reply *r, const char *op, struct dsec_cmd_res *res,
		    struct dsec_err *err);
/* The misbehaviour map of result m into out (client-rl.c). */
int dcl_unpack_marks(struct reply *r, const char *op, const msgpack_object *m,
		     struct dsec_marks *out, struct dsec_err *err);
/* An op of the sandbox id alone, its result unused. */
int dcl_id_op(struct dsec_client *c, const char *op, const char *id, struct dsec_err *err);

#endif
