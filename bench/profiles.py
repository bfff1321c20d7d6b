"""cProfile summaries for the report: where minigrpc's time goes when a target is missed.

A missed target is only actionable with a profile that says where the time goes.  The harness
therefore runs the minigrpc client (warm latency, 4 MiB echo) and the minigrpc server (throughput
load) once more under cProfile, in their own processes like every other run, and reduces each
profile to

* the share of busy time per layer (h2, hpack, hyperframe, minigrpc, socket system calls,
  everything else), with idle waiting (an executor thread waiting for work, ``poll`` with
  nothing to read, a lock or condition wait) left out, since it is not work; and
* the heaviest functions by own time.

cProfile slows Python code down several times (C code much less), so shares are indicative and
absolute times are not comparable with the benchmark's; the report says so.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
from typing import Any, Dict, List, Optional, Tuple

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: Builtin functions that are the process waiting for something, not working.
_IDLE_FUNCTIONS = (
    "of '_queue.SimpleQueue' objects",
    "of '_thread.lock' objects",
    "of '_thread.RLock' objects",
    "of 'select.epoll' objects",
    "of 'select.poll' objects",
    "built-in method select.select",
    "method 'wait' of",
)

#: System-call builtins that do socket I/O (their time is the kernel's copy, or a wait).
_SOCKET_FUNCTIONS = ("of '_socket.socket' objects",)

#: Layers by path fragment, checked in order.
_LAYERS: Tuple[Tuple[str, str], ...] = (
    ("/h2/", "h2"),
    ("/hpack/", "hpack"),
    ("/hyperframe/", "hyperframe"),
    ("/minigrpc/", "minigrpc"),
    ("/grpclib/", "grpclib"),
    ("/bench/", "bench harness"),
    ("/logging/", "logging"),
    ("/concurrent/", "executor"),
    ("threading.py", "threading"),
)


#: Left out of the busy-time shares: waiting, socket system calls (in a blocking client they
#: are mostly waiting for the peer; reported on their own) and the harness's own code.
_NOT_WORK = ("idle", "socket system calls", "bench harness")


def _layer(key: Tuple[str, int, str]) -> str:
    filename, _line, function = key
    if filename == "~":
        if any(fragment in function for fragment in _IDLE_FUNCTIONS):
            return "idle"
        if any(fragment in function for fragment in _SOCKET_FUNCTIONS):
            return "socket system calls"
        return "builtins"
    for fragment, layer in _LAYERS:
        if fragment in filename:
            return layer
    return "other Python"


def _label(key: Tuple[str, int, str]) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    if filename.startswith(_REPO_ROOT):
        filename = filename[len(_REPO_ROOT):]
    for fragment in ("/site-packages/", "/lib/python"):
        if fragment in filename:
            filename = filename.split(fragment, 1)[1]
            break
    parts = filename.replace("\\", "/").split("/")
    return f"{'/'.join(parts[-2:])}:{line}({function})"


def summarize(stats: pstats.Stats, top: int = 12) -> Dict[str, Any]:
    """Busy-time shares by layer and the ``top`` functions by own time (idle left out)."""
    raw: Dict[Tuple[str, int, str], Tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    by_layer: Dict[str, float] = {}
    functions: List[Tuple[float, str, int]] = []
    for key, (_primitive, calls, own, _cumulative, callers) in raw.items():
        layer = _layer(key)
        label = _label(key)
        if layer == "builtins" and callers:
            # A C function's time belongs to whoever called it (hexlify inside hyperframe is
            # hyperframe's cost): split it by the callers' shares of its time.
            caller_time = sum(entry[2] for entry in callers.values()) or 1.0
            for caller, entry in callers.items():
                caller_layer = _layer(caller)
                by_layer[caller_layer] = by_layer.get(caller_layer, 0.0) + (
                    own * entry[2] / caller_time)
            # Listed once, for its heaviest caller, with that caller's calls and time only.
            main_caller, main_entry = max(callers.items(), key=lambda item: item[1][2])
            label = f"{label} ← {_label(main_caller)}"
            calls, own = main_entry[1], main_entry[2]
            if _layer(main_caller) in _NOT_WORK:
                continue
        else:
            by_layer[layer] = by_layer.get(layer, 0.0) + own
        if layer not in _NOT_WORK:
            functions.append((own, label, calls))
    busy = sum(seconds for layer, seconds in by_layer.items() if layer not in _NOT_WORK)
    everything = sum(by_layer.values())
    functions.sort(reverse=True)
    return {
        "busy_s": busy,
        "layers": sorted(((layer, seconds / busy if busy else 0.0)
                          for layer, seconds in by_layer.items() if layer not in _NOT_WORK),
                         key=lambda item: item[1], reverse=True),
        "socket_share": by_layer.get("socket system calls", 0.0) / everything if everything
        else 0.0,
        "top": [(label, own / busy if busy else 0.0, calls)
                for own, label, calls in functions[:top]],
    }


class ThreadProfiler:
    """cProfile for every thread of this process (cProfile alone sees one thread).

    :meth:`start` profiles the calling thread and every thread started afterwards;
    :meth:`stats` merges them.  Used by a benchmark server child given ``--profile``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._profiles: List[cProfile.Profile] = []

    def _profile_this_thread(self, *_: Any) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self._profiles.append(profile)
        profile.enable()

    def start(self) -> None:
        threading.setprofile(self._profile_this_thread)
        self._profile_this_thread()

    def stats(self) -> Optional[pstats.Stats]:
        threading.setprofile(None)
        merged: Optional[pstats.Stats] = None
        with self._lock:
            profiles = list(self._profiles)
        for profile in reversed(profiles):  # the calling thread's own profile last
            profile.create_stats()
            if not getattr(profile, "stats", None):
                continue
            if merged is None:
                merged = pstats.Stats(profile)
            else:
                merged.add(profile)
        return merged
