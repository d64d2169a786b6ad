#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""npuprofd --legacy torch_npu under torch_npu's own code.

    /usr/bin/python3 tests/frameworks/test-torch-npu.py BUILD_DIR [TEST...]

Every job here is torch_npu's dynamic-profiling Python from ../shared/testdata/frameworks
(the master release, and v2.5.1, which names its shared memory by the UTC hour), imported
unchanged, with only torch_npu._C, torch_npu.npu and the profile class stood in
(python/tests/npu_stubs.py): tests/frameworks/torch_npu_job.py calls
dynamic_profile.init() and then dynamic_profile.step() at a job's pace, and records the
steps at which torch_npu starts, steps and stops its profiler, and what it prints. The
objects have torch_npu's own names, so the test runs in a private mount namespace with a
tmpfs of its own on /dev/shm (root; exit 77 otherwise, and where the frameworks folder or
torch is absent).

  - broken: a good save and a broken one 0.3 s later; the job, stepping every 0.5 s,
    collects the good one's window, and the object still holds it (issue 18, item 3);
  - stamp: a job started after the last save acts on nothing and prints no "config is
    not effective"; a job running before a save collects at its steps; a save of the same
    file after a job started reaches that job, as torch_npu's own monitor makes it (item 9);
  - utc: with TZ=Asia/Shanghai, a master job (local hour) and a v2.5.1 job (UTC hour) both
    attach to the daemon's objects and collect the same window (item 10);
  - windows, windows-utc: windows of npuprof's own dialect (warmup 0, 1 and 2, duration_ms,
    the next step), read by a master job and a v2.5.1 job from objects of their own
    (TZ=Asia/Shanghai) or from one (TZ=UTC): both profile exactly the iterations the window
    names, as their own schedule says which they warm up and record; neither can bound a
    window by time, and v2.5.1 cannot start one at the next step (issue 29);
  - status: a job whose object has the same name in another /dev/shm (its own mount
    namespace) is not listed as attached; a job on the daemon's object is (the object
    compared by device and inode).

Prints a line per check (tests/npftest.py) and "torch-npu: N passed, N failed".
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402 - no __pycache__ in the source tree

import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import npftest  # noqa: E402
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
ONLY = sys.argv[2:]
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
FRAMEWORKS = os.path.normpath(os.path.join(ROOT, "..", "shared", "testdata", "frameworks"))
MASTER = os.path.join(FRAMEWORKS, "torch_npu")
V251 = os.path.join(FRAMEWORKS, "torch_npu-v2.5.1")
JOB = os.path.join(HERE, "torch_npu_job.py")
PREFIX = "DynamicProfileNpuShm"
SIZE = 1 << 20

procs = []
dirs = []               # removed at the end when every check passed


def check(cond, name, why=""):
    """npftest.check(), with the condition first as this suite writes it."""
    return npftest.check(name, cond, why)


def wait_for(pred, timeout=10.0):
    return npftest.wait_for(pred, timeout, every=0.05)


def next_second():
    """Sleep into the next whole second, and a little more: torch_npu compares whole seconds
    (a save's int(mtime) with a job's int(time.time()) at its start)."""
    time.sleep(1.05 - time.time() % 1.0 + 0.1)


def clear_of_hour_turn(seconds=90):
    """Sleep past the turn of the hour if it comes within @seconds: the objects are named by
    the hour, so a case that follows one object from its making to its removal must not
    straddle the turn (what the daemon does at the turn is test-legacy's, on a moved clock)."""
    left = 3600 - time.time() % 3600
    if left < seconds:
        time.sleep(left + 1)


def local_name(t=None):
    return PREFIX + time.strftime("%Y%m%d%H", time.localtime(time.time() if t is None else t))


def utc_name(t=None):
    return PREFIX + time.strftime("%Y%m%d%H", time.gmtime(time.time() if t is None else t))


def read_object(name):
    """(stamp, body) of a torch_npu object, read as torch_npu reads it; None when absent."""
    try:
        with open("/dev/shm/" + name, "rb") as f:
            raw = f.read(SIZE)
    except FileNotFoundError:
        return None
    body = raw[4:].strip()
    try:
        return struct.unpack("<I", raw[:4])[0], json.loads(body) if body else None
    except ValueError:
        return struct.unpack("<I", raw[:4])[0], body[:80]


