#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Objects cut short under the daemon: npuprofd maps the rank table (mode 0666: any user who
may attach a rank may truncate it) and, with --legacy, the frameworks' objects (its own, 0666,
and the ones jobs make). Touching a mapping past the file's new end raises SIGBUS.

    tests/hostile/test-truncate.py BUILD_DIR

As nobody, in a private /dev/shm (a mount namespace of this test's own; root): the rank table
cut to 0 bytes while a real rank (train-loop) steps; a torch_npu object of the daemon's and a
MindSpore object a "job" made, each cut to 0 bytes before a publication writes into it. The
daemon must go on answering, say what happened in its log, give the rank table its size back,
let the cut objects go and take them again once they have their size back, and stop cleanly.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import npftest  # noqa: E402
from npftest import as_user, check, wait_for  # noqa: E402

SHM = "npftest-trunc"


def truncate_as_nobody(path):
    """os.truncate(path, 0) as nobody: any user the object's mode lets write."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import os, sys; os.truncate(sys.argv[1], 0)", path],
                       preexec_fn=as_user("nobody"), capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def main():
    if os.environ.get("NPF_TRUNC_NS") != "1":
        if os.geteuid() != 0:
            print("test-truncate: skipped: needs root (a private /dev/shm, and nobody)")
            sys.exit(77)
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), BUILD], env=dict(os.environ, NPF_TRUNC_NS="1"))
        sys.exit(r.returncode)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"]).returncode != 0:
        print("test-truncate: cannot mount a private /dev/shm")
        sys.exit(77)
    d = tempfile.mkdtemp(prefix="npftest-trunc.")
    os.chmod(d, 0o755)
    config, sock, log_path = os.path.join(d, "profiler_config.json"), os.path.join(d, "s.sock"), os.path.join(d, "log")
    env = dict(os.environ, NPUPROF_SOCKET=sock, NPUPROF_SHM=SHM)
    npftest.save_config(config, {"start_step": 100000, "steps": 2})
    hour = time.strftime("%Y%m%d%H")
    # A MindSpore job's own object, 28 bytes, made before the daemon starts.
    ms = "/dev/shm/DynamicProfileShm" + hour
    with open(ms, "wb") as f:
        f.write(b"\0" * 28)
    os.chmod(ms, 0o666)
    log = open(log_path, "w")
    daemon = subprocess.Popen([os.path.join(BUILD, "npuprofd"), "--config", config, "--shm-name", SHM, "--socket",
                               sock, "--output-root", os.path.join(d, "out"), "--poll-interval", "100", "--log",
                               "stderr", "--analyze-jobs", "0", "--legacy", "torch_npu,mindspore-packed",
                               "--shm-opener", ""], stderr=log, env=env)
    rank = None

    def status():
        r = subprocess.run([os.path.join(BUILD, "npuprofctl"), "status", "--json"], env=env, capture_output=True,
                           text=True, timeout=20)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def objects():
        s = status() or {}
        return {o["name"]: o for p in (s.get("legacy") or {}).get("publishers", []) for o in p["objects"]}

    def logged(text):
        with open(log_path) as f:
            return text in f.read()
    try:
        if not check("npuprofd starts", wait_for(status, 10)):
            return
        rank = subprocess.Popen([os.path.join(BUILD, "train-loop"), "--rank", "0", "--steps", "100000", "--step-ms",
                                 "10", "--busy", "0", "--shm-name", SHM, "--backend", "host"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        check("a rank attaches", wait_for(lambda: (status() or {}).get("ranks"), 10))
        tn = "DynamicProfileNpuShm" + hour
        check("the daemon holds its torch_npu object and the job's MindSpore object",
              wait_for(lambda: all(n in objects() and "error" not in objects()[n]
                                   for n in (tn, os.path.basename(ms))), 10), objects())

        # The rank table, cut to nothing under the sweeps.
        ranks = "/dev/shm/%s.ranks" % SHM
        size = os.stat(ranks).st_size
        ok, err = truncate_as_nobody(ranks)
        check("nobody may cut the rank table (mode 0666) to 0 bytes", ok, err)
        check("the daemon gives it its size back, and says so",
              wait_for(lambda: os.stat(ranks).st_size == size and logged("the rank table was cut short"), 10),
              (os.stat(ranks).st_size, size))
        check("the daemon goes on answering", wait_for(status, 10) is not None and daemon.poll() is None)

        # The torch_npu object (the daemon's, 0666) and the job's MindSpore object, cut before a publication.
        for name in (tn, os.path.basename(ms)):
            ok, err = truncate_as_nobody("/dev/shm/" + name)
            check("nobody cuts %s to 0 bytes" % name, ok, err)
        npftest.save_config(config, {"start_step": 100000, "steps": 3})
        check("a publication into the cut objects ends nothing: the daemon answers",
              wait_for(lambda: logged("was cut short under the daemon"), 10) and status() is not None and
              daemon.poll() is None, daemon.poll())
        check("the cut MindSpore object is let go of and not written to again (status says why)",
              wait_for(lambda: "error" in objects().get(os.path.basename(ms), {"error": 1}), 10),
              objects().get(os.path.basename(ms)))
        os.truncate(ms, 28)
        check("given its size back, it is taken again",
              wait_for(lambda: "error" not in objects().get(os.path.basename(ms), {"error": 1}), 10),
              objects().get(os.path.basename(ms)))
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(15)
        with open(log_path) as f:
            text = f.read()
        check("the daemon stops cleanly, with no sanitizer report", rc == 0 and "Sanitizer" not in text and
              "runtime error" not in text, (rc, text[-1500:]))
    finally:
        for p in (rank, daemon):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        log.close()
    npftest.summary("truncate")


if __name__ == "__main__":
    main()
