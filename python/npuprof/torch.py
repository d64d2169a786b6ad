# SPDX-License-Identifier: MIT
"""PyTorch's or torch_npu's profiler in the window npuprofd publishes.

    import npuprof.torch

    with npuprof.torch.ProfilerWindow() as win:
        for batch in loader:
            train_one_step(batch)
            win.step()          # where a torch_npu job calls dynamic_profile.step()

Step numbers. The iteration before the first win.step() is step 0 (first_step), and the
iteration that begins after the k-th call of win.step() is step first_step + k. That is how
torch_npu's dynamic_profile counts: its step() adds one to cur_step and then, when cur_step
equals the file's start_step, starts the profiler with its step offset set to cur_step
(torch_npu/profiler/dynamic_profile.py, _DynamicProfile.step() and enable_prof()), so the
iteration after the start_step-th call is the first profiled and is named
ProfilerStep#<start_step>; torch's own profiler also names the first iteration
ProfilerStep#0. So a window of steps S..E (a torch_npu file with start_step S and
warmup + active = E - S + 1) profiles exactly the iterations torch_npu would profile from the
same file, under the same ProfilerStep#S..#E names. libnpuprof's npf_rank_step(h, k) is
called at the start of step k: in the k-th call of win.step() (for step 0, on entering the
block). The window opens there and closes in the call that begins step E + 1.

For each window, on this rank:
  - libnpuprof runs it on its "host" backend (trace.json of per-step wall and CPU time,
    memory, faults, context switches) and writes manifest.json last, in the window
    directory <prof_dir>/rank<R>_start<S>_stop<E>/;
  - with torch_npu imported, torch_npu.profiler.profile is built as torch_npu's
    dynamic_profile builds it from the same file (enable_prof()): the activities,
    schedule(wait=0, warmup, active, repeat=1), on_trace_ready =
    tensorboard_trace_handler(<window directory>, analyse_flag=<the file's analyse>,
    async_mode=<its async_mode>), record_shapes, profile_memory, with_stack, with_flops,
    with_modules, and experimental_config = torch_npu.profiler._ExperimentalConfig(...) of
    profiler_level, aic_metrics, l2_cache, op_attr, data_simplification, record_op_args,
    export_type, mstx, the mstx domains, host_sys, sys_io, sys_interconnection and
    gc_detect_threshold, which torch_npu's own checks then reset as they do for any file
    (aic_metrics at Level0, mstx at Level_none, op_attr without db). Its step offset is the
    window's first step, the file's metadata is added, it steps once per step and stops as
    dynamic_profile stops it. The native and MindSpore dialects give the same fields;
  - without torch_npu, torch.profiler.profile runs with the CPU activity, and CUDA (or
    another accelerator torch exposes and finds, such as XPU) when the file asks for the
    device, under schedule(wait=0, warmup, active, repeat=1) when the window has warmup
    steps (they run unrecorded); each recorded step is a "ProfilerStep#N" span, and after
    the last step its Chrome trace is written to torch_trace.json in the window directory;
  - with profile_memory, and a device allocator (torch_npu's NPU, or torch's CUDA), the
    allocator's history is recorded for the window's steps
    (torch.cuda.memory._record_memory_history, torch_npu.npu.memory's) and, at the end of
    the last step, dumped into the window directory as memory_snapshot.pickle (what
    _dump_snapshot writes), then recording stops; npuprofd's analysis of the window replays
    it like any snapshot.
  Everything is stopped and written at the start of step E + 1, before libnpuprof writes
  the manifest, so a complete manifest lists the framework's files. (A window bounded by
  duration_ms closes inside the library at a step nobody can foresee: its files follow
  the manifest.)

Where the settings come from: npf_rank_info() does not carry them, so they are read from
the segment's control block (/dev/shm/<name>.ctl) under its seqlock, checked against the
configuration's checksum, for the very generation whose window opens. When that
generation is no longer the published one, the frameworks' defaults are used and
info().message says so.

Nothing here may stop training: an exception from torch or torch_npu is caught, the
profiler and the memory recording are stopped, and the window is failed with the
framework's message (Monitor.fail(): the slot, the manifest and info().message say it);
the loop carries on. A missing libnpuprof or a rank id held by another live process makes
the ProfilerWindow a no-op with a warning.
"""

