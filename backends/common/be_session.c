/* be_session.c - see be_session.h.
 *
 * One command goes to the shell's stdin as
 *
 *	__dsec_c='COMMAND'                  (quotes written as '\'')
 *	__dsec_r() { eval "$__dsec_c"; }
 *	if ( eval "__dsec_f() {
 *	$__dsec_c
 *	}" ) </dev/null >/dev/null 3>&-; then { __dsec_r; } </dev/null 3>&-;
 *	__dsec_s=$?; else __dsec_s=2; fi; command printf '%s %s %s %s\n'
 *	NONCE "$__dsec_s" "$PWD" NONCE >&3
 *
 * The subshell parses the command as the body of a function it never
 * calls, so a syntax error costs a subshell (status 2, the shell's message
 * on stderr) instead of killing dash, which exits on a syntax error in
 * eval.  The command then runs inside a function in the shell itself, so
 * cd, export, variables and functions persist, `return` ends only the
 * command and `exit` ends the shell (the helper reports its status and the
 * session is closed).  The record on fd 3 carries the status and $PWD; the
 * nonce on both ends frames a directory name whatever it contains.
 *
 * Timeout: every process of the session's group except the shell is
 * killed (the shell's pid on the host comes from the helper's "pid" line),
 * the shell reaps its child and writes its record; when no record comes
 * within SESS_GRACE of the end of that kill (the shell itself loops, or
 * exec'd the command), the whole group is killed and a new shell starts
 * in the last known directory: the reply says reset, and variables and
 * functions are gone.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "be_session.h"
#include "be_io.h"
#include "util.h"

#define SESS_GRACE 2.0			/* s for the shell to report after a kill */
#define SESS_START_TIMEOUT 15.0		/* s for a new shell to report ready */
#define SESS_RESET_TIMEOUT 10.0		/* s for the helper to exit after a reset kill */
#define SESS_DEFAULT_CAP (1u << 20)	/* output_cap 0 */
#define SESS_CMD_MAX (1u << 20)		/* bytes of one command */
#define SESS_NAME_MAX 64		/* bytes of a session name */

enum sess_state {
	SS_STARTING,		/* shell started, its first record not seen yet */
	SS_IDLE,		/* waiting for a command */
	SS_RUNNING,		/* a command runs */
	SS_KILLING,		/* timed out: the command's processes are being killed */
	SS_RESETTING,		/* the whole group is being killed; a new shell follows */
	SS_CLOSING,		/* out of the set; its group is being removed */
};

enum sess_req { RQ_NONE, RQ_OPEN, RQ_EXEC, RQ_CLOSE };

struct be_sess {
	struct be_sess_set *set;	/* owner; NULL once the set is gone */
	struct be_sess *next;		/* set->list */
	int refs;			/* the set's (until closing) + pool work in flight */
	enum sess_state state;		/* see above */
	char *name;			/* session name */
	char *shell;			/* shell program */
	char **env;			/* extra environment, NULL-terminated, or NULL */
	char *cwd;			/* last directory the shell reported */
	struct be_cg *cg;		/* the session's group */
	struct be_sess_proc p;		/* the running shell's pipes and helper */
	pid_t shell_pid;		/* the shell on the host, 0 until the helper says */
	ev_io in_w, out_w, err_w, mark_w, st_w;	/* on the pipes */
	ev_timer timer;			/* start, command timeout, then grace */
	struct dsec_buf in;		/* bytes not yet written to stdin */
	size_t in_off;			/* how many of them are written */
	struct dsec_buf mark;		/* marker pipe bytes */
	struct dsec_buf st;		/* helper status bytes */
	struct dsec_buf start_err;	/* what a starting shell wrote on stderr */
	char nonce[33];			/* the pending record's nonce, hex */
	uint64_t commands;		/* commands run */
	uint64_t denied;		/* refused calls the shell's helper reported */
	/* A kill still running on the pool could hit a new command or a new
	 * shell, so these wait for kills to reach 0 (settle()). */
	unsigned kills;			/* kill work in flight */
	bool pend_complete;		/* the command's result is ready */
	bool pend_fullkill;		/* a reset waits to kill the whole group */
	bool pend_spawn;		/* a reset waits to start the new shell */
	/* The request waiting for this session (one at a time). */
	enum sess_req rq;		/* which */
	dsec_be_done_fn done;		/* its done */
	void *arg;			/* and argument */
	char **name_out;		/* open: where the name goes */
	struct dsec_be_session_res *res;	/* exec: the caller's session result */
	struct dsec_exec_res *xres;	/* exec: the caller's command result (with res) */
	size_t cap;			/* exec: output cap */
	uint64_t t0;			/* exec: start, ns */
	bool reset;			/* exec: a new shell is starting for it */
	bool started_pending;		/* its first record came before the helper's "pid"
					 * line, which p.wait_pid waits for */
};

