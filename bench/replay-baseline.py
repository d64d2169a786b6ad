#!/usr/bin/env python3
"""The baseline of make bench: a straightforward Python replay of a snapshot, as the
Python tools of today do it (PyTorch's _memory_viz, the torch_npu tooling): undo the trace
from the state at dump time, newest entry first, and keep allocated/active/reserved after
every event. Prints the events per second of the replay alone (the pickle is loaded by
CPython's C unpickler first and not timed).

    replay-baseline.py SNAPSHOT.pkl [MAX_EVENTS]
"""
import pickle
import sys
import time


def replay(snapshot, device, limit):
    segments = {}
    blocks = {}
    for seg in snapshot['segments']:
        if seg['device'] != device:
            continue
        segments[seg['address']] = seg['total_size']
        addr = seg['address']
        for b in seg['blocks']:
            addr = b.get('address', addr)
            if b['state'] != 'inactive':
                blocks[addr] = [b['requested_size'], b['state'] == 'active_pending_free']
            addr += b['size']
    allocated = sum(s for s, pending in blocks.values() if not pending)
    active = sum(s for s, _ in blocks.values())
    reserved = sum(segments.values())
    trace = snapshot['device_traces'][device][-limit:]
    after = [None] * len(trace)
    for i in range(len(trace) - 1, -1, -1):
        after[i] = (allocated, active, reserved)
        e = trace[i]
        a, addr, size = e['action'], e['addr'], e['size']
        if a == 'alloc':
            s, pending = blocks.pop(addr)
            active -= s
            if not pending:
                allocated -= s
        elif a == 'free_requested':
            blocks[addr][1] = False
            allocated += blocks[addr][0]
        elif a == 'free_completed':
            blocks[addr] = [size, True]
            active += size
        elif a == 'free':
            blocks[addr] = [size, False]
            allocated += size
            active += size
        elif a in ('segment_free', 'segment_unmap'):
            segments[addr] = size
            reserved += size
        elif a in ('segment_alloc', 'segment_map'):
            segments.pop(addr, None)
            reserved -= size
    return after


def main():
    with open(sys.argv[1], 'rb') as f:
        snapshot = pickle.load(f)
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    n = len(snapshot['device_traces'][0][-limit:] if limit else snapshot['device_traces'][0])
    t0 = time.perf_counter()
    replay(snapshot, 0, limit or n)
    dt = time.perf_counter() - t0
    print('%.0f' % (n / dt))


if __name__ == '__main__':
    main()
