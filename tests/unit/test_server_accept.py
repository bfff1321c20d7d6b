"""The accept backoff both servers follow when accept() runs out of descriptors or buffers
(:mod:`minigrpc.driver.server_accept`): how long a listener rests, and what is logged."""

from __future__ import annotations

import errno
import logging

import pytest

from minigrpc.driver.server_accept import ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, AcceptBackoff


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM])
def test_a_shortage_rests_the_listener_longer_each_time_up_to_the_cap(code: int) -> None:
    backoff = AcceptBackoff("127.0.0.1:50051")
    delays = [backoff.failed(OSError(code, "no")) for _ in range(12)]
    assert delays[0] == ACCEPT_BACKOFF_MIN
    assert all(later >= earlier for earlier, later in zip(delays, delays[1:]))
    assert max(d for d in delays if d is not None) == ACCEPT_BACKOFF_MAX
    backoff.accepted()
    assert backoff.failed(OSError(code, "no")) == ACCEPT_BACKOFF_MIN  # a new episode


def test_an_error_of_one_connection_does_not_rest_the_listener() -> None:
    backoff = AcceptBackoff("127.0.0.1:50051")
    assert backoff.failed(OSError(errno.ECONNABORTED, "aborted")) is None
    assert backoff.failures == 0


def test_an_episode_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    backoff = AcceptBackoff("unix:/run/s.sock")
    with caplog.at_level(logging.INFO, logger="minigrpc.server"):
        for _ in range(100):
            backoff.failed(OSError(errno.EMFILE, "Too many open files"))
        backoff.accepted()
        backoff.accepted()
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert "Too many open files" in messages[0] and caplog.records[0].levelname == "WARNING"
    assert "after 100 failed attempts" in messages[1]