struct be_sess_set {
	struct ev_loop *loop;		/* the daemon's */
	const struct be_sess_ops *ops;	/* the backend's */
	void *ctx;			/* its argument */
	struct be_cg *parent;		/* the sandbox's group */
	char *sandbox;			/* sandbox id, for messages */
	struct be_sess *list;		/* open sessions */
	unsigned n;			/* their number */
	struct be_sess *dying;		/* closed ones whose group is being removed */
	unsigned max;			/* the most that may be open */
	uint64_t serial;		/* names of groups and of unnamed sessions */
};

static void sess_unref(struct be_sess *s)
{
	if (--s->refs > 0)
		return;
	if (s->cg)
		be_cg_free(s->cg);
	dsec_buf_free(&s->in);
	dsec_buf_free(&s->mark);
	dsec_buf_free(&s->st);
	dsec_buf_free(&s->start_err);
	dsec_strv_free(s->env);
	free(s->name);
	free(s->shell);
	free(s->cwd);
	free(s);
}

static struct be_sess *find(struct be_sess_set *set, const char *name)
{
	for (struct be_sess *s = set->list; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

static void unlink_sess(struct be_sess *s)
{
	struct be_sess_set *set = s->set;

	for (struct be_sess **pp = &set->list; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			set->n--;
			return;
		}
}

/* Stop every watcher and close our ends of the shell's pipes. */
static void close_proc(struct be_sess *s, struct ev_loop *loop)
{
	ev_io *ws[] = { &s->in_w, &s->out_w, &s->err_w, &s->mark_w, &s->st_w };
	int *fds[] = { &s->p.in, &s->p.out, &s->p.err, &s->p.mark, &s->p.st };

	for (size_t i = 0; i < DSEC_ARRAY_LEN(ws); i++) {
		ev_io_stop(loop, ws[i]);
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	ev_timer_stop(loop, &s->timer);
}

/* Hand the waiting request its completion. */
static void complete(struct be_sess *s, int rc, const struct dsec_err *err)
{
	struct be_sess_set *set = s->set;
	enum sess_req rq = s->rq;

	if (rq == RQ_NONE)
		return;
	if (rq == RQ_EXEC && s->res)
		s->xres->duration = (double)(dsec_now_ns() - s->t0) / 1e9;
	s->rq = RQ_NONE;
	s->pend_complete = false;
	s->res = NULL;
	s->xres = NULL;
	s->name_out = NULL;
	s->reset = false;
	set->ops->defer(set->ctx, s->done, s->arg, rc, err);
}

/* The command ends with its shell (killed, or a new one would not start):
 * report it as killed, the session as ended. */
static void complete_ended(struct be_sess *s)
{
	s->xres->exit_code = -1;
	s->xres->signal = SIGKILL;
	s->res->cwd = xstrdup(s->cwd ? s->cwd : "/");
	s->res->ended = true;
	complete(s, 0, NULL);
}

/* ---- the group: kill the command's processes, or everything ------------ */

struct sess_work {
	struct be_sess *s;		/* holds a ref */
	pid_t keep;			/* spare this pid (the shell); 0 = none */
	bool remove;			/* rmdir the group afterwards */
};

/* SIGKILL everything in the group but keep, until nothing else is left
 * (a process may fork between the read and the kill: look again). */
static void kill_work(void *arg)
{
	struct sess_work *w = arg;
	struct be_cg *cg = w->s->cg;

	if (!cg || cg->mode == BE_CG_NONE || cg->n == 0)
		return;
	if (!w->keep)
		be_cg_kill(cg);
	else
		be_cg_kill_but(cg, w->keep);
	if (w->remove)
		be_cg_remove(cg);
}

static void settle(struct be_sess *s);

static void kill_done(void *arg)
{
	struct sess_work *w = arg;
	struct be_sess *s = w->s;

	free(w);
	if (--s->kills == 0 && s->set && s->state != SS_CLOSING)
		settle(s);
	sess_unref(s);
}

/* Kill the group's processes but keep (0: all, -1: the shell's pid is not
 * known, all too); what follows comes from the shell's pipes (its record,
 * or the helper's exit status). */
static void kill_group(struct be_sess *s, pid_t keep)
{
	struct sess_work *w = xcalloc(1, sizeof(*w));

	w->s = s;
	w->keep = keep;
	s->refs++;
	s->kills++;
	s->set->ops->submit(s->set->ctx, kill_work, kill_done, w);
}

/* Out of the set for good: kill what is left, remove the group, then
 * complete a close request (if that is what is waiting). */
static void close_done(void *arg)
{
	struct sess_work *w = arg;
	struct be_sess *s = w->s;

	if (s->set) {
		for (struct be_sess **pp = &s->set->dying; *pp; pp = &(*pp)->next)
			if (*pp == s) {
				*pp = s->next;
				break;
			}
		if (s->rq == RQ_CLOSE)
			complete(s, 0, NULL);
	}
	sess_unref(s);
	free(w);
}

static void sess_end(struct be_sess *s)
{
	struct be_sess_set *set = s->set;
	struct sess_work *w;

	if (s->state == SS_CLOSING)
		return;
	if (s->rq == RQ_EXEC && s->pend_complete) {
		/* Its result was waiting for a kill; the shell is gone now. */
		s->res->ended = true;
		complete(s, 0, NULL);
	}
	s->state = SS_CLOSING;
	close_proc(s, set->loop);
	if (s->p.pid > 0)
		kill(s->p.pid, SIGKILL);	/* the backend reaps it */
	s->p.pid = 0;
	unlink_sess(s);
	s->next = set->dying;
	set->dying = s;
	w = xcalloc(1, sizeof(*w));
	w->s = s;
	w->remove = true;
	/* The set's ref moves to this work. */
	set->ops->submit(set->ctx, kill_work, close_done, w);
}

/* ---- the shell's pipes -------------------------------------------------- */

static void start_shell(struct be_sess *s, struct dsec_err *err, int *rc);
static void sess_end(struct be_sess *s);

static void write_in(struct be_sess *s)
{
	while (s->in_off < s->in.len) {
		ssize_t n = write(s->p.in, s->in.data + s->in_off, s->in.len - s->in_off);

		if (n > 0) {
			s->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			ev_io_start(s->set->loop, &s->in_w);
			return;
		}
		break;	/* EPIPE: the shell is gone; its status tells the rest */
	}
	ev_io_stop(s->set->loop, &s->in_w);
	dsec_buf_reset(&s->in);
	s->in_off = 0;
}

static void in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	write_in(dsec_container_of(w, struct be_sess, in_w));
}

static void new_nonce(struct be_sess *s)
{
	unsigned char r[16];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			/* No entropy source: the time and an address still differ per command. */
			uint64_t t = dsec_now_ns() ^ (uint64_t)(uintptr_t)s ^ s->commands;
			memcpy(r, &t, sizeof(t));
			memcpy(r + 8, &s->commands, sizeof(s->commands));
			break;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(s->nonce + 2 * i, 3, "%02x", r[i]);
}

/* Queue the record line for the current nonce after the text in s->in. */
static void add_record(struct be_sess *s, const char *status)
{
	dsec_buf_addf(&s->in, "command printf '%%s %%s %%s %%s\\n' %s \"%s\" \"$PWD\" %s >&3\n",
		      s->nonce, status, s->nonce);
}

static void drain_out(struct be_sess *s)
{
	struct dsec_exec_res *r = s->xres;
	struct dsec_buf junk;
	bool t;

	dsec_buf_init(&junk);
	if (s->p.out >= 0)
		be_drain(s->p.out, r ? s->cap : 0, r ? &r->out : &junk,
			 r ? &r->out_truncated : &t);
	if (s->p.err >= 0)
		be_drain(s->p.err, r ? s->cap : 0, r ? &r->err : &junk,
			 r ? &r->err_truncated : &t);
	dsec_buf_free(&junk);
}

/* Output of a command is kept; between commands it is read and dropped. */
static void out_pipe(struct be_sess *s, ev_io *w, int *fd, bool is_err)
{
	struct dsec_exec_res *r = s->rq == RQ_EXEC && s->res && !s->reset ? s->xres : NULL;
	struct dsec_buf junk;
	bool t, eof;

	dsec_buf_init(&junk);
	if (!r && is_err && s->state == SS_STARTING)
		eof = be_drain(*fd, 512, &s->start_err, &t);	/* for the error message */
	else
		eof = be_drain(*fd, r ? s->cap : 0, r ? (is_err ? &r->err : &r->out) : &junk,
			       r ? (is_err ? &r->err_truncated : &r->out_truncated) : &t);
	dsec_buf_free(&junk);
	if (eof) {
		ev_io_stop(s->set->loop, w);
		close(*fd);
		*fd = -1;
	}
}

static void out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct be_sess *s = dsec_container_of(w, struct be_sess, out_w);

	out_pipe(s, w, &s->p.out, false);
}

static void err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct be_sess *s = dsec_container_of(w, struct be_sess, err_w);

