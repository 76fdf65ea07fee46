/* 1201-place - the placement policy (dsecd/place.c) on views built here:
 * the filters, locality, power of k, in-flight counting, exclusions and
 * bounded retries, the summary, determinism and the edge cases.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "place.h"

#define GiB (1ull << 30)
#define NMAX 16

static char names[NMAX][16];		/* node names n0.. */
static struct place_node view[NMAX];	/* the view the tests change */
static const struct place_req req = { .backend = "container" };

/* n alike nodes: alive, container 100 slots with used[i] taken (0 if
 * used is NULL), fncall on even nodes, 64 GiB memory all free, 100 GiB
 * disk free, version 1. */
static void view_make(size_t n, const uint32_t *used)
{
	memset(view, 0, sizeof(view));
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "n%zu", i);
		view[i] = (struct place_node){
			.name = names[i], .health = PLACE_ALIVE, .nbe = 1,
			.mem_total = 64 * GiB, .mem_free = 64 * GiB, .disk_free = 100 * GiB,
			.version = 1,
		};
		view[i].be[0] = (struct place_backend){ "container", used ? used[i] : 0, 100 };
		if (i % 2 == 0)
			view[i].be[view[i].nbe++] = (struct place_backend){ "fncall", 0, 10 };
	}
}

static struct place *placer(enum place_policy policy, unsigned k, bool inflight, uint64_t seed)
{
	struct place_conf c;
	struct place *p;

	place_conf_default(&c);
	c.policy = policy;
	c.k = k;
	c.count_inflight = inflight;
	if (place_new(&p, &c, seed))
		return NULL;
	return p;
}

/* One choice with a fresh try; the index, or the negative result. */
static long choose1(struct place *p, size_t n, const struct place_req *r)
{
	struct place_try t;
	size_t i;
	int e;

	place_try_init(&t);
	e = place_choose(p, view, n, r, &t, &i);
	return e ? e : (long)i;
}

/* times choices with fresh tries; counts per node into hits (NMAX); the
 * number of choices that failed. */
static unsigned choose_many(struct place *p, size_t n, const struct place_req *r,
			    unsigned times, unsigned *hits)
{
	unsigned failed = 0;

	memset(hits, 0, NMAX * sizeof(*hits));
	for (unsigned j = 0; j < times; j++) {
		long i = choose1(p, n, r);

		if (i < 0)
			failed++;
		else
			hits[i]++;
	}
	return failed;
}

static void test_conf(void)
{
	struct place_conf c;
	enum place_policy pol;
	struct place *p;

	place_conf_default(&c);
	ok(c.policy == PLACE_POWER_K && c.k == 2 && c.max_attempts == 3 && c.count_inflight &&
	   c.locality && c.locality_slack == PLACE_PPM / 10, "defaults: power_k, k 2, 3 attempts");
	ok(!place_policy_parse("least_loaded", &pol) && pol == PLACE_LEAST_LOADED &&
	   !strcmp(place_policy_name(PLACE_RANDOM), "random"), "policy names both ways");
	is_int(place_policy_parse("best", &pol), -EINVAL, "an unknown policy name");
	c.k = 0;
	is_int(place_new(&p, &c, 1), -EINVAL, "k 0 refused");
	c.k = 2;
	c.max_attempts = PLACE_TRIES_MAX + 1;
	is_int(place_new(&p, &c, 1), -EINVAL, "max_attempts over PLACE_TRIES_MAX refused");
}

