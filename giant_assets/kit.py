"""Everything a plug-in agent imports (docs/plugins.md): this module's names are the stable surface.

An experiment names a plug-in as ``agent: "package.module:factory"``; the platform calls
``factory(kit)`` once per cell and uses what it returns as the agent: an object with
``async answer(item: AgentItem, run_index: int) -> AgentAnswer`` and ``async aclose()``.

``Kit`` (what the factory receives):

- ``kit.options``: the experiment's ``agent_options`` (JSON values; a copy the plug-in may keep);
- ``kit.model``: the experiment's model client, the very object GIANT gets (retries, rate limit, reply
  store replay after a kill, budget, cost accounting, batch mode): ``await kit.model.complete(messages,
  tools=())`` returns a ``ModelReply``; ``kit.chat_model(name)``: another model of the same provider;
- ``kit.slides.open(item)``: ``async with`` it for the item's ``Slide``; ``await slide.overview()`` and
  ``await slide.crop([x, y, w, h])`` (level-0 pixels) give a ``View`` exactly as GIANT sends it (long
  side ``image_size``, labelled level-0 guide lines, encoded): ``view.part`` goes into a ``Message``,
  ``view.sha256`` is its digest, ``view.record(step)`` writes its box, level, size and digest on a step;
- ``kit.model_step(index, reply, action)``: a ``Step`` with the reply's text, tokens and cost.

The factory may carry ``expected_calls(options, model) -> {model name: calls per run}`` (a whole number
or ``[fewest, most]``; ``model`` is the experiment's): ``giant-experiments estimate`` prices each model's
calls at that model's own price. Without it the estimate says the plug-in's calls are unknown.

A run's steps are what the viewer, the QuPath export and the review read: record each image sent on a
step (``"thumbnail"`` for the overview, ``"crop"`` for a crop), the model calls with ``model_step``, and
end with an ``"answer"`` step. An exception fails that run only (recorded with the run); a
``ProviderError`` keeps its kind. Never catch ``BaseException``: batch mode parks a waiting run by raising
one through the model call.
"""

from giant_assets.agents.plugin_agent import Kit, Slide, SlideViews
from giant_assets.agents.providers import (
    ChatModel,
    ImagePart,
    Message,
    ModelReply,
    ProviderError,
    TextPart,
    ToolCall,
    ToolSpec,
)
from giant_assets.agents.shown_views import ShownView as View
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.slides.access import InvalidRegion, SlideError

__all__ = [
    "AgentAnswer",
    "AgentItem",
    "ChatModel",
    "ImagePart",
    "InvalidRegion",
    "Kit",
    "Message",
    "ModelReply",
    "ProviderError",
    "Slide",
    "SlideError",
    "SlideViews",
    "Step",
    "TextPart",
    "ToolCall",
    "ToolSpec",
    "View",
]
