/* oci.c - OCI image layouts and docker save archives, read with jansson. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "image.h"
#include "log.h"
#include "oci.h"
#include "store.h"

/* Image metadata (index, manifests, configs) is small: refuse the absurd. */
#define OCI_JSON_MAX (8u << 20)
/* Indexes followed to reach an image manifest. */
#define OCI_DEPTH_MAX 4

#if defined(__x86_64__)
#define OCI_ARCH "amd64"
#elif defined(__aarch64__)
#define OCI_ARCH "arm64"
#else
#define OCI_ARCH "unknown"
#endif

bool fs3_oci_is_layout(const char *dir)
{
	_cleanup_free_ char *a = xasprintf("%s/oci-layout", dir);
	_cleanup_free_ char *b = xasprintf("%s/manifest.json", dir);

	return access(a, F_OK) == 0 || access(b, F_OK) == 0;
}

static json_t *load_json(const char *path, struct dsec_err *err)
{
	json_error_t je;
	struct stat sb;
	json_t *j;

	if (stat(path, &sb) < 0)
		return dsec_err_set(err, errno, "cannot read '%s': %s", path, strerror(errno)), NULL;
	if (sb.st_size > OCI_JSON_MAX)
		return dsec_err_set(err, EFBIG, "cannot read '%s': over %u bytes", path, OCI_JSON_MAX),
		       NULL;
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		dsec_err_set(err, EINVAL, "cannot read '%s': %s at line %d", path, je.text, je.line);
	return j;
}

/* Path of a relative name inside dir, NULL if it is not there or would
 * leave dir, by ".." or by a symlink (an archive may hold any). */
static char *inside(const char *dir, const char *rel)
{
	char rdir[PATH_MAX], rpath[PATH_MAX];

	if (!rel || !*rel || rel[0] == '/')
		return NULL;
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
	if (!realpath(dir, rdir) || !realpath(p, rpath))
		return NULL;
	size_t n = strlen(rdir);
	if (strncmp(rpath, rdir, n) || rpath[n] != '/')
		return NULL;
	return xstrdup(rpath);
}

/* The blob a "sha256:<hex>" descriptor names, checked against its digest. */
static char *blob_path(const char *dir, const json_t *desc, struct dsec_err *err)
{
	const char *dg = json_string_value(json_object_get(desc, "digest"));
	struct fs3_digest want, got;
	char *p;
	int r;

	if (!dg || strncmp(dg, "sha256:", 7) || fs3_digest_parse(dg, &want) < 0)
		return dsec_err_set(err, EINVAL, "cannot read image '%s': a descriptor without a "
				    "sha256 digest", dir), NULL;
	_cleanup_free_ char *rel = xasprintf("blobs/sha256/%s", dg + 7);
	if (!(p = inside(dir, rel)))
		return dsec_err_set(err, ENOENT, "cannot read image '%s': no blob '%s' in it", dir,
				    dg), NULL;
	if ((r = fs3_sha256_file(p, &got)) < 0) {
		dsec_err_set(err, -r, "cannot read blob '%s': %s", p, strerror(-r));
		free(p);
		return NULL;
	}
	if (memcmp(got.b, want.b, FS3_DIGEST_LEN)) {
		dsec_err_set(err, EBADMSG, "cannot use blob '%s': its content does not match its digest", p);
		free(p);
		return NULL;
	}
	return p;
}

static json_t *load_blob(const char *dir, const json_t *desc, struct dsec_err *err)
{
	_cleanup_free_ char *p = blob_path(dir, desc, err);

	return p ? load_json(p, err) : NULL;
}

/* Of an index's manifests, the one for this platform (or the only one). */
static const json_t *pick(const char *dir, const json_t *index, struct dsec_err *err)
{
	const json_t *ms = json_object_get(index, "manifests"), *m, *found = NULL;
	size_t i;

	if (!json_is_array(ms) || json_array_size(ms) == 0)
		return dsec_err_set(err, EINVAL, "cannot read image '%s': an index lists no manifests",
				    dir), NULL;
	if (json_array_size(ms) == 1)
		return json_array_get(ms, 0);
	json_array_foreach(ms, i, m) {
		const json_t *pf = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *arch = json_string_value(json_object_get(pf, "architecture"));
		if (!found && os && arch && !strcmp(os, "linux") && !strcmp(arch, OCI_ARCH))
			found = m;
	}
	if (!found)
		dsec_err_set(err, ENOENT, "cannot read image '%s': no manifest for linux/%s", dir, OCI_ARCH);
	return found;
}

static char **strv_of(const json_t *a)
{
	size_t n = json_is_array(a) ? json_array_size(a) : 0, k = 0, i;
	char **v = xcalloc(n + 1, sizeof(*v));
	const json_t *s;

	if (n)
		json_array_foreach(a, i, s)
			if (json_is_string(s))
				v[k++] = xstrdup(json_string_value(s));
	return v;
}

