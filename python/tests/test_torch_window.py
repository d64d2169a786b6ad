#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python binding with the real npuprofd and real PyTorch (CPU).

    /usr/bin/python3 python/tests/test_torch_window.py [BUILD_DIR]

A small model trains for 40 steps inside `with npuprof.torch.ProfilerWindow() as win:`
(win.step() once per step) under a private npuprofd (its own configuration directory, shm
name, socket and output root); at step 3 the configuration is edited (temporary file,
rename) to a window of steps 10 to 12. Then the window directory must hold a complete
manifest and a torch trace whose ProfilerStep# spans are exactly 10, 11 and 12. Also: a
Monitor and a ProfilerWindow with no daemon at all, and a torch that fails in the window.

Prints "ok   NAME" / "FAIL NAME" per check and "python: N passed, N failed"; exit 1 on a
failure, 77 when torch cannot be imported. The daemon and the segment are always removed.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402 - no __pycache__ in the source tree

import json
import os
import time

import bindingtest  # noqa: E402 - beside this file; it puts python/ and tests/ on sys.path
from bindingtest import Daemon, ROOT  # noqa: E402

BUILD = bindingtest.setup("npftest-py")
os.environ.pop("RANK", None)

import torch  # noqa: E402
from npftest import ok, fail, check, save_config  # noqa: E402
import npuprof  # noqa: E402
import npuprof.torch  # noqa: E402


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt


def train_step(model, opt):
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return float(loss)


