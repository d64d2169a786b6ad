#!/usr/bin/env python3
"""Write a synthetic caching-allocator snapshot shaped like torch_npu's _dump_snapshot.

    gen-snapshot.py OUT.pkl EVENTS [SEED]

A training-like loop of allocations and frees over one expandable-free segment per stream,
frames shared between entries as the real pickles share them, written with Python's own
pickle (protocol 4), so that the file is what torch writes, only larger. The trace is
consistent with the segments at dump time: replaying it must find no inconsistency.
"""
import pickle
import random
import sys


def main():
    out, events = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    files = ['/opt/venv/lib/python3.11/site-packages/torch/nn/modules/%s.py' % m
             for m in ('linear', 'conv', 'activation', 'normalization', 'module', 'container')]
    frames = [{'name': 'f%d' % i, 'filename': rnd.choice(files), 'line': rnd.randrange(1, 2000)}
              for i in range(400)]
    sites = [[rnd.choice(frames) for _ in range(rnd.randrange(4, 14))] for _ in range(300)]
    sizes = [512, 1024, 4096, 65536, 1 << 20, 4 << 20, 16 << 20]
    stream = 0x5b76d2a0
    base = 0x12c000000000
    seg_size = 1 << 40                      # one huge segment: addresses never run out
    trace = [{'action': 'segment_alloc', 'addr': base, 'size': seg_size, 'stream': stream,
              'frames': list(rnd.choice(sites))}]
    live = {}                               # addr -> (size, site)
    free_by_size = {s: [] for s in sizes}
    bump = base
    while len(trace) < events:
        if live and (len(live) > 2000 or rnd.random() < 0.45):
            addr = rnd.choice(list(live)) if len(live) < 64 else next(iter(live))
            size, site = live.pop(addr)
            trace.append({'action': 'free_requested', 'addr': addr, 'size': size, 'stream': stream,
                          'frames': list(sites[site])})
            trace.append({'action': 'free_completed', 'addr': addr, 'size': size, 'stream': stream,
                          'frames': list(sites[site])})
            free_by_size[size].append(addr)
        else:
            size = rnd.choice(sizes)
            site = rnd.randrange(len(sites))
            if free_by_size[size]:
                addr = free_by_size[size].pop()
            else:
                addr, bump = bump, bump + size
            live[addr] = (size, site)
            trace.append({'action': 'alloc', 'addr': addr, 'size': size, 'stream': stream,
                          'frames': list(sites[site])})
    blocks = [{'address': a, 'size': s, 'requested_size': s, 'state': 'active_allocated',
               'frames': list(sites[site])} for a, (s, site) in sorted(live.items())]
    segment = {'device': 0, 'address': base, 'total_size': seg_size,
               'allocated_size': sum(b['size'] for b in blocks), 'active_size': sum(b['size'] for b in blocks),
               'requested_size': sum(b['size'] for b in blocks), 'stream': stream, 'segment_type': 'large',
               'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': blocks}
    with open(out, 'wb') as f:
        pickle.dump({'segments': [segment], 'device_traces': [trace]}, f, protocol=4)
    print(len(trace))


if __name__ == '__main__':
    main()
