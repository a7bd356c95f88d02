"""The paper's random-region ablation, as the released code runs it: GIANT's loop with one tool,
``view_random_region()``, that takes no arguments and shows the next of the attempt's random tissue
squares (``slides.random_regions``: at least 1000 level-0 px, at least 25% tissue, from the slide's
CLAM patch grid with its benchmark's preset).

Each attempt draws ``max_steps`` squares up front (the released agent draws them when it starts, and
a rerun starts a new agent); a call after the last one gets a text saying no regions are left
(reachable when every call of a reply is served, ``serve_calls: all``). Each square comes back as
GIANT's crops do (its long side ``image_size``, the guides, ``detail: high``), with the function calls
left (T - step - 1, as the released reminder counts) and the squares left. The system prompt and texts
(``experiments.prompts``) are the platform's own wording of the released ones; their hash goes into
the experiment's answer settings.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import openslide

from giant_assets.agents.providers import ToolSpec
from giant_assets.experiments.prompts import RANDOM_REGION_TOOL_DESCRIPTION
from giant_assets.slides.clam import clam_patches, load_preset, preset_for
from giant_assets.slides.random_regions import random_boxes

VIEW_RANDOM_REGION = ToolSpec(
    name="view_random_region",
    description=RANDOM_REGION_TOOL_DESCRIPTION,
    parameters={"type": "object", "properties": {}, "required": []},
)


def region_seed(seed: int, benchmark: str, benchmark_id: str, run_index: int) -> int:
    """The random squares' generator seed for one (experiment seed, item, run): stable across processes."""
    digest = hashlib.sha256(f"regions|{seed}|{benchmark}|{benchmark_id}|{run_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class RegionQueue:
    """One attempt's random squares, served in order."""

    boxes: list[tuple[int, int, int, int]]
    served: int = field(default=0)

    def next(self) -> tuple[int, int, int, int] | None:
        if self.served >= len(self.boxes):
            return None
        self.served += 1
        return self.boxes[self.served - 1]

    @property
    def left(self) -> int:
        return len(self.boxes) - self.served


def tissue_coords(slide: openslide.OpenSlide, benchmark: str) -> np.ndarray:
    """The slide's CLAM patch grid with its benchmark's preset (blocking: run in a thread)."""
    return clam_patches(slide, load_preset(preset_for(benchmark)))


def draw_queue(
    coords: np.ndarray, slide: openslide.OpenSlide, n: int, rng: np.random.Generator
) -> RegionQueue:
    """``n`` random tissue squares for one attempt; raises ``NoTissueRegion`` when none qualifies."""
    width, height = (int(v) for v in slide.dimensions)
    return RegionQueue(random_boxes(coords, (width, height), n, rng))
