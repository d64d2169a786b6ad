#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An unmodified torch_npu training loop, for tests/frameworks/test-torch-npu.py.

    /usr/bin/python3 torch_npu_job.py TORCH_NPU_ROOT JOB_DIR LOG INTERVAL

torch_npu's dynamic-profiling Python from TORCH_NPU_ROOT (../shared/testdata/frameworks/
torch_npu or torch_npu-v2.5.1) is imported unchanged, with only its native parts and the
profile class stood in (python/tests/npu_stubs.py). The loop calls
dynamic_profile.init(JOB_DIR) once, then dynamic_profile.step() every INTERVAL seconds, as
a job calls it at the end of each training step, until LOG.stop exists. (v2.5.1 imports one
name from torch_npu/utils/__init__.py, which the folder lacks: see utils_package().) What torch_npu
does is written to LOG as JSON lines: {"object", "created", "cur_time"} of its shared
memory once, {"step": k} for each step() call k, {"call": "start"|"step"|"stop",
"at": k} for each call torch_npu makes on the profile it builds, and {"span": k, "action":
A} for each ProfilerStep span that profile opens at call k (the iteration after it), A being
what torch_npu's own schedule (scheduler.py) says of it: "NONE", "WARMUP", "RECORD" or
"RECORD_AND_SAVE". What torch_npu prints (its
"config is not effective" warning among it) goes to the standard output.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402 - no __pycache__ in the source tree

import importlib
import importlib.util
import json
import os
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

import npu_stubs  # noqa: E402

root, job_dir, log_path, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])


def utils_package(root):
    """v2.5.1's profiler takes _should_print_warning from torch_npu/utils/__init__.py, which is
    not in the folder: the package is made with that one name, bound to the real function of
    torch_npu/utils/utils.py there (as its __init__.py imports it)."""
    path = os.path.join(root, "torch_npu", "utils")
    with open(os.path.join(root, "torch_npu", "profiler", "analysis", "prof_common_func", "_constant.py")) as f:
        if "from torch_npu.utils import _should_print_warning" not in f.read():
            return
    pkg = types.ModuleType("torch_npu.utils")
    pkg.__path__ = [path]
    sys.modules[pkg.__name__] = pkg
    spec = importlib.util.spec_from_file_location("torch_npu.utils.utils", os.path.join(path, "utils.py"))
    pkg.utils = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = pkg.utils
    spec.loader.exec_module(pkg.utils)
    pkg._should_print_warning = pkg.utils._should_print_warning


utils_package(root)
npu_stubs.install(root)
dynamic_profile = importlib.import_module("torch_npu.profiler.dynamic_profile")

log = open(log_path, "w", buffering=1)
dynamic_profile.init(job_dir)
monitor = dynamic_profile._DynamicProfile()._dynamic_monitor
shm = monitor._shm_obj
log.write(json.dumps({"object": shm.shm_path, "created": shm.is_create_process,
                      "cur_time": monitor._cur_time}) + "\n")

calls = spans = 0
k = 0
while not os.path.exists(log_path + ".stop"):
    k += 1
    npu_stubs.AT[0] = k
    dynamic_profile.step()
    log.write(json.dumps({"step": k}) + "\n")
    made = [c for p in npu_stubs.Profile.instances for c in p.calls if c[0] in ("start", "step", "stop")]
    for c in made[calls:]:
        log.write(json.dumps({"call": c[0], "at": c[1]}) + "\n")
    calls = len(made)
    opened = [(s[0], a) for p in npu_stubs.Profile.instances for s, a in zip(p.spans, p.actions)]
    for at, action in opened[spans:]:
        log.write(json.dumps({"span": at, "action": action}) + "\n")
    spans = len(opened)
    time.sleep(interval)
