"""Comparing variants over seeds: find runs, group them, summarise, write tables and a figure."""

from ..stats import PairedRatio, Summary, paired_ratio, summarize, t_quantile_975
from .runs import CompareError, Group, Run, find_run_dirs, group_runs, load_run
from .summary import Comparison, compare

__all__ = [
    "CompareError",
    "Comparison",
    "Group",
    "PairedRatio",
    "Run",
    "Summary",
    "compare",
    "find_run_dirs",
    "group_runs",
    "load_run",
    "paired_ratio",
    "summarize",
    "t_quantile_975",
]
