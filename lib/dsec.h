/* dsec.h - libdsec, the C client of dsec.
 *
 * Talks to any dsecd over nng REQ/REP with msgpack frames (dsec-protocol(7)).
 * One struct dsec_client is one connection.  The typed calls below are
 * synchronous and a client must not be used from two threads at once (open
 * one per thread); dsec_call_async sends raw frames without waiting and
 * posts their replies to a completion queue whose descriptor an event loop
 * watches.  Every call that can fail returns 0 or -errno and fills *err
 * with a stable code (dsec_code_name) and a message; errors the daemon
 * sent come back with the daemon's code and message (made valid UTF-8).  A
 * reply that breaks the protocol (an error whose code is missing, "ok" or
 * unknown; a result without a field it always has, or with a field of the
 * wrong type; a reply that would decode to far more memory than its size)
 * is "internal".  Values the daemon would refuse (a negative ttl or
 * timeout) are "invalid" before anything is sent: only 0 means the
 * default.
 */
#ifndef DSEC_H
#define DSEC_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "err.h"

#define DSEC_VERSION "0.1.0"
#define DSEC_PROTO_VERSION 1
/* Where a client connects when given no address and $DSEC_HOST is unset. */
#define DSEC_DEFAULT_URL "ipc:///run/dsec/dsecd.sock"

struct dsec_client;

/* ---- the client's own types (the backend ABI has its own: backend.h) ---- */

/* Resource limits of a sandbox; 0 means the backend's configured default. */
struct dsec_limits {
	double cpus;			/* CPU quota in cores (0.5 = half a core) */
	uint64_t memory;		/* bytes of memory, hard limit */
	uint32_t pids;			/* max processes/threads */
	uint32_t nofile;		/* max open files per process */
	uint64_t disk;			/* bytes of writable scratch */
};

/* One command, as dsec_exec, dsec_call and dsec_exec_start run it.
 * Strings and buffers are the caller's, read during the call only. */
struct dsec_cmd {
	const char *const *argv;	/* argv, NULL-terminated; or NULL when code is set */
	const char *code;		/* runtime snippet (sh: "sh -c code"; python3: source) */
	const char *const *env;		/* extra "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* working directory, NULL = the sandbox's */
	const void *stdin_data;		/* bytes fed to stdin, then EOF */
	size_t stdin_len;		/* length of stdin_data */
	double timeout;			/* seconds, 0 = the daemon's default; the whole
					 * process tree dies at expiry */
	size_t output_cap;		/* bytes kept of stdout and of stderr, each; 0 =
					 * the daemon's default */
};

/* What a command gave back; free its buffers with dsec_cmd_res_free. */
struct dsec_cmd_res {
	int exit_code;			/* exit status, or -1 if killed by a signal */
	int signal;			/* signal that killed it, 0 if it exited */
	bool timed_out;			/* killed because timeout expired */
	bool out_truncated;		/* stdout was longer than output_cap */
	bool err_truncated;		/* stderr was longer than output_cap */
	struct dsec_buf out;		/* stdout */
	struct dsec_buf err;		/* stderr */
	double duration;		/* seconds from start to exit */
	bool oom_killed;		/* the OOM killer killed a process of it */
	bool pids_limited;		/* a fork of it failed at the pids limit (in
					 * oom_killed's padding: the size is as it was) */
	uint32_t seccomp_denied;	/* system calls the seccomp filter refused while
					 * it ran (in the same padding; 0 where not
					 * counted) */
};

/* Kinds of file, as dsec_file_stat and dsec_file_list report them. */
enum dsec_file_kind {
	DSEC_KIND_FILE,			/* "file" */
	DSEC_KIND_DIR,			/* "dir" */
	DSEC_KIND_SYMLINK,		/* "symlink" */
	DSEC_KIND_FIFO,			/* "fifo" */
	DSEC_KIND_SOCKET,		/* "socket" */
	DSEC_KIND_CHAR,			/* "char" (character device) */
	DSEC_KIND_BLOCK,		/* "block" (block device) */
};

/* An owner (uid, gid) meaning "the uid/gid commands run as". */
#ifndef DSEC_OWNER_DEFAULT
#define DSEC_OWNER_DEFAULT (-1)
#endif

/* A file as dsec_file_stat describes it and dsec_file_list each entry;
 * the strings are owned here (dsec_file_desc_free). */
struct dsec_file_desc {
	char *name;			/* list: entry name; stat: last component */
	char *target;			/* symlink target, NULL for other kinds */
	enum dsec_file_kind type;	/* kind of file */
	uint32_t mode;			/* permission bits (07777) */
	uint64_t size;			/* bytes */
	uint32_t uid, gid;		/* owner */
	double mtime;			/* modification time, unix seconds */
};

/* How dsec_session_open opens a shell session; zero = defaults. */
struct dsec_session_opts {
	const char *name;		/* session name, NULL = the daemon picks one */
	const char *shell;		/* shell program inside, NULL = "/bin/sh" */
	const char *const *env;		/* extra "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* starting directory, NULL = the sandbox's */
};

/* What one session command gave back (dsec_session_cmd_res_free). */
struct dsec_session_cmd_res {
	struct dsec_cmd_res exec;	/* exit code, output, truncation, timed_out, duration */
	char *cwd;			/* the shell's directory afterwards */
	bool reset;			/* the shell was stuck after a timeout and was restarted */
	bool ended;			/* the shell exited: the session is closed */
};

