"""safe_json.json_depth against the depth of the parsed value, counted by a recursive walk here."""

from __future__ import annotations

import json
import random

from giant_assets.judges.safe_json import MAX_JSON_DEPTH, json_depth


def nesting(value: object) -> int:
    """Levels of arrays/objects in a parsed JSON value (a scalar is 0)."""
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


def document(rng: random.Random, depth: int) -> object:
    """A random value nesting at most ``depth`` levels, with brackets and escaped quotes in its strings."""
    if depth == 0 or rng.random() < 0.02:
        return rng.choice([1, None, 'a "[{" b', "]]}}", "\\[", 2.5])
    # one deep child and a shallow one among scalars: linear size, varied depths
    children = [document(rng, d) for d in rng.sample([depth - 1, rng.randint(0, 3), 0, 0], 3)]
    if rng.random() < 0.5:
        return children
    return {f'k{i}"]': child for i, child in enumerate(children)}


def test_depth_is_the_nesting_of_the_parsed_value_whatever_the_strings_hold() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(120):
        text = json.dumps(document(rng, rng.randint(1, 120)))
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # beyond the shortcut for small texts
            assert json_depth(text) == nesting(json.loads(text)), text[:200]
            checked += 1
    assert checked > 30
    deep = "[" * 100_000 + "]" * 100_000
    assert json_depth(deep) == 100_000 and json_depth('"' + deep + '"') == 0
    assert json_depth("[" * 70 + "]" * 70 + "[{}]" * 40) == 70  # the deepest run, not the sum of runs
