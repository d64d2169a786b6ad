#!/usr/bin/env python3
"""npuprofd --legacy: unmodified torch_npu and MindSpore jobs driven through their own shm.

    tests/test-legacy.py BUILD_DIR

The object names are the frameworks' own (DynamicProfileNpuShm<hour>, DynamicProfileShm<hour>),
so the test runs in a private mount namespace with a tmpfs of its own on /dev/shm: it re-runs
itself under `unshare --mount` and skips (exit 77) where that is not allowed. Every layout is
read the way the frameworks' readers read it, with multiprocessing.shared_memory and struct,
from the formats written down in issue 7, not from npuprof's code. The "unmodified jobs" are
Python loops that behave as those readers do: attach to the hour's object, check its change
time and header against their own start, parse the JSON, and collect at the steps it names.
Clocks: TZ=UTC, and --legacy-clock-offset moves the daemon's hour to the edge of the next.
"""
import grp
import json
import re
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from multiprocessing import shared_memory, resource_tracker

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
HERE = os.path.dirname(os.path.abspath(__file__))
TORCH, MS = "DynamicProfileNpuShm", "DynamicProfileShm"
SIZE = 1 << 20
WAIT = 8.0

passed = failed = 0
procs = []


def ok(name):
    global passed
    passed += 1
    print("ok - " + name)


def fail(name, why=""):
    global failed
    failed += 1
    print("FAIL - %s%s" % (name, ": " + str(why) if why else ""))


def check(cond, name, why=""):
    (ok if cond else lambda n: fail(n, why))(name)
    return cond


def wait_for(pred, timeout=WAIT):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def next_second():
    """Sleep into the next whole second: torch_npu acts on a save whose modification time, in
    whole seconds, is later than its own start (int(time.time()))."""
    time.sleep(1.1 - time.time() % 1.0)


def hour_name(prefix, t):
    return prefix + time.strftime("%Y%m%d%H", time.localtime(t))


def this_hour(prefix):
    """The object a reader starting now opens: named again at every read, since a test may
    run across the hour (the daemon then publishes into the new hour's object, made ahead,
    and removes the old one once nothing maps it)."""
    return hour_name(prefix, time.time())


# --- the frameworks' readers, from the formats they document --------------------------------

def attach(name):
    """SharedMemory(name) as the frameworks open it: read-write, never created here."""
    try:
        shm = shared_memory.SharedMemory(name=name, create=False)
    except FileNotFoundError:
        return None
    try:    # the reader does not own the object: Python must not unlink it at exit
        resource_tracker.unregister(shm._name, "shared_memory")
    except Exception:
        pass
    return shm


def read_torch_npu(name):
    """(timestamp, config) from torch_npu's layout: <I header, then space-padded UTF-8 JSON."""
    shm = attach(name)
    if not shm:
        return None
    try:
        stamp = struct.unpack("<I", bytes(shm.buf[:4]))[0]
        body = bytes(shm.buf[4:SIZE]).decode("utf-8", "replace").strip(" \0")
        # A header of 0 is withdrawn for a rewrite, and a header that changed during the read
        # raced one: as torch_npu, take the body only under a header that held throughout.
        if stamp == 0 or struct.unpack("<I", bytes(shm.buf[:4]))[0] != stamp:
            return stamp, None
        return stamp, (json.loads(body) if body else None)
    finally:
        shm.close()


def read_mindspore_json(name):
    shm = attach(name)
    if not shm:
        return None
    try:
        raw = bytes(shm.buf[:SIZE])
        text = raw[:raw.index(b"\0")].decode("utf-8")
        return json.loads(text) if text else None
    finally:
        shm.close()


PACKED = "iiiiii????"
PACKED_FIELDS = ("start_step", "stop_step", "aicore_metrics", "profiler_level", "analyse_mode", "activities",
                 "parallel_strategy", "with_stack", "data_simplification", "is_valid")


