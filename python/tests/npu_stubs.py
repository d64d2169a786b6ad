# SPDX-License-Identifier: MIT
"""torch_npu's own Python, unchanged, with recording stand-ins for its native parts.

    import npu_stubs
    tnpu = npu_stubs.install(npu_stubs.frameworks_dir())   # None: the folder is absent
    npu_stubs.AT[0] = k          # the step() call now running, as the records name it
    ...
    npu_stubs.Profile.instances  # every profile built, with what it was given and told

../shared/testdata/frameworks/torch_npu holds torch_npu's dynamic-profiling code as
Ascend/pytorch has it (commit 9e73e708; README and SOURCE there). What cannot run without an
NPU is stood in here, and nothing else:
  - torch_npu._C and torch_npu._C._profiler: ProfilerActivity (CPU, NPU) and the native
    _ExperimentalConfig, which keeps the keyword arguments it is built with;
  - torch_npu.npu: mstx, current_stream, is_available, and memory with
    _record_memory_history and _snapshot (recorded; _snapshot returns SNAPSHOT[0]);
  - torch_npu.profiler.profiler, which is not in the folder: profile, recording how it is
    built and driven, and tensorboard_trace_handler, recording its arguments.
torch_npu.profiler's __init__.py is not in the folder either: the package is made here with
the names the real one exports (torch_npu/profiler/__init__.py at 9e73e708), bound to the
real modules of the folder (experimental_config, scheduler) and to the stand-ins above.
"""

import enum
import importlib
import multiprocessing
import os
import struct
import sys
import threading
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

AT = [0]                # the step() call running now (set by the caller), for the records
SNAPSHOT = [None]       # what torch_npu.npu.memory._snapshot() returns (an exception: raised)
NPU_AVAILABLE = [True]
MEMORY_CALLS = []       # ("record", AT, enabled, args, kwargs) and ("snapshot", AT)
EXPERIMENTAL = None     # the real torch_npu.profiler.experimental_config module, once installed


def frameworks_dir():
    """../shared/testdata/frameworks/torch_npu beside the repository, or None."""
    d = os.path.normpath(os.path.join(ROOT, "..", "shared", "testdata", "frameworks", "torch_npu"))
    return d if os.path.isfile(os.path.join(d, "torch_npu", "profiler", "dynamic_profile.py")) else None


class ProfilerActivity(enum.Enum):
    """torch_npu._C._profiler.ProfilerActivity."""
    CPU = 0
    NPU = 1


