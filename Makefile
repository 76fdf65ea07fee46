# dsec - one hand-written GNU Makefile.  `make V=1` shows the commands;
# local overrides go in config.mak (not tracked).

-include config.mak

PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
LIBEXECDIR  ?= $(PREFIX)/libexec/dsec
BACKENDDIR  ?= $(LIBDIR)/dsec/backends
MANDIR      ?= $(PREFIX)/share/man
SYSTEMDUNITDIR ?= $(LIBDIR)/systemd/system
PYTHONDIR   ?= $(PREFIX)/lib/python3/dist-packages
DESTDIR     ?=

# The version has one place, DSEC_VERSION in lib/dsec.h (programs print it,
# clients test it); dsec.pc is made from there.
VERSION    := $(shell sed -n 's/^.define DSEC_VERSION "\([^"]*\)".*/\1/p' lib/dsec.h)
ifeq ($(VERSION),)
$(error cannot find the version: lib/dsec.h defines no DSEC_VERSION "X.Y.Z")
endif

CC          ?= cc
AR          ?= ar
PKG_CONFIG  ?= pkg-config
PROVE       ?= prove
INSTALL     ?= install

# Debian packages the build and the tests need (make deps installs the missing ones).
DEB_PACKAGES = build-essential pkg-config libev-dev libnng-dev libmsgpack-dev \
	libseccomp-dev libnl-3-dev libnl-route-3-dev libnftables-dev nftables libzstd-dev mandoc \
	python3 python3-msgpack perl iproute2 util-linux procps \
	libssl-dev libarchive-dev libjansson-dev erofs-utils zstd debootstrap wget \
	libfuse3-dev fuse3 cmake libmbedtls-dev patch xz-utils strace openssl libncurses-dev \
	python3-pytest python3-setuptools python3-venv prometheus
# Several nodes on one machine: serf is the gossip baseline (make
# bench-gossip), MooseFS the distributed origin of the cluster tests.
DEB_PACKAGES += serf moosefs-master moosefs-chunkserver moosefs-client
# criu (`make criu`, deps/criu/build.sh): what its build needs, installed by
# `make deps` whether or not it is built.
CRIU_DEB_PACKAGES = libbsd-dev libcap-dev libnet1-dev libnl-3-dev \
	libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler protobuf-compiler \
	uuid-dev pkg-config wget xz-utils patch
DEB_PACKAGES += $(CRIU_DEB_PACKAGES)

# Flags: the project's own are in ALL_CPPFLAGS and ALL_CFLAGS (a target adds
# to them with `TARGET: ALL_CFLAGS += ...`); CPPFLAGS, CFLAGS and LDFLAGS
# are the user's and come last, so `make CFLAGS=-O0` changes the
# optimisation and keeps the standard, -fPIC, the dependency files, the
# warnings and the include paths (git's ALL_CFLAGS).  OPT is the default
# optimisation, before CFLAGS.
WARN        = -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2
ifeq ($(WERROR),1)
WARN       += -Werror
endif
OPT        ?= -O2 -g
# nng: Debian 12's libnng 1.5.2 stops accepting on a listener for good once
# a client leaves during the SP handshake (nanomsg/nng#1518: four bytes on
# dsecd's socket stop the node).  So dsec links its own: Debian's source
# package with Debian's patches and ours (deps/nng/), static and -fPIC, with
# mbedTLS as Debian builds it, made by deps/nng/build.sh into build/nng.  The
# fetched sources stay in NNG_CACHE, which `make clean` keeps.  NNG=system
# links the system's libnng instead (one with the fix; t/8401 fails on 1.5.2).
NNG        ?= bundled
NNG_CACHE  ?= deps/cache
# libdsec.so and the tools link a second build of it with a few fixed
# threads instead of some per CPU (deps/nng/build.sh, "client").
ifeq ($(NNG),system)
NNG_LIB     =
NNG_CFLAGS  =
NNG_LIBS    = -lnng
NNG_CLIENT_LIB  =
NNG_CLIENT_LIBS = -lnng
else
NNG_LIB     = build/nng/lib/libnng.a
NNG_CFLAGS  = -Ibuild/nng/include
NNG_LIBS    = $(NNG_LIB) -lmbedtls -lmbedx509 -lmbedcrypto
NNG_CLIENT_LIB  = build/nng-client/lib/libnng.a
NNG_CLIENT_LIBS = $(NNG_CLIENT_LIB) -lmbedtls -lmbedx509 -lmbedcrypto
endif
# libev and nng ship no .pc file on Debian 12: fall back to plain -l flags.
PC_CFLAGS  := $(shell $(PKG_CONFIG) --cflags msgpack libseccomp 2>/dev/null)
PC_LIBS    := $(shell $(PKG_CONFIG) --libs msgpack libseccomp 2>/dev/null || echo -lmsgpackc -lseccomp)
ALL_CPPFLAGS = -Ilib -Ifs3 $(NNG_CFLAGS) -D_GNU_SOURCE \
	-DDSEC_BACKEND_DIR='"$(BACKENDDIR)"' -DDSEC_HELPER_DIR='"$(LIBEXECDIR)"' $(CPPFLAGS)
