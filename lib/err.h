/* err.h - errors as users see them: a stable code name plus a message.
 *
 * Every reply that fails carries {code, message}; code is one of the names in
 * the table below and never changes meaning once published (see
 * dsec-protocol(7)).  Internally functions return 0 or -errno; on paths a user
 * sees they take a struct dsec_err * last and fill it with dsec_err_set(),
 * which returns -errno so reporting is one line:
 *
 *     return dsec_err_set(err, ENOENT, "no sandbox '%s'", id);
 */
#ifndef DSEC_ERR_H
#define DSEC_ERR_H

#include "buf.h"

/* Stable error codes.  Append only; the names are the wire contract. */
enum dsec_code {
	DSEC_E_OK = 0,
	DSEC_E_BAD_REQUEST,	/* "bad_request": malformed msgpack, missing or mistyped field */
	DSEC_E_VERSION,		/* "unsupported_version": v is missing or not spoken here */
	DSEC_E_UNKNOWN_OP,	/* "unknown_op": op is not in the table */
	DSEC_E_TOO_LARGE,	/* "too_large": frame or field over its cap */
	DSEC_E_NOT_FOUND,	/* "not_found": no such sandbox, file, image */
	DSEC_E_EXISTS,		/* "exists": already there */
	DSEC_E_NO_BACKEND,	/* "no_backend": backend not loaded on this node */
	DSEC_E_UNSUPPORTED,	/* "unsupported": backend cannot do this op */
	DSEC_E_CAPACITY,	/* "capacity": node full (sandboxes, memory, pool) */
	DSEC_E_TIMEOUT,		/* "timeout": the operation itself timed out */
	DSEC_E_PERMISSION,	/* "permission": path escapes the sandbox, not allowed */
	DSEC_E_INVALID,		/* "invalid": well-formed but unacceptable value */
	DSEC_E_BACKEND,		/* "backend_error": the backend failed */
	DSEC_E_SHUTTING_DOWN,	/* "shutting_down": daemon is stopping */
	DSEC_E_UNAVAILABLE,	/* "unavailable": cannot reach the daemon (client side) */
	DSEC_E_INTERNAL,	/* "internal": a bug; see the daemon's log */
	DSEC_E_BUSY,		/* "busy": the object is running something; retry after it */
	DSEC_E_SANDBOX_LOST,	/* "sandbox_lost": the sandbox died under its commands (its
				 * init is gone): an infrastructure failure, not the
				 * command's; every later op on it fails so */
	DSEC_E_NODE_LOST,	/* "node_lost": the node that owns the sandbox is dead or
				 * left the cluster (not not_found: it was there) */
	DSEC_E_DIVERGED,	/* "diverged": a request's step is logged (or running)
				 * with another request: the trajectory log keeps the
				 * first; nothing ran */
	DSEC_E__COUNT
};

#define DSEC_ERR_MSG_MAX 512

struct dsec_err {
	enum dsec_code code;		/* stable code, DSEC_E_OK when unset */
	int errnum;			/* errno behind it, 0 if none */
	char msg[DSEC_ERR_MSG_MAX];	/* lowercase, no full stop, cause last */
};

/* Name on the wire ("bad_request") and back; unknown names map to
 * DSEC_E_INTERNAL so a newer daemon's codes still read as failures. */
DSEC_API
const char *dsec_code_name(enum dsec_code code);
enum dsec_code dsec_code_from_name(const char *name, size_t len);

/* The code an errno maps to when no better one is given. */
enum dsec_code dsec_code_from_errno(int errnum);

void dsec_err_clear(struct dsec_err *err);
/* Records the message and errnum (positive) with the code derived from it;
 * the caller writes the whole message, cause included.  Returns -errnum (or
 * -EIO if errnum is 0).  err may be NULL: then only the return value counts. */
int dsec_err_set(struct dsec_err *err, int errnum, const char *fmt, ...) DSEC_PRINTF(3, 4);
/* Same with an explicit code. */
int dsec_err_setc(struct dsec_err *err, enum dsec_code code, int errnum,
		  const char *fmt, ...) DSEC_PRINTF(4, 5);
/* Prefix an existing message: "cannot create sandbox: <old message>". */
void dsec_err_prefix(struct dsec_err *err, const char *fmt, ...) DSEC_PRINTF(2, 3);
/* Copies len bytes of src to dst (size bytes, NUL-terminated) as valid
 * UTF-8: a byte that does not begin a well-formed character becomes
 * U+FFFD, a character cut short at the end of src is dropped, and the copy
 * ends at a character boundary when dst is full.  Returns its length.
 * Messages set through this header are made so (they echo requests, which
 * may hold any bytes), and so is every error message dsecd sends. */
size_t dsec_utf8_clean(char *dst, size_t size, const char *src, size_t len);

#endif