static void test_filters(void)
{
	struct place *p = placer(PLACE_POWER_K, 2, true, 1);
	struct place_req big = req, fn = { .backend = "fncall" }, vm = { .backend = "vm" };
	unsigned hits[NMAX];
	uint32_t used[6] = { 0, 0, 0, 0, 0, 100 };

	view_make(6, used);
	view[0].health = PLACE_SUSPECT;
	view[1].health = PLACE_DEAD;
	view[2].draining = true;
	view[3].health = PLACE_LEFT;
	/* n4 alone is alive, undrained and not full (n5 has 100 of 100). */
	is_int(choose_many(p, 6, &req, 200, hits), 0, "a node is found each time");
	is_int(hits[4], 200, "only the alive, undrained node with a free slot is chosen");
	big.mem = 65 * GiB;
	is_int(choose1(p, 6, &big), -ENOSPC, "more memory than any has free: -ENOSPC");
	big.mem = 0;
	big.disk = 101 * GiB;
	is_int(choose1(p, 6, &big), -ENOSPC, "more disk than any has free: -ENOSPC");
	view[4].nbe = 1;		/* n4 offers no fncall */
	is_int(choose1(p, 6, &fn), -ENODEV, "fncall only on unhealthy or draining nodes: -ENODEV");
	is_int(choose1(p, 6, &vm), -ENODEV, "a backend no node offers: -ENODEV");
	view_make(6, NULL);
	is_int(choose_many(p, 6, &fn, 300, hits), 0, "fncall is placed");
	ok(hits[0] && hits[2] && hits[4] && !hits[1] && !hits[3] && !hits[5],
	   "fncall only on the nodes that offer it");
	view[4].mem_free = 1 * GiB;
	big = req;
	big.mem = 2 * GiB;
	choose_many(p, 6, &big, 300, hits);
	ok(!hits[4] && hits[0] && hits[5], "a node without the memory asked is skipped");
	place_free(p);
}

static void test_edges(void)
{
	struct place *p = placer(PLACE_POWER_K, 2, true, 2);
	struct place_req nob = { .backend = NULL };
	uint32_t full[4] = { 100, 100, 100, 100 };
	char longname[80];

	is_int(choose1(p, 0, &req), -ENODEV, "an empty view: -ENODEV");
	view_make(4, full);
	is_int(choose1(p, 4, &req), -ENOSPC, "every node full: -ENOSPC");
	is_int(choose1(p, 4, &nob), -EINVAL, "no backend: -EINVAL");
	view_make(1, NULL);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	view[0].name = longname;
	is_int(choose1(p, 1, &req), -ENODEV, "a name over 63 bytes is never chosen");
	view_make(1, NULL);
	view[0].be[0].limit = 0;
	is_int(choose1(p, 1, &req), -ENODEV, "a backend with limit 0 is not offered");
	place_free(p);
}

static void test_power_k(void)
{
	uint32_t used[10] = { 0, 10, 20, 30, 40, 50, 60, 70, 80, 90 };
	struct place *p2 = placer(PLACE_POWER_K, 2, false, 3);
	struct place *p10 = placer(PLACE_POWER_K, 10, false, 3);
	struct place *pr = placer(PLACE_RANDOM, 2, false, 3);
	struct place *pl = placer(PLACE_LEAST_LOADED, 2, false, 3);
	unsigned hits[NMAX], expect;

	view_make(10, used);
	choose_many(p2, 10, &req, 4500, hits);
	/* The least of two distinct samples out of 10: node i wins with
	 * chance 2 (9 - i) / 90, so n9 never, n0 about a fifth. */
	is_int(hits[9], 0, "power of 2: the most loaded node is never chosen");
	ok(hits[0] > 800 && hits[0] < 1200, "power of 2: the least loaded about 2/10 of the time (%u/4500)",
	   hits[0]);
	ok(hits[0] > hits[4] && hits[4] > hits[8], "power of 2: less loaded nodes win more often");
	choose_many(p10, 10, &req, 100, hits);
	is_int(hits[0], 100, "k = n: always the least loaded");
	choose_many(pr, 10, &req, 1000, hits);
	ok(hits[9] > 50 && hits[0] < 150, "random: the most loaded too, about 1/10 (%u, %u)", hits[9],
	   hits[0]);
	choose_many(pl, 10, &req, 100, hits);
	is_int(hits[0], 100, "least_loaded: always the least loaded");
	/* Equal scores: the shorter queue, then the lower CPU load. */
	view_make(3, NULL);
	view[0].queue = 5;
	view[1].queue = 1;
	view[2].queue = 1;
	view[2].load = 900;
	choose_many(pl, 3, &req, 50, hits);
	is_int(hits[1], 50, "ties go to the shorter queue, then the lower CPU load");
	/* Dominant share: n0 has more slots used, n1 more memory committed. */
	view[0].be[0].used = 50;
	view[0].mem_free = 48 * GiB;	/* 25 % memory, 50 % slots: 50 % */
	view[1].be[0].used = 10;
	view[1].mem_free = 16 * GiB;	/* 75 % memory, 10 % slots: 75 % */
	view[2].be[0].used = 60;
	view[2].mem_free = 32 * GiB;	/* 50 % memory, 60 % slots: 60 % */
	is_int(place_score(pl, &view[1], &req), PLACE_PPM * 3 / 4, "score: the larger of the two shares");
	expect = 0;
	choose_many(pl, 3, &req, 20, hits);
	is_int(hits[expect], 20, "the lowest dominant share wins");
	place_free(p2);
	place_free(p10);
	place_free(pr);
	place_free(pl);
}

