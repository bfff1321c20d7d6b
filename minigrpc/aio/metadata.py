"""``grpc.aio.Metadata``: call metadata as an ordered multi-map, with grpcio's behaviour.

The asyncio API hands metadata around as this object rather than the blocking API's tuple of
pairs: ``metadata["key"]`` is the first value sent for ``key``, ``get_all("key")`` every one of
them, iteration yields the ``(key, value)`` pairs in the order they arrived (the order of a
key's values is kept, PROTOCOL-HTTP2.md, Custom-Metadata), and a Metadata compares equal to the
tuple of those pairs.  Values are ``str``, or ``bytes`` for ``-bin`` keys, as in the blocking
API (:func:`minigrpc.protocol.wire.decode_metadata`).
"""

from collections.abc import Collection, ItemsView, KeysView, ValuesView
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

MetadataKey = str
MetadataValue = Union[str, bytes]
Metadatum = Tuple[MetadataKey, MetadataValue]

__all__ = ["Metadata"]


class Metadata(Collection):
    """An ordered multi-map of metadata keys to values (grpcio's ``grpc.aio.Metadata``)."""

    __slots__ = ("_values",)

    def __init__(self, *args: Metadatum) -> None:
        self._values: Dict[MetadataKey, List[MetadataValue]] = {}
        for key, value in args:
            self.add(key, value)

    @classmethod
    def from_tuple(cls, raw_metadata: Optional[Iterable[Metadatum]]) -> "Metadata":
        """A Metadata holding the ``(key, value)`` pairs of ``raw_metadata`` (None: empty)."""
        return cls(*raw_metadata) if raw_metadata else cls()

    @classmethod
    def _create(cls, raw_metadata: Any) -> "Metadata":
        """``raw_metadata`` itself when it is a Metadata already, else a new one from it."""
        if isinstance(raw_metadata, cls):
            return raw_metadata
        return cls.from_tuple(raw_metadata)

    def add(self, key: MetadataKey, value: MetadataValue) -> None:
        """Append ``value`` to the values of ``key``."""
        self._values.setdefault(key, []).append(value)

    def __len__(self) -> int:
        """How many pairs: a key with two values counts twice."""
        return sum(len(values) for values in self._values.values())

    def __getitem__(self, key: MetadataKey) -> MetadataValue:
        """The first value of ``key``; KeyError when it has none."""
        values = self._values.get(key)
        if not values:
            raise KeyError(repr(key))
        return values[0]

    def __setitem__(self, key: MetadataKey, value: MetadataValue) -> None:
        """Replace the first value of ``key`` (or add it), keeping its other values."""
        values = self._values.get(key)
        if values:
            values[0] = value
        else:
            self._values[key] = [value]

    def __delitem__(self, key: MetadataKey) -> None:
        """Remove the first value of ``key``; KeyError when it has none."""
        values = self._values.get(key)
        if not values:
            raise KeyError(repr(key))
        del values[0]
        if not values:
            del self._values[key]

    def delete_all(self, key: MetadataKey) -> None:
        """Remove every value of ``key``; KeyError when it has none."""
        del self._values[key]

    def __iter__(self) -> Iterator[Metadatum]:
        for key, values in self._values.items():
            for value in values:
                yield key, value

    def keys(self) -> KeysView:
        return KeysView(self._values)

    def values(self) -> ValuesView:
        """The value lists, one per key (grpcio's view)."""
        return ValuesView(self._values)

    def items(self) -> ItemsView:
        """``(key, [values])`` pairs, one per key (grpcio's view)."""
        return ItemsView(self._values)

    def get(
        self, key: MetadataKey, default: Optional[MetadataValue] = None
    ) -> Optional[MetadataValue]:
        values = self._values.get(key)
        return values[0] if values else default

    def get_all(self, key: MetadataKey) -> List[MetadataValue]:
        """Every value of ``key``, in order (an empty list when it has none)."""
        return self._values.get(key, [])

    def set_all(self, key: MetadataKey, values: List[MetadataValue]) -> None:
        """Make ``values`` the values of ``key``."""
        self._values[key] = values

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._values

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Metadata):
            return self._values == other._values
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as grpcio's

    def __add__(self, other: Any) -> "Metadata":
        if isinstance(other, (Metadata, tuple)):
            return Metadata(*tuple(self), *tuple(other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({tuple(self)!r})"