def read_mindspore_packed(name):
    shm = attach(name)
    if not shm:
        return None
    try:
        return dict(zip(PACKED_FIELDS, struct.unpack(PACKED, bytes(shm.buf[:struct.calcsize(PACKED)]))))
    finally:
        shm.close()


# --- the daemon ----------------------------------------------------------------------------

class Daemon:
    def __init__(self, tag, legacy, extra=()):
        self.dir = tempfile.mkdtemp(prefix="npftest-l.%s." % tag)
        self.config = os.path.join(self.dir, "profiler_config.json")
        self.socket = os.path.join(self.dir, "npuprofd.sock")
        self.root = os.path.join(self.dir, "out")
        self.env = dict(os.environ, NPUPROF_SOCKET=self.socket, TZ="UTC")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.write({})
        self.proc = subprocess.Popen(
            [NPUPROFD, "--config", self.config, "--shm-name", "npftest-l-" + tag, "--socket", self.socket,
             "--output-root", self.root, "--log", "stderr", "--analyze-jobs", "0", "--legacy", legacy] + list(extra),
            stderr=self.log, env=self.env)
        procs.append(self.proc)
        wait_for(lambda: self.status() is not None)

    def write(self, obj):
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        os.rename(tmp, self.config)

    def status(self):
        r = subprocess.run([NPUPROFCTL, "status", "--json"], env=self.env, capture_output=True, text=True)
        try:
            return json.loads(r.stdout) if r.returncode == 0 else None
        except ValueError:
            return None

    def publishers(self):
        s = self.status()
        return {p["publisher"]: p for p in (s or {}).get("legacy", {}).get("publishers", [])}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        self.log.close()

    def logged(self):
        with open(os.path.join(self.dir, "log")) as f:
            return f.read()


# --- layouts: every field, for configurations in each dialect --------------------------------

NATIVE = {"start_step": 1000, "steps": 5, "warmup": 1, "level": "Level2", "aic_metrics": "MemoryUB",
          "activities": ["NPU"], "analyse": "async", "with_stack": True, "record_shapes": True,
          "parallel_strategy": True, "data_simplification": False, "l2_cache": True, "output_dir": "native",
          "ranks": "0-3,8", "export_type": ["text", "db"], "host_sys": ["cpu", "mem"], "mstx": True}
NATIVE_OFF_LEVEL = {"start_step": 7, "steps": 2, "level": "LevelNone", "aic_metrics": "AiCoreNone",
                    "activities": ["CPU"], "output_dir": "none"}
TORCH_FILE = json.load(open(os.path.join(HERE, "..", "examples", "configs", "torch_npu.json")))
MS_FILE = {"start_step": 10, "stop_step": 14, "aic_metrics": 3, "profiler_level": 2, "analyse_mode": 0,
           "activities": 2, "with_stack": True, "parallel_strategy": True, "data_simplification": False,
           "profile_memory": True, "prof_path": "ms"}


