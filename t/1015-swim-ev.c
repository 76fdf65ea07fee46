/* 1015-swim-ev - the libev binding over real sockets: three nodes on
 * 127.0.0.1 in one process and one loop join through a seed (push-pull
 * over TCP), gossip by UDP, see a freed node dead and a leaving one left.
 * Fast probe settings; the bounds only stop a hang. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <ev.h>
#include "tap.h"
#include "swim.h"

static const struct swim_key key = { "smoke-test-cluster-key-012345678", 32 };
static struct swim_ev *node[3];
static ev_timer check;
static bool (*cond)(void);
static double deadline;

static unsigned alive_seen(unsigned i)
{
	return (unsigned)swim_alive_count(swim_ev_swim(node[i]));
}

static enum swim_state state_of(unsigned i, const char *name)
{
	struct swim_member m;
	return swim_member_find(swim_ev_swim(node[i]), name, &m) < 0 ? (enum swim_state)-1 : m.state;
}

static bool all_three(void)
{
	return alive_seen(0) == 3 && alive_seen(1) == 3 && alive_seen(2) == 3;
}

static bool two_dead(void)
{
	return state_of(0, "c") == SWIM_DEAD && state_of(1, "c") == SWIM_DEAD;
}

static bool refused_stream(void)
{
	struct swim_stats st;

	swim_stats(swim_ev_swim(node[0]), &st);
	return st.dropped_auth > 0;
}

/* A TCP connection to node 0's push-pull port that sends `len` bytes. */
static int stream_to_a(const void *buf, size_t len)
{
	const char *addr = swim_ev_addr(node[0]);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(strrchr(addr, ':') + 1)) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, buf, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool one_left(void)
{
	return state_of(0, "b") == SWIM_LEFT;
}

static void check_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	if (cond() || ev_now(loop) > deadline)
		ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until c() or `limit` seconds. */
static bool wait_for(struct ev_loop *loop, bool (*c)(void), double limit)
{
	cond = c;
	ev_now_update(loop);
	deadline = ev_now(loop) + limit;
	ev_timer_init(&check, check_cb, 0.05, 0.05);
	ev_timer_start(loop, &check);
	ev_run(loop, 0);
	ev_timer_stop(loop, &check);
	return c();
}

int main(void)
{
	struct ev_loop *loop = EV_DEFAULT;
	const char *names[3] = { "a", "b", "c" };
	int rc = 0;

	plan(10);
	for (unsigned i = 0; i < 3; i++) {
		struct swim_ev_conf c = {
			.bind = "127.0.0.1:0",
			.swim = { .name = names[i], .keys = &key, .nkeys = 1, .probe_interval_ms = 200,
				  .probe_timeout_ms = 100, .gossip_interval_ms = 50 },
		};
		rc |= swim_ev_new(&node[i], loop, &c);
	}
	ok(rc == 0, "three nodes bound to 127.0.0.1 (%s, %s, %s)", swim_ev_addr(node[0]),
	   swim_ev_addr(node[1]), swim_ev_addr(node[2]));
	struct swim_ev_conf bad = { .bind = "localhost:1", .swim = { .name = "x", .keys = &key, .nkeys = 1 } };
	struct swim_ev *x;
	ok(swim_ev_new(&x, loop, &bad) == -EINVAL, "a host name is refused: addresses are numeric");
	const char *seed = swim_ev_addr(node[0]);
	ok(swim_join(swim_ev_swim(node[1]), &seed, 1) == 1 && swim_join(swim_ev_swim(node[2]), &seed, 1) == 1,
	   "b and c join through a");
	ok(wait_for(loop, all_three, 30), "every node sees all three alive");
	struct swim_stats st;
	swim_stats(swim_ev_swim(node[0]), &st);
	ok(st.pushpulls >= 2 && st.pkts_recv > 0 && st.dropped_auth == 0 && st.dropped_malformed == 0,
	   "a served the joins' push-pulls (%llu), got datagrams, dropped none",
	   (unsigned long long)st.pushpulls);
	/* Strangers on the stream port: a length over the limit, then a
	 * message without the key's tag. */
	int big = stream_to_a("\xff\xff\xff\xff", 4);
	int junk = stream_to_a("\0\0\0\x28" "0123456789012345678901234567890123456789", 44);
	ok(big >= 0 && junk >= 0 && wait_for(loop, refused_stream, 10), "an unauthenticated stream is counted");
	char c;
	ok(read(junk, &c, 1) == 0 && read(big, &c, 1) <= 0, "both closed without a reply");
	close(big);
	close(junk);
	swim_ev_free(node[2]);	/* kill -9: gone without a word */
	node[2] = NULL;
	ok(wait_for(loop, two_dead, 60), "a and b see c dead");
	swim_leave(swim_ev_swim(node[1]));
	ok(wait_for(loop, one_left, 30), "b leaves: a sees it left");
	ok(state_of(0, "b") != SWIM_DEAD, "not dead");
	swim_ev_free(node[0]);
	swim_ev_free(node[1]);
	return done_testing();
}