/* One open session, as dsec_sandbox_info reports it. */
struct dsec_session_desc {
	char *name;			/* session name */
	char *shell;			/* shell program */
	char *cwd;			/* last known working directory */
	bool running;			/* a command is running */
	uint64_t commands;		/* commands run */
};

/* A backend's occupancy and capacity, as dsec_info reports them. */
struct dsec_backend_stats {
	uint32_t sandboxes;		/* sandboxes alive */
	uint32_t capacity;		/* how many more it can take now */
	uint32_t running;		/* commands in flight */
	uint32_t pool_ready;		/* warm units ready to hand out */
	uint32_t pool_target;		/* warm units it tries to keep ready */
	uint64_t calls;			/* commands completed since start */
};

/* Connect to url (nng form: ipc:///path, tcp://host:port).  NULL means
 * $DSEC_HOST, then DSEC_DEFAULT_URL.  Fails at once with "unavailable"
 * when nobody listens there (see dsec_connect_opts to wait); once
 * connected, a broken connection is remade in the background and a
 * request made meanwhile waits for it up to the client's timeout.  It
 * blocks while it dials (a TCP host that does not answer at all: 10 s,
 * then "unavailable"); an event loop connects with lazy. */
DSEC_API
int dsec_connect(struct dsec_client **out, const char *url, struct dsec_err *err);
/* How dsec_connect_opts connects; zero = as dsec_connect. */
struct dsec_connect_opts {
	double wait;			/* seconds to keep dialing a daemon that does
					 * not listen yet (starting, restarting) */
	bool lazy;			/* do not dial now: connect in the background,
					 * failing only for an address nng cannot use;
					 * requests wait for the daemon up to the
					 * client's timeout (peers that come and go) */
};
DSEC_API
int dsec_connect_opts(struct dsec_client **out, const char *url,
		      const struct dsec_connect_opts *o, struct dsec_err *err);
/* TLS for a tls+tcp:// address, a node's API off loopback (see tls_cert
 * in dsecd.conf(5)): PEM files. */
struct dsec_tls {
	const char *ca;			/* the CA(s) the daemon's certificate must be
					 * signed by (needed) */
	const char *cert;		/* our certificate and its key, one file (a
					 * daemon requires one of its cluster's CA) */
	const char *server_name;	/* the name the daemon's certificate must carry,
					 * NULL = the url's host */
};
/* dsec_connect_opts with TLS for a tls+tcp:// url; each field of tls that
 * is NULL (or tls itself) comes from the environment: DSEC_TLS_CA,
 * DSEC_TLS_CERT, DSEC_TLS_SERVER_NAME, as for dsec_connect and
 * dsec_connect_opts.  A certificate either side refuses is "permission". */
DSEC_API
int dsec_connect_tls(struct dsec_client **out, const char *url, const struct dsec_connect_opts *o,
		     const struct dsec_tls *tls, struct dsec_err *err);
/* Closes the client: asynchronous calls still in flight end with
 * "unavailable" on their queues before it returns. */
DSEC_API
void dsec_close(struct dsec_client *c);
/* Extra seconds a request may wait beyond its own timeout (default 30). */
DSEC_API
void dsec_set_timeout(struct dsec_client *c, double seconds);
/* The URL actually used. */
DSEC_API
const char *dsec_client_url(const struct dsec_client *c);

/* What create is asked for; zero means default everywhere. */
struct dsec_create_opts {
	const char *backend;		/* "fncall", "container", ...; NULL = daemon default */
	const char *image;		/* image name or NULL */
	const char *runtime;		/* fncall runtime: "sh", "python3"; NULL = default */
	double ttl;			/* seconds of life at most; 0 = daemon default */
	double idle_ttl;		/* seconds without requests before destroy; 0 = default */
	const char *const *env;		/* "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* working directory inside, or NULL */
	struct dsec_limits limits;	/* resource limits, 0 = default */
	const char *network;		/* "none" or "allowlist"; NULL = backend default */
	const char *const *allow;	/* allowlist entries (dsec-protocol(7)), or NULL */
	const char *dns;		/* with "allowlist": the resolver, or NULL */
	const char *const *seccomp_deny; /* system calls to deny as well, or NULL */
	uint32_t cpu_weight;		/* limits.cpu_weight, 1-10000; 0 = default */
	/* Images (refs) whose layers go over image's, bottom first,
	 * NULL-terminated, or NULL; the config stays image's. */
	const char *const *layers;
};

/* Creates a sandbox; *id (caller frees) names it and its owner node. */
DSEC_API
int dsec_create(struct dsec_client *c, const struct dsec_create_opts *o, char **id,
		struct dsec_err *err);

/* What a create adds for a rollout (rlcoord, dsec-protocol(7)).  Set
 * struct_size to sizeof(struct dsec_rl_opts): fields are only appended,
 * and the library reads none past the size a program was built with. */
struct dsec_rl_opts {
	size_t struct_size;
	const char *token;		/* client token: sent again, the same sandbox; or NULL */
	const char *lease;		/* the lease it belongs to (dsec_lease_open), or NULL */
	int trajectory;			/* keep its trajectory log: 1 yes, 0 no, -1 the default
					 * (yes in a lease, else no) */
	const char *const *grade_layers;	/* images only dsec_grade stacks over it
						 * (NULL-terminated), or NULL */
	const char *const *watch;	/* files hashed at create (dsec_watched), or NULL */
};
/* dsec_create with rl (NULL: none of it). */
DSEC_API
int dsec_create_rl(struct dsec_client *c, const struct dsec_create_opts *o,
		   const struct dsec_rl_opts *rl, char **id, struct dsec_err *err);
