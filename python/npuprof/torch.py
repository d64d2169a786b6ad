# SPDX-License-Identifier: MIT
"""PyTorch's profiler in the window npuprofd publishes.

    import npuprof.torch

    with npuprof.torch.ProfilerWindow() as win:
        for batch in loader:
            train_one_step(batch)
            win.step()                      # once per step, as torch.profiler.profile.step()

Steps are numbered from 1 (first_step): entering the block starts step 1, and each
win.step() ends the current step and starts the next, which is how torch's profiler and
torch_npu's dynamic_profile count them. The window is the node's: npuprofd publishes it
from profiler_config.json and libnpuprof opens it on every rank at the same step.

For each window:
  - libnpuprof runs it on its "host" backend (trace.json of per-step wall and CPU time,
    memory, faults, context switches) and writes manifest.json in the window directory
    <prof_dir>/rank<R>_start<S>_stop<E>/;
  - at the window's first step, torch.profiler.profile (torch_npu.profiler.profile when
    torch_npu has been imported, with the NPU activity too) is started with the
    configuration's record_shapes, profile_memory, with_stack, with_flops and with_modules;
  - each step of the window is a "ProfilerStep#N" span with N the training step;
  - after the window's last step the profiler is stopped and its Chrome trace exported to
    torch_trace.json in the window directory (with torch_npu, its own on_trace_ready
    writer fills the directory instead), BEFORE libnpuprof writes the manifest, so a
    complete manifest means the torch trace is in place. (A window bounded by
    duration_ms closes inside the library at a step nobody can foresee; its torch trace
    follows the manifest by the time of an export.)

Where the switches come from: npf_rank_info() does not carry them, so they are read from
the segment's control block (/dev/shm/<name>.ctl) at the offsets shm.h documents, under
its seqlock and checked against the configuration's checksum, for the very generation
whose window opens. When that generation is no longer the published one (a newer
configuration came between the two reads), torch's defaults are used and info().message
says so.

Step numbers: torch's profiler only names its own step spans when it is given a schedule,
and torch 1.13's profile.step() names the span it opens after the step it closes
(ProfilerStep#0, #0, #1, ...), later versions after the new step_num. So the spans are
opened here with torch.profiler.record_function("ProfilerStep#N"), the way torch itself
makes them, with the profile's own step markers off (record_steps = False) and
profile.step() still called each step (kineto's step counting), profile.step_num kept
equal to the training step. The names are then the same on every torch version.

Nothing here may break training: any exception from torch is caught, the profiler is
dropped, and the reason is in info().message; the loop carries on. A missing libnpuprof
or a rank id held by another live process makes the ProfilerWindow a no-op with a warning.
"""

import inspect
import os
import sys
import warnings

import npuprof
from npuprof import _lib

__all__ = ["ProfilerWindow", "TRACE_NAME"]

TRACE_NAME = "torch_trace.json"


def _flag_kwargs(args):
    """The profile() switches of the configuration in force (None: torch's defaults)."""
    f = 0 if args is None else args["flags"]
    return {
        "record_shapes": bool(f & _lib.NPF_FLAG_RECORD_SHAPES),
        "profile_memory": bool(f & _lib.NPF_FLAG_PROFILE_MEMORY),
        "with_stack": bool(f & _lib.NPF_FLAG_WITH_STACK),
        "with_flops": bool(f & _lib.NPF_FLAG_WITH_FLOPS),
        "with_modules": bool(f & _lib.NPF_FLAG_WITH_MODULES),
    }


