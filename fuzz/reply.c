/* reply.c - libFuzzer target: libdsec's decoding of every op's reply.
 *
 * The first byte of the input picks a libdsec call (every call that sends
 * a request); the rest is the reply frame a fake daemon in this process
 * (an nng REP socket on inproc://, answering from its own thread) sends
 * back to it.  Checked, besides what ASan and UBSan see: a call either
 * succeeds with what it documents (an id, a name, an array of the count it
 * says) or fails with a code that is an error and a message of valid
 * UTF-8; whatever it returns frees cleanly.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "dsec.h"
#include "proto.h"

#define URL "inproc://fuzz-reply"
#define SID "fz:0000000000000001"

static nng_socket rep;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const void *answer;	/* the reply the next request gets */
static size_t answer_len;
static struct dsec_client *client;

static void *serve(void *arg)
{
	for (;;) {
		nng_msg *m;

		if (nng_recvmsg(rep, &m, 0) != 0)
			continue;
		nng_msg_clear(m);	/* keeps the REP header */
		pthread_mutex_lock(&mu);
		int rc = nng_msg_append(m, answer, answer_len);
		pthread_mutex_unlock(&mu);
		if (rc != 0 || nng_sendmsg(rep, m, 0) != 0)
			nng_msg_free(m);
	}
	return NULL;
}

static void init(void)
{
	struct dsec_err err;
	pthread_t th;

	if (nng_rep0_open(&rep) != 0 || nng_listen(rep, URL, NULL, 0) != 0)
		DSEC_BUG("cannot listen on %s", URL);
	nng_socket_set_size(rep, NNG_OPT_RECVMAXSZ, 0);
	pthread_create(&th, NULL, serve, NULL);
	pthread_detach(th);
	if (dsec_connect(&client, URL, &err) < 0)
		DSEC_BUG("cannot connect: %s", err.msg);
	dsec_set_timeout(client, 30);
}

/* A failure as documented: a code that is an error, a UTF-8 message. */
static void check_err(int rc, const struct dsec_err *err)
{
	char copy[2 * DSEC_ERR_MSG_MAX];
	size_t n;

	if (rc >= 0)
		return;
	if (err->code == DSEC_E_OK || (unsigned)err->code >= DSEC_E__COUNT)
		DSEC_BUG("a call failed with code %d", (int)err->code);
	n = strnlen(err->msg, sizeof(err->msg));
	if (n >= sizeof(err->msg) || dsec_utf8_clean(copy, sizeof(copy), err->msg, n) != n ||
	    memcmp(copy, err->msg, n))
		DSEC_BUG("an error message is not UTF-8: %s", err->msg);
}

static void need(bool cond, const char *what)
{
	if (!cond)
		DSEC_BUG("a call succeeded without %s", what);
}

