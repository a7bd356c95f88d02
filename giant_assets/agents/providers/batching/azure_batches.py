"""Azure OpenAI's batch API (Global Batch and Data Zone Batch deployments): OpenAI's Files + Batches wire
at the resource's ``/openai/files`` and ``/openai/batches`` routes, each with the ``api-version`` query,
through the model's own ``AsyncAzureOpenAI`` client (its key or Entra ID token).

What differs from OpenAI (Microsoft Learn, "Getting started with Azure OpenAI batch deployments",
learn.microsoft.com/azure/ai-foundry/openai/how-to/batch, and its includes batch-python.md,
batch-rest.md and global-batch-limits.md):

- each line's ``body.model`` is the *deployment* name, the same on every line of a file
  (``model_mismatch`` otherwise); its ``url`` is ``/chat/completions`` for Chat Completions and
  ``/v1/responses`` for the Responses API, the same on every line (``url_mismatch`` otherwise);
- a file holds at most 100,000 requests (``too_many_tasks``) and 200 MB;
- ``completion_window`` must be ``24h``; Azure does not expire a batch that takes longer;
- every batch object in the reference shows ``metadata: null``: the round tag is not sent as metadata
  but rides on the uploaded file's name (``giant-round-<tag>.jsonl``; a file object keeps its
  ``filename``), and a batch is told by the name of its input file after a restart;
- statuses are OpenAI's (validating, in_progress, finalizing, completed, failed, expired, cancelling,
  cancelled), shown capitalized in the REST samples: compared lowercased.
"""

from __future__ import annotations

from typing import Any

from giant_assets.agents.providers.batching.openai_batches import OpenAIBatches

AZURE_LIMITS = (100_000, 190 * 2**20)  # requests, bytes per input file (published: 100,000 and 200 MB)
FILE_PREFIX, FILE_SUFFIX = "giant-round-", ".jsonl"
# the line url of each wire (the Chat Completions one as the api-version samples write it)
AZURE_LINE_URLS = {"/chat/completions": "/chat/completions", "/responses": "/v1/responses"}


class AzureBatches(OpenAIBatches):
    """``/openai/files`` (purpose ``batch``) and ``/openai/batches`` of an Azure OpenAI resource."""

    limits = AZURE_LIMITS
    tagged = True  # by the input file's name
    name = "azure"
    routes = "/openai"

    def _upload_name(self, tag: str) -> str:
        return f"{FILE_PREFIX}{tag}{FILE_SUFFIX}"

    def _create_options(self, tag: str) -> dict[str, Any]:
        return {}

    async def _tag(self, batch: Any) -> str | None:
        if not batch.input_file_id:
            return None
        try:
            upload = await self.client.files.retrieve(batch.input_file_id)
        except Exception as exc:
            if getattr(exc, "status_code", None) == 404:  # its input file deleted: not one of ours to adopt
                return None
            raise
        name = str(getattr(upload, "filename", "") or "")
        if name.startswith(FILE_PREFIX) and name.endswith(FILE_SUFFIX):
            return name[len(FILE_PREFIX) : -len(FILE_SUFFIX)]
        return None