	out_pipe(s, w, &s->p.err, true);
}

static int st_read(struct be_sess *s);

/* The shell started: its first record came (and the helper's "pid" line,
 * when p.wait_pid). */
static void started(struct be_sess *s)
{
	ev_timer_stop(s->set->loop, &s->timer);
	s->state = SS_IDLE;
	if (s->rq == RQ_OPEN) {
		*s->name_out = xstrdup(s->name);
		complete(s, 0, NULL);
	} else if (s->rq == RQ_EXEC) {
		/* A new shell after a reset: the command it replaces timed out. */
		s->xres->exit_code = -1;
		s->xres->signal = SIGKILL;
		s->res->cwd = xstrdup(s->cwd);
		s->res->reset = true;
		complete(s, 0, NULL);
	}
}

/* The shell wrote its record: "NONCE STATUS CWD NONCE\n". */
static void got_record(struct be_sess *s, int status, const char *cwd, size_t cwdlen)
{
	struct ev_loop *loop = s->set->loop;

	free(s->cwd);
	s->cwd = xstrndup(cwd, cwdlen);
	if (s->state == SS_STARTING) {
		/* A shell its helper restored runs before the helper is done
		 * (criu.c): it has started once the helper says so too. */
		while (s->p.wait_pid && !s->shell_pid && s->p.st >= 0 && st_read(s) > 0)
			;
		if (s->p.wait_pid && !s->shell_pid)
			s->started_pending = true;
		else
			started(s);
		return;
	}
	ev_timer_stop(loop, &s->timer);
	if (s->state != SS_RUNNING && s->state != SS_KILLING)
		return;
	/* The helper counted the command's refused calls before the command
	 * went on, so before this record: their "sc" lines are there now
	 * (but those it held back, be_session.h). */
	while (s->p.st >= 0 && st_read(s) > 0)
		;
	s->state = SS_IDLE;
	drain_out(s);
	s->xres->exit_code = status;
	s->xres->signal = 0;
	s->res->cwd = xstrdup(s->cwd);
	if (s->kills)
		s->pend_complete = true;	/* busy until the kill is over */
	else
		complete(s, 0, NULL);
}