def _accepted(fn, kwargs):
    """The part of @kwargs that @fn takes (older torch lacks with_flops, with_modules)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


class ProfilerWindow:
    """Run torch's profiler in each window npuprofd opens for this rank.

    rank, shm_name: as npuprof.Monitor (None: $RANK / $RANK_ID / 0, $NPUPROF_SHM / npuprof).
    first_step: the number of the first step (e.g. the global step a resumed job starts at).
    trace_name: the file name of the exported trace in the window directory.
    """

    def __init__(self, rank=None, shm_name=None, first_step=1, trace_name=TRACE_NAME):
        self.rank = rank
        self.shm_name = _lib.shm_name(shm_name)
        self.first_step = int(first_step)
        self.trace_name = trace_name
        self.trace_path = None          # the last torch trace exported
        self.traces = []                # every one, in order
        self.profile_options = None     # the switches the last profiler was started with
        self.profile = None             # the last torch profile stopped (key_averages(), events())
        self._mon = None
        self._n = None                  # the step running now
        self._entered = False
        self._message = ""
        self._prof = None               # the running torch profiler
        self._rf = None                 # its open ProfilerStep#N span
        self._npu = False
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
        """End the current step and begin the next (call once per training step)."""
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
        if self._prof is not None:
            self._finish()
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
        """npuprof.Info of the rank; message carries a torch failure when there was one."""
        if self._mon is None:
            return npuprof.Info(state="off", generation=0, window_start=-1, window_stop=-1, output="",
                                message=self._message, step=-1 if self._n is None else self._n)
        i = self._mon.info()
        if self._message:
            msg = self._message if not i.message else "%s; %s" % (self._message, i.message)
            i = _replace(i, message=msg)
        return i

    # -- what happens at the start of step n ------------------------------------------------

    def _begin(self, n):
        self._n = n
        mon = self._mon
        if mon is None:
            return
        # The window's last step is over: stop torch and export its trace before the
        # library closes the window and writes the manifest.
        if self._prof is not None and self._win_stop >= 0 and n > self._win_stop:
            self._finish()
        mon.step(n)
        if self._prof is None:
            if mon._quiet():
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
            self._finish()              # closed by time, failed, or cut short
        if i.state == "collecting" and key != self._tried:
            self._tried = key
            self._open(n, i)

    def _open(self, n, i):
        self._win = (i.generation, i.window_start)
        self._win_dir = i.output
        self._win_stop = i.window_stop
        args = _lib.read_config_args(self.shm_name, i.generation)
        note = ""
        if args is None:
            note = ("npuprof: the switches of generation %d could not be read from the segment; "
                    "torch's defaults are used" % i.generation)
        try:
            import torch.profiler as tp  # the real torch: imports are absolute
            tnpu = sys.modules.get("torch_npu")
            kwargs = _flag_kwargs(args)
            if tnpu is not None:
                self._npu = True
                prof_cls = tnpu.profiler.profile
                act = tnpu.profiler.ProfilerActivity
                kwargs["activities"] = [act.CPU, act.NPU]
                kwargs["on_trace_ready"] = tnpu.profiler.tensorboard_trace_handler(self._win_dir)
            else:
                self._npu = False
                prof_cls = tp.profile
                kwargs["activities"] = [tp.ProfilerActivity.CPU]
            kwargs = _accepted(prof_cls.__init__, kwargs)
            self.profile_options = {k: v for k, v in kwargs.items() if isinstance(v, bool)}
            prof = prof_cls(**kwargs)
            if hasattr(prof, "record_steps"):
                prof.record_steps = False       # the ProfilerStep#N spans are ours (see above)
            prof.start()
            self._prof = prof
            prof.step_num = n
            self._rf = tp.record_function("ProfilerStep#%d" % n)
            self._rf.__enter__()
            self._message = note
        except Exception as e:
            self._torch_failed("cannot start the torch profiler at step %d" % n, e)

    def _advance(self, n):
        try:
            self._rf.__exit__(None, None, None)
            self._rf = None
            self._prof.step()
            self._prof.step_num = n
            import torch.profiler as tp
            self._rf = tp.record_function("ProfilerStep#%d" % n)
            self._rf.__enter__()
        except Exception as e:
            self._torch_failed("the torch profiler failed at step %d" % n, e)

    def _finish(self):
        prof, rf, self._prof, self._rf = self._prof, self._rf, None, None
        if prof is None:
            return
        try:
            if rf is not None:
                rf.__exit__(None, None, None)
            prof.stop()
            self.profile = prof
            if not self._npu:
                path = os.path.join(self._win_dir, self.trace_name)
                tmp = os.path.join(self._win_dir, ".%s.tmp.json" % self.trace_name)
                prof.export_chrome_trace(tmp)
                os.replace(tmp, path)
                self.trace_path = path
                self.traces.append(path)
            else:
                self.trace_path = self._win_dir
                self.traces.append(self._win_dir)
        except Exception as e:
            self._torch_failed("cannot stop or export the torch profiler", e)

    def _torch_failed(self, what, e):
        self._message = "torch: %s: %s: %s" % (what, type(e).__name__, e)
        rf, prof, self._rf, self._prof = self._rf, self._prof, None, None
        for fn in ((lambda: rf.__exit__(None, None, None)) if rf is not None else None,
                   (lambda: prof.stop()) if prof is not None else None):
            if fn is None:
                continue
            try:
                fn()
            except Exception:
                pass


def _replace(info, **changes):
    import dataclasses
    return dataclasses.replace(info, **changes)