class Daemon:
    def __init__(self, tag, env=None, start=True):
        self.tag = tag
        self.dir = tempfile.mkdtemp(prefix="npftest-tn.%s." % tag)
        dirs.append(self.dir)
        os.chmod(self.dir, 0o755)
        self.config = os.path.join(self.dir, "profiler_config.json")
        self.socket = os.path.join(self.dir, "npuprofd.sock")
        self.env = dict(os.environ, NPUPROF_SOCKET=self.socket, **(env or {}))
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.write({})
        if start:
            self.start()

    def start(self):
        tag = self.tag
        self.proc = subprocess.Popen(
            [NPUPROFD, "--config", self.config, "--shm-name", "npftest-tn-" + tag, "--socket", self.socket,
             "--output-root", os.path.join(self.dir, "out"), "--log", "stderr", "--analyze-jobs", "0",
             "--legacy", "torch_npu"], stderr=self.log, env=self.env)
        procs.append(self.proc)
        wait_for(lambda: self.status() is not None)

    def write(self, obj):
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        os.rename(tmp, self.config)
        return int(os.stat(self.config).st_mtime)

    def status(self):
        r = subprocess.run([NPUPROFCTL, "status", "--json"], env=self.env, capture_output=True, text=True)
        try:
            return json.loads(r.stdout) if r.returncode == 0 else None
        except ValueError:
            return None

    def publisher(self):
        """The torch_npu publisher in `npuprofctl status`, {} when none."""
        for p in ((self.status() or {}).get("legacy") or {}).get("publishers", []):
            if p["publisher"] == "torch_npu":
                return p
        return {}

    def processes(self):
        return self.publisher().get("processes", [])

    def note(self):
        """What the torch_npu publisher says its format could not say, "" when nothing."""
        return self.publisher().get("note") or ""

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        self.log.close()


class Job:
    """A torch_npu job (torch_npu_job.py) of the release at @root, stepping every @interval s."""

    def __init__(self, d, tag, root=MASTER, interval=0.2, env=None, wrap=()):
        self.dir = os.path.join(d.dir, "job-" + tag)
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, "steps.log")
        self.out = open(os.path.join(self.dir, "stdout"), "w")
        self.proc = subprocess.Popen(list(wrap) + ["/usr/bin/python3", JOB, root, self.dir, self.log, str(interval)],
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     env=dict(d.env, RANK="0", **(env or {})))
        procs.append(self.proc)
        self.head = wait_for(lambda: self.lines()[:1], 30)
        self.head = self.head[0] if self.head else {}

    def lines(self):
        try:
            with open(self.log) as f:
                return [json.loads(x) for x in f if x.endswith("\n")]
        except FileNotFoundError:
            return []

    def step(self):
        s = [x["step"] for x in self.lines() if "step" in x]
        return s[-1] if s else 0

    def calls(self):
        return [(x["call"], x["at"]) for x in self.lines() if "call" in x]

    def profiled(self, since):
        """The iterations that the profiles opened after step() call @since run over, as
        torch_npu's own schedule says: (warmup, recorded), each iteration named by the call
        before it (the one that opens its ProfilerStep span)."""
        spans = [(x["span"], x["action"]) for x in self.lines() if "span" in x and x["span"] > since]
        return [k for k, a in spans if a == "WARMUP"], [k for k, a in spans if a.startswith("RECORD")]

    def printed(self):
        with open(os.path.join(self.dir, "stdout")) as f:
            return f.read()

    def wait_step(self, n, timeout=30):
        return wait_for(lambda: self.step() >= n, timeout)

    def stop(self):
        open(self.log + ".stop", "w").close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.out.close()


def window(start, active):
    """torch_npu's calls on its profile for a window of @active steps (no warmup) that opens
    at step() call @start: start there, then one step() each call, stop at the last."""
    return [("start", start)] + [("step", start + i) for i in range(1, active + 1)] + [("stop", start + active)]


NOT_EFFECTIVE = "config is not effective"


# --- item 3: a broken save right after a good one ----------------------------------------------

def test_broken():
    d = Daemon("broken")
    job = Job(d, "j", interval=0.5)
    check(job.head.get("created") is False, "broken: the job attaches to the daemon's object", job.head)
    job.wait_step(3)
    next_second()
    first = job.step() + 8
    d.write({"start_step": first, "active": 2, "warmup": 0})
    time.sleep(0.3)
    d.write('{"start_step": 40, "active": ')
    job.wait_step(first + 4)
    check(job.calls() == window(first, 2),
          "broken: a good save then a broken one 0.3 s later: the job collects the good one's window",
          (first, job.calls()))
    got = read_object(local_name())
    check(got and isinstance(got[1], dict) and got[1].get("start_step") == first and got[1].get("is_valid"),
          "broken: the object still holds the good configuration", got)
    # A fixed file is published as any other.
    again = job.step() + 6
    d.write({"start_step": again, "active": 1, "warmup": 0})
    job.wait_step(again + 3)
    check(job.calls() == window(first, 2) + window(again, 1), "broken: the file fixed, its window is collected",
          (again, job.calls()))
    check(NOT_EFFECTIVE not in job.printed(), "broken: torch_npu never says its config is not effective",
          job.printed()[-300:])
    job.stop()
    d.stop()