/* dsec_exec as step `step` of a sandbox with a trajectory: a step its log
 * has is answered from it without running (*replayed true, when replayed
 * is not NULL); the same step with another request fails "diverged". */
DSEC_API
int dsec_exec_step(struct dsec_client *c, const char *id, uint64_t step,
		   const struct dsec_cmd *req, struct dsec_cmd_res *res, bool *replayed,
		   struct dsec_err *err);
/* A trainer's lease: sandboxes created in it (dsec_rl_opts.lease) are
 * paused when it is not renewed for timeout seconds and destroyed grace
 * seconds after (0: the daemon's defaults, 30 s and 600 s); labels are
 * "K=V" strings or NULL.  *id: the caller frees. */
DSEC_API
int dsec_lease_open(struct dsec_client *c, double timeout, double grace,
		    const char *const *labels, char **id, struct dsec_err *err);
DSEC_API
int dsec_lease_renew(struct dsec_client *c, const char *id, struct dsec_err *err);
/* Ends the lease; its sandboxes are destroyed, or with destroy false kept
 * outside any lease. */
DSEC_API
int dsec_lease_close(struct dsec_client *c, const char *id, bool destroy, struct dsec_err *err);
/* Pause or resume every sandbox of the lease (resume renews it too);
 * *done and *failed (either may be NULL): how many did and did not. */
DSEC_API
int dsec_lease_pause(struct dsec_client *c, const char *id, uint64_t *done, uint64_t *failed,
		     struct dsec_err *err);
DSEC_API
int dsec_lease_resume(struct dsec_client *c, const char *id, uint64_t *done, uint64_t *failed,
		      struct dsec_err *err);
/* Runs a grader's command out of the agent's reach: in a fresh sandbox of
 * sandbox id's changes with its create's grade_layers on top (lib/client-rl.c;
 * dsec-protocol(7) grade).  res: the grader's result; marks (NULL: not
 * wanted): the agent's misbehaviour counters before grading. */
struct dsec_marks {
	size_t struct_size;		/* sizeof(struct dsec_marks): fields are only appended */
	uint64_t oom_kills;		/* commands the OOM killer stopped (memory bombs) */
	uint64_t pids_limited;		/* commands whose forks failed at the pids limit */
	uint64_t output_floods;		/* commands whose output passed its cap */
	uint64_t timeouts;		/* commands killed at their timeout */
	uint64_t egress_denied;		/* packets its allowlist refused (has_egress) */
	bool has_egress;		/* egress_denied is measured (network "allowlist") */
	bool has_seccomp;		/* seccomp_denied is measured (its backend counts) */
	uint16_t protected_probes;	/* opens of the stand-ins of its grade_layers' paths
					 * and lookups below them, at most UINT16_MAX (the
					 * reply's count is exact); 0 where not counted
					 * (declared here: the two bytes before
					 * seccomp_denied, which stays where it was) */
	uint32_t seccomp_denied;	/* system calls its seccomp filter refused
					 * (has_seccomp; at most UINT32_MAX); these three
					 * in has_egress's padding: the size is as it
					 * was (dsec_sandbox_info embeds the struct) */
};
DSEC_API
int dsec_grade(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
	       struct dsec_cmd_res *res, struct dsec_marks *marks, struct dsec_err *err);
/* The misbehaviour counters of sandbox id (its usage's). */
DSEC_API
int dsec_marks(struct dsec_client *c, const char *id, struct dsec_marks *out,
	       struct dsec_err *err);
/* Makes sandbox id again, same id: from its create, or from image (a
 * checkpoint its snapshot made) when image is not NULL. */
DSEC_API
int dsec_reset(struct dsec_client *c, const char *id, const char *image, struct dsec_err *err);
/* n (1-256) sandboxes of sandbox id as it is now, all or none: *ids, a
 * NULL-terminated array the caller frees with dsec_ids_free. */
DSEC_API
int dsec_fork(struct dsec_client *c, const char *id, unsigned n, char ***ids,
	      struct dsec_err *err);
/* Flags of dsec_fork_flags. */
#define DSEC_FORK_PROCESSES 1u		/* carry the shell sessions' processes too */
/* dsec_fork with flags (DSEC_FORK_*; unknown bits: invalid). */
DSEC_API
int dsec_fork_flags(struct dsec_client *c, const char *id, unsigned n, unsigned flags,
		    char ***ids, struct dsec_err *err);
DSEC_API
void dsec_ids_free(char **ids);
/* The files a create's watch named: their hashes then and now. */
struct dsec_watched {
	char *path;
	char *before;			/* "sha256:HEX", "symlink:TARGET", "error:CODE",
					 * NULL: absent */
	char *after;			/* the same, now */
	bool changed;
};
DSEC_API
int dsec_watched(struct dsec_client *c, const char *id, struct dsec_watched **out, size_t *n,
		 struct dsec_err *err);
DSEC_API
void dsec_watched_free(struct dsec_watched *arr, size_t n);
/* A dead node's sandbox made again from the copy of its log the node this
 * client talks to keeps: *new_id (caller frees); rep (NULL: not wanted)
 * counts what was read, sent again, skipped and differs (the lists are in
 * the raw reply: dsec-protocol(7) recover). */
