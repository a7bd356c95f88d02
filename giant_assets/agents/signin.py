"""How a paid experiment will sign in, said by ``giant-experiments check`` before any call, and what
cannot work refused: the shipped ``YOUR-RESOURCE`` placeholder, a portal "Target URI" pasted as
``azure_endpoint``, a key variable that is unset where no other sign-in applies. Variables are read by
name only: no key is ever printed."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from giant_assets.experiments.spec import Experiment

PLACEHOLDER = "YOUR-RESOURCE"
AZURE_AUTH_ENV = "GIANT_AZURE_AUTH"


def _set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


def sign_in(exp: Experiment) -> tuple[str, str | None]:
    """(how ``exp`` signs in, why it cannot; None when it can)."""
    from giant_assets.agents.providers.factory import default_key_env

    key_env = exp.api_key_env or default_key_env(exp.resolved_api, exp.provider)
    if exp.provider == "azure":
        endpoint_problem = azure_endpoint_problem(exp.azure_endpoint)
        mode = os.environ.get(AZURE_AUTH_ENV, "").strip().lower()
        if mode == "entra" or (mode != "key" and not _set(key_env)):
            return "Microsoft Entra ID token (azure-identity's DefaultAzureCredential)", endpoint_problem
        how = f"API key from ${key_env}"
        return how, endpoint_problem or (
            None if _set(key_env) else f"${key_env} is not set ({AZURE_AUTH_ENV}=key)"
        )
    if exp.provider == "bedrock":
        if _set(key_env):
            return f"Bedrock API key from ${key_env}", None
        profile = os.environ.get("AWS_PROFILE", "").strip()
        return (
            f"AWS credential chain ({f'profile {profile}' if profile else 'default profile / environment'})",
            None,
        )
    if exp.provider == "vertex" or exp.vertex_ai:
        if exp.provider == "vertex" and _set(key_env):
            return f"OAuth access token from ${key_env}", None
        return "Google Application Default Credentials (gcloud auth application-default login)", None
    how = f"API key from ${key_env}"
    return how, None if _set(key_env) else f"${key_env} is not set: export the key in it"


def azure_endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be an Azure OpenAI resource's endpoint; None when it may."""
    if PLACEHOLDER.lower() in endpoint.lower():
        return f"field 'azure_endpoint': still the placeholder {PLACEHOLDER}: put your resource's endpoint"
    parts = urlsplit(endpoint)
    if parts.path.strip("/") or parts.query:
        keep = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        return (
            f"field 'azure_endpoint': a full request URI (the portal's Target URI?); keep only {keep} "
            "(the deployment goes in 'deployment', the api-version in 'api_version')"
        )
    return None