def test_layouts():
    d = Daemon("layouts", "torch_npu,mindspore-json")
    now = time.time()
    tname = hour_name(TORCH, now)
    check(os.path.exists("/dev/shm/" + hour_name(TORCH, now + 3600)) and
          os.path.exists("/dev/shm/" + hour_name(MS, now + 3600)), "the next hour's objects exist already")
    st = os.stat("/dev/shm/" + tname)
    check(st.st_size == SIZE and (st.st_mode & 0o777) == 0o666, "1 MiB objects, read-write for every user",
          "size %d mode %o" % (st.st_size, st.st_mode & 0o777))
    stamps = []

    def published(expect_torch, expect_ms):
        def pred():
            t, m = read_torch_npu(this_hour(TORCH)), read_mindspore_json(this_hour(MS))
            return t and t[1] and expect_torch(t[1]) and m and expect_ms(m) and (t, m)
        return wait_for(pred)

    # native file
    before = wait_for(lambda: (lambda t: t and t[1] and t)(read_torch_npu(this_hour(TORCH))))
    d.write(NATIVE)
    mtime = int(os.stat(d.config).st_mtime)
    got = published(lambda c: c.get("start_step") == 1000, lambda c: c.get("start_step") == 1000)
    if check(got, "a native file is published in both layouts"):
        (stamp, t), m = got
        stamps.append(stamp)
        x = t["experimental_config"]
        check(t["is_valid"] is True and t["warmup"] == 1 and t["active"] == 5, "torch_npu: is_valid, warmup, active")
        check(t["activities"] == ["NPU"] and t["analyse"] is True and t["async_mode"] is True,
              "torch_npu: activities, analyse, async_mode")
        check(t["with_stack"] and t["record_shapes"] and not t["profile_memory"], "torch_npu: top-level switches")
        check(x["profiler_level"] == "Level2" and x["aic_metrics"] == "MemoryUB" and x["l2_cache"] is True and
              x["data_simplification"] is False and x["msprof_tx"] is True, "torch_npu: experimental_config", x)
        check(x["export_type"] == ["text", "db"] and x["host_sys"] == ["cpu", "mem"], "torch_npu: export_type, host_sys")
        check(t["is_rank"] is True and t["rank_list"] == [0, 1, 2, 3, 8], "torch_npu: is_rank and rank_list",
              t["rank_list"])
        check(t["prof_dir"] == os.path.join(d.root, "native"), "torch_npu: prof_dir under the output root",
              t["prof_dir"])
        # As torch_npu's own monitor stamps it: a reader acts on what was saved after it started.
        check(before and stamp == max(mtime, before[0] + 1),
              "torch_npu: the header is the file's modification time (the last one + 1 within a second)",
              (stamp, mtime, before and before[0]))
        check(m["start_step"] == 1000 and m["stop_step"] == 1005, "MindSpore: start_step and stop_step (warmup included)", m)
        check(m["profiler_level"] == "Level2" and m["aic_metrics"] == "MemoryUB" and m["analyse_mode"] == 1,
              "MindSpore: level, aic_metrics, analyse_mode")
        check(m["activities"] == ["NPU"] and m["parallel_strategy"] is True and m["with_stack"] is True and
              m["data_simplification"] is False, "MindSpore: activities and switches")
        check(m["prof_path"] == os.path.join(d.root, "native"), "MindSpore: prof_path")
        note = d.publishers().get("mindspore-json", {}).get("note") or ""
        check("rank list" in note, "status says MindSpore cannot restrict ranks", note)

    # the levels that differ by dialect
    d.write(NATIVE_OFF_LEVEL)
    got = published(lambda c: c.get("start_step") == 7, lambda c: c.get("start_step") == 7)
    if check(got, "a second native file is published"):
        (stamp, t), m = got
        stamps.append(stamp)
        check(t["experimental_config"]["profiler_level"] == "Level_none", "torch_npu says Level_none",
              t["experimental_config"]["profiler_level"])
        check(m["profiler_level"] == "LevelNone", "MindSpore says LevelNone", m["profiler_level"])
        check(t["experimental_config"]["aic_metrics"] == "AiCoreNone" and m["aic_metrics"] == "AiCoreNone",
              "AiCoreNone in both")

    # a torch_npu file
    d.write(TORCH_FILE)
    got = published(lambda c: c.get("start_step") == 1000 and c.get("active") == 4,
                    lambda c: c.get("start_step") == 1000 and c.get("stop_step") == 1004)
    if check(got, "a torch_npu file is published in both layouts"):
        (stamp, t), m = got
        stamps.append(stamp)
        for k in ("activities", "record_shapes", "profile_memory", "with_stack", "active", "warmup", "start_step"):
            check(t[k] == TORCH_FILE[k], "torch_npu file: %s as written" % k, (t[k], TORCH_FILE[k]))
        for k, v in TORCH_FILE["experimental_config"].items():
            check(t["experimental_config"][k] == v, "torch_npu file: experimental_config.%s as written" % k,
                  (t["experimental_config"][k], v))
        check(m["profiler_level"] == "Level1" and m["aic_metrics"] == "PipeUtilization" and m["profile_memory"],
              "torch_npu file in MindSpore's dialect")

    # a MindSpore file, with MindSpore's integers
    d.write(MS_FILE)
    got = published(lambda c: c.get("start_step") == 10, lambda c: c.get("start_step") == 10)
    if check(got, "a MindSpore file is published in both layouts"):
        (stamp, t), m = got
        stamps.append(stamp)
        check(m["stop_step"] == 14 and m["aic_metrics"] == "MemoryL0" and m["profiler_level"] == "Level2" and
              m["analyse_mode"] == 0 and m["activities"] == ["NPU"], "MindSpore file: its integers as names", m)
        check(t["warmup"] == 0 and t["active"] == 5 and t["experimental_config"]["profiler_level"] == "Level2",
              "MindSpore file in torch_npu's terms")

    # off, then broken
    d.write({})
    got = published(lambda c: c.get("start_step") == 0, lambda c: c.get("start_step") == -1)
    if check(got, "profiling off is published"):
        (stamp, t), m = got
        stamps.append(stamp)
        check(t["is_valid"] is True and m["stop_step"] == -1, "off: torch_npu start_step 0, MindSpore -1/-1")
    before = read_torch_npu(this_hour(TORCH))
    d.write('{"start_step": 12, "steps": }')
    time.sleep(1.0)
    check(before and before[1] and read_torch_npu(this_hour(TORCH)) == before,
          "a broken file: torch_npu's object keeps the last good one, header and body", before)
    m = read_mindspore_json(this_hour(MS))
    check(m and m["start_step"] == -1, "a broken file: MindSpore's JSON keeps the last good one", m)
    check(all(b > a for a, b in zip(stamps, stamps[1:])), "torch_npu headers strictly increase", stamps)
    d.stop()


