"""One experiment: a named, versioned run configuration (agent or baseline, provider, model, budgets).

Fields fall in three groups, and only the first decides what the model answers:

- ``ANSWER_FIELDS`` decide the answers; their hash (``config_hash``) names the result set and its
  journals. An experiment name is bound to this hash the first time it runs.
- ``SCORING_FIELDS`` decide how stored answers are scored (re-scoring needs no model call).
- ``SPEED_FIELDS`` decide only how fast and how much: they may change between runs of one name.

The API key's *variable name* (``api_key_env``) is a speed field: the key itself is never read here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from giant_assets.core.endpoints import endpoint_problem, project_problem, region_problem
from giant_assets.core.files import file_sha256
from giant_assets.core.secrets import is_loopback_url, public_url
from giant_assets.core.settings import ANTHROPIC_BASE_URL_ENV, OPENAI_BASE_URL_ENV, env
from giant_assets.experiments import api_contracts as contracts
from giant_assets.experiments import cloud_models
from giant_assets.experiments.itemsample import ItemSample
from giant_assets.experiments.plugins import check_options, check_ref, is_plugin, plugin_identity
from giant_assets.experiments.prompts import resolve_prompts, texts_sha256
from giant_assets.slides.access import JPEG_QUALITY

AgentMode = Literal[
    "random", "majority", "replay", "giant", "thumbnail", "patch", "random_patch", "path_review"
]
# the agents that navigate the slide with GIANT's loop (a step budget, crops, every prompt text hashed)
NAVIGATING = frozenset({"giant", "random_patch", "path_review"})
MODEL_MODES = frozenset({"thumbnail", "patch"}) | NAVIGATING
# bump when the agent-side prompting or navigation protocol changes answers for the same settings
# 4: what the official code sends (docs/agent-protocol.md): views read at round(w / downsample) with
# transparent areas black, the options list as the benchmark script writes it, Anthropic max_tokens
# 30000, reasoning summary "detailed", Claude pruning keeps tool-result images, the Chat baselines' 4096
PROTOCOL_VERSION = "4"
OFFLINE_PROTOCOL_VERSION = "3"  # the offline agents send nothing to a model: their result sets stay
SLUG = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
DEFAULT_IMAGE_SIZE = {"openai": 1000, "anthropic": 500, "gemini": 1000}
Provider = Literal["openai", "anthropic", "azure", "openrouter", "bedrock", "vertex", "gemini"]
# the API family each provider serves: its wire formats, image rules and the official agent it follows
FAMILY: dict[str, str] = {
    "openai": "openai", "azure": "openai", "openrouter": "openai",
    "anthropic": "anthropic", "bedrock": "anthropic", "vertex": "anthropic",
    "gemini": "gemini",
}  # fmt: skip
# the wire formats each provider serves, the first its default
PROVIDER_APIS: dict[str, tuple[str, ...]] = {
    "openai": ("responses", "chat"), "azure": ("responses", "chat"), "openrouter": ("chat",),
    "anthropic": ("messages",), "bedrock": ("messages",), "vertex": ("messages",), "gemini": ("gemini",),
}  # fmt: skip
AZURE_BATCH_SINCE = "2024-07-01"  # the first api-version with /openai/files and /openai/batches
AZURE_API_VERSION = "2025-03-01-preview"  # the official GIANT code's (the first with the Responses API)
Server = Literal["vllm", "sglang", "ollama", "llamacpp"]
# where each local server listens by default (its own documented port), OpenAI-compatible under /v1
SERVER_BASE_URLS: dict[str, str] = {
    "vllm": "http://127.0.0.1:8000/v1",
    "sglang": "http://127.0.0.1:30000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
# the API root each provider's SDK uses by default, and the variable that overrides it (as the SDKs read)
PROVIDER_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BASE_URL_ENVS = {"openai": OPENAI_BASE_URL_ENV, "anthropic": ANTHROPIC_BASE_URL_ENV}
# answer fields hashed only when set, so adding them left the hashes of earlier experiments unchanged
HASHED_WHEN_SET = (
    "server", "server_image_limit", "send_detail", "azure_endpoint", "api_version", "deployment",
)  # fmt: skip


class ExperimentPrices(BaseModel):
    """USD per million tokens of the experiment's model: ahead of ``GIANT_PRICES`` and the built-in table.
    Accounting only (a speed field): changing it changes no answer and no ``config_hash``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    cached_input_per_mtok: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="cache reads; default the input price"
    )
    cache_write_per_mtok: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="cache writes (Anthropic); default: input price"
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"a number is required, not the YAML boolean {value!r} (yes/no, on/off)")
        return value