struct dsec_recovery {
	uint64_t entries, replayed, skipped, differs;
};
DSEC_API
int dsec_recover(struct dsec_client *c, const char *id, char **new_id,
		 struct dsec_recovery *rep, struct dsec_err *err);
/* Runs a command in sandbox id; res is filled (free its buffers with
 * dsec_cmd_res_free).  A non-zero exit is not an error. */
DSEC_API
int dsec_exec(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
	      struct dsec_cmd_res *res, struct dsec_err *err);
/* One-shot: a fresh sandbox of backend/runtime runs req and is gone after. */
DSEC_API
int dsec_call(struct dsec_client *c, const struct dsec_create_opts *o,
	      const struct dsec_cmd *req, struct dsec_cmd_res *res,
	      struct dsec_err *err);
/* Makes or replaces file path with len bytes of data (mode 0 = 0644).  Data
 * longer than one request carries goes in parts (the daemon's max_frame,
 * at most 8 MiB each): the first replaces the file, the others are
 * appended, so readers may see it part written, and a failure part way
 * leaves what went in (its message says how much). */
DSEC_API
int dsec_file_write(struct dsec_client *c, const char *id, const char *path,
		    const void *data, size_t len, uint32_t mode, struct dsec_err *err);
/* Adds len bytes of data at the end of regular file path (made when
 * missing), in parts as dsec_file_write. */
DSEC_API
int dsec_file_append(struct dsec_client *c, const char *id, const char *path,
		     const void *data, size_t len, struct dsec_err *err);
/* Reads len bytes at offset (len 0 = to the end of the file), appended to
 * out, in as many requests as it takes; fewer at the end of the file.  A
 * file that grows meanwhile is read up to an end one part reached. */
DSEC_API
int dsec_file_read(struct dsec_client *c, const char *id, const char *path,
		   uint64_t offset, uint64_t len, struct dsec_buf *out, struct dsec_err *err);
/* One request of a read: up to len bytes at offset (len 0 = as many as
 * a reply carries), appended to out; *eof when they end where the file
 * did.  A len over what a reply carries fails with "too_large". */
DSEC_API
int dsec_file_read_part(struct dsec_client *c, const char *id, const char *path,
			uint64_t offset, uint64_t len, struct dsec_buf *out, bool *eof,
			struct dsec_err *err);
DSEC_API
int dsec_destroy(struct dsec_client *c, const char *id, struct dsec_err *err);
/* Replace what an "allowlist" sandbox may reach (NULL or {NULL} = nothing). */
DSEC_API
int dsec_net_allow(struct dsec_client *c, const char *id, const char *const *allow,
		   struct dsec_err *err);
DSEC_API
void dsec_cmd_res_free(struct dsec_cmd_res *res);
/* Freezes sandbox id: nothing in it runs until dsec_resume, or until the
 * next dsec_exec, dsec_file_read or dsec_file_write, which resume it
 * first.  Pausing a paused sandbox succeeds; a backend that cannot pause
 * fails with "unsupported". */
DSEC_API
int dsec_pause(struct dsec_client *c, const char *id, struct dsec_err *err);
/* More time for sandbox id: it lives ttl seconds from now (its lifetime
 * within the node's max_ttl), and idle_ttl is its new idle TTL; 0 leaves
 * either as it is (one must be more than 0).  *left (NULL: not wanted):
 * the seconds it has now. */
DSEC_API
int dsec_set_ttl(struct dsec_client *c, const char *id, double ttl, double idle_ttl,
		 double *left, struct dsec_err *err);
/* Thaws a paused sandbox; resuming a running one succeeds. */
DSEC_API
int dsec_resume(struct dsec_client *c, const char *id, struct dsec_err *err);

/* What a sandbox uses now (dsec_usage): have says which fields its
 * backend measured (DSEC_HAVE_*); the others are 0. */
#define DSEC_HAVE_CPU 0x1u		/* cpu_ns */
#define DSEC_HAVE_MEMORY 0x2u		/* memory */
#define DSEC_HAVE_MEMORY_PEAK 0x4u	/* memory_peak */
#define DSEC_HAVE_PIDS 0x8u		/* pids */
#define DSEC_HAVE_DISK 0x10u		/* disk */
struct dsec_usage {
	unsigned have;			/* DSEC_HAVE_* of the fields measured */
	uint64_t cpu_ns;		/* CPU time of its processes since create, ns */
	uint64_t memory;		/* bytes of memory charged to it now */
	uint64_t memory_peak;		/* the most memory charged to it since create */
	uint64_t pids;			/* processes and threads now */
	uint64_t disk;			/* bytes in use of its writable layer or scratch */
};
/* Measures sandbox id as it is (a paused one is not resumed); a backend
 * that cannot fails with "unsupported". */
DSEC_API
int dsec_usage(struct dsec_client *c, const char *id, struct dsec_usage *out,
	       struct dsec_err *err);

/* The rest of the file API (dsec-protocol(7)).  Paths resolve inside the
 * sandbox; an escape fails with "permission". */
/* file_write with an owner: uid, gid DSEC_OWNER_DEFAULT = the uid/gid
 * commands run as; mode 0 = 0644. */
DSEC_API
int dsec_file_write_as(struct dsec_client *c, const char *id, const char *path,
		       const void *data, size_t len, uint32_t mode, int64_t uid, int64_t gid,
		       struct dsec_err *err);
/* Describes path without following a final symlink; free *out with
 * dsec_file_desc_free. */
