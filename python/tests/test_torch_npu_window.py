#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ProfilerWindow under torch_npu's own code: the same profiler and the same steps as
torch_npu's dynamic_profile, from the same file.

    /usr/bin/python3 python/tests/test_torch_npu_window.py [BUILD_DIR]

torch_npu's dynamic-profiling Python from ../shared/testdata/frameworks/torch_npu is imported
unchanged; only its native parts and the profile class are recording stand-ins
(npu_stubs.py). A private npuprofd (its own configuration, shm name, socket and output
root) publishes each file; ProfilerWindow runs in a loop that calls win.step() at the end
of every iteration.

  - settings: for torch_npu files of every setting, what ProfilerWindow builds (the
    profile's arguments, the native _ExperimentalConfig's, the schedule, the trace
    handler's analyse_flag and async_mode, the step offset, the metadata) is what
    torch_npu's own enable_prof() builds from ConfigContext(file); native and MindSpore
    files of the same settings give the same;
  - steps: one loop calls the real dynamic_profile.step() and win.step() at the end of each
    iteration, torch_npu reading the file through its own monitor loop (worker_func, in a
    thread, writing into an in-memory stand-in for its shared memory) and npuprofd
    publishing it: both profilers start, step and stop at the same calls, with the same
    ProfilerStep#N spans;
  - memory: with profile_memory the NPU allocator's history is recorded for the window's
    steps and dumped as memory_snapshot.pickle (a real torch_npu snapshot stands in for the
    device's) before the manifest, and npuprofd's analysis of the window reports its peak;
  - failures: a profiler or a snapshot that fails leaves the loop running and the window
    failed with the framework's message.

Prints "ok   NAME" / "FAIL NAME" per check and "python-npu: N passed, N failed"; exit 77
when torch cannot be imported or the frameworks folder is absent.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402 - no __pycache__ in the source tree

import copy
import importlib
import json
import os
import pickle
import struct
import subprocess
import tempfile
import time

import npu_stubs  # noqa: E402 - beside this file, as bindingtest is

FRAMEWORKS = npu_stubs.frameworks_dir()
if FRAMEWORKS is None:
    print("skip: ../shared/testdata/frameworks/torch_npu is absent: torch_npu's own code cannot be run")
    sys.exit(77)

import bindingtest  # noqa: E402 - it puts python/ and tests/ on sys.path
from bindingtest import Daemon, ROOT  # noqa: E402

BUILD = bindingtest.setup("npftest-npu")
os.environ["RANK"] = "0"        # torch_npu's ConfigContext and npuprof both read it

import torch  # noqa: E402
from npftest import fail, check, wait_for  # noqa: E402

SNAPSHOTS = os.path.normpath(os.path.join(ROOT, "..", "shared", "testdata", "torch_npu_snapshots"))

tnpu = npu_stubs.install(FRAMEWORKS)
dynamic_profile = importlib.import_module("torch_npu.profiler.dynamic_profile")
config_context = importlib.import_module(
    "torch_npu.profiler._dynamic_profiler._dynamic_profiler_config_context")
shm_mod = importlib.import_module("torch_npu.profiler._dynamic_profiler._dynamic_profiler_monitor_shm")
ConfigContext = config_context.ConfigContext
Profile = npu_stubs.Profile

import npuprof  # noqa: E402
import npuprof.torch  # noqa: E402


def window_loop(shm, calls):
    """ProfilerWindow over @calls iterations, win.step() at the end of each (npu_stubs.AT
    is the number of the call). Return: the ProfilerWindow, the profiles it built, and the
    info() at the start of each iteration."""
    before = len(Profile.instances)
    states = {}
    with npuprof.torch.ProfilerWindow(shm_name=shm) as win:
        for k in range(calls):
            states[win.current_step] = win.info()
            npu_stubs.AT[0] = k + 1
            win.step()
        states["end"] = win.info()
    mine = [p for p in Profile.instances[before:] if p.owner == "npuprof.torch"]
    return win, mine, states


def torch_npu_builds(conf, start):
    """The profile torch_npu's own dynamic_profile builds for @conf: the file as its monitor
    hands it over (worker_func sets is_valid), ConfigContext and valid() as
    shm_to_prof_conf_context() runs them, then enable_prof() at step @start."""
    cfg = ConfigContext(dict(copy.deepcopy(conf), is_valid=True))
    if not cfg.valid():
        return None
    cls = dynamic_profile._DynamicProfile._cls
    dp = cls()
    dp.cfg_ctx = cfg
    dp.cur_step = start
    before = len(Profile.instances)
    npu_stubs.AT[0] = start
    dp.enable_prof()
    made = [p for p in Profile.instances[before:] if p.owner == "torch_npu.profiler.dynamic_profile"]
    return made[0] if made else None


def diff(a, b):
    return "\n".join("%s: %r != %r" % (k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
                     if a.get(k) != b.get(k))


# --- the settings ---------------------------------------------------------------------------

DROP = object()     # a key of the template to leave out


def torch_npu_file(out, **kw):
    """torch_npu's template (DynamicProfilerShareMemory.JSON_DATA, the file its monitor
    writes when there is none) with @kw over it; experimental_config=None drops it, and a
    key of it given as DROP is left out."""
    f = copy.deepcopy(shm_mod.DynamicProfilerShareMemory.JSON_DATA)
    f.update(prof_dir=out, start_step=3, active=2)
    exp = kw.pop("experimental_config", {})
    if exp is None:
        del f["experimental_config"]
    else:
        f["experimental_config"].update(exp)
        for k in [k for k, v in exp.items() if v is DROP]:
            del f["experimental_config"][k]
    f.update(kw)
    return f


EVERYTHING = dict(
    activities=["CPU", "NPU"], analyse=True, async_mode=True, record_shapes=True, profile_memory=True,
    with_stack=True, with_flops=True, with_modules=True, warmup=1, active=2,
    metadata={"job": "llama-7b", "nodes": 4, "tags": ["a", "b"]},
    experimental_config={"profiler_level": "Level1", "aic_metrics": "ArithmeticUtilization", "l2_cache": True,
                         "op_attr": True, "gc_detect_threshold": 0.5, "data_simplification": False,
                         "record_op_args": True, "export_type": ["text", "db"], "mstx": True,
                         "mstx_domain_include": ["comm", "train"], "host_sys": ["cpu", "mem", "disk"],
                         "sys_io": True, "sys_interconnection": True})

TORCH_NPU_CASES = [
    ("the template", {}),
    ("every setting on", EVERYTHING),
    ("Level_none: mstx forced on, aic_metrics and op_attr without db dropped, analysis off for a rank list",
     dict(activities=["CPU"], analyse=True, async_mode=False, is_rank=True, rank_list=[0, 3],
          experimental_config={"profiler_level": "Level_none", "aic_metrics": "PipeUtilization",
                               "op_attr": True,
                               "export_type": "text", "mstx": False, "msprof_tx": False})),
    ("Level0: aic_metrics reset, db only, msprof_tx with excluded domains, gc at 0, osrt and network",
     dict(analyse=True, async_mode=False,
          experimental_config={"profiler_level": "Level0", "aic_metrics": "MemoryAccess",
                               "export_type": ["db"],
                               "msprof_tx": True, "mstx_domain_exclude": ["noisy"], "gc_detect_threshold": 0,
                               "host_sys": ["network", "osrt"]})),
    ("Level2 with MemoryUB, L2 cache, NPU only", dict(
        activities=["NPU"], experimental_config={"profiler_level": "Level2", "aic_metrics": "MemoryUB",
                                                 "l2_cache": True})),
    ("Level1 with no aic_metrics",
     dict(experimental_config={"profiler_level": "Level1", "aic_metrics": DROP})),
    ("msprof_tx on, mstx off", dict(experimental_config={"msprof_tx": True, "mstx": False})),
    ("no experimental_config at all", dict(experimental_config=None, with_stack=True)),
    ("host_sys numa", dict(experimental_config={"host_sys": ["numa", "cpu"]})),
]


def compare_case(d, name, conf, out, start=3):
    """Publish @conf, run ProfilerWindow through its window and compare what it built with
    torch_npu's own."""
    g = d.publish(conf)
    if not g:
        st = subprocess.run([os.path.join(BUILD, "npuprofctl"), "--socket", d.sock, "status"],
                            capture_output=True, text=True).stdout
        fail("settings, %s: npuprofd publishes the file" % name, st[-1500:] + d.tail())
        return
    win, made, states = window_loop(d.shm, start + 6)
    ref = torch_npu_builds(conf, start)
    if not check("settings, %s: ProfilerWindow built one torch_npu profile, torch_npu one" % name,
                 len(made) == 1 and ref is not None,
                 "ProfilerWindow: %d, torch_npu: %r; states %s" % (len(made), ref, states.get(start))):
        return
    mine = made[0]
    e_mine, e_ref = npu_stubs.effective(mine), npu_stubs.effective(ref)
    check("settings, %s: the same profiler as torch_npu's dynamic_profile builds" % name, e_mine == e_ref,
          diff(e_mine, e_ref))
    stop = start + conf.get("warmup", 0) + conf.get("active", 1) - 1
    wdir = os.path.join(out, "rank0_start%d_stop%d" % (start, stop))
    h = mine.kwargs["on_trace_ready"]
    check("settings, %s: on_trace_ready writes into the window directory, torch_npu's into prof_dir"
          % name,
          h.dir_name == wdir and ref.kwargs["on_trace_ready"].dir_name == out,
          "%r, torch_npu %r" % (h.dir_name, ref.kwargs["on_trace_ready"].dir_name))
    return e_mine


def t_settings():
    d = Daemon("settings", {}, analyzer=True)
    try:
        if not check("settings: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        results = {}
        for i, (name, kw) in enumerate(TORCH_NPU_CASES):
            out = os.path.join(d.dir, "case%d" % i)
            results[name] = compare_case(d, name, torch_npu_file(out, **kw), out)

        # The same settings in npuprof's own dialect and in MindSpore's.
        x = EVERYTHING["experimental_config"]
        out = os.path.join(d.dir, "native")
        native = {"start_step": 3, "warmup": 1, "steps": 2, "output_dir": out, "activities": ["CPU", "NPU"],
                  "analyse": "async", "record_shapes": True, "profile_memory": True, "with_stack": True,
                  "with_flops": True, "with_modules": True, "level": x["profiler_level"]}
        for k in ("aic_metrics", "l2_cache", "op_attr", "gc_detect_threshold", "data_simplification",
                  "record_op_args", "export_type", "mstx", "mstx_domain_include", "host_sys", "sys_io",
                  "sys_interconnection"):
            native[k] = x[k]
        ref = dict(results.get("every setting on") or {})
        got = compare_native(d, "native", native, out)
        ref.pop("metadata", None)
        if got is not None:
            got.pop("metadata", None)
            check("settings: a native file of the same settings builds the same profiler (metadata aside)",
                  got == ref, diff(got, ref))
        out = os.path.join(d.dir, "mindspore")
        ms = {"start_step": 3, "stop_step": 4, "prof_path": out, "activities": ["CPU", "NPU"],
              "analyse": True,
              "analyse_mode": 1, "profiler_level": "Level2", "aic_metrics": "MemoryUB", "l2_cache": True,
              "mstx": True, "data_simplification": False, "sys_io": True, "sys_interconnection": False,
              "export_type": ["text"], "host_sys": ["cpu"], "mstx_domain_exclude": ["x"], "with_stack": True,
              "record_shapes": True, "profile_memory": False}
        tn = torch_npu_file(out, active=2, analyse=True, async_mode=True, with_stack=True, record_shapes=True,
                            experimental_config={"profiler_level": "Level2", "aic_metrics": "MemoryUB",
                                                 "l2_cache": True, "mstx": True, "data_simplification": False,
                                                 "sys_io": True, "export_type": ["text"], "host_sys": ["cpu"],
                                                 "mstx_domain_exclude": ["x"]})
        got = compare_native(d, "MindSpore", ms, out)
        want = torch_npu_builds(tn, 3)
        if got is not None and want is not None:
            want = npu_stubs.effective(want)
            check("settings: a MindSpore file builds what torch_npu builds from the same settings",
                  got == want, diff(got, want))
    finally:
        d.stop()


def compare_native(d, name, conf, out):
    g = d.publish(conf)
    if not check("settings, %s file: npuprofd publishes it" % name, g, d.tail()):
        return None
    win, made, states = window_loop(d.shm, 9)
    if not check("settings, %s file: ProfilerWindow built one torch_npu profile for the window 3..4" % name,
                 len(made) == 1 and states[3].state == "collecting", states.get(3)):
        return None
    return npu_stubs.effective(made[0])


# --- the steps ------------------------------------------------------------------------------

def t_steps():
    d = Daemon("steps", {}, analyzer=True)
    stop_monitor = None
    try:
        if not check("steps: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        _, shm, stop_monitor = npu_stubs.init_dynamic_profile(d.dir)
        # torch_npu takes a file whose change time is later than its own start, in whole seconds.
        mtime = time.time() + 2
        for i, (start, warmup, active) in enumerate(((5, 0, 3), (14, 2, 2), (24, 1, 1))):
            out = os.path.join(d.dir, "steps%d" % i)
            conf = torch_npu_file(out, start_step=start, warmup=warmup, active=active)
            mtime += 2
            before = len(Profile.instances)
            if i == 0:
                win = npuprof.torch.ProfilerWindow(shm_name=d.shm)
                win.start()
                calls = 0
            # The file is read by both before the first call below.
            while calls < start - 3:
                calls += 1
                npu_stubs.AT[0] = calls
                dynamic_profile.step()
                win.step()
            g = d.publish(conf, mtime)
            want = struct.pack("<I", int(mtime))
            seen = wait_for(lambda: bytes(shm.read_bytes(read_time=True)) == want, 5)
            if not check("steps %d..%d: npuprofd and torch_npu's monitor both took the file" % (
                    start, start + warmup + active - 1), g and seen, d.tail()):
                return
            while calls < start + warmup + active + 2:
                calls += 1
                npu_stubs.AT[0] = calls
                dynamic_profile.step()
                win.step()
            made = Profile.instances[before:]
            ref = [p for p in made if p.owner == "torch_npu.profiler.dynamic_profile"]
            mine = [p for p in made if p.owner == "npuprof.torch"]
            what = "start %d, warmup %d, active %d" % (start, warmup, active)
            if not check("steps, %s: one profile each" % what, len(ref) == 1 and len(mine) == 1,
                         "torch_npu %d, ProfilerWindow %d" % (len(ref), len(mine))):
                continue
            ref, mine = ref[0], mine[0]
            check("steps, %s: torch_npu starts at call %d, steps at each call to %d and stops there" % (
                what, start, start + warmup + active),
                  ref.calls == [("offset", start, start), ("start", start)]
                  + [("step", c) for c in range(start + 1, start + warmup + active + 1)]
                  + [("stop", start + warmup + active)], ref.calls)
            check("steps, %s: ProfilerWindow makes the same calls at the same steps" % what,
                  mine.calls == ref.calls, "%s\ntorch_npu: %s" % (mine.calls, ref.calls))
            names = ["ProfilerStep#%d" % s for s in range(start, start + warmup + active + 1)]
            check("steps, %s: the same ProfilerStep#N spans, %s.." % (what, names[0]),
                  mine.spans == ref.spans and [n for _, n in ref.spans] == names,
                  "%s\ntorch_npu: %s" % (mine.spans, ref.spans))
            check("steps, %s: the same warmup and recorded steps" % what,
                  mine.actions == ref.actions
                  and ref.actions[:warmup + active] == ["WARMUP"] * warmup + ["RECORD"] * (active - 1)
                  + ["RECORD_AND_SAVE"], "%s\ntorch_npu: %s" % (mine.actions, ref.actions))
            wdir = os.path.join(out, "rank0_start%d_stop%d" % (start, start + warmup + active - 1))
            check("steps, %s: npuprof's window directory is rank0_start%d_stop%d, its manifest complete" % (
                what, start, start + warmup + active - 1),
                  manifest(wdir).get("status") == "complete", wdir)
        # start_step -1: torch_npu starts in the very step() call that reads the file
        # (dynamic_profile.py:110-124, cfg_ctx.start()); so does npuprof for a torch_npu file.
        out = os.path.join(d.dir, "steps-next")
        mtime += 2
        before = len(Profile.instances)
        g = d.publish(torch_npu_file(out, start_step=-1, warmup=0, active=2), mtime)
        want = struct.pack("<I", int(mtime))
        seen = wait_for(lambda: bytes(shm.read_bytes(read_time=True)) == want, 5)
        if check("steps, start_step -1: npuprofd and torch_npu's monitor both took the file", g and seen, d.tail()):
            first = calls + 1
            for _ in range(5):
                calls += 1
                npu_stubs.AT[0] = calls
                dynamic_profile.step()
                win.step()
            made = Profile.instances[before:]
            ref = [p for p in made if p.owner == "torch_npu.profiler.dynamic_profile"]
            mine = [p for p in made if p.owner == "npuprof.torch"]
            if check("steps, start_step -1: one profile each", len(ref) == 1 and len(mine) == 1,
                     "torch_npu %d, ProfilerWindow %d" % (len(ref), len(mine))):
                check("steps, start_step -1: torch_npu starts at the call that reads the file (%d)" % first,
                      ref[0].calls == [("offset", first, first), ("start", first), ("step", first + 1),
                                       ("step", first + 2), ("stop", first + 2)], ref[0].calls)
                check("steps, start_step -1: ProfilerWindow makes the same calls at the same steps",
                      mine[0].calls == ref[0].calls, "%s\ntorch_npu: %s" % (mine[0].calls, ref[0].calls))
                wdir = os.path.join(out, "rank0_start%d_stop%d" % (first, first + 1))
                check("steps, start_step -1: npuprof's window is %d..%d, its manifest complete" % (first, first + 1),
                      manifest(wdir).get("status") == "complete", wdir)
        win.stop()
    finally:
        if stop_monitor:
            stop_monitor()
        d.stop()


def manifest(wdir):
    try:
        with open(os.path.join(wdir, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


# --- the device memory ------------------------------------------------------------------------

def replay_peak(path):
    """The allocated peak npuprof-replay finds in @path, device by device."""
    out = tempfile.mkdtemp(dir=bindingtest.TMP)
    subprocess.run([os.path.join(BUILD, "npuprof-replay"), "-q", "-o", out, path], check=False)
    try:
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        return {dv["device"]: dv["peak"]["allocated"]["bytes"]
                for s in rep["snapshots"] for dv in s["devices"]}
    except (OSError, ValueError, KeyError):
        return None


def t_memory():
    src = os.path.join(SNAPSHOTS, "snapshot_expandable.pkl")
    if not os.path.isfile(src):
        print("skip memory: %s is absent" % src, flush=True)
        return
    d = Daemon("memory", {}, analyzer=True)
    try:
        if not check("memory: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        with open(src, "rb") as f:
            npu_stubs.SNAPSHOT[0] = pickle.load(f)
        del npu_stubs.MEMORY_CALLS[:]
        out = os.path.join(d.dir, "out")
        if not check("memory: a window 4..6 with profile_memory is published",
                     d.publish(torch_npu_file(out, start_step=4, active=3, profile_memory=True)), d.tail()):
            return
        win, made, states = window_loop(d.shm, 10)
        calls = [(c[0], c[1], c[2] if c[0] == "record" else None, c[4].get("max_entries") if c[0] == "record"
                  else None) for c in npu_stubs.MEMORY_CALLS]
        check("memory: the NPU allocator's history is recorded from step 4 and dumped and stopped at step 7",
              calls == [("record", 4, "all", npuprof.torch.MEMORY_HISTORY_MAX_ENTRIES),
                        ("snapshot", 7, None, None),
                        ("record", 7, None, None)], calls)
        wdir = os.path.join(out, "rank0_start4_stop6")
        snap = os.path.join(wdir, npuprof.torch.MEMORY_SNAPSHOT_NAME)
        with open(src, "rb") as a:
            same = os.path.isfile(snap) and pickle.load(a) == pickle.load(open(snap, "rb"))
        check("memory: memory_snapshot.pickle in the window directory is what _snapshot() gave", same,
              os.listdir(wdir) if os.path.isdir(wdir) else "no %s" % wdir)
        m = manifest(wdir)
        check("memory: the manifest is complete and lists memory_snapshot.pickle",
              m.get("status") == "complete" and npuprof.torch.MEMORY_SNAPSHOT_NAME in
              [f["name"] for f in m.get("files", [])], json.dumps(m)[:800])
        report = os.path.join(wdir, "analysis", "report.json")
        got = wait_for(lambda: os.path.isfile(report), 30)
        if not check("memory: npuprofd analysed the window (analysis/report.json)", got, d.tail()):
            return
        with open(report) as f:
            rep = json.load(f)
        peaks = {dv["device"]: dv["peak"]["allocated"]["bytes"] for s in rep.get("snapshots", [])
                 for dv in s["devices"]}
        want = replay_peak(src)
        check("memory: the window's report lists the snapshot's allocated peak (%s)" % want,
              want and peaks == want, "report %s, the snapshot itself %s" % (peaks, want))
        with open(os.path.join(wdir, "analysis", "report.txt")) as f:
            txt = f.read()
        mib = "%.1f MiB" % (list(want.values())[0] / 1048576.0) if want else "?"
        check("memory: report.txt gives the peak (%s)" % mib, mib in txt, txt[:600])
    finally:
        npu_stubs.SNAPSHOT[0] = None
        d.stop()


# --- failures ----------------------------------------------------------------------------------

def t_failures():
    d = Daemon("failures", {}, analyzer=True)
    try:
        if not check("failures: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        cases = (
            ("the profiler cannot start", "start", RuntimeError("ACL error 507011: the device is lost"), 4),
            ("the snapshot cannot be taken", "snapshot", RuntimeError("NPU out of memory"), 7),
        )
        for i, (name, where, exc, at) in enumerate(cases):
            out = os.path.join(d.dir, "f%d" % i)
            if not check("failures, %s: a window 4..6 is published" % name,
                         d.publish(torch_npu_file(out, start_step=4, active=3, profile_memory=True)),
                         d.tail()):
                continue
            del npu_stubs.MEMORY_CALLS[:]
            if where == "start":
                Profile.fail_start = exc
            else:
                npu_stubs.SNAPSHOT[0] = exc
            try:
                win, made, states = window_loop(d.shm, 10)
            finally:
                Profile.fail_start = None
                npu_stubs.SNAPSHOT[0] = None
            check("failures, %s: the loop ran its 10 steps" % name, win.current_step is None and 9 in states)
            end = states["end"]
            check("failures, %s: info().message has torch_npu's message" % name, str(exc) in end.message, end)
            records = [c for c in npu_stubs.MEMORY_CALLS if c[0] == "record"]
            check("failures, %s: the memory history was stopped" % name,
                  records and records[-1][2] is None, npu_stubs.MEMORY_CALLS)
            wdir = os.path.join(out, "rank0_start4_stop6")
            check("failures, %s: no snapshot and no temporary file are left" % name,
                  os.path.isdir(wdir)
                  and not [f for f in os.listdir(wdir) if f.startswith(".") or f.endswith(".pickle")],
                  os.listdir(wdir) if os.path.isdir(wdir) else wdir)
            check("failures, %s: the window is failed from step %d, with torch_npu's message" % (name, at),
                  all(states[s].state == "failed" for s in range(at, 10)) and end.state == "failed",
                  "\n".join("%s: %s" % (s, states[s]) for s in states))
            m = manifest(wdir)
            check("failures, %s: its manifest says so" % name,
                  m.get("status") == "incomplete" and str(exc) in (m.get("message") or ""),
                  json.dumps(m)[:600])
    finally:
        d.stop()


if __name__ == "__main__":
    bindingtest.main("python-npu", ("npuprofd", "libnpuprof.so", "npuprof-replay", "npuprofctl"),
                     "torch %s; torch_npu's own code from %s; libnpuprof %s" % (
                         torch.__version__, FRAMEWORKS, os.environ["NPUPROF_LIB"]),
                     [t_settings, t_steps, t_memory, t_failures])
