/* backend.c - libdsec: freeing what a backend filled in (the daemon's side
 * of backend.h's results), apart from the client's own types (dsec.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "util.h"

/* ABI 2 put its new fields in padding: the size is ABI 1's. */
_Static_assert(sizeof(struct dsec_exec_res) == offsetof(struct dsec_exec_res, oom_killed) + 8,
	       "struct dsec_exec_res grew");

void dsec_exec_res_free(struct dsec_exec_res *res)
{
	dsec_buf_free(&res->out);
	dsec_buf_free(&res->err);
}

static void file_info_free(struct dsec_file_info *info)
{
	free(info->name);
	free(info->target);
	memset(info, 0, sizeof(*info));
}

void dsec_file_res_free(struct dsec_file_res *res)
{
	file_info_free(&res->info);
	for (size_t i = 0; i < res->nentries; i++)
		file_info_free(&res->entries[i]);
	free(res->entries);
	dsec_buf_free(&res->data);
	memset(res, 0, sizeof(*res));
}
