/* backend.h - the backend ABI: what a backends/NAME.so exports and what the
 * daemon gives it.  Installed as <dsec/backend.h> for out-of-tree backends.
 *
 * A backend exports one symbol, `dsec_backend`, a const struct dsec_be_ops.
 * The daemon dlopen()s it (RTLD_NOW|RTLD_LOCAL, absolute path only), checks
 * abi_version == DSEC_BE_ABI and struct_size >= the size it needs, and
 * refuses it otherwise with a clear message.  Fields are only ever appended;
 * each is marked with the ABI version it appeared in.
 *
 * ABI 2 (this header) differs from ABI 1 in what a backend built for one
 * would get wrong with the other, so dsecd refuses an ABI 1 backend
 * (naming both versions): the host's callbacks take the host as their
 * first argument (a daemon keeps no process globals for them, so several
 * can run in one process), and it offers defer, the one deferred-call
 * queue a backend needs.  session_exec fills the command's struct
 * dsec_exec_res and a struct dsec_be_session_res apart, since no
 * appendable struct is embedded by value in another (those embedded or in
 * arrays, dsec_be_limits, dsec_file_info and libdsec's dsec_buf, have a
 * fixed layout; dsec_session_res, which embeds the exec result, is
 * libdsec's, not the ABI's).  It adds usage, a sandbox's resource use.
 * Everything else ABI 1 had is as it was; its fields keep their "(ABI 1)"
 * marks.
 *
 * Threading: every operation is called on the daemon's event loop thread
 * and must not block it.  Slow work goes to host->submit() (a worker pool)
 * or is driven by watchers on host->loop.
 *
 * Completion contract, for every asynchronous operation:
 *   - returns 0: the operation started; `done(arg, rc, err)` will be called
 *     exactly once, later, from the loop (never from inside the call);
 *   - returns -errno: it failed at once, *err says why, done is never called.
 * Output structures passed in (res, out) are owned by the caller and stay
 * valid until done is called; the backend fills them before calling done.
 * When rc < 0 in done, err (non-NULL) says why and outputs are undefined,
 * but for the buffers of an exec's result (dsec_exec_res out and err):
 * those are empty, whatever the command had written (the backend frees
 * it), so a caller that drops a failed result leaks nothing.
 */
#ifndef DSEC_BACKEND_H
#define DSEC_BACKEND_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "err.h"

#define DSEC_BE_ABI 2
#define DSEC_BE_SYMBOL "dsec_backend"

struct ev_loop;

typedef void (*dsec_be_done_fn)(void *arg, int rc, const struct dsec_err *err);

/* A call deferred with host->defer, kept in the backend's own object (no
 * allocation per call).  Its layout is fixed.  (ABI 2) */
struct dsec_be_defer {
	struct dsec_be_defer *next;	/* the host's, while queued */
	/* What runs: cancelled is false on the loop as defer promises, true
	 * when the host drops the call (see defer): fn then only frees what
	 * it owns and calls no done callback. */
	void (*fn)(struct dsec_be_defer *d, bool cancelled);
};

/* Services the daemon offers a backend; valid from init to fini.  Each
 * callback but log takes this struct (the one init got) first. */