# --- item 9: time stamps as torch_npu's own monitor writes them --------------------------------

def test_stamp():
    d = Daemon("stamp")
    mtime = d.write({})                                 # profiling off: start_step 0 to torch_npu
    wait_for(lambda: (read_object(local_name()) or (0,))[0] >= mtime)
    next_second()
    a = Job(d, "a")
    a.wait_step(10)
    check(NOT_EFFECTIVE not in a.printed() and not a.calls(),
          "stamp: a job started after the last save acts on nothing and prints no \"%s\"" % NOT_EFFECTIVE,
          (a.calls(), a.printed()[-300:]))
    next_second()
    first = a.step() + 12
    mtime = d.write({"start_step": first, "active": 3, "warmup": 0})
    got = wait_for(lambda: (lambda o: o and isinstance(o[1], dict) and o[1].get("start_step") == first and o)(
        read_object(local_name())))
    check(got and got[0] == mtime, "stamp: the header is the file's modification time, as torch_npu's monitor "
          "writes it", (got and got[0], mtime))
    next_second()
    b = Job(d, "b")
    a.wait_step(first + 4)
    check(a.calls() == window(first, 3), "stamp: a job running before a save collects at the steps it names",
          (first, a.calls()))
    b.wait_step(first + 4)
    check(not b.calls() and NOT_EFFECTIVE not in b.printed(),
          "stamp: a job started after that save does not act on it, though its steps reach the window",
          (b.calls(), b.printed()[-300:]))
    # A window at the step that reads it (torch_npu's start_step -1), saved after b started.
    next_second()
    d.write({"start_step": -1, "active": 1, "warmup": 0})
    got = wait_for(lambda: instant(b.calls()))
    check(got, "stamp: a later save reaches the job started before it", b.calls())
    next_second()
    c = Job(d, "c")
    c.wait_step(10)
    check(not c.calls() and NOT_EFFECTIVE not in c.printed(), "stamp: a job started after it does not act on it",
          (c.calls(), c.printed()[-300:]))
    with open(d.config) as f:
        text = f.read()
    saved = c.step()
    with open(d.config, "w") as f:                      # the same bytes, written in place
        f.write(text)
    got = wait_for(lambda: instant(c.calls()))
    check(got and got > saved, "stamp: the same file saved again reaches that job, as torch_npu's own monitor "
          "stamps every save", (saved, c.calls()))
    for j in (a, b, c):
        j.stop()
    d.stop()


def instant(calls):
    """The step of the one-step window in @calls (start, then step and stop at the next call), or 0."""
    return calls[0][1] if len(calls) == 3 and calls == window(calls[0][1], 1) else 0


# --- item 10: the UTC hour of releases before September 2025 -------------------------------------

def test_utc():
    tz = {"TZ": "Asia/Shanghai"}        # UTC+8, no daylight saving: the local and UTC hours always differ
    d = Daemon("utc", tz)
    local = Job(d, "master", MASTER, env=tz)
    old = Job(d, "v251", V251, env=tz)
    check(local.head.get("object") != old.head.get("object"),
          "utc: the master release and v2.5.1 name different objects here", (local.head, old.head))
    check(local.head.get("created") is False, "utc: the master job attaches to the daemon's local-hour object",
          local.head)
    check(old.head.get("created") is False, "utc: the v2.5.1 job attaches to the daemon's UTC-hour object",
          old.head)
    local.wait_step(5)
    old.wait_step(5)
    next_second()
    first = max(local.step(), old.step()) + 15
    d.write({"start_step": first, "active": 2, "warmup": 0})
    local.wait_step(first + 3)
    old.wait_step(first + 3)
    check(local.calls() == window(first, 2), "utc: the master job collects the window", (first, local.calls()))
    check(old.calls() == window(first, 2), "utc: the v2.5.1 job collects the window", (first, old.calls()))
    now = time.time()
    names = {local_name(now), local_name(now + 3600), utc_name(now), utc_name(now + 3600)}
    check(all(os.path.exists("/dev/shm/" + n) for n in names),
          "utc: this hour's and the next hour's objects exist in both namings", sorted(os.listdir("/dev/shm")))
    local.stop()
    old.stop()
    d.stop()