static void mark_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct be_sess *s = dsec_container_of(w, struct be_sess, mark_w);
	char buf[4096], head[40], tail[40];
	ssize_t n = read(s->p.mark, buf, sizeof(buf));
	const char *a, *b;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* The shell is gone; the helper's status says how. */
		ev_io_stop(loop, w);
		close(s->p.mark);
		s->p.mark = -1;
		return;
	}
	if (s->mark.len < (64u << 10))
		dsec_buf_add(&s->mark, buf, (size_t)n);
	snprintf(head, sizeof(head), "%s ", s->nonce);
	snprintf(tail, sizeof(tail), " %s\n", s->nonce);
	if (!(a = memmem(s->mark.data, s->mark.len, head, strlen(head))))
		return;
	a += strlen(head);
	if (!(b = memmem(a, s->mark.len - (size_t)(a - s->mark.data), tail, strlen(tail))))
		return;
	{
		char *end;
		long st = strtol(a, &end, 10);
		const char *cwd = *end == ' ' ? end + 1 : end;

		if (cwd > b)
			cwd = b;
		got_record(s, (int)st, cwd, (size_t)(b - cwd));
	}
	dsec_buf_reset(&s->mark);
}

/* The helper exited: the shell is gone. */
/* After a reset: a new shell in the last directory for the waiting command. */
static void respawn(struct be_sess *s)
{
	struct dsec_err err;
	int rc = 0;

	start_shell(s, &err, &rc);
	if (rc == 0)
		return;
	/* No new shell: the command timed out and the session ends. */
	complete_ended(s);
	sess_end(s);
}

/* No kill is in flight any more: do what waited for that. */
static void settle(struct be_sess *s)
{
	if (s->state == SS_KILLING) {
		/* The command's processes are gone, however long the pool took:
		 * now the shell has SESS_GRACE to report. */
		ev_timer_set(&s->timer, SESS_GRACE, 0);
		ev_timer_start(s->set->loop, &s->timer);
	} else if (s->pend_fullkill) {
		s->pend_fullkill = false;
		kill_group(s, 0);
	} else if (s->pend_spawn) {
		s->pend_spawn = false;
		respawn(s);
	} else if (s->pend_complete) {
		s->pend_complete = false;
		complete(s, 0, NULL);
	}
}

