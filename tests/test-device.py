#!/usr/bin/env python3
"""What the accelerators did: npuprof-replay on real NPU and GPU profiler output.

    tests/test-device.py BUILD_DIR

The real captures of ../shared/testdata/profiler_outputs (skipped, and said so, where the
folder is absent) are copied into a temporary directory, the frameworks' own answers are
taken out of the copy, and the real program must give them back from the trace or the db:

- torch_npu's text export: every column of step_trace_time.csv (torch_npu's own per-step
  breakdown, computed by torch_npu from msprof's overlap analysis) within 1%, from
  trace_view.json, with step_trace_time.csv removed from the copy;
- torch_npu's db export: every column of analysis.db's StepTraceTime within 1%, from
  ascend_pytorch_profiler_N.db, with analysis.db removed;
- a window directory holding a *_ascend_pt a few levels down is found; one whose files are
  still changing (torch_npu's parser running) is said to be parsing and not read, and read
  with --wait once it settles; one with raw data only names the command that parses it;
- Kineto GPU traces (.json.gz, read directly): the temporal breakdown and the
  communication/computation overlap within one percentage point of Holistic Trace
  Analysis's on the same file (the figures below, with the command that made them);
- hostile files: a truncated trace, a wrong-typed step_trace_time.csv, a damaged db: a clear
  error naming the file, and the rest of the report.

Ends with "device: N passed, N failed".
"""
import csv
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npftest  # noqa: E402
from npftest import check  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
REPLAY = os.path.join(BUILD, "npuprof-replay")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "testdata", "profiler_outputs")
ALEXNET = os.path.join(DATA, "torch_npu-2rank-alexnet")
KINETO = os.path.join(DATA, "kineto-gpu")
ENV = dict(os.environ,
           ASAN_OPTIONS="exitcode=86:" + os.environ.get("ASAN_OPTIONS", ""),
           UBSAN_OPTIONS="halt_on_error=1:exitcode=87:" + os.environ.get("UBSAN_OPTIONS", ""))

# Holistic Trace Analysis (facebookresearch/HolisticTraceAnalysis at f4d0062c, on Debian's
# pandas 1.5.3), made by:
#   /usr/bin/python3 bench/hta-baseline.py HTA_SRC ../shared/testdata/profiler_outputs/kineto-gpu/FILE
# which runs TraceAnalysis(trace_dir=...).get_temporal_breakdown() and get_comm_comp_overlap().
HTA = {
    "a100-rank0-of-2.pt.trace.json.gz":
        {"rank": 0, "idle_pct": 77.78, "compute_pct": 17.26, "non_compute_pct": 4.97, "overlap_pct": 14.31},
    "a100-80gb-rank0-of-16.pt.trace.json.gz":
        {"rank": 0, "idle_pct": 69.44, "compute_pct": 14.15, "non_compute_pct": 16.41, "overlap_pct": 1.37},
}

# step_trace_time.csv's columns and report.json's names for them.
COLUMNS = {
    "Computing": "computing_us", "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
    "Stage": "stage_us", "Bubble": "bubble_us", "Preparing": "preparing_us",
}
DB_COLUMNS = {
    "computing": "computing_us", "communication_not_overlapped": "communication_not_overlapped_us",
    "overlapped": "overlapped_us", "communication": "communication_us", "free": "free_us",
    "stage": "stage_us", "bubble": "bubble_us", "preparing": "preparing_us",
}

tmp = tempfile.mkdtemp(prefix="test-device.")


def run(*args):
    p = subprocess.run([REPLAY, "-q", *args], capture_output=True, text=True, env=ENV)
    return p


