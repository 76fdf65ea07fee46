/* config.c - embedded defaults, dsecd.conf parsing and command-line flags. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include "backend.h"
#include "config.h"
#include "dsec.h"

enum key_type { K_STR, K_STRV, K_SIZE, K_UINT, K_SECONDS, K_BOOL, K_LEVEL, K_MODE };

/* One configuration key: adding one is adding a row. */
struct key_desc {
	const char *name;	/* key in dsecd.conf and for --set */
	enum key_type type;	/* how the value is parsed */
	size_t off;		/* offset of the field in struct dsecd_conf */
	const char *dflt;	/* embedded default, NULL = unset */
};

#define F(f) offsetof(struct dsecd_conf, f)
static const struct key_desc keys[] = {
	{ "node", K_STR, F(node), NULL },	/* default: the host name */
	{ "listen", K_STRV, F(listen), NULL },	/* default: DSEC_DEFAULT_URL */
	{ "listen_remote", K_BOOL, F(listen_remote), "false" },
	{ "tls_cert", K_STR, F(tls_cert), NULL },
	{ "tls_ca", K_STR, F(tls_ca), NULL },
	{ "cluster_nodes", K_STRV, F(cluster_nodes), NULL },	/* default: none */
	{ "metrics_listen", K_STR, F(metrics_listen), NULL },	/* default: no metrics */
	{ "gossip_listen", K_STR, F(gossip_listen), NULL },	/* default: no gossip */
	{ "gossip_advertise", K_STR, F(gossip_advertise), NULL },
	{ "gossip_seeds", K_STRV, F(gossip_seeds), NULL },
	{ "gossip_probe_interval", K_SECONDS, F(gossip_probe_interval), "1s" },
	{ "gossip_reconnect_interval", K_SECONDS, F(gossip_reconnect_interval), "30s" },
	{ "cluster_key_file", K_STRV, F(cluster_keys), NULL },
	{ "api_url", K_STR, F(api_url), NULL },
	{ "placement", K_STR, F(placement), "power_k" },
	{ "placement_k", K_UINT, F(placement_k), "2" },
	{ "state_dir", K_STR, F(state_dir), "/var/lib/dsec" },
	{ "backend_dir", K_STR, F(backend_dir), DSEC_BACKEND_DIR },
	{ "helper_dir", K_STR, F(helper_dir), DSEC_HELPER_DIR },
	{ "backends", K_STR, F(backends), "fncall,container" },
	{ "default_backend", K_STR, F(default_backend), "fncall" },
	{ "socket_mode", K_MODE, F(socket_mode), "0600" },
	{ "socket_group", K_STR, F(socket_group), NULL },
	{ "log_level", K_LEVEL, F(log_level), "info" },
	{ "log_file", K_STR, F(log_file), NULL },
	{ "pid_file", K_STR, F(pid_file), NULL },
	{ "foreground", K_BOOL, F(foreground), "false" },
	{ "max_frame", K_SIZE, F(max_frame), "16M" },
	{ "max_sandboxes", K_UINT, F(max_sandboxes), "4096" },
	{ "max_inflight", K_UINT, F(max_inflight), "256" },
	{ "workers", K_UINT, F(workers), "4" },
	{ "ttl", K_SECONDS, F(ttl), "6h" },
	{ "idle_ttl", K_SECONDS, F(idle_ttl), "30m" },
	{ "max_ttl", K_SECONDS, F(max_ttl), "7d" },
	{ "exec_timeout", K_SECONDS, F(exec_timeout), "10m" },
	{ "max_exec_timeout", K_SECONDS, F(max_exec_timeout), "24h" },
	{ "output_cap", K_SIZE, F(output_cap), "1M" },
	{ "stream_grace", K_SECONDS, F(stream_grace), "1m" },
	{ "stream_log_max", K_SIZE, F(stream_log_max), "256M" },
	{ "stage_grace", K_SECONDS, F(stage_grace), "2m" },
	{ "lost_grace", K_SECONDS, F(lost_grace), "1m" },
	{ "shutdown_grace", K_SECONDS, F(shutdown_grace), "10s" },
	{ "image_store", K_STR, F(image_store), NULL },	/* default: STATE_DIR/fs3 */
	{ "image_origin", K_STR, F(image_origin), NULL },	/* default: IMAGE_STORE/origin */
	{ "image_cache_max", K_SIZE, F(image_cache_max), "10G" },
	{ "image_on_demand", K_BOOL, F(image_on_demand), "true" },
	{ "image_readahead", K_UINT, F(image_readahead), "4" },
	{ "image_peers", K_STRV, F(image_peers), NULL },	/* default: none */
	{ "image_fetch_timeout", K_SECONDS, F(image_fetch_timeout), "5s" },
	{ "image_linger", K_SECONDS, F(image_linger), "0" },
	{ "pool", K_STR, F(pool), NULL },	/* default: no warm pools */
	{ "trajectory_dir", K_STR, F(trajectory_dir), NULL },	/* default: STATE_DIR/trajectory */
	{ "trajectory_keep", K_SECONDS, F(trajectory_keep), "1d" },
};
#undef F

