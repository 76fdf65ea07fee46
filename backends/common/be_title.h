/* be_title.h - hide a helper's command line from the sandbox it serves.
 *
 * A sandbox's processes can read /proc/1/cmdline; helpers are started with
 * host paths and cgroup names in their arguments, which an agent has no
 * business reading.  be_retitle() overwrites the whole argument area with
 * a short title (and sets the thread name to it).
 */
#ifndef BE_TITLE_H
#define BE_TITLE_H

void be_retitle(int argc, char **argv, const char *title);

#endif