static void test_locality(void)
{
	const char *img = "sha256:aaaa", *imgs[] = { "sha256:bbbb", "sha256:aaaa" };
	struct place_req r = { .backend = "container", .image = img };
	uint32_t used[8] = { 50, 50, 50, 50, 50, 50, 50, 50 };
	struct place *p = placer(PLACE_POWER_K, 2, false, 4);
	struct place_conf c;
	unsigned hits[NMAX];

	view_make(8, used);
	view[3].images = imgs;
	view[3].nimages = 2;
	choose_many(p, 8, &r, 200, hits);
	is_int(hits[3], 200, "equal load: the node with the image, every time");
	view[3].be[0].used = 59;	/* 9 points over the others: within the slack */
	choose_many(p, 8, &r, 200, hits);
	is_int(hits[3], 200, "9 points more loaded: still the node with the image");
	view[3].be[0].used = 61;	/* 11 points: over it */
	choose_many(p, 8, &r, 200, hits);
	is_int(hits[3], 0, "11 points more loaded: another node");
	view[3].be[0].used = 50;
	view[5].images = imgs;
	view[5].nimages = 2;
	choose_many(p, 8, &r, 400, hits);
	ok(hits[3] + hits[5] == 400 && hits[3] > 100 && hits[5] > 100,
	   "two nodes with the image share the creates (%u, %u)", hits[3], hits[5]);
	place_free(p);
	place_conf_default(&c);
	c.locality = false;
	place_new(&p, &c, 4);
	choose_many(p, 8, &r, 400, hits);
	ok(hits[3] + hits[5] < 200, "locality off: the image is not preferred (%u of 400)",
	   hits[3] + hits[5]);
	place_free(p);
}

/* burst creates from one sender, none replied, the view never updated:
 * the most any node got; what each got in hits (NMAX). */
static unsigned burst(struct place *p, size_t n, unsigned count, unsigned *hits)
{
	unsigned max = 0;

	memset(hits, 0, NMAX * sizeof(*hits));
	for (unsigned j = 0; j < count; j++) {
		long i = choose1(p, n, &req);

		if (i < 0)
			return 0;
		place_inflight_add(p, view[i].name, &req);
		if (++hits[i] > max)
			max = hits[i];
	}
	return max;
}

