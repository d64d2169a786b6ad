# SPDX-License-Identifier: MIT
"""ctypes view of libnpuprof (include/npuprof/rank.h) and of the segment's ABI.

The library is found, in this order:
  1. $NPUPROF_LIB, a path to the shared object (an error if it cannot be loaded);
  2. the build tree's build/libnpuprof.so, when the package runs from the source tree
     (python/npuprof/../../build/libnpuprof.so);
  3. the system's libnpuprof.so.0 (Debian's libnpuprof0, or `make install` in $(LIBDIR));
  4. $(LIBDIR)/libnpuprof.so.0 next to an installed package
     ($(PREFIX)/lib/python3/dist-packages/npuprof/../../../libnpuprof.so.0), for a PREFIX
     that is not on the loader's path.

Nothing here is compiled: the structures below mirror the C ones field for field, and
_check_layout() refuses a library whose npf_rank_info() writes a different size.
"""

import ctypes
import errno as _errno
import json
import mmap
import os
import struct
import threading

# include/npuprof/shm.h
NPF_SHM_ABI_VERSION = 3  # include/npuprof/shm.h NPF_SHM_ABI_VERSION: keep them equal
NPF_SHM_CTL_MAGIC = 0x4C5443464F52504E
NPF_SHM_NAME_DEFAULT = "npuprof"
NPF_SHM_PATH_MAX = 4096
NPF_SHM_ERR_MAX = 256
NPF_STEP_NONE = -1
NPF_ENV_SHM = "NPUPROF_SHM"     # include/npuprof/protocol.h

# Window states of a slot (NPF_WINDOW_*), and the names npf_shm_window_state_name() gives.
NPF_WINDOW_IDLE = 0
NPF_WINDOW_ARMED = 1
NPF_WINDOW_COLLECTING = 2
NPF_WINDOW_FLUSHING = 3
NPF_WINDOW_DONE = 4
NPF_WINDOW_MISSED = 5
NPF_WINDOW_FAILED = 6
NPF_WINDOW_FILTERED = 7
NPF_WINDOW_LOST = 8
WINDOW_STATE_NAMES = ("idle", "armed", "collecting", "flushing", "done", "missed", "failed",
                      "filtered", "lost")

# Which schema the configuration file was written in (NPF_DIALECT_*).
NPF_DIALECT_NATIVE = 1
NPF_DIALECT_TORCH_NPU = 2
NPF_DIALECT_MINDSPORE = 3

# Bits of npf_shm_args_t.flags (NPF_FLAG_*) and .activities (NPF_ACT_*).
NPF_FLAG_RECORD_SHAPES = 1 << 0
NPF_FLAG_PROFILE_MEMORY = 1 << 1
NPF_FLAG_WITH_STACK = 1 << 2
NPF_FLAG_WITH_FLOPS = 1 << 3
NPF_FLAG_WITH_MODULES = 1 << 4
NPF_FLAG_L2_CACHE = 1 << 5
NPF_FLAG_OP_ATTR = 1 << 6
NPF_FLAG_MSTX = 1 << 7
NPF_FLAG_PARALLEL_STRATEGY = 1 << 8
NPF_FLAG_DATA_SIMPLIFICATION = 1 << 9
NPF_FLAG_RECORD_OP_ARGS = 1 << 10
NPF_FLAG_SYS_IO = 1 << 11
NPF_FLAG_SYS_INTERCONNECTION = 1 << 12
NPF_ACT_CPU = 1 << 0
NPF_ACT_NPU = 1 << 1

# npf_shm_args_t.level (NPF_LEVEL_*) and .aic_metrics (NPF_AIC_*), by the names torch_npu
# gives them (experimental_config.py ProfilerLevel, AiCMetrics).
LEVEL_NAMES = {-1: "Level_none", 0: "Level0", 1: "Level1", 2: "Level2"}
AIC_NAMES = {-1: "AiCoreNone", 0: "PipeUtilization", 1: "ArithmeticUtilization", 2: "Memory", 3: "MemoryL0",
             4: "MemoryUB", 5: "ResourceConflictRatio", 6: "L2Cache", 7: "MemoryAccess"}

