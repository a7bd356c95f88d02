"""Experiments: named run configurations declared in YAML, bound to the settings that decide answers."""

from giant_assets.experiments.spec import ANSWER_FIELDS, SCORING_FIELDS, SPEED_FIELDS, Experiment

__all__ = ["ANSWER_FIELDS", "SCORING_FIELDS", "SPEED_FIELDS", "Experiment"]
