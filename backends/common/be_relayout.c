/* be_relayout.c - see be_relayout.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "be_relayout.h"
#include "util.h"

extern char **environ;

void be_area_set(const struct be_area *a, char *arg_end, char *env_start, char *env_end)
{
	struct prctl_mm_map m = a->map;

	if (!a->have_map)
		return;
	m.brk = (uint64_t)(uintptr_t)sbrk(0);
	m.arg_end = (uint64_t)(uintptr_t)arg_end;
	m.env_start = (uint64_t)(uintptr_t)env_start;
	m.env_end = (uint64_t)(uintptr_t)env_end;
	m.exe_fd = (uint32_t)-1;
	prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&m, sizeof(m), 0);
}

bool be_area_relayout(struct be_area *a, char **argv, char **envp)
{
	size_t na = dsec_strv_len((const char *const *)argv);
	size_t ne = dsec_strv_len((const char *const *)envp);
	size_t bytes = 0, k = 0;
	char *p = a->area, *arg_end;

	if (!a->slots || !a->have_map || na + ne + 2 > a->nslots)
		return false;
	for (size_t i = 0; i < na; i++)
		bytes += strlen(argv[i]) + 1;
	for (size_t i = 0; i < ne; i++)
		bytes += strlen(envp[i]) + 1;
	if (bytes > a->area_len)
		return false;
	for (size_t i = 0; i < na; i++) {
		size_t l = strlen(argv[i]) + 1;

		memcpy(p, argv[i], l);
		a->slots[k++] = p;
		p += l;
	}
	a->slots[k++] = NULL;
	arg_end = p;
	environ = &a->slots[k];
	for (size_t i = 0; i < ne; i++) {
		size_t l = strlen(envp[i]) + 1;

		memcpy(p, envp[i], l);
		a->slots[k++] = p;
		p += l;
	}
	a->slots[k] = NULL;
	/* _start reads argc from the word below argv[0] after the
	 * constructors have run. */
	((long *)a->slots)[-1] = (long)na;
	be_area_set(a, arg_end, arg_end, p);
	program_invocation_name = a->slots[0];
	program_invocation_short_name = strrchr(a->slots[0], '/') ?
					strrchr(a->slots[0], '/') + 1 : a->slots[0];
	return true;
}

/* Our mm's addresses from /proc/self/stat (fields 26-28 and 45-51). */
static void read_map(struct be_area *a)
{
	char buf[2048], *p;
	unsigned long long v[52] = { 0 };
	ssize_t n;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), i = 3;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || !(p = strrchr((buf[n] = '\0', buf), ')')))
		return;
	/* Field 3 (the state) is a letter; the rest are numbers. */
	for (p += 2; *p && i < 52; i++) {
		v[i] = strtoull(p, NULL, 10);
		p += strcspn(p, " ");
		p += strspn(p, " ");
	}
	if (i < 52 || !v[48])
		return;
	a->map.start_code = v[26];
	a->map.end_code = v[27];
	a->map.start_stack = v[28];
	a->map.start_data = v[45];
	a->map.end_data = v[46];
	a->map.start_brk = v[47];
	a->map.arg_start = v[48];
	a->map.arg_end = v[49];
	a->map.env_start = v[50];
	a->map.env_end = v[51];
	a->have_map = a->map.arg_start == (uintptr_t)a->area &&
		      a->map.env_end == (uintptr_t)(a->area + a->area_len);
}

void be_area_find(struct be_area *a, int argc, char **argv, char **envp)
{
	size_t ne = 0;
	char *p;

	memset(a, 0, sizeof(*a));
	if (argc < 1 || envp != argv + argc + 1)
		return;
	while (envp[ne])
		ne++;
	p = argv[0];
	for (int i = 0; i < argc; p += strlen(p) + 1, i++)
		if (argv[i] != p)
			return;
	for (size_t i = 0; i < ne; p += strlen(p) + 1, i++)
		if (envp[i] != p)
			return;
	a->slots = argv;
	a->nslots = (size_t)argc + 1 + ne + 1;
	a->area = argv[0];
	a->area_len = (size_t)(p - argv[0]);
	read_map(a);
}

void be_area_pad(char *const *argv, char **envp, size_t n, size_t nslots, char *pad,
		 size_t area)
{
	size_t na = 0, used = 0;

	while (argv[na])
		used += strlen(argv[na++]) + 1;
	for (size_t i = 0; i < n; i++)
		used += strlen(envp[i]) + 1;
	/* Slots: argv and its NULL, then the environment, the pad, NULL. */
	while (n + na + 1 + 2 < nslots) {
		envp[n++] = (char *)"_=";
		used += 3;
	}
	memset(pad, 'x', area);
	memcpy(pad, "_=", 2);
	pad[used + 3 < area ? area - used - 1 : 2] = '\0';
	envp[n++] = pad;
	envp[n] = NULL;
}

void be_area_title(struct be_area *a, const char *title)
{
	size_t n = strlen(title) + 1;

	if (!a->have_map || a->area_len <= n)
		return;
	memcpy(a->area, title, n);
	be_area_set(a, a->area + n, (char *)(uintptr_t)a->map.env_start,
		    (char *)(uintptr_t)a->map.env_end);
}