def test_packed():
    d = Daemon("packed", "mindspore-packed")
    # The daemon makes no packed object (MindSpore's constructor would refuse one whose change
    # time is far from its start): it adopts the one a job makes, 28 zero bytes.
    time.sleep(0.3)
    check(read_mindspore_packed(this_hour(MS)) is None, "packed: the daemon makes no MindSpore object")
    made = shared_memory.SharedMemory(name=this_hour(MS), create=True, size=struct.calcsize(PACKED))
    try:
        resource_tracker.unregister(made._name, "shared_memory")
    except Exception:
        pass
    d.write(MS_FILE)
    got = wait_for(lambda: (lambda p: p and p["start_step"] == 10 and p)(read_mindspore_packed(this_hour(MS))))
    if check(got, "packed: a MindSpore file is published"):
        want = {"start_step": 10, "stop_step": 14, "aicore_metrics": 3, "profiler_level": 2, "analyse_mode": 0,
                "activities": 2, "parallel_strategy": True, "with_stack": True, "data_simplification": False,
                "is_valid": True}
        for k, v in want.items():
            check(got[k] == v, "packed: %s" % k, (got[k], v))
    d.write(NATIVE)
    got = wait_for(lambda: (lambda p: p and p["start_step"] == 1000 and p)(read_mindspore_packed(this_hour(MS))))
    check(got and got["stop_step"] == 1005 and got["activities"] == 2 and got["aicore_metrics"] == 4 and
          got["profiler_level"] == 2 and got["analyse_mode"] == 1, "packed: a native file in MindSpore's integers", got)
    d.write({"start_step": "next", "steps": 3})
    # A changed window moves a field at a time, start_step last: wait for the whole of it.
    got = wait_for(lambda: (lambda p: p and p["start_step"] == -1 and p["stop_step"] == -1 and p)(
        read_mindspore_packed(this_hour(MS))))
    check(got and got["is_valid"], "packed: a window at the next step is published off", got)
    note = d.publishers().get("mindspore-packed", {}).get("note") or ""
    check("next step" in note, "status says why it is off", note)
    time.sleep(0.2)
    before = read_mindspore_packed(this_hour(MS))
    d.write("{ broken")
    time.sleep(1.0)
    check(before and read_mindspore_packed(this_hour(MS)) == before and before["is_valid"],
          "packed: a broken file changes nothing (the last good struct stays valid)", before)
    d.stop()
    made.close()
    made.unlink()


