# npuprof -- hand-written Makefile. Every binary lists its objects.
#
#   make                      build everything into build/
#   make check                unit tests, seqlock torture, CLI tests, a short run of every fuzzer
#   make demo                 the main job
#   make bench                fast-path figures, against a baseline measured in the same run (MEMSNAPDUMP_SRC=DIR: MemSnapDump's,
#                             HTA_SRC=DIR: Holistic Trace Analysis')
#   make fuzz                 fuzz the configuration, request, pickle, snapshot and trace readers (FUZZ_SECONDS=60 each)
#   make SANITIZER=address|undefined|thread check
#   make install PREFIX=/usr/local DESTDIR= [LIBDIR=]   (make uninstall, the same)
#   make deb                  Debian packages (debian/) into build/deb/

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
PYTHON     ?= /usr/bin/python3
# Where Debian's python3 looks: /usr/lib/python3/dist-packages, /usr/local/lib/python3.X/dist-packages
PYTHONDIR  ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)
# Debian's multiarch directory where the prefix is /usr, as its packages install libraries.
MULTIARCH  := $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
LIBDIR     ?= $(PREFIX)/lib$(if $(and $(filter /usr,$(PREFIX)),$(MULTIARCH)),/$(MULTIARCH))
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
# Where systemd looks for units, as its pkg-config file says.
UNITDIR    ?= $(or $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null),/lib/systemd/system)
SYSUSERSDIR ?= /usr/lib/sysusers.d
TMPFILESDIR ?= /usr/lib/tmpfiles.d
# Where bash-completion loads completions on demand: its own directory for its own prefix,
# else PREFIX's, which it searches too (through XDG_DATA_DIRS).
COMPLETIONSDIR ?= $(if $(filter $(PREFIX),$(shell pkg-config --variable=prefix bash-completion 2>/dev/null)),$(shell \
                  pkg-config --variable=completionsdir bash-completion),$(PREFIX)/share/bash-completion/completions)
DESTDIR    ?=
CC         ?= cc
CLANG      ?= clang
SANITIZER  ?=
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 15

VERSION := $(shell sed -n 's/^\#define NPUPROF_VERSION *"\(.*\)"/\1/p' include/npuprof/protocol.h)

BUILD := build
ifneq ($(SANITIZER),)
BUILD := build/$(SANITIZER)
SAN_FLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
# TSan does not model the seqlocks' fences; every byte they guard is read and written by
# relaxed atomics, so TSan sees no race there, and its warning about the fences is noise.
ifeq ($(SANITIZER),thread)
SAN_FLAGS += -Wno-tsan
# A race ends the process that has it, as ASan and UBSan end theirs: the suite then fails.
# tests/tsan.supp says what is suppressed, and why.
CHECK_ENV := TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/tsan.supp
endif

WARN := -Wall -Wextra -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -Wshadow \
        -Wwrite-strings -Wpointer-arith -Wundef
ifneq ($(CI),)
WARN += -Werror
endif

# Dependencies come from Debian. `make` (and install) needs the build dependencies only, and
# never runs a package manager: a missing one is named. demo sets up the build dependencies
# and python3; check, bench and fuzz the test toolchain too. scripts/install-deps installs
# them as root, or says how.
ifeq ($(filter clean help uninstall,$(MAKECMDGOALS)),)
ifneq ($(filter check bench fuzz fuzz-build,$(MAKECMDGOALS)),)
DEPS_OK := $(shell scripts/install-deps >&2 && echo yes)
else ifneq ($(filter demo,$(MAKECMDGOALS)),)
DEPS_OK := $(shell scripts/install-deps --demo >&2 && echo yes)
else
DEPS_OK := $(shell scripts/install-deps --build >&2 && echo yes)
endif
ifneq ($(DEPS_OK),yes)
$(error missing dependencies: see the message above)
endif
endif

PKGS      := libuv jansson libsystemd sqlite3 zlib libdw
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
JANSSON_LIBS := $(shell pkg-config --libs jansson 2>/dev/null)
DAEMON_LIBS  := $(shell pkg-config --libs libuv jansson libsystemd 2>/dev/null)
CMOCKA_LIBS  := $(shell pkg-config --libs cmocka 2>/dev/null)

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 $(WARN) $(SAN_FLAGS) -fPIC
CPPFLAGS += -D_GNU_SOURCE -I. -Iinclude $(PKG_CFLAGS)
# The plain build is fortified as Debian's package build is (unless the packager sets its
# own level), so that what glibc's checks find at -O2 fails `make`, not only `make deb`.
ifeq ($(SANITIZER)$(findstring _FORTIFY_SOURCE,$(CPPFLAGS) $(CFLAGS)),)
CPPFLAGS += -D_FORTIFY_SOURCE=2
endif
LDFLAGS  += $(SAN_FLAGS)

# --- modules ----------------------------------------------------------------------------
SHM_OBJS  := $(BUILD)/shm/shm.o $(BUILD)/shm/slot.o $(BUILD)/shm/names.o $(BUILD)/lib/proc.o $(BUILD)/lib/clock.o \
             $(BUILD)/lib/sigbus.o $(BUILD)/lib/futex.o
CONF_OBJS := $(BUILD)/conf/conf.o $(BUILD)/lib/jsonpos.o $(BUILD)/lib/outroot.o $(BUILD)/conf/fwshm.o

VIEW_OBJS := $(BUILD)/conf/view.o
# The window's manifest, written by ranks and, for a lost window, by the daemon.
MANIFEST_OBJS := $(BUILD)/lib/manifest.o $(BUILD)/lib/atomicfile.o
RANK_OBJS := $(BUILD)/rank/rank.o $(BUILD)/rank/backend-host.o $(BUILD)/rank/backend-acl.o $(BUILD)/rank/stacks.o \
             $(BUILD)/lib/outroot.o $(MANIFEST_OBJS)