DSEC_API
int dsec_file_stat(struct dsec_client *c, const char *id, const char *path,
		   struct dsec_file_desc *out, struct dsec_err *err);
/* Lists directory path: *out is an array of *n entries sorted by name
 * (free with dsec_file_list_free); *truncated when there were more than
 * limit (0 = the daemon's default) or than a reply can carry. */
DSEC_API
int dsec_file_list(struct dsec_client *c, const char *id, const char *path, size_t limit,
		   struct dsec_file_desc **out, size_t *n, bool *truncated, struct dsec_err *err);
/* Makes directory path (mode 0 = 0755); parents: make missing parents and
 * accept an existing directory.  uid, gid as for dsec_file_write_as. */
DSEC_API
int dsec_file_mkdir(struct dsec_client *c, const char *id, const char *path, uint32_t mode,
		    bool parents, int64_t uid, int64_t gid, struct dsec_err *err);
/* Removes a file, a symlink (never its target) or an empty directory;
 * recursive: a directory and everything below it, never leaving it
 * through a symlink or a mount.  *removed (may be NULL) counts entries. */
DSEC_API
int dsec_file_remove(struct dsec_client *c, const char *id, const char *path, bool recursive,
		     uint64_t *removed, struct dsec_err *err);
/* Unpacks a tar archive (format "tar" or "tar.zst"; NULL = "tar") into
 * directory path, made if missing.  uid, gid: owner of everything made.
 * An archive longer than one request carries is written in parts to a
 * file in path first (made with uid and gid), then unpacked from there,
 * and that file removed. */
DSEC_API
int dsec_file_upload(struct dsec_client *c, const char *id, const char *path,
		     const void *data, size_t len, const char *format, int64_t uid, int64_t gid,
		     struct dsec_err *err);
/* Packs path (a directory as its contents, a file by its name) as a tar
 * archive appended to *out.  One longer than a reply carries is packed
 * into a file in the sandbox (in path, beside a file, else in /tmp), read
 * in parts, then removed. */
DSEC_API
int dsec_file_download(struct dsec_client *c, const char *id, const char *path,
		       const char *format, struct dsec_buf *out, struct dsec_err *err);
/* dsec_file_upload of the archive read from fd to its end (a file, a
 * pipe), and dsec_file_download written to fd: no more than a part of
 * them is in memory at once.  fd stays open. */
DSEC_API
int dsec_file_upload_fd(struct dsec_client *c, const char *id, const char *path, int fd,
			const char *format, int64_t uid, int64_t gid, struct dsec_err *err);
DSEC_API
int dsec_file_download_fd(struct dsec_client *c, const char *id, const char *path,
			  const char *format, int fd, struct dsec_err *err);
DSEC_API
void dsec_file_desc_free(struct dsec_file_desc *info);
DSEC_API
void dsec_file_list_free(struct dsec_file_desc *arr, size_t n);
/* Saves sandbox id's files as a new image tagged tag ("name[:tag]"): its
 * image's layers plus one layer of what the sandbox changed.  *image
 * (caller frees) gets the new image's "sha256:" digest; create sandboxes
 * from tag or digest on any node sharing the store's origin.  The sandbox
 * is frozen while its files are copied and runs on afterwards. */
DSEC_API
int dsec_snapshot(struct dsec_client *c, const char *id, const char *tag, char **image,
		  struct dsec_err *err);

/* A sandbox's trajectory log as info reports it (present false: it keeps
 * none). */
struct dsec_sandbox_traj {
	bool present;			/* the sandbox keeps a trajectory log */
	bool writable;			/* its log takes entries (not after a write error) */
	uint64_t entries;		/* entries in it */
	uint64_t steps;			/* numbered steps */
	uint64_t last_step;		/* the latest step's number (steps > 0) */
	uint64_t bytes;			/* its size */
};

/* One sandbox as info and list report it. */
struct dsec_sandbox_info {
	char *id;			/* sandbox id */
	char *backend;			/* backend name */
	char *runtime;			/* runtime or "" */
	char *image;			/* image or "" */
	char *state;			/* "creating", "running", "paused" */
	double created;			/* unix time of creation */
	double ttl;			/* wall TTL in seconds, 0 = none */
	double idle_ttl;		/* idle TTL in seconds, 0 = none */
	double idle;			/* seconds since the last request */
	uint64_t execs;			/* commands run */
	uint32_t running;		/* commands running now */
	size_t nsessions;		/* entries in sessions (dsec_sandbox_info only) */
	struct dsec_session_desc *sessions;	/* open shell sessions; the strings are
						 * owned here (dsec_sandbox_info_free) */
	char **labels;			/* "KEY=VALUE", NULL-terminated (never NULL) */
	uint32_t streams;		/* streamed commands open */
	struct dsec_marks marks;	/* misbehaviour counters so far */
	struct dsec_sandbox_traj trajectory;	/* its trajectory log */
};

struct dsec_backend_info {
	char *name;			/* backend name */
	char *description;		/* one line */
	struct dsec_backend_stats stats;	/* occupancy and capacity */
	uint32_t paused;		/* its sandboxes that are paused */
};

/* Creates the node served: counts since start, latency of the latest. */
struct dsec_create_stats {
	uint64_t ok, failed;		/* creates that succeeded, failed */
	double p50_ms, p99_ms;		/* of the latest (up to 1024); 0 before any */
};

/* The limits a node full of sandboxes meets, and the room they leave:
 * what a create would fail on before it does.  0 = unlimited or unknown. */
