/* be_session.h - named persistent shell sessions for a backend that can
 * start a process inside a sandbox with pipes it chooses (container).
 *
 * A session is one shell process inside the sandbox.  Its stdin, stdout
 * and stderr are pipes the backend holds on the event loop, plus a marker
 * pipe that is the shell's fd 3 and nobody else's.  Each command is sent
 * on stdin wrapped so that the shell, after it, writes one record
 * "NONCE STATUS CWD NONCE\n" on fd 3, NONCE being 128 random bits fresh
 * for the command; the command itself runs with fd 3 closed and stdin
 * from /dev/null, so nothing it prints or reads can end it early or eat
 * the next command.  When the record arrives, stdout and stderr are
 * drained and the command is complete.
 *
 * A set holds the sessions of one sandbox.  The backend supplies the
 * operations below; everything here runs on the loop and never blocks it
 * (cgroup kills and removals go to the backend's pool through submit).
 * Each session has a cgroup of its own below the sandbox's, named
 * "s.<serial>"; closing the session or the end of its shell kills what
 * is left in it and removes it.
 */
#ifndef BE_SESSION_H
#define BE_SESSION_H

#include <stdbool.h>
#include <sys/types.h>

#include "backend.h"
#include "be_cgroup.h"

struct ev_loop;
struct be_sess_set;

/* Our ends of a started shell; spawn fills every field. */
struct be_sess_proc {
	pid_t pid;		/* the helper running the shell (a child of dsecd, which
				 * the backend reaps) */
	int in;			/* write end of the shell's stdin */
	int out;		/* read end of its stdout */
	int err;		/* read end of its stderr */
	int mark;		/* read end of the marker pipe (fd 3 of the shell) */
	int st;			/* read end of the helper's status pipe: "pid N", then
				 * "st WAITSTATUS" or "err ERRNO message"; a helper
				 * that counts the system calls the shell's seccomp
				 * filter refuses writes "sc N" lines (its count so
				 * far) between them, and "st WAITSTATUS N" */
	bool wait_pid;		/* the shell has started only once the helper's "pid"
				 * line came too, not at its first record alone (a
				 * shell criu restores runs before criu and its helper
				 * are done); the spawn sets it, false otherwise */
};

/* What the backend does for the sessions of one sandbox; ctx is its own. */
struct be_sess_ops {
	/* Start argv (the shell) in the sandbox, in group cg, in directory
	 * cwd, with the extra environment env (may be NULL), marker pipe
	 * mark_w as its fd 3.  Fills *p with the other pipes.  Does not
	 * block.  0 or -errno with *err. */
	int (*spawn)(void *ctx, struct be_cg *cg, const char *cwd, const char *const *env,
		     const char *const *argv, int mark_w, struct be_sess_proc *p,
		     struct dsec_err *err);
	/* Run work(arg) off the loop, then done(arg) on the loop.  The
	 * sandbox must outlive the done call. */
	void (*submit)(void *ctx, void (*work)(void *), void (*done)(void *), void *arg);
	/* Report a completion later, from the loop (never inside a call). */
	void (*defer)(void *ctx, dsec_be_done_fn done, void *arg, int rc,
		      const struct dsec_err *err);
	/* The code of a shell that could not start, from the errno and
	 * message of the helper's "err ERRNO message" status line. */
	enum dsec_code (*start_code)(int e, const char *msg);
	/* n more system calls of a shell's were refused (its helper's "sc"
	 * lines); they also go to the result of the command running then.
	 * May be NULL. */
	void (*denied)(void *ctx, uint64_t n);
};

/* A set for one sandbox: sessions' groups go below parent (not owned),
 * at most max of them open at once, sandbox is its id for messages. */
struct be_sess_set *be_sess_set_new(struct ev_loop *loop, const struct be_sess_ops *ops,
				    void *ctx, struct be_cg *parent, unsigned max,
				    const char *sandbox);
/* The sandbox goes: running commands complete with -ECANCELED, shells are
 * killed (their groups die with the sandbox's, which the backend kills and
 * removes), the set is freed.  Pool work in flight finishes on its own. */
void be_sess_set_free(struct be_sess_set *set);

/* The backend's ops, with the contracts of dsec_be_ops (backend.h).
 * default_cwd is used when spec->cwd is NULL. */
int be_sess_open(struct be_sess_set *set, const struct dsec_session_spec *spec,
		 const char *default_cwd, char **name,
		 dsec_be_done_fn done, void *arg, struct dsec_err *err);
int be_sess_exec(struct be_sess_set *set, const char *name, const struct dsec_exec_req *req,
		 struct dsec_exec_res *res, struct dsec_be_session_res *sres, dsec_be_done_fn done,
		 void *arg, struct dsec_err *err);
int be_sess_close(struct be_sess_set *set, const char *name, dsec_be_done_fn done, void *arg,
		  struct dsec_err *err);
void be_sess_list(struct be_sess_set *set,
		  void (*fn)(void *arg, const struct dsec_session_info *info), void *arg);

/* A session as a checkpoint sees it (container-criu): its name, its shell
 * on the host (0 until the helper said), whether it is idle (no command
 * running, none starting) and dsecd's ends of its stdin, stdout, stderr
 * and marker pipe (the pipes' inodes name the shell's ends too). */
struct be_sess_view {
	const char *name;	/* session name */
	pid_t shell;		/* the shell's pid on the host, 0 = not known yet */
	bool idle;		/* waiting for a command */
	int fds[4];		/* in, out, err, mark: dsecd's ends */
};

/* Calls fn for each open session of set (NULL: none), on the loop. */
void be_sess_each(struct be_sess_set *set,
		  void (*fn)(void *arg, const struct be_sess_view *v), void *arg);

#endif