struct dsec_be_host {
	uint32_t abi_version;		/* DSEC_BE_ABI of the daemon (ABI 1) */
	uint32_t struct_size;		/* sizeof(struct dsec_be_host) (ABI 1) */
	struct ev_loop *loop;		/* the daemon's loop; SIGCHLD is its (ABI 1) */
	const char *state_dir;		/* a directory of the backend's own, created (ABI 1) */
	const char *helper_dir;		/* where dsec's helper programs live (ABI 1) */
	/* Value of config key "NAME.key" (e.g. "fncall.pool_size") or NULL.
	 * The backend rejects keys or values it does not know in init().
	 * (ABI 1; takes the host since ABI 2) */
	const char *(*conf_get)(const struct dsec_be_host *host, const char *key);
	/* Every backend-scoped key ("BACKEND.key", any backend) the config
	 * sets, NULL-terminated; pick yours by the "NAME." prefix.  The array
	 * is the daemon's. (ABI 1; takes the host since ABI 2) */
	const char *const *(*conf_keys)(const struct dsec_be_host *host);
	/* Run work(arg) on a pool thread, then done(arg) on the loop.  work must
	 * not touch loop state.  Returns 0 or -errno. (ABI 1; takes the host
	 * since ABI 2) */
	int (*submit)(const struct dsec_be_host *host, void (*work)(void *arg),
		      void (*done)(void *arg), void *arg);
	/* A line for the daemon's log, dsec_log levels; it needs no host: the
	 * log is the process's. (ABI 1) */
	void (*log)(int level, const char *fmt, ...);
	/* Sandbox id (spec->id of its create) died on its own, its init gone
	 * (killed from outside, crashed): every later op on it fails with
	 * DSEC_E_SANDBOX_LOST, it shows as "failed", and dsecd destroys it
	 * after lost_grace or at the client's destroy.  why says what
	 * happened (logged, and in those errors).  The backend calls it on
	 * the loop, at most once per sandbox, never from inside an operation
	 * dsecd called, and only while the sandbox is ready and not being
	 * destroyed; its handle stays valid until destroy.  dsecd does not
	 * call the backend from inside it.  A backend checks struct_size
	 * before calling it (a daemon older than the field lacks it).
	 * (ABI 1, appended) */
	void (*sandbox_lost)(const struct dsec_be_host *host, const char *id,
			     const struct dsec_err *why);
	/* The daemon's own, for its callbacks; a backend leaves it alone.
	 * (ABI 2) */
	void *ctx;
	/* Run d->fn(d, false) on the loop soon: after the operation or
	 * callback that called defer has returned and before the loop next
	 * sleeps, in the order of the defer calls; never inside the call.
	 * The way to complete an operation "later, from the loop" (the
	 * completion contract below).  Calls still queued when dsecd is
	 * about to call fini run as d->fn(d, true) just before it; a defer
	 * from inside fini runs d->fn(d, true) at once.  d stays the
	 * backend's: valid, and not deferred again, until its fn has run.
	 * Cheap, never fails. (ABI 2) */
	void (*defer)(const struct dsec_be_host *host, struct dsec_be_defer *d);
	/* Adds n to the misbehaviour counter mark (enum dsec_be_mark) of
	 * sandbox id (spec->id of its create), which dsecd keeps and reports
	 * in usage, info and grade.  For what the backend notices outside any
	 * command (a probe of a stand-in, see DSEC_BE_CAP_PROTECT).  A call
	 * with n 0 says the backend counts mark for the sandbox: dsecd reports
	 * a counter of enum dsec_be_mark only once it has had a call.  On the
	 * loop, never from inside an operation dsecd called; an id dsecd no
	 * longer knows, or a mark it does not, is ignored; dsecd does not call
	 * the backend from inside it.  A backend checks struct_size before
	 * calling it.  (ABI 2, appended) */
	void (*sandbox_mark)(const struct dsec_be_host *host, const char *id, uint32_t mark,
			     uint64_t n);
};

/* The counters of dsec_be_host.sandbox_mark.  Append only. (ABI 2) */
enum dsec_be_mark {
	/* Opens of a stand-in, and lookups of names below one: the agent
	 * looking for what its create's grade_layers keep from it (the
	 * misbehaviour counter protected_probes). */
	DSEC_BE_MARK_PROTECTED_PROBES = 0,
};

/* Resource limits for a sandbox; 0 means the backend's configured default.
 * Its layout is fixed (it is embedded in dsec_be_spec). */
struct dsec_be_limits {
	double cpus;			/* CPU quota in cores (0.5 = half a core) */
	uint64_t memory;		/* bytes of memory, hard limit */
	uint32_t pids;			/* max processes/threads */
	uint32_t nofile;		/* max open files per process */
	uint64_t disk;			/* bytes of writable scratch */
};

/* What create() is asked to make.  All strings are the caller's and valid
 * only during the create() call: copy what you keep. */