struct dsec_node_limits {
	uint64_t nofile, nofile_hard;	/* dsecd's RLIMIT_NOFILE, soft and hard */
	uint64_t nproc;			/* its RLIMIT_NPROC */
	uint64_t descriptors;		/* descriptors it has open */
	uint64_t pid_max, threads_max;	/* the kernel's (kernel.pid_max, threads-max) */
	uint64_t tasks;			/* tasks alive on the machine */
	uint64_t memory_cgroups;	/* memory cgroups alive, and the kernel's bound */
	uint64_t memory_cgroups_max;
	uint64_t room;			/* sandboxes more that the limits allow */
	char *room_by;			/* the limit that bounds room ("descriptors", ...) */
};

/* A warm pool (warm_pool in dsecd.conf(5)). */
struct dsec_pool_info {
	char *backend;			/* its backend */
	char *image;			/* its image, "" = the backend's default */
	uint32_t target;		/* sandboxes it keeps ready */
	uint32_t ready;			/* ready now */
	uint32_t creating;		/* being made */
	uint64_t taken;			/* handed to creates since start */
};

/* Where the node's fs3 store got objects from, or served them to. */
struct dsec_image_source {
	char *name;			/* "local", "peer", "origin", ... */
	uint64_t objects, bytes;	/* fetched from it */
};

struct dsec_image_stats {
	bool present;			/* the node has an fs3 store */
	uint64_t fetched_objects, fetched_bytes;	/* fetched, from every source */
	uint64_t served_objects, served_bytes;		/* served to peers */
	size_t nsources;		/* entries in sources */
	struct dsec_image_source *sources;
};

/* Another node as this one sees it (cluster_nodes or gossip). */
struct dsec_member_info {
	char *name;			/* node name */
	char *url;			/* its API address */
	char *state;			/* "alive", "suspect", "dead", "left", ... */
	uint64_t forwarded, failed;	/* requests sent there, and those that failed */
	uint64_t placed, refused;	/* creates placed there, and those it refused */
	bool has_capacity;		/* it gossips its capacity (the fields below) */
	bool draining;			/* it takes no new sandboxes */
	double age_s;			/* seconds since its capacity was heard */
	uint64_t version;		/* that capacity's version */
	uint32_t sandboxes, max;	/* its sandboxes, and its max_sandboxes */
	uint32_t creating;		/* creates it is serving */
	uint32_t in_flight;		/* creates this node placed there, not answered */
	uint32_t load_permille;		/* its 1-minute load per CPU, per mille (<= 1000) */
	uint64_t mem_free;		/* its available memory, bytes */
	size_t nimages;			/* entries in images */
	char **images;			/* images it has whole (NULL-terminated) */
};

struct dsec_cluster_info {
	char *membership;		/* "gossip (SWIM)", "static (cluster_nodes)", "none" */
	size_t nmembers;		/* entries in members */
	struct dsec_member_info *members;
	char *placement;		/* "local" or the policy (placement in dsecd.conf) */
	uint32_t placement_k;		/* choices per create, 0 = local */
	uint64_t placed_here, placed_away;	/* creates placed here, on another node */
	uint64_t placed_again;		/* creates sent on after a refusal */
	uint64_t placed_none;		/* creates no node had room for */
	bool has_gossip;		/* the gossip fields below are set */
	char *gossip_address;		/* its gossip address (host:port) */
	char *gossip_api;		/* the API address it gossips */
	uint64_t gossip_members;	/* members the gossip knows */
	uint64_t gossip_awareness;	/* its health score: 0 is best */
	uint64_t packets_sent, bytes_sent, packets_received;
	uint64_t dropped_unauthenticated, dropped_malformed;
	uint64_t suspicions, deaths;	/* members suspected, declared dead */
};

/* The node's trajectory logs and leases (rlcoord). */
struct dsec_node_traj {
	bool present;			/* the node keeps trajectory logs */
	char *dir;			/* where */
	char *durability;		/* "local_disk" or "local_disk+peers" */
	uint32_t replicas;		/* peers each entry goes to */
	uint64_t replicated, under_replicated;	/* entries on their peers, and not yet */
	uint64_t replica_entries;	/* entries it keeps for other nodes */
	uint64_t checkpoints;		/* journal checkpoints */
	uint64_t entries, bytes;	/* entries written, and their bytes */
	uint64_t batches, syncs;	/* group commits, and fdatasyncs */
	double batch_ms, sync_ms;	/* their mean times */
	uint64_t replayed, joined;	/* steps answered from a log, joined in flight */
	uint64_t diverged, failed;	/* steps refused as diverged, entries not written */
	double keep;			/* seconds a log is kept after its sandbox */
	uint64_t removed;		/* logs removed since */
	uint64_t leases_open, leases_lapsed, leases_expired;
};

struct dsec_node_info {
	char *version;			/* dsecd version */
	char *node;			/* node name, the prefix of its sandbox ids */
	uint32_t proto;			/* protocol version spoken */
	int32_t pid;			/* dsecd's pid */
	double uptime;			/* seconds since start */
	uint32_t sandboxes;		/* sandboxes alive */
	uint32_t inflight;		/* requests being served */
	size_t nbackends;		/* entries in backends */
	struct dsec_backend_info *backends;	/* loaded backends */
	uint32_t paused;		/* sandboxes paused */
	uint32_t max_sandboxes;		/* its max_sandboxes */
	bool draining;			/* it takes no new sandboxes (dsec_drain) */
	struct dsec_create_stats creates;
	double load[3];			/* the machine's load averages: 1, 5, 15 minutes */
	uint64_t mem_total, mem_available;	/* the machine's memory, bytes */
	struct dsec_node_limits limits;
	char **listen;			/* its API addresses (NULL-terminated) */
	size_t npools;			/* entries in pools */
	struct dsec_pool_info *pools;	/* its warm pools */
	struct dsec_image_stats images;	/* its fs3 store */
	struct dsec_cluster_info cluster;	/* the others, as it sees them */
	struct dsec_node_traj trajectory;	/* its trajectory logs and leases */
};