class CExperimentalConfig:
    """torch_npu._C._profiler._ExperimentalConfig: what the native profiler is handed."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class TraceHandler:
    """What tensorboard_trace_handler() returns: its arguments, as profiler.py takes them
    (a non-bool analyse_flag becomes True, a non-bool async_mode False)."""

    def __init__(self, dir_name, worker_name, analyse_flag, async_mode):
        self.dir_name = dir_name
        self.worker_name = worker_name
        self.analyse_flag = analyse_flag if isinstance(analyse_flag, bool) else True
        self.async_mode = async_mode if isinstance(async_mode, bool) else False

    def __call__(self, prof):
        pass


def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
    return TraceHandler(dir_name, worker_name, analyse_flag, async_mode)


class Profile:
    """torch_npu.profiler.profile: records its arguments, the calls made to it (with AT[0]),
    the metadata added and the ProfilerStep#N span each step opens, named as the real class
    names them: with a callable schedule it records steps, "ProfilerStep#" +
    str(step_num + _step_num_offset), at start() and after each step()
    (torch_npu/profiler/profiler.py, profile.__init__, start(), step() at 9e73e708). start()
    builds the native config as _ProfInterface does: experimental_config, or a default
    _ExperimentalConfig() when None, called (profiler_interface.py lines 103-105, 134)."""

    instances = []
    fail_start = None       # an exception start() raises, when set

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, custom_trace_id_callback=None,
                 use_cuda=None):
        self.owner = sys._getframe(1).f_globals.get("__name__", "")
        self.kwargs = dict(activities=activities, schedule=schedule, on_trace_ready=on_trace_ready,
                           record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                           with_flops=with_flops, with_modules=with_modules,
                           experimental_config=experimental_config)
        self.record_steps = callable(schedule)
        self.schedule = schedule
        self.step_num = 0
        self._step_num_offset = 0
        self.calls = []
        self.spans = []
        self.actions = []
        self.metadata = []
        self.native = None
        self.config = None
        self.stopped = False
        Profile.instances.append(self)

    def _set_step_num_offset_for_dynamic_prof(self, step):
        self.calls.append(("offset", AT[0], step))
        self._step_num_offset = step

    def _span(self):
        if self.record_steps:
            self.spans.append((AT[0], "ProfilerStep#%d" % (self.step_num + self._step_num_offset)))
            self.actions.append(self.schedule(self.step_num).name)

    def start(self):
        self.calls.append(("start", AT[0]))
        if Profile.fail_start is not None:
            raise Profile.fail_start
        self.config = self.kwargs["experimental_config"] or EXPERIMENTAL._ExperimentalConfig()
        self.native = self.config()
        self._span()

    def step(self):
        self.calls.append(("step", AT[0]))
        self.step_num += 1
        self._span()

    def stop(self):
        self.calls.append(("stop", AT[0]))
        self.stopped = True

    def add_metadata_json(self, key, value):
        self.metadata.append((key, value))


def _sorted_lists(d):
    return {k: sorted(v) if isinstance(v, list) else v for k, v in d.items()}


def effective(p):
    """What profile @p runs with, in comparable terms: the activities (none: every supported
    one, as profile() takes them, profiler.py line 240), the switches, the schedule, the
    trace handler's analyse_flag and async_mode, the native config's arguments and the
    Python side of the experimental config, the step offset and the metadata."""
    k = p.kwargs
    s = k["schedule"]
    h = k["on_trace_ready"]
    acts = {a.name for a in (k["activities"] or [])} or {"CPU", "NPU"}
    c = p.config
    return {
        "activities": sorted(acts),
        "switches": {n: bool(k[n]) for n in ("record_shapes", "profile_memory", "with_stack", "with_flops",
                                             "with_modules")},
        "schedule": None if s is None else (s.wait, s.warmup, s.active, s.repeat, s.skip_first),
        "analyse_flag": None if h is None else h.analyse_flag,
        "async_mode": None if h is None else h.async_mode,
        "native": None if p.native is None else _sorted_lists(p.native.kwargs),
        "export_type": None if c is None else sorted(c.export_type),
        "gc_detect_threshold": None if c is None else c.gc_detect_threshold,
        "data_simplification": None if c is None else c._data_simplification,
        "offset": p._step_num_offset,
        "metadata": sorted(p.metadata),
    }


class _Mstx:
    def __init__(self):
        self.next = 0

    def range_start(self, message, stream=None):
        self.next += 1
        return self.next

    def range_end(self, range_id):
        pass


def _record_memory_history(enabled="all", *args, **kwargs):
    MEMORY_CALLS.append(("record", AT[0], enabled, args, kwargs))


def _snapshot(device=None, augment_with_fx_traces=False):
    MEMORY_CALLS.append(("snapshot", AT[0]))
    if isinstance(SNAPSHOT[0], BaseException):
        raise SNAPSHOT[0]
    return SNAPSHOT[0]


def install(root):
    """Make `import torch_npu` give torch_npu's real Python from @root with the stand-ins.
    Return: the torch_npu module."""
    global EXPERIMENTAL
    if "torch_npu" in sys.modules:
        return sys.modules["torch_npu"]
    importlib.import_module("torch")      # the real one, which torch_npu's modules import

    def module(name, path=None, **attrs):
        m = types.ModuleType(name)
        if path is not None:
            m.__path__ = [path]
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    pkg = module("torch_npu", os.path.join(root, "torch_npu"))
    cprof = module("torch_npu._C._profiler", ProfilerActivity=ProfilerActivity,
                   _ExperimentalConfig=CExperimentalConfig)
    pkg._C = module("torch_npu._C", "", _profiler=cprof)
    mem = module("torch_npu.npu.memory", _record_memory_history=_record_memory_history, _snapshot=_snapshot)
    pkg.npu = module("torch_npu.npu", "", mstx=_Mstx(), current_stream=lambda: "stream",
                     is_available=lambda: NPU_AVAILABLE[0], memory=mem)
    tp = module("torch_npu.profiler", os.path.join(root, "torch_npu", "profiler"))
    pkg.profiler = tp
    tp.profiler = module("torch_npu.profiler.profiler", profile=Profile,
                         tensorboard_trace_handler=tensorboard_trace_handler)
    # torch_npu's monitor names its thread with torch 2's torch.multiprocessing._set_thread_name;
    # Debian's torch 1.13 has none, and the name is all it does.
    import torch.multiprocessing as tmp
    if not hasattr(tmp, "_set_thread_name"):
        tmp._set_thread_name = lambda name: None
    ec = importlib.import_module("torch_npu.profiler.experimental_config")
    sched = importlib.import_module("torch_npu.profiler.scheduler")
    EXPERIMENTAL = ec
    # The names of the real torch_npu/profiler/__init__.py.
    tp.__dict__.update(
        ProfilerActivity=ProfilerActivity, profile=Profile,
        tensorboard_trace_handler=tensorboard_trace_handler, schedule=sched.Schedule,
        ProfilerAction=sched.ProfilerAction, _ExperimentalConfig=ec._ExperimentalConfig,
        supported_profiler_level=ec.supported_profiler_level,
        supported_ai_core_metrics=ec.supported_ai_core_metrics,
        supported_export_type=ec.supported_export_type,
        ProfilerLevel=ec.ProfilerLevel, AiCMetrics=ec.AiCMetrics, ExportType=ec.ExportType,
        HostSystem=ec.HostSystem)
    return pkg


def init_dynamic_profile(path, monitor=True):
    """torch_npu's dynamic_profile.init(@path), for a job whose rank did not create the
    shared memory: a fresh _DynamicProfile whose monitor's shared memory is a buffer in this
    process (the real DynamicProfilerShareMemory's reads and writes on it), and with
    @monitor torch_npu's own monitor loop (worker_func) in a thread, polling
    @path/profiler_config.json every second and writing what it reads into that buffer.
    Return: (the dynamic_profile module, the shared memory object, a function that stops the
    monitor loop)."""
    dp = importlib.import_module("torch_npu.profiler.dynamic_profile")
    mon_mod = importlib.import_module("torch_npu.profiler._dynamic_profiler._dynamic_profiler_monitor")
    shm_mod = importlib.import_module("torch_npu.profiler._dynamic_profiler._dynamic_profiler_monitor_shm")
    utils = importlib.import_module("torch_npu.profiler._dynamic_profiler._dynamic_profiler_utils")

    class MemoryShm(shm_mod.DynamicProfilerShareMemory):
        """The real class with its buffer in memory rather than in /dev/shm."""

        def __init__(self, path, config_path, rank_id):  # its own would map /dev/shm
            self._path = path
            self.config_path = config_path
            self._rank_id = rank_id
            self.shm_path = "in-memory"
            self._shm_buf_bytes_size = utils.DynamicProfilerUtils.CFG_BUFFER_SIZE
            self._is_dyno = False
            self.is_create_process = False
            self.shm = types.SimpleNamespace(buf=memoryview(bytearray(self._shm_buf_bytes_size)))
            self.cur_mtime = 0
            self.is_mmap = False
            self._time_data_bytes = struct.pack("<I", self.cur_mtime)
            self._time_bytes_size = len(self._time_data_bytes)

    dp._DynamicProfile._instance.clear()
    real = mon_mod.DynamicProfilerShareMemory
    mon_mod.DynamicProfilerShareMemory = MemoryShm
    try:
        dp.init(path)
    finally:
        mon_mod.DynamicProfilerShareMemory = real
    mon = dp._DynamicProfile()._dynamic_monitor
    if not monitor:
        return dp, mon._shm_obj, lambda: None
    params = mon._monitor_process_params()
    params["poll_interval"] = multiprocessing.Value("i", 1)
    t = threading.Thread(target=mon_mod.worker_func, args=(params,), daemon=True)
    t.start()

    def stop():
        params["loop_flag"].value = False
        t.join(5)
    return dp, mon._shm_obj, stop