struct dsec_be_spec {
	const char *id;			/* sandbox id, unique on this node */
	const char *image;		/* image name, NULL = backend default */
	const char *runtime;		/* fncall runtime ("sh", "python3"), NULL = default */
	const char *const *env;		/* extra "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* working directory inside, NULL = default */
	struct dsec_be_limits limits;	/* resource limits */
	/* The image's read-only layers, mounted by dsecd (fs3), top layer
	 * first, NULL-terminated; NULL when the sandbox has no image or the
	 * backend gets none. (ABI 1, appended) */
	const char *const *layers;
	/* "uid[:gid]" the image says commands run as, NULL = the backend's
	 * default. (ABI 1, appended) */
	const char *user;
	/* "none" (loopback only) or "allowlist"; NULL = the backend's
	 * default. (ABI 1, appended) */
	const char *network;
	/* With "allowlist": what the sandbox may reach, "ADDR[/BITS][:PORTS
	 * [/PROTO]]" strings, NULL-terminated, or NULL (nothing). (ABI 1,
	 * appended) */
	const char *const *allow;
	/* With "allowlist": the one resolver DNS may go to (IPv4), or NULL.
	 * (ABI 1, appended) */
	const char *dns;
	/* System calls the sandbox's commands may not make (they fail with
	 * EPERM), on top of the backend's own filter: names as libseccomp
	 * knows them, NULL-terminated, or NULL.  A backend that cannot apply
	 * them refuses the create. (ABI 1, appended) */
	const char *const *seccomp_deny;
	/* limits.cpu_weight: CPU weight against other sandboxes, 1-10000
	 * (cgroup v2's scale, 100 the usual share); 0 = the backend's default.
	 * Here rather than in limits, whose layout is fixed. (ABI 1, appended) */
	uint32_t cpu_weight;
	/* The same layers as read-only EROFS image files, in layers' order,
	 * NULL-terminated (NULL with layers): what each mount is made from,
	 * for a backend that hands its sandboxes disks instead of directories
	 * (a VM's virtio-blk).  Valid until destroy's done; a backend may use
	 * either or both.  Informative: dsecd does not check that a backend
	 * knows it. (ABI 2, appended) */
	const char *const *layer_files;
	/* With DSEC_BE_CAP_LAYER_DEVS: the same layers as read-only block
	 * devices ("/dev/loopN", each layer file attached to a loop device),
	 * in layers' order, NULL-terminated; else NULL.  A device is shared
	 * by the sandboxes of every image with that layer and detached when
	 * the last is gone: the backend closes what it opened of it by
	 * destroy's done. (ABI 2, appended) */
	const char *const *layer_devs;
	/* The top-level entries of the create's grade_layers, which the
	 * sandbox never gets: "d/NAME" for a directory, "f/NAME" for anything
	 * else, NULL-terminated (maybe empty); NULL without grade_layers, when
	 * they could not be acquired or for a backend without
	 * DSEC_BE_CAP_PROTECT.  The backend puts an empty read-only stand-in at
	 * each /NAME its root lacks and counts the probes of them
	 * (host->sandbox_mark).  (ABI 2, appended) */
	const char *const *protect;
};

/* One command.  Strings and buffers are the caller's and valid until done. */
struct dsec_exec_req {
	const char *const *argv;	/* argv, NULL-terminated; or NULL when code is set */
	const char *code;		/* runtime snippet (sh: "sh -c code"; python3: source) */
	const char *const *env;		/* extra "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* working directory, NULL = sandbox default */
	const void *stdin_data;		/* bytes fed to stdin, then EOF */
	size_t stdin_len;		/* length of stdin_data */
	double timeout;			/* seconds; the whole process tree dies at expiry */
	size_t output_cap;		/* bytes kept of stdout and of stderr, each */
};

struct dsec_exec_res {
	int exit_code;			/* exit status, or -1 if killed by a signal */
	int signal;			/* signal that killed it, 0 if it exited */
	bool timed_out;			/* killed because timeout expired */
	bool out_truncated;		/* stdout was longer than output_cap */
	bool err_truncated;		/* stderr was longer than output_cap */
	struct dsec_buf out;		/* stdout (caller frees with dsec_buf_free) */
	struct dsec_buf err;		/* stderr (caller frees with dsec_buf_free) */
	double duration;		/* seconds from start to exit */
	bool oom_killed;		/* the kernel's OOM killer killed a process of the
					 * command (its memory limit was hit) (ABI 1,
					 * appended; zeroed by the daemon) */
	bool pids_limited;		/* a fork of the command failed at the sandbox's
					 * pids limit (ABI 2, in oom_killed's padding:
					 * zeroed by the daemon, left so by a backend
					 * that does not count) */
	uint32_t seccomp_denied;	/* system calls the seccomp filter refused
					 * while it ran (ABI 2, in the same padding, so
					 * the size is as it was: zeroed by the daemon,
					 * left so by a backend that does not count) */
};
/* Frees the buffers of res (libdsec, lib/backend.c). */
void dsec_exec_res_free(struct dsec_exec_res *res);

/* Capacity and occupancy, for info, placement and dsec-top. */
struct dsec_be_stats {
	uint32_t sandboxes;		/* sandboxes alive */
	uint32_t capacity;		/* how many more it can take now (admission) */
	uint32_t running;		/* commands in flight */
	uint32_t pool_ready;		/* warm units ready to hand out */
	uint32_t pool_target;		/* warm units it tries to keep ready */
	uint64_t calls;			/* commands completed since start */
};

/* ---- the file API (ABI 1, appended): one entry point, `file`, for every kind ---- */

/* What a file request does.  Append only. */
enum dsec_file_op {
	DSEC_FILE_WRITE,		/* create or replace a file: data, mode, uid, gid */
	DSEC_FILE_STAT,			/* describe path (not following a final symlink) */
	DSEC_FILE_LIST,			/* the entries of a directory */
	DSEC_FILE_MKDIR,		/* make a directory: mode, parents, uid, gid */
	DSEC_FILE_REMOVE,		/* remove a file, link or directory: recursive */
	DSEC_FILE_UPLOAD,		/* extract a tar (data, format) into directory path */
	DSEC_FILE_DOWNLOAD,		/* pack path as a tar (format) into res->data */
	DSEC_FILE_APPEND,		/* add data at the end of a regular file, made
					 * (mode, uid, gid) when missing (ABI 2, appended) */
	DSEC_FILE_UNPACK,		/* UPLOAD of the archive file `archive` in the
					 * sandbox, not data (ABI 2, appended) */
	DSEC_FILE_PACK,			/* DOWNLOAD into the file `archive` in the sandbox
					 * (made or replaced), not res->data (ABI 2, appended) */
	DSEC_FILE_PART,			/* a part of a staged write: add data at the end of
					 * the regular file `archive`, in path's directory,
					 * which must exist and hold `staged` bytes; with
					 * `commit`, then rename it to path (ABI 2, appended) */
};

