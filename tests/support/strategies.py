"""Hypothesis strategies shared by several test modules."""

from __future__ import annotations

from typing import Iterator, Sequence

from hypothesis import strategies as st

from minigrpc.protocol import wire

_ASCII_KEYS = st.from_regex(r"[0-9a-z_.-]{1,12}", fullmatch=True).filter(
    lambda key: not wire.is_reserved_key(key) and not wire.is_binary_key(key)
)

#: Application metadata the API accepts (PROTOCOL-HTTP2.md, "Requests", Custom-Metadata):
# printable-ASCII values under plain
#: keys, bytes under ``-bin`` keys; values may have surrounding spaces.
APPLICATION_METADATA = st.lists(
    st.one_of(
        st.tuples(_ASCII_KEYS, st.from_regex(r"[ -~]{0,20}", fullmatch=True)),
        st.tuples(_ASCII_KEYS.map(lambda key: key + "-bin"), st.binary(max_size=20)),
    ),
    max_size=4,
)


def pieces(data: bytes, sizes: Sequence[int]) -> Iterator[bytes]:
    """``data`` cut into consecutive pieces whose lengths cycle through ``sizes``: how the tests
    feed a parser the reads of a socket, with generated read sizes."""
    pos = 0
    index = 0
    while pos < len(data):
        piece = data[pos : pos + sizes[index % len(sizes)]]
        yield piece
        pos += len(piece)
        index += 1