# --- torn reads ----------------------------------------------------------------------------

def test_torn():
    d = Daemon("torn", "torch_npu")
    name = hour_name(TORCH, time.time())
    child = subprocess.Popen([sys.executable, "-c", """
import json, random, struct, sys, time
from multiprocessing import shared_memory, resource_tracker
shm = shared_memory.SharedMemory(name=sys.argv[1])
resource_tracker.unregister(shm._name, "shared_memory")
seen, reads, end = {}, 0, time.time() + float(sys.argv[2])
while time.time() < end:
    stamp = struct.unpack("<I", bytes(shm.buf[:4]))[0]
    time.sleep(random.random() * 0.003)     # a reader slowed between header and body
    body = bytes(shm.buf[4:]).decode().strip()
    reads += 1
    if stamp == 0:                  # withdrawn for a rewrite: older than any reader, so ignored
        continue
    try:
        c = json.loads(body)
    except ValueError:
        print("TORN", stamp, body[:80]); sys.exit(1)
    if seen.setdefault(stamp, body) != body:
        print("TWO BODIES UNDER", stamp); sys.exit(1)
print("reads", reads, "headers", len(seen))
""", name, "6"], stdout=subprocess.PIPE, text=True)
    procs.append(child)
    for i in range(120):            # an edit every 40 ms: faster than bodies may be rewritten
        d.write({"start_step": 100 + i, "steps": 1 + i % 7, "output_dir": "x" * (1 + i * 37 % 400)})
        time.sleep(0.04)
    out = child.communicate(timeout=30)[0]
    check(child.returncode == 0 and "reads" in out,
          "a reader, even one slowed between header and body, never sees a torn body, nor two under one header",
          out.strip())
    got = wait_for(lambda: (lambda t: t and t[1] and t[1]["start_step"] == 219 and t)(read_torch_npu(this_hour(TORCH))))
    check(got, "edits faster than the settle time end with the newest one published")
    d.stop()


# --- unmodified jobs -------------------------------------------------------------------------

JOB = r"""
import ctypes, json, os, struct, sys, time
from multiprocessing import shared_memory, resource_tracker
kind, offset, out, stale_s = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
ctypes.CDLL(None).prctl(15, b"unmodified-job", 0, 0, 0)       # PR_SET_NAME, as ps shows it
start = time.time()
prefix = "DynamicProfileNpuShm" if kind == "torch_npu" else "DynamicProfileShm"
name = prefix + time.strftime("%Y%m%d%H", time.localtime(start + offset))
shm = None
while shm is None:
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        time.sleep(0.05)
resource_tracker.unregister(shm._name, "shared_memory")
ctime = os.stat("/dev/shm/" + name).st_ctime
log = open(out, "w", buffering=1)
log.write(json.dumps({"object": name, "stale": ctime < start - stale_s, "age": start - ctime}) + "\n")
if ctime < start - stale_s:
    sys.exit(3)                     # the frameworks refuse a stale segment
last, window, step = None, None, 0
cur_time = int(start)               # torch_npu: a header later than this is new, then becomes it
while True:
    step += 1
    log.write(json.dumps({"step": step}) + "\n")
    if kind == "torch_npu":
        stamp = struct.unpack("<I", bytes(shm.buf[:4]))[0]
        if stamp > cur_time:
            cur_time = stamp
            c = json.loads(bytes(shm.buf[4:]).decode().strip())
            if c.get("is_valid") and c["start_step"] > 0:
                first = c["start_step"] if c["start_step"] >= 0 else step + 1
                window = (first, first + c["warmup"] + c["active"] - 1)
    else:
        raw = bytes(shm.buf)
        text = raw[:raw.index(b"\0")].decode()
        if text and text != last:
            last = text
            c = json.loads(text)
            window = (c["start_step"], c["stop_step"]) if c["start_step"] > 0 else None
    if window and window[0] <= step <= window[1]:
        log.write(json.dumps({"collect": step}) + "\n")
    if os.path.exists(out + ".stop"):
        break
    time.sleep(0.02)
"""


