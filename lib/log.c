/* log.c - levelled logging, one write(2) per line. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>

#include "log.h"

static enum dsec_log_level log_level = DSEC_LOG_INFO;
static int log_fd = 2;
static char log_ident[32] = "dsec";

static const char *const level_names[] = {
	[DSEC_LOG_ERROR] = "error",
	[DSEC_LOG_WARN] = "warn",
	[DSEC_LOG_INFO] = "info",
	[DSEC_LOG_DEBUG] = "debug",
};

int dsec_log_parse_level(const char *s, enum dsec_log_level *out)
{
	for (size_t i = 0; i < DSEC_ARRAY_LEN(level_names); i++) {
		if (!strcmp(s, level_names[i])) {
			*out = (enum dsec_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void dsec_log_set_level(enum dsec_log_level level) { log_level = level; }
enum dsec_log_level dsec_log_get_level(void) { return log_level; }
void dsec_log_set_fd(int fd) { log_fd = fd; }

void dsec_log_set_ident(const char *ident)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident);
}

void dsec_logv(enum dsec_log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int saved = errno;

	if (level > log_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s %s: ",
			      (long)(tv.tv_usec / 1000), log_ident, level_names[level]);
	int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += (size_t)m;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(log_fd, line, n);
	errno = saved;
}

void dsec_log(enum dsec_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dsec_logv(level, fmt, ap);
	va_end(ap);
}
