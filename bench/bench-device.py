#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench: npuprof-replay on real GPU traces, beside Holistic Trace Analysis in the same run.

    bench-device.py BUILD_DIR [HTA_SRC]

Inputs, shaped like real ones:
  - the real Kineto trace of rank 0 of a 16-GPU job (../shared/testdata/profiler_outputs/
    kineto-gpu/a100-80gb-rank0-of-16.pt.trace.json.gz: 26 MB of JSON, gzipped);
  - a large trace made of it (build/bench/kineto-big.pt.trace.json, made once): its events
    repeated with their times, steps, correlations and flow ids shifted, 220 MB of JSON.
Figures, each the median of five runs of the whole program (npuprof-replay -q -o DIR FILE:
read, analyse, write report.json, report.txt, summary.json and the charts), with the peak
resident memory of the run:
  - the real trace: seconds, beside HTA's load and analysis of the same file
    (TraceAnalysis(...) and get_temporal_breakdown() + get_comm_comp_overlap(), through
    bench/hta-baseline.py, when HTA_SRC names a checkout of facebookresearch/
    HolisticTraceAnalysis kept outside the project);
  - the large trace: MB/s of JSON and memory against the file's size, beside CPython's
    json.load() of the same file (its C decoder) when HTA is not there to compare.
Goals (the issue's): the whole analysis 10x faster than HTA loads the trace; Chrome traces
read at 300 MB/s or more; resident memory no more than the file's size.
"""
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
HTA_SRC = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "..", "shared", "testdata", "profiler_outputs", "kineto-gpu",
                    "a100-80gb-rank0-of-16.pt.trace.json.gz")
BIG = os.path.join(ROOT, "build", "bench", "kineto-big.pt.trace.json")
REPLAY = os.path.join(BUILD, "npuprof-replay")
RUNS = 5


def make_big(path, copies=10):
    """The real trace's events @copies times over, each copy after the last."""
    with gzip.open(REAL) as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    times = [e["ts"] for e in events if "ts" in e]
    span = max(times) - min(times) + 1000
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as out:
        out.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        first = True
        for i in range(copies):
            for e in events:
                if e.get("ph") == "M" and i > 0:
                    continue
                e = dict(e)
                if "ts" in e:
                    e["ts"] += i * span
                if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                    e["args"] = dict(e["args"], correlation=e["args"]["correlation"] + i * 10**7)
                if str(e.get("name", "")).startswith("ProfilerStep#"):
                    e["name"] = "ProfilerStep#%d" % (int(e["name"].split("#")[1]) + i * 5)
                if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
                    e["id"] += i * 10**7
                out.write(("" if first else ",\n") + json.dumps(e))
                first = False
        out.write("\n]}\n")
    os.rename(tmp, path)


def run_once(args):
    """Wall seconds and peak resident bytes of one run of @args. The peak is GNU time's (it
    forks the program from a small process): a child of this one would inherit this
    process's peak at its exec, which Linux keeps as the child's own."""
    with tempfile.NamedTemporaryFile("r") as rss:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (args[0], p.returncode, p.stderr[-300:]))
        return wall, int(rss.read().split()[-1]) * 1024


def replay(path):
    out = tempfile.mkdtemp(prefix="bench-device.")
    try:
        runs = [run_once([REPLAY, "-q", "-o", out, path]) for _ in range(RUNS)]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return statistics.median(w for w, _ in runs), max(r for _, r in runs)


def hta(path):
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "hta-baseline.py"), HTA_SRC, path],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("  HTA: could not run: %s" % p.stderr.strip().splitlines()[-1:])
        return None
    return json.loads(p.stdout)


def python_json(path):
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        json.load(f)
    return time.perf_counter() - t0


def main():
    print("npuprof-replay on GPU traces (whole program, median of %d runs)" % RUNS)
    if not os.access(REPLAY, os.X_OK):
        print("  %s is not built" % REPLAY)
        return 1
    if not os.path.exists(REAL):
        print("  skipped: %s is absent (the real profiler outputs)" % REAL)
        return 0
    size = len(gzip.open(REAL).read())
    wall, rss = replay(REAL)
    print("  real 16-rank Kineto trace (%.1f MB of JSON, gzipped): %.3f s, %.1f MB/s, peak RSS %.1f MB"
          % (size / 1e6, wall, size / 1e6 / wall, rss / 1e6))
    if HTA_SRC:
        h = hta(REAL)
        if h:
            print("  HTA on the same file: load %.3f s, analysis %.3f s, peak RSS %.1f MB"
                  % (h["load_s"], h["analysis_s"], h["peak_rss_bytes"] / 1e6))
            print("  whole analysis vs HTA's load: %.1fx faster (goal 10x), %.1fx less memory"
                  % (h["load_s"] / wall, h["peak_rss_bytes"] / rss))
    else:
        print("  (HTA_SRC=DIR, a checkout of facebookresearch/HolisticTraceAnalysis, adds HTA beside it)")
    if not os.path.exists(BIG):
        make_big(BIG)
    size = os.path.getsize(BIG)
    wall, rss = replay(BIG)
    print("  large trace (%.0f MB of JSON, plain): %.2f s, %.0f MB/s (goal 300), peak RSS %.0f MB = %.2f of the file "
          "(goal 1 or less)" % (size / 1e6, wall, size / 1e6 / wall, rss / 1e6, rss / size))
    base = python_json(BIG)
    print("  CPython's json.load() of the same file, reading alone: %.2f s, %.0f MB/s" % (base, size / 1e6 / base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