/* The shell's helper counted n refused calls so far (be_session.h). */
static void got_denied(struct be_sess *s, uint64_t n)
{
	uint64_t d = n - s->denied;

	if (n <= s->denied)
		return;
	s->denied = n;
	if (s->set->ops->denied)
		s->set->ops->denied(s->set->ctx, d);
	if (s->rq == RQ_EXEC && s->res && (s->state == SS_RUNNING || s->state == SS_KILLING)) {
		d += s->xres->seccomp_denied;
		s->xres->seccomp_denied = d < UINT32_MAX ? (uint32_t)d : UINT32_MAX;
	}
}

/* Takes the "sc N" lines out of the status bytes (they come for as long as
 * the shell lives: kept, they would fill the buffer). */
static void take_counts(struct be_sess *s)
{
	char *p = s->st.data, *nl;
	uint64_t n;

	while (p && (p = strstr(p, "sc ")) && (nl = strchr(p, '\n'))) {
		if (p != s->st.data && p[-1] != '\n') {
			p = nl + 1;
			continue;
		}
		if (sscanf(p, "sc %" SCNu64, &n) == 1)
			got_denied(s, n);
		memmove(p, nl + 1, s->st.len - (size_t)(nl + 1 - s->st.data) + 1);
		s->st.len -= (size_t)(nl + 1 - p);
	}
}

static void shell_gone(struct be_sess *s)
{
	const char *line = s->st.data ? s->st.data : "", *stl = strstr(line, "st ");
	struct dsec_err err;
	int wst = 0, e = 0;
	uint64_t n;
	bool have_st = stl && (stl == line || stl[-1] == '\n') && sscanf(stl, "st %d", &wst) == 1;
	const char *el = strstr(line, "err ");

	if (have_st && sscanf(stl, "st %*d %" SCNu64, &n) == 1)
		got_denied(s, n);

	s->p.pid = 0;
	switch (s->state) {
	case SS_RESETTING:
		drain_out(s);
		s->reset = true;
		close_proc(s, s->set->loop);
		if (s->kills)
			s->pend_spawn = true;
		else
			respawn(s);
		return;
	case SS_STARTING:
		if (el && sscanf(el, "err %d", &e) == 1 && strchr(el + 4, ' ')) {
			const char *msg = strchr(el + 4, ' ') + 1;

			dsec_err_setc(&err, s->set->ops->start_code(e, msg), e,
				      "cannot start shell '%s' in sandbox '%s': %.*s", s->shell,
				      s->set->sandbox, (int)strcspn(msg, "\n"), msg);
		} else {
			struct dsec_buf *eb = &s->start_err;
			bool t = false;

			if (s->p.err >= 0)
				be_drain(s->p.err, 512, eb, &t);
			e = have_st && WIFEXITED(wst) && WEXITSTATUS(wst) == 127 ? ENOENT : EIO;
			dsec_err_setc(&err, e == ENOENT ? DSEC_E_NOT_FOUND : DSEC_E_BACKEND, e,
				      "cannot start shell '%s' in sandbox '%s': it exited with "
				      "status %d%s%.*s", s->shell, s->set->sandbox,
				      have_st && WIFEXITED(wst) ? WEXITSTATUS(wst) : -1,
				      eb->len ? ": " : "", (int)strcspn(eb->data ? eb->data : "", "\n"),
				      eb->data ? eb->data : "");
		}
		if (s->rq == RQ_EXEC && strcmp(s->cwd, "/")) {
			/* The shell replacing a stuck one died, maybe because its
			 * directory is gone: try once more in /. */
			free(s->cwd);
			s->cwd = xstrdup("/");
			close_proc(s, s->set->loop);
			respawn(s);
			return;
		}
		if (s->rq == RQ_EXEC)
			complete_ended(s);	/* no shell will start */
		else
			complete(s, -e, &err);
		sess_end(s);
		return;
	case SS_RUNNING:
	case SS_KILLING:
		drain_out(s);
		if (have_st && WIFEXITED(wst)) {
			s->xres->exit_code = WEXITSTATUS(wst);
		} else {
			s->xres->exit_code = -1;
			s->xres->signal = have_st && WIFSIGNALED(wst) ? WTERMSIG(wst) : 0;
		}
		s->res->cwd = xstrdup(s->cwd ? s->cwd : "/");
		s->res->ended = true;
		complete(s, 0, NULL);
		sess_end(s);
		return;
	case SS_IDLE:
		sess_end(s);
		return;
	case SS_CLOSING:
		return;
	}
}

