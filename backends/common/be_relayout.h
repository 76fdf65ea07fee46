/* be_relayout.h - a preloaded template becoming a command without exec.
 *
 * A template is a program (a shell) executed once with a preloaded object
 * whose constructor never returns in the template itself: it forks a
 * child per command, and the child lays the command's argv and
 * environment out where the kernel put the template's (the pointer slots
 * from argv[0] up to the environment's NULL, the strings after them) and
 * returns from the constructor, so the program's main runs the command as
 * if executed with it, /proc/PID/cmdline and environ included.  The room
 * is what the template was executed with: its spawner pads argv and the
 * environment (see fncall-zygote-helper.c, container-init's init-tpl.c).
 *
 * Used by fncall-preload.c and container-preload.c.
 */
#ifndef BE_RELAYOUT_H
#define BE_RELAYOUT_H

#include <linux/prctl.h>
#include <stdbool.h>
#include <stddef.h>

struct be_area {
	char **slots;			/* argv of main: pointer slots up to the env's NULL */
	size_t nslots;			/* how many */
	char *area;			/* argument and environment strings */
	size_t area_len;		/* their bytes */
	struct prctl_mm_map map;	/* our mm's addresses, for PR_SET_MM_MAP */
	bool have_map;			/* map was read: relayout can work */
};

/* Notes where the kernel put argv and envp (the constructor's arguments)
 * if they are laid out as execve() does it, and reads the mm's addresses
 * from /proc/self/stat.  a->have_map tells whether relayout can work. */
void be_area_find(struct be_area *a, int argc, char **argv, char **envp);

/* Tells the kernel where the arguments and the environment now end (what
 * /proc/PID/cmdline and environ show); no capability needed. */
void be_area_set(const struct be_area *a, char *arg_end, char *env_start, char *env_end);

/* Lays argv and envp out in the area, sets argc, environ and glibc's
 * program names.  False (nothing changed) when they do not fit. */
bool be_area_relayout(struct be_area *a, char **argv, char **envp);

/* For the template's spawner: fills envp from entry n on (those before are
 * the caller's) with "_=" entries and one long padding string from pad
 * (area bytes, the caller's), then NULL, so that argv and envp take nslots
 * pointers and area bytes of strings: the room be_area_relayout has.
 * envp holds nslots entries. */
void be_area_pad(char *const *argv, char **envp, size_t n, size_t nslots, char *pad,
		 size_t area);

/* Puts title as the whole of /proc/self/cmdline (the template's name for
 * ps), if the area holds it. */
void be_area_title(struct be_area *a, const char *title);

#endif