/* Archive formats of upload and download. */
enum dsec_file_format {
	DSEC_FMT_TAR,			/* "tar": POSIX pax */
	DSEC_FMT_TAR_ZST,		/* "tar.zst": the same, zstd-compressed */
};

/* File types as stat and list report them. */
enum dsec_file_type {
	DSEC_FT_FILE,			/* "file" */
	DSEC_FT_DIR,			/* "dir" */
	DSEC_FT_SYMLINK,		/* "symlink" */
	DSEC_FT_FIFO,			/* "fifo" */
	DSEC_FT_SOCKET,			/* "socket" */
	DSEC_FT_CHAR,			/* "char" (character device) */
	DSEC_FT_BLOCK,			/* "block" (block device) */
};

/* Owner value meaning "the backend's default" (the uid/gid commands run as). */
#define DSEC_OWNER_DEFAULT (-1)

/* One file request.  Strings and buffers are the caller's and valid until
 * done.  Fields a kind does not use are ignored. */
struct dsec_file_req {
	enum dsec_file_op op;		/* what to do */
	const char *path;		/* inside the sandbox */
	const void *data;		/* WRITE: contents; UPLOAD: the archive */
	size_t len;			/* length of data */
	uint32_t mode;			/* WRITE, MKDIR: permission bits, 0 = 0644 / 0755 */
	int64_t uid, gid;		/* WRITE, MKDIR, UPLOAD: owner, DSEC_OWNER_DEFAULT */
	bool parents;			/* MKDIR: make missing parents, an existing dir is fine */
	bool recursive;			/* REMOVE: a directory with everything in it */
	enum dsec_file_format format;	/* UPLOAD, DOWNLOAD */
	size_t max_entries;		/* LIST: entries at most, > 0 (then truncated) */
	size_t max_bytes;		/* LIST, DOWNLOAD: bytes the result may take, > 0
					 * (LIST truncates, DOWNLOAD fails too_large) */
	const char *archive;		/* UNPACK, PACK: the archive's path inside the
					 * sandbox (ABI 2, appended) */
	bool remove_archive;		/* UNPACK: remove it once open, before anything
					 * is unpacked (ABI 2, appended) */
	uint64_t staged;		/* PART: bytes `archive` holds before data goes in
					 * (ABI 2, appended) */
	bool commit;			/* PART: rename `archive` to path after (ABI 2,
					 * appended) */
};

/* What stat reports of a path, and list of each entry.  Its layout is
 * fixed (it is embedded in dsec_file_res and makes arrays): a field it
 * would need goes elsewhere. */
struct dsec_file_info {
	char *name;			/* list: entry name; stat: last component */
	char *target;			/* symlink target, NULL for other types */
	enum dsec_file_type type;	/* kind of file */
	uint32_t mode;			/* permission bits (07777) */
	uint64_t size;			/* bytes */
	uint32_t uid, gid;		/* owner */
	double mtime;			/* modification time, unix seconds */
};

/* What a file request returns; zeroed by the caller, freed by it with
 * dsec_file_res_free() (libdsec). */
struct dsec_file_res {
	struct dsec_file_info info;	/* STAT */
	struct dsec_file_info *entries;	/* LIST: sorted by name */
	size_t nentries;		/* LIST: how many */
	bool truncated;			/* LIST: more entries than returned */
	uint64_t count;			/* REMOVE: removed; UPLOAD, UNPACK: extracted;
					 * DOWNLOAD, PACK: packed */
	struct dsec_buf data;		/* DOWNLOAD: the archive */
	uint64_t size;			/* PACK: bytes of the archive written (ABI 2,
					 * appended) */
};
/* Frees what res holds and zeroes it (libdsec, lib/backend.c). */
void dsec_file_res_free(struct dsec_file_res *res);
/* The forms in which a snapshot hands over a sandbox's changes
 * (dsec_be_diff.kind). (ABI 2) */