static const struct key_desc *find_key(const char *name)
{
	for (size_t i = 0; i < DSEC_ARRAY_LEN(keys); i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

bool dsecd_node_name_ok(const char *s)
{
	if (!*s || strlen(s) > 63)
		return false;
	for (; *s; s++)
		if (!(((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static void strv_push(char ***v, const char *s)
{
	size_t n = dsec_strv_len((const char *const *)*v);

	*v = xrealloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = xstrdup(s);
	(*v)[n + 1] = NULL;
}

static void strv_clear(char ***v)
{
	if (*v) {
		for (char **p = *v; *p; p++)
			free(*p);
		free(*v);
	}
	*v = NULL;
}

/* Backend keys: "name.key" with both parts non-empty identifiers. */
static bool backend_key(const char *key)
{
	const char *dot = strchr(key, '.');

	if (!dot || dot == key || !dot[1])
		return false;
	for (const char *p = key; *p; p++)
		if (!(((*p | 32) >= 'a' && (*p | 32) <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '.'))
			return false;
	return true;
}

int dsecd_conf_set(struct dsecd_conf *conf, const char *key, const char *value,
		   struct dsec_err *err)
{
	const struct key_desc *k = find_key(key);
	char *base = (char *)conf;

	if (!k) {
		if (!backend_key(key))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unknown key '%s'", key);
		size_t n = dsec_strv_len((const char *const *)conf->be_keys);
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(conf->be_keys[i], key)) {
				free(conf->be_vals[i]);
				conf->be_vals[i] = xstrdup(value);
				return 0;
			}
		}
		strv_push(&conf->be_keys, key);
		strv_push(&conf->be_vals, value);
		return 0;
	}
	switch (k->type) {
	case K_STR: {
		char **f = (char **)(base + k->off);
		if (!strcmp(key, "node") && !dsecd_node_name_ok(value))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid node name '%s': use 1-63 of [A-Za-z0-9._-]", value);
		if (!strcmp(key, "placement") && strcmp(value, "power_k") && strcmp(value, "random") &&
		    strcmp(value, "least_loaded") && strcmp(value, "local"))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "placement '%s' is not one of "
					     "power_k, random, least_loaded, local", value);
		free(*f);
		*f = *value ? xstrdup(value) : NULL;
		return 0;
	}
	case K_STRV: {
		/* Each use adds; one value may list several, split by commas or blanks. */
		_cleanup_free_ char *copy = xstrdup(value);
		char *save = NULL;
		for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save))
			strv_push((char ***)(base + k->off), w);
		return 0;
	}
	case K_SIZE:
	case K_UINT: {
		uint64_t v;
		int rc = dsec_parse_size(value, &v);
		if (rc < 0 || (k->type == K_UINT && strspn(value, "0123456789") != strlen(value)))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid value '%s' for '%s': expected %s", value, key,
					     k->type == K_SIZE ? "a size like 64M" : "a whole number");
		*(uint64_t *)(base + k->off) = v;
		return 0;
	}
	case K_SECONDS: {
		double v;
		if (dsec_parse_duration(value, &v) < 0)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid value '%s' for '%s': expected a duration like 30s, 5m, 1h",
					     value, key);
		*(double *)(base + k->off) = v;
		return 0;
	}
	case K_BOOL: {
		bool v;
		if (!strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1"))
			v = true;
		else if (!strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "0"))
			v = false;
		else
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid value '%s' for '%s': expected true or false",
					     value, key);
		*(bool *)(base + k->off) = v;
		return 0;
	}
	case K_MODE: {
		char *end;
		unsigned long m = strtoul(value, &end, 8);
		if (!*value || *end || m > 0777)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid value '%s' for '%s': expected an octal mode like 0660",
					     value, key);
		*(uint32_t *)(base + k->off) = (uint32_t)m;
		return 0;
	}
	case K_LEVEL: {
		enum dsec_log_level l;
		if (dsec_log_parse_level(value, &l) < 0)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "invalid value '%s' for '%s': expected error, warn, info or debug",
					     value, key);
		*(enum dsec_log_level *)(base + k->off) = l;
		return 0;
	}
	}
	DSEC_BUG("bad key type");
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int load_file(struct dsecd_conf *conf, const char *path, bool must_exist,
		     struct dsec_err *err)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;

	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		return dsec_err_set(err, errno, "cannot read config '%s': %s", path, strerror(errno));
	}
	conf->config_file = xstrdup(path);
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					   "%s:%d: expected 'key = value'", path, lineno);
			break;
		}
		*eq = '\0';
		char *k = trim(s), *v = trim(eq + 1);
		if ((rc = dsecd_conf_set(conf, k, v, err)) < 0) {
			dsec_err_prefix(err, "%s:%d", path, lineno);
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

static void usage(FILE *f)
{
	fputs("usage: dsecd [--foreground] [--config FILE] [--listen URL]... [--state-dir DIR]\n"
	      "             [--node NAME] [--log-level LEVEL] [--backend-dir DIR]\n"
	      "             [--helper-dir DIR] [--set KEY=VALUE]... [--check-config]\n"
	      "             [--help] [--version]\n"
	      "see dsecd(8) and dsecd.conf(5)\n", f);
}

/* Cross-key rules, checked once everything is read. */
static int check_conf(struct dsecd_conf *conf, struct dsec_err *err)
{
	/* Paths become absolute: the daemon changes to / when it detaches. */
	char **paths[] = { &conf->state_dir, &conf->backend_dir, &conf->helper_dir,
			   &conf->log_file, &conf->pid_file, &conf->trajectory_dir };
	char cwd[4096];

	for (size_t i = 0; i < DSEC_ARRAY_LEN(paths); i++) {
		char *p = *paths[i];
		if (!p || p[0] == '/')
			continue;
		if (!getcwd(cwd, sizeof(cwd)))
			return dsec_err_set(err, errno, "cannot resolve '%s': %s", p, strerror(errno));
		*paths[i] = xasprintf("%s/%s", cwd, p);
		free(p);
	}
	static const char *const required[] = { "state_dir", "backend_dir", "helper_dir",
						"backends", "default_backend" };

	for (size_t i = 0; i < DSEC_ARRAY_LEN(required); i++) {
		const struct key_desc *k = find_key(required[i]);
		if (!*(char *const *)((const char *)conf + k->off))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "'%s' must not be empty",
					     required[i]);
	}
	if (conf->max_frame < (256u << 10) || conf->max_frame > (64u << 20))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "max_frame must be between 256K and 64M, not %llu",
				     (unsigned long long)conf->max_frame);
	if (conf->output_cap > (conf->max_frame - DSECD_REPLY_SLACK) / 2)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "output_cap %llu does not fit twice in max_frame %llu "
				     "(less %u bytes of slack)",
				     (unsigned long long)conf->output_cap,
				     (unsigned long long)conf->max_frame, DSECD_REPLY_SLACK);
	if (conf->ttl > conf->max_ttl || conf->idle_ttl > conf->max_ttl)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "ttl and idle_ttl must not be over max_ttl");
	if (conf->exec_timeout > conf->max_exec_timeout)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "exec_timeout must not be over max_exec_timeout");
	if (conf->gossip_probe_interval < 0.1 || conf->gossip_probe_interval > 60)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "gossip_probe_interval must be between 100ms and 1m");
	if (conf->gossip_reconnect_interval < 1 || conf->gossip_reconnect_interval > 86400)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "gossip_reconnect_interval must be between 1s and 1d");
	return 0;
}