def start_job(d, kind, offset=0, stale_s=900):
    out = os.path.join(d.dir, "job-%s-%d.log" % (kind, len(procs)))
    p = subprocess.Popen([sys.executable, "-c", JOB, kind, str(offset), out, str(stale_s)], env=d.env)
    procs.append(p)
    p.out = out
    return p


def job_lines(p):
    try:
        with open(p.out) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def job_step(p):
    steps = [x["step"] for x in job_lines(p) if "step" in x]
    return steps[-1] if steps else 0


def job_collected(p):
    return [x["collect"] for x in job_lines(p) if "collect" in x]


def stop_job(p):
    open(p.out + ".stop", "w").close()
    p.wait(10)


def test_jobs():
    for kind, legacy in (("torch_npu", "torch_npu"), ("mindspore", "mindspore-json")):
        d = Daemon("job-" + kind, legacy)
        job = start_job(d, kind)
        check(wait_for(lambda: job_step(job) > 20), "%s job: an unmodified job runs" % kind)
        procs_seen = wait_for(lambda: [x for x in d.publishers().get(legacy, {}).get("processes", [])
                                       if x["pid"] == job.pid])
        check(procs_seen and procs_seen[0]["command"] == "unmodified-job" and
              procs_seen[0]["object"] == job_lines(job)[0]["object"],
              "%s job: status lists it with its command and object" % kind, procs_seen)
        text = subprocess.run([NPUPROFCTL, "status"], env=d.env, capture_output=True, text=True).stdout
        check(re.search(r"legacy: +%s.*\n(.*\n)*? +pid %d +unmodified-job +%s" % (legacy, job.pid,
                                                                             job_lines(job)[0]["object"]), text),
              "%s job: npuprofctl status shows it under its publisher" % kind, text[-600:])
        if kind == "torch_npu":
            next_second()
        first = job_step(job) + 60
        if kind == "torch_npu":
            d.write({"start_step": first, "warmup": 1, "active": 4})
        else:
            d.write({"start_step": first, "stop_step": first + 4})
        wait_for(lambda: job_step(job) > first + 10, 15)
        stop_job(job)
        check(job_collected(job) == list(range(first, first + 5)), "%s job: it collects at steps %d..%d" % (
            kind, first, first + 4), job_collected(job))
        check(not job_lines(job)[0]["stale"], "%s job: the segment was not stale" % kind)
        d.stop()


def test_stale_refresh():
    # refresh every 2 s; a job that calls a segment stale after 4 s starts 6 s in
    d = Daemon("stale", "torch_npu", ["--legacy-refresh", "2"])
    d.write({"start_step": 10, "steps": 1})
    time.sleep(6.5)
    job = start_job(d, "torch_npu", stale_s=4)
    check(wait_for(lambda: job_step(job) > 0), "a job started 6 s after the object finds it fresh",
          job_lines(job)[:1])
    if job.poll() is None:
        stop_job(job)
    d.stop()