/* Reads what the helper's status pipe holds: 1 when it read some, 0 at
 * its end, -1 when there is nothing now. */
static int st_read(struct be_sess *s)
{
	char buf[1024];
	ssize_t n = read(s->p.st, buf, sizeof(buf));
	const char *pl;

	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	if (s->st.len < 4096)
		dsec_buf_add(&s->st, buf, (size_t)n);
	take_counts(s);
	if (!s->shell_pid && (pl = strstr(s->st.data, "pid ")) && strchr(pl, '\n'))
		s->shell_pid = (pid_t)atoi(pl + 4);
	if (s->shell_pid && s->started_pending && s->state == SS_STARTING) {
		s->started_pending = false;
		started(s);
	}
	return 1;
}

static void st_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct be_sess *s = dsec_container_of(w, struct be_sess, st_w);
	int rc = st_read(s);

	if (rc > 0 || (rc < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	ev_io_stop(loop, w);
	close(s->p.st);
	s->p.st = -1;
	shell_gone(s);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct be_sess *s = dsec_container_of(w, struct be_sess, timer);

	switch (s->state) {
	case SS_RUNNING:
		/* Kill the command's processes; the shell should report soon. */
		s->xres->timed_out = true;
		s->state = SS_KILLING;
		kill_group(s, s->shell_pid ? s->shell_pid : -1);
		return;		/* the grace starts when the kill is done (settle) */
	case SS_KILLING:
		/* The shell itself is stuck: kill it all; when the helper reports
		 * the shell's end, a new one starts (shell_gone). */
		s->state = SS_RESETTING;
		s->reset = true;
		if (s->kills)
			s->pend_fullkill = true;
		else
			kill_group(s, 0);
		ev_timer_set(w, SESS_RESET_TIMEOUT, 0);
		ev_timer_start(loop, w);
		return;
	case SS_RESETTING:
		/* The helper should have seen its shell die: make it go. */
		if (s->p.pid > 0)
			kill(s->p.pid, SIGKILL);
		return;
	case SS_STARTING: {
		struct dsec_err e;

		/* The shell never came up: the session ends. */
		if (s->rq == RQ_EXEC) {
			complete_ended(s);
		} else {
			dsec_err_setc(&e, DSEC_E_TIMEOUT, ETIMEDOUT,
				      "shell '%s' of session '%s' did not start within %.0f s",
				      s->shell, s->name, SESS_START_TIMEOUT);
			complete(s, -ETIMEDOUT, &e);
		}
		sess_end(s);
		return;
	}
	default:
		return;
	}
}

/* Start a shell for s in s->cwd and send it the first record. */
static void start_shell(struct be_sess *s, struct dsec_err *err, int *rc)
{
	struct be_sess_set *set = s->set;
	struct ev_loop *loop = set->loop;
	const char *argv[] = { s->shell, NULL };
	int mk[2];

	s->shell_pid = 0;
	s->started_pending = false;
	s->p.wait_pid = false;
	dsec_buf_reset(&s->start_err);
	dsec_buf_reset(&s->mark);
	dsec_buf_reset(&s->st);
	s->denied = 0;		/* a new helper counts from 0 */
	dsec_buf_reset(&s->in);
	s->in_off = 0;
	if (pipe2(mk, O_CLOEXEC) < 0) {
		*rc = dsec_err_set(err, errno, "cannot make a pipe: %s", strerror(errno));
		return;
	}
	*rc = set->ops->spawn(set->ctx, s->cg, s->cwd, (const char *const *)s->env, argv, mk[1],
			      &s->p, err);
	close(mk[1]);
	if (*rc < 0) {
		close(mk[0]);
		return;
	}
	s->p.mark = mk[0];
	dsec_set_nonblock(s->p.in, true);
	dsec_set_nonblock(s->p.out, true);
	dsec_set_nonblock(s->p.err, true);
	dsec_set_nonblock(s->p.mark, true);
	dsec_set_nonblock(s->p.st, true);
	ev_io_init(&s->in_w, in_cb, s->p.in, EV_WRITE);
	ev_io_init(&s->out_w, out_cb, s->p.out, EV_READ);
	ev_io_init(&s->err_w, err_cb, s->p.err, EV_READ);
	ev_io_init(&s->mark_w, mark_cb, s->p.mark, EV_READ);
	ev_io_init(&s->st_w, st_cb, s->p.st, EV_READ);
	ev_io_start(loop, &s->out_w);
	ev_io_start(loop, &s->err_w);
	ev_io_start(loop, &s->mark_w);
	ev_io_start(loop, &s->st_w);
	s->state = SS_STARTING;
	new_nonce(s);
	add_record(s, "0");
	write_in(s);
	ev_timer_set(&s->timer, SESS_START_TIMEOUT, 0);
	ev_timer_start(loop, &s->timer);
}

/* ---- the set and the operations ----------------------------------------- */

struct be_sess_set *be_sess_set_new(struct ev_loop *loop, const struct be_sess_ops *ops,
				    void *ctx, struct be_cg *parent, unsigned max,
				    const char *sandbox)
{
	struct be_sess_set *set = xcalloc(1, sizeof(*set));

	set->loop = loop;
	set->ops = ops;
	set->ctx = ctx;
	set->parent = parent;
	set->max = max;
	set->sandbox = xstrdup(sandbox ? sandbox : "");
	return set;
}

void be_sess_set_free(struct be_sess_set *set)
{
	if (!set)
		return;
	while (set->list) {
		struct be_sess *s = set->list;
		struct dsec_err e;

		set->list = s->next;
		dsec_err_setc(&e, DSEC_E_NOT_FOUND, ECANCELED, "sandbox '%s' was destroyed",
			      set->sandbox);
		complete(s, -ECANCELED, &e);
		close_proc(s, set->loop);
		if (s->p.pid > 0)
			kill(s->p.pid, SIGKILL);
		s->state = SS_CLOSING;
		s->set = NULL;
		sess_unref(s);
	}
	/* Closing ones: their pool work holds them and finds no set. */
	while (set->dying) {
		struct be_sess *s = set->dying;

		set->dying = s->next;
		complete(s, 0, NULL);
		s->set = NULL;
	}
	free(set->sandbox);
	free(set);
}

static bool name_ok(const char *n)
{
	size_t len = strlen(n);

	return len > 0 && len <= SESS_NAME_MAX &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

int be_sess_open(struct be_sess_set *set, const struct dsec_session_spec *spec,
		 const char *default_cwd, char **name, dsec_be_done_fn done, void *arg,
		 struct dsec_err *err)
{
	char gname[32], auto_name[32];
	struct be_sess *s;
	int rc = 0;

	if (spec->name && !name_ok(spec->name))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "session name '%.80s' is not 1 to %d of [A-Za-z0-9._-]",
				     spec->name, SESS_NAME_MAX);
	if (spec->name && find(set, spec->name))
		return dsec_err_setc(err, DSEC_E_EXISTS, EEXIST,
				     "session '%s' is already open in sandbox '%s'", spec->name,
				     set->sandbox);
	if (set->n >= set->max)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
				     "sandbox '%s' has %u sessions open, its maximum", set->sandbox,
				     set->n);
	if (spec->shell && (!*spec->shell || strlen(spec->shell) > 4096))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "shell must be a program name");
	set->serial++;
	if (!spec->name) {
		do
			snprintf(auto_name, sizeof(auto_name), "s%llu",
				 (unsigned long long)set->serial++);
		while (find(set, auto_name));
	}
	snprintf(gname, sizeof(gname), "s.%llu", (unsigned long long)set->serial);
	s = xcalloc(1, sizeof(*s));
	s->set = set;
	s->refs = 1;
	s->name = xstrdup(spec->name ? spec->name : auto_name);
	s->shell = xstrdup(spec->shell ? spec->shell : "/bin/sh");
	s->cwd = xstrdup(spec->cwd && *spec->cwd ? spec->cwd : default_cwd ? default_cwd : "/");
	if (spec->env) {
		size_t n = dsec_strv_len(spec->env);

		s->env = xcalloc(n + 1, sizeof(*s->env));
		for (size_t i = 0; i < n; i++)
			s->env[i] = xstrdup(spec->env[i]);
	}
	s->p.in = s->p.out = s->p.err = s->p.mark = s->p.st = -1;
	dsec_buf_init(&s->in);
	dsec_buf_init(&s->mark);
	dsec_buf_init(&s->st);
	dsec_buf_init(&s->start_err);
	ev_init(&s->timer, timer_cb);
	if (set->parent && (rc = be_cg_child_light(set->parent, gname, true, &s->cg, err)) < 0) {
		sess_unref(s);
		return rc;
	}
	start_shell(s, err, &rc);
	if (rc < 0) {
		if (s->cg) {
			be_cg_remove(s->cg);	/* empty: nothing started in it */
		}
		sess_unref(s);
		return rc;
	}
	s->rq = RQ_OPEN;
	s->done = done;
	s->arg = arg;
	s->name_out = name;
	s->next = set->list;
	set->list = s;
	set->n++;
	return 0;
}