/* Flags are collected as "key=value" and applied after the config file. */
static void push_kv(char ***v, const char *key, const char *value)
{
	char *s = xasprintf("%s=%s", key, value);

	strv_push(v, s);
	free(s);
}

int dsecd_conf_load(struct dsecd_conf *conf, int argc, char **argv, struct dsec_err *err)
{
	enum { O_STATE = 256, O_BDIR, O_HDIR, O_LEVEL, O_SET, O_CHECK, O_NODE, O_VERSION };
	static const struct option opts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "backend-dir", required_argument, NULL, O_BDIR },
		{ "helper-dir", required_argument, NULL, O_HDIR },
		{ "log-level", required_argument, NULL, O_LEVEL },
		{ "node", required_argument, NULL, O_NODE },
		{ "set", required_argument, NULL, O_SET },
		{ "check-config", no_argument, NULL, O_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ 0 }
	};
	const char *config = NULL;
	bool check = false;
	char **flag_listen = NULL, **sets = NULL;
	int c, rc = 0;

	memset(conf, 0, sizeof(*conf));
	for (size_t i = 0; i < DSEC_ARRAY_LEN(keys); i++)
		if (keys[i].dflt && dsecd_conf_set(conf, keys[i].name, keys[i].dflt, err) < 0)
			DSEC_BUG("bad default for %s", keys[i].name);

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fc:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': push_kv(&sets, "foreground", "true"); break;
		case 'c': config = optarg; break;
		case 'l': strv_push(&flag_listen, optarg); break;
		case O_STATE: push_kv(&sets, "state_dir", optarg); break;
		case O_BDIR: push_kv(&sets, "backend_dir", optarg); break;
		case O_HDIR: push_kv(&sets, "helper_dir", optarg); break;
		case O_LEVEL: push_kv(&sets, "log_level", optarg); break;
		case O_NODE: push_kv(&sets, "node", optarg); break;
		case O_SET:
			if (!strchr(optarg, '=')) {
				rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
						   "--set needs KEY=VALUE, got '%s'", optarg);
				goto out;
			}
			strv_push(&sets, optarg);
			break;
		case O_CHECK: check = true; break;
		case 'h': usage(stdout); rc = 1; goto out;
		case O_VERSION: printf("dsecd %s (protocol %d, backend ABI %d)\n", DSEC_VERSION,
				       DSEC_PROTO_VERSION, DSEC_BE_ABI); rc = 1; goto out;
		default:
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unknown or incomplete option '%s'",
					   argv[optind - 1]);
			usage(stderr);
			goto out;
		}
	}
	if (optind < argc) {
		rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if ((rc = load_file(conf, config ? config : DSECD_DEFAULT_CONFIG, config != NULL, err)) < 0)
		goto out;
	for (char **p = sets; p && *p; p++) {
		char *eq = strchr(*p, '=');
		*eq = '\0';
		if ((rc = dsecd_conf_set(conf, *p, eq + 1, err)) < 0)
			goto out;
	}
	if (flag_listen) {
		strv_clear(&conf->listen);
		conf->listen = flag_listen;
		flag_listen = NULL;
	}
	if (!conf->listen)
		strv_push(&conf->listen, DSEC_DEFAULT_URL);
	if (!conf->node) {
		char host[256] = "node";
		gethostname(host, sizeof(host) - 1);
		host[strcspn(host, ".")] = '\0';
		conf->node = xstrdup(dsecd_node_name_ok(host) ? host : "node");
	}
	if ((rc = check_conf(conf, err)) < 0)
		goto out;
	if (conf->max_inflight < 1 || conf->max_inflight > 65536 || conf->workers < 1 ||
	    conf->workers > 256) {
		rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				   "max_inflight must be 1..65536 and workers 1..256");
		goto out;
	}
	if (check) {
		dsecd_conf_dump(conf, 1);
		rc = 1;
	}