def profiler_steps(path):
    """The numbers N of the ProfilerStep#N spans of a Chrome trace, in trace order."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    out = []
    for e in events:
        name = e.get("name", "")
        if name.startswith("ProfilerStep#") and e.get("ph") in ("X", "B"):
            out.append(int(name[len("ProfilerStep#"):]))
    return out, events


# --- no daemon at all ---------------------------------------------------------------------

def t_detached():
    name = "%s-absent" % bindingtest.SHM_PREFIX
    try:
        with npuprof.Monitor(rank=0, shm_name=name) as mon:
            i = mon.info()
            check("detached: Monitor opens with no daemon, state idle, not attached",
                  i.state == "idle" and not i.attached and i.generation == 0, i)
            # The best of 5 rounds of 4000 steps: a busy machine may preempt one round.
            n, per = 0, float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(4000):
                    mon.step()
                per = min(per, (time.perf_counter() - t0) / 4000 * 1e9)
                n += 4000
            i = mon.info()
            check("detached: %d steps, numbered 1..%d, still idle (%.0f ns a step)" % (n, n, per),
                  mon.current_step == n and i.step == n and i.state == "idle" and i.output == ""
                  and i.message == "", i)
            check("detached: a step costs no more than a Python call (< 20 us)", per < 20000, "%.0f ns" % per)
            mon.step(500)
            check("detached: an explicit step number is taken, and counting goes on from it",
                  mon.step() == 0 and mon.current_step == 501)
        check("detached: leaving the with-block closes it", mon.closed and mon.step() == 0
              and mon.info().state == "closed")
        mon.close()
        ok("detached: close() twice is harmless")
    except Exception as e:  # noqa: BLE001
        fail("detached: Monitor raised", "%s: %s" % (type(e).__name__, e))

    try:
        model, opt = make_model()
        with npuprof.torch.ProfilerWindow(rank=0, shm_name=name) as win:
            for step in range(1, 21):
                train_step(model, opt)
                win.step()
            i = win.info()
        check("detached: ProfilerWindow trains 20 steps with no daemon, idle, no profiler, no message",
              i.state == "idle" and win.trace_path is None and win.profile_options is None
              and i.message == "" and win.current_step is None, i)
    except Exception as e:  # noqa: BLE001
        fail("detached: ProfilerWindow raised", "%s: %s" % (type(e).__name__, e))

    try:
        npuprof.Monitor(shm_name="bad/name")
        fail("detached: a bad segment name is refused")
    except npuprof.Error as e:
        check("detached: a bad segment name is refused with EINVAL", e.errno == 22, e)


# --- the real daemon, the window 10..12 ---------------------------------------------------

def t_window():
    d = Daemon("window", {})
    try:
        g1 = d.wait_generation(1)
        if not check("window: npuprofd started and published generation 1", g1 == 1, d.tail()):
            return
        out = os.path.join(d.dir, "out")
        model, opt = make_model()
        states = {}
        published = None
        losses = []
        with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
            for step in range(0, 41):
                if win.current_step != step:
                    fail("window: ProfilerWindow counts steps from 0", "%r != %r" % (win.current_step, step))
                    return
                states[step] = win.info()
                losses.append(train_step(model, opt))
                if step == 3:
                    save_config(d.conf, {"start_step": 10, "steps": 3, "output_dir": out,
                                         "record_shapes": True})
                    published = d.wait_generation(2)
                time.sleep(0.004)
                win.step()
            final = win.info()
        check("window: the edit at step 3 was published as generation 2", published == 2, d.tail())
        check("window: the rank read it at step 4 and was armed for steps 4 to 9",
              all(states[s].state == "armed" and states[s].window_start == 10 and states[s].window_stop == 12
                  for s in range(4, 10)),
              "\n".join("%d: %s" % (s, states[s]) for s in range(3, 10)))
        check("window: collecting at steps 10, 11 and 12",
              all(states[s].state == "collecting" for s in (10, 11, 12)) and states[9].state == "armed",
              "\n".join("%d: %s" % (s, states[s]) for s in range(9, 14)))
        check("window: done from step 13 on, generation 2",
              all(states[s].state == "done" and states[s].generation == 2 for s in range(13, 41)),
              "\n".join("%d: %s" % (s, states[s]) for s in (13, 20, 40)))
        check("window: no message after the window", final.message == "" and final.state == "done", final)

        wdir = os.path.join(out, "rank0_start10_stop12")
        if not check("window: the window directory rank0_start10_stop12 exists", os.path.isdir(wdir),
                     "out: %s" % (os.listdir(out) if os.path.isdir(out) else "missing")):
            return
        check("window: it is the only window directory", sorted(os.listdir(out)) == ["rank0_start10_stop12"],
              os.listdir(out))
        check("window: info().output names it", states[10].output == wdir, states[10].output)
        try:
            with open(os.path.join(wdir, "manifest.json")) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            fail("window: manifest.json is there and is JSON", e)
            return
        check("window: the manifest says complete, rank 0, window 10..12, host backend, generation 2",
              m.get("status") == "complete" and m.get("rank") == 0 and m.get("backend") == "host"
              and m.get("generation") == 2 and (m.get("window") or {}).get("start_step") == 10
              and (m.get("window") or {}).get("stop_step") == 12, json.dumps(m, indent=1))

        tpath = os.path.join(wdir, npuprof.torch.TRACE_NAME)
        check("window: the torch trace is torch_trace.json in the window directory",
              win.trace_path == tpath and os.path.isfile(tpath), "%r %s" % (win.trace_path, os.listdir(wdir)))
        try:
            steps, events = profiler_steps(tpath)
        except (OSError, ValueError, KeyError) as e:
            fail("window: the torch trace is a Chrome trace", e)
            return
        check("window: the torch trace's ProfilerStep# spans are exactly 10, 11 and 12",
              sorted(steps) == [10, 11, 12], steps)
        ops = [e for e in events if e.get("name", "").startswith("aten::") and e.get("ph") == "X"]
        check("window: the torch trace holds the model's operators (aten::linear, aten::addmm)",
              {"aten::linear", "aten::addmm"} <= {e["name"] for e in ops},
              sorted({e.get("name") for e in events})[:30])
        spans = [e for e in events if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"]
        # record_function's own handle allocation (aten::zeros/empty/zero_) precedes each span.
        linears = [e for e in ops if e["name"] == "aten::linear"]
        inside = [e for e in linears if any(
            s["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= s["ts"] + s["dur"] for s in spans)]
        check("window: 9 forward linears (3 layers x 3 steps), all inside ProfilerStep spans",
              len(linears) == 9 and len(inside) == 9, "%d inside of %d" % (len(inside), len(linears)))
        check("window: record_shapes from the configuration reached torch (and nothing else was on)",
              win.profile_options == {"record_shapes": True, "profile_memory": False, "with_stack": False,
                                      "with_flops": False, "with_modules": False}, win.profile_options)
        # Debian's torch is built without kineto: its Chrome export has no shapes, the events do.
        try:
            shapes = [e.input_shapes[:3] for e in win.profile.events() if e.name == "aten::addmm"]
        except Exception as e:  # noqa: BLE001
            shapes = [repr(e)]
        check("window: the profile recorded input shapes (aten::addmm [[128], [32, 64], [64, 128]])",
              [[128], [32, 64], [64, 128]] in shapes, shapes[:3])
        try:
            hsteps, _ = profiler_steps(os.path.join(wdir, "trace.json"))
            check("window: the C host backend's trace.json has steps 10, 11, 12 too",
                  sorted(hsteps) == [10, 11, 12], hsteps)
        except (OSError, ValueError, KeyError) as e:
            fail("window: the C host backend's trace.json is there", e)
        check("window: the torch trace was written before the manifest",
              os.stat(tpath).st_mtime_ns <= os.stat(os.path.join(wdir, "manifest.json")).st_mtime_ns)
        check("window: no temporary file is left", not [f for f in os.listdir(wdir) if f.startswith(".")],
              os.listdir(wdir))
        check("window: the model trained (finite losses)", all(l == l and l < 1e6 for l in losses))
    finally:
        d.stop()


# --- torch fails inside the window: training goes on --------------------------------------

def window_fails(tag, broken, expect, at_step):
    """Train 10 steps through a window 5..6 whose torch profiler is @broken (a subclass of
    torch.profiler.profile): the loop must go on, and the window must be failed with the
    framework's message (@expect) at @at_step."""
    d = Daemon(tag.replace(" ", "-"), {})
    try:
        if not check("%s: npuprofd published generation 1" % tag, d.wait_generation(1) == 1, d.tail()):
            return
        out = os.path.join(d.dir, "out")
        save_config(d.conf, {"start_step": 5, "steps": 2, "output_dir": out})
        if not check("%s: the window 5..6 is published" % tag, d.wait_generation(2) == 2, d.tail()):
            return
        import torch.profiler as tp
        real = tp.profile
        tp.profile = broken
        model, opt = make_model()
        states = {}
        try:
            with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
                for _ in range(10):
                    states[win.current_step] = win.info()
                    train_step(model, opt)
                    win.step()
                done = win.current_step
                after = win.info()
        finally:
            tp.profile = real
        check("%s: the loop ran its 10 steps" % tag, done == 10, done)
        during = states[6] if at_step <= 6 else after
        check("%s: info().message says what torch did, and at which step" % tag,
              expect in during.message and ("step %d" % at_step in during.message or at_step == 7), during)
        wdir = os.path.join(out, "rank0_start5_stop6")
        try:
            with open(os.path.join(wdir, "manifest.json")) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            fail("%s: the window's manifest is there" % tag, e)
            m = {}
        check("%s: no torch trace and no temporary file in the window directory" % tag,
              not [f for f in os.listdir(wdir) if f.startswith(".") or f == "torch_trace.json"],
              os.listdir(wdir))
        check("%s: the window is failed from step %d on, with the framework's message" % (tag, at_step),
              all(states[s].state == "failed" for s in range(at_step, 10) if s in states)
              and after.state == "failed" and expect in after.message,
              "\n".join("%d: %s" % (s, states[s]) for s in sorted(states)) + "\nafter: %s" % (after,))
        check("%s: the manifest says incomplete, with the framework's message" % tag,
              m.get("status") == "incomplete" and expect in (m.get("message") or ""), json.dumps(m))
        # A profiler left running by the failure would make the next one fail to start.
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            train_step(model, opt)
        check("%s: no torch profiler was left running" % tag, len(p.events()) > 0)
    finally:
        d.stop()


