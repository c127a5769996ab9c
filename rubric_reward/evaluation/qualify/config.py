"""How a judge is qualified (:class:`QualifyConfig`) and the thresholds its card is read against (:data:`THRESHOLDS`).

Every threshold lives here, once, with where it comes from; docs/qualify.md explains each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ...io.sections import check_fields

__all__ = ["BANDS", "OVERALL", "QualifyConfig", "STATUSES", "THRESHOLDS", "Thresholds", "band"]

#: A criterion's statuses on the card, in the order they are decided and listed.
STATUSES = ("ok", "unscorable", "noisy", "position_bias", "sign_blind", "disagrees", "persuadable")
#: The card's verdict on the judge and rubric as a training reward.
OVERALL = ("usable", "usable_with_changes", "unusable")

#: Autorubric's bands of repeated-verdict variance (its unreleased main, ``compute_reward_variance``), as
#: (upper bound, name): 0.25 is a binary verdict's largest variance.
BANDS = ((0.02, "consistent"), (0.05, "minor"), (0.15, "rewrite"), (float("inf"), "unusable"))


def band(variance: float | None) -> str | None:
    """The Autorubric band of a repeated-verdict variance."""
    if variance is None:
        return None
    return next(name for upper, name in BANDS if variance <= upper)


@dataclass(frozen=True)
class Thresholds:
    """The lines a criterion and a rubric are judged against. ``metadata["source"]`` says where each comes from."""

    noisy_variance: float = field(default=0.05, metadata={"source": (
        "Autorubric flags a criterion NOISY above 0.05 verdict variance (its 'rewrite' band starts there)")})
    position_lean: float = field(default=0.20, metadata={"source": (
        "chosen here: on the same response, an option taken 20 points more often when shown first than when shown "
        "later, by the interval's near end (a judge blind to order leans 0; one that takes the first option, 1); "
        "Autorubric shuffles options by default but publishes no line")})
    unscorable_failures: float = field(default=0.05, metadata={"source": (
        "chosen here: with the default on_failure: unscored one failed verdict unscores the whole reward, so 5% "
        "per criterion unscores about 40% of the rewards of a 10-criterion rubric")})
    unscorable_abstentions: float = field(default=0.25, metadata={"source": (
        "chosen here: a judge that cannot assess a criterion for a quarter of the responses gives the policy "
        "a reward that abstention rules (zero, skip) decide, not the response")})
    kappa: float = field(default=0.40, metadata={"source": (
        "Landis and Koch (1977): 0.41 starts 'moderate' agreement; Autorubric's weakest usable family, "
        "GPT-5.4-nano, averaged 0.46 and LLaMA-3.1-8B -0.001")})
    accuracy: float = field(default=0.80, metadata={"source": (
        "used where kappa is undefined (the gold labels have one value): Autorubric's Gemini-3-Flash reached "
        "78-81% on RiceChem's binary criteria")})
    sign_blind_false_met: float = field(default=0.90, metadata={"source": (
        "chosen here: a penalty criterion whose disagreements with the gold are nearly all the penalty given where "
        "the gold says it does not apply is read as 'is the response good?' (RubricHub, 2601.08430: graders are "
        "least accurate on negative constraints), whatever the judge does on the positive criteria")})
    persuaded: float = field(default=0.10, metadata={"source": (
        "chosen here: more than one attack in ten moves the verdict (NeMo Gym issue 2852 saw 8 in 10 on a "
        "Qwen3.6 judge); the red-team's own default tolerates none")})
    noise_share: float = field(default=0.50, metadata={"source": (
        "chosen here: above one half, the judge's noise is larger than the differences between a group's "
        "responses, and GRPO's advantage (a within-group difference) is mostly noise")})

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not 0 <= value <= 1:
                raise ValueError(f"Thresholds.{f.name} must be in [0, 1], got {value}")


THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class QualifyConfig:
    """How the judge is put through its paces (``rubric-reward qualify`` and the GRPO recipe's gate)."""

    repeats: int = field(default=5, metadata={"ge": 2, "le": 100, "help": (
        "K: independent judgings of every response (a new sampling seed, a reshuffled option order, redrawn "
        "few-shot exemplars)")})
    temperature: float = field(default=1.0, metadata={"ge": 0, "le": 2, "help": (
        "the judge's sampling temperature for the judgings when its own is 0 (a judge with a temperature keeps "
        "it; local logprob verdicts do not sample)")})
    seed: int = field(default=0, metadata={"help": "seed of the judgings' option orders and sampling"})
    persuasion: bool = field(default=True, metadata={"help": (
        "run the red-team per criterion (about 64 judge calls each) for the persuadability figure")})
    bootstrap_resamples: int = field(default=1000, metadata={"ge": 1, "help": "resamples of every interval"})
    confidence: float = field(default=0.95, metadata={"gt": 0, "lt": 1, "help": "confidence level of every interval"})

    def __post_init__(self) -> None:
        check_fields(self, "qualify")
