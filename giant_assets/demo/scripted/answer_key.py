"""What the demo's scripted model knows: the bundled sample's answers, and where each sample slide's
lesions lie, which tells apart the sample items that ask the same question of different slides."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.sample import SAMPLE_SLIDES, sample_csv_path


@dataclass(frozen=True)
class KeyItem:
    """One sample question: its prompt as sent, its answer (option number, or ISUP grade for panda),
    and its slide's level-0 size and lesion boxes (none when the sample has no such slide)."""

    prompt: str
    truth: int
    size: tuple[int, int] | None
    lesions: tuple[tuple[int, int, int, int], ...]


@lru_cache(maxsize=1)
def sample_key() -> tuple[KeyItem, ...]:
    """The bundled sample CSV's questions with their answers and their generated slides' lesions."""
    items, _ = parse_items(read_csv_strings(sample_csv_path()), "sample")
    designs = {PurePosixPath(s.relpath).name: s.design for s in SAMPLE_SLIDES}
    key = []
    for row in items.itertuples():
        design = designs.get(PurePosixPath(str(row.image_path)).name)
        key.append(
            KeyItem(
                prompt=str(row.prompt),
                truth=int(row.truth_label),
                size=(design.width, design.height) if design else None,
                lesions=tuple(tuple(b.box_xywh) for b in design.lesions) if design else (),
            )
        )
    return tuple(key)


def key_answer(
    prompt: str, at: tuple[float, float] | None = None, size: tuple[int, int] | None = None
) -> int | None:
    """The sample's answer to ``prompt`` (the request's first user text, which starts with the question
    as the platform renders it), or None when the question is not the sample's or stays ambiguous.

    ``at``: the level-0 point the model looked at and ``size`` the slide's level-0 size, when the request
    states them (GIANT's crops); then only items whose slide has that size and a lesion there count.
    Without them, the question alone must decide (several sample slides share some questions).
    """
    candidates = [k for k in sample_key() if prompt.startswith(k.prompt)]
    if at is not None and size is not None:
        x, y = at
        candidates = [
            k
            for k in candidates
            if k.size == size
            and any(bx <= x <= bx + bw and by <= y <= by + bh for bx, by, bw, bh in k.lesions)
        ]
    answers = {k.truth for k in candidates}
    return answers.pop() if len(answers) == 1 else None