# .analyse_mode (NPF_ANALYSE_*), .export_type (NPF_EXPORT_*) and .host_sys (NPF_HOST_SYS_*).
NPF_ANALYSE_OFF = -1
NPF_ANALYSE_SYNC = 0
NPF_ANALYSE_ASYNC = 1
EXPORT_NAMES = ((1 << 0, "text"), (1 << 1, "db"))
HOST_SYS_NAMES = ((1 << 0, "cpu"), (1 << 1, "mem"), (1 << 2, "disk"), (1 << 3, "network"), (1 << 4, "osrt"),
                  (1 << 5, "numa"))
NPF_RANKS_ALL = 0
NPF_RANKS_LIST = 1

# The control block's layout (the _Static_asserts at the end of shm.h).
CTL_SIZE = 18496
CTL_OFF_MAGIC = 0
CTL_OFF_ABI = 8
CTL_OFF_CONFIG_SEQ = 64
CTL_OFF_CONFIG = 192
CONFIG_SIZE = 16576
ARGS_OFF_GENERATION = 0
ARGS_OFF_CHECKSUM = 8
ARGS_OFF_START_STEP = 24
ARGS_OFF_ENABLED = 80
CONFIG_OFF_PROF_DIR = 192
CONFIG_OFF_EXTRA = 4288
NPF_SHM_EXTRA_MAX = 4096


class RankOptions(ctypes.Structure):
    """npf_rank_options_t"""
    _fields_ = [
        ("shm_name", ctypes.c_char_p),
        ("rank", ctypes.c_int64),
        ("local_device", ctypes.c_int32),
        ("backend", ctypes.c_char_p),
    ]