import importlib
import inspect
import json
import os
import pickle
import sys
import warnings

import npuprof
from npuprof import _lib

__all__ = ["ProfilerWindow", "TRACE_NAME", "MEMORY_SNAPSHOT_NAME"]

TRACE_NAME = "torch_trace.json"
MEMORY_SNAPSHOT_NAME = "memory_snapshot.pickle"
# The history kept of a window's allocations and frees, as PyTorch's memory guide
# ("Understanding CUDA Memory Usage") records it.
MEMORY_HISTORY_MAX_ENTRIES = 100000
# The active steps of a window bounded by time rather than by steps.
_TIMED_ACTIVE = 1 << 60

# Accelerators whose activity torch's profiler records when torch finds the device:
# (ProfilerActivity name, torch module).
_ACCELERATORS = (("CUDA", "cuda"), ("XPU", "xpu"), ("MTIA", "mtia"), ("HPU", "hpu"))


def _accepted(fn, kwargs):
    """The part of @kwargs that @fn takes (older torch lacks with_flops, with_modules;
    older torch_npu lacks sys_io, sys_interconnection)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _switches(args):
    """profile()'s boolean switches of the configuration in force (None: the defaults)."""
    f = 0 if args is None else args["flags"]
    return {
        "record_shapes": bool(f & _lib.NPF_FLAG_RECORD_SHAPES),
        "profile_memory": bool(f & _lib.NPF_FLAG_PROFILE_MEMORY),
        "with_stack": bool(f & _lib.NPF_FLAG_WITH_STACK),
        "with_flops": bool(f & _lib.NPF_FLAG_WITH_FLOPS),
        "with_modules": bool(f & _lib.NPF_FLAG_WITH_MODULES),
    }


def _analyse(args):
    """(analyse_flag, async_mode) as torch_npu's ConfigContext gives them for the file.

    analyse_mode is published from analyse and async_mode. A torch_npu file that names its
    ranks (is_rank, rank_list) has its analysis turned off where async_mode is false
    (torch_npu/profiler/_dynamic_profiler/_dynamic_profiler_config_context.py, valid(),
    lines 306-315 at 9e73e708): a window opens only on a rank of the list.
    """
    if args is None:
        return False, False
    mode = args["analyse_mode"]
    analyse, async_mode = mode != _lib.NPF_ANALYSE_OFF, mode == _lib.NPF_ANALYSE_ASYNC
    if (args["dialect"] == _lib.NPF_DIALECT_TORCH_NPU and args["rank_filter"] == _lib.NPF_RANKS_LIST
            and not async_mode):
        analyse = False
    return analyse, async_mode


def _gc_threshold(args):
    """gc_detect_threshold in milliseconds as the file gave it (published in microseconds)."""
    us = -1 if args is None else args["gc_detect_threshold_us"]
    if us < 0:
        return None
    return us // 1000 if us % 1000 == 0 else us / 1000.0


