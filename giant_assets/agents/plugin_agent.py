"""A plug-in agent (``agent: "package.module:factory"``) built and run like the built-in ones.

``make_plugin_agent`` imports the factory and calls it with a ``Kit``: the experiment's model client
(``make_chat_model``'s, as GIANT gets it: retries, rate limit, reply store, budget, batch mode), other
models of the same provider, and slide views made by GIANT's own code (``GiantAgent.crop_view`` and its
overview cache), so that the images a plug-in sends are the ones the viewer re-renders and verifies.
``PluginAgent`` wraps what the factory returns: an exception raised by the plug-in fails that run with
the exception recorded, never the process or the other runs. The public surface is ``giant_assets.kit``.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from copy import deepcopy
from typing import Any

import openslide

from giant_assets.agents.giant import GiantAgent, reply_step
from giant_assets.agents.pricing import PriceTable
from giant_assets.agents.providers import ChatModel, ModelReply, ProviderError, make_chat_model
from giant_assets.agents.shown_views import ShownView, ShownViews
from giant_assets.experiments.plugins import PluginError, load_factory
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.ratelimit import RateLimiter, make_rate_limiter
from giant_assets.slides.access import SlideError, open_slide

MAX_ERROR_CHARS = 2000  # of a plug-in's exception text, as recorded


class Slide:
    """One open slide and its views as GIANT sends them (guides drawn, encoded, digested)."""

    def __init__(self, renderer: GiantAgent, handle: openslide.OpenSlide, path: str) -> None:
        self._renderer, self._handle, self.path = renderer, handle, path
        self.width, self.height = (int(v) for v in handle.dimensions)

    async def overview(self) -> ShownView:
        """The whole slide as GIANT's first view (long side ``image_size``, level-0 guide labels)."""
        first = await self._renderer.overviews.get(self.path)
        return ShownView(first.box, first.level, first.image_size, False, first.part)

    async def crop(self, box: list[int]) -> ShownView:
        """The level-0 box ``[x, y, w, h]`` as GIANT's crop of it (clipped to the slide; ``InvalidRegion``
        when it cannot be shown, with the reason to pass on to the model)."""
        return await self._renderer.crop_view(self._handle, box, self.path)


class SlideViews:
    """Opens the slides of items; views come from GIANT's own code (``Slide``)."""

    def __init__(self, renderer: GiantAgent) -> None:
        self._renderer = renderer

    @asynccontextmanager
    async def open(self, item: AgentItem) -> AsyncIterator[Slide]:
        """``item``'s slide, closed when the block ends (``SlideError`` when it cannot be read)."""
        if not item.wsi_path:
            raise SlideError(f"item {item.benchmark_id} has no resolved slide path")
        handle = await asyncio.to_thread(open_slide, item.wsi_path)
        try:
            yield Slide(self._renderer, handle, str(item.wsi_path))
        finally:
            await asyncio.to_thread(handle.close)


class Kit:
    """What a plug-in's factory receives; see ``giant_assets.kit`` for the public description."""

    def __init__(self, experiment: Experiment, renderer: GiantAgent) -> None:
        self._experiment = experiment
        self._renderer = renderer
        self._extra: list[ChatModel] = []  # the other models asked for, closed with the agent
        self.options: dict[str, Any] = deepcopy(experiment.agent_options or {})
        self.model: ChatModel = renderer.chat
        self.slides = SlideViews(renderer)

    @property
    def prices(self) -> PriceTable:
        """The table that prices the steps (batch prices in batch mode)."""
        return self._renderer.prices

    def chat_model(self, model: str) -> ChatModel:
        """Another model of the experiment's provider, endpoint and settings (its own rate limit, priced by
        its name from ``GIANT_PRICES`` or the built-in table; on Azure ``model`` is the deployment's name).
        Not in batch mode: only the experiment's model goes through the provider's batches."""
        if not isinstance(model, str) or not model.strip() or len(model) > 200:
            raise PluginError(
                f"plug-in {self._experiment.agent!r}: a model name is a text of 1 to 200 characters, not "
                f"{repr(model)[:80]}"
            )
        exp = self._experiment
        if exp.batch:
            raise PluginError(
                f"plug-in {exp.agent!r}: batch: true sends only the experiment's model {exp.model!r} through "
                f"the provider's batches; {model!r} cannot join them (run without batch: true)"
            )
        # its own price (not the experiment's) and, on Azure, Bedrock and Vertex, its own model id
        other = exp.model_copy(update={"model": model, "prices": None, "deployment": ""})
        limiter = make_rate_limiter(
            exp.provider, model, exp.api_key_env or f"{exp.provider}-default", exp.requests_per_minute,
            exp.tokens_per_minute,
        )  # fmt: skip
        chat = make_chat_model(other, limiter)
        self._extra.append(chat)
        return chat

    def model_step(
        self, index: int, reply: ModelReply, action: str = "answer", model: ChatModel | None = None,
        attempt: int = 1,
    ) -> Step:  # fmt: skip
        """The step of one model call (text, tokens, cost, latency, HTTP attempts) as GIANT records it;
        ``model``: the kit's model that wrote ``reply`` (default ``model``), whose price it is billed at."""
        return reply_step(index, action, reply, (model or self.model).name, self.prices, attempt)

    async def aclose(self) -> None:
        try:
            for chat in self._extra:
                await chat.aclose()
        finally:
            await self._renderer.aclose()