# The stacks a stalled rank writes are unwound and named by elfutils' libdwfl (libdw).
DW_LIBS   := $(shell pkg-config --libs libdw 2>/dev/null)
RANK_LIBS := $(JANSSON_LIBS) $(DW_LIBS) -ldl -pthread
DAEMON_OBJS := $(BUILD)/daemon/npuprofd.o $(BUILD)/daemon/daemon.o $(BUILD)/daemon/watch.o $(BUILD)/daemon/request.o \
               $(BUILD)/daemon/server.o $(BUILD)/daemon/sweep.o $(BUILD)/daemon/notify.o $(BUILD)/daemon/log.o \
               $(BUILD)/daemon/analyze.o $(BUILD)/daemon/fwshm.o $(BUILD)/daemon/manifest.o \
               $(BUILD)/daemon/keptfile.o $(BUILD)/daemon/fleet.o $(BUILD)/daemon/windows.o $(BUILD)/daemon/metrics.o \
               $(BUILD)/daemon/progress.o $(BUILD)/daemon/autowin.o $(BUILD)/lib/steptext.o \
               $(BUILD)/lib/shmopen.o $(BUILD)/daemon/kineto.o $(BUILD)/lib/kinetoipc.o $(BUILD)/conf/kineto.o \
               $(MANIFEST_OBJS)
# The package's one privileged program: hands npuprofd a job's object of another user.
SHMOPEN_OBJS := $(BUILD)/opener/npuprof-shmopen.o $(BUILD)/lib/shmopen.o

NPUPROFD_OBJS   := $(DAEMON_OBJS) $(VIEW_OBJS) $(CONF_OBJS) $(SHM_OBJS)
NPUPROFCTL_OBJS := $(BUILD)/client/npuprofctl.o $(BUILD)/client/validate.o $(BUILD)/client/ipc.o \
                   $(BUILD)/client/status.o $(BUILD)/client/edit.o $(BUILD)/client/analyze.o $(BUILD)/client/fleet.o \
                   $(BUILD)/client/progress.o $(BUILD)/client/top.o $(BUILD)/lib/steptext.o $(BUILD)/lib/nearword.o \
                   $(VIEW_OBJS) $(CONF_OBJS) \
                   $(BUILD)/conf/write.o $(SHM_OBJS) $(BUILD)/lib/atomicfile.o

# npuprof-replay: the analyzer, a program of its own that the daemon runs on each window.
REPLAY_CORE_OBJS := $(BUILD)/replay/input.o $(BUILD)/replay/value.o $(BUILD)/replay/pickle.o \
                    $(BUILD)/replay/pickle-batch.o $(BUILD)/replay/jsontree.o $(BUILD)/replay/intern.o \
                    $(BUILD)/replay/snapshot.o $(BUILD)/replay/replay.o $(BUILD)/replay/analysis.o \
                    $(BUILD)/replay/beside.o
# The analyses run the static plan on a thread of their own.
REPLAY_LIBS := $(JANSSON_LIBS) -lm -pthread
SQLITE_LIBS := $(shell pkg-config --libs sqlite3 2>/dev/null)
# The charts (memory.svg, the cluster chart): no dependency beyond libc.
SVG_OBJS := $(BUILD)/replay/svg.o $(BUILD)/replay/svg-memory.o $(BUILD)/replay/svg-ranks.o $(BUILD)/replay/svg-steps.o
# Chrome trace analysis (the host backend's trace.json, torch.profiler's): evscan reads it, jsonpos places its errors.
TRACE_OBJS := $(BUILD)/replay/trace.o $(BUILD)/replay/evscan.o $(BUILD)/replay/input.o $(BUILD)/replay/intern.o \
              $(BUILD)/lib/jsonpos.o
TRACE_LIBS := $(JANSSON_LIBS) -lm
# What the accelerators did: device timelines from the frameworks' and Kineto's output, and
# their analyses (replay/device.h); Kineto's gzipped traces through zlib, db exports through SQLite.
DEVICE_OBJS := $(BUILD)/replay/device.o $(BUILD)/replay/evscan.o $(BUILD)/replay/device-trace.o \
               $(BUILD)/replay/device-db.o $(BUILD)/replay/steptrace.o $(BUILD)/replay/commjson.o \
               $(BUILD)/replay/fwout.o $(BUILD)/replay/devreport.o $(BUILD)/replay/devcluster.o $(BUILD)/replay/intern.o \
               $(BUILD)/lib/array.o
DEVICE_LIBS := $(JANSSON_LIBS) $(shell pkg-config --libs sqlite3 zlib 2>/dev/null)
# The device timeline of torch_npu's and MindSpore's db export (SQLite).
DEVICE_DB_OBJS := $(BUILD)/replay/device-db.o $(BUILD)/replay/device.o $(BUILD)/replay/intern.o $(BUILD)/lib/array.o
REPLAY_OBJS := $(BUILD)/replay/npuprof-replay.o $(BUILD)/replay/report.o $(BUILD)/replay/cluster.o $(BUILD)/replay/db.o \
               $(BUILD)/replay/split.o $(BUILD)/replay/pickle-out.o \
               $(sort $(REPLAY_CORE_OBJS) $(SVG_OBJS) $(TRACE_OBJS) $(DEVICE_OBJS)) $(BUILD)/lib/atomicfile.o \
               $(BUILD)/lib/nearword.o

LIBNPUPROF := $(BUILD)/libnpuprof.so $(BUILD)/libnpuprof.a $(BUILD)/libnpuprof-heap.so
PROGRAMS := $(BUILD)/npuprofctl $(BUILD)/npuprofd $(BUILD)/npuprof-shmopen $(BUILD)/npuprof-replay $(LIBNPUPROF) \
            $(BUILD)/train-loop

# --- tests ------------------------------------------------------------------------------
UNIT_TESTS := $(BUILD)/tests/test-shm $(BUILD)/tests/test-slot $(BUILD)/tests/test-proc \
              $(BUILD)/tests/test-conf $(BUILD)/tests/test-jsonpos \
              $(BUILD)/tests/test-rank $(BUILD)/tests/test-outroot $(BUILD)/tests/test-analyze
