/* err.c - stable error codes and struct dsec_err. */
#include <errno.h>
#include <stdarg.h>
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
	[DSEC_E_NODE_LOST] = "node_lost",
	[DSEC_E_DIVERGED] = "diverged",
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

/* Bytes of the well-formed UTF-8 character at s (n bytes there), 0 when
 * the bytes are not one (a stray continuation byte, an overlong form, a
 * surrogate, beyond U+10FFFF, or cut short). */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	size_t k;
	unsigned lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;	/* overlong */
	else if (s[0] == 0xed)
		hi = 0x9f;	/* surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90;	/* overlong */
	else if (s[0] == 0xf4)
		hi = 0x8f;	/* beyond U+10FFFF */
	if (n < k || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < k; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return k;
}

size_t dsec_utf8_clean(char *dst, size_t size, const char *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0;

	if (size == 0)
		return 0;
	while (i < len) {
		size_t k = utf8_char(s + i, len - i), w = k ? k : 3;

		/* A character cut by the end of src was cut by a length cap:
		 * drop it rather than mark it. */
		if (!k && s[i] >= 0xc2 && s[i] <= 0xf4 && len - i < 4) {
			size_t j = i + 1;
			while (j < len && s[j] >= 0x80 && s[j] <= 0xbf)
				j++;
			if (j == len)
				break;
		}
		if (o + w >= size)
			break;
		if (k)
			memcpy(dst + o, s + i, k);
		else
			memcpy(dst + o, "\xef\xbf\xbd", 3);	/* U+FFFD for one bad byte */
		o += w;
		i += k ? k : 1;
	}
	dst[o] = '\0';
	return o;
}

/* Formats into err->msg as valid UTF-8: cut at a character boundary, and
 * bytes of a request echoed in it that are not UTF-8 replaced. */
static void msg_set(struct dsec_err *err, const char *text)
{
	dsec_utf8_clean(err->msg, sizeof(err->msg), text, strlen(text));
}

static int err_setv(struct dsec_err *err, enum dsec_code code, int errnum,
		    const char *fmt, va_list ap) DSEC_PRINTF(4, 0);
static int err_setv(struct dsec_err *err, enum dsec_code code, int errnum,
		    const char *fmt, va_list ap)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		char text[DSEC_ERR_MSG_MAX];

		err->code = code;
		err->errnum = errnum;
		vsnprintf(text, sizeof(text), fmt, ap);
		msg_set(err, text);
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
	char head[DSEC_ERR_MSG_MAX], old[DSEC_ERR_MSG_MAX], text[2 * DSEC_ERR_MSG_MAX + 2];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	/* Truncation is fine: the message is capped by design (and cut at a
	 * character). */
	snprintf(text, sizeof(text), "%s: %s", head, old);
	msg_set(err, text);
}