static void test_inflight(void)
{
	uint32_t used[8] = { 40, 41, 41, 41, 41, 41, 41, 41 };
	struct place *gossip = placer(PLACE_LEAST_LOADED, 2, false, 5);
	struct place *least = placer(PLACE_LEAST_LOADED, 2, true, 5);
	struct place *pk = placer(PLACE_POWER_K, 2, true, 5);
	struct place *p = placer(PLACE_POWER_K, 2, true, 6);
	unsigned hits[NMAX], max;

	view_make(8, used);
	is_int(burst(gossip, 8, 80, hits), 80, "least loaded by gossip alone: a burst of 80 all on n0");
	/* Water-filling 40 + 7 x 41 + 80 = 407: seven nodes end at 51, one at 50. */
	max = burst(least, 8, 80, hits);
	ok(max <= 11 && hits[0] >= 10, "least loaded counting in flight: the burst levels the nodes "
	   "(n0 got %u, the most %u)", hits[0], max);
	is_int(place_inflight(least, "n0"), hits[0], "the in-flight count of a node");
	max = burst(pk, 8, 80, hits);
	ok(max <= 13, "power of 2 counting in flight: the burst spreads (the most %u of 80)", max);

	/* A reply with the version that counts the create: counted until the
	 * view shows that version. */
	view_make(2, NULL);
	view[0].mem_free = 32 * GiB;
	place_inflight_add(p, "n0", &req);
	is_int(place_score(p, &view[0], &req), PLACE_PPM / 2, "in flight: 1 of 100 slots, memory at 50 %%");
	view[1].mem_free = 64 * GiB;
	view[0].mem_free = 64 * GiB;
	is_int(place_score(p, &view[0], &req), PLACE_PPM / 100, "in flight counts a slot");
	place_inflight_remove(p, "n0", &req, 3);
	is_int(place_score(p, &view[0], &req), PLACE_PPM / 100, "created at version 3, view at 1: counted");
	view[0].version = 2;
	choose1(p, 2, &req);
	is_int(place_inflight(p, "n0"), 1, "view at 2: still counted");
	view[0].version = 3;
	view[0].be[0].used = 1;
	choose1(p, 2, &req);
	is_int(place_inflight(p, "n0"), 0, "view at 3: counted by the view alone");
	is_int(place_score(p, &view[0], &req), PLACE_PPM / 100, "and not twice");
	/* Refused: forgotten at once.  Version unknown: the next one. */
	place_inflight_add(p, "n1", &req);
	place_inflight_remove(p, "n1", &req, 0);
	is_int(place_inflight(p, "n1"), 0, "refused: forgotten at once");
	place_inflight_add(p, "n1", &req);
	place_inflight_remove(p, "n1", &req, PLACE_VERSION_NEXT);
	choose1(p, 2, &req);
	is_int(place_inflight(p, "n1"), 1, "version unknown: counted while the view is at 1");
	view[1].version = 2;
	choose1(p, 2, &req);
	is_int(place_inflight(p, "n1"), 0, "until the view shows version 2");
	/* A steady stream: each reply names a newer version than the view
	 * shows, the view two versions behind.  What the view has counted is
	 * not added again: only the creates of the versions it has not
	 * shown (one bucket for all would wait for the newest, for ever). */
	view_make(2, NULL);
	for (uint64_t v = 3; v <= 12; v++) {
		view[0].version = v - 2;
		view[0].be[0].used = (uint32_t)(v >= 4 ? 3 * (v - 4) : 0);	/* 3 a version */
		choose1(p, 2, &req);
		for (int k = 0; k < 3; k++) {
			place_inflight_add(p, "n0", &req);
			place_inflight_remove(p, "n0", &req, v);
		}
	}
	is_int(place_inflight(p, "n0"), 6, "a stream of creates, the view two versions behind: only "
	       "the six of the two newest versions counted on top of it");
	view[0].version = 12;
	view[0].be[0].used = 30;
	choose1(p, 2, &req);
	is_int(place_inflight(p, "n0"), 0, "... and none once it shows the newest");
	place_free(gossip);
	place_free(least);
	place_free(pk);
	place_free(p);
}