/* Single-quote text for the shell: ' becomes '\''. */
static void add_quoted(struct dsec_buf *b, const char *t)
{
	dsec_buf_add(b, "'", 1);
	for (const char *q; (q = strchr(t, '\'')); t = q + 1) {
		dsec_buf_add(b, t, (size_t)(q - t));
		dsec_buf_add(b, "'\\''", 4);
	}
	dsec_buf_add(b, t, strlen(t));
	dsec_buf_add(b, "'", 1);
}

int be_sess_exec(struct be_sess_set *set, const char *name, const struct dsec_exec_req *req,
		 struct dsec_exec_res *xres, struct dsec_be_session_res *res, dsec_be_done_fn done,
		 void *arg, struct dsec_err *err)
{
	struct be_sess *s = find(set, name);
	struct ev_loop *loop = set->loop;

	if (!s)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, set->sandbox);
	if (!req->code || req->argv)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "a session command is one shell command line ('cmd')");
	if (strlen(req->code) > SESS_CMD_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "a session command is longer than %u bytes", SESS_CMD_MAX);
	if (s->state != SS_IDLE || s->rq != RQ_NONE)
		return dsec_err_setc(err, DSEC_E_BUSY, EBUSY,
				     "session '%s' of sandbox '%s' is %s: one command at a time",
				     s->name, set->sandbox,
				     s->state == SS_STARTING ? "still starting" : "running a command");
	/* Output background processes wrote while idle is not this command's. */
	drain_out(s);
	memset(res, 0, sizeof(*res));
	memset(xres, 0, sizeof(*xres));
	xres->exit_code = -1;
	s->rq = RQ_EXEC;
	s->done = done;
	s->arg = arg;
	s->res = res;
	s->xres = xres;
	s->cap = req->output_cap ? req->output_cap : SESS_DEFAULT_CAP;
	s->t0 = dsec_now_ns();
	s->commands++;
	s->state = SS_RUNNING;
	new_nonce(s);
	dsec_buf_reset(&s->mark);
	dsec_buf_add(&s->in, "__dsec_c=", 9);
	add_quoted(&s->in, req->code);
	dsec_buf_addf(&s->in,
		      "\n__dsec_r() { eval \"$__dsec_c\"; }\n"
		      "if ( eval \"__dsec_f() {\n$__dsec_c\n}\" ) </dev/null >/dev/null 3>&-; "
		      "then { __dsec_r; } </dev/null 3>&-; __dsec_s=$?; else __dsec_s=2; fi; ");
	add_record(s, "$__dsec_s");
	write_in(s);
	ev_timer_set(&s->timer, req->timeout > 0 ? req->timeout : 300, 0);
	ev_timer_start(loop, &s->timer);
	return 0;
}

