/* err.c - stable error codes and struct dsec_err. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

static const char *const code_names[DSEC_E__COUNT] = {
	[DSEC_E_OK] = "ok",
	[DSEC_E_BAD_REQUEST] = "bad_request",
	[DSEC_E_VERSION] = "unsupported_version",
	[DSEC_E_UNKNOWN_OP] = "unknown_op",
	[DSEC_E_TOO_LARGE] = "too_large",
	[DSEC_E_NOT_FOUND] = "not_found",
	[DSEC_E_EXISTS] = "exists",
	[DSEC_E_NO_BACKEND] = "no_backend",
	[DSEC_E_UNSUPPORTED] = "unsupported",
	[DSEC_E_CAPACITY] = "capacity",
	[DSEC_E_TIMEOUT] = "timeout",
	[DSEC_E_PERMISSION] = "permission",
	[DSEC_E_INVALID] = "invalid",
	[DSEC_E_BACKEND] = "backend_error",
	[DSEC_E_SHUTTING_DOWN] = "shutting_down",
	[DSEC_E_UNAVAILABLE] = "unavailable",
	[DSEC_E_INTERNAL] = "internal",
	[DSEC_E_BUSY] = "busy",
	[DSEC_E_SANDBOX_LOST] = "sandbox_lost",
};

const char *dsec_code_name(enum dsec_code code)
{
	if ((unsigned)code >= DSEC_E__COUNT)
		return "internal";
	return code_names[code];
}

enum dsec_code dsec_code_from_name(const char *name, size_t len)
{
	for (int i = 0; i < DSEC_E__COUNT; i++)
		if (strlen(code_names[i]) == len && !memcmp(code_names[i], name, len))
			return (enum dsec_code)i;
	return DSEC_E_INTERNAL;
}

enum dsec_code dsec_code_from_errno(int errnum)
{
	switch (errnum) {
	case 0: return DSEC_E_OK;
	case ENOENT: case ESRCH: return DSEC_E_NOT_FOUND;
	case EEXIST: return DSEC_E_EXISTS;
	case EINVAL: case ERANGE: case ENAMETOOLONG: return DSEC_E_INVALID;
	case E2BIG: case EMSGSIZE: case EFBIG: return DSEC_E_TOO_LARGE;
	case EPERM: case EACCES: case EXDEV: case ELOOP: return DSEC_E_PERMISSION;
	case ENOTSUP: return DSEC_E_UNSUPPORTED;
	case EAGAIN: case ENOSPC: case ENOMEM: case EMFILE: case ENFILE: case EBUSY:
		return DSEC_E_CAPACITY;
	case ETIMEDOUT: return DSEC_E_TIMEOUT;
	case ECONNREFUSED: case EHOSTUNREACH: case ENOTCONN: case ECONNRESET:
		return DSEC_E_UNAVAILABLE;
	case ESHUTDOWN: return DSEC_E_SHUTTING_DOWN;
	case EBADMSG: case EPROTO: return DSEC_E_BAD_REQUEST;
	default: return DSEC_E_BACKEND;
	}
}

void dsec_err_clear(struct dsec_err *err)
{
	if (!err)
		return;
	err->code = DSEC_E_OK;
	err->errnum = 0;
	err->msg[0] = '\0';
}

static int err_setv(struct dsec_err *err, enum dsec_code code, int errnum,
		    const char *fmt, va_list ap)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		err->code = code;
		err->errnum = errnum;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	return errnum ? -errnum : -EIO;
}

int dsec_err_set(struct dsec_err *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	int rc;
	int e = errnum < 0 ? -errnum : errnum;

	va_start(ap, fmt);
	rc = err_setv(err, e ? dsec_code_from_errno(e) : DSEC_E_INTERNAL, e, fmt, ap);
	va_end(ap);
	return rc;
}

int dsec_err_setc(struct dsec_err *err, enum dsec_code code, int errnum, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = err_setv(err, code, errnum, fmt, ap);
	va_end(ap);
	return rc;
}

void dsec_err_prefix(struct dsec_err *err, const char *fmt, ...)
{
	char head[DSEC_ERR_MSG_MAX], old[DSEC_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is fine: the message is capped by design. */
	int n = snprintf(err->msg, sizeof(err->msg), "%s: ", head);
	if (n >= 0 && (size_t)n < sizeof(err->msg))
		memcpy(err->msg + n, old, strnlen(old, sizeof(err->msg) - (size_t)n - 1) + 1);
	err->msg[sizeof(err->msg) - 1] = '\0';
}
