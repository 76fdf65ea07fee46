/* be-abi1.c - the "abi1" backend: the test backend declaring ABI 1.
 * ABI 2 changed what the host's callbacks take, so a backend built for
 * ABI 1 would call them wrongly: dsecd must refuse it, naming the versions
 * (t/3003-backend-abi1.t).
 */
#define BE_TEST_NAME "abi1"
#define BE_TEST_ABI 1
#define BE_TEST_OPS_SIZE sizeof(struct dsec_be_ops)
#define BE_TEST_SPEC_SIZE sizeof(struct dsec_be_spec)
#include "be-test.c"
