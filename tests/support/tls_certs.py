"""Certificates for the TLS tests, made fresh per test session with the ``openssl`` command.

Nothing is committed: a CA, a server certificate for ``localhost``, ``127.0.0.1`` and
``foo.test.example`` (the name ``grpc.ssl_target_name_override`` tests use), one that names only
``foo.test.example``, a client certificate (mutual TLS), and a second CA that signed none of
them.  Keys are P-256 ECDSA: quick to make and to use.
"""

import os
import shutil
import subprocess
import tempfile
from typing import Dict, List, NamedTuple, Optional


class Certificates(NamedTuple):
    ca: bytes
    other_ca: bytes
    server_key: bytes
    server_chain: bytes
    #: A server certificate valid only for ``foo.test.example``.
    override_key: bytes
    override_chain: bytes
    client_key: bytes
    client_chain: bytes


OVERRIDE_NAME = "foo.test.example"
CLIENT_NAME = "minigrpc-test-client"


def _openssl(directory: str, *args: str) -> None:
    subprocess.run(
        ["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60
    )


def _new_key_and_request(directory: str, name: str, subject: str) -> None:
    _openssl(
        directory, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
    )


def _self_signed(directory: str, name: str, subject: str) -> None:
    # The extensions a strict verifier wants of a CA (Python 3.13's default context sets
    # VERIFY_X509_STRICT, which refuses a CA without key usage).
    _openssl(
        directory, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "30", "-subj", subject,
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )


def _sign(directory: str, name: str, extensions: List[str]) -> None:
    extensions = [
        *extensions,
        "keyUsage=critical,digitalSignature",
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid,issuer",
    ]
    with open(os.path.join(directory, f"{name}.ext"), "w") as file:
        file.write("\n".join(extensions) + "\n")
    _openssl(
        directory, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "30", "-extfile", f"{name}.ext",
    )


def make_certificates() -> Optional[Certificates]:
    """All the test certificates, or None when the ``openssl`` command is missing."""
    if shutil.which("openssl") is None:
        return None
    directory = tempfile.mkdtemp(prefix="minigrpc-certs-")
    try:
        _self_signed(directory, "ca", "/CN=minigrpc test CA")
        _self_signed(directory, "other_ca", "/CN=minigrpc other CA")
        server_usage = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth"]
        _new_key_and_request(directory, "server", "/CN=localhost")
        _sign(
            directory,
            "server",
            [f"subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:{OVERRIDE_NAME}", *server_usage],
        )
        _new_key_and_request(directory, "override", f"/CN={OVERRIDE_NAME}")
        _sign(directory, "override", [f"subjectAltName=DNS:{OVERRIDE_NAME}", *server_usage])
        _new_key_and_request(directory, "client", f"/CN={CLIENT_NAME}")
        _sign(
            directory,
            "client",
            [
                f"subjectAltName=DNS:{CLIENT_NAME}",
                "basicConstraints=CA:FALSE",
                "extendedKeyUsage=clientAuth",
            ],
        )
        files: Dict[str, bytes] = {}
        for name in ("ca", "other_ca", "server", "override", "client"):
            for suffix in ("key", "pem"):
                with open(os.path.join(directory, f"{name}.{suffix}"), "rb") as file:
                    files[f"{name}.{suffix}"] = file.read()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return Certificates(
        ca=files["ca.pem"],
        other_ca=files["other_ca.pem"],
        server_key=files["server.key"],
        server_chain=files["server.pem"],
        override_key=files["override.key"],
        override_chain=files["override.pem"],
        client_key=files["client.key"],
        client_chain=files["client.pem"],
    )
