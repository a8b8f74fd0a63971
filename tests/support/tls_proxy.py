"""A TLS endpoint in front of the plaintext dev server, for tests of secured connections.

The dev server speaks neither TLS nor API keys, so a test puts this in front of it: a TCP proxy
on 127.0.0.1 that terminates TLS with a certificate of a private CA (made here with
``cryptography``), forwards the bytes to the dev server, and decodes the HTTP/2 header blocks
the client sends (HPACK), so a test can read the gRPC metadata (``authorization``) that reached
the server. It runs its own event loop in a thread, so sync tests and ``asyncio.run`` inside
a command both reach it.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

import hpack
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADERS, _CONTINUATION = 0x1, 0x9
_END_HEADERS, _PADDED, _PRIORITY = 0x4, 0x8, 0x20


@dataclass(frozen=True)
class Certificates:
    """A private CA and a server certificate it signed (for ``localhost`` and 127.0.0.1)."""

    ca_pem: bytes
    cert_file: Path
    key_file: Path
    ca_file: Path


def make_certificates(directory: Path, *, common_name: str = "archmax test CA") -> Certificates:
    """A CA and a leaf for ``localhost`` / 127.0.0.1, written as PEM files under
    ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    files = Certificates(
        ca_pem=ca_pem,
        cert_file=directory / "server.pem",
        key_file=directory / "server.key",
        ca_file=directory / "ca.pem",
    )
    files.ca_file.write_bytes(ca_pem)
    files.cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


class _HeaderReader:
    """Reads the client's side of one HTTP/2 connection and decodes its header blocks."""

    def __init__(self, sink: list[dict[str, str]]) -> None:
        self._buffer = b""
        self._preface_seen = False
        self._decoder = hpack.Decoder()
        self._block = b""
        self._sink = sink

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if not self._preface_seen:
            if len(self._buffer) < len(_PREFACE):
                return
            self._buffer = self._buffer[len(_PREFACE) :]
            self._preface_seen = True
        while len(self._buffer) >= 9:
            length = int.from_bytes(self._buffer[:3], "big")
            if len(self._buffer) < 9 + length:
                return
            kind, flags = self._buffer[3], self._buffer[4]
            payload = self._buffer[9 : 9 + length]
            self._buffer = self._buffer[9 + length :]
            if kind == _HEADERS:
                start, pad = 0, 0
                if flags & _PADDED:
                    pad, start = payload[0], 1
                if flags & _PRIORITY:
                    start += 5
                self._block = payload[start : len(payload) - pad]
            elif kind == _CONTINUATION:
                self._block += payload
            else:
                continue
            if flags & _END_HEADERS:
                decoded = self._decoder.decode(self._block)
                self._sink.append({str(name): str(value) for name, value in decoded})
                self._block = b""


@dataclass
class TlsProxy:
    """A TLS-terminating proxy to ``upstream``; what it saw is in ``requests``."""

    upstream: str
    certificates: Certificates
    requests: list[dict[str, str]] = field(default_factory=list)
    """Each HTTP/2 request's headers (pseudo-headers and gRPC metadata), in order."""
    handshakes: int = 0
    """TLS handshakes completed (each one negotiated ``h2``)."""
    address: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None

    def start(self) -> TlsProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._listen())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="tls-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the TLS proxy did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    async def _close(self) -> None:
        """Stop listening and end every connection's pumps before the loop stops."""
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def metadata(self, name: str) -> list[str]:
        """Every value of header ``name`` the client sent."""
        return [request[name] for request in list(self.requests) if name in request]

    async def _listen(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificates.cert_file, self.certificates.key_file)
        context.set_alpn_protocols(["h2"])
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls = writer.get_extra_info("ssl_object")
        if tls is not None and tls.selected_alpn_protocol() == "h2":
            self.handshakes += 1
        host, _, port = self.upstream.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        headers = _HeaderReader(self.requests)

        async def pump(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, inspect: bool
        ) -> None:
            try:
                while data := await source.read(65536):
                    if inspect:
                        headers.feed(data)
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(
            pump(reader, up_writer, True), pump(up_reader, writer, False), return_exceptions=True
        )
