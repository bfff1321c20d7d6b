"""``aio.Metadata`` and ``aio.AioRpcError`` behave as grpcio's, operation for operation.

Random sequences of the multi-map operations run on minigrpc's Metadata and on grpcio's
``grpc.aio.Metadata`` side by side (where grpcio can be imported); every observable result
(values, exceptions, iteration order, length, views, repr) must agree.
"""

from __future__ import annotations

import pickle
from typing import Any, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minigrpc import StatusCode
from minigrpc.aio import EOF, AioRpcError, Metadata
from minigrpc.protocol.status import RpcError

try:
    from grpc import __version__ as grpcio_version
    from grpc import aio as grpcio_aio
except ImportError:  # PyPy, or the venv without grpcio
    grpcio_aio = None
    grpcio_version = ""

KEYS = st.sampled_from(["a", "b", "c-bin", "d"])
VALUES = st.one_of(st.sampled_from(["x", "y", "z"]), st.binary(max_size=3))
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS, VALUES),
        st.tuples(st.just("set"), KEYS, VALUES),
        st.tuples(st.just("del"), KEYS, st.none()),
        st.tuples(st.just("delete_all"), KEYS, st.none()),
        st.tuples(st.just("get"), KEYS, st.none()),
        st.tuples(st.just("getitem"), KEYS, st.none()),
        st.tuples(st.just("get_all"), KEYS, st.none()),
        st.tuples(st.just("set_all"), KEYS, st.lists(VALUES, max_size=2)),
        st.tuples(st.just("contains"), KEYS, st.none()),
    ),
    max_size=25,
)


def _apply(metadata: Any, operation: str, key: str, value: Any) -> Tuple[str, Any]:
    """Run one operation; returns what can be observed of it."""
    try:
        if operation == "add":
            return "ok", metadata.add(key, value)
        if operation == "set":
            metadata[key] = value
            return "ok", None
        if operation == "del":
            del metadata[key]
            return "ok", None
        if operation == "delete_all":
            metadata.delete_all(key)
            return "ok", None
        if operation == "get":
            return "ok", metadata.get(key, "default")
        if operation == "getitem":
            return "ok", metadata[key]
        if operation == "get_all":
            return "ok", list(metadata.get_all(key))
        if operation == "set_all":
            metadata.set_all(key, list(value))
            return "ok", None
        return "ok", key in metadata
    except KeyError:
        return "KeyError", None


def _observe(metadata: Any) -> Tuple[Any, ...]:
    return (
        tuple(metadata),
        len(metadata),
        list(metadata.keys()),
        [list(values) for values in metadata.values()],
        repr(metadata).partition("(")[2],
    )


def _grpcio_metadata_is_the_reference() -> bool:
    """grpcio's ``aio.Metadata`` changed between releases. In 1.70 (the newest on Python 3.7 and
    3.8) ``keys()`` iterates the pairs instead of the keys, ``values()`` raises KeyError, and a key
    whose last value was deleted stays ``in`` the metadata with no values; 1.85 has the behaviour
    minigrpc follows. Only a grpcio at least that new is a reference to compare with."""
    version = tuple(int(part) for part in grpcio_version.split(".")[:2] if part.isdigit())
    return version >= (1, 85)


@settings(max_examples=300)
@given(OPERATIONS)
def test_metadata_operations_match_grpcios(operations: List[Tuple[str, str, Any]]) -> None:
    if grpcio_aio is None:
        pytest.skip("needs grpcio's grpc.aio.Metadata to compare with")
    if not _grpcio_metadata_is_the_reference():
        pytest.skip(f"grpcio {grpcio_version}'s aio.Metadata predates the behaviour of 1.85")
    ours, theirs = Metadata(), grpcio_aio.Metadata()
    for operation, key, value in operations:
        assert _apply(ours, operation, key, value) == _apply(theirs, operation, key, value), (
            operation,
            key,
        )
        assert _observe(ours) == _observe(theirs)


def test_metadata_construction_equality_and_concatenation() -> None:
    pairs = (("a", "1"), ("b-bin", b"\x00"), ("a", "2"))
    metadata = Metadata(*pairs)
    # A key's values stay together, in the order the key first appeared (grpcio's too).
    grouped = (("a", "1"), ("a", "2"), ("b-bin", b"\x00"))
    assert metadata == grouped
    assert metadata == Metadata.from_tuple(pairs)
    assert metadata != Metadata(*pairs[:2]) and metadata != pairs
    assert Metadata.from_tuple(None) == ()
    assert Metadata._create(metadata) is metadata
    assert metadata["a"] == "1" and metadata.get_all("a") == ["1", "2"]
    assert metadata + (("c", "3"),) == (*grouped, ("c", "3"))  # noqa: RUF005 (what is tested)
    assert metadata + Metadata(("c", "3")) == (*grouped, ("c", "3"))
    assert repr(metadata) == f"Metadata({grouped!r})"
    assert 1 not in metadata and "a" in metadata
    with pytest.raises(TypeError):
        hash(metadata)
    if grpcio_aio is not None:
        assert repr(metadata) == repr(grpcio_aio.Metadata(*pairs))


def test_eof_is_one_false_marker() -> None:
    assert not EOF
    assert repr(EOF) == "<grpc.aio.EOF>"
    assert pickle.loads(pickle.dumps(EOF)) is EOF
    if grpcio_aio is not None:
        assert repr(EOF) == repr(grpcio_aio.EOF) and bool(EOF) == bool(grpcio_aio.EOF)


@pytest.mark.parametrize("details", ["it broke", None])
def test_aio_rpc_error_reads_as_grpcios(details: Optional[str]) -> None:
    initial, trailing = Metadata(("a", "1")), Metadata(("b", "2"))
    error = AioRpcError(StatusCode.UNAVAILABLE, initial, trailing, details, "debug")
    assert isinstance(error, RpcError)
    assert error.code() is StatusCode.UNAVAILABLE
    assert error.details() == details
    assert error.initial_metadata() is initial and error.trailing_metadata() is trailing
    assert error.debug_error_string() == "debug"
    copy = pickle.loads(pickle.dumps(error))
    assert copy.code() is StatusCode.UNAVAILABLE and copy.trailing_metadata() == trailing
    if grpcio_aio is not None:
        import grpc

        theirs = grpcio_aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE, initial, trailing, details, "debug"
        )
        assert str(error) == str(theirs) and repr(error) == repr(theirs)
        assert error.args == theirs.args
