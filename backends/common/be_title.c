/* be_title.c - see be_title.h. */
#include <string.h>
#include <sys/prctl.h>

#include "be_title.h"

void be_retitle(int argc, char **argv, const char *title)
{
	char *start, *end;
	size_t n = strlen(title) + 1;

	if (argc < 1)
		return;
	start = argv[0];
	end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
	memset(start, 0, (size_t)(end - start));
	if (n <= (size_t)(end - start)) {
		memcpy(start, title, n);
		/* /proc/PID/cmdline stops at the new end (needs CAP_SYS_RESOURCE). */
		prctl(PR_SET_MM, PR_SET_MM_ARG_END, (unsigned long)(start + n), 0, 0);
	}
	prctl(PR_SET_NAME, (unsigned long)title, 0, 0, 0);
}
