"""The names clouds give Anthropic's models: ``model`` stays the Anthropic name (prices and the request
rules are looked up by it), the route takes the cloud's id, mapped here or given as ``deployment``.

- Bedrock: ``anthropic.<name>-<date>-v1:0``; the Claude 4 models are invoked through a cross-region
  inference profile, the id prefixed by the region's geography (``us.``, ``eu.``, ``apac.``), as
  Bedrock refuses on-demand calls to the bare id;
- Vertex AI: ``<name>@<date>``.

Read from the AWS Bedrock and Google Vertex AI model catalogues of 2025-12; a newer model needs a row
here or an explicit ``deployment``.
"""

from __future__ import annotations

# Anthropic model name -> its snapshot date on both clouds
SNAPSHOTS: dict[str, str] = {
    "claude-opus-4-5": "20251101",
    "claude-opus-4-1": "20250805",
    "claude-opus-4": "20250514",
    "claude-sonnet-4-5": "20250929",
    "claude-sonnet-4": "20250514",
    "claude-haiku-4-5": "20251001",
    "claude-3-7-sonnet": "20250219",
    "claude-3-5-haiku": "20241022",
}
# models Bedrock serves only through an inference profile
PROFILE_ONLY = ("claude-opus-4", "claude-sonnet-4", "claude-haiku-4", "claude-3-7-sonnet")
GEOGRAPHIES = {"us": "us", "eu": "eu", "ap": "apac", "ca": "us", "sa": "us"}


def snapshot(model: str) -> str | None:
    """The snapshot date of an Anthropic model name (a dated name ``...-20250929`` gives its own date)."""
    name = model.lower()
    if name in SNAPSHOTS:
        return SNAPSHOTS[name]
    head, _, tail = name.rpartition("-")
    return tail if head in SNAPSHOTS and tail.isdigit() and len(tail) == 8 else None


def model_id(provider: str, model: str, region: str = "") -> str:
    """The id ``provider``'s route takes for ``model``; ``model`` itself when no mapping applies."""
    if provider not in ("bedrock", "vertex"):
        return model
    date = snapshot(model)
    if date is None:
        return model
    name = model.lower().removesuffix(f"-{date}")
    if provider == "vertex":
        return f"{name}@{date}"
    base = f"anthropic.{name}-{date}-v1:0"
    geography = GEOGRAPHIES.get(region.split("-")[0], "us")
    return f"{geography}.{base}" if name.startswith(PROFILE_ONLY) else base
