#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python step: ProfilerWindow.step() against torch_npu's own dynamic_profile.step().

    /usr/bin/python3 bench/bench-python.py [BUILD_DIR]

Every figure is the median over rounds of the time a step takes, the rounds of all the
loops interleaved (forwards, then backwards) so that a slower moment of the machine falls
on each alike:
  - npuprof.torch.ProfilerWindow.step() on a rank attached to a private npuprofd with no
    window, against torch_npu's dynamic_profile.step() in the same run: torch_npu's own
    Python from ../shared/testdata/frameworks/torch_npu (python/tests/npu_stubs.py stands
    in for its native parts: mstx, current_stream), on a rank that did not create the
    shared memory (a buffer in memory; the step reads its 4-byte time stamp as from
    /dev/shm), with a configuration read and no window open;
  - the same ProfilerWindow.step() and npuprof.Monitor.step() on a detached rank (no
    daemon, no segment) against an attached one.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402

import gc
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
os.environ.setdefault("NPUPROF_LIB", os.path.join(BUILD, "libnpuprof.so"))
for k in ("NPUPROF_SHM", "RANK_ID"):
    os.environ.pop(k, None)
os.environ["RANK"] = "0"

ROUNDS = 21
STEPS = 20000

import npuprof  # noqa: E402
import npuprof.torch  # noqa: E402
from npuprof import _lib  # noqa: E402


def per_step(fn, steps=STEPS):
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps * 1e6


def measure(loops):
    """{name: median microseconds a step} of @loops ({name: step function}), interleaved,
    in turn forwards and backwards, so that no loop always runs after the same one."""
    times = {name: [] for name in loops}
    for fn in loops.values():
        per_step(fn, 2000)
    order = list(loops.items())
    gc.disable()
    try:
        for r in range(ROUNDS):
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                times[name].append(per_step(fn))
    finally:
        gc.enable()
    return {name: statistics.median(t) for name, t in times.items()}


def start_daemon(tmp):
    conf = os.path.join(tmp, "profiler_config.json")
    with open(conf, "w") as f:
        json.dump({}, f)
    shm = "npfbench-py-%d" % os.getpid()
    p = subprocess.Popen([os.path.join(BUILD, "npuprofd"), "--config", conf, "--shm-name", shm,
                          "--socket", os.path.join(tmp, "sock"), "--output-root", tmp,
                          "--poll-interval", "1000",
                          "--log", "stderr"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while (_lib.config_generation(shm) or 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return p, shm


def torch_npu_step(tmp):
    """torch_npu's dynamic_profile.step(), with a configuration read (start_step 0: no
    window), or None with the reason."""
    try:
        import npu_stubs
    except ImportError as e:
        return None, str(e)
    root = npu_stubs.frameworks_dir()
    if root is None:
        return None, "../shared/testdata/frameworks/torch_npu is absent"
    import contextlib
    import importlib
    import io
    try:
        importlib.import_module("torch")    # torch_npu's own code imports it
    except Exception as e:  # noqa: BLE001
        return None, "torch cannot be imported (%s)" % e
    npu_stubs.install(root)
    path = os.path.join(tmp, "torch_npu")
    os.makedirs(path)
    dp, _, _ = npu_stubs.init_dynamic_profile(path, monitor=False)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(20):
            dp.step()       # past RECORD_TIME_STEP, where it times one step
    return dp.step, ""


def main():
    for exe in ("npuprofd", "libnpuprof.so"):
        if not os.path.exists(os.path.join(BUILD, exe)):
            print("bench-python: %s/%s is not built" % (BUILD, exe))
            return 2
    tmp = tempfile.mkdtemp(prefix="npfbench-py.")
    daemon = None
    try:
        daemon, shm = start_daemon(tmp)
        attached = npuprof.torch.ProfilerWindow(rank=0, shm_name=shm).start()
        detached = npuprof.torch.ProfilerWindow(rank=0, shm_name=shm + "-absent").start()
        mon_a = npuprof.Monitor(rank=1, shm_name=shm)
        mon_d = npuprof.Monitor(rank=1, shm_name=shm + "-absent")
        if not (attached.info().attached and not detached.info().attached):
            print("bench-python: the attached rank did not attach (%s)" % attached.info())
            return 1
        loops = {"window": attached.step, "window-detached": detached.step, "monitor": mon_a.step,
                 "monitor-detached": mon_d.step}
        tn, why = torch_npu_step(tmp)
        if tn is not None:
            loops["torch_npu"] = tn
        m = measure(loops)
        print("Python step, median of %d rounds of %d steps (bench/bench-python.py, %s):" % (
            ROUNDS, STEPS, sys.version.split()[0]))
        print("  ProfilerWindow.step(), attached, no window      %6.3f us" % m["window"])
        if tn is not None:
            print("  torch_npu dynamic_profile.step(), its own code  %6.3f us   "
                  "ProfilerWindow / torch_npu = %.2fx" % (m["torch_npu"], m["window"] / m["torch_npu"]))
        else:
            print("  torch_npu dynamic_profile.step(): not measured: %s" % why)
        print("  ProfilerWindow.step(), detached (no daemon)     %6.3f us   detached / attached = %.2fx"
              % (m["window-detached"], m["window-detached"] / m["window"]))
        print("  Monitor.step(), attached                        %6.3f us" % m["monitor"])
        print("  Monitor.step(), detached                        %6.3f us   detached / attached = %.2fx"
              % (m["monitor-detached"], m["monitor-detached"] / m["monitor"]))
        for w in (attached, detached):
            w.stop()
        mon_a.close()
        mon_d.close()
        return 0
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(5)
            for suffix in (".ctl", ".ranks"):
                try:
                    os.unlink("/dev/shm/%s%s" % (shm, suffix))
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
