"""Reliability and comparison statistics for judges and rewards.

Pure functions: sequences or numpy arrays in, floats or small frozen
dataclasses out. ``None`` marks missing inputs and undefined results;
see ``rubric_reward.stats._common`` for the conventions.
"""

from ._common import Interval, TestResult
from .agreement import (
    AgreementSummary,
    OptionScores,
    adjacent_accuracy,
    agreement_summary,
    cohen_kappa,
    earth_movers_distance,
    exact_accuracy,
    kendall,
    krippendorff_alpha,
    mean_bias,
    per_option_precision_recall,
    quadratic_weighted_kappa,
    spearman,
)
from .inference import (
    McNemarResult,
    bootstrap_ci,
    cohens_d,
    holm_adjust,
    mcnemar_exact,
    paired_bootstrap_ci,
    paired_permutation_test,
    wilcoxon_signed_rank,
)

__all__ = [
    "AgreementSummary",
    "Interval",
    "McNemarResult",
    "OptionScores",
    "TestResult",
    "adjacent_accuracy",
    "agreement_summary",
    "bootstrap_ci",
    "cohen_kappa",
    "cohens_d",
    "earth_movers_distance",
    "exact_accuracy",
    "holm_adjust",
    "kendall",
    "krippendorff_alpha",
    "mcnemar_exact",
    "mean_bias",
    "paired_bootstrap_ci",
    "paired_permutation_test",
    "per_option_precision_recall",
    "quadratic_weighted_kappa",
    "spearman",
    "wilcoxon_signed_rank",
]