class PluginAgent:
    """The platform's side of a plug-in: its name, model, batch hooks, and a run's failure recorded."""

    def __init__(self, ref: str, inner: Any, kit: Kit) -> None:
        self.name, self.inner, self.kit = ref, inner, kit
        self.chat = kit.model  # batch mode switches this client's calls to provider batches
        self.model = kit.model.name

    @property
    def prices(self) -> PriceTable:
        return self.kit.prices

    @prices.setter
    def prices(self, table: PriceTable) -> None:  # batch mode: batch prices
        self.kit._renderer.prices = table

    @property
    def shown_views(self) -> ShownViews | None:
        return self.kit._renderer.shown_views

    @shown_views.setter
    def shown_views(self, kept: ShownViews | None) -> None:  # batch replays read their crops back
        self.kit._renderer.shown_views = kept

    def prefetch(self, item: AgentItem) -> None:
        self.kit._renderer.prefetch(item)

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        """The plug-in's answer; what it raises (``sys.exit`` included) fails this run, recorded."""
        try:
            answer = await self.inner.answer(item, run_index)
        except (Exception, SystemExit) as exc:
            kind = exc.error_kind if isinstance(exc, ProviderError) else None  # e.g. content_filtered
            return self._failed(f"raised {_exception_text(exc)}", kind)
        problem = _answer_problem(answer)
        return self._failed(problem) if problem else answer

    def _failed(self, what: str, kind: str | None = None) -> AgentAnswer:
        message = f"plug-in {self.name}: {what}"
        failed = AgentAnswer(text="", steps=[Step(0, "error", error=message)], error=message)
        failed.error_kind = kind
        return failed

    async def aclose(self) -> None:
        try:
            closing = getattr(self.inner, "aclose", None)
            if closing is not None:
                await closing()
        finally:
            await self.kit.aclose()


def _exception_text(exc: BaseException) -> str:
    """``Type: message at file:line`` (the plug-in's innermost frame), bounded."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "..."


def _answer_problem(answer: Any) -> str | None:
    """Why ``answer`` is not an ``AgentAnswer`` the runner can record; None when it is one."""
    if not isinstance(answer, AgentAnswer):
        return f"answer() returned {type(answer).__name__}, not an AgentAnswer"
    if not isinstance(answer.text, str):
        return f"AgentAnswer.text is {type(answer.text).__name__}, not a text"
    if not isinstance(answer.steps, list) or not all(isinstance(s, Step) for s in answer.steps):
        return "AgentAnswer.steps must be a list of Step"
    return None


def make_plugin_agent(experiment: Experiment, limiter: RateLimiter | None) -> PluginAgent:
    """The plug-in the experiment names, built by its factory with a ``Kit``; a ``PluginError`` naming
    the module when it cannot be imported, its factory raises, or what it returns is not an agent."""
    from giant_assets.agents.registry import make_giant_agent

    ref = experiment.agent
    factory = load_factory(ref)
    renderer = make_giant_agent(experiment.model_copy(update={"agent": "giant"}), limiter)
    kit = Kit(experiment, renderer)
    try:
        inner = factory(kit)
    except Exception as exc:
        raise PluginError(f"plug-in {ref!r}: its factory raised {_exception_text(exc)}") from None
    if not callable(getattr(inner, "answer", None)) or not callable(getattr(inner, "aclose", None)):
        raise PluginError(
            f"plug-in {ref!r}: the factory returned {type(inner).__name__}, which has no answer(item, "
            "run_index) and aclose() methods"
        )
    return PluginAgent(ref, inner, kit)