def _npu_experimental_config(tp, args):
    """torch_npu.profiler._ExperimentalConfig of the published settings: the arguments
    torch_npu's ConfigContext passes for the same file
    (_dynamic_profiler_config_context.py, _parse_cfg_json_exp_cfg(), lines 256-295 at
    9e73e708), to the real class, whose own checks then apply. @tp: torch_npu.profiler.
    """
    a = args or {"flags": _lib.NPF_FLAG_DATA_SIMPLIFICATION, "level": 0, "aic_metrics": -1, "export_type": 1,
                 "host_sys": 0, "gc_detect_threshold_us": -1, "extra": {}}
    f = a["flags"]
    extra = a["extra"]
    kwargs = {
        "profiler_level": getattr(tp.ProfilerLevel, _lib.LEVEL_NAMES.get(a["level"], "Level0")),
        "aic_metrics": getattr(tp.AiCMetrics, _lib.AIC_NAMES.get(a["aic_metrics"], "AiCoreNone")),
        "l2_cache": bool(f & _lib.NPF_FLAG_L2_CACHE),
        "op_attr": bool(f & _lib.NPF_FLAG_OP_ATTR),
        "gc_detect_threshold": _gc_threshold(args),
        "data_simplification": bool(f & _lib.NPF_FLAG_DATA_SIMPLIFICATION),
        "record_op_args": bool(f & _lib.NPF_FLAG_RECORD_OP_ARGS),
        "export_type": [name for bit, name in _lib.EXPORT_NAMES if a["export_type"] & bit] or ["text"],
        "msprof_tx": False,
        "mstx": bool(f & _lib.NPF_FLAG_MSTX),
        "mstx_domain_include": list(extra.get("mstx_domain_include") or []) or None,
        "mstx_domain_exclude": list(extra.get("mstx_domain_exclude") or []) or None,
        "host_sys": [name for bit, name in _lib.HOST_SYS_NAMES if a["host_sys"] & bit] or None,
        "sys_io": bool(f & _lib.NPF_FLAG_SYS_IO),
        "sys_interconnection": bool(f & _lib.NPF_FLAG_SYS_INTERCONNECTION),
    }
    cls = tp._ExperimentalConfig
    return cls(**_accepted(cls.__init__, kwargs))


def _device_activities(torch, act):
    """The ProfilerActivity of each accelerator torch finds here (CUDA, XPU, ...)."""
    out = []
    for name, module in _ACCELERATORS:
        mod = getattr(torch, module, None)
        if mod is None or not hasattr(act, name):
            continue
        try:
            if mod.is_available():
                out.append(getattr(act, name))
        except Exception:   # an accelerator module that cannot answer is not there
            continue
    return out


def _device_memory(torch, tnpu):
    """The memory module of the device allocator in use (torch_npu.npu.memory, else
    torch.cuda.memory or another accelerator's with a memory history), or None."""
    if tnpu is not None:
        npu = getattr(tnpu, "npu", None)
        mods = [npu] if npu is not None else []
    else:
        mods = [getattr(torch, m, None) for _, m in _ACCELERATORS]
    for mod in mods:
        mem = getattr(mod, "memory", None) if mod is not None else None
        if mem is None or not hasattr(mem, "_record_memory_history") or not hasattr(mem, "_snapshot"):
            continue
        if mod.is_available():
            return mem
    return None


def _record_history(mem, on):
    """Start (@on) or stop recording the allocator's history with @mem's
    _record_memory_history, in the form its torch takes: torch 2.1 and later and
    torch_npu (enabled="all", max_entries=N; None stops), torch 2.0 (True,
    trace_alloc_max_entries=N; False stops), torch 1.13 (True; False stops)."""
    fn = mem._record_memory_history
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    new = "max_entries" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    if new:
        return fn("all", max_entries=MEMORY_HISTORY_MAX_ENTRIES) if on else fn(None)
    if "trace_alloc_max_entries" in params:
        if on:
            return fn(True, trace_alloc_max_entries=MEMORY_HISTORY_MAX_ENTRIES,
                      trace_alloc_record_context=True)
        return fn(False)
    return fn(bool(on))


