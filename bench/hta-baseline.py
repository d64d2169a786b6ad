#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Holistic Trace Analysis' figures for one Kineto GPU trace, and what they cost:

    hta-baseline.py HTA_SRC TRACE_FILE

HTA_SRC is a checkout of github.com/facebookresearch/HolisticTraceAnalysis, kept outside
this project (pure Python; it runs on Debian's python3-pandas, python3-plotly,
python3-networkx, python3-pydot and python3-yaml). TRACE_FILE is one rank's Kineto trace
(.json or .json.gz, e.g. ../shared/testdata/profiler_outputs/kineto-gpu/*.pt.trace.json.gz).

HTA reads a directory of traces, so the trace is linked into a temporary one. Timed apart:
  - load_s: TraceAnalysis(trace_dir=...), i.e. parsing the JSON into pandas, aligning the
    ranks and dropping the last ProfilerStep (include_last_profiler_step=False, its default);
  - analysis_s: get_temporal_breakdown() plus get_comm_comp_overlap().
The percentages are HTA's own, rounded by HTA to 2 decimals; the *_us figures are its
absolute times (microseconds), from which unrounded ratios follow. peak_rss_bytes is the
whole process' (imports included). Prints one line of JSON on stdout and nothing else;
HTA's log lines go to stderr.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402  (leave no __pycache__ in HTA_SRC)

import contextlib
import importlib
import json
import logging
import math
import os
import resource
import tempfile
import time
import types


def psutil_fallback():
    """HTA imports psutil only to size a process pool by free memory (more than 8 ranks).
    Debian's python3-psutil is not pulled in by the packages HTA runs on; if it is absent,
    stand in for it in memory with the one call HTA makes."""
    try:
        importlib.import_module("psutil")
    except ImportError:
        stub = types.ModuleType("psutil")
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        stub.virtual_memory = lambda: types.SimpleNamespace(available=avail)
        sys.modules["psutil"] = stub


def number(v):
    """A JSON-safe float: NaN (e.g. no communication kernel, so no overlap) becomes null."""
    v = float(v)
    return None if math.isnan(v) else v


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hta-baseline.py HTA_SRC TRACE_FILE")
    src, trace = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not os.path.isfile(os.path.join(src, "hta", "trace_analysis.py")):
        sys.exit("hta-baseline.py: %s is not a checkout of HTA (no hta/trace_analysis.py)"
                 % sys.argv[1])
    if not os.path.isfile(trace):
        sys.exit("hta-baseline.py: no trace file %s" % sys.argv[2])
    sys.path.insert(0, src)
    psutil_fallback()

    # Whatever HTA writes goes to stderr; only the JSON line below reaches stdout.
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from hta.trace_analysis import TraceAnalysis
        except ImportError as e:
            sys.exit("hta-baseline.py: HTA does not import (%s); it needs python3-pandas, "
                     "python3-plotly, python3-networkx, python3-pydot, python3-yaml" % e)
        log = logging.getLogger("hta")
        log.handlers = [logging.StreamHandler(sys.stderr)]
        log.setLevel(logging.WARNING)
        log.propagate = False

        with tempfile.TemporaryDirectory(prefix="hta-baseline-") as tmp:
            # HTA takes every *.json / *.gz in the directory and opens *.gz with gzip.
            with open(trace, "rb") as f:
                gz = f.read(2) == b"\x1f\x8b"
            os.symlink(trace, os.path.join(tmp, "trace.json.gz" if gz else "trace.json"))

            t0 = time.perf_counter()
            analysis = TraceAnalysis(trace_dir=tmp)
            t1 = time.perf_counter()
            breakdown = analysis.get_temporal_breakdown(visualize=False)
            overlap = analysis.get_comm_comp_overlap(visualize=False)
            t2 = time.perf_counter()

    b, o = breakdown.iloc[0], overlap.iloc[0]  # one trace, so one rank: one row each
    result = {
        "load_s": round(t1 - t0, 6),
        "analysis_s": round(t2 - t1, 6),
        "idle_pct": number(b["idle_time_pctg"]),
        "compute_pct": number(b["compute_time_pctg"]),
        "non_compute_pct": number(b["non_compute_time_pctg"]),
        "overlap_pct": number(o["comp_comm_overlap_pctg"]),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rank": int(b["rank"]),
        "kernel_time_us": number(b["kernel_time(us)"]),
        "idle_us": number(b["idle_time(us)"]),
        "compute_us": number(b["compute_time(us)"]),
        "non_compute_us": number(b["non_compute_time(us)"]),
    }
    out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