def test_hour_boundary():
    now = time.time()
    edge = (int(now) // 3600 + 1) * 3600                 # TZ=UTC: hours are multiples of 3600
    offset = int(edge - 6 - now)                           # the daemon's clock: 6 s before the hour
    d = Daemon("hour", "torch_npu", ["--legacy-clock-offset", str(offset)])
    old, new, after = (hour_name(TORCH, now + offset), hour_name(TORCH, now + offset + 3600),
                       hour_name(TORCH, now + offset + 7200))
    check(os.path.exists("/dev/shm/" + new), "before the hour turns, the next hour's object exists")
    d.write({"start_step": 100000, "steps": 2})         # in force, far ahead: no window yet
    early = start_job(d, "torch_npu", offset)
    check(wait_for(lambda: job_step(early) > 0) and job_lines(early)[0]["object"] == old,
          "a job started before the hour attaches to the old hour's object")
    time.sleep(max(0, edge - (time.time() + offset)) + 1.5)
    late = start_job(d, "torch_npu", offset)
    check(wait_for(lambda: job_step(late) > 0) and job_lines(late)[0]["object"] == new,
          "a job started after it attaches to the new hour's object")
    check(wait_for(lambda: os.path.exists("/dev/shm/" + after)), "the hour after is created ahead")
    check(os.path.exists("/dev/shm/" + old), "the old hour's object stays while a job maps it")
    next_second()
    first = max(job_step(early), job_step(late)) + 60
    d.write({"start_step": first, "warmup": 0, "active": 3})
    wait_for(lambda: min(job_step(early), job_step(late)) > first + 5, 15)
    stop_job(early)
    check(job_collected(early) == [first, first + 1, first + 2], "the job on the old hour's object is still driven",
          job_collected(early))
    check(wait_for(lambda: not os.path.exists("/dev/shm/" + old)), "the old object is removed once nothing maps it")
    stop_job(late)
    check(job_collected(late) == [first, first + 1, first + 2], "the job on the new hour's object is driven",
          job_collected(late))
    check(os.path.exists("/dev/shm/" + new), "the current hour's object stays")
    d.stop()


def test_group():
    g = grp.getgrnam("nogroup")
    name = hour_name(TORCH, time.time())
    # As an earlier run without the option leaves it: root's, 0666. The daemon adopts it.
    fd = os.open("/dev/shm/" + name, os.O_RDWR | os.O_CREAT, 0o666)
    os.ftruncate(fd, SIZE)
    os.fchown(fd, 0, 0)
    os.fchmod(fd, 0o666)
    os.close(fd)
    d = Daemon("group", "torch_npu", ["--legacy-group", "nogroup"])
    st = os.stat("/dev/shm/" + name)
    check(st.st_gid == g.gr_gid and (st.st_mode & 0o777) == 0o660, "--legacy-group: the group's, mode 0660",
          "gid %d mode %o" % (st.st_gid, st.st_mode & 0o777))
    opener = "import os,sys; os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(65534); " \
             "os.close(os.open('/dev/shm/' + sys.argv[1], os.O_RDWR))"
    r = subprocess.run([sys.executable, "-c", opener, name, str(g.gr_gid)], capture_output=True)
    check(r.returncode == 0, "a user of the group opens it read-write, as the frameworks do", r.stderr[-200:])
    r = subprocess.run([sys.executable, "-c", opener, name, "54321"], capture_output=True)
    check(r.returncode != 0, "a user outside the group cannot")
    d.stop()


def main():
    if os.environ.get("NPF_LEGACY_NS") != "1":
        if os.geteuid() != 0:
            print("test-legacy needs root for a private /dev/shm (the objects have the frameworks' names)")
            sys.exit(77)
        env = dict(os.environ, NPF_LEGACY_NS="1", TZ="UTC")
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), BUILD], env=env)
        sys.exit(r.returncode)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"]).returncode != 0:
        print("test-legacy: cannot mount a private /dev/shm")
        sys.exit(77)
    time.tzset()
    try:
        for t in (test_layouts, test_packed, test_torn, test_jobs, test_stale_refresh, test_hour_boundary,
                  test_group):
            t()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    print("legacy: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