UNIT_TESTS += $(BUILD)/tests/test-svg $(BUILD)/tests/test-report $(BUILD)/tests/test-state
UNIT_TESTS += $(BUILD)/tests/test-pickle $(BUILD)/tests/test-value
UNIT_TESTS += $(BUILD)/tests/test-trace $(BUILD)/tests/test-view
UNIT_TESTS += $(BUILD)/tests/test-atomicfile $(BUILD)/tests/test-manifest $(BUILD)/tests/test-write
UNIT_TESTS += $(BUILD)/tests/test-fleet
UNIT_TESTS += $(BUILD)/tests/test-device-db
UNIT_TESTS += $(BUILD)/tests/test-evscan
UNIT_TESTS += $(BUILD)/tests/test-shmopen
UNIT_TESTS += $(BUILD)/tests/test-progress
UNIT_TESTS += $(BUILD)/tests/test-sweep
UNIT_TESTS += $(BUILD)/tests/test-stacks
UNIT_TESTS += $(BUILD)/tests/test-kinetoipc
UNIT_TESTS += $(BUILD)/tests/test-nearword
# The stand-in for the CANN runtime, which cannot exist here: it records every call and
# answers as CANN does. It and the acl backend's test are built against CANN's own headers
# (shared/testdata/cann), and only where they are: without them the ACL tests are skipped.
CANN        ?= ../shared/testdata/cann
CANN_INC    := $(CANN)/include/external
HAVE_CANN   := $(wildcard $(CANN_INC)/acl/acl_prof.h)
ACL_STUB    := $(BUILD)/tests/stub-acl/libascendcl.so
MSPROF_STUB := $(BUILD)/tests/stub-acl/libmsprofiler.so
# A CANN whose libmsprofiler.so has neither aclprofSetConfig nor the feature calls.
ACL_STUBS   := $(ACL_STUB) $(MSPROF_STUB) $(BUILD)/tests/stub-acl/old/libascendcl.so \
               $(BUILD)/tests/stub-acl/old/libmsprofiler.so.1
ifneq ($(HAVE_CANN),)
UNIT_TESTS  += $(BUILD)/tests/test-backend-acl
TEST_ACL_STUBS := $(ACL_STUBS)
endif
TORTURE    := $(BUILD)/tests/torture-seqlock
BENCH      := $(BUILD)/bench/bench-shm
BENCH_DAEMON := $(BUILD)/bench/bench-daemon
LIBS_FLOOR   := $(BUILD)/bench/libs-floor
BENCH_RANK := $(BUILD)/bench/bench-rank
BENCH_PROGRESS := $(BUILD)/bench/bench-progress
RANK_DRIVER := $(BUILD)/tests/rank-driver
ASK_STACKS := $(BUILD)/tests/ask-stacks
MANY_RANKS := $(BUILD)/tests/many-ranks
STATUS_LOAD := $(BUILD)/tests/status-load
SCRIBBLER := $(BUILD)/tests/scribbler
FUZZ_CONF  := build/fuzz/fuzz-conf
FUZZ_TRACE := build/fuzz/fuzz-trace
FUZZ_PICKLE := build/fuzz/fuzz-pickle
FUZZ_SNAPSHOT := build/fuzz/fuzz-snapshot
FUZZ_PROTO := build/fuzz/fuzz-proto
FUZZ_EVSCAN := build/fuzz/fuzz-evscan
FUZZ_DEVICE := build/fuzz/fuzz-device
FUZZ_KINETO := build/fuzz/fuzz-kineto

