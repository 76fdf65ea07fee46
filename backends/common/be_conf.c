/* be_conf.c - see be_conf.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be_conf.h"
#include "util.h"

static int set(const char *backend, const struct be_conf_key *k, void *conf, const char *v,
	       struct dsec_err *err)
{
	void *f = (char *)conf + k->off;
	char *end;

	switch (k->kind) {
	case BE_K_STR:
		free(*(char **)f);
		*(char **)f = xstrdup(v);
		return 0;
	case BE_K_COUNT: {
		unsigned long long n;

		errno = 0;
		n = strtoull(v, &end, 10);
		if (errno || end == v || *end || *v == '-' || n > UINT32_MAX)
			break;
		*(uint64_t *)f = n;
		return 0;
	}
	case BE_K_SIZE:
		if (dsec_parse_size(v, (uint64_t *)f) < 0)
			break;
		return 0;
	case BE_K_CPUS: {
		double d = strtod(v, &end);

		if (end == v || *end || !(d > 0) || d > 4096)
			break;
		*(double *)f = d;
		return 0;
	}
	case BE_K_SECS:
		if (dsec_parse_duration(v, (double *)f) < 0 || !(*(double *)f > 0))
			break;
		return 0;
	case BE_K_BOOL:
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
			*(bool *)f = true;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") ||
			 !strcmp(v, "0"))
			*(bool *)f = false;
		else
			break;
		return 0;
	}
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "invalid value '%s' for '%s.%s'", v,
			     backend, k->key);
}

int be_conf_load(const struct dsec_be_host *host, const char *backend,
		 const struct be_conf_key *table, size_t n, void *conf, struct dsec_err *err)
{
	const char *const *keys = host->conf_keys(host);
	size_t plen = strlen(backend);
	int rc;

	for (size_t i = 0; i < n; i++) {
		char key[96];
		const char *v;

		snprintf(key, sizeof(key), "%s.%s", backend, table[i].key);
		v = host->conf_get(host, key);
		if ((rc = set(backend, &table[i], conf, v ? v : table[i].def, err)) < 0)
			return rc;
	}
	for (size_t k = 0; keys && keys[k]; k++) {
		bool known = false;

		if (strncmp(keys[k], backend, plen) || keys[k][plen] != '.')
			continue;
		for (size_t i = 0; i < n && !known; i++)
			known = !strcmp(keys[k] + plen + 1, table[i].key);
		if (!known) {
			struct dsec_buf b;

			dsec_buf_init(&b);
			for (size_t i = 0; i < n; i++)
				dsec_buf_addf(&b, "%s%s", i ? ", " : "", table[i].key);
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					   "unknown config key '%s' (%s knows: %s)", keys[k], backend,
					   b.data);
			dsec_buf_free(&b);
			return rc;
		}
	}
	return 0;
}
