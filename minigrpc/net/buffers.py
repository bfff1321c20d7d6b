"""How much each read asks for, and the buffers an asyncio connection reads into.

Both transports, blocking and asyncio, client and server, size their reads the same way; the
choice is about the C library's allocator, not about any protocol.
"""

from typing import Optional

#: ``recv()`` sizes, client and server (measured in docs/benchmarks.md). CPython allocates the
#: whole size before the kernel fills it, and glibc serves anything above 128 KiB with mmap, then
#: mremap and munmap when the bytes object shrinks and dies: three system calls and a page fault
#: for every read of a 300-byte response, about 35 µs per call. Reads start small; a read that
#: fills ``SMALL_READ`` means the peer is streaming, and the next reads take ``LARGE_READ``, so a
#: large message is still a handful of reads (and fewer partial frames to buffer).
SMALL_READ = 64 * 1024
LARGE_READ = 256 * 1024


def next_read_size(received: int) -> int:
    """The ``recv()`` size after a read that returned ``received`` bytes."""
    return LARGE_READ if received >= SMALL_READ else SMALL_READ



class ReadBuffers:
    """The buffers an ``asyncio.BufferedProtocol`` lends its transport to read into.

    asyncio's own ``data_received`` path reads up to 256 KiB into a new bytes object each
    time, which costs the mmap, mremap and munmap described at :data:`SMALL_READ` on every read
    of a small response.  Reading into a buffer kept for the connection costs none of that;
    only the bytes read are copied out.  The sizes follow :func:`next_read_size`: the large
    buffer exists only while reads fill the small one.
    """

    __slots__ = ("_large", "_lent", "_small")

    def __init__(self) -> None:
        self._small = memoryview(bytearray(SMALL_READ))
        self._large: Optional[memoryview] = None
        self._lent = self._small

    def get_buffer(self) -> memoryview:
        """Where the next read goes."""
        return self._lent

    def take(self, received: int) -> bytes:
        """The ``received`` bytes just read into the lent buffer; sizes the next one."""
        data = bytes(self._lent[:received])
        if next_read_size(received) > SMALL_READ:
            if self._large is None:
                self._large = memoryview(bytearray(LARGE_READ))
            self._lent = self._large
        else:
            self._large = None
            self._lent = self._small
        return data
