# SPDX-License-Identifier: MIT
"""An unmodified MindSpore training job, as far as its dynamic profiling goes.

    python3 mindspore_job.py CFG_DIR LOG STEPS STEP_MS [--late S] [--rank R]

MindSpore's own DynamicProfilerMonitor (../shared/testdata/frameworks/mindspore/, imported
unchanged) is driven as MindSpore's Model.train drives a callback: step_begin and step_end of
every step, on_train_end at the end. What cannot run here is stood in for, and only that:
mindspore's other modules, its Profiler (which records the steps it is built, started,
stepped and stopped at) and its logger (which records what the monitor logs). Each event is a
JSON line in LOG. --late S builds the monitor S seconds after the process started, as a job
that loads its data first does.
"""
import importlib.util
import json
import os
import sys
import time
import types

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "testdata",
                   "frameworks", "mindspore", "mindspore", "profiler", "dynamic_profiler.py")

cfg_dir, log_path, steps, step_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
late = float(sys.argv[sys.argv.index("--late") + 1]) if "--late" in sys.argv else 0.0
log = open(log_path, "a", buffering=1)
step_now = [0]


def emit(**kw):
    kw.setdefault("step", step_now[0])
    log.write(json.dumps(kw) + "\n")


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class Logger:
    def _log(self, level, msg, *args):
        emit(log=level, msg=(msg % args) if args else msg)

    def error(self, msg, *args):
        self._log("error", msg, *args)

    def warning(self, msg, *args):
        self._log("warning", msg, *args)

    def info(self, msg, *args):
        self._log("info", msg, *args)


class Profiler:
    """MindSpore's Profiler, recording."""
    def __init__(self, **kwargs):
        emit(profiler="new", output_path=kwargs.get("output_path"))

    def start(self):
        emit(profiler="start")

    def stop(self):
        emit(profiler="stop")

    def step(self):
        emit(profiler="step")

    def analyse(self, **kwargs):
        emit(profiler="analyse")


class Enum:
    def __getattr__(self, name):
        return name


def no_exception_func(*_a, **_k):
    return lambda f: f


def get_rank():
    raise RuntimeError("no communication here")


class FileManager:
    @staticmethod
    def create_json_file(path, data, name, indent=4):
        with open(os.path.join(path, name), "w") as f:
            json.dump(data, f, indent=indent)


class PathManager:
    @staticmethod
    def check_input_directory_path(path):
        pass


class ProfilerInterface:
    @staticmethod
    def finalize():
        pass

    @staticmethod
    def clear():
        pass


module("mindspore", log=Logger())
module("mindspore.log")
sys.modules["mindspore"].log = Logger()
module("mindspore.train", Callback=object)
module("mindspore.profiler", Profiler=Profiler, tensor_board_trace_handler=lambda *a, **k: None,
       schedule=lambda **k: k)
module("mindspore.communication", get_rank=get_rank)
module("mindspore.profiler.parser")
module("mindspore.profiler.parser.ascend_analysis")
module("mindspore.profiler.parser.ascend_analysis.file_manager", FileManager=FileManager)
module("mindspore.profiler.parser.ascend_analysis.path_manager", PathManager=PathManager)
module("mindspore.profiler.profiler_interface", ProfilerInterface=ProfilerInterface)
module("mindspore.profiler.common")
module("mindspore.profiler.common.constant", ProfilerActivity=Enum(), ProfilerLevel=Enum(), AicoreMetrics=Enum())
module("mindspore.profiler.common.util", no_exception_func=no_exception_func)

spec = importlib.util.spec_from_file_location("mindspore.profiler.dynamic_profiler", SRC)
dp = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = dp
spec.loader.exec_module(dp)


class RunContext:
    def original_args(self):
        return types.SimpleNamespace(cur_step_num=step_now[0])


if late:
    time.sleep(late)
emit(event="construct", pid=os.getpid(), uid=os.getuid())
try:
    monitor = dp.DynamicProfilerMonitor(cfg_path=cfg_dir, output_path=os.path.join(cfg_dir, "out"))
except Exception as e:
    emit(event="constructor failed", error="%s: %s" % (type(e).__name__, e))
    raise
emit(event="constructed", object=monitor._shm_name, creator=bool(monitor._is_create_process))
rc = RunContext()
for k in range(1, steps + 1):
    step_now[0] = k
    emit(event="step")
    monitor.step_begin(rc)
    time.sleep(step_ms / 1000.0)
    monitor.step_end(rc)
    if os.path.exists(log_path + ".stop"):
        break
monitor.on_train_end(rc)
emit(event="end")
