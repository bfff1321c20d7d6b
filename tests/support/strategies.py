"""Hypothesis strategies shared by several test modules."""

from __future__ import annotations

from hypothesis import strategies as st

from minigrpc import wire

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