ALL_CFLAGS  = -std=gnu11 $(OPT) $(WARN) -fPIC -MMD -MP $(PC_CFLAGS) $(FS3_CFLAGS) $(CFLAGS)
# Links and nftables rules of allowlisted sandbox networks (container.so).
NET_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnl-route-3.0 libnftables 2>/dev/null || echo -I/usr/include/libnl3)
NET_LIBS   := $(shell $(PKG_CONFIG) --libs libnl-route-3.0 libnftables 2>/dev/null || echo -lnl-route-3 -lnl-3 -lnftables)
LDLIBS_LIB  = $(NNG_CLIENT_LIBS) -lpthread $(PC_LIBS)
LDLIBS_D    = -lev $(NNG_LIBS) -lpthread -ldl -lm $(PC_LIBS)
LDLIBS_C    = -lev $(NNG_CLIENT_LIBS) -lpthread -ldl -lm $(PC_LIBS)
# fs3: SHA-256 from libcrypto, tars from libarchive, chunks through zstd,
# OCI/docker image metadata through jansson.
FS3_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcrypto libarchive libzstd jansson fuse3 2>/dev/null)
FS3_LIBS   := $(shell $(PKG_CONFIG) --libs libcrypto libarchive libzstd jansson fuse3 2>/dev/null || \
	echo -lcrypto -larchive -lzstd -ljansson -lfuse3)
# libfuse: the stand-ins of a sandbox's grade_layers (container.so).
FUSE_LIBS  := $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null || echo -lfuse3)
# libarchive: tar upload and download of the file API (be_fs in backends).
ARCHIVE_LIBS := $(shell $(PKG_CONFIG) --libs libarchive 2>/dev/null || echo -larchive)

# Sanitizers: SAN=1 builds with AddressSanitizer and UBSan (`make asan` does
# it in a copy of the tree, see there).  What runs inside a sandbox or is
# preloaded into a sandbox's programs (the helpers, *-preload.so) and the
# static container-init cannot carry the ASan runtime: they are built
# without it, from objects in build/nosan.
SAN_FLAGS  = -fsanitize=address,undefined -fno-omit-frame-pointer
ifeq ($(SAN),1)
ALL_CFLAGS += $(SAN_FLAGS)
# override: appended to an LDFLAGS given on the command line too.
override LDFLAGS += $(SAN_FLAGS)
HOBJ        = build/nosan
HLIBDSEC    = build/nosan/lib/libdsec.a
else
HOBJ        = build
HLIBDSEC    = lib/libdsec.a
endif
HCFLAGS     = $(filter-out $(SAN_FLAGS),$(ALL_CFLAGS))
HLDFLAGS    = $(filter-out $(SAN_FLAGS),$(LDFLAGS))
HBE_LIB     = $(HOBJ)/backends/libbe.a

ifeq ($(V),1)
Q =
q = @:
else
Q = @
q = @printf '  %-7s %s\n'
endif

# libdsec's soname: its major version, raised with every change of its ABI
# (1: the info structs carry all of info's reply).
SONAME      = libdsec.so.1
LIB_SRC     = lib/client.c lib/client-ops.c lib/client-files.c lib/client-info.c lib/client-rl.c lib/backend.c lib/err.c lib/log.c lib/proto.c lib/util.c
LIB_OBJ     = $(LIB_SRC:%.c=build/%.o)
FS3_SRC     = fs3/fs3.c fs3/tags.c fs3/acquire.c fs3/squash.c fs3/pull.c fs3/gc.c \
	fs3/image.c fs3/import.c fs3/layer.c fs3/oci.c fs3/ondemand.c fs3/peer.c \
	fs3/snap.c fs3/store.c
FS3_OBJ     = $(FS3_SRC:%.c=build/%.o)
DSECD_SRC   = dsecd/main.c dsecd/config.c dsecd/server.c dsecd/pool.c dsecd/loader.c \
	dsecd/sandbox.c dsecd/image.c dsecd/warm.c dsecd/ops.c dsecd/ops-node.c \
	dsecd/ops-sandbox.c dsecd/ops-exec.c dsecd/ops-file.c dsecd/ops-image.c dsecd/stream.c \
	dsecd/stage.c \
	dsecd/cluster.c dsecd/metrics.c dsecd/batch.c dsecd/gossip.c
# Placement (issue 12): pure, linked alone by its test and the simulator.
DSECD_SRC  += dsecd/place.c dsecd/placing.c
# rlcoord (issue 13): the trajectory log, leases, idempotent creates.
DSECD_SRC  += rlcoord/tlog.c rlcoord/export.c rlcoord/journal.c rlcoord/replica.c rlcoord/token.c \
	rlcoord/lease.c rlcoord/grade.c rlcoord/reset.c rlcoord/watch.c \
	rlcoord/recover.c
# A snapshot removes stage files from its copy with be_openat2 (ops-image.c).
DSECD_SRC  += backends/common/be_io.c
DSECD_OBJ   = $(DSECD_SRC:%.c=build/%.o)
# ---- backends: the sources of each (see the rules below) ----
# backends/NAME.so is made of BE_NAME_SRC (its folder backends/NAME/) and
# the modules of backends/common/ it uses; adding a backend is adding its
# name to BE_NAMES and a BE_NAME_SRC list.
BE_NAMES    = container fncall
BE_container_SRC = $(addprefix backends/container/,container.c criu.c spawn.c create.c exec.c \
	stream.c files.c control.c sessions.c basens.c netpool.c probe.c)
BE_fncall_SRC = $(addprefix backends/fncall/,fncall.c call.c zygote.c)
BE_COMMON_SRC = $(addprefix backends/common/,be_cgroup.c be_child.c be_conf.c be_cred.c be_fs.c \
	be_fs_remote.c be_io.c be_net.c be_netpol.c be_path.c be_procmask.c be_relayout.c \
	be_scnotify.c be_seccomp.c be_session.c be_task.c be_title.c)
