"""What a wrong answer most likely got wrong, for the checks' feedback (``translab.checks``) and the report.

One module a family: ``counts`` (the parameter count's usual mistakes, and the smallest combinations of them that
give a student's numbers), ``count_readings`` (what a count no combination explains measurably is: the variables its
error changes with, the formula it fits, another configuration's count), ``weights`` (why reference weights do not
load) and ``keys`` (the stable key of every misconception a check names, described for the report).  What an output
tensor measurably is lives in ``translab.relations``.
"""
from __future__ import annotations

from .count_readings import (LOCATE_BASE, LOCATE_STEPS, MONOMIALS, configuration_text, configurations_counting,
                             describe_fit, error_dependence, fit_configs, fit_count, fixed_values, ignored_variables,
                             locate_text, other_readings, ratio_reading, right_coefficients, value_giving)
from .counts import (COUNT_MISTAKES, MISTAKES_BY_KEY, NHEAD_PROBES, PROBES, WHY_NHEAD, CountMistake, close_enough,
                     count_with_mistakes, describe_explanations, explain_counts, mistaken_count, right_count)
from .keys import KEYS, NOT_MISCONCEPTIONS, describe, is_valid_key
from .weights import state_mismatch

__all__ = ["COUNT_MISTAKES", "KEYS", "LOCATE_BASE", "LOCATE_STEPS", "MISTAKES_BY_KEY", "MONOMIALS", "NHEAD_PROBES",
           "NOT_MISCONCEPTIONS", "PROBES", "WHY_NHEAD", "CountMistake", "close_enough", "configuration_text",
           "configurations_counting", "count_with_mistakes", "describe", "describe_explanations", "describe_fit",
           "error_dependence", "explain_counts", "fit_configs", "fit_count", "fixed_values", "ignored_variables",
           "is_valid_key", "locate_text", "mistaken_count", "other_readings", "ratio_reading", "right_coefficients",
           "right_count", "state_mismatch", "value_giving"]
