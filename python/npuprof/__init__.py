# SPDX-License-Identifier: MIT
"""npuprof: collection windows opened by the node's npuprofd, inside a Python training loop.

    import npuprof

    with npuprof.Monitor() as mon:          # never fails for lack of a daemon
        for batch in loader:
            mon.step()                      # at the START of every step: 1, 2, 3, ...
            train_one_step(batch)

Monitor is a thin ctypes layer over libnpuprof (npf_rank_open / npf_rank_step_call /
npf_rank_close / npf_rank_info): the window opens on the library's runtime backend (acl,
host) at exactly the step the configuration names, and is written to
<prof_dir>/rank<R>_start<S>_stop<E>/ with a manifest.json. For PyTorch's own profiler in the
window, see npuprof.torch.ProfilerWindow.

Threads: a Monitor belongs to the training loop's thread (calls are serialized by a lock,
so misuse is safe, but steps from two threads make no sense). fork(): a child's inherited
Monitor is released without touching the parent's slot and becomes detached and closed;
open a new Monitor in the child if it trains.

Stacks: when the rank stops stepping (a hang, in a collective say), npuprofd asks it for its
stacks, and a thread of libnpuprof writes them to <prof_dir>/stacks/rank<R>_pid<P>_<N>.txt:
every thread's native frames (each thread is stopped in turn by signal SIGRTMAX - 3), then
every Python thread's stack as faulthandler writes it. For that, the first Monitor of a
process registers faulthandler for STACKS_SIGNAL (SIGRTMAX - 4) on a descriptor of its own
that points at /dev/null, which the library points at the file for the time of a dump. A
process that has a handler of its own for that signal keeps it, and its files then hold the
native frames only.
"""

import dataclasses
import errno as _errno
import faulthandler
import os
import signal
import threading
import weakref

from . import _lib
from ._lib import LibraryNotFound, WINDOW_STATE_NAMES

__all__ = ["Monitor", "Info", "Error", "LibraryNotFound", "WINDOW_STATE_NAMES", "STACKS_SIGNAL"]
__version__ = "0.1.0"


class Error(OSError):
    """npf_rank_open() refused: errno and the library's message."""


@dataclasses.dataclass(frozen=True)
class Info:
    """What the rank is doing (npf_rank_info_t)."""
    state: str                  # idle, armed, collecting, flushing, done, missed, failed, filtered
    generation: int             # the configuration generation last read (0: none)
    window_start: int           # -1 when there is no window
    window_stop: int            # -1 when none, or while a timed window is open
    output: str                 # the window directory, "" if none
    message: str                # why a window failed or was missed; "" if nothing to say
    step: int = -1              # the step last given to step(), -1 before the first
    state_step: int = -1        # the step at which the state was entered
    attached: bool = False      # the node's segment was found (a daemon runs)
    rank: int = 0
    local_device: int = -1
    backend: str = ""           # the backend of the current window, "" if none

    @property
    def collecting(self):
        return self.state == "collecting"


_monitors = weakref.WeakSet()

# faulthandler writes every Python thread's stack when libnpuprof raises this signal.
STACKS_SIGNAL = signal.SIGRTMAX - 4 if hasattr(signal, "SIGRTMAX") else None
_stacks_lock = threading.Lock()
_stacks_done = False        # once per process; a forked child keeps its parent's registration


def _register_stacks(lib):
    """Have faulthandler write the Python stacks into the stacks a stalled rank writes."""
    global _stacks_done
    if lib.npf_set_interpreter is None or STACKS_SIGNAL is None:
        return
    with _stacks_lock:
        if _stacks_done:
            return
        _stacks_done = True
        # A handler the process installed for this signal (its own faulthandler.register()
        # of it, or anything else) is left alone: the stacks then hold the native frames only.
        if _lib.signal_has_handler(STACKS_SIGNAL) is not False:
            return
        try:
            fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            faulthandler.register(STACKS_SIGNAL, file=fd, all_threads=True, chain=False)
        except (OSError, RuntimeError, ValueError):
            return
        # The descriptor stays open for the life of the process: faulthandler writes to it.
        lib.npf_set_interpreter(STACKS_SIGNAL, fd)


def _after_fork_in_child():
    for m in list(_monitors):
        m._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _c_str(b):
    return b.decode("utf-8", "replace")