BE_SO       = $(addprefix backends/,$(addsuffix .so,$(BE_NAMES)))
BE_COMMON   = $(BE_COMMON_SRC:%.c=build/%.o)
# An archive, so each backend and helper links only the modules it uses.
BE_LIB      = build/backends/libbe.a
# Helper programs, preloaded objects and helper files are built into
# HELPER_OUT, the tree's helper_dir (make install puts them in LIBEXECDIR),
# so that backends/ holds backends only (dsecd loads BACKEND_DIR/NAME.so).
HELPER_OUT  = build/libexec
HELPERS     = $(addprefix $(HELPER_OUT)/,container-init container-files container-criu fncall-zygote)
HELPER_FILES = $(HELPER_OUT)/fncall_zygote.py
PRELOADS    = $(addprefix $(HELPER_OUT)/,container-preload.so fncall-preload.so)
TOOLS       = $(patsubst %.c,%,$(wildcard tools/dsec-*.c)) tools/dsecctl
TEST_C      = $(filter-out t/helper-%.c t/be-%.c,$(wildcard t/*.c))
TEST_BIN    = $(patsubst t/%.c,t/c/%.t,$(TEST_C))
TEST_HELPERS = $(patsubst %.c,%,$(wildcard t/helper-*.c)) \
	$(patsubst t/be-%.c,t/%.so,$(wildcard t/be-*.c))
MANPAGES    = $(wildcard man/*.[1-9])

all: lib/libdsec.a lib/libdsec.so lib/$(SONAME) lib/dsec.pc lib/dsec-uninstalled.pc fs3/libfs3.a dsecd/dsecd $(BE_SO) $(HELPERS) $(PRELOADS) $(HELPER_FILES) $(TOOLS) tools/fs3-bench build/dsecd.service \
	gossip/libswim.a tools/swim-sim

lib/libdsec.a: $(LIB_OBJ)
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# fs3: a static library for dsecd, dsecctl and the t/2xxx tests.
fs3/libfs3.a: $(FS3_OBJ)
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# ---- gossip: libswim (SWIM + Lifeguard membership, gossip/swim.h) ------------
# A static library for dsecd and the t/1xxx tests: the protocol (swim.c),
# its libev/UDP/TCP binding (swim_ev.c) and the simulated network
# (swim_sim.c) the tests and tools/swim-sim run it on.  HMAC from
# libcrypto; msgpack through libdsec's bounds check (proto.c).
SWIM_SRC    = gossip/swim.c gossip/swim_recv.c gossip/swim_ev.c gossip/swim_sim.c
SWIM_OBJ    = $(SWIM_SRC:%.c=build/%.o)
SWIM_LIBS   = gossip/libswim.a lib/libdsec.a
SWIM_LDLIBS = -lev -lcrypto -lm $(PC_LIBS)
SWIM_ALL    = gossip/libswim.a tools/swim-sim

gossip/libswim.a: $(SWIM_OBJ)
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

build/t/1%.o build/tools/swim-sim.o: ALL_CPPFLAGS += -Igossip
t/c/1%.t: build/t/1%.o $(SWIM_LIBS)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< $(SWIM_LIBS) $(LDFLAGS) $(SWIM_LDLIBS)

# Its fuzz target (fuzz/swim_packet.c, see the fuzzing section).
FUZZ_LIBS_swim_packet = $(call fuzz_obj,$(SWIM_SRC)) -lev -lcrypto -lm
build/fuzz/obj/fuzz/swim_packet.o: ALL_CPPFLAGS += -Igossip

# The simulator: the real protocol, many nodes, simulated time (figures;
# not run by make check but for a tiny smoke run in t/1090).
tools/swim-sim: build/tools/swim-sim.o $(SWIM_LIBS)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< $(SWIM_LIBS) $(LDFLAGS) $(SWIM_LDLIBS)

# nng is linked in and not exported (a program may load another libnng);
# of libdsec's own functions only those marked DSEC_API are (t/0009).
build/lib/%.o: ALL_CFLAGS += -fvisibility=hidden
lib/libdsec.so: $(LIB_OBJ) $(NNG_CLIENT_LIB)
	$(q) LD $@
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $(LIB_OBJ) -Wl,--exclude-libs,libnng.a \
		$(LDFLAGS) $(LDLIBS_LIB)

# Its soname, so that programs linked against the tree run with
# LD_LIBRARY_PATH=lib.
lib/$(SONAME): lib/libdsec.so
	$(Q)ln -sf libdsec.so $@

# pkg-config files: $(1) prefix, $(2) libdir, $(3) includedir, $(4) what a
# static link adds.
define gen_pc
	$(q) GEN $@
	$(Q)printf '%s\n' 'prefix=$(1)' 'libdir=$(2)' 'includedir=$(3)' '' \
		'Name: dsec' 'Description: client library of the dsec sandbox platform' \
		'Version: $(VERSION)' 'Requires.private: msgpack' \
		'Libs: -L$${libdir} -ldsec' 'Libs.private: $(4)' \
		'Cflags: -I$${includedir}' > $@
endef

build/dsecd.service: dsecd/dsecd.service.in build/DSEC-PREFIX
	$(q) GEN $@
	$(Q)sed 's|@SBINDIR@|$(SBINDIR)|g' $< > $@

lib/dsec.pc: Makefile lib/dsec.h build/DSEC-PREFIX
	$(call gen_pc,$(PREFIX),$(LIBDIR),$(INCLUDEDIR),-lnng -lpthread)

# The same for building against this tree uninstalled: pkg-config prefers
# it when PKG_CONFIG_PATH has lib/ (`#include <dsec/dsec.h>` finds lib/ through
# build/include/dsec; run with LD_LIBRARY_PATH=lib).
NNG_LIBS_TREE = $(patsubst build/%,$${prefix}/build/%,$(NNG_LIBS))
lib/dsec-uninstalled.pc: Makefile lib/dsec.h build/DSEC-PREFIX | build/include/dsec
	$(call gen_pc,$(CURDIR),$${prefix}/lib,$${prefix}/build/include,$(NNG_LIBS_TREE) -lpthread)

build/include/dsec:
	$(Q)mkdir -p $(@D) && ln -sfn ../../lib $@

# Rebuilt when their value changes (git's GIT-CFLAGS and GIT-PREFIX): the
# compiler and flags (objects depend on it; LDFLAGS too, so a change of it
# relinks), the install paths and where the tree is (the .pc files depend
# on it).  Each file is rewritten only when its value differs.  := takes
# the global values: a target's own additions (which make would hand to
# its prerequisites, these files too) must not change them.
TRACK_CFLAGS := $(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS)
TRACK_PREFIX := $(PREFIX):$(BINDIR):$(SBINDIR):$(LIBDIR):$(INCLUDEDIR):$(LIBEXECDIR):$(BACKENDDIR):$(MANDIR):$(CURDIR)
sq           = $(subst ','\'',$(1))
build/DSEC-CFLAGS build/DSEC-PREFIX: FORCE
	@mkdir -p $(@D); v='$(call sq,$(TRACK_$(@F:DSEC-%=%)))'; \
	if [ x"$$v" != x"$$(cat $@ 2>/dev/null)" ]; then \
		[ ! -e $@ ] || echo "    * new $(@F:DSEC-%=%): rebuilding what depends on it"; \
		printf '%s\n' "$$v" > $@; \
	fi

# dsecd gossips with libswim (gossip/, dsecd/gossip.c).
build/dsecd/%.o: ALL_CPPFLAGS += -Igossip -Irlcoord
build/rlcoord/%.o: ALL_CPPFLAGS += -Idsecd -Igossip -Irlcoord
dsecd/dsecd: $(DSECD_OBJ) gossip/libswim.a fs3/libfs3.a lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $(DSECD_OBJ) gossip/libswim.a fs3/libfs3.a lib/libdsec.a $(LDFLAGS) \
		$(LDLIBS_D) $(FS3_LIBS)

# dsecd's C tests (t/5xxx.c) link its objects but main.o and server.o: the
# test is the server.
DSECD_TEST_OBJ = $(filter-out build/dsecd/main.o build/dsecd/server.o,$(DSECD_OBJ))
build/t/5%.o: ALL_CPPFLAGS += -Idsecd
t/c/5%.t: build/t/5%.o $(DSECD_TEST_OBJ) gossip/libswim.a fs3/libfs3.a lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< $(DSECD_TEST_OBJ) gossip/libswim.a fs3/libfs3.a \
		lib/libdsec.a $(LDFLAGS) $(LDLIBS_D) $(FS3_LIBS)

# ---- placement: dsecd/place.c's test (t/12xx) and the simulator ----
# place.c does no I/O: what uses it links its object and libdsec (xmalloc).
SIM_TOOLS  += tools/place-sim
all: $(SIM_TOOLS)
build/t/12%.o build/tools/place-sim.o: ALL_CPPFLAGS += -Idsecd
t/c/12%.t: build/t/12%.o build/dsecd/place.o lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< build/dsecd/place.o lib/libdsec.a $(LDFLAGS) $(LDLIBS_D)

tools/place-sim: build/tools/place-sim.o build/dsecd/place.o lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< build/dsecd/place.o lib/libdsec.a $(LDFLAGS) $(LDLIBS_D)

# Backends: one shared object each; only the ops table is exported.  The
# backends' sources find the shared modules' headers in backends/common.
build/backends/%.o build/nosan/backends/%.o: ALL_CPPFLAGS += -Ibackends/common
build/dsecd/ops-image.o build/nosan/dsecd/ops-image.o: ALL_CPPFLAGS += -Ibackends/common
build/backends/%.o: ALL_CFLAGS += -fvisibility=hidden
$(BE_LIB): $(BE_COMMON)
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

build/backends/common/be_netpol.o build/nosan/backends/common/be_netpol.o: ALL_CFLAGS += $(NET_CFLAGS)
backends/container.so: BE_LIBS = $(NET_LIBS) $(FUSE_LIBS)

backends/container.so: $(BE_container_SRC:%.c=build/%.o)
backends/fncall.so: $(BE_fncall_SRC:%.c=build/%.o)
backends/%.so: $(BE_LIB) lib/libdsec.a
	$(q) LD $@
	$(Q)$(CC) -shared -o $@ $(filter %.o,$^) $(BE_LIB) lib/libdsec.a -Wl,--exclude-libs,ALL \
		$(LDFLAGS) $(BE_LIBS) -lev -lpthread $(ARCHIVE_LIBS) $(PC_LIBS)

# Objects preloaded into a runtime by a helper: nothing exported, only
# what they use linked in, msgpack-c statically (they live in every unit of
# the runtime, and every shared object is more mappings for each fork).
PRELOAD_COMMON = $(addprefix $(HOBJ)/backends/common/,be_io.o be_relayout.o be_path.o)
$(HELPER_OUT)/container-preload.so: $(HOBJ)/backends/container/container-preload.o
# fncall's units make and check their network and IPC namespaces.
$(HELPER_OUT)/fncall-preload.so: $(HOBJ)/backends/fncall/fncall-preload.o \
	$(HOBJ)/backends/fncall/be_callns.o $(HOBJ)/backends/common/be_net.o
$(PRELOADS): $(PRELOAD_COMMON) $(HLIBDSEC)
	$(q) LD $@
	$(Q)mkdir -p $(@D) && $(CC) -shared -o $@ $(filter %.o,$^) $(HLIBDSEC) -Wl,--exclude-libs,ALL \
		-Wl,--as-needed $(HLDFLAGS) -l:libmsgpackc.a $(PC_LIBS)

# The helper programs, run by the backends: each links the shared modules
# it uses.
$(HELPER_OUT)/container-files: $(HOBJ)/backends/container/container-files-helper.o
$(HELPER_OUT)/fncall-zygote: $(HOBJ)/backends/fncall/fncall-zygote-helper.o \
	$(HOBJ)/backends/fncall/zygote-count.o
$(HELPER_OUT)/container-files $(HELPER_OUT)/fncall-zygote: $(HBE_LIB) $(HLIBDSEC) $(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p $(@D) && $(CC) -o $@ $(filter $(HOBJ)/%.o,$^) $(HBE_LIB) $(HLIBDSEC) $(HLDFLAGS) \
		$(LDLIBS_D)

# A container sandbox's file server: tar upload and download need libarchive.
$(HELPER_OUT)/container-files: LDLIBS_D += $(ARCHIVE_LIBS)

# Every sandbox's init, started at each create (and for large execs):
# static, so no dynamic loader runs at each start (about a quarter of its
# start-up CPU and half its page faults on this machine).  Its parts share
# backends/container/ct_init.h.
CT_INIT_OBJ = $(addprefix $(HOBJ)/backends/container/,container-init-helper.o init-count.o \
	init-tpl.o)
$(HELPER_OUT)/container-init: $(CT_INIT_OBJ) $(HBE_LIB) $(HLIBDSEC)
	$(q) LD $@
	$(Q)mkdir -p $(@D) && $(CC) -static -o $@ $(CT_INIT_OBJ) $(HBE_LIB) $(HLIBDSEC) $(HLDFLAGS) \
		$(shell $(PKG_CONFIG) --static --libs libseccomp 2>/dev/null || echo -lseccomp)

# criu inside a container sandbox's mount namespace (fork with processes):
# its cgroups through be_cgroup.
$(HELPER_OUT)/container-criu: $(HOBJ)/backends/container/container-criu-helper.o $(HBE_LIB) \
		$(HLIBDSEC)
	$(q) LD $@
	$(Q)mkdir -p $(@D) && $(CC) -o $@ $< $(HBE_LIB) $(HLIBDSEC) $(HLDFLAGS)

# The Python runtime's zygote, run by fncall-zygote from the helper_dir.
$(HELPER_OUT)/fncall_zygote.py: backends/fncall/fncall_zygote.py
	$(q) CP $@
	$(Q)mkdir -p $(@D) && cp $< $@

# Cold-start figures of fs3 on demand vs whole (tools/coldstart.sh); not installed.
tools/fs3-bench: build/tools/fs3-bench.o fs3/libfs3.a lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< fs3/libfs3.a lib/libdsec.a $(LDFLAGS) $(LDLIBS_D) $(FS3_LIBS)

tools/dsecctl: build/tools/dsecctl.o fs3/libfs3.a lib/libdsec.a $(NNG_CLIENT_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< fs3/libfs3.a lib/libdsec.a $(LDFLAGS) $(LDLIBS_C) $(FS3_LIBS)

# dsec-top draws with ncurses (wide characters).
CURSES_LIBS := $(shell $(PKG_CONFIG) --libs ncursesw 2>/dev/null || echo -lncursesw)
tools/dsec-top: build/tools/dsec-top.o lib/libdsec.a $(NNG_CLIENT_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< lib/libdsec.a $(LDFLAGS) $(LDLIBS_C) $(CURSES_LIBS)

# dsec-run --batch reads its jobs with jansson.
JANSSON_CFLAGS := $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
build/tools/run-batch.o build/tools/run-traj.o: ALL_CFLAGS += $(JANSSON_CFLAGS)
RUN_OBJ = build/tools/dsec-run.o build/tools/run-batch.o build/tools/run-traj.o
tools/dsec-run: $(RUN_OBJ) lib/libdsec.a $(NNG_CLIENT_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $(RUN_OBJ) lib/libdsec.a $(LDFLAGS) $(LDLIBS_C) $(JANSSON_LIBS) -lm

tools/%: build/tools/%.o lib/libdsec.a $(NNG_CLIENT_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< lib/libdsec.a $(LDFLAGS) $(LDLIBS_C)

t/helper-%: build/t/helper-%.o lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)$(CC) -o $@ $< lib/libdsec.a $(LDFLAGS) $(LDLIBS_D)

build/t/be-%.o: ALL_CFLAGS += -fvisibility=hidden
t/%.so: build/t/be-%.o lib/libdsec.a
	$(q) LD $@
	$(Q)$(CC) -shared -o $@ $< lib/libdsec.a -Wl,--exclude-libs,ALL $(LDFLAGS) -lev $(PC_LIBS)

# fs3 tests (2xxx) link fs3 too.
t/c/2%.t: build/t/2%.o fs3/libfs3.a lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< fs3/libfs3.a lib/libdsec.a $(LDFLAGS) $(LDLIBS_D) $(FS3_LIBS)

t/c/%.t: build/t/%.o lib/libdsec.a $(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< lib/libdsec.a $(LDFLAGS) $(LDLIBS_D)

# C tests of the backends' shared code (be_*.c) link it in.
t/c/3102-cgroup-freeze.t t/c/3193-seccomp-notify.t: t/c/%.t: build/t/%.o $(BE_LIB) lib/libdsec.a \
		$(NNG_LIB)
	$(q) LD $@
	$(Q)mkdir -p t/c && $(CC) -o $@ $< $(BE_LIB) lib/libdsec.a $(LDFLAGS) $(LDLIBS_D)

# Every object, from any folder and sub-folder, may include nng.h: the
# bundled one is installed first.  Objects are rebuilt when the flags change.
build/%.o: %.c build/DSEC-CFLAGS | $(NNG_LIB)
	$(q) CC $@
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

ifeq ($(SAN),1)
build/nosan/backends/%.o: ALL_CFLAGS += -fvisibility=hidden
build/nosan/%.o: %.c build/DSEC-CFLAGS | $(NNG_LIB)
	$(q) CC $@
	$(Q)mkdir -p $(@D) && $(CC) $(ALL_CPPFLAGS) $(HCFLAGS) -c -o $@ $<

build/nosan/backends/libbe.a: $(patsubst build/%,build/nosan/%,$(BE_COMMON))
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

build/nosan/lib/libdsec.a: $(LIB_SRC:%.c=build/nosan/%.o)
	$(q) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^
endif

# The bundled libnng (see NNG above), and its client build.
build/nng/lib/libnng.a: deps/nng/build.sh deps/nng/sources $(wildcard deps/nng/*.patch)
	$(q) NNG $@
	$(Q)deps/nng/build.sh $(NNG_CACHE) build/nng
# After the other: both fetch into NNG_CACHE.
build/nng-client/lib/libnng.a: deps/nng/build.sh deps/nng/sources $(wildcard deps/nng/*.patch) \
		| build/nng/lib/libnng.a
	$(q) NNG $@
	$(Q)deps/nng/build.sh $(NNG_CACHE) build/nng-client client

# criu, for a fork that carries a sandbox's processes (the container
# backend's container.criu): Debian's source package, built by
# deps/criu/build.sh into build/criu/sbin/criu (about two minutes on two
# CPUs), only when asked: `make criu`, or `make check CRIU=1` (deps then
# builds it too).  Its tests (t/32xx) skip without it.
CRIU_CACHE ?= deps/cache
CRIU_BIN    = build/criu/sbin/criu
criu: $(CRIU_BIN)
$(CRIU_BIN): deps/criu/build.sh deps/criu/sources $(wildcard deps/criu/*.patch)
	$(q) CRIU $@
	$(Q)deps/criu/build.sh $(CRIU_CACHE) build/criu

# Installs the Debian packages of the list $(1) that are missing.
define install_debs
	@missing=$$(for p in $(1); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

# Install every missing Debian package the build and tests need, then
# build the bundled libnng.
deps:
	$(call install_debs,$(DEB_PACKAGES))
	$(if $(NNG_LIB),@$(MAKE) --no-print-directory $(NNG_LIB) $(NNG_CLIENT_LIB))
	$(if $(filter 1,$(CRIU)),@$(MAKE) --no-print-directory criu)

check: deps
	$(MAKE) all tests
	$(PROVE) -f $(PROVE_FLAGS) t/c/ t/

# The cgroup, container and fncall basics on a pure cgroup v2 host: Debian's
# kernel booted in QEMU with cgroup_no_v1=all (tools/v2-vm.sh; minutes a
# file without KVM).  Not part of `make check`: this machine's cgroups are
# hybrid, production's v2 only.
deps-v2:
	$(call install_debs,qemu-system-x86 linux-image-amd64 busybox-static file)

check-v2: deps deps-v2
	$(MAKE) all tests
	tools/v2-vm.sh

tests: $(TEST_BIN) $(TEST_HELPERS)

# Figures, not pass/fail: see tools/bench.sh.  Not part of `make check`.
bench: all
	tools/bench.sh

# The rollout figures (tools/bench-rl.sh): durable logging with and
# without, fast-forward beside a ping, fork 16 and reset.
bench-rl: all $(TEST_HELPERS)
	tools/bench-rl.sh

# The Python SDK beside the C client (tools/bench-sdk.sh): one command at
# a time, 256 in flight, a trainer of 1,000 sandboxes; rates, latency and
# each client's own CPU per command.
bench-sdk: all $(TEST_HELPERS)
	tools/bench-sdk.sh

# The container backend's figures (create -> first exec cold and pooled,
# creations/s, pause/resume, 1000 idle sandboxes, bwrap beside).
bench-container: all $(TEST_HELPERS)
	tools/bench-container.sh

# A node full of idle container sandboxes (tools/bench-scale.sh): what the
# next create costs at 0, 1,000, 5,000 and 10,000 of them, and what each costs.
bench-scale: all $(TEST_HELPERS)
	tools/bench-scale.sh

# Cold start of a >= 1 GiB image, on demand vs fetched whole (figures, root).
bench-fs3: all
	tools/coldstart.sh

# A warm create (all chunks local) of an fs3 image vs a plain directory
# layer of the same content: p50/p99 and the difference (figures, root).
bench-image: all $(TEST_HELPERS)
	tools/bench-image.sh

# Membership figures in 5 network namespaces (tools/serf-bench.sh): kill -9
# detection, false failures under loss, bytes/s; serf today, dsecd's gossip
# later with the same method.  GOSSIP_BENCH_FLAGS: its options (-k, -d ...).
.PHONY: bench-gossip
bench-gossip: all
	tools/serf-bench.sh $(GOSSIP_BENCH_FLAGS)

# Placement on five nodes in namespaces: the spread of creates per policy
# and arrival, and a forwarded create's cost over a local one.
.PHONY: bench-place
bench-place: all tests
	tools/place-bench.sh $(PLACE_BENCH_FLAGS)

# ---- fuzzing: not part of `make check` ---------------------------------------
# Each fuzz/NAME.c defines LLVMFuzzerTestOneInput and is built with clang's
# libFuzzer, ASan and UBSan into build/fuzz/NAME, linked with libdsec's
# sources built the same way and with what FUZZ_LIBS_NAME adds: objects of
# FUZZ_OBJ_fs3 or FUZZ_OBJ_dsecd (dsecd without main.c and server.c),
# libraries.  Its seeds are in fuzz/corpus/NAME/, text: a binary seed is
# kept as FILE.hex (hex digits, 64 a line), and `make fuzz-seeds` writes
# every seed as its bytes to build/fuzz/seeds/NAME/.  `make fuzz-build`
# builds every target; `make fuzz` builds them, makes the seeds and runs
# each for FUZZ_TIME seconds (new inputs go to build/fuzz/corpus/NAME,
# crashes to build/fuzz/NAME-*; FUZZ_FLAGS adds libFuzzer flags).
FUZZ_CC     ?= clang
FUZZ_TIME   ?= 600
FUZZ_FLAGS  ?=
FUZZ_DEB_PACKAGES = clang libclang-rt-14-dev
FUZZ_SAN    = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=gnu11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
	$(filter-out -Werror,$(WARN)) $(PC_CFLAGS) $(FS3_CFLAGS)
FUZZ_NAMES  = $(patsubst fuzz/%.c,%,$(wildcard fuzz/*.c))
FUZZ_BIN    = $(addprefix build/fuzz/,$(FUZZ_NAMES))
fuzz_obj    = $(patsubst %.c,build/fuzz/obj/%.o,$(1))
# The objects of FUZZ_LIBS_$(1) (a function: a % in a pattern rule's
# prerequisites would be taken for the stem).
fuzz_objs   = $(filter %.o,$(FUZZ_LIBS_$(1)))
FUZZ_OBJ_lib   = $(call fuzz_obj,$(LIB_SRC))
FUZZ_OBJ_fs3   = $(call fuzz_obj,$(FS3_SRC))
FUZZ_OBJ_dsecd = $(call fuzz_obj,$(filter-out dsecd/main.c dsecd/server.c,$(DSECD_SRC)))
FUZZ_LIBS_request = $(FUZZ_OBJ_dsecd) $(FUZZ_OBJ_fs3) $(call fuzz_obj,$(SWIM_SRC)) $(FS3_LIBS) \
	-lev -ldl -lm
build/fuzz/obj/dsecd/%.o build/fuzz/obj/rlcoord/%.o: ALL_CPPFLAGS += -Igossip -Irlcoord
build/fuzz/obj/dsecd/ops-image.o: ALL_CPPFLAGS += -Ibackends/common
FUZZ_LIBS_reply =
# fs3's decoders: every fs3-NAME target links fs3 as the request target does.
$(foreach n,$(filter fs3-%,$(FUZZ_NAMES)),$(eval FUZZ_LIBS_$(n) = $$(FUZZ_OBJ_fs3) $$(FS3_LIBS)))

build/fuzz/obj/%.o: %.c
	$(q) FUZZCC $@
	$(Q)mkdir -p $(@D) && $(FUZZ_CC) $(ALL_CPPFLAGS) -Idsecd $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

.SECONDEXPANSION:
build/fuzz/%: build/fuzz/obj/fuzz/%.o $$(call fuzz_objs,$$*) $(FUZZ_OBJ_lib)
	$(q) FUZZLD $@
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< $(call fuzz_objs,$*) \
		$(FUZZ_OBJ_lib) $(filter-out %.o,$(FUZZ_LIBS_$*)) $(LDLIBS_LIB)

fuzz-deps:
	$(call install_debs,$(FUZZ_DEB_PACKAGES))

fuzz-build: fuzz-deps
	$(MAKE) $(FUZZ_BIN)

fuzz-seeds:
	@for t in $(FUZZ_NAMES); do \
		rm -rf build/fuzz/seeds/$$t && mkdir -p build/fuzz/seeds/$$t || exit 1; \
		for f in fuzz/corpus/$$t/*; do \
			[ -f "$$f" ] || continue; \
			case $$f in \
			*.hex) perl -ne 'chomp; print pack("H*", $$_)' "$$f" \
				> build/fuzz/seeds/$$t/$$(basename "$$f" .hex) ;; \
			*) cp "$$f" build/fuzz/seeds/$$t/ ;; \
			esac || exit 1; \
		done; \
	done

fuzz: fuzz-build fuzz-seeds
	@for t in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$t || exit 1; \
		echo "fuzz $$t: $(FUZZ_TIME) s"; \
		build/fuzz/$$t -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
			-artifact_prefix=build/fuzz/$$t- $(FUZZ_FLAGS) \
			build/fuzz/corpus/$$t build/fuzz/seeds/$$t || exit 1; \
	done

# The whole tree built with AddressSanitizer and UBSan (SAN=1) in a copy
# at ASAN_DIR, so this tree's build stays as it is; `make check-asan` runs
# the suite there.  Reports (ASan, LeakSanitizer, UBSan) go to
# ASAN_DIR/reports/, one file per process that found something; a huge
# allocation fails as malloc does (allocator_may_return_null).  Not with
# WERROR: the instrumentation makes gcc warn where the plain build does not.
ASAN_DIR   ?= asan
ASAN_ABS    = $(abspath $(ASAN_DIR))

asan:
	$(q) COPY $(ASAN_DIR)
	$(Q)rm -rf $(ASAN_DIR) && mkdir -p $(ASAN_DIR) && \
		tar -cf - --exclude=./$(ASAN_DIR) --exclude=./.git . | tar -xf - -C $(ASAN_DIR) && \
		$(MAKE) -s -C $(ASAN_DIR) clean
	$(MAKE) -C $(ASAN_DIR) SAN=1 WERROR= all tests

check-asan: deps asan
	$(Q)mkdir -p $(ASAN_ABS)/reports
	cd $(ASAN_DIR) && \
		ASAN_OPTIONS=$${ASAN_OPTIONS:-log_path=$(ASAN_ABS)/reports/asan:detect_leaks=1:allocator_may_return_null=1} \
		UBSAN_OPTIONS=$${UBSAN_OPTIONS:-log_path=$(ASAN_ABS)/reports/ubsan:print_stacktrace=1} \
		$(PROVE) $(PROVE_FLAGS) t/c/ t/; \
		echo "sanitizer reports: $$(ls $(ASAN_ABS)/reports | wc -l) in $(ASAN_ABS)/reports"

lint-man:
	mandoc -Tlint -Wwarning $(MANPAGES)

# Start one dsecd with embedded defaults, run a demo, serve until ^C
# (RUN_FLAGS: tools/demo.sh's options, such as --serve or --no-tcp).
run: deps
	$(MAKE) all $(TEST_HELPERS)
	@tools/demo.sh $(RUN_FLAGS)

# What `make install` puts where; `make uninstall` removes the same files.
INST_SBIN    = dsecd/dsecd tools/dsecctl
INST_BIN     = $(filter-out $(INST_SBIN),$(TOOLS))
INST_HEADERS = lib/dsec.h lib/err.h lib/buf.h lib/backend.h
INST_LIBEXEC = $(HELPERS) $(HELPER_FILES) $(PRELOADS)
# The directories that are dsec's own, removed by uninstall once empty.
INST_DIRS    = $(INCLUDEDIR)/dsec $(BACKENDDIR) $(LIBDIR)/dsec $(LIBEXECDIR) $(PYTHONDIR)/dsec
PY_SRC       = $(wildcard lib/python/dsec/*.py)

install: all
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR)/dsec $(DESTDIR)$(BACKENDDIR) $(DESTDIR)$(LIBEXECDIR)
	$(INSTALL) -m 755 $(INST_SBIN) $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 755 $(INST_BIN) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 644 lib/libdsec.a $(DESTDIR)$(LIBDIR)/libdsec.a
	$(INSTALL) -m 755 lib/libdsec.so $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libdsec.so
	$(INSTALL) -m 644 lib/dsec.pc $(DESTDIR)$(LIBDIR)/pkgconfig/dsec.pc
	$(INSTALL) -m 644 $(INST_HEADERS) $(DESTDIR)$(INCLUDEDIR)/dsec/
	$(INSTALL) -m 755 $(BE_SO) $(DESTDIR)$(BACKENDDIR)/
	$(if $(HELPERS),$(INSTALL) -m 755 $(HELPERS) $(DESTDIR)$(LIBEXECDIR)/)
	$(if $(HELPER_FILES),$(INSTALL) -m 644 $(HELPER_FILES) $(DESTDIR)$(LIBEXECDIR)/)
	$(if $(PRELOADS),$(INSTALL) -m 644 $(PRELOADS) $(DESTDIR)$(LIBEXECDIR)/)
	for m in $(MANPAGES); do s=$${m##*.}; \
		$(INSTALL) -d $(DESTDIR)$(MANDIR)/man$$s; \
		$(INSTALL) -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
	$(INSTALL) -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(PYTHONDIR)/dsec
	$(INSTALL) -m 644 build/dsecd.service $(DESTDIR)$(SYSTEMDUNITDIR)/dsecd.service
	$(INSTALL) -m 644 $(PY_SRC) $(DESTDIR)$(PYTHONDIR)/dsec/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,$(notdir $(INST_SBIN))) \
		$(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INST_BIN))) \
		$(addprefix $(DESTDIR)$(LIBDIR)/,libdsec.a $(SONAME) libdsec.so pkgconfig/dsec.pc) \
		$(addprefix $(DESTDIR)$(INCLUDEDIR)/dsec/,$(notdir $(INST_HEADERS))) \
		$(addprefix $(DESTDIR)$(BACKENDDIR)/,$(notdir $(BE_SO))) \
		$(addprefix $(DESTDIR)$(LIBEXECDIR)/,$(notdir $(INST_LIBEXEC))) \
		$(DESTDIR)$(SYSTEMDUNITDIR)/dsecd.service \
		$(addprefix $(DESTDIR)$(PYTHONDIR)/dsec/,$(notdir $(PY_SRC)))
	rm -rf $(DESTDIR)$(PYTHONDIR)/dsec/__pycache__
	for m in $(notdir $(MANPAGES)); do rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m; done
	for d in $(addprefix $(DESTDIR),$(INST_DIRS)); do \
		[ ! -d "$$d" ] || rmdir "$$d" 2>/dev/null || echo "uninstall: kept '$$d': not empty"; done

clean:
	rm -rf build
	rm -f lib/libdsec.a lib/libdsec.so lib/libdsec.so.* lib/dsec.pc lib/dsec-uninstalled.pc fs3/libfs3.a dsecd/dsecd backends/*.so $(HELPERS) \
		$(TOOLS) tools/fs3-bench $(SIM_TOOLS) $(TEST_HELPERS) $(SWIM_ALL)
	rm -rf t/c

# clean and the fetched sources of bundled dependencies.
distclean: clean
	rm -rf $(NNG_CACHE)

.PHONY: all deps criu check check-v2 deps-v2 tests asan check-asan bench bench-container bench-fs3 bench-image bench-rl \
	bench-sdk \
	bench-scale \
	lint-man run \
	install uninstall clean distclean fuzz fuzz-build fuzz-deps fuzz-seeds FORCE
.SECONDARY:
.DELETE_ON_ERROR:

# The dependency files of every object, sub-folders included (not the
# bundled nng's build).
-include $(shell find build -name nng -prune -o -name '*.d' -print 2>/dev/null)