/* Takes Env, WorkingDir, User, Entrypoint + Cmd from an image config. */
static void read_config(const json_t *j, struct fs3_image_config *cfg)
{
	const json_t *c = json_object_get(j, "config");
	const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
	const char *user = json_string_value(json_object_get(c, "User"));
	char **ep = strv_of(json_object_get(c, "Entrypoint"));
	char **cmd = strv_of(json_object_get(c, "Cmd"));
	size_t ne = dsec_strv_len((const char *const *)ep), nc = dsec_strv_len((const char *const *)cmd);

	cfg->env = strv_of(json_object_get(c, "Env"));
	cfg->cwd = xstrdup(wd ? wd : "");
	cfg->user = xstrdup(user ? user : "");
	cfg->entrypoint = xrealloc(ep, (ne + nc + 1) * sizeof(*ep));
	memcpy(cfg->entrypoint + ne, cmd, (nc + 1) * sizeof(*cmd));
	free(cmd);
}

/* Both readers give the layer paths (*layers) and the config JSON (*confp). */
static int read_oci(const char *dir, char ***layers, json_t **confp, struct dsec_err *err)
{
	_cleanup_free_ char *ip = xasprintf("%s/index.json", dir);
	json_t *idx = load_json(ip, err), *cur = idx, *man = NULL, *conf = NULL;
	const json_t *desc, *ls, *l;
	char **v = NULL;
	size_t i;
	int r = -EINVAL;

	if (!idx)
		return -EINVAL;
	/* Follow nested indexes down to an image manifest. */
	for (int depth = 0;; depth++) {
		if (depth == OCI_DEPTH_MAX) {
			dsec_err_set(err, ELOOP, "cannot read image '%s': indexes nested too deep", dir);
			goto out;
		}
		if (!(desc = pick(dir, cur, err)) || !(man = load_blob(dir, desc, err)))
			goto out;
		if (!json_object_get(man, "manifests"))
			break;
		if (cur != idx)
			json_decref(cur);
		cur = dsec_steal_pointer(&man);
	}
	ls = json_object_get(man, "layers");
	if (!json_is_array(ls)) {
		dsec_err_set(err, EINVAL, "cannot read image '%s': its manifest lists no layers", dir);
		goto out;
	}
	if (!(conf = load_blob(dir, json_object_get(man, "config"), err)))
		goto out;
	v = xcalloc(json_array_size(ls) + 1, sizeof(*v));
	json_array_foreach(ls, i, l)
		if (!(v[i] = blob_path(dir, l, err)))
			goto out;
	*layers = dsec_steal_pointer(&v);
	*confp = dsec_steal_pointer(&conf);
	r = 0;
out:
	if (v)
		dsec_strv_free(v);
	json_decref(conf);
	json_decref(man);
	if (cur != idx)
		json_decref(cur);
	json_decref(idx);
	return r;
}

/* docker save before OCI: manifest.json = [{"Config": path, "Layers": [paths]}]. */
static int read_docker(const char *dir, char ***layers, json_t **confp, struct dsec_err *err)
{
	_cleanup_free_ char *mp = xasprintf("%s/manifest.json", dir);
	json_t *m = load_json(mp, err), *conf = NULL;
	const json_t *e = json_array_get(m, 0), *ls = json_object_get(e, "Layers"), *l;
	char **v = NULL;
	size_t i;
	int r = -EINVAL;

	if (!m)
		return -EINVAL;
	_cleanup_free_ char *cp = inside(dir, json_string_value(json_object_get(e, "Config")));
	if (!cp || !json_is_array(ls)) {
		dsec_err_set(err, EINVAL, "cannot read '%s': no Config inside it and Layers of an "
			     "image", mp);
		goto out;
	}
	if (json_array_size(m) > 1)
		log_warn("'%s' holds %zu images; importing the first", mp, json_array_size(m));
	if (!(conf = load_json(cp, err)))
		goto out;
	v = xcalloc(json_array_size(ls) + 1, sizeof(*v));
	json_array_foreach(ls, i, l) {
		if (!(v[i] = inside(dir, json_string_value(l)))) {
			dsec_err_set(err, EINVAL, "cannot read '%s': layer %zu is not a file inside it",
				     mp, i);
			goto out;
		}
	}
	*layers = dsec_steal_pointer(&v);
	*confp = dsec_steal_pointer(&conf);
	r = 0;
out:
	if (v)
		dsec_strv_free(v);
	json_decref(conf);
	json_decref(m);
	return r;
}

int fs3_oci_read(const char *dir, char ***layers, struct fs3_image_config *cfg,
		 const char **format, struct dsec_err *err)
{
	_cleanup_free_ char *lay = xasprintf("%s/oci-layout", dir);

	json_t *conf = NULL;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	*format = access(lay, F_OK) == 0 ? "oci" : "docker";
	r = **format == 'o' ? read_oci(dir, layers, &conf, err) : read_docker(dir, layers, &conf, err);
	if (r == 0)
		read_config(conf, cfg);
	json_decref(conf);
	/* The readers say -EINVAL; err knows the cause. */
	return r < 0 && err && err->errnum ? -err->errnum : r;
}
