/* be-oldabi.c - the "oldabi" backend: the test backend with the shortest
 * ops table dsecd takes, the prefix ABI 1 began with and ABI 2 kept (its
 * table ends where net_allow would start, and it sets no spec_size).  dsecd
 * must load it, see no appended operation, and refuse creates that set a
 * spec field it cannot know (t/5005-backend-abi.t).
 */
#define BE_TEST_NAME "oldabi"
#define BE_TEST_OPS_SIZE DSEC_BE_OPS_MIN_SIZE
#define BE_TEST_SPEC_SIZE 0
#include "be-test.c"
