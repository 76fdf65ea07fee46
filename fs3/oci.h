/* oci.h - reading image archives: an OCI image layout, or what `docker save`
 * writes (its manifest.json, or the OCI layout newer Docker writes beside it).
 *
 * Only the parts fs3 keeps are read: the layers, bottom first, and the run
 * configuration (Env, WorkingDir, User, and Entrypoint followed by Cmd as the
 * entrypoint).  Blobs named by a sha256 digest are verified before use.  Of
 * an index listing several platforms the one this build runs on is taken.
 */
#ifndef FS3_OCI_H
#define FS3_OCI_H

#include <stdbool.h>

#include "fs3.h"

/* Is dir an image layout (oci-layout file, or docker's manifest.json)? */
bool fs3_oci_is_layout(const char *dir);

/* Reads the image laid out under dir: *layers gets the layer blob paths
 * (tars, any compression), bottom first, NULL-terminated (caller frees with
 * dsec_strv_free); cfg its config (caller frees with fs3_image_config_free);
 * *format "oci" or "docker". */
int fs3_oci_read(const char *dir, char ***layers, struct fs3_image_config *cfg,
		 const char **format, struct dsec_err *err);

#endif
