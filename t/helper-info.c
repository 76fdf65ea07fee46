/* helper-info URL [ID] - what libdsec's dsec_info (or, with ID,
 * dsec_sandbox_info and that sandbox's entry of dsec_list) hands a C
 * program, as one JSON object whose keys are the struct's fields, so that
 * a test compares it with the daemon's own reply (helper-req); with --page,
 * the ids of dsec_list_page's pages.  Exit 0, or 1 with the error on
 * stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"

static const char *sep = "";

static void key(const char *k)
{
	printf("%s\"%s\": ", sep, k);
	sep = ", ";
}

static void sval(const char *v)
{
	putchar('"');
	for (; v && *v; v++)
		if (*v == '"' || *v == '\\')
			printf("\\%c", *v);
		else if ((unsigned char)*v < 0x20)
			printf("\\u%04x", *v);
		else
			putchar(*v);
	putchar('"');
}

static void str(const char *k, const char *v)
{
	key(k);
	sval(v);
}

static void u64(const char *k, uint64_t v)
{
	key(k);
	printf("%" PRIu64, v);
}

static void dbl(const char *k, double v)
{
	key(k);
	printf("%.17g", v);
}

static void boolean(const char *k, bool v)
{
	key(k);
	fputs(v ? "true" : "false", stdout);
}

static void strv(const char *k, char **v)
{
	key(k);
	putchar('[');
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			putchar(',');
		sval(v[i]);
	}
	putchar(']');
}

static void open_obj(const char *k)
{
	if (k)
		key(k);
	putchar('{');
	sep = "";
}

static void close_obj(void)
{
	putchar('}');
	sep = ", ";
}

static void sandbox(const struct dsec_sandbox_info *s)
{
	open_obj(NULL);
	str("id", s->id);
	str("backend", s->backend);
	str("runtime", s->runtime);
	str("image", s->image);
	str("state", s->state);
	dbl("created", s->created);
	dbl("ttl", s->ttl);
	dbl("idle_ttl", s->idle_ttl);
	u64("execs", s->execs);
	u64("running", s->running);
	u64("streams", s->streams);
	u64("nsessions", s->nsessions);
	strv("labels", s->labels);
	open_obj("marks");
	u64("oom_kills", s->marks.oom_kills);
	u64("pids_limited", s->marks.pids_limited);
	u64("output_floods", s->marks.output_floods);
	u64("timeouts", s->marks.timeouts);
	boolean("has_egress", s->marks.has_egress);
	u64("protected_probes", s->marks.protected_probes);
	close_obj();
	open_obj("trajectory");
	boolean("present", s->trajectory.present);
	boolean("writable", s->trajectory.writable);
	u64("entries", s->trajectory.entries);
	u64("steps", s->trajectory.steps);
	u64("last_step", s->trajectory.last_step);
	u64("bytes", s->trajectory.bytes);
	close_obj();
	close_obj();
}

static void node(const struct dsec_node_info *n)
{
	const struct dsec_cluster_info *cl = &n->cluster;
	const struct dsec_node_traj *t = &n->trajectory;

	open_obj(NULL);
	str("version", n->version);
	str("node", n->node);
	u64("proto", n->proto);
	u64("pid", (uint64_t)n->pid);
	u64("sandboxes", n->sandboxes);
	u64("paused", n->paused);
	u64("max_sandboxes", n->max_sandboxes);
	boolean("draining", n->draining);
	u64("creates_ok", n->creates.ok);
	u64("creates_failed", n->creates.failed);
	dbl("creates_p50_ms", n->creates.p50_ms);
	dbl("load1", n->load[0]);
	u64("mem_total", n->mem_total);
	u64("nofile", n->limits.nofile);
	u64("nofile_hard", n->limits.nofile_hard);
	u64("pid_max", n->limits.pid_max);
	u64("memory_cgroups_max", n->limits.memory_cgroups_max);
	u64("room", n->limits.room);
	str("room_by", n->limits.room_by);
	strv("listen", n->listen);
	key("backends");
	putchar('[');
	for (size_t i = 0; i < n->nbackends; i++) {
		if (i)
			putchar(',');
		open_obj(NULL);
		str("name", n->backends[i].name);
		u64("sandboxes", n->backends[i].stats.sandboxes);
		u64("paused", n->backends[i].paused);
		u64("pool_target", n->backends[i].stats.pool_target);
		close_obj();
	}
	putchar(']');
	key("pools");
	putchar('[');
	for (size_t i = 0; i < n->npools; i++) {
		if (i)
			putchar(',');
		open_obj(NULL);
		str("backend", n->pools[i].backend);
		str("image", n->pools[i].image);
		u64("target", n->pools[i].target);
		u64("ready", n->pools[i].ready);
		u64("taken", n->pools[i].taken);
		close_obj();
	}
	putchar(']');
	open_obj("images");
	boolean("present", n->images.present);
	u64("nsources", n->images.nsources);
	close_obj();
	open_obj("cluster");
	str("membership", cl->membership);
	str("placement", cl->placement);
	u64("placed_here", cl->placed_here);
	boolean("has_gossip", cl->has_gossip);
	u64("nmembers", cl->nmembers);
	close_obj();
	open_obj("trajectory");
	boolean("present", t->present);
	str("durability", t->durability);
	u64("entries", t->entries);
	u64("leases_open", t->leases_open);
	close_obj();
	close_obj();
}

int main(int argc, char **argv)
{
	struct dsec_client *c;
	struct dsec_err err;
	int rc;

	if (argc < 2 || (argc > 3 && strcmp(argv[2], "--page"))) {
		fputs("usage: helper-info URL [ID | --page LIMIT [KEY=VALUE...]]\n", stderr);
		return 2;
	}
	if (dsec_connect(&c, argv[1], &err) < 0) {
		fprintf(stderr, "helper-info: %s\n", err.msg);
		return 1;
	}
	if (argc > 3) {
		/* Every page of LIMIT with those labels: "ID ID ...\n" each,
		 * then "total N". */
		struct dsec_list_opts o = { .struct_size = sizeof(o),
					    .labels = (const char *const *)argv + 4,
					    .limit = (uint32_t)atoi(argv[3]) };
		struct dsec_sandbox_info *list;
		char *next = NULL;
		uint64_t total = 0;
		size_t n;

		if (argc == 4)
			o.labels = NULL;
		do {
			free((char *)o.after);
			o.after = next;
			if ((rc = dsec_list_page(c, &o, &list, &n, &next, &total, &err)) < 0)
				break;
			for (size_t i = 0; i < n; i++)
				printf("%s%s", i ? " " : "", list[i].id);
			printf("\n");
			dsec_sandbox_list_free(list, n);
		} while (next);
		free((char *)o.after);
		if (rc == 0)
			printf("total %" PRIu64 "\n", total);
	} else if (argc == 3) {
		struct dsec_sandbox_info si, *list;
		size_t n;

		if ((rc = dsec_sandbox_info(c, argv[2], &si, &err)) == 0) {
			printf("{\"info\": ");
			sandbox(&si);
			dsec_sandbox_info_free(&si);
			if ((rc = dsec_list(c, &list, &n, &err)) == 0) {
				printf(", \"list\": ");
				for (size_t i = 0; i < n; i++)
					if (!strcmp(list[i].id, argv[2]))
						sandbox(&list[i]);
				dsec_sandbox_list_free(list, n);
				printf("}\n");
			}
		}
	} else {
		struct dsec_node_info info;

		if ((rc = dsec_info(c, &info, &err)) == 0) {
			node(&info);
			putchar('\n');
			dsec_node_info_free(&info);
		}
	}
	dsec_close(c);
	if (rc < 0) {
		fprintf(stderr, "helper-info: %s (%s)\n", err.msg, dsec_code_name(err.code));
		return 1;
	}
	return 0;
}
