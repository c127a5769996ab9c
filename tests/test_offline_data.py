from rubric_reward import Scorer
from rubric_reward.data import load_offline_prompts
from rubric_reward.rubric import CriterionKind


def test_offline_prompts_load_with_mixed_rubrics():
    prompts = load_offline_prompts()
    assert len(prompts) == 12 and len({p.id for p in prompts}) == 12
    kinds = {c.kind for p in prompts for c in p.rubric}
    assert kinds == {CriterionKind.BINARY, CriterionKind.ORDINAL, CriterionKind.NOMINAL, CriterionKind.CHECK}
    assert all(p.rubric.judged and any(not c.is_judged for c in p.rubric) for p in prompts)
    assert any(c.weight < 0 for p in prompts for c in p.rubric)


def test_checks_of_an_offline_rubric_score_locally():
    haiku = next(p for p in load_offline_prompts() if p.id == "haiku-rain")
    checks_only = haiku.rubric.__class__(criteria=tuple(c for c in haiku.rubric if not c.is_judged))
    with Scorer(checks_only) as scorer:
        assert scorer.score(haiku.prompt, "rain drums on tin\nsilver beats\nthe roof sings").score == 1.0
        assert scorer.score(haiku.prompt, "rain, drums, tin").score == 0.0