enum dsec_be_diff_kind {
	/* The overlay's upper dir on the host, in overlayfs form: a deleted
	 * file is a 0/0 character device, a replaced directory carries
	 * trusted.overlay.opaque="y" (user.overlay.opaque with userxattr);
	 * ids as the host sees them (id_base, id_count).  dsecd copies it
	 * with fs3_diff_copy.  The container backend's. */
	DSEC_BE_DIFF_UPPER = 0,
	/* A layer tar file in OCI form: a deleted NAME is DIR/.wh.NAME, a
	 * replaced directory holds .wh..wh..opq; any compression libarchive
	 * reads; ids as the sandbox sees them.  dsecd parses it in user space
	 * and never mounts it, so its bytes may come from inside the sandbox
	 * (a VM's guest agent streaming its upper dir out). */
	DSEC_BE_DIFF_TAR = 1,
	/* An EROFS image file in overlayfs form (as UPPER, ids as the sandbox
	 * sees them), as mkfs.erofs makes it: it becomes the new layer as it
	 * is, which the host's kernel mounts for every sandbox of the image.
	 * So only one the backend built on the host from files it read
	 * itself, never bytes a sandbox wrote (those go as TAR); dsecd checks
	 * it with fsck.erofs first all the same. */
	DSEC_BE_DIFF_EROFS = 2,
};

/* A sandbox's changes as a snapshot reads them. (ABI 2: struct
 * dsec_be_upper of ABI 1, with kind) */
struct dsec_be_diff {
	uint32_t kind;			/* enum dsec_be_diff_kind */
	/* UPPER: the host path of the upper dir; TAR, EROFS: of the file.
	 * Valid during the read call only. */
	const char *path;
	/* UPPER: host uid and gid of root inside: the dir's ids are the
	 * sandbox's shifted by it (0 = not shifted, no user namespace). */
	uint32_t id_base;
	/* UPPER: how many ids from id_base on are the sandbox's (0 with
	 * id_base 0). */
	uint32_t id_count;
	/* UPPER: the overlay was mounted with userxattr (as it must be in a
	 * user namespace): opaque dirs carry user.overlay.opaque instead. */
	bool userxattr;
	/* TAR, EROFS: bytes the sandbox's files may take (its disk): the file,
	 * and a tar's entries once extracted, may take no more, else the
	 * snapshot fails with capacity.  0 = no limit.  UPPER: unused (the
	 * upper dir's file system is the bound). */
	uint64_t limit;
};

/* Reads a sandbox's changes while the backend holds them still; runs on a
 * pool thread and may block; what diff names may go once it returns.
 * Returns 0 or -errno with *err. (ABI 1, appended; a dsec_be_diff since
 * ABI 2) */
typedef int (*dsec_be_read_diff_fn)(void *arg, const struct dsec_be_diff *diff,
				    struct dsec_err *err);

/* What session_open is asked for.  Strings are the caller's and valid only
 * during the call: copy what you keep. (ABI 1, appended) */
struct dsec_session_spec {
	const char *name;		/* session name, NULL = the backend picks one */
	const char *shell;		/* shell program inside, NULL = "/bin/sh" */
	const char *const *env;		/* extra "K=V" strings, NULL-terminated, or NULL */
	const char *cwd;		/* starting directory, NULL = the sandbox's */
};

/* What one session command gives back to a libdsec client
 * (dsec_session_exec, dsec.h): not the backend ABI's, whose session_exec
 * fills a struct dsec_exec_res and a struct dsec_be_session_res apart.
 * (ABI 1, appended) */
struct dsec_session_res {
	struct dsec_exec_res exec;	/* exit code, output, truncation, timed_out, duration */
	char *cwd;			/* the shell's directory afterwards (caller frees) */
	bool reset;			/* the shell was stuck after a timeout and was restarted */
	bool ended;			/* the shell exited: the session is closed */
};

/* What one session command gives back to dsecd besides its struct
 * dsec_exec_res (exit code, output, truncation, timed_out, duration),
 * which comes beside it: an appendable struct is never embedded in
 * another. (ABI 2) */
struct dsec_be_session_res {
	char *cwd;			/* the shell's directory afterwards (caller frees) */
	bool reset;			/* the shell was stuck after a timeout and was restarted */
	bool ended;			/* the shell exited: the session is closed */
};

/* One open session, as info reports it; valid only during the callback.
 * (ABI 1, appended) */
struct dsec_session_info {
	const char *name;		/* session name */
	const char *shell;		/* shell program */
	const char *cwd;		/* last known working directory */
	bool running;			/* a command is running */
	uint64_t commands;		/* commands run */
};

/* ---- streaming exec (ABI 1, appended) ---- */

/* How exec_start runs a command. */
struct dsec_exec_stream_opts {
	bool pty;			/* on a pseudo-terminal of the sandbox's own devpts */
	uint16_t rows, cols;		/* with pty: the terminal's size, 0 = 24x80 */
};

/* The ends of a streaming command, filled by exec_start; the fds are the
 * caller's from then on (it closes them).  Nonblocking, close-on-exec. */
