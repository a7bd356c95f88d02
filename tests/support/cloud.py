"""Credentials for the cloud providers' tests, all offline: fake AWS keys in the environment (boto3's
chain finds them, SigV4 signs with them), and Google Application Default Credentials files (a
service-account key, an authorized user's refresh token) whose token endpoint is the loopback scripted
model (``ScriptedModelServer`` answers ``/token``)."""

from __future__ import annotations

import json
from pathlib import Path

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
