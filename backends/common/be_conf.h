/* be_conf.h - a backend's configuration keys, as a table.
 *
 * A backend lists its keys once (name after "BACKEND.", kind, offset into
 * its config struct, embedded default); be_conf_load() fills the struct
 * from the daemon's config and refuses values it cannot parse and
 * "BACKEND.*" keys it does not know, naming the ones it does.
 */
#ifndef BE_CONF_H
#define BE_CONF_H

#include <stddef.h>
#include "backend.h"

enum be_conf_kind {
	BE_K_STR,	/* char *, caller frees */
	BE_K_COUNT,	/* uint64_t, a whole number up to 2^32-1 */
	BE_K_SIZE,	/* uint64_t bytes, "64M" */
	BE_K_CPUS,	/* double cores, (0, 4096] */
	BE_K_SECS,	/* double seconds > 0, "30s", "5m" */
	BE_K_BOOL,	/* bool: true/false, yes/no, on/off, 1/0 */
};

struct be_conf_key {
	const char *key;		/* after "BACKEND." */
	enum be_conf_kind kind;		/* how to parse it */
	size_t off;			/* into the backend's config struct */
	const char *def;		/* embedded default */
};

int be_conf_load(const struct dsec_be_host *host, const char *backend,
		 const struct be_conf_key *table, size_t n, void *conf, struct dsec_err *err);

#endif