# --- issue 29: a window of npuprof's dialect is the same iterations under either release ----------

def windows(tag, tz, shared):
    """Windows of every shape in npuprof's own dialect, under a master job and a v2.5.1 job:
    both profile exactly the iterations the window names. With @shared (TZ=UTC) the local
    and UTC hours coincide and both releases read one object, else each reads its own."""
    env = {"TZ": tz}
    d = Daemon(tag, env)
    master = Job(d, "master", MASTER, interval=0.1, env=env)
    old = Job(d, "v251", V251, interval=0.1, env=env)
    what = "one object, both" if shared else "objects of their own, each"
    check((master.head.get("object") == old.head.get("object")) == shared and
          master.head.get("created") is False and old.head.get("created") is False,
          "%s: TZ=%s: the master job and the v2.5.1 job read %s the daemon's" % (tag, tz, what),
          (master.head, old.head))
    master.wait_step(5)
    old.wait_step(5)

    def save(window):
        """Save @window when both jobs are at least 25 steps before its start: the step
        they had reached, and the save's time."""
        next_second()
        since = max(master.step(), old.step())
        first = since + 25
        mtime = d.write(dict(window, start_step=first if window.get("start_step") is None else window["start_step"]))
        return since, first, mtime

    for steps, warmup in ((2, 0), (3, 1), (1, 2)):
        since, first, _ = save({"steps": steps, "warmup": warmup})
        last = first + warmup + steps - 1
        master.wait_step(last + 3)
        old.wait_step(last + 3)
        want = list(range(first, first + warmup)), list(range(first + warmup, last + 1))
        got = master.profiled(since), old.profiled(since)
        check(got[0] == want and got[1] == want,
              "%s: \"steps\": %d, \"warmup\": %d: master and v2.5.1 profile exactly steps %d..%d, "
              "the first %d as warmup" % (tag, steps, warmup, first, last, warmup),
              "window %d..%d: want (warmup, recorded) %s; master %s, v2.5.1 %s" % (first, last, want, got[0], got[1]))

    # A window bounded by time: torch_npu has no such bound, and neither release opens one.
    since, first, mtime = save({"duration_ms": 500})
    wait_for(lambda: all((read_object(j.head.get("object", "")) or (0,))[0] >= mtime for j in (master, old)))
    master.wait_step(first + 8)
    old.wait_step(first + 8)
    got = master.profiled(since), old.profiled(since)
    check(got == (([], []), ([], [])) and "duration_ms" in d.note(),
          "%s: \"duration_ms\": neither release profiles anything (torch_npu cannot bound a window by "
          "time), and status says why" % tag, (got, d.note()))

    # The next step: master can start there, one step early with one more warmup step;
    # v2.5.1 cannot start a window at a step it is not told (start_step below 0 is 0).
    since, _, mtime = save({"start_step": "next", "steps": 2, "warmup": 1})
    k = wait_for(lambda: [at for c, at in master.calls() if c == "start" and at > since], 10)
    k = k[0] if k else 0
    master.wait_step(k + 6)
    old.wait_step(k + 6)
    got = master.profiled(since)
    check(k and got == ([k, k + 1], [k + 2, k + 3]),
          "%s: \"next\", \"steps\": 2, \"warmup\": 1: master, reading it at step k, records exactly the "
          "window k+1..k+3 after its warmup (k+1, and k before it)" % tag, (k, got))
    got = old.profiled(since)
    check(got == ([], []) and "next step" in d.note(),
          "%s: \"next\": v2.5.1 profiles nothing, as it cannot start a window at the next step, and status says "
          "so" % tag, (got, d.note()))
    master.stop()
    old.stop()
    d.stop()


def test_windows():
    windows("windows", "Asia/Shanghai", False)          # UTC+8: the local and UTC hours differ


def test_windows_utc():
    windows("windows-utc", "UTC", True)


# --- attached processes: the mapped file itself ----------------------------------------------------