DSEC_API
int dsec_info(struct dsec_client *c, struct dsec_node_info *out, struct dsec_err *err);
/* The cheapest request: 0 if the daemon answers (a health check, and the
 * floor under every other request's latency). */
DSEC_API
int dsec_ping(struct dsec_client *c, struct dsec_err *err);
/* Stops (drain true) or starts again the node's taking of new sandboxes:
 * while it drains, creates and calls there fail with "capacity" and its
 * sandboxes go on (an operator's way to empty a node). */
DSEC_API
int dsec_drain(struct dsec_client *c, bool drain, struct dsec_err *err);
DSEC_API
int dsec_sandbox_info(struct dsec_client *c, const char *id, struct dsec_sandbox_info *out,
		      struct dsec_err *err);
/* *out is an array of *n entries; free with dsec_sandbox_list_free. */
DSEC_API
int dsec_list(struct dsec_client *c, struct dsec_sandbox_info **out, size_t *n,
	      struct dsec_err *err);
/* What dsec_list_page asks for.  Set struct_size to sizeof(struct
 * dsec_list_opts): fields are only appended. */
struct dsec_list_opts {
	size_t struct_size;
	const char *const *labels;	/* "KEY=VALUE" a sandbox must all have
					 * (NULL-terminated), or NULL */
	uint32_t limit;			/* at most this many, 0 = all */
	const char *after;		/* those whose id sorts after this one
					 * (the last page's *next), or NULL */
};
/* A page of the node's sandboxes, in the order of their ids: as
 * dsec_list, and *next (caller frees; may be NULL) is the id to give as
 * o->after for the next page, NULL after the last one; *total (may be
 * NULL) counts every sandbox that matches.  o NULL: dsec_list. */
DSEC_API
int dsec_list_page(struct dsec_client *c, const struct dsec_list_opts *o,
		   struct dsec_sandbox_info **out, size_t *n, char **next, uint64_t *total,
		   struct dsec_err *err);
DSEC_API
void dsec_node_info_free(struct dsec_node_info *info);
DSEC_API
void dsec_sandbox_info_free(struct dsec_sandbox_info *info);
DSEC_API
void dsec_sandbox_list_free(struct dsec_sandbox_info *arr, size_t n);

/* Shell sessions: a named, persistent shell in sandbox id (container
 * backend); consecutive commands share its directory, environment and
 * shell state.  Opens one as o says (NULL: defaults); *name (caller frees)
 * is its name, o->name or one the daemon picked.  "exists" if o->name is
 * open already. */
DSEC_API
int dsec_session_open(struct dsec_client *c, const char *id, const struct dsec_session_opts *o,
		      char **name, struct dsec_err *err);
/* Runs the shell command line cmd in the session; timeout in seconds and
 * output_cap in bytes, 0 = the daemon's default.  res is filled (free
 * with dsec_session_cmd_res_free): a non-zero exit, a timeout (the session
 * stays usable; res->reset if its shell had to be restarted) and the
 * shell's exit (res->ended: the session is closed) are not errors.
 * "busy" while another command runs in the session, "not_found" for a
 * session that is not open. */
DSEC_API
int dsec_session_exec(struct dsec_client *c, const char *id, const char *session,
		      const char *cmd, double timeout, size_t output_cap,
		      struct dsec_session_cmd_res *res, struct dsec_err *err);
/* Closes the session: its shell and everything it started are killed. */
DSEC_API
int dsec_session_close(struct dsec_client *c, const char *id, const char *session,
		       struct dsec_err *err);
DSEC_API
void dsec_session_cmd_res_free(struct dsec_session_cmd_res *res);

/* Node to node (fs3's peer tier): the stored, zstd-compressed bytes of the
 * fs3 object kind ("chunk", "index", "manifest") named digest
 * ("sha256:<hex>") that the daemon holds verified, into out (reset first).
 * "not_found" when it has no good copy.  The caller verifies the bytes
 * again: a peer is not trusted.  Waits the client's timeout at most. */
DSEC_API
int dsec_chunk_get(struct dsec_client *c, const char *kind, const char *digest,
		   struct dsec_buf *out, struct dsec_err *err);
/* ---- streaming exec: output as it comes, stdin, signals, a terminal ---- */

/* How dsec_exec_start runs the command (zero = pipes, stdin closed). */
struct dsec_exec_start_opts {
	bool pty;			/* on a terminal of the sandbox (stdout carries it) */
	uint16_t rows, cols;		/* its size, 0 = 24x80 */
	bool stdin_open;		/* keep stdin open after req->stdin for
					 * dsec_exec_write (always with a pty) */
};

/* Starts req in sandbox id (req->output_cap is the bytes the daemon
 * buffers per output); *exec (caller frees) names it for the calls
 * below.  The command runs on until it ends, times out or its sandbox
 * goes; read it to its end (dsec_exec_read until *done). */
