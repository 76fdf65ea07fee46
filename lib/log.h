/* log.h - levelled logging to stderr (or a file) with timestamps.
 *
 * One process-wide level.  Safe to call from any thread: each line is
 * formatted into a local buffer and written with a single write(2).
 */
#ifndef DSEC_LOG_H
#define DSEC_LOG_H

#include "util.h"

enum dsec_log_level {
	DSEC_LOG_ERROR = 0,
	DSEC_LOG_WARN,
	DSEC_LOG_INFO,
	DSEC_LOG_DEBUG,
};

/* Parse "error", "warn", "info", "debug"; -EINVAL otherwise. */
int dsec_log_parse_level(const char *s, enum dsec_log_level *out);
void dsec_log_set_level(enum dsec_log_level level);
enum dsec_log_level dsec_log_get_level(void);
/* Send lines to fd (default 2).  The fd is not closed by the logger. */
void dsec_log_set_fd(int fd);
/* Process name put in front of each line ("dsecd"). */
void dsec_log_set_ident(const char *ident);

void dsec_log(enum dsec_log_level level, const char *fmt, ...) DSEC_PRINTF(2, 3);
void dsec_logv(enum dsec_log_level level, const char *fmt, va_list ap) DSEC_PRINTF(2, 0);

#define log_error(...) dsec_log(DSEC_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  dsec_log(DSEC_LOG_WARN, __VA_ARGS__)
#define log_info(...)  dsec_log(DSEC_LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (dsec_log_get_level() >= DSEC_LOG_DEBUG) dsec_log(DSEC_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
