/* config.h - dsecd's settings: embedded defaults, dsecd.conf(5), flags.
 *
 * Precedence: embedded defaults < config file < command-line flags.  Keys
 * are listed once, in the table in config.c; dsecd.conf(5) documents them.
 * Keys of the form "BACKEND.key" are kept as they are and handed to that
 * backend, which validates them.
 */
#ifndef DSECD_CONFIG_H
#define DSECD_CONFIG_H

#include "util.h"
#include "err.h"
#include "log.h"

#define DSECD_DEFAULT_CONFIG "/etc/dsec/dsecd.conf"
/* Room a reply needs besides the bytes it carries (output, file data). */
#define DSECD_REPLY_SLACK (64u << 10)

struct dsecd_conf {
	char *node;			/* node name, prefix of sandbox ids */
	char **listen;			/* nng URLs, NULL-terminated */
	bool listen_remote;		/* serve unverified network peers off loopback */
	char *tls_cert;			/* PEM: this node's certificate and key, or NULL */
	char *tls_ca;			/* PEM: the cluster's CA(s), or NULL */
	char **cluster_nodes;		/* other nodes, "NAME=URL", NULL-terminated, or NULL */
	char *metrics_listen;		/* http://HOST:PORT/PATH of the metrics, or NULL */
	char *gossip_listen;		/* "host:port" of SWIM gossip, or NULL (none) */
	char *gossip_advertise;		/* "host:port" others gossip to, NULL = the bound one */
	char **gossip_seeds;		/* "host:port" to join through, or NULL */
	double gossip_probe_interval;	/* s between SWIM probes (failure detection scales) */
	double gossip_reconnect_interval; /* s between tries of a forgotten dead member */
	char **cluster_keys;		/* cluster_key_file: key files, the first signs */
	char *api_url;			/* the API address gossiped, NULL = from listen */
	char *placement;		/* policy: power_k, random, least_loaded, local */
	uint64_t placement_k;		/* nodes power_k samples */
	uint32_t socket_mode;		/* permissions of ipc:// sockets */
	char *socket_group;		/* group of ipc:// sockets, NULL = ours */
	char *state_dir;		/* where state lives */
	char *backend_dir;		/* where backends/NAME.so are */
	char *helper_dir;		/* where helper programs are */
	char *backends;			/* comma-separated backends to load */
	char *default_backend;		/* backend when a request names none */
	enum dsec_log_level log_level;	/* log verbosity */
	char *log_file;			/* log file, NULL = stderr */
	char *pid_file;			/* pid file, NULL = STATE_DIR/dsecd.pid */
	bool foreground;		/* do not daemonize */
	uint64_t max_frame;		/* largest request frame accepted */
	uint64_t max_sandboxes;		/* sandboxes alive at once */
	uint64_t max_inflight;		/* requests served at once */
	uint64_t workers;		/* worker pool threads */
	double ttl;			/* default wall TTL (0 = none) */
	double idle_ttl;		/* default idle TTL (0 = none) */
	double max_ttl;			/* the largest TTL a request may ask */
	double exec_timeout;		/* default per-command timeout */
	double max_exec_timeout;	/* the largest timeout a request may ask */
	uint64_t output_cap;		/* default bytes kept of stdout/stderr */
	double stage_grace;		/* a staged write or download no request touched this
					 * long is removed */
	double stream_grace;		/* an ended exec_start command's output is kept unread this long */
	uint64_t stream_log_max;	/* bytes of output all logged streams keep for their ends */
	double lost_grace;		/* a lost sandbox stays (failed, sandbox_lost) this long */
	double shutdown_grace;		/* seconds SIGTERM waits for requests */
	char *image_store;		/* fs3 store, NULL = STATE_DIR/fs3 */
	char *trajectory_dir;		/* trajectory logs, NULL = STATE_DIR/trajectory */
	double trajectory_keep;		/* a gone sandbox's log is removed this long after its
					 * last entry, 0 = never */
	char *image_origin;		/* fs3 origin, NULL = IMAGE_STORE/origin */
	uint64_t image_cache_max;	/* bytes of chunk cache */
	bool image_on_demand;		/* mount layers before they are local (FUSE) */
	uint64_t image_readahead;	/* chunks read ahead on demand, 0 = none */
	char **image_peers;		/* dsecds to fetch fs3 objects from, NULL-terminated */
	double image_fetch_timeout;	/* seconds one fetch from a peer may take */
	double image_linger;		/* seconds an idle local layer stays mounted */
	char *pool;			/* warm pools: "BACKEND[@IMAGE]=N, ..." or NULL */
	char **be_keys;			/* "BACKEND.key" names, NULL-terminated */
	char **be_vals;			/* their values, parallel to be_keys */
	char *config_file;		/* file read, or NULL */
};

/* Fills conf from defaults, the config file (--config, or the default
 * path if it exists) and argv.  Returns 0; 1 if the process should exit 0
 * (--help, --version, --check-config printed); -errno with *err. */
int dsecd_conf_load(struct dsecd_conf *conf, int argc, char **argv, struct dsec_err *err);
/* Set one key from its string form ("max_frame", "16M"). */
int dsecd_conf_set(struct dsecd_conf *conf, const char *key, const char *value,
		   struct dsec_err *err);
/* Prints the effective configuration in dsecd.conf syntax. */
void dsecd_conf_dump(const struct dsecd_conf *conf, int fd);
/* Value of a backend key ("fncall.pool_size") or NULL. */
const char *dsecd_conf_backend(const struct dsecd_conf *conf, const char *key);
void dsecd_conf_free(struct dsecd_conf *conf);

/* A node name as sandbox ids carry it: 1-63 of [A-Za-z0-9._-]. */
bool dsecd_node_name_ok(const char *s);

#endif
