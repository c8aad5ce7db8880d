"""TLS on the server's TCP address: its contexts, and the relay that carries a connection's bytes.

`runoff serve --listen` with `RUNOFF_SERVER_TLS_CERT` and `RUNOFF_SERVER_TLS_KEY` (PEM files)
speaks TLS on its TCP address only (the Unix socket is the owner's, on one host). Clients name it
`tls://HOST:PORT` and check its certificate against `RUNOFF_SERVER_CA` (a PEM file), else the
system's trust store, and its host name. The secret's challenge is unchanged, inside TLS.

One thread at a time may use an OpenSSL connection, and both sides use theirs from two: a served
command writes its output while another thread reads its client's signals, and a client's signal
handler sends while it waits for output. So no code of theirs gets the TLS connection: `secured`
gives one end of a socket pair, and two relay threads carry the bytes between the other end and
the network, one per direction, with the TLS state (`ssl.SSLObject` over memory buffers) used
under one lock that neither holds while it waits for a socket.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from contextlib import suppress

from core.errors import ConfigError

CERT_ENV = "RUNOFF_SERVER_TLS_CERT"
KEY_ENV = "RUNOFF_SERVER_TLS_KEY"
CA_ENV = "RUNOFF_SERVER_CA"  # what a client checks a tls:// server's certificate with
CHUNK = 1 << 16


def server_context(env: Mapping[str, str]) -> ssl.SSLContext | None:
    """The TLS context of a server's TCP address, from `CERT_ENV` and `KEY_ENV`; None when
    neither is set (plain TCP)."""
    cert, key = env.get(CERT_ENV, ""), env.get(KEY_ENV, "")
    if not cert and not key:
        return None
    if not cert or not key:
        given, missing = (CERT_ENV, KEY_ENV) if cert else (KEY_ENV, CERT_ENV)
        raise ConfigError(f"{given} is set but {missing} is not: TLS needs both (PEM files)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{CERT_ENV}={cert} and {KEY_ENV}={key} are not a PEM certificate and its key "
            f"({exc.strerror or exc})"
        ) from None
    return context


def client_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """The context a client checks a `tls://` server with: `CA_ENV`'s certificates, else the
    system's; the server's host name is checked too."""
    ca = env.get(CA_ENV) or None
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{CA_ENV}={ca} is not a PEM certificate file ({exc})") from None


class Relay:
    """The two threads that carry one TLS connection's bytes to and from a local socket."""

    def __init__(
        self,
        raw: socket.socket,
        tls: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
    ) -> None:
        self.raw, self.tls, self.incoming, self.outgoing = raw, tls, incoming, outgoing
        self.local, self.plain = socket.socketpair()  # `local`: the caller's end
        self.lock = threading.Lock()
        self.running = 2
        self.threads = [
            threading.Thread(
                target=self._direction, args=(self._inbound,), name="runoff-tls-in", daemon=True
            ),
            threading.Thread(
                target=self._direction, args=(self._outbound,), name="runoff-tls-out", daemon=True
            ),
        ]
        for thread in self.threads:
            thread.start()

    def _direction(self, relay: Callable[[], None]) -> None:
        """Run one direction. The second to end closes the relay's own sockets (the network's
        and its end of the pair), so that the caller only ever closes `local`."""
        try:
            relay()
        finally:
            with self.lock:
                self.running -= 1
                last = self.running == 0
            if last:
                self.plain.close()
                self.raw.close()

    def _flush(self) -> None:
        """Send what the TLS state has for the peer (under the lock: in order)."""
        if data := self.outgoing.read():
            self.raw.sendall(data)

    def _inbound(self) -> None:
        """Network -> local, until the peer closes (the local end then reads its end)."""
        with suppress(OSError, ssl.SSLError):
            ended = False
            while not ended:
                data = self.raw.recv(CHUNK)
                plain = bytearray()
                with self.lock:
                    if data:
                        self.incoming.write(data)
                    else:
                        self.incoming.write_eof()
                    while True:
                        try:
                            chunk = self.tls.read(CHUNK)
                        except ssl.SSLWantReadError:
                            ended = not data
                            break
                        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # closed, cleanly or not
                            ended = True
                            break
                        if not chunk:
                            ended = True
                            break
                        plain += chunk
                    self._flush()  # TLS's own answers (a key update's)
                if plain:
                    self.plain.sendall(plain)
        with suppress(OSError):
            self.plain.shutdown(socket.SHUT_WR)

    def _outbound(self) -> None:
        """Local -> network. The local end closed: TLS's close, then the socket's. The network
        failed: the local end is cut off too, so that its writes fail as they would on a
        plain connection to a vanished peer."""
        try:
            while data := self.plain.recv(CHUNK):
                with self.lock:
                    self.tls.write(data)
                    self._flush()
            with self.lock:
                with suppress(ssl.SSLError):  # (waits for the peer's close: not here)
                    self.tls.unwrap()
                self._flush()
            self.raw.shutdown(socket.SHUT_WR)
        except (OSError, ssl.SSLError):
            with suppress(OSError):
                self.plain.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                self.raw.shutdown(socket.SHUT_RDWR)

    def close(self, timeout: float = 30.0) -> None:
        """Close the local end once what it sent is on the network (at most `timeout`), and the
        relay's sockets with it."""
        with suppress(OSError):
            self.local.shutdown(socket.SHUT_WR)
        self.threads[1].join(timeout)
        with suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)  # wakes the inbound thread
        self.threads[0].join(timeout)
        for sock in (self.local, self.plain, self.raw):
            sock.close()


def secured(
    raw: socket.socket,
    context: ssl.SSLContext,
    *,
    server_side: bool,
    server_hostname: str | None = None,
    timeout: float = 30.0,
) -> Relay:
    """The TLS handshake over the connected `raw` (at most `timeout` seconds for each read),
    then the relay whose `local` socket carries the connection's plain bytes. A failed handshake
    raises `ssl.SSLError` or `OSError`, and `raw` is closed."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(
        incoming, outgoing, server_side=server_side, server_hostname=server_hostname
    )
    try:
        raw.settimeout(timeout)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                if data := outgoing.read():
                    raw.sendall(data)
                data = raw.recv(CHUNK)
                if not data:
                    raise ConnectionResetError(
                        "the peer closed the connection in the handshake"
                    ) from None
                incoming.write(data)
        if data := outgoing.read():
            raw.sendall(data)
        raw.settimeout(None)
    except BaseException:
        raw.close()
        raise
    return Relay(raw, tls, incoming, outgoing)