class RankFast(ctypes.Structure):
    """npf_rank_fast_t, the first member of a handle (what npf_rank_step_inline() reads)."""
    _fields_ = [
        ("ctl", ctypes.c_void_p),
        ("slot", ctypes.c_void_p),
        ("generation", ctypes.c_uint64),
        ("busy", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class RankInfo(ctypes.Structure):
    """npf_rank_info_t"""
    _fields_ = [
        ("rank", ctypes.c_int64),
        ("local_device", ctypes.c_int32),
        ("attached", ctypes.c_bool),
        ("state", ctypes.c_uint32),
        ("generation", ctypes.c_uint64),
        ("window_start", ctypes.c_int64),
        ("window_stop", ctypes.c_int64),
        ("state_step", ctypes.c_int64),
        ("backend", ctypes.c_char * 16),
        ("output", ctypes.c_char * (NPF_SHM_PATH_MAX + 160)),
        ("message", ctypes.c_char * 256),
    ]


# The C sizes and offsets, checked once here so that a mismatch is an import error rather
# than a corrupted stack (x86-64 and aarch64 LP64 agree on all of them).
assert ctypes.sizeof(RankOptions) == 32 and RankOptions.backend.offset == 24
assert ctypes.sizeof(RankFast) == 32 and RankFast.busy.offset == 24
assert ctypes.sizeof(RankInfo) == 4584
assert RankInfo.state.offset == 16 and RankInfo.generation.offset == 24
assert RankInfo.backend.offset == 56 and RankInfo.output.offset == 72 and RankInfo.message.offset == 4328


class LibraryNotFound(OSError):
    """libnpuprof could not be loaded from any of the places searched."""


_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    env = os.environ.get("NPUPROF_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.normpath(os.path.join(here, "..", "..", "build", "libnpuprof.so")),
        "libnpuprof.so.0",
        os.path.normpath(os.path.join(here, "..", "..", "..", "libnpuprof.so.0")),
    ], False


def _bind(lib):
    p = ctypes.c_void_p
    lib.npf_rank_open.argtypes = [ctypes.POINTER(RankOptions), ctypes.POINTER(p), ctypes.c_char_p]
    lib.npf_rank_open.restype = ctypes.c_int
    # npf_rank_step() is inline in rank.h; npf_rank_step_call() is its exported form
    # (libraries before that change exported npf_rank_step() itself).
    step = getattr(lib, "npf_rank_step_call", None) or lib.npf_rank_step
    step.argtypes = [p, ctypes.c_int64]
    step.restype = ctypes.c_int
    lib.npf_step = step
    lib.npf_rank_close.argtypes = [p]
    lib.npf_rank_close.restype = None
    lib.npf_rank_close_after_fork.argtypes = [p]
    lib.npf_rank_close_after_fork.restype = None
    lib.npf_rank_info.argtypes = [p, ctypes.POINTER(RankInfo)]
    lib.npf_rank_info.restype = None
    # npf_rank_fail(h, why): a framework's error fails the window; None in a library without it.
    fail = getattr(lib, "npf_rank_fail", None)
    if fail is not None:
        fail.argtypes = [p, ctypes.c_char_p]
        fail.restype = ctypes.c_int
    lib.npf_fail = fail
    # npf_stacks_set_interpreter(signo, fd): the interpreter's part of the stacks a stalled
    # rank writes when the daemon asks; None in a library without it.
    interp = getattr(lib, "npf_stacks_set_interpreter", None)
    if interp is not None:
        interp.argtypes = [ctypes.c_int, ctypes.c_int]
        interp.restype = None
    lib.npf_set_interpreter = interp
    return lib


def signal_has_handler(signo):
    """True unless signal @signo is at its default action, as sigaction(2) says: a handler
    of Python's, of C code (faulthandler's, say), or SIG_IGN. None when it cannot be told.

    The handler is the first member of glibc's and musl's struct sigaction on Linux, and
    SIG_DFL is 0; the rest of the buffer is room for the remainder of the structure."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        old = ctypes.create_string_buffer(512)
        if libc.sigaction(ctypes.c_int(signo), None, old) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return ctypes.c_void_p.from_buffer(old).value is not None


def load():
    """Return the loaded library (once per process). Raises LibraryNotFound."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        paths, explicit = _candidates()
        errors = []
        for path in paths:
            if os.sep in path and not explicit and not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                errors.append(str(e) if path in str(e) else "%s: %s" % (path, e))
                continue
            try:
                _lib = _bind(lib)
            except AttributeError as e:
                errors.append("%s: not libnpuprof (%s)" % (path, e))
                continue
            _lib_path = path
            return _lib
        raise LibraryNotFound(_errno.ENOENT, _not_found(paths, errors, explicit))


def _not_found(paths, errors, explicit):
    """What LibraryNotFound says: what was tried, and what to do about it."""
    tried = "; ".join(errors) if errors else "looked for " + ", ".join(paths)
    if explicit:
        return ("npuprof: NPUPROF_LIB names a library that cannot be loaded (%s). Set NPUPROF_LIB to "
                "the path of libnpuprof.so.0 (build/libnpuprof.so in npuprof's source tree), or unset it "
                "to use the one installed on the system." % tried)
    return ("npuprof: libnpuprof.so.0 is not installed (%s). Install it: Debian's package libnpuprof0 "
            "(`make deb` in npuprof's source tree builds it: apt install ./build/deb/libnpuprof0_*.deb), "
            "or `make install` in that tree; or set NPUPROF_LIB to its path, e.g. "
            "NPUPROF_LIB=/path/to/npuprof/build/libnpuprof.so (`make` builds it)." % tried)


def library_path():
    """The path libnpuprof was loaded from, or None before load()."""
    return _lib_path


def state_name(state):
    return WINDOW_STATE_NAMES[state] if 0 <= state < len(WINDOW_STATE_NAMES) else "state %d" % state


def shm_name(name=None):
    """The segment name the C library uses for @name: it, else $NPUPROF_SHM, else npuprof."""
    return name or os.environ.get(NPF_ENV_SHM) or NPF_SHM_NAME_DEFAULT


# --- reading the published configuration straight from the segment -------------------------

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def _checksum(config):
    """npf_shm_config_checksum(): FNV-1a over the 64-bit words, the checksum word as zero."""
    h = _FNV_OFFSET
    skip = ARGS_OFF_CHECKSUM // 8
    for i, (w,) in enumerate(struct.iter_unpack("<Q", config)):
        h = ((h ^ (0 if i == skip else w)) * _FNV_PRIME) & _MASK64
    return h


def read_config_args(name, generation, retries=50):
    """The switches of configuration @generation as published in segment @name.

    The control block is mapped read-only and read as the seqlock of shm.h says: the
    sequence (offset 64) must be even, equal to 2 * @generation, and unchanged around the
    copy; the copy must carry @generation and its FNV-1a checksum (which also guards against
    a weakly ordered CPU reordering the loads, since Python has no acquire fence).
    Return: a dict of npf_shm_args_t's fields by their C names (see _args()), or None when
    generation @generation is no longer the one published, or the segment cannot be read.
    """
    if os.name != "posix":
        return None
    path = "/dev/shm/%s.ctl" % name
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        try:
            mm = mmap.mmap(fd, CTL_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        except (OSError, ValueError):
            return None
    finally:
        os.close(fd)
    try:
        magic, abi = struct.unpack_from("<QI", mm, CTL_OFF_MAGIC)
        if magic != NPF_SHM_CTL_MAGIC or abi != NPF_SHM_ABI_VERSION:
            return None
        want = generation << 1
        for _ in range(retries):
            (s1,) = struct.unpack_from("<Q", mm, CTL_OFF_CONFIG_SEQ)
            if s1 & 1:
                continue
            if s1 != want:
                return None
            config = mm[CTL_OFF_CONFIG:CTL_OFF_CONFIG + CONFIG_SIZE]
            (s2,) = struct.unpack_from("<Q", mm, CTL_OFF_CONFIG_SEQ)
            if s2 != s1:
                continue
            gen, checksum = struct.unpack_from("<QQ", config, ARGS_OFF_GENERATION)
            if gen != generation or checksum != _checksum(config):
                continue
            return _args(config)
        return None
    finally:
        mm.close()


def _args(config):
    """The fields of a checked copy of npf_shm_config_t: npf_shm_args_t's by their C names,
    prof_dir as text and extra (the metadata and mstx domains) as a dict."""
    (start_step, stop_step, step_count, warmup, start_at_multiple_of, duration_ms,
     gc_detect_threshold_us) = struct.unpack_from("<qqQQQQq", config, ARGS_OFF_START_STEP)
    (enabled, dialect, flags, level, aic_metrics, activities, analyse_mode, export_type, host_sys, backend,
     rank_filter, rank_count, prof_dir_len, extra_len) = struct.unpack_from("<IIIiiIiIIIIIII", config,
                                                                            ARGS_OFF_ENABLED)
    prof_dir_len = min(prof_dir_len, NPF_SHM_PATH_MAX - 1)
    prof_dir = bytes(config[CONFIG_OFF_PROF_DIR:CONFIG_OFF_PROF_DIR + prof_dir_len])
    extra = {}
    if 0 < extra_len < NPF_SHM_EXTRA_MAX:
        try:
            extra = json.loads(bytes(config[CONFIG_OFF_EXTRA:CONFIG_OFF_EXTRA + extra_len]).decode("utf-8"))
        except ValueError:
            extra = {}
        if not isinstance(extra, dict):
            extra = {}
    return {
        "enabled": bool(enabled), "dialect": dialect, "flags": flags, "level": level,
        "aic_metrics": aic_metrics, "activities": activities, "analyse_mode": analyse_mode,
        "export_type": export_type, "host_sys": host_sys, "backend": backend, "rank_filter": rank_filter,
        "rank_count": rank_count, "start_step": start_step, "stop_step": stop_step, "step_count": step_count,
        "warmup": warmup, "start_at_multiple_of": start_at_multiple_of, "duration_ms": duration_ms,
        "gc_detect_threshold_us": gc_detect_threshold_us, "prof_dir": prof_dir.decode("utf-8", "replace"),
        "extra": extra,
    }


def config_generation(name):
    """The generation published in segment @name now (config_seq / 2), or None."""
    try:
        with open("/dev/shm/%s.ctl" % name, "rb") as f:
            head = f.read(CTL_OFF_CONFIG_SEQ + 8)
    except OSError:
        return None
    if len(head) < CTL_OFF_CONFIG_SEQ + 8:
        return None
    magic, abi = struct.unpack_from("<QI", head, CTL_OFF_MAGIC)
    if magic != NPF_SHM_CTL_MAGIC or abi != NPF_SHM_ABI_VERSION:
        return None
    (seq,) = struct.unpack_from("<Q", head, CTL_OFF_CONFIG_SEQ)
    return None if seq & 1 else seq >> 1
