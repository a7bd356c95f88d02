"""The providers' HTTP clients share one TLS context per process (agents/providers/tls.py) and still
verify: a real HTTPS server on loopback with a certificate made here is refused until SSL_CERT_FILE names
it, then answers, through the OpenAI and the Anthropic wire; a changed SSL_CERT_FILE takes effect."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from giant_assets.agents.providers.anthropic import AnthropicChatModel
from giant_assets.agents.providers.errors import ProviderError
from giant_assets.agents.providers.messages import Message, TextPart
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.agents.providers.retry import RetryPolicy
from giant_assets.agents.providers.tls import CA_ENV, tls_context
from giant_assets.demo.scripted import Reply, ScriptedModelServer

ONCE = RetryPolicy(max_attempts=1)
ASK = [Message("user", (TextPart("hello?"),))]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (its own CA), and the key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "giant-assets test")])
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
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@pytest.fixture
def https_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The scripted model behind TLS on 127.0.0.1, and its certificate."""
    for name in CA_ENV:
        monkeypatch.delenv(name, raising=False)
    cert, key = self_signed(tmp_path)
    server = ScriptedModelServer(script=[Reply(text="over TLS")] * 4)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    server._httpd.socket = served.wrap_socket(server._httpd.socket, server_side=True)
    with server:
        yield server, cert


@pytest.mark.parametrize("kind", [OpenAIChatModel, AnthropicChatModel])
def test_clients_verify_the_server_with_the_ca_the_environment_names(
    https_model, kind: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, cert = https_model
    base = server.base_url.replace("http://", "https://")
    base = f"{base}/v1" if kind is OpenAIChatModel else base

    def ask() -> str:
        model = kind("scripted", base_url=base, retry=ONCE)
        assert model._client._client._transport._pool._ssl_context is tls_context()  # built once

        async def go() -> str:
            try:
                return (await model.complete(ASK)).text
            finally:
                await model.aclose()

        return asyncio.run(go())

    with pytest.raises(ProviderError):  # a certificate nobody trusts: refused before any request
        ask()
    assert server.requests == []
    untrusting = tls_context()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert ask() == "over TLS" and len(server.requests) == 1
    assert tls_context() is tls_context() is not untrusting  # one context per CA setting
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls_context() is untrusting


@pytest.mark.parametrize(
    "content", [None, b"", b"-----BEGIN CERTIFICATE-----\nnot base64 \x00\xff\n", b"\x00" * 5000]
)
def test_a_ca_file_without_certificates_is_named_before_anything_is_sent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    sample_wsi_root: Path,
) -> None:
    """A missing, empty or garbage SSL_CERT_FILE: a clear error naming the variable and its value, from
    model construction and from giant-run (no traceback)."""
    from giant_assets.agents.providers import BadCABundle
    from giant_assets.agents.run_cli import main as giant_run

    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    with pytest.raises(BadCABundle, match=rf"^SSL_CERT_FILE='{bundle}': no certificates can be read there"):
        OpenAIChatModel("scripted", base_url="http://127.0.0.1:9/v1")
    slide = str(next(sample_wsi_root.rglob("*.tiff")))
    with pytest.raises(SystemExit) as ended:
        giant_run([slide, "--question", "Which organ?", "--provider", "openai", "--model", "m",
                   "--base-url", "http://127.0.0.1:9/v1"])  # fmt: skip
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"SSL_CERT_FILE='{bundle}'" in err and "Traceback" not in err