def t_torch_fails():
    import torch.profiler as tp

    class BrokenStart(tp.profile):
        def start(self):
            raise RuntimeError("kineto is broken today")

    class BrokenExport(tp.profile):
        def export_chrome_trace(self, path):
            with open(path, "w") as f:
                f.write("{")
            raise OSError(28, "No space left on device")

    window_fails("torch fails to start", BrokenStart, "kineto is broken today", 5)
    window_fails("torch fails to export", BrokenExport, "No space left on device", 7)


# --- a window cut short by the end of the loop --------------------------------------------

def t_cut_short():
    d = Daemon("short", {})
    try:
        if not check("cut short: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        out = os.path.join(d.dir, "out")
        save_config(d.conf, {"start_step": 4, "steps": 10, "output_dir": out})
        if not check("cut short: the window 4..13 is published", d.wait_generation(2) == 2, d.tail()):
            return
        model, opt = make_model()
        with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
            for step in range(0, 7):         # steps 0..6: the window ends with the loop
                train_step(model, opt)
                if step < 6:
                    win.step()
        wdir = os.path.join(out, "rank0_start4_stop13")
        try:
            with open(os.path.join(wdir, "manifest.json")) as f:
                m = json.load(f)
            steps, _ = profiler_steps(os.path.join(wdir, "torch_trace.json"))
            check("cut short: manifest incomplete, the torch trace has steps 4 to 6",
                  m.get("status") == "incomplete" and sorted(steps) == [4, 5, 6],
                  "%s %s" % (m.get("status"), steps))
        except (OSError, ValueError, KeyError) as e:
            fail("cut short: the window's manifest and torch trace are there", e)
    finally:
        d.stop()


# --- warmup steps: run, not recorded ----------------------------------------------------

def t_warmup():
    d = Daemon("warmup", {})
    try:
        if not check("warmup: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        out = os.path.join(d.dir, "out")
        save_config(d.conf, {"start_step": 5, "warmup": 2, "steps": 2, "output_dir": out})
        if not check("warmup: the window 5..8 with 2 warmup steps is published", d.wait_generation(2) == 2,
                     d.tail()):
            return
        model, opt = make_model()
        with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
            for _ in range(12):
                train_step(model, opt)
                win.step()
        wdir = os.path.join(out, "rank0_start5_stop8")
        try:
            steps, events = profiler_steps(os.path.join(wdir, "torch_trace.json"))
            linears = [e for e in events if e.get("name") == "aten::linear" and e.get("ph") == "X"]
            check("warmup: the torch trace has steps 7 and 8 only, as torch's schedule(warmup=2) has it",
                  sorted(steps) == [7, 8] and len(linears) == 6, "%s, %d linears" % (steps, len(linears)))
            with open(os.path.join(wdir, "manifest.json")) as f:
                check("warmup: the manifest is complete", json.load(f).get("status") == "complete")
        except (OSError, ValueError, KeyError) as e:
            fail("warmup: the window's torch trace and manifest are there", e)
    finally:
        d.stop()


# --- the slot: held against a second claimant, kept across fork(), released by close() ----

def t_slot_and_fork():
    d = Daemon("fork", {})
    try:
        if not check("slot: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        mon = npuprof.Monitor(rank=7, shm_name=d.shm)
        mon.step()
        i = mon.info()
        check("slot: an attached Monitor reads generation 1, idle, rank 7",
              i.attached and i.generation == 1 and i.state == "idle" and i.rank == 7, i)
        try:
            npuprof.Monitor(rank=7, shm_name=d.shm).close()
            fail("slot: a second Monitor of rank 7 is refused")
        except npuprof.Error as e:
            check("slot: a second Monitor of rank 7 is refused with EBUSY", e.errno == 16, e)
        pid = os.fork()
        if pid == 0:
            code = 0 if (mon.closed and mon.step() == 0 and mon.info().state == "closed") else 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        check("fork: the child's inherited Monitor is closed and its steps do nothing",
              os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)
        mon.step()
        try:
            npuprof.Monitor(rank=7, shm_name=d.shm).close()
            fail("fork: the child left the parent's slot alone (rank 7 still held)")
        except npuprof.Error as e:
            check("fork: the child left the parent's slot alone (rank 7 still held)", e.errno == 16, e)
        check("fork: the parent's Monitor still works", mon.info().attached and mon.current_step == 2)
        mon.close()
        try:
            npuprof.Monitor(rank=7, shm_name=d.shm).close()
            ok("slot: close() released rank 7 for the next Monitor")
        except npuprof.Error as e:
            fail("slot: close() released rank 7 for the next Monitor", e)
    finally:
        d.stop()


# --- a GPU: the CUDA activity and the allocator's history ---------------------------------

def t_gpu():
    """torch.cuda.is_available(), torch.cuda.memory's _record_memory_history and _snapshot,
    and the CUDA activity replaced by recording stand-ins (there is no GPU here)."""
    import pickle
    import torch.profiler as tp
    src = os.path.join(ROOT, "..", "shared", "testdata", "torch_npu_snapshots", "snapshot_expandable.pkl")
    if os.path.isfile(src):
        with open(src, "rb") as f:
            snapshot = pickle.load(f)
    else:
        snapshot = {"segments": [], "device_traces": [[]]}
    real = (torch.cuda.is_available, torch.cuda.memory._record_memory_history, torch.cuda.memory._snapshot,
            tp.profile)
    built = []
    calls = []
    now = [0]

    class Recording(tp.profile):
        """torch's own profile, told the activities it was given but for CUDA, which a
        torch without CUDA cannot trace."""

        def __init__(self, *, activities=None, **kw):
            built.append(list(activities or []))
            super().__init__(activities=[a for a in activities or [] if a != tp.ProfilerActivity.CUDA], **kw)

    def history_113(enabled, device=None):          # torch 1.13's signature
        calls.append(("record", now[0], enabled, {}))

    def history_2(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
        calls.append(("record", now[0], enabled, {"max_entries": max_entries}))     # torch 2.1's

    def take_snapshot():
        calls.append(("snapshot", now[0]))
        return snapshot

    d = Daemon("gpu", {})
    try:
        if not check("gpu: npuprofd published generation 1", d.wait_generation(1) == 1, d.tail()):
            return
        torch.cuda.is_available = lambda: True
        torch.cuda.memory._snapshot = take_snapshot
        tp.profile = Recording
        most = npuprof.torch.MEMORY_HISTORY_MAX_ENTRIES
        rounds = (("torch 1.13", history_113,
                   [("record", 3, True, {}), ("snapshot", 5), ("record", 5, False, {})]),
                  ("torch 2", history_2,
                   [("record", 3, "all", {"max_entries": most}), ("snapshot", 5),
                    ("record", 5, None, {"max_entries": sys.maxsize})]))
        for i, (name, history, want) in enumerate(rounds):
            out = os.path.join(d.dir, "out%d" % i)
            save_config(d.conf, {"start_step": 3, "steps": 2, "output_dir": out, "profile_memory": True})
            if not check("gpu, %s: the window 3..4 with profile_memory is published" % name,
                         d.wait_generation(2 + i) == 2 + i, d.tail()):
                return
            torch.cuda.memory._record_memory_history = history
            del built[:], calls[:]
            model, opt = make_model()
            with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
                for k in range(8):
                    train_step(model, opt)
                    now[0] = k + 1
                    win.step()
            check("gpu, %s: the profiler is asked for the CPU and CUDA activities" % name,
                  built == [[tp.ProfilerActivity.CPU, tp.ProfilerActivity.CUDA]], built)
            check("gpu, %s: the allocator's history is recorded from step 3, dumped and stopped at 5" % name,
                  calls == want, calls)
            wdir = os.path.join(out, "rank0_start3_stop4")
            snap = os.path.join(wdir, npuprof.torch.MEMORY_SNAPSHOT_NAME)
            try:
                with open(snap, "rb") as f:
                    same = pickle.load(f) == snapshot
                with open(os.path.join(wdir, "manifest.json")) as f:
                    m = json.load(f)
            except (OSError, ValueError) as e:
                fail("gpu, %s: memory_snapshot.pickle and the manifest are in the window directory" % name, e)
                continue
            check("gpu, %s: memory_snapshot.pickle is the snapshot, as _dump_snapshot() writes it" % name,
                  same)
            check("gpu, %s: the manifest is complete and lists it, and the torch trace" % name,
                  m.get("status") == "complete" and {"memory_snapshot.pickle", "torch_trace.json"}
                  <= {f["name"] for f in m.get("files", [])}, json.dumps(m)[:600])
            check("gpu, %s: the snapshot was written before the manifest" % name,
                  os.stat(snap).st_mtime_ns <= os.stat(os.path.join(wdir, "manifest.json")).st_mtime_ns)
        # The file asks for the device only, on a machine where torch finds none.
        torch.cuda.is_available = real[0]
        out = os.path.join(d.dir, "cpu")
        save_config(d.conf, {"start_step": 3, "steps": 2, "output_dir": out, "activities": ["NPU"],
                             "profile_memory": True})
        d.wait_generation(4)
        del built[:], calls[:]
        with npuprof.torch.ProfilerWindow(shm_name=d.shm) as win:
            for k in range(6):
                win.step()
        check("gpu: with no device, the CPU activity and no memory history",
              built == [[tp.ProfilerActivity.CPU]] and calls == [], "%s %s" % (built, calls))
    finally:
        (torch.cuda.is_available, torch.cuda.memory._record_memory_history, torch.cuda.memory._snapshot,
         tp.profile) = real
        d.stop()


if __name__ == "__main__":
    bindingtest.main("python", ("npuprofd", "libnpuprof.so"),
                     "torch %s, libnpuprof %s" % (torch.__version__, os.environ["NPUPROF_LIB"]),
                     [t_detached, t_window, t_torch_fails, t_cut_short, t_warmup, t_gpu, t_slot_and_fork])