static void call(unsigned which)
{
	static const char *const argv[] = { "true", NULL };
	static const char *const allow[] = { "10.0.0.0/8", NULL };
	struct dsec_client *c = client;
	struct dsec_cmd q = { .argv = argv };
	struct dsec_create_opts o = { .backend = "container" };
	struct dsec_exec_start_opts so = { .pty = true };
	struct dsec_session_opts ss = { .name = "s1" };
	struct dsec_cmd_res res;
	struct dsec_session_cmd_res sres;
	struct dsec_file_desc info, *files = NULL;
	struct dsec_sandbox_info sb, *sbs = NULL;
	struct dsec_node_info node;
	struct dsec_buf buf;
	struct dsec_err err;
	char *s = NULL;
	void *raw = NULL;
	size_t n = 0;
	uint64_t removed = 0;
	bool flag = false;
	int rc = 0;

	dsec_buf_init(&buf);
	dsec_err_clear(&err);
	switch (which) {
	case 0: rc = dsec_ping(c, &err); break;
	case 1:
		if ((rc = dsec_info(c, &node, &err)) == 0) {
			need(node.version && node.node, "version and node");
			need(!node.nbackends || node.backends, "its backends");
		}
		dsec_node_info_free(&node);
		break;
	case 2:
		if ((rc = dsec_list(c, &sbs, &n, &err)) == 0) {
			need(sbs != NULL, "an array");
			for (size_t i = 0; i < n; i++)
				need(sbs[i].id && sbs[i].state, "ids and states");
			dsec_sandbox_list_free(sbs, n);
		}
		break;
	case 3:
		if ((rc = dsec_sandbox_info(c, SID, &sb, &err)) == 0) {
			need(sb.id && (!sb.nsessions || sb.sessions), "an id and its sessions");
			for (size_t i = 0; i < sb.nsessions; i++)
				need(sb.sessions[i].name && sb.sessions[i].cwd, "session names");
		}
		dsec_sandbox_info_free(&sb);
		break;
	case 4:
		if ((rc = dsec_create(c, &o, &s, &err)) == 0)
			need(s != NULL, "an id");
		break;
	case 5:
		if ((rc = dsec_exec(c, SID, &q, &res, &err)) == 0)
			dsec_cmd_res_free(&res);
		break;
	case 6:
		if ((rc = dsec_call(c, &o, &q, &res, &err)) == 0)
			dsec_cmd_res_free(&res);
		break;
	case 7: rc = dsec_file_read(c, SID, "/etc/hostname", 0, 0, &buf, &err); break;
	case 8: rc = dsec_file_write(c, SID, "/tmp/x", "data", 4, 0644, &err); break;
	case 9: rc = dsec_destroy(c, SID, &err); break;
	case 10: rc = dsec_net_allow(c, SID, allow, &err); break;
	case 11: rc = dsec_pause(c, SID, &err); break;
	case 12: rc = dsec_resume(c, SID, &err); break;
	case 13:
		if ((rc = dsec_file_stat(c, SID, "/", &info, &err)) == 0)
			need(info.name != NULL, "a name");
		dsec_file_desc_free(&info);
		break;
	case 14:
		if ((rc = dsec_file_list(c, SID, "/", 0, &files, &n, &flag, &err)) == 0) {
			for (size_t i = 0; i < n; i++)
				need(files[i].name != NULL, "names");
			dsec_file_list_free(files, n);
		}
		break;
	case 15: rc = dsec_file_mkdir(c, SID, "/d", 0, true, DSEC_OWNER_DEFAULT,
				      DSEC_OWNER_DEFAULT, &err); break;
	case 16: rc = dsec_file_remove(c, SID, "/d", true, &removed, &err); break;
	case 17: rc = dsec_file_upload(c, SID, "/d", "tar", 3, NULL, 0, 0, &err); break;
	case 18: rc = dsec_file_download(c, SID, "/d", "tar.zst", &buf, &err); break;
	case 19:
		if ((rc = dsec_session_open(c, SID, &ss, &s, &err)) == 0)
			need(s != NULL, "a session name");
		break;
	case 20:
		if ((rc = dsec_session_exec(c, SID, "s1", "pwd", 5, 0, &sres, &err)) == 0) {
			need(sres.cwd != NULL, "a cwd");
			dsec_session_cmd_res_free(&sres);
		}
		break;
	case 21: rc = dsec_session_close(c, SID, "s1", &err); break;
	case 22:
		if ((rc = dsec_snapshot(c, SID, "img:1", &s, &err)) == 0)
			need(s != NULL, "an image");
		break;
	case 23: rc = dsec_chunk_get(c, "chunk", "sha256:00", &buf, &err); break;
	case 24:
		if ((rc = dsec_exec_start(c, SID, &q, &so, &s, &err)) == 0)
			need(s != NULL, "an exec name");
		break;
	case 25:
		if ((rc = dsec_exec_read(c, SID, "x1", 1, &res, &flag, &err)) == 0)
			dsec_cmd_res_free(&res);
		break;
	case 26: rc = dsec_exec_write(c, SID, "x1", "in", 2, true, &err); break;
	case 27: rc = dsec_exec_signal(c, SID, "x1", 15, &err); break;
	case 28: rc = dsec_exec_resize(c, SID, "x1", 24, 80, &err); break;
	case 29: rc = dsec_file_write_as(c, SID, "/tmp/y", "", 0, 0600, 1000, 1000, &err); break;
	default:
		if ((rc = dsec_raw(c, "\x80", 1, &raw, &n, &err)) == 0)
			free(raw);
		break;
	}
	check_err(rc, &err);
	dsec_buf_free(&buf);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		init();
		ready = true;
	}
	if (size < 1)
		return 0;
	pthread_mutex_lock(&mu);
	answer = data + 1;
	answer_len = size - 1;
	pthread_mutex_unlock(&mu);
	call(data[0] % 31);
	return 0;
}
