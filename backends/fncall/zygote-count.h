/* zygote-count.h - fncall-zygote's count of the calls its seccomp filter
 * refuses, per unit (zygote-count.c): a watcher thread answers each with
 * the plain filter's errno and counts it for the unit whose pid namespace
 * the caller is in.  The loop thread calls these; slots are the zygote's. */
#ifndef DSEC_ZYGOTE_COUNT_H
#define DSEC_ZYGOTE_COUNT_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Opens /proc for the watcher: before the pivot leaves none. */
void zc_open_proc(void);
/* Starts the watcher and loads plain's counting form on the calling
 * thread (no_new_privs already set); plain must outlive the zygote.  0, or
 * -errno with why (whylen bytes) said: nothing is loaded then, the caller
 * loads plain itself. */
int zc_load(const struct sock_fprog *plain, unsigned nslots, char *why, size_t whylen);
/* Whether refused calls are counted (zc_load succeeded). */
bool zc_on(void);
/* Slot i's unit pid is placed (before its "go": nothing of a call ran in
 * it yet): its refused calls count for the slot from now on. */
void zc_unit_on(int i, pid_t pid);
/* Slot i's unit is gone (reaped: no process of its namespace is left). */
void zc_unit_off(int i);
/* Slot i's count now (it only grows): a call's is what it grew by while
 * the call had the unit. */
uint64_t zc_slot_count(int i);

#endif