def report(outdir):
    try:
        with open(os.path.join(outdir, "report.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def close(got, want):
    """Within 1%, or 1 us where the figure is near zero."""
    return abs(got - want) <= max(0.01 * abs(want), 1.0)


def compare(what, got_steps, want_rows):
    """Each step of @want_rows ({step: {field: us}}) against report.json's steps."""
    got = {s["step"]: s for s in got_steps}
    bad = []
    for step, fields in want_rows.items():
        if step not in got:
            bad.append("step %s missing (have %s)" % (step, sorted(got)))
            continue
        for k, v in fields.items():
            if not close(got[step][k], v):
                bad.append("step %s %s: %.3f, torch_npu says %.3f" % (step, k, got[step][k], v))
    check("%s: %d steps, every column within 1%% of torch_npu's" % (what, len(want_rows)), not bad and want_rows,
          "\n".join(bad) or "no rows")


def csv_rows(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[int(r["Step"])] = {COLUMNS[k]: float(v.strip()) for k, v in r.items() if k in COLUMNS}
    return rows


def test_text_export():
    for level in ("level0", "level1", "level2"):
        for rank in (0, 1):
            src = os.path.join(ALEXNET, "text", level, "rank%d_ascend_pt" % rank)
            win = os.path.join(tmp, "text-%s-%d" % (level, rank), "job", "rank%d_ascend_pt" % rank)
            shutil.copytree(src, win)
            os.chmod(os.path.join(win, "ASCEND_PROFILER_OUTPUT"), 0o755)
            want = csv_rows(os.path.join(win, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"))
            os.unlink(os.path.join(win, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"))
            settle(win)
            out = os.path.join(tmp, "text-%s-rank%d-out" % (level, rank))
            p = run("-o", out, os.path.dirname(os.path.dirname(win)))
            rep = report(out)
            what = "text %s rank %d (trace_view.json)" % (level, rank)
            if not check("%s: exit 0 with report.json" % what, p.returncode == 0 and rep, p.stderr):
                continue
            ranks = rep["device"]["ranks"]
            if not check("%s: one rank, rank %d, torch_npu" % (what, rank),
                         len(ranks) == 1 and ranks[0]["rank"] == rank and ranks[0]["framework"] == "torch_npu",
                         json.dumps(ranks)[:400]):
                continue
            compare(what, ranks[0]["steps"], want)
            try:
                bars = [e for e in ET.parse(os.path.join(out, "steps.svg")).getroot().iter()
                        if (e.get("class") or "").startswith("bar")]
            except (OSError, ET.ParseError) as e:
                bars = "steps.svg: %s" % e
            check("%s: steps.svg, well-formed, one bar for its one step" % what, isinstance(bars, list) and len(bars) == 1,
                  bars)
            if level == "level1" and rank == 0:
                txt = open(os.path.join(out, "report.txt")).read()
                check("report.txt leads with the answer: communication not overlapped, its share",
                      "step 50: 75% of the device's step is communication not overlapped" in txt.split("\n\nRank")[1],
                      txt[:600])
                # The HCCL ops' bytes: their elements times their type's size, from the trace's args.
                with open(os.path.join(win, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
                    events = json.load(f)
                want_bytes = sum(int(e["args"]["count"]) * {"FP32": 4, "FP16": 2, "BFP16": 2}[e["args"]["data_type"]]
                                 for e in events if str(e.get("name", "")).startswith("hcom_") and e.get("ph") == "X"
                                 and "count" in e.get("args", {}))
                coll = ranks[0]["collectives"]
                check("level1: the allReduce collective's bytes are its ops' count x type size (%d)" % want_bytes,
                      len(coll) == 1 and coll[0]["bytes"] == want_bytes and coll[0]["count"] == 4, coll)
                links = {(l["link"]) for l in ranks[0]["links"]}
                check("level1: communication.json's links (HCCS) read", "HCCS" in links, ranks[0]["links"])


def test_db_export():
    for level in ("level0", "level1", "level2"):
        for rank in (0, 1):
            src = os.path.join(ALEXNET, "db", level, "rank%d_ascend_pt" % rank)
            win = os.path.join(tmp, "db-%s" % level, "rank%d_ascend_pt" % rank)
            shutil.copytree(src, win)
            os.chmod(os.path.join(win, "ASCEND_PROFILER_OUTPUT"), 0o755)
            analysis = os.path.join(win, "ASCEND_PROFILER_OUTPUT", "analysis.db")
            con = sqlite3.connect(analysis)
            want = {}
            for row in con.execute("select step, %s from StepTraceTime" % ", ".join(DB_COLUMNS)):
                want[int(row[0])] = {v: float(x) for v, x in zip(DB_COLUMNS.values(), row[1:])}
            con.close()
            os.unlink(analysis)
            settle(win)
            out = os.path.join(tmp, "db-%s-rank%d-out" % (level, rank))
            p = run("-o", out, win)
            rep = report(out)
            what = "db %s rank %d (ascend_pytorch_profiler_%d.db)" % (level, rank, rank)
            if check("%s: exit 0 with report.json" % what, p.returncode == 0 and rep, p.stderr):
                ranks = rep["device"]["ranks"]
                if check("%s: one rank, rank %d" % (what, rank), len(ranks) == 1 and ranks[0]["rank"] == rank,
                         json.dumps(ranks)[:400]):
                    compare(what, ranks[0]["steps"], want)


def settle(path, age=60):
    """Makes everything below @path look written @age seconds ago."""
    then = time.time() - age
    for d, dirs, files in os.walk(path):
        for n in dirs + files:
            os.utime(os.path.join(d, n), (then, then))
    os.utime(path, (then, then))


def test_mindspore_layout():
    """MindSpore's NAME_ascend_ms has torch_npu's layout: read alike, said to be MindSpore's."""
    src = os.path.join(ALEXNET, "text", "level1", "rank1_ascend_pt")
    win = os.path.join(tmp, "ms", "rank1_start1_stop2", "host_123_ascend_ms")
    shutil.copytree(src, win)
    os.chmod(os.path.join(win, "ASCEND_PROFILER_OUTPUT"), 0o755)
    os.unlink(os.path.join(win, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"))
    settle(win)
    out = os.path.join(tmp, "ms-out")
    p = run("-o", out, os.path.dirname(win))
    rep = report(out)
    if check("MindSpore's *_ascend_ms: exit 0", p.returncode == 0 and rep, p.stderr):
        ranks = rep["device"]["ranks"]
        check("MindSpore's *_ascend_ms: rank 1, framework mindspore, step 50 read",
              len(ranks) == 1 and ranks[0]["rank"] == 1 and ranks[0]["framework"] == "mindspore" and
              [s["step"] for s in ranks[0]["steps"]] == [50], json.dumps(ranks)[:300])
        summary = json.load(open(os.path.join(out, "summary.json")))
        check("summary.json: the rank's answer, one line", len(summary["answers"]) == 1 and
              summary["answers"][0].startswith("rank 1: step 50: ") and "of the device's step is" in summary["answers"][0],
              summary)


def test_parsing_and_raw():
    src = os.path.join(ALEXNET, "text", "level0", "rank0_ascend_pt")
    win = os.path.join(tmp, "parsing", "rank0_start5_stop6", "w_ascend_pt")
    shutil.copytree(src, win, copy_function=shutil.copy)       # written now
    os.chmod(os.path.join(win, "ASCEND_PROFILER_OUTPUT"), 0o755)
    # Just written: the parser may still be at it.
    out = os.path.join(tmp, "parsing-out")
    p = run("-o", out, os.path.dirname(win))
    rep = report(out)
    if check("a framework output changed a moment ago: report written", p.returncode == 0 and rep, p.stderr):
        na = rep["device"]["not_analysed"]
        check("... and it is not read but said to be parsing", not rep["device"]["ranks"] and len(na) == 1 and
              "still writing" in na[0]["why"], json.dumps(rep["device"]))
    # --wait: read once it has been left alone for a few seconds.
    t0 = time.time()
    p = run("--wait", "30", "-o", out, os.path.dirname(win))
    rep = report(out)
    check("--wait: the output is read once it settles", p.returncode == 0 and rep and
          len(rep["device"]["ranks"]) == 1 and time.time() - t0 < 20, p.stderr)
    # Raw data only: the analysis was off.
    raw = os.path.join(tmp, "raw", "job_ascend_pt")
    os.makedirs(os.path.join(raw, "PROF_000001_20250101", "device_0", "data"))
    with open(os.path.join(raw, "PROF_000001_20250101", "device_0", "data", "ts_track.data.0.slice_0"), "wb") as f:
        f.write(b"\0" * 64)
    settle(raw)
    out = os.path.join(tmp, "raw-out")
    p = run("-o", out, os.path.dirname(raw))
    rep = report(out)
    if check("raw data only: a report", p.returncode == 0 and rep, p.stderr):
        na = rep["device"]["not_analysed"]
        check("... that names torch_npu's offline analysis", len(na) == 1 and "only raw profiling data" in na[0]["why"]
              and "torch_npu.profiler.profiler import analyse" in na[0]["why"], json.dumps(na))


def test_hostile_rest():
    """One window holding a good rank beside a broken trace, a wrong-typed and a huge
    step_trace_time.csv (70,000 steps) and a damaged db: each named in errors, the good rank
    reported."""
    src = os.path.join(ALEXNET, "text", "level1", "rank0_ascend_pt")
    root = os.path.join(tmp, "rest", "rank0_start1_stop2")
    good = os.path.join(root, "good_ascend_pt")
    shutil.copytree(src, good)
    os.chmod(os.path.join(good, "ASCEND_PROFILER_OUTPUT"), 0o755)
    bad = {}
    for name in ("json", "csv", "huge", "db"):
        d = os.path.join(root, "bad%s_ascend_pt" % name, "ASCEND_PROFILER_OUTPUT")
        os.makedirs(d)
        bad[name] = d
    with open(os.path.join(bad["json"], "trace_view.json"), "w") as f:
        f.write('[{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": ]')
    with open(os.path.join(bad["csv"], "step_trace_time.csv"), "w") as f:
        f.write("Step,Computing,Free\n3,[1, 2],0\n")
    with open(os.path.join(bad["huge"], "step_trace_time.csv"), "w") as f:
        f.write("Step,Computing,Free\n")
        f.write("".join("%d,2.0,3.0\n" % i for i in range(70000)))   # over the 65,536 steps a window may have
    with open(os.path.join(bad["db"], "ascend_pytorch_profiler_0.db"), "wb") as f:
        f.write(b"SQLite format 3\0" + b"\xff" * 8192)
    settle(os.path.dirname(root))
    out = os.path.join(tmp, "rest-out")
    p = run("-o", out, root)
    rep = report(out)
    if not check("hostile beside good: exit 1, and a report", p.returncode == 1 and rep, p.stderr):
        return
    errs = {os.path.relpath(e["file"], root).split("/")[0]: e["error"] for e in rep["errors"]}
    check("hostile beside good: the good rank reported, its step 50 from its trace",
          [r["rank"] for r in rep["device"]["ranks"]] == [0] and rep["device"]["ranks"][0]["steps"][0]["step"] == 50,
          json.dumps(rep["device"]["ranks"])[:300])
    check("hostile beside good: the broken trace named with its line and column",
          "line 1, column" in errs.get("badjson_ascend_pt", ""), errs)
    check("hostile beside good: the wrong-typed CSV named with its line", "line 2" in errs.get("badcsv_ascend_pt", ""),
          errs)
    check("hostile beside good: the huge CSV refused by its number of steps",
          "more than 65536 steps" in errs.get("badhuge_ascend_pt", ""), errs)
    check("hostile beside good: the damaged db named", "ascend_pytorch_profiler_0.db" in errs.get("baddb_ascend_pt", ""),
          errs)


def test_kineto():
    for name, want in HTA.items():
        path = os.path.join(KINETO, name)
        out = os.path.join(tmp, name + "-out")
        p = run("-o", out, path)
        rep = report(out)
        if not check("%s: read gzipped, exit 0" % name, p.returncode == 0 and rep, p.stderr):
            continue
        ranks = rep["device"]["ranks"]
        if not check("%s: one rank, rank %d from distributedInfo, torch" % (name, want["rank"]),
                     len(ranks) == 1 and ranks[0]["rank"] == want["rank"] and ranks[0]["framework"] == "torch",
                     json.dumps(ranks)[:300]):
            continue
        t = ranks[0]["temporal"]
        got = {"idle_pct": t["idle_pct"], "compute_pct": t["compute_pct"], "non_compute_pct": t["non_compute_pct"],
               "overlap_pct": ranks[0]["comm_comp_overlap_pct"]}
        bad = ["%s: %.2f, HTA says %.2f" % (k, got[k], want[k]) for k in got if abs(got[k] - want[k]) > 1.0]
        check("%s: temporal breakdown and overlap within 1 point of HTA's" % name, not bad, "\n".join(bad))
        types = {k["type"] for k in ranks[0]["kernels"]}
        check("%s: kernels by kind (compute, communication, memory)" % name,
              {"compute", "communication", "memory"} <= types, types)
        nccl = [c for c in ranks[0]["collectives"] if c["name"].startswith("ncclKernel") or "nccl" in c["name"]]
        check("%s: NCCL collectives listed with their count and time" % name,
              nccl and all(c["count"] > 0 and c["total_us"] > 0 for c in nccl), ranks[0]["collectives"])


def test_hostile():
    # A trace cut in the middle of its events: read up to the cut.
    src = os.path.join(ALEXNET, "text", "level1", "rank0_ascend_pt")
    win = os.path.join(tmp, "cut", "rank0_ascend_pt")
    shutil.copytree(src, win)
    out_dir = os.path.join(win, "ASCEND_PROFILER_OUTPUT")
    os.chmod(out_dir, 0o755)
    tv = os.path.join(out_dir, "trace_view.json")
    data = open(tv, "rb").read()
    os.chmod(tv, 0o644)
    with open(tv, "wb") as f:
        f.write(data[:len(data) // 2])
    settle(win)
    out = os.path.join(tmp, "cut-out")
    p = run("-o", out, win)
    rep = report(out)
    check("a trace_view.json cut in half: read up to the cut, a report", p.returncode == 0 and rep and
          len(rep["device"]["ranks"]) == 1, p.stderr)
    # Not JSON at all: a clear error naming the file, and the report of the rest.
    with open(tv, "wb") as f:
        f.write(b'[{"ph": "X", "name": "a", "ts": 1, "dur": 2,, }]')
    settle(win)
    p = run("-o", out, os.path.dirname(win))
    rep = report(out)
    check("broken JSON: exit 1, the file and the line and column named", p.returncode == 1 and
          "trace_view.json" in p.stderr and "line 1" in p.stderr, p.stderr)
    # step_trace_time.csv alone, with a value that is no number.
    only = os.path.join(tmp, "csv", "rank3_ascend_pt", "ASCEND_PROFILER_OUTPUT")
    os.makedirs(only)
    with open(os.path.join(only, "step_trace_time.csv"), "w") as f:
        f.write("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble\n"
                "7,12.5,abc,0,0,0,0,0\n")
    settle(os.path.dirname(only))
    out = os.path.join(tmp, "csv-out")
    p = run("-o", out, os.path.dirname(os.path.dirname(only)))
    check("a step_trace_time.csv with a word for a number: the line and column named",
          p.returncode == 1 and "line 2" in p.stderr and "abc" in p.stderr, p.stderr)
    # A kernel's name longer than a name is kept, with a character across the cut.
    name = "a" * 1021 + "\u00e9\u4e2d" + "b" * 10
    path = os.path.join(tmp, "long.pt.trace.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"correlation": 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
             "args": {"correlation": 1}}]}, f)
    out = os.path.join(tmp, "long-out")
    p = run("-o", out, path)
    rep = report(out)
    check("a kernel name of 1,050 bytes: shortened at a character's start, still UTF-8",
          p.returncode == 0 and rep and rep["device"]["ranks"][0]["kernels"][0]["name"] == name[:1022], p.stderr)
    # More steps than a chart holds: every step in report.json, the chart says it shows the first.
    path = os.path.join(tmp, "many.pt.trace.json")
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
        f.write(",".join('{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%d,"dur":9},'
                         '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":1,'
                         '"args":{"correlation":%d}},'
                         '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":5,"args":{"correlation":%d}}'
                         % (i, 10 * i, 10 * i + 1, i, 10 * i + 2, i) for i in range(70000)))
        f.write("]}")
    out = os.path.join(tmp, "many-out")
    p = run("-o", out, path)
    rep = report(out)
    try:
        svg = open(os.path.join(out, "steps.svg")).read()
    except OSError:
        svg = ""
    check("a trace of 70,000 steps: all in report.json, the chart of the first 65,536 says so",
          p.returncode == 0 and rep and len(rep["device"]["ranks"][0]["steps"]) == 70000 and
          "the first 65536 of its 70000 steps" in svg, p.stderr)
    # A gzipped trace cut short, and gzip that is not: the file named once, and why.
    not_deflate = b"\x1f\x8b\x08\0\0\0\0\0\0\3" + b"\xff" * 64     # a gzip header, then no valid block
    for what, cut in (("cut short", lambda z: z[:len(z) // 2]), ("not gzip", lambda z: not_deflate)):
        path = os.path.join(tmp, "bad-%s.pt.trace.json.gz" % what.replace(" ", "-"))
        with open(os.path.join(KINETO, "a100-rank0-of-2.pt.trace.json.gz"), "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(cut(data))
        p = run("-o", os.path.join(tmp, "badgz-out"), path)
        why = "the gzip stream ends early" if what == "cut short" else "not a valid gzip stream"
        check("a gzipped trace %s: exit 1, \"%s\", the file named once" % (what, why),
              p.returncode == 1 and why in p.stderr and p.stderr.count(os.path.basename(path)) == 1, p.stderr)
    # A db that is not SQLite.
    bad = os.path.join(tmp, "baddb", "rank0_ascend_pt", "ASCEND_PROFILER_OUTPUT")
    os.makedirs(bad)
    with open(os.path.join(bad, "ascend_pytorch_profiler_0.db"), "wb") as f:
        f.write(b"SQLite format 3\0" + os.urandom(4096))
    settle(os.path.dirname(bad))
    p = run("-o", os.path.join(tmp, "baddb-out"), os.path.dirname(os.path.dirname(bad)))
    check("a damaged db: exit 1, the file named", p.returncode == 1 and "ascend_pytorch_profiler_0.db" in p.stderr,
          p.stderr)


def write_rank(root, rank, rows):
    """A rank's torch_npu output holding only step_trace_time.csv: @rows is [(step, {column: us})]."""
    d = os.path.join(root, "rank_%d_ascend_pt" % rank)
    os.makedirs(os.path.join(d, "ASCEND_PROFILER_OUTPUT"))
    cols = list(COLUMNS)
    with open(os.path.join(d, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"), "w") as f:
        f.write(",".join(["Step"] + cols) + "\n")
        for step, v in rows:
            f.write(",".join([str(step)] + [repr(float(v.get(c, 0))) for c in cols]) + "\n")
    with open(os.path.join(d, "profiler_info_%d.json" % rank), "w") as f:
        json.dump({"rank_id": rank}, f)
    settle(d)


def sync_cluster(root, compute, free, prepare=None, stages=None, bubble=None, comm=30000.0):
    """Ranks of synchronous training, three steps each: every step lasts as long as the
    slowest rank's computing and free time plus @comm, and each rank waits in communication
    (not overlapped) for the rest. Times in us; @stages are written as msprof-analyze's
    communication_group.json would give them."""
    n = len(compute)
    longest = max(c + f + (bubble[r] if bubble else 0) for r, (c, f) in enumerate(zip(compute, free)))
    for r in range(n):
        b = bubble[r] if bubble else 0.0
        wait = longest + comm - compute[r] - free[r] - b
        rows = []
        for step in (10, 11, 12):
            rows.append((step, {"Computing": compute[r], "Free": free[r], "Bubble": b,
                                "Communication(Not Overlapped)": wait + b, "Communication": wait + b + 1000,
                                "Overlapped": 1000, "Stage": compute[r] + free[r] + wait,
                                "Preparing": prepare[r] if prepare else 5000}))
        write_rank(root, r, rows)
    if stages:
        with open(os.path.join(root, "communication_group.json"), "w") as f:
            json.dump({"collective": [], "p2p": stages}, f)


def cluster(root):
    out = os.path.join(root, "cluster")
    p = subprocess.run([REPLAY, "cluster", "-q", root], capture_output=True, text=True, env=ENV)
    rep = report(out)
    return p, rep


def test_cluster_msprof():
    """msprof-analyze's cluster_step_trace_time.csv of a 16-rank job in 2 pipeline stages:
    per-rank step_trace_time.csv files built from its rank rows, its communication_group.json
    beside them; the stage rows must be msprof-analyze's."""
    src = os.path.join(DATA, "msprof-analyze-cluster16", "cluster_analysis_output")
    root = os.path.join(tmp, "msprof16")
    os.makedirs(root)
    with open(os.path.join(src, "cluster_step_trace_time.csv"), newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    stage_rows = {}
    for r in rows[1:]:
        if r[1] == "rank":
            write_rank(root, int(r[2]), [(int(r[0]), dict(zip(head[3:], map(float, r[3:]))))])
        else:
            stage_rows[r[2]] = dict(zip(head[3:], map(float, r[3:])))
    shutil.copy(os.path.join(src, "communication_group.json"), root)
    p, rep = cluster(root)
    if not check("msprof16: cluster exit 0 with report.json", p.returncode == 0 and rep, p.stderr):
        return
    got = rep["device"]["stages"]
    bad = []
    for st in got:
        key = "(%s)" % ", ".join(str(x) for x in st["ranks"])
        want = stage_rows.get(key)
        if want is None:
            bad.append("stage %s not msprof-analyze's (%s)" % (key, list(stage_rows)))
            continue
        for col, name in COLUMNS.items():
            if col in want and abs(st["steps"][0][name] - want[col]) > 1e-6 * max(1.0, abs(want[col])):
                bad.append("%s %s: %r, msprof-analyze says %r" % (key, col, st["steps"][0][name], want[col]))
    check("msprof16: both stages and every column of their rows equal msprof-analyze's",
          len(got) == 2 and not bad, "\n".join(bad) or got)


def test_cluster_slow():
    base = [100000.0] * 8
    free = [20000.0] * 8
    # Computing: rank 3 computes 1.7x its peers; the others wait for it.
    root = os.path.join(tmp, "slow-computing")
    sync_cluster(root, [170000.0 if r == 3 else c for r, c in enumerate(base)], free)
    p, rep = cluster(root)
    if check("slow computing: exit 0", p.returncode == 0 and rep, p.stderr):
        slow = rep["device"]["slow_ranks"]
        check("slow computing: rank 3 found, cause computing, 7 ranks wait for it 70 ms a step",
              len(slow) == 1 and slow[0]["rank"] == 3 and slow[0]["cause"] == "computing" and
              len(slow[0]["waiting_ranks"]) == 7 and abs(slow[0]["others_wait_us"] - 70000) < 1, slow)
        try:
            svg = ET.parse(os.path.join(root, "cluster", "steps.svg")).getroot()
            slow_bars = [e.get("id") for e in svg.iter() if (e.get("class") or "") == "bar slow"]
        except (OSError, ET.ParseError) as e:
            slow_bars = "steps.svg: %s" % e
        check("slow computing: steps.svg, well-formed, marks one bar slow (rank 3's, the fourth)",
              slow_bars == ["bar-3"], slow_bars)
        txt = open(os.path.join(root, "cluster", "report.txt")).read()
        check("slow computing: report.txt leads with it", txt.startswith("\nDevice: rank 3 computes 1.7x its stage peers"),
              txt[:300])
        # Named directories only, each one rank's: those ranks and no other.
        out = os.path.join(tmp, "named-out")
        p = subprocess.run([REPLAY, "cluster", "-q", "-o", out, os.path.join(root, "rank_3_ascend_pt"),
                            os.path.join(root, "rank_0_ascend_pt")], capture_output=True, text=True, env=ENV)
        rep = report(out)
        check("cluster DIR DIR -o OUT: the two ranks named, no other",
              p.returncode == 0 and rep and sorted(r["rank"] for r in rep["device"]["ranks"]) == [0, 3], p.stderr)
        p = subprocess.run([REPLAY, "cluster", "-q", root, root], capture_output=True, text=True, env=ENV)
        check("cluster DIR DIR without -o: a usage error", p.returncode == 2 and "need -o" in p.stderr, p.stderr)
    # Free: rank 5 leaves its device idle (a host-bound rank).
    root = os.path.join(tmp, "slow-free")
    sync_cluster(root, base, [80000.0 if r == 5 else f for r, f in enumerate(free)])
    p, rep = cluster(root)
    if check("slow free: exit 0", p.returncode == 0 and rep, p.stderr):
        slow = rep["device"]["slow_ranks"]
        check("slow free: rank 5 found, cause free", len(slow) == 1 and slow[0]["rank"] == 5 and
              slow[0]["cause"] == "free", slow)
    # A pipeline: stage 1 (ranks 4-7) computes 400 ms a step, stage 0 231 ms and waits in receives.
    root = os.path.join(tmp, "slow-stage")
    compute = [231000.0] * 4 + [400000.0, 398000.0, 401000.0, 399000.0]
    bubble = [169000.0] * 4 + [0.0] * 4
    sync_cluster(root, compute, [10000.0] * 8, stages=[[0, 1, 2, 3], [4, 5, 6, 7]], bubble=bubble)
    p, rep = cluster(root)
    if check("slow stage: exit 0", p.returncode == 0 and rep, p.stderr):
        slow = rep["device"]["slow_ranks"]
        check("slow stage: the second stage's worst rank (6), cause computing, scope stage; no rank of stage 0",
              len(slow) == 1 and slow[0]["rank"] == 6 and slow[0]["cause"] == "computing" and
              slow[0]["scope"] == "stage" and slow[0]["stage"] == 1, slow)
        st = rep["device"]["stages"]
        check("slow stage: two stages with their worst ranks", [s["ranks"] for s in st] == [[0, 1, 2, 3], [4, 5, 6, 7]]
              and st[1]["worst_rank"] == 6, st)
    # The same pipeline, its stages from torch_npu's profiler_metadata.json (parallel_group_info).
    root = os.path.join(tmp, "slow-stage-meta")
    sync_cluster(root, compute, [10000.0] * 8, bubble=bubble)
    for r in range(8):
        groups = {
            "pp_channel_%d" % (r % 4): {"group_name": "pp", "group_rank": r // 4, "global_ranks": [r % 4, r % 4 + 4]},
            "dp_channel_%d" % (r // 4): {"group_name": "dp", "group_rank": r % 4,
                                         "global_ranks": list(range(4 * (r // 4), 4 * (r // 4) + 4))},
        }
        d = os.path.join(root, "rank_%d_ascend_pt" % r)
        with open(os.path.join(d, "profiler_metadata.json"), "w") as f:
            json.dump({"ENV_VARIABLES": {}, "parallel_group_info": groups}, f)
        settle(d)
    p, rep = cluster(root)
    if check("stages from parallel_group_info: exit 0", p.returncode == 0 and rep, p.stderr):
        st = rep["device"]["stages"]
        slow = rep["device"]["slow_ranks"]
        check("stages from parallel_group_info: the pp groups' ranks make the stages, stage 1's rank 6 is slow",
              [s["ranks"] for s in st] == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(slow) == 1 and slow[0]["rank"] == 6,
              json.dumps({"stages": [s["ranks"] for s in st], "slow": slow}))
    # More computing, but not waited for: rank 2 computes 30 ms more than its peers, hidden
    # under communication that is as long not overlapped on every rank. Nobody waits for it:
    # no slow rank (a rule on computing alone would blame it).
    root = os.path.join(tmp, "busy-not-slow")
    for r in range(8):
        c = 130000.0 if r == 2 else 100000.0
        write_rank(root, r, [(step, {"Computing": c, "Free": 20000.0, "Communication(Not Overlapped)": 60000.0,
                                     "Communication": 60000.0 + (c - 100000.0) + 1000, "Overlapped": (c - 100000.0) + 1000,
                                     "Stage": c + 80000.0, "Bubble": 0, "Preparing": 5000})
                             for step in (10, 11, 12)])
    p, rep = cluster(root)
    if check("busy but not waited for: exit 0", p.returncode == 0 and rep, p.stderr):
        check("busy but not waited for: rank 2 is not called slow", rep["device"]["slow_ranks"] == [],
              rep["device"]["slow_ranks"])
    # None: every rank within 2% of the others.
    root = os.path.join(tmp, "clean")
    sync_cluster(root, [100000.0 * (1 + 0.02 * ((r % 3) - 1)) for r in range(8)],
                 [20000.0 * (1 + 0.02 * ((r % 2) * 2 - 1)) for r in range(8)])
    p, rep = cluster(root)
    if check("clean: exit 0", p.returncode == 0 and rep, p.stderr):
        check("clean: no slow rank, and it says so", rep["device"]["slow_ranks"] == [] and
              rep["device"]["answer"].startswith("no slow rank"), rep["device"]["answer"])


def test_slow_link():
    """Four ranks of the real capture, rank 2's HCCS transfers taking twice as long."""
    src = os.path.join(ALEXNET, "text", "level1", "rank0_ascend_pt")
    root = os.path.join(tmp, "links")
    for r in range(4):
        d = os.path.join(root, "rank_%d_ascend_pt" % r)
        shutil.copytree(src, d)
        os.chmod(d, 0o755)
        os.chmod(os.path.join(d, "ASCEND_PROFILER_OUTPUT"), 0o755)
        os.unlink(os.path.join(d, "profiler_info_0.json"))
        with open(os.path.join(d, "profiler_info_%d.json" % r), "w") as f:
            json.dump({"rank_id": r}, f)
        comm = os.path.join(d, "ASCEND_PROFILER_OUTPUT", "communication.json")
        if r == 2:
            with open(comm) as f:
                c = json.load(f)
            for step in c.values():
                for ops in step.values():
                    for op in ops.values():
                        bw = op.get("Communication Bandwidth Info", {})
                        for link in ("HCCS", "SDMA"):
                            if link in bw:
                                bw[link]["Transit Time(ms)"] *= 2
            os.chmod(comm, 0o644)
            with open(comm, "w") as f:
                json.dump(c, f)
        settle(d)
    p, rep = cluster(root)
    if check("slow link: exit 0", p.returncode == 0 and rep, p.stderr):
        links = rep["device"]["slow_links"]
        check("slow link: rank 2's HCCS and SDMA at half the median bandwidth, no other",
              sorted((l["rank"], l["link"]) for l in links) == [(2, "HCCS"), (2, "SDMA")] and
              all(abs(l["ratio"] - 0.5) < 0.01 for l in links), links)
        check("slow link: no slow rank (the four ranks computed alike)", rep["device"]["slow_ranks"] == [],
              rep["device"]["slow_ranks"])


def main():
    if not os.access(REPLAY, os.X_OK):
        print("test-device: %s is not built" % REPLAY, file=sys.stderr)
        print("device: 0 passed, 1 failed")
        return 1
    if not os.path.isdir(DATA):
        print("test-device: skipped: %s is absent (the real profiler outputs)" % DATA)
        return 77
    try:
        npftest.run_tests((test_text_export, test_db_export, test_mindspore_layout, test_parsing_and_raw, test_kineto, test_hostile, test_hostile_rest,
                           test_cluster_msprof, test_cluster_slow, test_slow_link))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return npftest.summary("device")


if __name__ == "__main__":
    sys.exit(main())
