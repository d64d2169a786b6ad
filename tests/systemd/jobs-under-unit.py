#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Unmodified jobs of every kind against npuprofd.service as packaged (tests/systemd/test-units.sh).

    jobs-under-unit.py CONFIG NPUPROFCTL TRAIN_LOOP SHM_NAME WORK_DIR

Run inside the namespaces whose PID 1 is the test's systemd, where npuprofd.service runs as
user npuprof with no capability and wants npuprof-shmopen.socket, the daemon's
NPUPROFD_OPTS adding --legacy torch_npu,mindspore-packed. The jobs are the frameworks' own
code (tests/frameworks/*_job.py import ../shared/testdata/frameworks unchanged) and the real
libnpuprof (train-loop); /dev/shm is the host's:
  - a torch_npu job of root that started before the daemon made its own object (0600): the
    daemon, started after it, takes it from npuprof-shmopen and drives the job;
  - MindSpore jobs of root, of another user (nobody), and of root and of nobody in a private
    mount and pid namespace (a container sharing the host's /dev/shm): each makes its own 28-byte
    object 0600, each is driven at the steps the file names and ends with exit 0;
  - libnpuprof ranks in containers, as root and as nobody: listed in npuprofctl status with
    their pid as the daemon sees it, and each collects a window.
Prints "ok"/"FAIL" lines and ends with "jobs: N passed, N failed".
"""
import json
import os
import pwd
import subprocess
import sys
import time

config, npuprofctl, train_loop, shm_name, work = sys.argv[1:6]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from npftest import as_user  # noqa: E402
FRAMEWORKS = os.path.join(HERE, "..", "frameworks")
TORCH_NPU = os.path.join(HERE, "..", "..", "..", "shared", "testdata", "frameworks", "torch_npu")
SOCKET = "/run/npuprof/npuprofd.sock"
CONTAINER = ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--propagation", "private"]
passed = failed = 0
procs = []


def check(name, ok, detail=None):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name)
        if detail is not None:
            for line in str(detail)[-1500:].splitlines():
                print("     | " + line)
    sys.stdout.flush()
    return ok


def wait_for(f, timeout):
    end = time.monotonic() + timeout
    while True:
        v = f()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.05)


def write_config(obj):
    with open(config + ".tmp", "w") as f:
        json.dump(obj, f)
    os.rename(config + ".tmp", config)


def ctl(*args):
    r = subprocess.run([npuprofctl, "--socket", SOCKET, "--shm-name", shm_name] + list(args), capture_output=True,
                       text=True, timeout=20)
    return r.stdout if r.returncode == 0 else None


def status():
    out = ctl("status", "--json")
    return json.loads(out) if out else None


def legacy_object(name):
    s = status() or {}
    for p in ((s.get("legacy") or {}).get("publishers") or []):
        for o in p["objects"]:
            if o["name"] == name:
                return o
    return None


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(x) for x in f if x.endswith("\n")]
    except FileNotFoundError:
        return []


def systemctl(*args):
    return subprocess.run(["systemctl"] + list(args), capture_output=True, text=True, timeout=60)


def torch_npu_first():
    """A torch_npu job started before the daemon makes its own object; the daemon adopts it."""
    systemctl("stop", "npuprofd.service")
    d = os.path.join(work, "torch_npu")
    os.makedirs(d)
    log = os.path.join(d, "steps.log")
    procs.append(subprocess.Popen(["/usr/bin/python3", os.path.join(FRAMEWORKS, "torch_npu_job.py"), TORCH_NPU, d,
                                   log, "0.1"], stdout=open(log + ".out", "w"), stderr=subprocess.STDOUT,
                                  env=dict(os.environ, RANK="0")))
    head = wait_for(lambda: lines(log)[:1], 30)
    head = head[0] if head else {}
    name = os.path.basename(head.get("object", ""))
    if not check("torch_npu: a root job started before the daemon makes its own object (%s)" % name,
                 head.get("created") is True and os.stat("/dev/shm/" + name).st_mode & 0o777 == 0o600,
                 (head, open(log + ".out").read())):
        return
    systemctl("start", "npuprofd.service")
    if not check("torch_npu: npuprofd.service starts after it", wait_for(status, 30), systemctl("status").stdout):
        return
    check("torch_npu: the daemon takes the job's object from npuprof-shmopen",
          wait_for(lambda: (legacy_object(name) or {}).get("via_opener"), 15), legacy_object(name))
    # A job acts on a save later than its own start, in whole seconds.
    time.sleep(1.1)
    step = lambda: max([x["step"] for x in lines(log) if "step" in x] or [0])  # noqa: E731
    first = step() + 15
    write_config({"start_step": first, "active": 1, "warmup": 0})
    wait_for(lambda: step() >= first + 4, 30)
    calls = [(x["call"], x["at"]) for x in lines(log) if "call" in x]
    check("torch_npu: the job is driven: its profiler starts at step %d and stops after it" % first,
          calls[:1] == [("start", first)] and ("stop", first + 1) in calls, (calls, legacy_object(name)))
    open(log + ".stop", "w").close()
    check("torch_npu: the job ends with exit 0", procs[-1].wait(20) == 0, open(log + ".out").read())


def mindspore(label, user=None, wrap=()):
    """One MindSpore job, its own DynamicProfilerMonitor, driven at the steps the file names."""
    d = os.path.join(work, "ms-" + label.replace(" ", "-"))
    os.makedirs(d)
    os.chmod(d, 0o777)
    log = os.path.join(d, "job.log")
    open(log, "w").close()
    if user:
        pw = pwd.getpwnam(user)
        os.chown(log, pw.pw_uid, pw.pw_gid)
    proc = subprocess.Popen(list(wrap) + ["/usr/bin/python3", os.path.join(FRAMEWORKS, "mindspore_job.py"), d, log,
                                          "100000", "10"], preexec_fn=None if wrap else as_user(user),
                            env=dict(os.environ, RANK_ID="1"),
                            stdout=subprocess.DEVNULL, stderr=open(log + ".err", "w"))
    procs.append(proc)
    step = lambda: max([x["step"] for x in lines(log)] or [0])  # noqa: E731
    constructed = lambda: [x for x in lines(log) if x.get("event") == "constructed"]  # noqa: E731
    built = wait_for(lambda: constructed() and step() > 5 and constructed(), 20)
    if not check("mindspore (%s): the job builds its monitor" % label, built,
                 open(log + ".err").read() + json.dumps(lines(log)[-5:])):
        proc.kill()
        return
    name = built[0]["object"]
    st = os.stat("/dev/shm/" + name)
    check("mindspore (%s): its object %s is its own, 28 bytes, mode 0600" % (label, name),
          st.st_size == 28 and st.st_mode & 0o777 == 0o600 and
          st.st_uid == (pwd.getpwnam(user).pw_uid if user else 0))
    check("mindspore (%s): the daemon takes it from npuprof-shmopen" % label,
          wait_for(lambda: (legacy_object(name) or {}).get("via_opener"), 15), legacy_object(name))
    s = step() + 100
    write_config({"start_step": s, "stop_step": s + 1})
    wait_for(lambda: step() >= s + 5, 30)
    windows, start = [], None
    for x in lines(log):
        if x.get("profiler") == "start":
            start = x["step"]
        elif x.get("profiler") == "stop":
            windows.append((start, x["step"]))
    open(log + ".stop", "w").close()
    try:
        rc = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    check("mindspore (%s): driven at %d..%d" % (label, s, s + 1), windows == [(s, s + 1)], windows)
    check("mindspore (%s): it unlinks its object and ends with exit 0" % label,
          rc == 0 and not os.path.exists("/dev/shm/" + name), (rc, open(log + ".err").read()))


def ranks_in_containers():
    """libnpuprof ranks (train-loop) in containers, as root and as nobody."""
    write_config({"start_step": 100000, "steps": 2})
    nobody = pwd.getpwnam("nobody")
    for rank, user in ((20, None), (21, "nobody")):
        wrap = CONTAINER + (["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                             "--clear-groups"] if user else [])
        procs.append(subprocess.Popen(wrap + [train_loop, "--rank", str(rank), "--steps", "100000", "--step-ms",
                                              "10", "--busy", "0", "--shm-name", shm_name, "--backend", "host"],
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "rank%d" % rank),
                                                                             "w")))
        # Each pid 1 of its namespace: two that also started in the same clock tick could not be
        # told apart by a daemon that may not read their open files (npuprofd(8), THE RANK SWEEP).
        time.sleep(0.05)

    def row(rank):
        return next((r for r in ((status() or {}).get("ranks") or []) if r.get("rank") == rank), None)
    for rank, who in ((20, "root"), (21, "nobody")):
        r = wait_for(lambda: (row(rank) or {}).get("pid") and row(rank), 15) or row(rank)
        host = r and r.get("pid")
        comm = open("/proc/%d/comm" % host).read().strip() if host and os.path.exists("/proc/%d" % host) else None
        check("rank %d (%s in a container) is listed in npuprofctl status, with its pid as the daemon sees it" %
              (rank, who), r and comm == "train-loop", (r, comm))
    text = ctl("status") or ""
    check("npuprofctl status prints both container ranks",
          all(any(line.split()[:1] == [str(k)] for line in text.splitlines()) for k in (20, 21)), text)
    steps = [(row(k) or {}).get("step", 0) for k in (20, 21)]
    s = max(steps) + 150
    write_config({"start_step": s, "steps": 3})
    done = lambda k: [w for w in (json.loads(ctl("windows", "--json") or "{}").get("windows") or [])  # noqa: E731
                      if w.get("rank") == k and w.get("outcome") == "done"]
    for rank, who in ((20, "root"), (21, "nobody")):
        w = wait_for(lambda: done(rank), 30)
        check("rank %d (%s in a container) collects the window %d..%d, done" % (rank, who, s, s + 2),
              w and w[0].get("start_step") == s and w[0].get("stop_step") == s + 2, w or ctl("windows", "--json"))


def framework_objects():
    return {n for n in os.listdir("/dev/shm") if n.startswith("DynamicProfile")}


def main():
    before = framework_objects()
    try:
        if os.path.isdir(TORCH_NPU):
            torch_npu_first()
        else:
            print("skip torch_npu: %s is absent" % TORCH_NPU)
        if not status():
            systemctl("start", "npuprofd.service")
            wait_for(status, 30)
        if os.path.isdir(os.path.join(HERE, "..", "..", "..", "shared", "testdata", "frameworks", "mindspore")):
            mindspore("root")
            mindspore("nobody", user="nobody")
            mindspore("root in a container", wrap=CONTAINER)
            nobody = pwd.getpwnam("nobody")
            mindspore("nobody in a container", user="nobody", wrap=CONTAINER + [
                "setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"])
        else:
            print("skip mindspore: the framework's code is absent")
        ranks_in_containers()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        # A job killed here leaves its object (the next MindSpore job would refuse it); the
        # daemon removes its own as it stops.
        for name in framework_objects() - before:
            if os.stat("/dev/shm/" + name).st_uid != pwd.getpwnam("npuprof").pw_uid:
                os.unlink("/dev/shm/" + name)
    print("jobs: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