static void test_retries(void)
{
	struct place *p = placer(PLACE_POWER_K, 2, true, 7);
	struct place_conf c;
	struct place_try t;
	size_t i, seen = 0;
	unsigned mask = 0;
	int e;

	view_make(5, NULL);
	place_try_init(&t);
	ok(!place_try_exclude(&t, "n2"), "n2 excluded by the caller");
	for (unsigned j = 0; j < 3; j++)
		if (!place_choose(p, view, 5, &req, &t, &i)) {
			mask |= 1u << i;
			seen++;
		}
	ok(seen == 3 && __builtin_popcount(mask) == 3 && !(mask & 4),
	   "three attempts: three different targets, none the excluded one");
	is_int(t.attempts, 3, "three attempts counted");
	is_int(place_choose(p, view, 5, &req, &t, &i), -EBUSY, "the fourth: -EBUSY (max_attempts 3)");
	place_free(p);

	place_conf_default(&c);
	c.max_attempts = 8;
	place_new(&p, &c, 7);
	place_try_init(&t);
	for (unsigned j = 0; j < 5; j++)
		place_choose(p, view, 5, &req, &t, &i);
	e = place_choose(p, view, 5, &req, &t, &i);
	is_int(e, -ENOSPC, "each of the 5 nodes refused: -ENOSPC with attempts left");
	place_try_init(&t);
	for (unsigned j = 0; j < PLACE_TRIES_MAX; j++)
		place_try_exclude(&t, "nx");
	is_int(place_try_exclude(&t, "ny"), -ENOSPC, "the caller's exclusions are bounded");
	is_int(place_try_exclude(&t, ""), -EINVAL, "an empty name is refused");
	ok(!place_choose(p, view, 5, &req, &t, &i), "a try full of exclusions still has its attempts");
	place_free(p);
}

static void test_summary(void)
{
	uint32_t used[5] = { 10, 100, 30, 40, 50 };
	struct place *p = placer(PLACE_POWER_K, 2, true, 8);
	struct place_summary s;

	view_make(5, used);
	view[4].draining = true;
	view[3].mem_free = 40 * GiB;
	place_inflight_add(p, "n0", &req);
	place_summary(NULL, view, 5, "container", &s);
	ok(s.nodes == 5 && s.alive == 4 && s.offering == 4 && s.with_room == 3,
	   "summary: 5 nodes, 4 taking new, 4 offering, 3 with room");
	is_int(s.slots_free, 90 + 0 + 70 + 60, "free slots summed");
	is_int(s.slots_limit, 400, "limits summed");
	is_int(s.slots_free_max, 90, "the most free on one node");
	is_int(s.mem_free, (64 * 3 + 40) * GiB, "free memory summed");
	is_int(s.mem_free_max, 64 * GiB, "the most free memory on one node");
	is_int(s.disk_free, 400 * GiB, "free disk summed");
	place_summary(p, view, 5, "container", &s);
	is_int(s.slots_free, 219, "net of the placement in flight");
	place_summary(p, view, 5, "fncall", &s);
	ok(s.offering == 2 && s.slots_free == 20, "fncall: the two nodes taking new that offer it");
	place_free(p);
}

static void test_determinism(void)
{
	uint32_t used[12] = { 5, 9, 1, 7, 3, 3, 8, 2, 6, 4, 0, 9 };
	struct place *a = placer(PLACE_POWER_K, 2, true, 42), *b = placer(PLACE_POWER_K, 2, true, 42);
	struct place *c = placer(PLACE_POWER_K, 2, true, 43);
	unsigned same = 0, differ = 0;

	view_make(12, used);
	for (unsigned j = 0; j < 300; j++) {
		long x = choose1(a, 12, &req), y = choose1(b, 12, &req), z = choose1(c, 12, &req);

		same += x == y;
		differ += x != z;
		place_inflight_add(a, view[x].name, &req);
		place_inflight_add(b, view[y].name, &req);
		place_inflight_add(c, view[z].name, &req);
	}
	is_int(same, 300, "the same seed: the same 300 choices");
	ok(differ > 0, "another seed: other choices (%u of 300 differ)", differ);
	place_free(a);
	place_free(b);
	place_free(c);
}

int main(void)
{
	plan(67);
	test_conf();
	test_filters();
	test_edges();
	test_power_k();
	test_locality();
	test_inflight();
	test_retries();
	test_summary();
	test_determinism();
	return done_testing();
}
