"""Where a credential may go: the provider fields that end up in a host name or a URL (``region``,
``project``, ``azure_endpoint``, ``base_url``), checked against the providers' own formats before any
key, token or signature is sent. Each ``*_problem`` returns why a value is refused (naming neither the
field nor the file: the caller does), or None.

- An endpoint that receives a credential is ``https://HOST`` (``http://`` only on loopback, where the
  request never leaves the machine).
- AWS regions look like ``us-east-1``, ``us-gov-west-1``; Google Cloud locations like ``us-central1``,
  ``europe-west4``, or ``global`` (and Vertex AI's multi-regions ``us``, ``eu``).
- Google Cloud project ids are 6-30 characters: lowercase letters, digits and hyphens, starting with a
  letter, not ending with a hyphen.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from giant_assets.core.secrets import is_loopback_url, redact_secrets

AWS_REGION = re.compile(r"[a-z]{2}(?:-[a-z]{2,12}){1,2}-\d{1,2}")
GCP_REGION = re.compile(r"global|us|eu|[a-z]{2,16}-[a-z]{2,16}\d{1,2}")
GCP_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
GOOGLE_CLOUDS = frozenset({"vertex", "gemini"})  # the providers whose region is a Google Cloud location


def shown(value: str) -> str:
    """``value`` as an error may quote it: repr (newlines visible), shortened, secrets redacted."""
    text = repr(value)
    return redact_secrets(text if len(text) <= 60 else f"{text[:57]}...")


def region_problem(provider: str, region: str) -> str | None:
    """Why ``region`` is no region name of ``provider``'s cloud (None: it is one)."""
    if provider in GOOGLE_CLOUDS:
        if GCP_REGION.fullmatch(region):
            return None
        return f"{shown(region)} is not a Google Cloud location like us-central1, europe-west4 or global"
    if AWS_REGION.fullmatch(region):
        return None
    return f"{shown(region)} is not an AWS region name like us-east-1 or eu-central-1"


def project_problem(project: str) -> str | None:
    """Why ``project`` is no Google Cloud project id (None: it is one)."""
    if GCP_PROJECT.fullmatch(project):
        return None
    return (
        f"{shown(project)} is not a Google Cloud project id (6-30 lowercase letters, digits and hyphens, "
        "starting with a letter, not ending with a hyphen)"
    )


def cloud_names_problem(provider: str, region: str | None, project: str | None) -> str | None:
    """Why a client may not use ``region`` and ``project`` (they go into the host name and the route the
    credential is sent to), naming the provider and the field; None when they are its cloud's names
    (None or "": not checked, e.g. the region once checked, a project still to come from credentials)."""
    for field, problem in (("region", region is not None and region_problem(provider, region)),
                           ("project", project and project_problem(project))):  # fmt: skip
        if problem:
            return f"provider {provider!r}: field {field!r}: {problem}"
    return None


def endpoint_problem(url: str) -> str | None:
    """Why a credential may not be sent to ``url`` (None: it may): not http(s), no host, or plain
    ``http://`` to a host other than loopback (the key would cross the network in clear)."""
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError:
        return f"{shown(url)} is not a URL"
    if parts.scheme not in ("http", "https"):
        return f"{shown(url)} is not an http(s) URL"
    if not host:
        return f"{shown(url)} names no host"
    if parts.scheme == "http" and not is_loopback_url(url):
        return (
            f"{shown(url)} would send the credential in clear (http): use https:// "
            "(plain http only to a loopback address such as 127.0.0.1)"
        )
    return None