out:
	strv_clear(&flag_listen);
	strv_clear(&sets);
	return rc;
}

void dsecd_conf_dump(const struct dsecd_conf *conf, int fd)
{
	const char *base = (const char *)conf;
	static const char *const lv[] = { "error", "warn", "info", "debug" };

	dprintf(fd, "# effective dsecd configuration%s%s\n", conf->config_file ? " from " : "",
		conf->config_file ? conf->config_file : "");
	for (size_t i = 0; i < DSEC_ARRAY_LEN(keys); i++) {
		const struct key_desc *k = &keys[i];
		switch (k->type) {
		case K_STR: {
			const char *v = *(char *const *)(base + k->off);
			dprintf(fd, "%s%s = %s\n", v ? "" : "# ", k->name, v ? v : "");
			break;
		}
		case K_STRV:
			for (char *const *p = *(char **const *)(base + k->off); p && *p; p++)
				dprintf(fd, "%s = %s\n", k->name, *p);
			break;
		case K_SIZE:
		case K_UINT:
			dprintf(fd, "%s = %llu\n", k->name,
				(unsigned long long)*(const uint64_t *)(base + k->off));
			break;
		case K_SECONDS:
			dprintf(fd, "%s = %gs\n", k->name, *(const double *)(base + k->off));
			break;
		case K_BOOL:
			dprintf(fd, "%s = %s\n", k->name, *(const bool *)(base + k->off) ? "true" : "false");
			break;
		case K_LEVEL:
			dprintf(fd, "%s = %s\n", k->name, lv[*(const enum dsec_log_level *)(base + k->off)]);
			break;
		case K_MODE:
			dprintf(fd, "%s = %04o\n", k->name, *(const uint32_t *)(base + k->off));
			break;
		}
	}
	for (size_t i = 0; conf->be_keys && conf->be_keys[i]; i++)
		dprintf(fd, "%s = %s\n", conf->be_keys[i], conf->be_vals[i]);
}

