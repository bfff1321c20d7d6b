"""grpcio's abstract interfaces that minigrpc accepts by duck typing, for code that subclasses them.

minigrpc never checks ``isinstance`` against these: a metadata plugin is any callable
``plugin(context, callback)``, and its calls and servicer contexts have ``RpcContext``'s methods
without deriving from it.  They exist so that code written for grpcio, such as
``class TokenPlugin(grpc.AuthMetadataPlugin)``, imports and runs unchanged on minigrpc (and on
``minigrpc.install_as_grpc()``); their abstract methods are grpcio's.
"""

import abc
from typing import Any, Optional

__all__ = ["AuthMetadataContext", "AuthMetadataPlugin", "AuthMetadataPluginCallback", "RpcContext"]


class RpcContext(abc.ABC):
    """What a call and a servicer context have in common (grpcio's ``grpc.RpcContext``)."""

    @abc.abstractmethod
    def is_active(self) -> bool:
        """Whether the RPC is still running."""

    @abc.abstractmethod
    def time_remaining(self) -> Optional[float]:
        """Seconds left before the deadline, or None without one."""

    @abc.abstractmethod
    def cancel(self) -> Any:
        """Cancel the RPC."""

    @abc.abstractmethod
    def add_callback(self, callback: Any) -> bool:
        """Run ``callback()`` when the RPC ends; False if it has already ended."""


class AuthMetadataContext(abc.ABC):
    """What a metadata plugin is told about a call: ``service_url`` and ``method_name``."""

    service_url: str
    method_name: str


class AuthMetadataPluginCallback(abc.ABC):
    """How a metadata plugin answers: ``callback(metadata, error)``."""

    @abc.abstractmethod
    def __call__(self, metadata: Any, error: Optional[BaseException]) -> None:
        """Give the call's metadata, or the error that prevents it."""


class AuthMetadataPlugin(abc.ABC):
    """The source of per-call metadata behind ``metadata_call_credentials``."""

    @abc.abstractmethod
    def __call__(self, context: AuthMetadataContext, callback: AuthMetadataPluginCallback) -> None:
        """Answer through ``callback`` (now or later, from any thread)."""