class Monitor:
    """One training rank's handle on the node's npuprof segment.

    rank: the global rank id (None: $RANK, else $RANK_ID, else 0).
    shm_name: the segment (None: $NPUPROF_SHM, else "npuprof").
    backend: "acl", "host" or "auto" (None: as the configuration says).
    local_device: the local device (None: $LOCAL_RANK, else $ASCEND_DEVICE_ID).

    Raises Error when the library refuses (a live process holds this rank id: EBUSY; a bad
    option: EINVAL) and LibraryNotFound when libnpuprof cannot be loaded. A missing daemon
    is not an error: the Monitor starts detached and attaches when the segment appears.
    """

    def __init__(self, rank=None, shm_name=None, backend=None, local_device=None):
        if rank is not None and (not isinstance(rank, int) or rank < 0):
            raise ValueError("rank must be a non-negative integer, not %r" % (rank,))
        if backend is not None and backend not in ("acl", "host", "auto"):
            raise ValueError("backend must be 'acl', 'host' or 'auto', not %r" % (backend,))
        self._lib = _lib.load()
        self._call = self._lib.npf_step
        self._lock = threading.Lock()
        self._handle = None
        self._fast = None
        self._step = 0
        self._last = -1
        self.shm_name = _lib.shm_name(shm_name)
        opts = _lib.RankOptions(
            shm_name=self.shm_name.encode(),
            rank=-1 if rank is None else rank,
            local_device=-1 if local_device is None else int(local_device),
            backend=None if backend is None else backend.encode(),
        )
        err = _make_err()
        h = _lib.ctypes.c_void_p()
        r = self._lib.npf_rank_open(_lib.ctypes.byref(opts), _lib.ctypes.byref(h), err)
        if r < 0:
            msg = _c_str(err.value) or os.strerror(-r)
            raise Error(-r, "npuprof: cannot open rank: %s" % msg)
        self._handle = h
        # The handle's fast-path part (rank.h: npf_rank_fast_t comes first), read in place.
        self._fast = _lib.RankFast.from_address(h.value)
        self._pid = os.getpid()
        _monitors.add(self)
        _register_stacks(self._lib)

    # -- the loop ---------------------------------------------------------------------------

    def step(self, step=None):
        """The start of step @step (None: the last step + 1, starting at 1).

        Opens, advances or closes the window. Return: 0, or a negative errno when the
        backend failed (the window is then `failed`, see info().message); the loop goes on.
        After close() it does nothing and returns 0.
        """
        if step is None:
            step = self._step + 1
        else:
            step = int(step)
        self._step = step
        with self._lock:
            if self._handle is None:
                return 0
            self._last = step
            return self._lib.npf_step(self._handle, step)

    def _step_to(self, step):
        """step(@step) for a caller that counts its own steps (@step an int): no conversion."""
        with self._lock:
            h = self._handle
            if h is None:
                return 0
            self._step = self._last = step
            return self._call(h, step)

    def fail(self, message):
        """End the window armed or open now as `failed`, with @message (a framework's error)
        in info().message, the slot and the manifest: npf_rank_fail().

        Return: 0; -ENOENT when no window is armed or open; -ENOSYS when libnpuprof has no
        npf_rank_fail() (the window then goes on, and only the caller knows the message).
        """
        fn = self._lib.npf_fail
        if fn is None:
            return -_errno.ENOSYS
        with self._lock:
            if self._handle is None:
                return -_errno.ENOENT
            return fn(self._handle, str(message).encode("utf-8", "replace")[:255])

    @property
    def current_step(self):
        """The step last given to step() (0 before the first)."""
        return self._step

    def info(self):
        """An Info of what the rank is doing now."""
        with self._lock:
            if self._handle is None:
                return Info(state="closed", generation=0, window_start=-1, window_stop=-1, output="",
                            message="", step=self._last)
            i = _lib.RankInfo()
            self._lib.npf_rank_info(self._handle, _lib.ctypes.byref(i))
        return Info(state=_lib.state_name(i.state), generation=i.generation, window_start=i.window_start,
                    window_stop=i.window_stop, output=_c_str(i.output), message=_c_str(i.message),
                    step=self._last, state_step=i.state_step, attached=bool(i.attached), rank=i.rank,
                    local_device=i.local_device, backend=_c_str(i.backend))

    # -- the end ----------------------------------------------------------------------------

    def close(self):
        """Close an open window (its manifest says incomplete) and release the slot. Idempotent."""
        with self._lock:
            h, self._handle, self._fast = self._handle, None, None
            if h is not None:
                self._lib.npf_rank_close(h)
        _monitors.discard(self)

    def _quiet(self):
        """True when the rank has no window armed or open (npf_rank_fast_t.busy is 0), so
        that nothing can change at the next step unless a new generation is published.
        Also True after close()."""
        f = self._fast
        return f is None or not f.busy

    def _seen_generation(self):
        f = self._fast
        return 0 if f is None else f.generation

    @property
    def closed(self):
        return self._handle is None

    def _forget_after_fork(self):
        # In the child: the slot and any open window are the parent's.
        self._lock = threading.Lock()
        h, self._handle, self._fast = self._handle, None, None
        if h is not None:
            self._lib.npf_rank_close_after_fork(h)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None and os.getpid() == self._pid:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<npuprof.Monitor shm=%r step=%d %s>" % (self.shm_name, self._step,
                                                       "closed" if self.closed else "open")


def _make_err():
    return _lib.ctypes.create_string_buffer(_lib.NPF_SHM_ERR_MAX)
