#!/usr/bin/env python3
"""MemSnapDump's replay of a snapshot, which make bench times beside npuprof-replay's:

    memsnapdump-replay.py MEMSNAPDUMP_SRC SNAPSHOT.pkl

MEMSNAPDUMP_SRC is a checkout of github.com/codeasier/MemSnapDump, kept outside this
project. MemSnapDump has no command that replays a snapshot and stops there: its replay is
its Python API (docs/en/user-guide/replay.md), which its split and dump2db commands run
first. This does what that guide does, for every device with trace entries: the pickle read
by its load_pickle_to_dict(), then SimulateDeviceSnapshot(snapshot, device).replay(). Its
log lines go to stderr, as they do in its commands. The caller times the whole process.
"""
import os
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: memsnapdump-replay.py MEMSNAPDUMP_SRC SNAPSHOT.pkl")
    src = os.path.join(sys.argv[1], "src")
    if not os.path.isdir(os.path.join(src, "memsnapdump", "simulate")):
        sys.exit("memsnapdump-replay.py: %s is not a checkout of MemSnapDump (no src/memsnapdump/simulate)"
                 % sys.argv[1])
    sys.path.insert(0, src)
    from memsnapdump.simulate import SimulateDeviceSnapshot
    from memsnapdump.util.file_util import load_pickle_to_dict

    snapshot = load_pickle_to_dict(Path(sys.argv[2]))
    events = 0
    for device, trace in enumerate(snapshot.get("device_traces", [])):
        if not trace:
            continue
        events += len(trace)
        if not SimulateDeviceSnapshot(snapshot, device).replay():
            sys.exit("memsnapdump-replay.py: MemSnapDump's replay of device %d failed" % device)
    print(events)


if __name__ == "__main__":
    main()