int be_sess_close(struct be_sess_set *set, const char *name, dsec_be_done_fn done, void *arg,
		  struct dsec_err *err)
{
	struct be_sess *s = find(set, name);

	if (!s)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, set->sandbox);
	if (s->rq != RQ_NONE) {
		struct dsec_err e;

		dsec_err_setc(&e, DSEC_E_NOT_FOUND, ECANCELED, "session '%s' was closed", s->name);
		complete(s, -ECANCELED, &e);
	}
	s->rq = RQ_CLOSE;
	s->done = done;
	s->arg = arg;
	sess_end(s);
	return 0;
}

void be_sess_list(struct be_sess_set *set,
		  void (*fn)(void *arg, const struct dsec_session_info *info), void *arg)
{
	for (struct be_sess *s = set ? set->list : NULL; s; s = s->next) {
		struct dsec_session_info i = {
			.name = s->name,
			.shell = s->shell,
			.cwd = s->cwd ? s->cwd : "",
			.running = s->rq == RQ_EXEC,
			.commands = s->commands,
		};

		fn(arg, &i);
	}
}

void be_sess_each(struct be_sess_set *set,
		  void (*fn)(void *arg, const struct be_sess_view *v), void *arg)
{
	for (struct be_sess *s = set ? set->list : NULL; s; s = s->next) {
		struct be_sess_view v = {
			.name = s->name,
			.shell = s->shell_pid,
			.idle = s->state == SS_IDLE && s->rq == RQ_NONE,
			.fds = { s->p.in, s->p.out, s->p.err, s->p.mark },
		};

		fn(arg, &v);
	}
}