def test_status():
    d = Daemon("status")
    ours = Job(d, "ours")
    # A job in a mount namespace of its own, with its own /dev/shm (a container's): it makes an
    # object of the same name there, which is not the daemon's.
    other = Job(d, "other", wrap=["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                  'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"', "sh"])
    check(other.head.get("created") is True and other.head.get("object") == ours.head.get("object"),
          "status: the job in its own /dev/shm makes its own object of the same name", (other.head, ours.head))
    ours.wait_step(3)
    other.wait_step(3)
    time.sleep(2.5)                     # the maps are read every 2 s
    seen = wait_for(lambda: [p for p in d.processes() if p["pid"] == ours.proc.pid], 6)
    check(seen and seen[0]["object"] == ours.head.get("object"), "status: the job on the daemon's object is listed",
          d.processes())
    pids = [p["pid"] for p in d.processes()]
    check(other.proc.pid not in pids, "status: the job on a namesake in another /dev/shm is not",
          (other.proc.pid, d.processes()))
    ours.stop()
    other.stop()
    d.stop()


# --- items 6 and 7: an object a job removes, and a clean stop ------------------------------------

def objects():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("DynamicProfileNpuShm"))


def test_unlinked():
    """A job that made the object itself (it started before npuprofd) unlinks it at exit, as
    torch_npu's creator does: npuprofd makes a new one at once, and the next job is driven."""
    clear_of_hour_turn()
    d = Daemon("unlinked", start=False)
    a = Job(d, "a")
    check(a.head.get("created") is True, "unlinked: a job started before npuprofd makes its own object", a.head)
    d.start()
    a.wait_step(3)
    next_second()
    first = a.step() + 8
    d.write({"start_step": first, "active": 1, "warmup": 0})
    a.wait_step(first + 3)
    check(a.calls() == window(first, 1), "unlinked: npuprofd adopted it and drives that job", (first, a.calls()))
    name = a.head.get("object") or local_name()
    ino = os.stat("/dev/shm/" + name).st_ino
    a.stop()
    back = wait_for(lambda: os.path.exists("/dev/shm/" + name) and os.stat("/dev/shm/" + name).st_ino != ino, 2)
    check(back, "unlinked: the job unlinked it at exit and npuprofd made a new one at once")
    next_second()
    b = Job(d, "b")
    check(b.head.get("created") is False, "unlinked: the next job attaches to npuprofd's new object", b.head)
    b.wait_step(3)
    next_second()
    first = b.step() + 8
    d.write({"start_step": first, "active": 1, "warmup": 0})
    b.wait_step(first + 3)
    check(b.calls() == window(first, 1), "unlinked: and is driven", (first, b.calls()))
    b.stop()
    d.stop()


def test_clean_stop():
    """A clean stop removes the objects nothing has open, and keeps one a job maps."""
    clear_of_hour_turn()
    d = Daemon("stop")
    check(len(objects()) >= 2, "stop: npuprofd keeps this hour's and the next hour's objects", objects())
    job = Job(d, "j")
    mapped = job.head.get("object")
    d.stop()
    check(objects() == [mapped], "stop: a clean stop removes what no job maps and keeps %s" % mapped, objects())
    job.stop()
    # The one a job mapped stays for the next daemon (as the native segment does); without
    # one, a later job finds no orphan: it makes its object and its own monitor drives it.
    for n in objects():
        os.unlink("/dev/shm/" + n)
    d2 = Daemon("stop2", start=False)
    late = Job(d2, "late")
    check(late.head.get("created") is True, "stop: a job started later makes its own object, not an orphan's",
          late.head)
    late.stop()


TESTS = {"broken": test_broken, "stamp": test_stamp, "utc": test_utc, "windows": test_windows,
         "windows-utc": test_windows_utc, "status": test_status, "unlinked": test_unlinked, "stop": test_clean_stop}


def main():
    if not (os.path.isfile(os.path.join(MASTER, "torch_npu", "profiler", "dynamic_profile.py")) and
            os.path.isfile(os.path.join(V251, "torch_npu", "profiler", "dynamic_profile.py"))):
        print("skip: ../shared/testdata/frameworks (torch_npu, torch_npu-v2.5.1) is absent: torch_npu's own code "
              "cannot be run")
        sys.exit(77)
    if os.environ.get("NPF_TORCH_NPU_NS") != "1":
        if os.geteuid() != 0:
            print("skip: test-torch-npu needs root for a private /dev/shm (the objects have torch_npu's names)")
            sys.exit(77)
        if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
            print("skip: /usr/bin/python3 cannot import torch, which torch_npu's modules import")
            sys.exit(77)
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "/usr/bin/python3",
                            os.path.abspath(__file__), BUILD] + ONLY, env=dict(os.environ, NPF_TORCH_NPU_NS="1"))
        sys.exit(r.returncode)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"]).returncode != 0:
        print("skip: cannot mount a private /dev/shm")
        sys.exit(77)
    try:
        for name, t in TESTS.items():
            if not ONLY or name in ONLY:
                t()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for d in dirs if not npftest.failed else []:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(npftest.summary("torch-npu"))


if __name__ == "__main__":
    main()
