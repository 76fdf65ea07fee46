/* tap.h - a ~20-line TAP producer for C unit tests (run by prove). */
#ifndef DSEC_TAP_H
#define DSEC_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define plan(n) printf("1..%d\n", (n))
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) \
	do { long long g_ = (got), w_ = (want); ok(g_ == w_, __VA_ARGS__); \
	     if (g_ != w_) printf("#   got %lld, expected %lld\n", g_, w_); } while (0)
#define is_str(got, want, ...) \
	do { const char *g_ = (got), *w_ = (want); int e_ = g_ && w_ && !strcmp(g_, w_); \
	     ok(e_, __VA_ARGS__); if (!e_) printf("#   got '%s', expected '%s'\n", g_ ? g_ : "(null)", w_); } while (0)
#define done_testing() (tap_failed ? 1 : 0)

__attribute__((format(printf, 4, 5)))
static void tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	printf("%sok %d - ", pass ? "" : "not ", ++tap_n);
	va_start(ap, fmt); vprintf(fmt, ap); va_end(ap);
	printf("\n");
	if (!pass) { tap_failed++; printf("#   failed at %s:%d\n", file, line); }
	fflush(stdout);
}
#endif
