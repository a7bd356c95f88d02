"""biomlbench's ``grade_helpers`` names, so scripts written for it import the same classes from here."""

from giant_assets.grading.graders import Grader, InvalidSubmissionError
from giant_assets.grading.report import TaskReport

__all__ = ["Grader", "InvalidSubmissionError", "TaskReport"]
