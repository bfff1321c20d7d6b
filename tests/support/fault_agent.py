"""A broken agent as a process: ``python -m tests.support.fault_agent --socket PATH --fault NAME``.

It serves :func:`tests.support.scripted_peer.fault_server` (answers a correct gRPC server never
gives) on a unix socket, prints ``listening on <path>`` once it listens, as
``python -m cni_client.agent`` does, and runs until SIGTERM or SIGINT.  The CNI tests start it
where the plugin must meet such an agent as a separate process.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any, List, Optional

from cni_client.agent import READY_LINE_PREFIX, prepare_socket_path
from tests.support.scripted_peer import FAULTS, fault_server


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.support.fault_agent",
                                     description="Serve one broken HTTP/2 answer to every call.")
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--fault", required=True, choices=FAULTS, help="the answer to give")
    parser.add_argument("--raw-status", default="13", help="grpc-status for --fault grpc-status")
    parser.add_argument("--raw-message", default="", help="grpc-message for --fault grpc-status")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    options = build_parser().parse_args(argv)
    stopped = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    prepare_socket_path(options.socket)
    server = fault_server(options.socket, options.fault, options.raw_status, options.raw_message)
    sys.stdout.write(f"{READY_LINE_PREFIX}{options.socket}\n")
    sys.stdout.flush()
    while not stopped.wait(3600):
        pass
    server.close()
    try:
        os.unlink(options.socket)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