struct dsec_exec_stream {
	int in_fd;			/* write end of its stdin (pty: the master);
					 * closing it is EOF (not with a pty) */
	int out_fd;			/* read end of its stdout (pty: the master,
					 * every byte the terminal shows; EIO is EOF) */
	int err_fd;			/* read end of its stderr, -1 with a pty */
	void *handle;			/* for exec_signal and exec_resize; valid until done */
};

/* ---- usage (ABI 2) ---- */

/* Which fields of struct dsec_be_usage a backend measured. */
#define DSEC_USAGE_CPU 0x1u		/* cpu_ns */
#define DSEC_USAGE_MEMORY 0x2u		/* memory */
#define DSEC_USAGE_MEMORY_PEAK 0x4u	/* memory_peak */
#define DSEC_USAGE_PIDS 0x8u		/* pids */
#define DSEC_USAGE_DISK 0x10u		/* disk */
#define DSEC_USAGE_EGRESS_DENIED 0x20u	/* egress_denied */
#define DSEC_USAGE_SECCOMP_DENIED 0x40u	/* seccomp_denied */

/* What a sandbox uses now, for the density manager and metrics.  The
 * caller zeroes it and sets struct_size; the backend writes only the
 * fields that end within struct_size (so either side may know a longer
 * struct than the other) and sets the bit in have of each it measured:
 * a field without its bit is unknown, not 0. */
struct dsec_be_usage {
	uint32_t struct_size;		/* sizeof(struct dsec_be_usage) of the caller */
	uint32_t have;			/* DSEC_USAGE_* of the fields filled */
	uint64_t cpu_ns;		/* CPU time of its processes since create, ns */
	uint64_t memory;		/* bytes of memory charged to it now (an in-memory
					 * writable layer included) */
	uint64_t memory_peak;		/* the most memory charged to it since create */
	uint64_t pids;			/* processes and threads now */
	uint64_t disk;			/* bytes in use of its writable layer or scratch */
	uint64_t egress_denied;		/* packets its network filter refused since create
					 * (appended in ABI 2) */
	uint64_t seccomp_denied;	/* system calls its seccomp filter refused since
					 * create (appended in ABI 2) */
};

/* The ops table.  Optional operations may be NULL: the daemon then answers
 * "unsupported".  A backend handle (void *be) comes from init; a sandbox
 * handle (void *sb) from create. */
struct dsec_be_ops {
	uint32_t abi_version;		/* DSEC_BE_ABI (ABI 1) */
	uint32_t struct_size;		/* sizeof(struct dsec_be_ops) (ABI 1) */
	const char *name;		/* "fncall", matches the file name (ABI 1) */
	const char *description;	/* one line for info and logs (ABI 1) */

	/* Set up the backend (pools, helpers).  May block: it runs before the
	 * daemon serves.  Returns 0 and *be, or -errno with *err. (ABI 1) */
	int (*init)(const struct dsec_be_host *host, void **be, struct dsec_err *err);
	/* Tear everything down synchronously: processes, mounts, cgroups.  Any
	 * sandboxes still alive are destroyed; in-flight done callbacks are NOT
	 * called after fini starts.  May block. (ABI 1) */
	void (*fini)(void *be);

