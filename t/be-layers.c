/* be-layers.c - the "layers" backend: the test backend taking images as
 * layers (DSEC_BE_CAP_LAYERS), so dsecd acquires them from fs3 first; each
 * sandbox's file /layers lists the mounted layer directories it was given
 * and the EROFS image file of each (t/5012-layer-files.t).
 */
#define BE_TEST_NAME "layers"
#define BE_TEST_OPS_SIZE sizeof(struct dsec_be_ops)
#define BE_TEST_SPEC_SIZE sizeof(struct dsec_be_spec)
#define BE_TEST_CAPS DSEC_BE_CAP_LAYERS
#include "be-test.c"