const char *dsecd_conf_backend(const struct dsecd_conf *conf, const char *key)
{
	for (size_t i = 0; conf->be_keys && conf->be_keys[i]; i++)
		if (!strcmp(conf->be_keys[i], key))
			return conf->be_vals[i];
	return NULL;
}

void dsecd_conf_free(struct dsecd_conf *conf)
{
	free(conf->node);
	strv_clear(&conf->listen);
	strv_clear(&conf->image_peers);
	strv_clear(&conf->cluster_nodes);
	free(conf->socket_group);
	free(conf->state_dir);
	free(conf->backend_dir);
	free(conf->helper_dir);
	free(conf->backends);
	free(conf->default_backend);
	free(conf->log_file);
	free(conf->pid_file);
	strv_clear(&conf->be_keys);
	strv_clear(&conf->be_vals);
	free(conf->image_store);
	free(conf->trajectory_dir);
	free(conf->image_origin);
	free(conf->tls_cert);
	free(conf->tls_ca);
	free(conf->metrics_listen);
	free(conf->gossip_listen);
	free(conf->gossip_advertise);
	strv_clear(&conf->gossip_seeds);
	strv_clear(&conf->cluster_keys);
	free(conf->api_url);
	free(conf->placement);
	free(conf->pool);
	free(conf->config_file);
	memset(conf, 0, sizeof(*conf));
}