.PHONY: all check demo bench fuzz fuzz-check install uninstall deb clean help
all: $(PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# The pickle reader's dispatch, one jump per opcode handler, must not be merged back into one.
NO_CROSSJUMP := $(shell $(CC) -fno-crossjumping -E -x c /dev/null >/dev/null 2>&1 && echo -fno-crossjumping)
$(BUILD)/replay/pickle.o: CFLAGS += $(NO_CROSSJUMP)

$(BUILD)/npuprofctl: $(NPUPROFCTL_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(JANSSON_LIBS)

$(BUILD)/npuprof-replay: $(REPLAY_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(REPLAY_LIBS) $(DEVICE_LIBS)

$(BUILD)/npuprofd: $(NPUPROFD_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

$(BUILD)/npuprof-shmopen: $(SHMOPEN_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs libsystemd 2>/dev/null)

# Where npuprofd and `npuprofctl analyze` find the analyzer once installed.
$(BUILD)/daemon/npuprofd.o $(BUILD)/daemon/analyze.o $(BUILD)/client/analyze.o: \
	CPPFLAGS += -DNPF_ANALYZER_PATH='"$(BINDIR)/npuprof-replay"'

# libnpuprof: the rank library, linked into training processes (and loaded by python/npuprof).
$(BUILD)/libnpuprof.so: $(RANK_OBJS) $(SHM_OBJS) rank/libnpuprof.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libnpuprof.so.0 -Wl,--version-script=rank/libnpuprof.map \
		-o $@ $(RANK_OBJS) $(SHM_OBJS) $(RANK_LIBS)

$(BUILD)/libnpuprof.a: $(RANK_OBJS) $(SHM_OBJS)
	rm -f $@
	ar rcs $@ $^

# The heap tracker for profile_memory, preloaded into a training process (LD_PRELOAD). Its
# soname is its name: it is preloaded by that name, never linked against.
$(BUILD)/libnpuprof-heap.so: $(BUILD)/rank/heap.o
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libnpuprof-heap.so -o $@ $^ -ldl

# -rdynamic: the heap tracker's call stacks name the example's own functions.
$(BUILD)/train-loop: $(BUILD)/examples/train-loop.o $(BUILD)/libnpuprof.a
	$(CC) $(LDFLAGS) -rdynamic -o $@ $^ $(RANK_LIBS)

$(BUILD)/tests/test-shm: $(BUILD)/tests/test-shm.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-slot: $(BUILD)/tests/test-slot.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-view: $(BUILD)/tests/test-view.o $(VIEW_OBJS) $(CONF_OBJS) $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

$(BUILD)/tests/test-proc: $(BUILD)/tests/test-proc.o $(BUILD)/lib/proc.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-conf: $(BUILD)/tests/test-conf.o $(CONF_OBJS) $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

$(BUILD)/tests/test-write: $(BUILD)/tests/test-write.o $(BUILD)/conf/write.o $(CONF_OBJS) $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

$(BUILD)/tests/test-jsonpos: $(BUILD)/tests/test-jsonpos.o $(BUILD)/lib/jsonpos.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-nearword: $(BUILD)/tests/test-nearword.o $(BUILD)/lib/nearword.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

STUB_FLAGS := -Itests -I$(CANN_INC)
$(BUILD)/tests/stub-acl/old/%: STUB_FLAGS += -DNPF_ACL_STUB_OLD_CANN
$(BUILD)/tests/stub-acl/libmsprofiler.so: tests/stub-acl/libmsprofiler.c tests/stub-acl/stub.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(STUB_FLAGS) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libmsprofiler.so -o $@ $<

# The older CANN's has a soname of its own, or the loader would take the one already loaded.
$(BUILD)/tests/stub-acl/old/libmsprofiler.so.1: tests/stub-acl/libmsprofiler.c tests/stub-acl/stub.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(STUB_FLAGS) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libmsprofiler.so.1 -o $@ $<

# libascendcl.so depends on the libmsprofiler.so beside it, as CANN's does.
$(BUILD)/tests/stub-acl/libascendcl.so: tests/stub-acl/libascendcl.c tests/stub-acl/stub.h \
		$(BUILD)/tests/stub-acl/libmsprofiler.so
	$(CC) $(CPPFLAGS) $(STUB_FLAGS) $(CFLAGS) $(LDFLAGS) -shared -o $@ $< \
		-L$(dir $@) -l:libmsprofiler.so -Wl,-rpath,'$$ORIGIN'

$(BUILD)/tests/stub-acl/old/libascendcl.so: tests/stub-acl/libascendcl.c tests/stub-acl/stub.h \
		$(BUILD)/tests/stub-acl/old/libmsprofiler.so.1
	$(CC) $(CPPFLAGS) $(STUB_FLAGS) $(CFLAGS) $(LDFLAGS) -shared -o $@ $< \
		-L$(dir $@) -l:libmsprofiler.so.1 -Wl,-rpath,'$$ORIGIN'

# The backend once more, with CANN's headers first: every prototype, enumerator, data-type
# bit and error code of rank/acl-api.h is checked against CANN's (-Werror: a redefined bit).
$(BUILD)/tests/backend-acl-cann.o: rank/backend-acl.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DNPF_ACL_CANN_HEADERS -I$(CANN_INC) $(CFLAGS) -Werror -MMD -MP -c $< -o $@

$(BUILD)/tests/test-backend-acl.o: CPPFLAGS += -DNPF_ACL_STUB_DEFAULT='"$(ACL_STUB)"' -DNPF_ACL_CANN_HEADERS -I$(CANN_INC)
$(BUILD)/tests/test-backend-acl: $(BUILD)/tests/test-backend-acl.o $(BUILD)/tests/backend-acl-cann.o $(CONF_OBJS) \
		$(SHM_OBJS) | $(ACL_STUBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS) -ldl -pthread

$(BUILD)/tests/test-rank: $(BUILD)/tests/test-rank.o $(sort $(RANK_OBJS) $(CONF_OBJS)) $(SHM_OBJS) | $(TEST_ACL_STUBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(RANK_LIBS)

$(BUILD)/tests/test-outroot: $(BUILD)/tests/test-outroot.o $(BUILD)/lib/outroot.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-analyze: $(BUILD)/tests/test-analyze.o $(BUILD)/daemon/analyze.o $(BUILD)/lib/clock.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(DAEMON_LIBS)

# The fleet record from its writer (daemon/fleet) to its reader (client/fleet).
$(BUILD)/tests/test-fleet: $(BUILD)/tests/test-fleet.o $(BUILD)/daemon/fleet.o $(BUILD)/daemon/keptfile.o \
                           $(BUILD)/daemon/log.o $(BUILD)/client/fleet.o $(BUILD)/client/ipc.o $(BUILD)/client/progress.o $(BUILD)/lib/atomicfile.o \
                           $(BUILD)/lib/steptext.o \
                           $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(DAEMON_LIBS)

$(BUILD)/tests/test-atomicfile: $(BUILD)/tests/test-atomicfile.o $(BUILD)/lib/atomicfile.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-manifest: $(BUILD)/tests/test-manifest.o $(MANIFEST_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

$(BUILD)/tests/test-svg: $(BUILD)/tests/test-svg.o $(SVG_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-state: $(BUILD)/tests/test-state.o $(sort $(REPLAY_CORE_OBJS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(REPLAY_LIBS)

$(BUILD)/tests/test-report: $(BUILD)/tests/test-report.o $(BUILD)/replay/report.o $(sort $(REPLAY_CORE_OBJS) $(TRACE_OBJS)) \
                            $(SVG_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(REPLAY_LIBS)

# A document of 9,500 trace entries, too large to keep in the header: CPython writes it.
$(BUILD)/tests/test-pickle: $(BUILD)/tests/test-pickle.o $(BUILD)/replay/pickle.o $(BUILD)/replay/pickle-batch.o \
                            $(BUILD)/replay/value.o $(BUILD)/replay/beside.o | $(BUILD)/tests/handoff.pkl
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS) -pthread
$(BUILD)/tests/test-pickle.o: CPPFLAGS += -DNPF_PICKLE_HANDOFF='"$(CURDIR)/$(BUILD)/tests/handoff.pkl"'
$(BUILD)/tests/handoff.pkl: tests/gen-pickle-fixtures.py
	@mkdir -p $(dir $@)
	$(PYTHON) tests/gen-pickle-fixtures.py --handoff $@

$(BUILD)/tests/test-value: $(BUILD)/tests/test-value.o $(BUILD)/replay/value.o $(BUILD)/replay/jsontree.o \
                           $(BUILD)/replay/beside.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

# The real torch.profiler trace it reads is a seed of the fuzz corpus; its window uses the host backend.
$(BUILD)/tests/test-trace.o: CPPFLAGS += -DNPF_TRACE_TESTDATA='"$(CURDIR)/tests/fuzz/corpus-trace"'
$(BUILD)/tests/test-trace: $(BUILD)/tests/test-trace.o $(TRACE_OBJS) $(sort $(RANK_OBJS) $(CONF_OBJS)) $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(TRACE_LIBS) $(RANK_LIBS)

# Real db exports from shared/testdata (skipped where absent), and hostile files it writes.
$(BUILD)/tests/test-device-db.o: CPPFLAGS += -DNPF_PROFILER_OUTPUTS='"$(CURDIR)/../shared/testdata/profiler_outputs"'
$(BUILD)/tests/test-device-db: $(BUILD)/tests/test-device-db.o $(DEVICE_DB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(SQLITE_LIBS) -lm

# The trace scanner alone; the real traces of shared/testdata (skipped where absent).
$(BUILD)/tests/test-evscan.o: CPPFLAGS += -DNPF_PROFILER_OUTPUTS='"$(CURDIR)/../shared/testdata/profiler_outputs"'
$(BUILD)/tests/test-evscan: $(BUILD)/tests/test-evscan.o $(BUILD)/replay/evscan.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

$(BUILD)/tests/test-shmopen: $(BUILD)/tests/test-shmopen.o $(BUILD)/lib/shmopen.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

# libkineto's datagrams (dynolog's IPC fabric) and the configuration text, without a socket.
$(BUILD)/tests/test-kinetoipc: $(BUILD)/tests/test-kinetoipc.o $(BUILD)/lib/kinetoipc.o $(BUILD)/conf/kineto.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

# Every thread's stack, read by the process itself: threads blocked in functions of the test's own.
$(BUILD)/tests/test-stacks: $(BUILD)/tests/test-stacks.o $(BUILD)/rank/stacks.o $(BUILD)/lib/futex.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(DW_LIBS) -pthread

# The sweep of the rank table, over a mapping whose cold entries are unreadable.
$(BUILD)/tests/test-sweep: $(BUILD)/tests/test-sweep.o $(BUILD)/daemon/sweep.o $(BUILD)/daemon/progress.o \
                           $(BUILD)/lib/steptext.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

# The watch of progress on synthetic steps: jitter, slowdowns, stalls, windows, new claims.
$(BUILD)/tests/test-progress: $(BUILD)/tests/test-progress.o $(BUILD)/daemon/progress.o $(BUILD)/lib/steptext.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(JANSSON_LIBS)

$(TORTURE): $(BUILD)/tests/torture-seqlock.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -pthread -o $@ $^

$(BENCH): $(BUILD)/bench/bench-shm.o $(BUILD)/bench/stats.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -pthread -o $@ $^

$(BENCH_DAEMON): $(BUILD)/bench/bench-daemon.o $(BUILD)/bench/stats.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^
$(LIBS_FLOOR): $(BUILD)/bench/libs-floor.o
	$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

$(BENCH_RANK): $(BUILD)/bench/bench-rank.o $(BUILD)/bench/stats.o $(BUILD)/libnpuprof.a
	$(CC) $(LDFLAGS) -o $@ $^ $(RANK_LIBS)

# The watch of progress on long synthetic runs, beside a naive detector on the same sweeps.
$(BENCH_PROGRESS): $(BUILD)/bench/bench-progress.o $(BUILD)/bench/stats.o $(BUILD)/daemon/progress.o $(BUILD)/lib/steptext.o
	$(CC) $(LDFLAGS) -o $@ $^ $(JANSSON_LIBS)

$(RANK_DRIVER): $(BUILD)/tests/rank-driver.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^

# Asks a rank for its stacks through its slot, as npuprofd does (tests/test-stacks.sh).
$(ASK_STACKS): $(BUILD)/tests/ask-stacks.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^

# 256 live ranks of libnpuprof on one node, for tests/fleet/test-scale.sh.
$(MANY_RANKS): $(BUILD)/tests/fleet/many-ranks.o $(BUILD)/libnpuprof.a
	$(CC) $(LDFLAGS) -o $@ $^ $(RANK_LIBS)

# The monitoring agent that asks status 1,000 times a second during the scale test.
$(STATUS_LOAD): $(BUILD)/tests/fleet/status-load.o
	$(CC) $(LDFLAGS) -o $@ $^ $(JANSSON_LIBS)

# A hostile rank that scribbles over the rank table (tests/hostile/test-scribble.sh).
$(SCRIBBLER): $(BUILD)/tests/hostile/scribbler.o $(SHM_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^

# A training loop on the real libkineto, built from its source (shared/testdata/kineto), as
# PyTorch drives it with KINETO_USE_DAEMON=1 (tests/kineto/). Third-party C++: built once, into
# build/kineto whatever SANITIZER is; tests/kineto/build.sh exits 77 (skipped) without the source.
KINETO_SRC ?= ../shared/testdata/kineto
.PHONY: kineto-test-prog
kineto-test-prog:
	@tests/kineto/build.sh $(KINETO_SRC) build/kineto

# The units are tested under a real systemd with the plain build only: a sanitizer's
# runtime is not what the hardened unit is meant to run.
check: all $(UNIT_TESTS) $(TORTURE) $(RANK_DRIVER) $(ASK_STACKS) $(MANY_RANKS) $(STATUS_LOAD) $(SCRIBBLER) fuzz-build
	@NPF_SKIP_SYSTEMD=$(SANITIZER) $(CHECK_ENV) tests/run-tests $(BUILD) build/fuzz $(FUZZ_CHECK_SECONDS)

# What the demo runs, and no more: the daemon, the CLI, the analyzer, libnpuprof.so (for the
# Python ranks), the heap tracker and the C training loop. Built quietly, on every processor
# unless make was given -j itself: what the demo shows is the demo.
DEMO_PROGRAMS := $(BUILD)/npuprofctl $(BUILD)/npuprofd $(BUILD)/npuprof-replay $(BUILD)/libnpuprof.so \
                 $(BUILD)/libnpuprof-heap.so $(BUILD)/train-loop
DEMO_JOBS = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
demo:
	@echo "demo: building $(notdir $(DEMO_PROGRAMS)) into $(BUILD)/"
	@$(MAKE) -s --no-print-directory $(DEMO_JOBS) $(DEMO_PROGRAMS)
	@PYTHON=$(PYTHON) scripts/demo $(BUILD)

# The replay's figures: a generated snapshot of 2.1 M events (made once, kept in build/).
BENCH_REPLAY := $(BUILD)/bench/bench-replay
BENCH_SNAPSHOT := build/bench/snapshot-2M.pkl
# The file npuprof-replay and MemSnapDump both replay, when MEMSNAPDUMP_SRC names a checkout
# of codeasier/MemSnapDump kept outside the project: MemSnapDump takes seconds on it.
BENCH_SNAPSHOT_59K := build/bench/snapshot-59k.pkl
$(BENCH_REPLAY): $(BUILD)/bench/bench-replay.o $(BUILD)/bench/stats.o $(sort $(REPLAY_CORE_OBJS) $(TRACE_OBJS)) \
                 $(BUILD)/replay/report.o $(SVG_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(REPLAY_LIBS)
$(BENCH_SNAPSHOT): bench/gen-snapshot.py
	@mkdir -p $(dir $@)
	$(PYTHON) bench/gen-snapshot.py $@ 2100000 >/dev/null
$(BENCH_SNAPSHOT_59K): bench/gen-snapshot.py
	@mkdir -p $(dir $@)
	$(PYTHON) bench/gen-snapshot.py $@ 59000 >/dev/null

bench: all $(BENCH) $(BENCH_DAEMON) $(LIBS_FLOOR) $(BENCH_RANK) $(BENCH_PROGRESS) $(MANY_RANKS) $(BENCH_REPLAY) $(BENCH_SNAPSHOT) $(BENCH_SNAPSHOT_59K)
	@$(BENCH)
	@echo
	@$(BENCH_RANK)
	@echo
	@$(PYTHON) bench/bench-python.py $(BUILD)
	@echo
	@$(BENCH_DAEMON) $(BUILD)/npuprofd 200 $(MANY_RANKS) $(LIBS_FLOOR)
	@echo
	@$(BENCH_PROGRESS)
	@echo
	@$(PYTHON) bench/bench-fleet.py $(BUILD)
	@echo
	@$(PYTHON) bench/bench-kineto.py $(BUILD)
	@echo
	@$(BENCH_REPLAY) $(BENCH_SNAPSHOT) $(BUILD)/npuprof-replay $(if $(MEMSNAPDUMP_SRC),0 $(BENCH_SNAPSHOT_59K) \
		$(PYTHON) bench/memsnapdump-replay.py "$(MEMSNAPDUMP_SRC)","$$($(PYTHON) bench/replay-baseline.py $(BENCH_SNAPSHOT))")
	@echo
	@$(PYTHON) bench/bench-device.py $(BUILD) "$(HTA_SRC)"

# --- fuzzing (libFuzzer: clang only, always with ASan and UBSan) --------------------------
FUZZ_FLAGS := -std=c11 -g -O1 -D_GNU_SOURCE -I. -Iinclude $(PKG_CFLAGS) \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRCS  := tests/fuzz/fuzz-conf.c conf/conf.c lib/jsonpos.c lib/outroot.c shm/shm.c shm/names.c lib/proc.c lib/clock.c \
              lib/sigbus.c

.PHONY: fuzz-build
fuzz-build: $(FUZZ_CONF) $(FUZZ_TRACE) $(FUZZ_PICKLE) $(FUZZ_SNAPSHOT) $(FUZZ_PROTO) $(FUZZ_EVSCAN) $(FUZZ_DEVICE) \
            $(FUZZ_KINETO)
$(FUZZ_CONF): $(FUZZ_SRCS) conf/conf.h lib/jsonpos.h lib/outroot.h include/npuprof/shm.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_SRCS) $(JANSSON_LIBS)
# The scanner's size limits lowered, as for its own fuzzer, so that they are reached.
FUZZ_TRACE_SRCS := tests/fuzz/fuzz-trace.c replay/trace.c replay/evscan.c replay/input.c replay/intern.c lib/jsonpos.c
$(FUZZ_TRACE): $(FUZZ_TRACE_SRCS) replay/trace.h replay/evscan.h replay/input.h replay/intern.h lib/jsonpos.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -DNPF_EVSCAN_EVENT_MAX=2048 -DNPF_EVSCAN_TOP_MAX=256 -o $@ $(FUZZ_TRACE_SRCS) \
		$(JANSSON_LIBS) -lm
FUZZ_PICKLE_SRCS := tests/fuzz/fuzz-pickle.c replay/pickle.c replay/pickle-batch.c replay/value.c replay/beside.c
$(FUZZ_PICKLE): $(FUZZ_PICKLE_SRCS) replay/pickle.h replay/pickle-batch.h replay/pickle-internal.h replay/input.h \
                replay/value.h replay/beside.h tests/pickle-direct.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_PICKLE_SRCS) $(JANSSON_LIBS) -pthread

FUZZ_SNAPSHOT_SRCS := tests/fuzz/fuzz-snapshot.c replay/snapshot.c replay/input.c replay/pickle.c replay/pickle-batch.c \
                      replay/jsontree.c replay/value.c replay/intern.c replay/replay.c replay/analysis.c replay/beside.c
$(FUZZ_SNAPSHOT): $(FUZZ_SNAPSHOT_SRCS) replay/snapshot.h replay/input.h replay/pickle.h replay/pickle-batch.h \
                  replay/pickle-internal.h replay/jsontree.h replay/value.h replay/intern.h replay/replay.h \
                  replay/analysis.h replay/beside.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_SNAPSHOT_SRCS) $(REPLAY_LIBS)

# The control socket's request path, as daemon/server.c runs it on every connection.
FUZZ_PROTO_SRCS := tests/fuzz/fuzz-proto.c daemon/request.c
$(FUZZ_PROTO): $(FUZZ_PROTO_SRCS) daemon/request.h include/npuprof/protocol.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_PROTO_SRCS) $(JANSSON_LIBS)

# libkineto's datagrams, as daemon/kineto.c reads every one its socket receives.
FUZZ_KINETO_SRCS := tests/fuzz/fuzz-kineto.c lib/kinetoipc.c
$(FUZZ_KINETO): $(FUZZ_KINETO_SRCS) lib/kinetoipc.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_KINETO_SRCS)

# The trace scanner, whole and in chunks cut where the input says; its size limits lowered
# to what inputs of max_len reach.
FUZZ_EVSCAN_SRCS := tests/fuzz/fuzz-evscan.c replay/evscan.c
$(FUZZ_EVSCAN): $(FUZZ_EVSCAN_SRCS) replay/evscan.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -DNPF_EVSCAN_EVENT_MAX=2048 -DNPF_EVSCAN_TOP_MAX=256 -o $@ $(FUZZ_EVSCAN_SRCS)

# The device readers (a trace, step_trace_time.csv, communication.json) and analyses.
FUZZ_DEVICE_SRCS := tests/fuzz/fuzz-device.c replay/device.c replay/device-trace.c replay/evscan.c replay/intern.c \
                    replay/steptrace.c replay/commjson.c replay/devreport.c replay/device-db.c replay/svg-steps.c \
                    replay/svg.c lib/array.c
$(FUZZ_DEVICE): $(FUZZ_DEVICE_SRCS) replay/device.h replay/device-trace.h replay/evscan.h replay/steptrace.h \
                replay/commjson.h replay/devreport.h replay/device-db.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -DNPF_EVSCAN_EVENT_MAX=2048 -DNPF_EVSCAN_TOP_MAX=256 -o $@ $(FUZZ_DEVICE_SRCS) \
		$(JANSSON_LIBS) $(shell pkg-config --libs zlib sqlite3 2>/dev/null) -lm

fuzz: $(FUZZ_CONF) $(FUZZ_TRACE) $(FUZZ_PICKLE) $(FUZZ_SNAPSHOT) $(FUZZ_PROTO) $(FUZZ_EVSCAN) $(FUZZ_DEVICE) $(FUZZ_KINETO)
	@mkdir -p build/fuzz/corpus-new
	$(FUZZ_CONF) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -dict=tests/fuzz/conf.dict \
		build/fuzz/corpus-new tests/fuzz/corpus-conf
	@mkdir -p build/fuzz/corpus-trace-new
	$(FUZZ_TRACE) -max_total_time=$(FUZZ_SECONDS) -max_len=32768 -dict=tests/fuzz/trace.dict \
		build/fuzz/corpus-trace-new tests/fuzz/corpus-trace
	@mkdir -p build/fuzz/corpus-pickle-new
	$(FUZZ_PICKLE) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -dict=tests/fuzz/pickle.dict \
		build/fuzz/corpus-pickle-new tests/fuzz/corpus-pickle
	@mkdir -p build/fuzz/corpus-snapshot-new
	$(FUZZ_SNAPSHOT) -max_total_time=$(FUZZ_SECONDS) -max_len=262144 -dict=tests/fuzz/pickle.dict \
		build/fuzz/corpus-snapshot-new tests/fuzz/corpus-snapshot
	@mkdir -p build/fuzz/corpus-proto-new
	$(FUZZ_PROTO) -max_total_time=$(FUZZ_SECONDS) -max_len=200000 -dict=tests/fuzz/proto.dict \
		build/fuzz/corpus-proto-new tests/fuzz/corpus-proto
	@mkdir -p build/fuzz/corpus-evscan-new
	$(FUZZ_EVSCAN) -max_total_time=$(FUZZ_SECONDS) -max_len=32768 -dict=tests/fuzz/evscan.dict \
		build/fuzz/corpus-evscan-new tests/fuzz/corpus-evscan
	@mkdir -p build/fuzz/corpus-device-new
	$(FUZZ_DEVICE) -max_total_time=$(FUZZ_SECONDS) -max_len=32768 -dict=tests/fuzz/device.dict \
		build/fuzz/corpus-device-new tests/fuzz/corpus-device
	@mkdir -p build/fuzz/corpus-kineto-new
	$(FUZZ_KINETO) -max_total_time=$(FUZZ_SECONDS) -max_len=4352 -dict=tests/fuzz/kineto.dict \
		build/fuzz/corpus-kineto-new tests/fuzz/corpus-kineto

# --- install ----------------------------------------------------------------------------
# The unit's ExecStart follows SBINDIR; an operator's /etc/npuprof files are never overwritten.
.PHONY: install-systemd
install: all install-systemd
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BUILD)/npuprofctl $(BUILD)/npuprof-replay $(DESTDIR)$(BINDIR)/
	install -m 0755 $(BUILD)/npuprofd $(BUILD)/npuprof-shmopen $(DESTDIR)$(SBINDIR)/
	install -m 0644 docs/npuprofctl.1 docs/npuprof-replay.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 docs/libnpuprof.3 docs/libnpuprof-heap.3 $(DESTDIR)$(MANDIR)/man3/
	for f in $(RANK_API); do echo '.so man3/libnpuprof.3' > $(DESTDIR)$(MANDIR)/man3/$$f.3; done
	install -m 0644 docs/profiler_config.json.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 docs/npuprofd.8 docs/npuprof-shmopen.8 $(DESTDIR)$(MANDIR)/man8/
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/npuprof
	install -m 0755 $(BUILD)/libnpuprof.so $(DESTDIR)$(LIBDIR)/libnpuprof.so.$(VERSION)
	ln -sf libnpuprof.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnpuprof.so.0
	ln -sf libnpuprof.so.0 $(DESTDIR)$(LIBDIR)/libnpuprof.so
	install -m 0644 $(BUILD)/libnpuprof.a $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(BUILD)/libnpuprof-heap.so $(DESTDIR)$(LIBDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' rank/libnpuprof.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libnpuprof.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/libnpuprof.pc
	install -d $(DESTDIR)$(PYTHONDIR)/npuprof
	install -m 0644 python/npuprof/__init__.py python/npuprof/_lib.py python/npuprof/torch.py \
		$(DESTDIR)$(PYTHONDIR)/npuprof/
	install -m 0644 include/npuprof/shm.h include/npuprof/rank.h include/npuprof/protocol.h \
		$(DESTDIR)$(INCLUDEDIR)/npuprof/
	install -d $(DESTDIR)$(COMPLETIONSDIR)
	install -m 0644 client/npuprofctl.bash-completion $(DESTDIR)$(COMPLETIONSDIR)/npuprofctl
	install -m 0644 replay/npuprof-replay.bash-completion $(DESTDIR)$(COMPLETIONSDIR)/npuprof-replay

install-systemd:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/npuprof
	sed 's|/usr/sbin/npuprofd|$(SBINDIR)/npuprofd|' systemd/npuprofd.service > $(DESTDIR)$(UNITDIR)/npuprofd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/npuprofd.service
	install -m 0644 systemd/npuprofd.socket systemd/npuprof-shmopen.socket $(DESTDIR)$(UNITDIR)/
	sed 's|/usr/sbin/npuprof-shmopen|$(SBINDIR)/npuprof-shmopen|' systemd/npuprof-shmopen@.service \
		> $(DESTDIR)$(UNITDIR)/npuprof-shmopen@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/npuprof-shmopen@.service
	install -m 0644 systemd/sysusers.d/npuprof.conf $(DESTDIR)$(SYSUSERSDIR)/
	install -m 0644 systemd/tmpfiles.d/npuprof.conf $(DESTDIR)$(TMPFILESDIR)/
	test -e $(DESTDIR)$(SYSCONFDIR)/npuprof/npuprofd.conf || \
		install -m 0644 systemd/etc/npuprofd.conf $(DESTDIR)$(SYSCONFDIR)/npuprof/npuprofd.conf
	test -e $(DESTDIR)$(SYSCONFDIR)/npuprof/profiler_config.json || \
		install -m 0644 systemd/etc/profiler_config.json $(DESTDIR)$(SYSCONFDIR)/npuprof/profiler_config.json

# The rank API's functions, each a name of libnpuprof(3) for man.
RANK_API := npf_rank_open npf_rank_step npf_rank_step_call npf_rank_fail npf_rank_info npf_rank_close \
            npf_rank_close_after_fork npf_stacks_set_interpreter

# What install put, and nothing else: not an operator's /etc/npuprof, not a directory.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/npuprofctl $(DESTDIR)$(BINDIR)/npuprof-replay $(DESTDIR)$(SBINDIR)/npuprofd \
		$(DESTDIR)$(SBINDIR)/npuprof-shmopen
	rm -f $(DESTDIR)$(MANDIR)/man1/npuprofctl.1 $(DESTDIR)$(MANDIR)/man1/npuprof-replay.1 \
		$(DESTDIR)$(MANDIR)/man3/libnpuprof.3 $(DESTDIR)$(MANDIR)/man3/libnpuprof-heap.3 \
		$(DESTDIR)$(MANDIR)/man5/profiler_config.json.5 \
		$(DESTDIR)$(MANDIR)/man8/npuprofd.8 $(DESTDIR)$(MANDIR)/man8/npuprof-shmopen.8 \
		$(RANK_API:%=$(DESTDIR)$(MANDIR)/man3/%.3)
	rm -f $(DESTDIR)$(LIBDIR)/libnpuprof.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnpuprof.so.0 \
		$(DESTDIR)$(LIBDIR)/libnpuprof.so $(DESTDIR)$(LIBDIR)/libnpuprof.a $(DESTDIR)$(LIBDIR)/libnpuprof-heap.so \
		$(DESTDIR)$(PKGCONFIGDIR)/libnpuprof.pc
	rm -f $(DESTDIR)$(INCLUDEDIR)/npuprof/shm.h $(DESTDIR)$(INCLUDEDIR)/npuprof/rank.h \
		$(DESTDIR)$(INCLUDEDIR)/npuprof/protocol.h
	-rmdir $(DESTDIR)$(INCLUDEDIR)/npuprof 2>/dev/null
	rm -f $(DESTDIR)$(PYTHONDIR)/npuprof/__init__.py $(DESTDIR)$(PYTHONDIR)/npuprof/_lib.py \
		$(DESTDIR)$(PYTHONDIR)/npuprof/torch.py
	rm -rf $(DESTDIR)$(PYTHONDIR)/npuprof/__pycache__
	-rmdir $(DESTDIR)$(PYTHONDIR)/npuprof 2>/dev/null
	rm -f $(DESTDIR)$(UNITDIR)/npuprofd.service $(DESTDIR)$(UNITDIR)/npuprofd.socket \
		$(DESTDIR)$(UNITDIR)/npuprof-shmopen.socket $(DESTDIR)$(UNITDIR)/npuprof-shmopen@.service \
		$(DESTDIR)$(SYSUSERSDIR)/npuprof.conf $(DESTDIR)$(TMPFILESDIR)/npuprof.conf
	rm -f $(DESTDIR)$(COMPLETIONSDIR)/npuprofctl $(DESTDIR)$(COMPLETIONSDIR)/npuprof-replay

# Debian packages of this tree (debian/), built by dpkg-buildpackage in a copy of it under
# DEBDIR, where the .deb files land: the checkout keeps no build products of theirs.
DEBDIR ?= build/deb
deb:
	scripts/build-deb $(DEBDIR)

clean:
	rm -rf build

help:
	@sed -n '3,10p' Makefile

-include $(shell find build -name '*.d' -type f 2>/dev/null)