	/* Make a sandbox; *sb is set before done(rc=0).  Async. (ABI 1) */
	int (*create)(void *be, const struct dsec_be_spec *spec, void **sb,
		      dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Run a command in sb; fills *res.  Several may run at once in one
	 * sandbox.  A timeout is not an error: rc 0, res->timed_out. Async. (ABI 1) */
	int (*exec)(void *sb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Read up to len bytes at offset of a file inside sb (len 0 = to the
	 * end, capped by the caller) into *out.  Paths resolve inside the
	 * sandbox; escapes fail with DSEC_E_PERMISSION.  Async. (ABI 1) */
	int (*file_read)(void *sb, const char *path, uint64_t offset, uint64_t len,
			 struct dsec_buf *out, dsec_be_done_fn done, void *arg,
			 struct dsec_err *err);
	/* Create or replace a file inside sb with mode.  Async. (ABI 1) */
	int (*file_write)(void *sb, const char *path, const void *data, size_t len,
			  uint32_t mode, dsec_be_done_fn done, void *arg,
			  struct dsec_err *err);
	/* Freeze / thaw.  Optional (NULL: pause is "unsupported").  pause
	 * stops every process of sb, commands in flight included (their
	 * timeouts and durations must leave the paused time out), and may
	 * reclaim memory; done comes once sb is frozen.  resume thaws.  Both
	 * are idempotent.  The daemon starts at most one of them at a time
	 * per sandbox and starts no exec, file_read or file_write while sb is
	 * paused (it resumes first); destroy may come at any time, also
	 * while paused or while a pause is in flight.  Async. (ABI 1) */
	int (*pause)(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err);
	int (*resume)(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Destroy sb: in-flight execs complete first with rc -ECANCELED; after
	 * done, sb is freed and must not be used.  Never fails for a live sb
	 * (cleanup problems are logged).  Async. (ABI 1) */
	int (*destroy)(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Fill *out; cheap, synchronous. (ABI 1) */
	void (*stats)(void *be, struct dsec_be_stats *out);
	/* Optional fast path for a one-shot command in a fresh sandbox that is
	 * gone afterwards (create + exec + destroy in one).  spec->id is a
	 * fresh id for logs.  NULL: the daemon composes it from create, exec
	 * and destroy.  Async. (ABI 1) */
	int (*call)(void *be, const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
		    struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		    struct dsec_err *err);
	/* Replace what an "allowlist" sandbox may reach (entries as in
	 * dsec_be_spec.allow; NULL or empty = nothing), atomically, while it
	 * runs.  Optional.  Async. (ABI 1, appended) */
	int (*net_allow)(void *sb, const char *const *allow, dsec_be_done_fn done, void *arg,
			 struct dsec_err *err);
	/* DSEC_BE_CAP_* bits. (ABI 1, appended) */
	uint32_t caps;
	/* Every file request of struct dsec_file_req; fills *res.  Paths
	 * resolve inside the sandbox; escapes fail with DSEC_E_PERMISSION.
	 * Kinds it does not know fail with DSEC_E_UNSUPPORTED.  When set, the
	 * daemon sends file_write through it too (file_write may be NULL).
	 * Optional.  Async. (ABI 1, appended) */
	int (*file)(void *sb, const struct dsec_file_req *req, struct dsec_file_res *res,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err);

	/* ---- named shell sessions (optional: NULL = "unsupported") ---- */
	/* Start a persistent shell in sb; *name (caller frees) is set before
	 * done(rc=0).  A name already open fails at once with "exists"; too
	 * many sessions with "capacity".  Async. (ABI 1, appended) */
	int (*session_open)(void *sb, const struct dsec_session_spec *spec, char **name,
			    dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Run req->code in session name (only code, timeout and output_cap are
	 * used); fills *res (the command's result, as exec's) and *sres.
	 * Commands of one session never overlap: while one runs, another
	 * fails at once with "busy".  A timeout is not an error: rc 0,
	 * res->timed_out.  Unknown name: "not_found".  Async. (ABI 1,
	 * appended; res apart from sres since ABI 2) */
	int (*session_exec)(void *sb, const char *name, const struct dsec_exec_req *req,
			    struct dsec_exec_res *res, struct dsec_be_session_res *sres,
			    dsec_be_done_fn done, void *arg, struct dsec_err *err);
	/* Close session name: a running command completes with -ECANCELED,
	 * every process of the session is killed.  Async. (ABI 1, appended) */
	int (*session_close)(void *sb, const char *name, dsec_be_done_fn done, void *arg,
			     struct dsec_err *err);
	/* Call fn for every open session of sb; cheap, synchronous.
	 * (ABI 1, appended) */
	void (*session_list)(void *sb, void (*fn)(void *arg, const struct dsec_session_info *info),
			     void *arg);
	/* Snapshot support: hold sb's changes still (its processes frozen,
	 * its own file operations waiting; or a still copy of them made
	 * first, a TAR or EROFS file), call read(read_arg, diff, err) once on
	 * a pool thread with them in one of the forms of enum
	 * dsec_be_diff_kind, let sb run again, then complete with read's
	 * result.  sb keeps running, unchanged; read writes nothing to
	 * diff->path.  Only for a sandbox made from layers; others fail with
	 * DSEC_E_UNSUPPORTED.  One at a time per sandbox (a second fails with
	 * DSEC_E_INVALID, EBUSY).  Optional.  Async. (ABI 1, appended) */
	int (*snapshot)(void *sb, dsec_be_read_diff_fn read, void *read_arg, dsec_be_done_fn done,
			void *arg, struct dsec_err *err);
	/* ---- streaming exec (optional: NULL = "unsupported") ---- */
	/* Start a command in sb whose output the caller reads as it comes:
	 * *st gets its stdin and output ends (the caller reads them, writes
	 * stdin, and may stop reading: the command then blocks on a full
	 * pipe) and a handle.  req is read only during the call; its
	 * stdin_data and output_cap are ignored (the caller writes stdin
	 * itself).  The timeout kills the whole process tree as for exec.
	 * done comes once the command's status is known (res: exit_code,
	 * signal, timed_out, duration, oom_killed; out and err stay empty),
	 * which may be before the caller has read all of its output; after
	 * done the handle is gone.  destroy completes it with -ECANCELED.
	 * Async. (ABI 1, appended) */
	int (*exec_start)(void *sb, const struct dsec_exec_req *req,
			  const struct dsec_exec_stream_opts *opts, struct dsec_exec_stream *st,
			  struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
			  struct dsec_err *err);
	/* Send signal sig to the command's process group (the command and the
	 * children it did not move to a group of their own).  Synchronous,
	 * cheap; only between exec_start and its done. (ABI 1, appended) */
	int (*exec_signal)(void *sb, void *handle, int sig, struct dsec_err *err);
	/* Set the terminal size of a pty command (its foreground process
	 * group gets SIGWINCH); a command without a pty fails with
	 * DSEC_E_INVALID.  Synchronous, cheap; only between exec_start and its
	 * done. (ABI 1, appended) */
	int (*exec_resize)(void *sb, void *handle, uint16_t rows, uint16_t cols,
			   struct dsec_err *err);
	/* sizeof(struct dsec_be_spec) as the backend was built with it.  A
	 * create that sets a spec field past it is refused with "unsupported"
	 * instead of reaching a backend that would not apply it (a
	 * seccomp_deny ignored is a sandbox less tight than asked).  0, or a
	 * table that ends before this field: DSEC_BE_SPEC_MIN_SIZE.
	 * (ABI 1, appended) */
	uint32_t spec_size;
	/* The daemon is stopping: end every command in flight at once, each
	 * completing (its done called from the loop, never inside this call)
	 * with DSEC_E_SHUTTING_DOWN, and refuse new commands and sandboxes
	 * with it; destroy and fini follow.  Synchronous, cheap, called once.
	 * Optional: a backend without it has its commands cut when dsecd
	 * destroys their sandboxes. (ABI 1, appended) */
	void (*shutdown)(void *be);
	/* Fill *out (struct dsec_be_usage: its struct_size set, the rest
	 * zeroed by the caller) with what sb uses now.  Any time between
	 * create's done and destroy, also while paused; it does not resume
	 * sb.  Optional (NULL: "unsupported").  Async. (ABI 2) */
	int (*usage)(void *sb, struct dsec_be_usage *out, dsec_be_done_fn done, void *arg,
		     struct dsec_err *err);
	/* Checkpoint what of sb's processes a fork can carry (the container
	 * backend: its idle shell sessions, with criu) into dir, an empty
	 * directory the caller made and removes; sb's processes run on.  done
	 * with 0 and *carried the number of sessions (0: nothing to carry),
	 * or an error: DSEC_E_BUSY while a session runs a command.  Optional
	 * (NULL: a fork with processes is unsupported).  Async. (ABI 2,
	 * appended) */
	int (*checkpoint)(void *sb, const char *dir, unsigned *carried, dsec_be_done_fn done,
			  void *arg, struct dsec_err *err);
	/* Restore into sb, a sandbox made from a snapshot of the checkpointed
	 * one taken after the checkpoint, what checkpoint put in dir: each
	 * session under its name, its shell and what it runs as they were.
	 * dir is only read (several restores read it at once).  Async. (ABI 2,
	 * appended) */
	int (*restore)(void *sb, const char *dir, dsec_be_done_fn done, void *arg,
		       struct dsec_err *err);
};

/* An ops table and a spec as ABI 1 began, before the fields appended
 * since (ABI 2 kept that prefix): dsecd loads an ABI 2 table of at least
 * DSEC_BE_OPS_MIN_SIZE bytes and
 * sees the fields past its struct_size as NULL (operations it then reports
 * "unsupported") or 0. */
#define DSEC_BE_OPS_MIN_SIZE offsetof(struct dsec_be_ops, net_allow)
#define DSEC_BE_SPEC_MIN_SIZE offsetof(struct dsec_be_spec, layers)

/* The backend runs images from layers: dsecd acquires a create's image from
 * its store (fs3) and passes the mounted layers in dsec_be_spec.layers, the
 * image's env first in env, its cwd and user as defaults. */
#define DSEC_BE_CAP_LAYERS 0x1u
/* With DSEC_BE_CAP_LAYERS: the backend also gets each layer as a block
 * device (dsec_be_spec.layer_devs), e.g. to hand a VM as a disk. (ABI 2) */
#define DSEC_BE_CAP_LAYER_DEVS 0x2u
/* With DSEC_BE_CAP_LAYERS: the backend takes dsec_be_spec.protect, puts a
 * stand-in at each of those paths its sandbox's root lacks (nothing in the
 * sandbox can remove, replace or write it) and reports each open of one,
 * and each lookup below one, with host->sandbox_mark
 * (DSEC_BE_MARK_PROTECTED_PROBES; a call of 0 before the create's done
 * when spec.protect is not NULL).  (ABI 2) */
#define DSEC_BE_CAP_PROTECT 0x4u

#endif
