"""`runoff serve`'s socket: owner-only from the start, bounded requests, served commands only;
its TCP address, with the secret's challenge, and over TLS.

A server without Spark (no command here needs it) on a socket in the test's folder; raw clients
send what a broken or hostile client would.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from jobs.cli import server as served
from jobs.cli.client import frames, send


@pytest.fixture
def server(tmp_path: Path) -> Iterator[served.Server]:
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    path = served.default_socket(config)
    served.prepare_socket(path)
    umask = os.umask(0o022)
    os.umask(umask)
    instance = served.Server(path, config)
    assert os.umask(umask) == umask  # the bind's umask was put back
    instance.request_timeout = 1.0
    instance.ready.set()  # no Spark: nothing here runs a Spark command
    thread = threading.Thread(target=instance.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield instance
    finally:
        instance.shutdown()
        thread.join()
        instance.server_close()


def client(server: served.Server) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(server.path))
    sock.settimeout(30)
    return sock


def answer(sock: socket.socket) -> list[dict[str, Any]]:
    return list(frames(sock))


def refusal(reason: str) -> list[dict[str, Any]]:
    return [{"err": f"runoff: error: the server refused the request: {reason}\n"}, {"exit": 2}]


def test_the_socket_and_its_folder_are_the_owners_only(server: served.Server) -> None:
    assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.path.parent.stat().st_mode) == 0o700


def test_a_request_longer_than_the_limit_is_refused(server: served.Server) -> None:
    with client(server) as sock:
        sock.sendall(b"x" * (2 * served.MAX_REQUEST_BYTES))  # no newline: one endless frame
        sock.shutdown(socket.SHUT_WR)
        assert answer(sock) == refusal(f"a frame longer than {served.MAX_REQUEST_BYTES} bytes")


def test_an_endless_request_is_cut_off(server: served.Server) -> None:
    """Past the limit the server reads no frame: what follows is dropped, up to a bound, and
    the connection closes (the sender's writes then fail)."""
    with client(server) as sock, pytest.raises(OSError):
        chunk = b"x" * (1 << 16)
        for _ in range(2 * served.DRAIN_BYTES // len(chunk)):
            sock.sendall(chunk)


@pytest.mark.parametrize("frame", ["[1, 2]", '"run events"', "null"])
def test_a_request_that_is_not_a_json_object_is_refused_at_once(
    server: served.Server, frame: str
) -> None:
    kind = type(json.loads(frame)).__name__
    with client(server) as sock:
        sock.sendall(frame.encode() + b"\n")
        started = time.monotonic()
        assert answer(sock) == refusal(f"a frame that is not a JSON object ({kind})")
        assert time.monotonic() - started < server.request_timeout


def test_a_client_that_sends_nothing_is_refused_after_the_timeout(server: served.Server) -> None:
    with client(server) as sock:
        sock.sendall(b'{"argv": ["run"')  # and nothing more
        assert answer(sock) == refusal("no request in time")


def test_commands_that_are_not_served_are_refused_and_the_server_stays_free(
    server: served.Server,
) -> None:
    for argv in (["serve"], ["status", "events"], ["generate", "events"]):
        with client(server) as sock:
            send(sock, {"argv": argv, "cwd": str(server.path.parent), "env": {}})
            frames_ = answer(sock)
        text = "".join(f.get("err", "") for f in frames_)
        assert frames_[-1] == {"exit": 2}, frames_
        assert text.startswith(f"runoff: error: `runoff {argv[0]}` is not run by a server"), text
        assert not server.running


# -- the TCP address ----------------------------------------------------------------------------
SECRET = secrets.token_hex(32)  # made for this run: no secret is written in the repository


def listening(listener: served.TcpListener, scheme: str) -> Iterator[str]:
    """`listener` serving in a thread while the fixture lasts; its address as clients name it."""
    thread = threading.Thread(target=listener.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        host, port = listener.server_address[:2]
        yield f"{scheme}://{host}:{port}"
    finally:
        listener.shutdown()
        thread.join()
        listener.server_close()


@pytest.fixture
def tcp(server: served.Server) -> Iterator[str]:
    """The server's TCP address on loopback (a free port), as clients name it."""
    yield from listening(served.TcpListener(("127.0.0.1", 0), server, SECRET), "tcp")


def test_a_tcp_client_with_the_secret_is_served_and_one_without_is_refused(
    server: served.Server, tcp: str
) -> None:
    import io

    from core.errors import ConfigError
    from jobs.cli.client import SECRET_ENV, run_remote, tcp_address

    out, err = io.StringIO(), io.StringIO()
    assert run_remote(tcp, ["--version"], env={SECRET_ENV: SECRET}, stdout=out, stderr=err) == 0
    assert out.getvalue().startswith("runoff ") and err.getvalue() == ""

    out, err = io.StringIO(), io.StringIO()
    wrong = {SECRET_ENV: "another-secret-of-enough-length"}
    assert run_remote(tcp, ["--version"], env=wrong, stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    assert err.getvalue() == (
        f"runoff: error: the server refused the request: wrong or missing secret ({SECRET_ENV})\n"
    )
    with pytest.raises(ConfigError, match=f"set {SECRET_ENV}"):
        run_remote(tcp, ["--version"], env={}, stdout=out, stderr=err)

    # A raw client: the challenge comes first; a request without its answer is refused, and so
    # is the answer to another challenge (a replay).
    host, port = tcp_address(tcp) or ("", 0)
    for auth in (None, "0" * 64):
        with socket.create_connection((host, port), timeout=30) as sock:
            challenge = next(frames(sock, limit=1024))["challenge"]
            assert len(challenge) == 32
            send(sock, {"argv": ["--version"], "cwd": "/", "env": {}, "auth": auth})
            assert answer(sock) == refusal(f"wrong or missing secret ({SECRET_ENV})")
    assert not server.running


def test_the_secret_never_travels_and_is_required_to_listen() -> None:
    import io

    from core.errors import ConfigError
    from jobs.cli.client import SECRET_ENV, request, tcp_address

    env = {SECRET_ENV: SECRET, "RUNOFF_HOME": "/h", "RUNOFF_SERVER": "tcp://a:1"}
    assert request(["bronze", "events"], env, io.StringIO())["env"] == {"RUNOFF_HOME": "/h"}
    for bad in ({}, {SECRET_ENV: "short"}):
        with pytest.raises(ConfigError, match=f"--listen needs {SECRET_ENV}"):
            served.server_secret(bad)
    assert served.server_secret({SECRET_ENV: SECRET}) == SECRET
    assert served.listen_address("7079") == ("127.0.0.1", 7079)
    assert served.listen_address("0.0.0.0:7079") == ("0.0.0.0", 7079)
    assert served.listen_address("[::1]:7079") == ("::1", 7079)
    for bad_address in ("host", "host:0", "host:port", "1:99999"):
        with pytest.raises(ConfigError, match="expected HOST:PORT"):
            served.listen_address(bad_address)
    # A client's address names its host: no loopback default.
    assert tcp_address("tcp://runoff:7079") == ("runoff", 7079)
    assert tcp_address("tcp://[::1]:7079") == ("::1", 7079)
    assert tcp_address("/run/runoff.sock") is None
    for bad_server in ("tcp://7079", "tcp://:7079", "tcp://runoff", "tcp://runoff:0"):
        with pytest.raises(ConfigError, match="expected tcp://HOST:PORT"):
            tcp_address(bad_server)


# -- the TCP address over TLS ----------------------------------------------------------------
@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its only name) and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "runoff test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (cert_path := folder / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (key_path := folder / "server.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls(server: served.Server, certificate: tuple[Path, Path]) -> Iterator[str]:
    """The server's TCP address on loopback, speaking TLS with `certificate`, as clients name
    it (`tls://127.0.0.1:PORT`)."""
    from jobs.cli.tls import CERT_ENV, KEY_ENV, server_context

    cert, key = certificate
    context = server_context({CERT_ENV: str(cert), KEY_ENV: str(key)})
    assert context is not None
    yield from listening(served.TcpListener(("127.0.0.1", 0), server, SECRET, context), "tls")


def test_a_tls_client_that_trusts_the_certificate_is_served_and_others_are_refused(
    server: served.Server, tls: str, certificate: tuple[Path, Path]
) -> None:
    import io

    from core.errors import ConfigError
    from jobs.cli.client import SECRET_ENV, run_remote
    from jobs.cli.tls import CA_ENV

    trusted = {SECRET_ENV: SECRET, CA_ENV: str(certificate[0])}
    out, err = io.StringIO(), io.StringIO()
    assert run_remote(tls, ["--version"], env=trusted, stdout=out, stderr=err) == 0
    assert out.getvalue().startswith("runoff ") and err.getvalue() == ""

    # The secret's challenge is the same inside TLS.
    out, err = io.StringIO(), io.StringIO()
    wrong = {**trusted, SECRET_ENV: "another-secret-of-enough-length"}
    assert run_remote(tls, ["--version"], env=wrong, stdout=out, stderr=err) == 2
    assert err.getvalue() == (
        f"runoff: error: the server refused the request: wrong or missing secret ({SECRET_ENV})\n"
    )

    # A client that does not trust the certificate (the system's store), or that reaches the
    # server by a name the certificate does not hold, runs nothing.
    port = tls.rsplit(":", 1)[1]
    for server_address, env, reason in (
        (tls, {SECRET_ENV: SECRET}, "self-signed certificate"),
        (f"tls://localhost:{port}", trusted, "Hostname mismatch"),
    ):
        with pytest.raises(ConfigError) as refused:
            run_remote(server_address, ["--version"], env=env, stdout=out, stderr=err)
        assert str(refused.value).startswith(
            f"the runoff server at {server_address} has a certificate this client does not "
            f"trust ({reason}"
        ), refused.value
        assert str(refused.value).endswith(f"set {CA_ENV} to the certificate that signed it")

    # A plain TCP client gets no challenge: the server waits for TLS, then closes.
    plain = tls.replace("tls://", "tcp://")
    with pytest.raises(ConfigError, match="sent no challenge \\(a server with TLS is tls://"):
        run_remote(plain, ["--version"], env=trusted, stdout=out, stderr=err)
    assert not server.running


def test_the_tls_relay_carries_megabytes_both_ways_at_once(
    certificate: tuple[Path, Path],
) -> None:
    """Each side writes 8 MiB while it reads the other's (an echo), through the relays' socket
    pairs: every byte arrives, in order; the client's close ends the server's stream, and the
    client's relay then closes its own sockets."""
    from jobs.cli.tls import CA_ENV, CERT_ENV, KEY_ENV, client_context, secured, server_context

    cert, key = certificate
    server_tls = server_context({CERT_ENV: str(cert), KEY_ENV: str(key)})
    assert server_tls is not None
    payload = secrets.token_bytes(8 << 20)
    echoed: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as listening:

        def echo() -> None:
            raw, _ = listening.accept()
            relay = secured(raw, server_tls, server_side=True)
            while chunk := relay.local.recv(1 << 16):
                relay.local.sendall(chunk)
                echoed.append(len(chunk))
            relay.close()

        server_thread = threading.Thread(target=echo)
        server_thread.start()
        raw = socket.create_connection(listening.getsockname()[:2], timeout=30)
        relay = secured(
            raw,
            client_context({CA_ENV: str(cert)}),
            server_side=False,
            server_hostname="127.0.0.1",
        )
        sender = threading.Thread(target=relay.local.sendall, args=(payload,))
        sender.start()
        received = bytearray()
        relay.local.settimeout(60)
        while len(received) < len(payload):
            chunk = relay.local.recv(1 << 16)
            assert chunk, f"the stream ended after {len(received)} bytes"
            received += chunk
        sender.join()
        relay.local.close()  # as a client does: the relay closes its own sockets after it
        server_thread.join(timeout=60)
        for thread in relay.threads:
            thread.join(timeout=60)
    assert not server_thread.is_alive()
    assert bytes(received) == payload
    assert sum(echoed) == len(payload)
    assert (relay.raw.fileno(), relay.plain.fileno()) == (-1, -1)


def test_tls_settings_that_cannot_work_are_refused_in_one_line(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    from core.errors import ConfigError
    from jobs.cli.tls import CA_ENV, CERT_ENV, KEY_ENV, client_context, server_context

    cert, key = certificate
    assert server_context({}) is None  # plain TCP
    with pytest.raises(ConfigError, match=f"^{CERT_ENV} is set but {KEY_ENV} is not"):
        server_context({CERT_ENV: str(cert)})
    with pytest.raises(ConfigError, match=f"^{KEY_ENV} is set but {CERT_ENV} is not"):
        server_context({KEY_ENV: str(key)})
    with pytest.raises(ConfigError, match="are not a PEM certificate and its key"):
        server_context({CERT_ENV: str(key), KEY_ENV: str(cert)})  # swapped
    with pytest.raises(ConfigError, match=f"^{CA_ENV}=.* is not a PEM certificate file"):
        client_context({CA_ENV: str(tmp_path / "missing.pem")})


def test_tls_settings_without_a_listen_address_are_said_to_be_unused(
    tmp_path: Path,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from jobs.cli.tls import CERT_ENV, KEY_ENV

    def stopped(_server: served.Server) -> None:
        raise KeyboardInterrupt  # as Ctrl-C before Spark started: nothing of Spark is needed

    cert, key = certificate
    monkeypatch.setenv(CERT_ENV, str(cert))
    monkeypatch.setenv(KEY_ENV, str(key))
    monkeypatch.setattr(served.Server, "start_spark", stopped)
    args = argparse.Namespace(socket=str(tmp_path / "s.sock"), listen=None, parallel=1)
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    assert served.cmd_serve(config, args) == 0
    out = capsys.readouterr().out
    assert (
        f"runoff: {CERT_ENV} and {KEY_ENV} set, but the server has no --listen address: TLS is "
        "for the TCP address only (the Unix socket is local), so it is not used"
    ) in out
    assert "runoff: server stopped" in out