class ProfilerWindow:
    """Run torch's or torch_npu's profiler in each window npuprofd opens for this rank.

    rank, shm_name: as npuprof.Monitor (None: $RANK / $RANK_ID / 0, $NPUPROF_SHM / npuprof).
    first_step: the number of the iteration before the first step() (0, as torch and
    torch_npu count; a resumed job may give the global step it starts at).
    trace_name: the file name of torch's exported trace in the window directory.
    """

    def __init__(self, rank=None, shm_name=None, first_step=0, trace_name=TRACE_NAME):
        self.rank = rank
        self.shm_name = _lib.shm_name(shm_name)
        self.first_step = int(first_step)
        self.trace_name = trace_name
        self.trace_path = None          # the last trace written (torch_npu: its window directory)
        self.traces = []                # every one, in order
        self.snapshots = []             # every memory snapshot written, in order
        self.profile_options = None     # the switches the last profiler was started with
        self.profile_kwargs = None      # every argument the last profiler was built with
        self.profile = None             # the last profile stopped (key_averages(), events())
        self._mon = None
        self._n = None                  # the step running now
        self._entered = False
        self._message = ""
        self._prof = None               # the running profiler
        self._rf = None                 # torch: its open ProfilerStep#N span
        self._npu = False
        self._scheduled = False         # torch: the profile runs a schedule (for its warmup)
        self._mem = None                # the memory module recording the allocator's history
        self._win = None                # (generation, start) of the window being profiled
        self._win_dir = None
        self._win_stop = -1
        self._tried = None              # (generation, start) of the last window started
        self._armed = None              # (generation, start) while armed, to skip info()

    # -- the loop ---------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def start(self):
        """Begin step first_step (what entering the with-block does)."""
        if self._entered:
            return self
        self._entered = True
        try:
            self._mon = npuprof.Monitor(rank=self.rank, shm_name=self.shm_name, backend="host")
        except Exception as e:      # not set up here: train without profiling
            self._mon = None
            self._message = "npuprof: profiling is off: %s" % (e,)
            warnings.warn(self._message, RuntimeWarning, stacklevel=3)
        self._begin(self.first_step)
        return self

    def step(self):
        """End the current iteration and begin the next (once per iteration, at its end)."""
        if not self._entered:
            self.start()
        if self._n is None:             # after stop()
            return
        self._begin(self._n + 1)

    def stop(self):
        """End the current step and release: an open window is cut short (incomplete)."""
        if self._n is None:
            return
        self._n = None
        if self._prof is not None or self._mem is not None:
            self._finish(complete=False)
        if self._mon is not None:
            self._mon.close()

    close = stop

    @property
    def current_step(self):
        return self._n

    @property
    def monitor(self):
        return self._mon

    def info(self):
        """npuprof.Info of the rank; message carries a framework's failure when there was one."""
        if self._mon is None:
            return npuprof.Info(state="off", generation=0, window_start=-1, window_stop=-1, output="",
                                message=self._message, step=-1 if self._n is None else self._n)
        i = self._mon.info()
        if self._message and self._message not in i.message:
            msg = self._message if not i.message else "%s; %s" % (self._message, i.message)
            i = _replace(i, message=msg)
        return i

    # -- what happens at the start of step n ------------------------------------------------

    def _begin(self, n):
        self._n = n
        mon = self._mon
        if mon is None:
            return
        # The window's last step is over: stop the profiler and write its files before the
        # library closes the window and writes the manifest.
        if self._prof is not None and self._win_stop >= 0 and n > self._win_stop:
            self._finish(complete=True)
        mon._step_to(n)
        if self._prof is None:
            f = mon._fast
            if f is None or not f.busy:     # nothing armed or open: mon._quiet(), inline
                return
            a = self._armed
            if a is not None and a[0] == mon._seen_generation() and n < a[1]:
                return                  # armed, and its start step is still ahead
        i = mon.info()
        key = (i.generation, i.window_start)
        self._armed = key if i.state == "armed" else None
        if self._prof is not None:
            if i.state == "collecting" and key == self._win:
                self._advance(n)
                return
            self._finish(complete=False)    # closed by time, failed, or cut short
        if i.state == "collecting" and key != self._tried:
            self._tried = key
            self._open(n, i)

    def _open(self, n, i):
        self._win = (i.generation, i.window_start)
        self._win_dir = i.output
        self._win_stop = i.window_stop
        args = _lib.read_config_args(self.shm_name, i.generation)
        self._message = ""
        if args is None:
            self._message = ("npuprof: the settings of generation %d could not be read from the segment; "
                             "the framework's defaults are used" % i.generation)
        tnpu = sys.modules.get("torch_npu")
        self._npu = tnpu is not None
        what = "torch_npu" if self._npu else "torch"
        stage = "cannot record the device memory history"
        try:
            import torch
            sw = _switches(args)
            if sw["profile_memory"]:
                mem = _device_memory(torch, tnpu)
                if mem is not None:
                    _record_history(mem, True)
                    self._mem = mem
            stage = "cannot start the profiler"
            if self._npu:
                self._open_npu(n, i, args, sw, importlib.import_module("torch_npu.profiler"))
            else:
                self._open_torch(n, args, sw, torch)
        except Exception as e:
            self._failed(what, "%s at step %d" % (stage, n), e)

    def _open_npu(self, n, i, args, sw, tp):
        """torch_npu.profiler.profile as dynamic_profile's enable_prof() builds and starts it
        (torch_npu/profiler/dynamic_profile.py lines 172-190 at 9e73e708)."""
        act = tp.ProfilerActivity
        mask = (_lib.NPF_ACT_CPU | _lib.NPF_ACT_NPU) if args is None else args["activities"]
        warmup = 0 if args is None else int(args["warmup"])
        count = 0 if args is None else int(args["step_count"])
        active = count - warmup if count > warmup else (_TIMED_ACTIVE if count == 0 else 1)
        analyse, async_mode = _analyse(args)
        kwargs = {
            # An empty list, as torch_npu's own for a file that lists none: profile() then
            # takes every supported activity.
            "activities": [a for bit, a in ((_lib.NPF_ACT_CPU, act.CPU), (_lib.NPF_ACT_NPU, act.NPU))
                           if mask & bit],
            "schedule": tp.schedule(wait=0, warmup=warmup, active=active, repeat=1, skip_first=0),
            "on_trace_ready": tp.tensorboard_trace_handler(i.output, analyse_flag=analyse,
                                                           async_mode=async_mode),
        }
        kwargs.update(sw)
        kwargs["experimental_config"] = _npu_experimental_config(tp, args)
        kwargs = _accepted(tp.profile.__init__, kwargs)
        self.profile_kwargs = kwargs
        self.profile_options = {k: v for k, v in kwargs.items() if isinstance(v, bool)}
        prof = tp.profile(**kwargs)
        self._prof = prof
        if hasattr(prof, "_set_step_num_offset_for_dynamic_prof"):
            prof._set_step_num_offset_for_dynamic_prof(n)
        prof.start()
        meta = {} if args is None else args["extra"].get("metadata") or {}
        for key, value in (meta.items() if isinstance(meta, dict) else ()):
            prof.add_metadata_json(str(key), json.dumps(value))

    def _open_torch(self, n, args, sw, torch):
        """torch.profiler.profile with the configuration's switches and activities.

        torch names its own step spans only under a schedule, and torch 1.13's profile.step()
        names the span it opens after the step it closes, later versions after the new
        step_num; so the ProfilerStep#N spans are opened here with record_function, the
        way torch makes them, with its own step markers off (record_steps = False) and
        profile.step() still called each step (kineto's step counting).
        """
        import torch.profiler as tpr
        act = tpr.ProfilerActivity
        mask = (_lib.NPF_ACT_CPU | _lib.NPF_ACT_NPU) if args is None else args["activities"]
        acts = [act.CPU] if mask & _lib.NPF_ACT_CPU else []
        if mask & _lib.NPF_ACT_NPU:
            acts += _device_activities(torch, act)
        kwargs = dict(sw, activities=acts or [act.CPU])
        # The warmup steps are run but not recorded, as torch's schedule does them.
        warmup = 0 if args is None else int(args["warmup"])
        count = 0 if args is None else int(args["step_count"])
        self._scheduled = 0 < warmup < count
        if self._scheduled:
            kwargs["schedule"] = tpr.schedule(wait=0, warmup=warmup, active=count - warmup, repeat=1)
        kwargs = _accepted(tpr.profile.__init__, kwargs)
        self.profile_kwargs = kwargs
        self.profile_options = {k: v for k, v in kwargs.items() if isinstance(v, bool)}
        prof = tpr.profile(**kwargs)
        if hasattr(prof, "record_steps"):
            prof.record_steps = False
        prof.start()
        self._prof = prof
        if not self._scheduled:
            prof.step_num = n
        meta = {} if args is None else args["extra"].get("metadata") or {}
        if isinstance(meta, dict) and hasattr(prof, "add_metadata_json"):
            for key, value in meta.items():
                prof.add_metadata_json(str(key), json.dumps(value))
        self._rf = tpr.record_function("ProfilerStep#%d" % n)
        self._rf.__enter__()

    def _advance(self, n):
        try:
            if self._npu:
                self._prof.step()
                return
            self._rf.__exit__(None, None, None)
            self._rf = None
            self._prof.step()
            if not self._scheduled:
                self._prof.step_num = n     # a schedule counts steps from 0
            import torch.profiler as tpr
            self._rf = tpr.record_function("ProfilerStep#%d" % n)
            self._rf.__enter__()
        except Exception as e:
            self._failed("torch_npu" if self._npu else "torch", "the profiler failed at step %d" % n, e)

    def _finish(self, complete):
        """Stop the profiler and write its files, then the memory snapshot. @complete: the
        window ran to its last step (torch_npu: one more step() before stop(), as
        dynamic_profile's step() does)."""
        prof, rf, self._prof, self._rf = self._prof, self._rf, None, None
        what = "torch_npu" if self._npu else "torch"
        try:
            if prof is not None:
                if self._npu:
                    if complete:
                        prof.step()
                    prof.stop()
                    self.trace_path = self._win_dir
                    self.traces.append(self._win_dir)
                else:
                    if rf is not None:
                        rf.__exit__(None, None, None)
                    prof.stop()
                    path = os.path.join(self._win_dir, self.trace_name)
                    _write_replacing(path, prof.export_chrome_trace)
                    self.trace_path = path
                    self.traces.append(path)
                self.profile = prof
        except Exception as e:
            self._failed(what, "cannot stop the profiler or write its trace", e)
            return
        mem, self._mem = self._mem, None
        if mem is None:
            return
        try:
            self._dump_memory(mem)
        except Exception as e:
            self._failed(what, "cannot dump the device memory history", e)
            return
        finally:
            try:
                _record_history(mem, False)
            except Exception:
                pass

    def _dump_memory(self, mem):
        """What torch's _dump_snapshot() writes (the pickled _snapshot()), through a temporary
        file that the manifest does not list, renamed into place."""
        snap = mem._snapshot()
        path = os.path.join(self._win_dir, MEMORY_SNAPSHOT_NAME)

        def dump(tmp):
            with open(tmp, "wb") as f:
                pickle.dump(snap, f)

        _write_replacing(path, dump)
        self.snapshots.append(path)

    def _failed(self, what, doing, e):
        """The framework failed: stop what runs, fail the window with its message, go on."""
        self._message = "%s: %s: %s: %s" % (what, doing, type(e).__name__, e)
        rf, prof, mem = self._rf, self._prof, self._mem
        self._rf = self._prof = self._mem = None
        for fn in ((lambda: rf.__exit__(None, None, None)) if rf is not None else None,
                   (lambda: prof.stop()) if prof is not None else None,
                   (lambda: _record_history(mem, False)) if mem is not None else None):
            if fn is None:
                continue
            try:
                fn()
            except Exception:
                pass
        if self._mon is not None:
            self._mon.fail(self._message)


def _write_replacing(path, write):
    """@write(temporary) a hidden temporary beside @path, then rename it over @path: the
    manifest never lists a partial file, and a failed write leaves nothing behind."""
    tmp = os.path.join(os.path.dirname(path), ".%s.tmp" % os.path.basename(path))
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _replace(info, **changes):
    import dataclasses
    return dataclasses.replace(info, **changes)
