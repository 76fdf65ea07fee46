/* ct_root.h - what a sandbox's root takes from the host, by path: the
 * default root's read-only binds and the device nodes every root gets
 * (container-init's build_root), and so what the base mount namespace
 * the sandboxes are cloned from holds of the host (basens.c).
 */
#ifndef CT_ROOT_H
#define CT_ROOT_H

/* The default root's top directories (symlinks such as /bin -> usr/bin
 * followed) and what programs need of /etc. */
#define CT_TOP_DIRS { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" }
#define CT_ETC_DIRS { "/etc/alternatives", "/etc/ssl", "/etc/ld.so.conf.d", \
		      "/etc/ca-certificates", "/etc/python3", "/etc/python3.11" }
/* The host's /etc files a skeleton copies (no secrets). */
#define CT_ETC_FILES { "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", \
		       "/etc/os-release", "/etc/debian_version", "/etc/nsswitch.conf", \
		       "/etc/mime.types", "/etc/protocols", "/etc/services", \
		       "/etc/bash.bashrc", "/etc/profile" }
/* The harmless nodes every root's /dev binds from the host. */
#define CT_DEVS { "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", \
		  "/dev/tty" }
/* The stand-ins of what a create's grade_layers keep from the sandbox
 * (probe.c): at most this many in one root, none at the names every root
 * has of its own (build_root makes them). */
#define CT_PROBES_MAX 16
#define CT_OWN_TOP { "dev", "proc", "sys", "tmp", "etc" }

#endif
