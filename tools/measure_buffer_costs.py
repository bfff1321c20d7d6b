"""Measure what a buffered message costs above its payload, on the interpreter running this.

The constants of ``minigrpc/protocol/memory_budget.py`` come from this: each case queues 500,000
messages the way the server holds them, in a fresh child process, and reads VmRSS before and
after (``sys.getsizeof`` misses allocator rounding and, on PyPy, means little).

    python tools/measure_buffer_costs.py            # the interpreter running it
    pypy3 tools/measure_buffer_costs.py
"""

import collections
import gc
import platform
import subprocess
import sys

COUNT = 500_000
CASES = ("tuple", "bytes", "view", "packed")
SIZES = (2, 100, 4096)


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _payload(index: int, size: int) -> bytes:
    return (b"%d" % index).ljust(size, b"x")[:size]


def measure(case: str, size: int) -> float:
    """Bytes per message above ``size``, for ``COUNT`` messages queued as ``case``."""
    gc.collect()
    before = _rss()
    queue: collections.deque = collections.deque()
    if case == "tuple":  # a whole received message: (compressed flag, payload)
        for index in range(COUNT):
            queue.append((False, _payload(index, size)))
    elif case == "bytes":  # a request message queued for a streaming handler
        for index in range(COUNT):
            queue.append(_payload(index, size))
    elif case == "view":  # a response piece queued for the wire
        for index in range(COUNT):
            queue.append(memoryview(_payload(index, size)))
    else:  # small messages packed into one array, prefix and payload
        packed = bytearray()
        for index in range(COUNT):
            packed += b"\0" + size.to_bytes(4, "big") + _payload(index, size)
        queue.append(packed)
    gc.collect()
    return (_rss() - before) / COUNT - size


def main() -> None:
    if len(sys.argv) == 3:
        print(f"{measure(sys.argv[1], int(sys.argv[2])):.1f}")
        return
    name = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"{name}: bytes per queued message above its payload ({COUNT:,} messages)")
    for case in CASES:
        figures = []
        for size in SIZES:
            result = subprocess.run(
                [sys.executable, __file__, case, str(size)],
                check=True,
                capture_output=True,
                text=True,
            )
            figures.append(f"{size} B: {result.stdout.strip():>6}")
        print(f"  {case:<7} " + "   ".join(figures))


if __name__ == "__main__":
    main()