class Experiment(BaseModel):
    """A named run configuration; see the module docstring for which fields decide answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="short slug: lower-case letters, digits, '-', '_', '.'")
    description: str = ""
    # ---- answer-deciding
    agent: str = Field(
        default="random",
        description=f"one of {', '.join(get_args(AgentMode))}, or a plug-in 'package.module:factory' "
        "(docs/plugins.md)",
    )
    agent_options: dict[str, Any] | None = Field(
        default=None,
        description="a plug-in's options (JSON values) for its factory; hashed with its code's identity",
    )
    provider: Provider = "openai"
    api: Literal["responses", "chat", "messages", "gemini"] | None = Field(
        default=None,
        description="wire format; default responses (openai, azure), chat (openrouter), messages "
        "(anthropic, bedrock, vertex), gemini (gemini)",
    )
    model: str = Field(default="", description="the model's name; prices are looked up by it")
    base_url: str = Field(default="", description="API root; default the provider's, or the server's port")
    azure_endpoint: str = Field(default="", description="azure: https://RESOURCE.openai.azure.com")
    api_version: str | None = Field(
        default=None, description=f"azure: api-version (default {AZURE_API_VERSION})"
    )
    deployment: str = Field(
        default="",
        description="the provider's own name of the model: Azure deployment, Bedrock model id or inference "
        "profile, Vertex model id; default from model",
    )
    server: Server | None = Field(
        default=None,
        description="a local OpenAI-compatible server (docs/open-models.md): Chat Completions, no key, "
        "no reasoning options, no image detail, tool_choice auto, tool calls also read from the text",
    )
    server_image_limit: int | None = Field(
        default=None,
        ge=1,
        description="images per request the server accepts (vLLM --limit-mm-per-prompt image=N): caps "
        "max_images_in_context, the overview always kept",
    )
    send_detail: bool | None = Field(
        default=None, description="with a server: send OpenAI's image detail field (default no)"
    )
    protocol: Literal["tools", "json"] = Field(
        default="tools", description="tools: native slide_zoom tool calls; json: free-JSON actions"
    )
    runs_per_item: int = Field(default=1, ge=1, le=100)
    max_steps: int = Field(default=20, ge=1, le=200, description="model calls per attempt, answer included")
    max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per run (1 + reruns)")
    image_size: int | None = Field(
        default=None, ge=64, le=8192, description="long side of every image sent; default 1000/500"
    )
    thumbnail_size: int = Field(
        default=1024, ge=64, le=16384, description="thumbnail baseline's long side (the released runs: 1024)"
    )
    overview_detail: Literal["auto", "low", "high"] = Field(
        default="auto",
        description="OpenAI image detail of GIANT's overview; auto sends no detail field (as the released "
        "code); crops always go at high",
    )
    image_quality: int = Field(
        default=JPEG_QUALITY,
        ge=1,
        le=95,
        description="JPEG quality of every image sent (Pillow's default 75)",
    )
    image_read: Literal["exact", "fast"] = Field(
        default="exact",
        description="GIANT's views: exact reads the protocol's pyramid level; fast reads one level coarser "
        "(same size, resize, guides and encoding; 0.4-0.7x the CPU per view, slightly softer pixels)",
    )
    n_patches: int = Field(default=30, ge=1, le=1000, description="patch baseline: patches per item")
    patch_size: int = Field(default=224, ge=16, le=4096, description="patch baseline: level-0 side")
    patch_sampler: Literal["clam", "otsu"] = Field(
        default="clam",
        description="patch baseline: clam = the released CLAM grid (per-benchmark preset), otsu = the "
        "platform's earlier sampler on Otsu's mask",
    )
    random_patch_tool: Literal["view_random_region", "slide_zoom"] = Field(
        default="view_random_region",
        description="random_patch: view_random_region = the released ablation (random tissue squares), "
        "slide_zoom = the platform's earlier one (the requested box moved to a random place)",
    )
    max_images_in_context: int | None = Field(default=None, ge=1)
    prune_tool_images: bool | None = Field(
        default=None,
        description="max_images_in_context also removes crops (tool results' images); default as the "
        "official agents: yes for openai, no for anthropic (the Claude agent's pruning never does)",
    )
    prompt_path: str = Field(default="", description="multi-step system-prompt template; content hashed")
    prompt_file: str = Field(
        default="", description="prompt file (YAML, e.g. from giant-prompts import); content hashed"
    )
    note_tool: bool = Field(default=False, description="offer the official note tool (off officially)")
    serve_calls: Literal["all", "first"] | None = Field(
        default=None, description="tool calls served per reply; default all (openai) or first (anthropic)"
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = "high"
    reasoning_summary: Literal["auto", "concise", "detailed"] = Field(
        default="detailed", description="OpenAI Responses reasoning summary (the official agents: detailed)"
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        description="output tokens per request, thinking included; default as officially: Anthropic "
        "30000 (within the model's limit), the Chat Completions baselines 4096, otherwise none sent",
    )
    thinking_budget: int | None = Field(default=1024, ge=0, description="anthropic thinking tokens")
    seed: int = 0
    replay_path: str = ""
    # ---- scoring-only
    panda_null_grade: Literal["benign", "no_answer"] = "benign"
    # ---- speed-only
    api_key_env: str = ""
    prices: ExperimentPrices | None = Field(
        default=None,
        description="USD per million tokens of model ({input_per_mtok, output_per_mtok, "
        "cached_input_per_mtok?, cache_write_per_mtok?}): ahead of GIANT_PRICES and the built-in table",
    )
    region: str = Field(
        default="",
        description="bedrock, vertex: the region (e.g. us-east-1, us-east5); gemini: Gemini through Vertex "
        "AI in this location (e.g. us-central1, global) instead of the Gemini API",
    )
    project: str = Field(
        default="", description="vertex, gemini on Vertex AI: the Google Cloud project (default: ADC's)"
    )
    concurrency: int = Field(default=4, ge=1, le=1024)
    requests_per_minute: float = Field(
        default=60.0, gt=0, allow_inf_nan=False, description="model requests per minute (0.5: one per 2 min)"
    )
    tokens_per_minute: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    budget_usd: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="most USD one partition (experiment x benchmark) may spend; 0: no cap. Required "
        "for a paid experiment (a model off loopback)",
    )
    experiment_budget_usd: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="most USD the whole experiment (all its benchmarks) may spend; None or 0: no cap",
    )
    attempt_timeout_s: float = Field(default=900.0, gt=0, description="per attempt, as officially")
    request_timeout_s: float = Field(
        default=600.0, gt=0, description="per HTTP request (the official code: the SDKs' default, 600 s)"
    )
    request_attempts: int = Field(
        default=3,
        ge=1,
        le=20,
        description="HTTP attempts per model call (the SDKs' 1 + 2 retries, as officially)",
    )
    item_timeout_s: float = Field(default=3900.0, gt=0, description="whole run, all attempts: safety net")
    retry_failed: bool = True
    baseline_cache: bool = Field(
        default=False,
        description="Claude thumbnail and patch baselines: mark the request for prompt caching (the official "
        "code does not: a one-request item only pays the cache write, 1.25x input)",
    )
    batch: bool = Field(default=False, description="every model request via the provider's batch API")
    batch_wait: Literal["detach", "hold"] = Field(
        default="detach",
        description="detach: a materialization submits a round and ends, the batch sensor launches the next; "
        "hold: the materialization polls until its runs finish",
    )
    batch_poll_s: float = Field(default=60.0, gt=0, description="seconds between looks at a running batch")
    batch_max_requests: int | None = Field(default=None, ge=1, description="per batch; default: provider max")
    batch_max_line_attempts: int = Field(default=3, ge=1, le=20, description="submissions of a failing line")
    item_sample: ItemSample | None = Field(
        default=None,
        description="path review only: a seeded sample of each benchmark's items, {n, seed, exclude} "
        "(experiments/itemsample.py); default every item",
    )
    max_failed_share: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="a partition whose runs failed (agent_error, timeout) above this share of its runs "
        "with a slide fails its materialization",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML reads ``true``/``yes``/``on`` as booleans, which pydantic would take as 1 in a number
        field (``budget_usd: yes`` a $1 cap, ``max_failed_share: true`` never failing): refused."""
        if isinstance(value, bool) and info.field_name in _NUMBER_FIELDS:
            raise ValueError(f"a number is required, not the YAML boolean {value!r} (yes/no, on/off)")
        return value

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(
                f"{value!r} is not a slug: use 1-63 lower-case letters, digits, '-', '_' or '.', "
                "starting with a letter or digit"
            )
        return value

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_name(cls, value: Any) -> Any:
        if not isinstance(value, str) or value in get_args(AgentMode):
            return value
        if is_plugin(value):
            return check_ref(value)
        raise ValueError(
            f"{value!r} is not an agent: use one of {', '.join(get_args(AgentMode))}, or name a plug-in "
            "as 'package.module:factory'"
        )

    @field_validator("agent_options", mode="before")
    @classmethod
    def _json_options(cls, value: Any) -> Any:
        return None if value is None else check_options(value)

    @field_validator("region")
    @classmethod
    def _region_name(cls, value: str, info: ValidationInfo) -> str:
        """A region is pasted into the provider's host name: only its cloud's region names pass."""
        provider = info.data.get("provider", "")
        clouds = _CLOUD_FIELDS["region"]  # another provider's region is refused in _cloud_problem
        return _provider_field(value and provider in clouds and region_problem(provider, value), value)

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        """A project goes into the request's route (and signs the token's use): a project id only."""
        return _provider_field(value and project_problem(value), value)

    @field_validator("azure_endpoint")
    @classmethod
    def _azure_endpoint_url(cls, value: str) -> str:
        """Every Azure request carries the key or an Entra ID token: https, a host (http on loopback)."""
        return _provider_field(value and endpoint_problem(value), value)

    @field_validator("base_url")
    @classmethod
    def _base_url_safe(cls, value: str, info: ValidationInfo) -> str:
        """Every provider but openai sends a credential to ``base_url``: https, a host (http on loopback);
        openai's is checked with its ``server`` (a local server may take no key), in ``_cloud_problem``."""
        keyed = info.data.get("provider", "openai") != "openai"
        return _provider_field(value and keyed and endpoint_problem(value), value)

    @field_validator("api_version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        """YAML reads ``api_version: 2024-10-21`` as a date: it is the version's text."""
        return value.isoformat() if isinstance(value, datetime.date) else value

    @model_validator(mode="after")
    def _coherent(self) -> Experiment:
        if self.calls_model and not self.model:
            raise ValueError(f"agent {self.agent!r} needs a model")
        if self.agent_options is not None and not is_plugin(self.agent):
            raise ValueError(
                f"field 'agent_options': for a plug-in agent ('package.module:factory'), not {self.agent!r}"
            )
        if (
            self.agent == "random_patch"
            and self.random_patch_tool == "view_random_region"
            and self.protocol == "json"
        ):
            raise ValueError("random_patch_tool 'view_random_region' is a tool: use protocol 'tools'")
        if self.item_sample is not None and self.agent != "path_review":
            raise ValueError(
                "item_sample: only for agent 'path_review' (its runs are not scored); the other agents are "
                "scored over every item of a benchmark"
            )
        if self.agent == "replay" and not self.replay_path:
            raise ValueError("agent 'replay' needs replay_path")
        api = self.resolved_api
        cloud = _cloud_problem(self)
        if cloud:
            raise ValueError(cloud)
        if self.server is not None:
            if self.provider != "openai" or api != "chat":
                raise ValueError(
                    f"server {self.server!r} speaks Chat Completions: use provider 'openai' (the default) "
                    f"and api 'chat' (or none), not provider {self.provider!r}, api {self.api!r}"
                )
            if self.batch:
                raise ValueError(f"server {self.server!r} has no batch API: remove batch: true")
        elif self.server_image_limit is not None or self.send_detail is not None:
            raise ValueError("server_image_limit and send_detail apply to a local server: set server too")
        if self.provider == "anthropic" and api != "messages":
            raise ValueError(f"provider 'anthropic' speaks api 'messages', not {api!r}")
        if self.provider == "openai" and api in ("messages", "gemini"):
            raise ValueError(f"api {api!r} is not OpenAI's; provider 'openai' takes 'responses' or 'chat'")
        if self.batch and not self.calls_model:
            raise ValueError(f"batch: true needs an agent that calls a model, not {self.agent!r}")
        if self.calls_model and self.family == "anthropic":
            _anthropic_contract(self)
        if self.calls_model and self.provider == "gemini":
            _gemini_contract(self)
        return self

    @property
    def calls_model(self) -> bool:
        """The agent calls the experiment's model: the built-in model agents and every plug-in."""
        return self.agent in MODEL_MODES or is_plugin(self.agent)

    @property
    def paid(self) -> bool:
        """The experiment calls a model off loopback (a provider's paid API, or a server elsewhere)."""

        return self.calls_model and not is_loopback_url(self.resolved_base_url)

    def unbudgeted(self) -> str | None:
        """Why this experiment may not run as declared without ``budget_usd``; None when it may."""
        if not self.paid or self.budget_usd is not None:
            return None
        where = public_url(self.resolved_base_url) or f"{self.provider}'s API"
        return (
            f"field 'budget_usd': required for a paid experiment ({self.model} at {where}): set the most "
            "USD one partition (experiment x benchmark) may spend, e.g. budget_usd: 50, or budget_usd: 0 "
            "for no cap"
        )

    @property
    def vertex_ai(self) -> bool:
        """Gemini through Vertex AI (``provider: gemini`` with a ``region``), not the Gemini API."""
        return self.provider == "gemini" and bool(self.region)

    @property
    def family(self) -> str:
        """openai (openai, azure, openrouter), anthropic (anthropic, bedrock, vertex) or gemini."""
        return FAMILY[self.provider]

    @property
    def resolved_api(self) -> str:
        if self.server is not None:
            return self.api or "chat"
        return self.api or PROVIDER_APIS[self.provider][0]

    @property
    def resolved_base_url(self) -> str:
        """``base_url`` (``azure_endpoint`` for azure), or the server's default address, or (as the
        official SDKs) the provider's ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``; empty: the provider's
        own API."""
        if self.provider == "azure":
            return self.azure_endpoint
        if self.base_url:
            return self.base_url
        if self.server:
            return SERVER_BASE_URLS[self.server]
        variable = BASE_URL_ENVS.get(self.provider)
        return env(variable).strip() if variable and self.calls_model else ""

    @property
    def endpoint(self) -> str:
        """The API root the model calls go to, as it may be recorded (no credentials); "" offline."""
        if not self.calls_model:
            return ""
        default = vertex_root(self.region) if self.vertex_ai else None
        root = self.resolved_base_url or default or PROVIDER_BASE_URLS.get(self.provider, self.provider)
        return public_url(root).rstrip("/")

    @property
    def resolved_api_version(self) -> str | None:
        return self.api_version or (AZURE_API_VERSION if self.provider == "azure" else None)

    @property
    def resolved_deployment(self) -> str:
        """The name the provider's route takes: ``deployment``, else the model id mapped from ``model``
        (``cloud_models``), else ``model``."""
        return self.deployment or cloud_models.model_id(self.provider, self.model, self.region)

    @property
    def resolved_max_images_in_context(self) -> int | None:
        """``max_images_in_context`` within the server's per-request image limit (the overview counts)."""
        limits = [k for k in (self.max_images_in_context, self.server_image_limit) if k is not None]
        return min(limits) if limits else None

    @property
    def resolved_reasoning_effort(self) -> str | None:
        """None for a local server (its models take no reasoning options), else ``reasoning_effort``."""
        return None if self.server else self.reasoning_effort

    @property
    def resolved_send_detail(self) -> bool:
        return self.send_detail if self.send_detail is not None else self.server is None

    @property
    def resolved_serve_calls(self) -> str:
        """As the official agents: every call of a reply (GPT), only the first (Claude)."""
        return self.serve_calls or ("first" if self.family == "anthropic" else "all")

    @property
    def resolved_max_output_tokens(self) -> int | None:
        """``max_output_tokens``, else the official value: Anthropic 30000 (or the model's lower output
        limit), 4096 for the thumbnail and patch baselines over OpenAI Chat Completions, else none."""
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        if self.family == "anthropic":
            return contracts.anthropic_max_tokens(self.model)
        if self.resolved_api == "chat" and self.agent in ("thumbnail", "patch") and self.server is None:
            return contracts.OFFICIAL_CHAT_MAX_TOKENS
        return None

    @property
    def prunes_tool_images(self) -> bool:
        """Whether ``max_images_in_context`` removes crops: ``prune_tool_images``, else as the official
        agents: the GPT agent's pruning does; the Claude agent's never does (its crops sit inside tool
        results, which its pruning does not look into)."""
        if self.prune_tool_images is not None:
            return self.prune_tool_images
        return self.family != "anthropic"

    @property
    def resolved_image_size(self) -> int:
        return self.image_size or DEFAULT_IMAGE_SIZE[self.family]

    def answer_settings(self) -> dict[str, Any]:
        """The answer-deciding settings, as hashed (the prompt file by its content's sha256)."""
        fields = {name: getattr(self, name) for name in ANSWER_FIELDS}
        if not self.calls_model:  # offline agents: provider settings change nothing
            fields = {k: fields[k] for k in ("agent", "runs_per_item", "seed", "replay_path")}
        else:
            fields["api"] = self.resolved_api
            fields["image_size"] = self.resolved_image_size
            fields["serve_calls"] = self.resolved_serve_calls
            fields["base_url"] = public_url(self.resolved_base_url)  # OPENAI_BASE_URL too: hashed as set
            if self.server:
                fields["max_images_in_context"] = self.resolved_max_images_in_context
                fields["reasoning_effort"] = fields["thinking_budget"] = None
            if self.provider == "azure":
                fields["api_version"] = self.resolved_api_version
            if self.provider in CLOUD_PROVIDERS:
                fields["deployment"] = self.resolved_deployment
            if self.vertex_ai:  # another service than the Gemini API (hashed only when set)
                fields["vertex_ai"] = True
            for name in HASHED_WHEN_SET:
                if fields[name] in (None, ""):
                    del fields[name]
            if fields["image_read"] == "exact":  # hashed only when fast: earlier hashes stay unchanged
                del fields["image_read"]
            for name in ("prompt_path", "prompt_file"):  # by content, not path
                if fields[name]:
                    fields[name] = _file_sha256(name, fields[name])
            if self.agent in NAVIGATING:  # every text the agent sends
                prompts = resolve_prompts(self.prompt_file, self.prompt_path)
                fields["prompts_sha256"] = prompts.sha256()
                if self.agent == "path_review":  # its request, the built-in one included
                    request = prompts.review_request.encode()
                    fields["review_request_sha256"] = hashlib.sha256(request).hexdigest()
            if self.agent == "random_patch" and self.random_patch_tool == "view_random_region":
                fields["random_region_texts_sha256"] = texts_sha256()
            if is_plugin(self.agent):  # its code, its options: hashed only for plug-ins
                fields["plugin"] = plugin_identity(self.agent)
                fields["agent_options"] = fields["agent_options"] or {}
            else:
                del fields["agent_options"]
        version = PROTOCOL_VERSION if self.calls_model else OFFLINE_PROTOCOL_VERSION
        return fields | {"protocol_version": version}

    def config_hash(self) -> str:
        """Stable 12-hex id of the result set (journals, exports); no speed setting is part of it.

        ``runs_per_item`` is left out: run k of an item is the same draw whatever the number of runs,
        so GIANT x5 reuses the run 0 that GIANT x1 already paid for (the name binding still checks it).
        """
        settings = {k: v for k, v in self.answer_settings().items() if k != "runs_per_item"}
        blob = json.dumps(settings, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


CLOUD_PROVIDERS = frozenset({"azure", "openrouter", "bedrock", "vertex", "gemini"})
_CLOUD_FIELDS = {  # field -> the providers that take it
    "azure_endpoint": ("azure",),
    "api_version": ("azure",),
    "deployment": ("azure", "bedrock", "vertex"),
    "region": ("bedrock", "vertex", "gemini"),
    "project": ("vertex", "gemini"),
}
_AZURE_VERSION = re.compile(r"^(\d{4}-\d{2}-\d{2})(-preview)?$")


def _provider_field(problem: str | None | bool, value: str) -> str:
    """``value``, or the field's refusal in plain words (no pydantic wording: the file names the field)."""
    if problem:
        raise PydanticCustomError("provider_field", str(problem))
    return value


def _cloud_problem(exp: Experiment) -> str | None:
    """Why the provider settings cannot work together (the provider's own rules); None when they can."""
    if exp.provider == "openai" and exp.base_url and exp.server is None:  # OPENAI_API_KEY goes there
        problem = endpoint_problem(exp.base_url)
        if problem:
            return f"field 'base_url': {problem}; a local server without a key: set server (vllm, ...)"
    for field, providers in _CLOUD_FIELDS.items():
        if getattr(exp, field) and exp.provider not in providers:
            takers = " or ".join(map(repr, providers))
            return f"field {field!r} applies to provider {takers}, not {exp.provider!r}"
    if exp.provider not in CLOUD_PROVIDERS:
        return None
    p = exp.provider
    if exp.server is not None:
        return f"server {exp.server!r} is a local server: use provider 'openai', not {p!r}"
    apis = PROVIDER_APIS[p]
    if exp.api is not None and exp.api not in apis:
        return f"provider {p!r} speaks api {' or '.join(map(repr, apis))}, not {exp.api!r}"
    if p in ("gemini", "vertex"):
        google = _google_problem(exp)
        if google:
            return google
    if exp.batch and p not in ("azure", "gemini"):
        return (
            f"field 'batch': batch mode is not available for provider {p!r} yet (only openai, "
            "anthropic, azure and gemini); remove batch: true"
        )
    if p == "azure":
        return _azure_problem(exp)
    if p == "openrouter" and "/" not in exp.model and exp.calls_model:
        return (
            f"field 'model': OpenRouter names models 'vendor/model' (e.g. openai/gpt-5, "
            f"anthropic/claude-sonnet-4.5), not {exp.model!r}"
        )
    if p in ("bedrock", "vertex") and not exp.region:
        example = "us-east-1" if p == "bedrock" else "us-east5 (or global)"
        return f"field 'region': provider {p!r} needs the cloud region of the model, e.g. {example}"
    return None


def vertex_root(region: str) -> str:
    """Vertex AI's API root for a location, as google-genai builds it: ``global`` the global endpoint,
    ``us`` / ``eu`` the multi-region ones, else the regional endpoint."""
    if region == "global":
        return "https://aiplatform.googleapis.com"
    if region in ("us", "eu"):
        return f"https://aiplatform.{region}.rep.googleapis.com"
    return f"https://{region}-aiplatform.googleapis.com"


def _google_problem(exp: Experiment) -> str | None:
    """Gemini through the Gemini API (a key) or through Vertex AI (``region``: Google's credentials), and
    Claude on Vertex AI (``provider: vertex``), kept apart."""
    if exp.provider == "vertex":
        if exp.model.startswith("gemini"):
            return (
                f"field 'provider': provider 'vertex' serves Claude (Anthropic Messages); for {exp.model} on "
                "Vertex AI use provider 'gemini' with its region (and project)"
            )
        return None
    if not exp.region:
        if exp.project:
            return (
                "field 'project': Gemini through Vertex AI needs its region too (e.g. region: us-central1); "
                "without a region, provider 'gemini' calls the Gemini API, which takes no project"
            )
        return None
    if exp.api_key_env:
        return (
            "field 'api_key_env': Gemini on Vertex AI (region set) signs in with Google's Application "
            "Default Credentials, not an API key; remove api_key_env (or region, for the Gemini API)"
        )
    if exp.batch:
        return (
            "field 'batch': Vertex AI batch prediction (region set) is not wired for Gemini; remove "
            "batch: true (or region, for the Gemini API)"
        )
    return None


def _azure_problem(exp: Experiment) -> str | None:
    if not exp.azure_endpoint:
        return "field 'azure_endpoint': provider 'azure' needs the resource's endpoint, e.g. https://NAME.openai.azure.com"
    if exp.base_url:
        return "field 'base_url': provider 'azure' takes azure_endpoint (the SDK adds /openai and the routes)"
    version = _AZURE_VERSION.match(exp.resolved_api_version or "")
    if version is None:
        return (
            f"field 'api_version': {exp.api_version!r} is not an Azure api-version like {AZURE_API_VERSION}"
        )
    if exp.resolved_api == "responses" and (version.group(1) < "2025-03-01" or not version.group(2)):
        return (
            f"field 'api_version': Azure serves the Responses API from {AZURE_API_VERSION} on (a preview "
            f"version), not {exp.api_version!r}; use api_version {AZURE_API_VERSION} or api 'chat'"
        )
    if exp.batch and version.group(1) < AZURE_BATCH_SINCE:
        return (
            f"field 'api_version': Azure's batch API (Files + Batches, a Global Batch or Data Zone Batch "
            f"deployment) needs api-version {AZURE_BATCH_SINCE}-preview or later (2024-10-21 is the first "
            f"GA one), not {exp.api_version!r}; use api_version {AZURE_API_VERSION} or remove batch: true"
        )
    return None


def _gemini_contract(exp: Experiment) -> None:
    """Refuse the thinking budgets Gemini refuses (``contracts.gemini_thinking_range``)."""
    budget = exp.thinking_budget
    allowed = contracts.gemini_thinking_range(exp.model)
    if allowed is None or budget is None:
        return
    low, high, can_turn_off = allowed
    if budget == 0 and can_turn_off:
        return
    if not low <= budget <= high:
        off = ", or 0 to turn thinking off" if can_turn_off else " (thinking cannot be turned off)"
        raise ValueError(
            f"field 'thinking_budget': {exp.model} takes a thinking budget of {low} to {high} tokens{off}, "
            f"not {budget}"
        )


def _anthropic_contract(exp: Experiment) -> None:
    """Refuse what Anthropic's Messages API would refuse, predictable from the settings alone."""
    budget = exp.thinking_budget or 0
    if 0 < budget < contracts.THINKING_MIN:
        raise ValueError(
            f"field 'thinking_budget': {budget} is below Anthropic's minimum of {contracts.THINKING_MIN} "
            "thinking tokens; use 1024 or more, or 0 to turn thinking off"
        )
    limit = contracts.output_limit(exp.model)
    thinks = contracts.reasons("anthropic", exp.model) is not False  # else the budget is never sent
    asked = exp.resolved_max_output_tokens or 0
    if limit is not None and asked > limit:
        raise ValueError(
            f"field 'max_output_tokens': {asked} is above {exp.model}'s output limit of {limit} tokens "
            f"(thinking included); use max_output_tokens <= {limit}"
        )
    if thinks and budget and budget >= asked:
        raise ValueError(
            f"field 'thinking_budget': {budget} thinking tokens leave nothing of max_tokens {asked} for the "
            f"answer (Anthropic needs the budget below max_tokens); lower thinking_budget or raise "
            "max_output_tokens"
        )
    sizes = {"image_size": exp.resolved_image_size}
    if exp.agent == "thumbnail":
        sizes = {"thumbnail_size": exp.thumbnail_size}
    for name, px in sizes.items():
        if px > contracts.MAX_IMAGE_PX:
            raise ValueError(
                f"field {name!r}: {px} px is above Anthropic's {contracts.MAX_IMAGE_PX} px per image side"
            )
    if exp.agent not in NAVIGATING:
        return  # one image per request
    keep = exp.max_images_in_context if exp.prunes_tool_images else None
    per_request = min(exp.max_steps, keep or exp.max_steps)  # overview + crops
    if per_request > contracts.MAX_IMAGES:
        raise ValueError(
            f"field 'max_images_in_context': max_steps {exp.max_steps} puts up to {per_request} images in "
            f"one request, above Anthropic's {contracts.MAX_IMAGES}; set max_images_in_context to "
            f"{contracts.MAX_IMAGES} or less with prune_tool_images: true (the official Claude agent prunes "
            "no crop)"
        )
    if per_request > contracts.MANY_IMAGES and exp.resolved_image_size > contracts.MANY_IMAGES_PX:
        raise ValueError(
            f"field 'image_size': {exp.resolved_image_size} px with up to {per_request} images per request "
            f"(max_steps {exp.max_steps}); Anthropic refuses images over {contracts.MANY_IMAGES_PX} px when "
            f"a request holds more than {contracts.MANY_IMAGES}: lower image_size to "
            f"{contracts.MANY_IMAGES_PX} or set max_images_in_context to {contracts.MANY_IMAGES} or less "
            "with prune_tool_images: true"
        )


_NUMBER_FIELDS = frozenset(
    name
    for name, field in Experiment.model_fields.items()
    if {field.annotation, *get_args(field.annotation)} & {int, float}
)

ANSWER_FIELDS = (
    "agent",
    "agent_options",
    "provider",
    "api",
    "model",
    "base_url",
    "azure_endpoint",
    "api_version",
    "deployment",
    "server",
    "server_image_limit",
    "send_detail",
    "protocol",
    "runs_per_item",
    "max_steps",
    "max_attempts",
    "image_size",
    "thumbnail_size",
    "overview_detail",
    "image_quality",
    "image_read",
    "n_patches",
    "patch_size",
    "patch_sampler",
    "random_patch_tool",
    "max_images_in_context",
    "prune_tool_images",
    "prompt_path",
    "prompt_file",
    "note_tool",
    "serve_calls",
    "reasoning_effort",
    "reasoning_summary",
    "max_output_tokens",
    "thinking_budget",
    "seed",
    "replay_path",
)
SCORING_FIELDS = ("panda_null_grade",)
SPEED_FIELDS = (
    "api_key_env",
    "prices",  # accounting: what a reply cost, not what it says
    "region",
    "project",
    "concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "budget_usd",
    "experiment_budget_usd",
    "attempt_timeout_s",
    "request_timeout_s",
    "request_attempts",
    "item_timeout_s",
    "retry_failed",
    "baseline_cache",  # a cache mark: what a request costs, not what it answers
    "batch",
    "batch_wait",
    "batch_poll_s",
    "batch_max_requests",
    "batch_max_line_attempts",
    "max_failed_share",
    "item_sample",  # which items run, not how an item is answered
)


def _file_sha256(field: str, path: str) -> str:
    try:
        return file_sha256(Path(path).expanduser())
    except OSError as exc:
        raise ValueError(f"{field} {path}: cannot be read ({exc.strerror or exc})") from exc
