/* be-layerdevs.c - the "layerdevs" backend: the "layers" test backend that
 * also takes each layer as a block device (DSEC_BE_CAP_LAYER_DEVS); its
 * sandboxes' file /layers has a third column, the device
 * (t/5012-layer-files.t).
 */
#define BE_TEST_NAME "layerdevs"
#define BE_TEST_OPS_SIZE sizeof(struct dsec_be_ops)
#define BE_TEST_SPEC_SIZE sizeof(struct dsec_be_spec)
#define BE_TEST_CAPS (DSEC_BE_CAP_LAYERS | DSEC_BE_CAP_LAYER_DEVS)
#include "be-test.c"