DSEC_API
int dsec_exec_start(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
		    const struct dsec_exec_start_opts *o, char **exec, struct dsec_err *err);
/* Waits up to wait seconds (0 = just look, at most 60) for output or the
 * end; res->out and res->err get what came (caller frees with
 * dsec_cmd_res_free); *done once the command has ended and this was the
 * last of its output: res then has its status, and exec is gone. */
DSEC_API
int dsec_exec_read(struct dsec_client *c, const char *id, const char *exec, double wait,
		   struct dsec_cmd_res *res, bool *done, struct dsec_err *err);
/* Queues len bytes for its stdin; eof closes stdin after them (a pty gets
 * ^D).  "busy" while an earlier write is still unread by the command. */
DSEC_API
int dsec_exec_write(struct dsec_client *c, const char *id, const char *exec, const void *data,
		    size_t len, bool eof, struct dsec_err *err);
/* dsec_exec_start and dsec_exec_write as step `step` of a sandbox with a
 * trajectory: a step its log has is answered from it without running
 * (*replayed true, when replayed is not NULL): the logged command, which
 * dsec_exec_read reads from its start (from the log once it has gone);
 * an input not written again.  The same step with another request fails
 * "diverged". */
DSEC_API
int dsec_exec_start_step(struct dsec_client *c, const char *id, uint64_t step,
			 const struct dsec_cmd *req, const struct dsec_exec_start_opts *o,
			 char **exec, bool *replayed, struct dsec_err *err);
DSEC_API
int dsec_exec_write_step(struct dsec_client *c, const char *id, const char *exec, uint64_t step,
			 const void *data, size_t len, bool eof, bool *replayed,
			 struct dsec_err *err);
/* Sends signal sig to the command's process group. */
DSEC_API
int dsec_exec_signal(struct dsec_client *c, const char *id, const char *exec, int sig,
		     struct dsec_err *err);
/* Resizes the command's terminal (pty only). */
DSEC_API
int dsec_exec_resize(struct dsec_client *c, const char *id, const char *exec, unsigned rows,
		     unsigned cols, struct dsec_err *err);

/* Sends a raw frame and returns the raw reply frame (caller frees).  For
 * tests and tools that speak the protocol directly. */
DSEC_API
int dsec_raw(struct dsec_client *c, const void *req, size_t len, void **reply,
	     size_t *reply_len, struct dsec_err *err);

/* ---- asynchronous calls: raw frames, replies on a completion queue ---- */

/* A completion queue: calls that ended wait in it, oldest first, until
 * dsec_cq_next takes them.  Its descriptor is readable exactly while one
 * waits (an eventfd: watch it with ev_io, poll or asyncio's add_reader,
 * never read it).  nng's threads only queue completions: no user code
 * runs on them.  One queue may serve several clients; take from it on
 * one thread at a time. */
struct dsec_cq;
/* One asynchronous call, valid until its completion is freed. */
struct dsec_call;

/* An ended call as dsec_cq_next hands it out. */
struct dsec_completion {
	void *tag;			/* the tag given to dsec_call_async */
	int rc;				/* 0: the daemon replied (reply); -errno: no reply */
	const struct dsec_err *err;	/* why, when rc < 0 ("unavailable": not sent,
					 * no reply in time, cancelled, client closed) */
	const void *reply;		/* the reply frame (a msgpack map), or NULL; an
					 * error reply is rc 0 too: see dsec_reply_check */
	size_t reply_len;		/* its length */
	struct dsec_call *call;		/* the call; freed with the completion */
};

DSEC_API
int dsec_cq_new(struct dsec_cq **out, struct dsec_err *err);
DSEC_API
int dsec_cq_fd(const struct dsec_cq *q);
/* Takes the oldest completion into *out (free it with
 * dsec_completion_free): 0, or -EAGAIN when none waits. */
DSEC_API
int dsec_cq_next(struct dsec_cq *q, struct dsec_completion *out);
DSEC_API
void dsec_completion_free(struct dsec_completion *cmp);
/* Frees q and the completions still in it; every call sent to it must
 * have ended (close its clients first). */
DSEC_API
void dsec_cq_free(struct dsec_cq *q);
/* Sends the request frame req (len bytes, copied: a msgpack map as in
 * dsec-protocol(7)) on c without waiting; exactly one completion with tag
 * comes to q, however the call ends.  It may wait the client's timeout
 * for the daemon to take it and wait seconds more for the reply (what the
 * request itself may take, as for the typed calls).  *call (call may be
 * NULL) is for dsec_call_cancel.  Fails only for a bad wait ("invalid")
 * or when nng cannot open one more context ("internal").
 * Calls on one client run at the same time, each on a REQ context of its
 * own, and end in any order. */
DSEC_API
int dsec_call_async(struct dsec_client *c, struct dsec_cq *q, const void *req, size_t len,
		    double wait, void *tag, struct dsec_call **call, struct dsec_err *err);
/* Gives up on call: it ends soon with "unavailable" (cancelled) unless it
 * ended already; a late reply is dropped. */
DSEC_API
void dsec_call_cancel(struct dsec_call *call);
/* What the typed calls check of every reply: 0 for {ok: true, result:
 * {...}}, the daemon's error as *err for an error reply, "internal" for a
 * reply that breaks the protocol. */
DSEC_API
int dsec_reply_check(const struct dsec_client *c, const void *reply, size_t len,
		     struct dsec_err *err);

#endif
