"""Credentials for the cloud providers' tests, all offline: fake AWS keys in the environment (boto3's
chain finds them, SigV4 signs with them), and a Google service-account key file whose token endpoint
is the loopback scripted model (``ScriptedModelServer`` answers ``/token``)."""

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
