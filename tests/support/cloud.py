"""Credentials for the cloud providers' tests, all offline: fake AWS keys in the environment (boto3's
chain finds them, SigV4 signs with them), Google Application Default Credentials files (a
service-account key, an authorized user's refresh token) whose token endpoint is the loopback scripted
model (``ScriptedModelServer`` answers ``/token``), and an Azure managed-identity endpoint on loopback
for Entra ID tokens."""

from __future__ import annotations

import json
import secrets
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from giant_assets.demo.loopback import LoopbackServer

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY0123"
AWS_ENV = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip


def service_account(path: Path, token_uri: str, project: str = "giant-test-project") -> Path:
    """A service-account key file (a fresh RSA key) whose token endpoint is ``token_uri``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path.write_text(json.dumps({
        "type": "service_account", "project_id": project, "private_key_id": "k1", "private_key": pem,
        "client_email": f"giant@{project}.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri,
    }))  # fmt: skip
    return path


REFRESH_TOKEN = "1//0g-SECRET-refresh-token-0123456789abcdefghijklmnop"
CLIENT_SECRET = "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789"


def authorized_user(path: Path, token_uri: str) -> Path:
    """An authorized-user ADC file (what ``gcloud auth application-default login`` writes) whose token
    endpoint is ``token_uri``: google-auth exchanges its refresh token there for an access token."""
    path.write_text(json.dumps({
        "type": "authorized_user", "client_id": "1234.apps.googleusercontent.com",
        "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN, "token_uri": token_uri,
    }))  # fmt: skip
    return path


class ManagedIdentityEndpoint(LoopbackServer):
    """Azure App Service's managed-identity token endpoint on loopback: ``GET ?api-version=2019-08-01
    &resource=...`` with the ``X-IDENTITY-HEADER`` secret answers ``{access_token, expires_on, resource,
    token_type}`` (learn.microsoft.com/azure/app-service/overview-managed-identity, "REST endpoint
    reference"). azure-identity's ``DefaultAzureCredential`` reaches it through ``IDENTITY_ENDPOINT`` and
    ``IDENTITY_HEADER`` (``env``): a real credential chain, offline."""

    def __init__(self) -> None:
        self.token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.ENTRA-SECRET-" + secrets.token_hex(24)
        self.header = secrets.token_hex(16)
        self.resources: list[str] = []  # the resource of every token asked for
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), _identity_handler(self)))

    @property
    def env(self) -> dict[str, str]:
        return {"IDENTITY_ENDPOINT": f"{self.base_url}/msi/token", "IDENTITY_HEADER": self.header}


def _identity_handler(endpoint: ManagedIdentityEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            query = dict(parse_qsl(urlsplit(self.path).query))
            if self.headers.get("X-IDENTITY-HEADER") != endpoint.header or "resource" not in query:
                status, body = 400, {"error": "invalid_request"}
            else:
                endpoint.resources.append(query["resource"])
                status, body = 200, {
                    "access_token": endpoint.token, "expires_on": str(int(time.time()) + 3600),
                    "resource": query["resource"], "token_type": "Bearer",
                }  # fmt: skip
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
