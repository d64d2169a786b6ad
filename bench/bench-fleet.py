#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""npuprofctl fleet over 1,000 nodes' records, against reading the same files with cat.

    python3 bench/bench-fleet.py [BUILD_DIR]

A real npuprofd keeps its record in a private fleet directory; that record, as the daemon
wrote it, is copied under 1,000 node names (node name and write time changed), which
`npuprofctl fleet` must read as 1,000 agreeing nodes. Figures are medians over rounds, the
two commands interleaved so that a slower moment of the machine falls on each alike: the
whole command (start, read and judge every record, print), as text and as --json, and
`cat` of the same 1,000 files (start, read, write to /dev/null) as the floor of what
reading them costs. Goal: fleet under 100 ms.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(os.path.dirname(HERE), "build")
NODES, ROUNDS = 1000, 21


def real_record(tmp):
    """The record a real npuprofd writes of its node, as parsed JSON."""
    conf = os.path.join(tmp, "profiler_config.json")
    with open(conf, "w") as f:
        f.write('{ "start_step": 1000, "steps": 5 }\n')
    src = os.path.join(tmp, "src")
    os.mkdir(src)
    d = subprocess.Popen([os.path.join(BUILD, "npuprofd"), "--config", conf, "--shm-name",
                          "npfbench-fleet-%d" % os.getpid(), "--socket", os.path.join(tmp, "sock"),
                          "--output-root", tmp, "--analyze-jobs", "0", "--fleet-dir", src,
                          "--node-name", "template", "--log", "stderr"], stderr=subprocess.DEVNULL)
    path = os.path.join(src, "template.json")
    try:
        for _ in range(500):
            try:
                with open(path) as f:
                    r = json.load(f)
                if r["in_force"]["generation"] > 0:
                    return r
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        sys.exit("bench-fleet: npuprofd wrote no record")
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait()


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, p.returncode


def main():
    tmp = tempfile.mkdtemp(prefix="npfbench-fleet.")
    try:
        record = real_record(tmp)
        fleet = os.path.join(tmp, "fleet")
        os.mkdir(fleet)
        files = []
        for i in range(NODES):
            record["node"] = "node-%04d" % i
            record["written_unix_ms"] = int(time.time() * 1000)
            files.append(os.path.join(fleet, record["node"] + ".json"))
            with open(files[-1], "w") as f:
                json.dump(record, f, indent=1)
        size = sum(os.path.getsize(f) for f in files)
        ctl = os.path.join(BUILD, "npuprofctl")
        out = subprocess.run([ctl, "fleet", "--fleet-dir", fleet, "--json"], capture_output=True, text=True)
        judged = json.loads(out.stdout)
        if out.returncode != 0 or len(judged["nodes"]) != NODES or judged["unreadable"]:
            sys.exit("bench-fleet: fleet did not read %d agreeing nodes (exit %d)" % (NODES, out.returncode))
        text, js, cat = [], [], []
        for _ in range(ROUNDS):
            text.append(timed([ctl, "fleet", "--fleet-dir", fleet])[0])
            js.append(timed([ctl, "fleet", "--fleet-dir", fleet, "--json"])[0])
            cat.append(timed(["cat"] + files)[0])
        t, j, c = (statistics.median(x) * 1000 for x in (text, js, cat))
        print("npuprofctl fleet over %d real records (%.0f KiB), medians of %d rounds:" % (NODES, size / 1024, ROUNDS))
        print("  fleet (table)   %7.1f ms   %5.1fx cat   goal < 100 ms: %s" % (t, t / c, "met" if t < 100 else "NOT met"))
        print("  fleet --json    %7.1f ms   %5.1fx cat" % (j, j / c))
        print("  cat, same files %7.1f ms   (the floor: open and read each file once)" % c)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
