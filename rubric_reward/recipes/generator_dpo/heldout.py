"""The dpo-loop's held-out evaluation: do the trained generator's rubrics agree with known labels more
often than the base generator's, on prompts neither was trained on?

For every held-out prompt (by default the held-out side of the bundled labelled pairs) each generator
writes ``samples`` rubrics; a fixed judge (the meta-judge unless ``heldout.judge``) scores both responses
of each labelled pair with the rubric, and the pair's **outcome** is 1 when the rubric scores the
better response higher, 0 when it scores it lower and 0.5 for a tie; a prompt without a valid rubric
expresses no preference, so its pairs are ties too (and count against the validity rate). A pair whose
scoring failed for either generator is left out of the comparison, and counted.

Reported per generator: rubric validity rate, agreement (mean outcome) with a bootstrap interval over
prompts, correct / tie / wrong counts, mean criteria per rubric, the share of checkable criteria
(programmatic checks), and the exploitable share (:mod:`.gaming`). Between them: the difference in
agreement with a paired bootstrap interval resampling prompts, and McNemar's exact test on the pairs
whose outcome differs between the two generators (trained better vs base better; the plain McNemar
test when outcomes are 0/1). The verdict says "no difference distinguishable from zero" unless the
interval excludes 0 and p < 0.05.

**What moved, per instruction type** (:func:`type_stats`, ``by_type`` in ``heldout.json``, the second table of
``summary.md``): every labelled prompt carries its instructions (IFEval checks with kwargs); for each instruction
type (the check id without its ``ifeval:`` prefix) and each generator, over the (prompt, sample) rubrics of the
prompts with that instruction: the share that is valid, that carries a check of the instruction's type (the right
check), that carries it with the instruction's own values (the exact check), and the exploitable share of the
valid ones. Right check, exact check and validity are paired 0/1 outcomes on the same prompts, so each gets
McNemar's exact test (trained vs base); the exploitable share is over each generator's own valid rubrics, so it
gets none.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...io.journal import write_atomic
from ...rubric import Rubric
from ...evaluation import ci_text, fmt, interval_dict

__all__ = ["compare_on_heldout", "generator_outcomes", "instruction_type", "render_heldout_table", "render_type_table",
           "summarize_outcomes", "type_stats"]

OUTCOMES_VERSION = "1"


def compare_on_heldout(config: Any, *, base: Any, trained: Any, base_dir: Path, trained_dir: Path,
                       cache: str | None) -> dict[str, Any]:
    """Base vs trained generator (judge specs) on the held-out prompts of ``config`` (a LoopConfig);
    the base outcomes are computed once in ``base_dir`` and reused by later iterations."""
    from .labelled_pairs import load_rows

    h = config.heldout
    rows = load_rows(h.prompts)[: h.limit]
    if not rows:
        raise ValueError(f"loop.heldout: no held-out prompts with labelled pairs in {h.prompts}")
    base_out = generator_outcomes(base, rows, config, base_dir, cache)
    trained_out = generator_outcomes(trained, rows, config, trained_dir, cache)
    result = summarize_outcomes(base_out, trained_out, h)
    train_prompts = {" ".join(str(r.prompt).split()) for r in load_rows(config.prompts)} \
        if config.prompts != "offline" else set()
    result["leaked"] = sum(1 for r in rows if " ".join(str(r.prompt).split()) in train_prompts)
    result["by_type"] = type_stats(base_out, trained_out, rows)
    result["prompts"] = {"source": h.prompts, "n": len(rows), "pairs": sum(len(r.labels) for r in rows)}
    return result


def generator_outcomes(spec: Any, rows: Sequence[Any], config: Any, folder: Path, cache: str | None) -> dict:
    """One generator's held-out rubrics (journalled in ``folder/rubrics.jsonl``) and their outcomes
    (``folder/outcomes.json``, reused when the generator, prompts and judge are unchanged)."""
    from ...generation.generate import generate_rubrics
    from ...generation.generator import RubricGenerator

    h = config.heldout
    folder.mkdir(parents=True, exist_ok=True)
    gen = RubricGenerator(spec, config=config.generation, temperature=h.temperature)
    key = json.dumps([OUTCOMES_VERSION, gen.fingerprint(), [(r.id, r.prompt, list(r.labels)) for r in rows],
                      h.samples, h.exploit_threshold, str(h.judge or config.meta_judge)], sort_keys=True, default=str)
    outcomes_file = folder / "outcomes.json"
    if outcomes_file.is_file():
        known = json.loads(outcomes_file.read_text())
        if known.get("key") == key:
            return known
    generate_rubrics(rows, folder / "rubrics.jsonl", generator=gen.judge, config=config.generation, cache=cache,
                     samples=h.samples, progress=config.progress)
    rubrics = _read_rubrics(folder / "rubrics.jsonl")
    result = asyncio.run(_score_all(rows, rubrics, h.judge or config.meta_judge, h, cache))
    result.update(key=key, generator=gen.name, cut_off=_cut_off(folder / "rubrics.jsonl"))
    write_atomic(outcomes_file, json.dumps(result, default=str) + "\n")
    return result


def _read_rubrics(path: Path) -> dict[tuple[str, int], tuple[Rubric | None, str | None]]:
    from ...io.rows import numbered_jsonl_rows

    out: dict[tuple[str, int], tuple[Rubric | None, str | None]] = {}
    for _, row in numbered_jsonl_rows(path):
        rubric = Rubric.from_obj(row["rubric"], source=f"{path}: {row['id']}") if row.get("ok") else None
        out[(str(row["id"]), int(row.get("sample_index", 0)))] = (rubric, row.get("error"))
    return out


def _cut_off(path: Path) -> dict[str, int]:
    """Rubrics read from an answer cut off at max_tokens (``kept``) and rows left without a rubric whose last
    answer was cut off (``lost``)."""
    from ...generation.parsing import CUT_OFF, CUT_OFF_KEPT
    from ...io.rows import numbered_jsonl_rows

    rows = [row for _, row in numbered_jsonl_rows(path)]
    return {"kept": sum(any(str(r).startswith(CUT_OFF_KEPT) for r in row.get("repairs") or ()) for row in rows),
            "lost": sum(CUT_OFF in str(row.get("error") or "") for row in rows)}


async def _score_all(rows: Sequence[Any], rubrics: Mapping[tuple[str, int], tuple[Rubric | None, str | None]],
                     judge_spec: Any, h: Any, cache_path: str | None) -> dict[str, Any]:
    from ...judges.cache import SQLiteCache
    from ...scorer import Scorer
    from ...generation.generator import one_judge

    cache = SQLiteCache(cache_path) if cache_path else None
    scorer = Scorer(judge=one_judge(judge_spec, base_url=None, cache=cache, temperature=None, generate=False))
    try:
        parts = await asyncio.gather(*(_score_one(scorer, row, s, *rubrics.get((row.id, s), (None, "not generated")), h)
                                       for row in rows for s in range(h.samples)))
    finally:
        await scorer.aclose()
        if cache is not None:
            cache.close()
    return {"rubrics": [p[0] for p in parts], "pairs": [x for p in parts for x in p[1]]}


async def _score_one(scorer: Any, row: Any, sample: int, rubric: Rubric | None, error: str | None,
                     h: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from .gaming import adegenerate_scores
    from ...generation.metajudge import aoutcome_agreement

    info: dict[str, Any] = {"id": row.id, "sample": sample, "ok": rubric is not None, "error": error}
    if rubric is None:
        return info, [{"id": row.id, "pair": n, "sample": sample, "credit": 0.5, "no_rubric": True}
                      for n in range(len(row.labels))]
    outcome, gaming = await asyncio.gather(aoutcome_agreement(row.prompt, rubric, row.labels, scorer),
                                           adegenerate_scores(scorer, row.prompt, rubric, row.instructions,
                                                              h.exploit_threshold))
    usable = [n for n, p in enumerate(row.labels) if str(p.get("winner", "")).strip().lower() != "tie"]
    pairs = [{"id": row.id, "pair": n, "sample": sample, "credit": rec["credit"], "score_a": rec["score_a"],
              "score_b": rec["score_b"], "label": rec["label"], **({"error": rec["error"]} if rec.get("error") else {})}
             for n, rec in zip(usable, outcome.pairs, strict=True)]
    n_checks = sum(1 for c in rubric.criteria if c.check)
    info.update(n_criteria=len(rubric.criteria), n_checks=n_checks, exploitable=gaming["exploitable"],
                exploited_by=gaming["by"], degenerate_scores=gaming["scores"], rubric=rubric.to_dict())
    return info, pairs


# ------------------------------------------------------------------------------------------ statistics


def _per_pair(outcomes: Mapping[str, Any]) -> dict[tuple[str, int], float | None]:
    """(prompt id, pair) -> mean outcome over the samples (None when any sample's scoring failed)."""
    acc: dict[tuple[str, int], list[float | None]] = {}
    for p in outcomes["pairs"]:
        acc.setdefault((p["id"], p["pair"]), []).append(p["credit"])
    return {k: None if any(v is None for v in vs) else sum(vs) / len(vs) for k, vs in acc.items()}


def _rubric_stats(outcomes: Mapping[str, Any]) -> dict[str, Any]:
    rubrics = outcomes["rubrics"]
    ok = [r for r in rubrics if r["ok"]]
    n_crit = sum(r["n_criteria"] for r in ok)
    return {"rubrics": len(rubrics), "valid": len(ok), "validity": len(ok) / len(rubrics) if rubrics else None,
            "cut_off": outcomes.get("cut_off"),
            "mean_criteria": n_crit / len(ok) if ok else None,
            "checkable_share": sum(r["n_checks"] for r in ok) / n_crit if n_crit else None,
            "exploitable": sum(1 for r in ok if r["exploitable"]),
            "exploitable_share": sum(1 for r in ok if r["exploitable"]) / len(ok) if ok else None}


def summarize_outcomes(base: Mapping[str, Any], trained: Mapping[str, Any], h: Any) -> dict[str, Any]:
    """The held-out comparison (see the module docstring) as the ``heldout.json`` mapping."""
    import numpy as np

    from ...stats import bootstrap_ci, mcnemar_exact, paired_bootstrap_ci

    b, t = _per_pair(base), _per_pair(trained)
    keys = sorted(set(b) & set(t))
    both = [k for k in keys if b[k] is not None and t[k] is not None]
    clusters = [k[0] for k in both]
    out: dict[str, Any] = {"n_pairs": len(both), "n_prompts": len(set(clusters)), "n_failed": len(keys) - len(both),
                           "confidence": h.confidence, "exploit_threshold": h.exploit_threshold, "samples": h.samples}
    for name, data, per in (("base", base, b), ("trained", trained, t)):
        vals = np.array([per[k] for k in both], dtype=float)
        iv = bootstrap_ci(vals, np.mean, n_resamples=h.n_resamples, confidence=h.confidence, seed=h.seed,
                          clusters=clusters) if both else None
        out[name] = {"generator": data.get("generator"), "agreement": float(vals.mean()) if both else None,
                     "ci": interval_dict(iv) if iv else None, "correct": int((vals > 0.5).sum()),
                     "ties": int((vals == 0.5).sum()), "wrong": int((vals < 0.5).sum()), **_rubric_stats(data)}
    if both:
        bv, tv = np.array([b[k] for k in both]), np.array([t[k] for k in both])
        diff = interval_dict(paired_bootstrap_ci(tv, bv, n_resamples=h.n_resamples, confidence=h.confidence,
                                                 seed=h.seed, clusters=clusters))
        test = mcnemar_exact((tv > bv).astype(float), (bv > tv).astype(float))
        out["difference"] = {"estimate": diff["estimate"], "low": diff["low"], "high": diff["high"]}
        out["pvalue"] = test.pvalue
        out["discordant"] = {"trained_better": test.b, "base_better": test.c}
    else:
        out["difference"] = {"estimate": None, "low": None, "high": None}
        out["pvalue"] = None
        out["discordant"] = {"trained_better": 0, "base_better": 0}
    out["verdict"] = _verdict(out)
    return out


def _verdict(r: Mapping[str, Any]) -> str:
    d, p, disc = r["difference"], r["pvalue"], r["discordant"]
    if d["estimate"] is None:
        return "no pair could be compared"
    counts = f"trained better on {disc['trained_better']} pairs, base better on {disc['base_better']}"
    if disc["trained_better"] + disc["base_better"] == 0:
        return "the two generators' rubrics decide every pair alike: no difference"
    diff = f"{ci_text(d, signed=True)}, McNemar p = {p:.3g} ({counts})"
    if d["low"] is not None and d["low"] > 0 and p < 0.05:
        return f"the trained generator agrees more with the labels: {diff}"
    if d["high"] is not None and d["high"] < 0 and p < 0.05:
        return f"the trained generator agrees less with the labels: {diff}"
    if p < 0.05:
        return f"mixed evidence, not distinguishable from zero: the paired interval includes 0 although McNemar " \
               f"rejects equality: {diff}"
    return f"no difference distinguishable from zero: {diff}"


def render_heldout_table(results: Sequence[Mapping[str, Any]]) -> str:
    """The loop summary's markdown: one row for the base generator, one per iteration, and the verdicts."""
    if not results:
        return "# Held-out evaluation\n\nNo iteration has finished its held-out stage yet.\n"
    first = results[0]
    conf = int(round(100 * first["confidence"]))

    def pct(x: Any) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    lines = ["# Held-out evaluation", "",
             f"{first['prompts']['n']} held-out prompts ({first['prompts']['source']}, {first['prompts']['pairs']} "
             f"labelled pairs); outcome 1 / 0.5 / 0 when the rubric scores the better response higher / the same / "
             f"lower (no valid rubric: a tie). {conf}% bootstrap intervals over prompts; McNemar's exact test on "
             f"the pairs whose outcome differs. Exploitable: a degenerate response scores >= "
             f"{first['exploit_threshold']:g}.", "",
             "| generator | valid rubrics | pairs compared | agreement | CI | correct / tie / wrong | difference vs base | "
             "CI | McNemar p | criteria per rubric | checkable share | exploitable share |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def row(name: str, g: Mapping[str, Any], r: Mapping[str, Any] | None) -> str:
        d = r["difference"] if r else None
        compared = f"{r['n_pairs']} ({r['n_failed']} failed)" if r else str(first["n_pairs"] + first["n_failed"])
        return (f"| {name} | {g['valid']}/{g['rubrics']} | {compared} | {fmt(g['agreement'])} | "
                f"{ci_text(g['ci'], estimate=False)} | "
                f"{g['correct']} / {g['ties']} / {g['wrong']} | "
                f"{'-' if d is None else fmt(d['estimate'])} | {'-' if d is None else ci_text(d, estimate=False)} | "
                f"{'-' if r is None else fmt(r['pvalue'], 4)} | {fmt(g['mean_criteria'], 2)} | "
                f"{pct(g['checkable_share'])} | {pct(g['exploitable_share'])} |")

    lines.append(row("base", first["base"], None))  # the base row: its comparison with iteration 1
    for i, r in enumerate(results, 1):
        lines.append(row(f"iter_{i}", r["trained"], r))
    lines += [""] + [f"- iter_{i}: {r['verdict']}." for i, r in enumerate(results, 1)]
    sides = [("base", first["base"])] + [(f"iter_{i}", r["trained"]) for i, r in enumerate(results, 1)]
    cut = [f"{name} {g['cut_off']['kept']} / {g['cut_off']['lost']}" for name, g in sides if g.get("cut_off")]
    if cut:  # outcomes written before the count have none
        lines.append("- Answers cut off at max_tokens, read from their complete lines / left without a rubric: "
                     + ", ".join(cut) + ".")
    leaked = [i for i, r in enumerate(results, 1) if r.get("leaked")]
    if leaked:
        lines.append(f"- Warning: held-out prompts are among the training prompts ({results[0]['leaked']}): "
                     "these rows are not held out.")
    by_type = render_type_table(results)
    return "\n".join(lines) + "\n" + ("\n" + by_type if by_type else "")


# ------------------------------------------------------------------------------------------ per instruction type


def instruction_type(check: str) -> str:
    """``ifeval:punctuation:no_comma`` -> ``punctuation:no_comma`` (``ifeval_loose:`` alike)."""
    head, _, rest = str(check).partition(":")
    return rest if head in ("ifeval", "ifeval_loose") and rest else str(check)


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return " ".join(value.lower().split())
    if isinstance(value, list | tuple):
        return sorted((_norm(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    return value


def _carries(rubric: Mapping[str, Any] | None, instruction: Mapping[str, Any]) -> tuple[bool, bool]:
    """(right, exact): ``rubric`` has a positive check of ``instruction``'s type / with its values too."""
    if not rubric:
        return False, False
    want = instruction_type(instruction["check"])
    kwargs = _norm(instruction.get("kwargs") or {})
    right = exact = False
    for c in rubric.get("criteria", ()):
        if c.get("check") and instruction_type(c["check"]) == want and float(c.get("weight", 1)) > 0:
            right = True
            exact = exact or _norm(c.get("kwargs") or {}) == kwargs
    return right, exact


def _units(outcomes: Mapping[str, Any], rows: Sequence[Any]) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    """(type, prompt id, instruction index, sample) -> {valid, right, exact, exploitable} of one generator."""
    rubrics = {(r["id"], r.get("sample", 0)): r for r in outcomes["rubrics"]}
    samples = sorted({k[1] for k in rubrics}) or [0]
    out: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for row in rows:
        for n, ins in enumerate(row.instructions or ()):
            for s in samples:
                r = rubrics.get((row.id, s))
                ok = bool(r and r.get("ok"))
                right, exact = _carries(r.get("rubric") if ok else None, ins)
                out[(instruction_type(ins["check"]), row.id, n, s)] = {
                    "valid": ok, "right": right, "exact": exact, "exploitable": bool(ok and r.get("exploitable"))}
    return out


def type_stats(base: Mapping[str, Any], trained: Mapping[str, Any], rows: Sequence[Any]) -> dict[str, Any]:
    """``{type: {prompts, rubrics, base, trained, mcnemar}}`` plus ``"all"`` (every instruction of every prompt);
    see the module docstring."""
    from ...stats import mcnemar_exact

    b, t = _units(base, rows), _units(trained, rows)
    keys = sorted(set(b) & set(t))
    types = sorted({k[0] for k in keys})
    result: dict[str, Any] = {}
    for name in [*types, "all"]:
        ks = [k for k in keys if name == "all" or k[0] == name]

        def side(u: Mapping[Any, Mapping[str, Any]]) -> dict[str, Any]:
            valid = [k for k in ks if u[k]["valid"]]
            n = len(ks)
            return {"valid": len(valid), "right": sum(u[k]["right"] for k in ks),
                    "exact": sum(u[k]["exact"] for k in ks), "exploitable": sum(u[k]["exploitable"] for k in ks),
                    "valid_share": len(valid) / n if n else None,
                    "right_share": sum(u[k]["right"] for k in ks) / n if n else None,
                    "exact_share": sum(u[k]["exact"] for k in ks) / n if n else None,
                    "exploitable_share": sum(u[k]["exploitable"] for k in valid) / len(valid) if valid else None}

        tests = {}
        for what in ("right", "exact", "valid"):
            test = mcnemar_exact([float(t[k][what]) for k in ks], [float(b[k][what]) for k in ks])
            tests[what] = {"trained_better": test.b, "base_better": test.c, "pvalue": test.pvalue}
        result[name] = {"prompts": len({k[1] for k in ks}), "rubrics": len(ks), "base": side(b), "trained": side(t),
                        "mcnemar": tests}
    return result


def render_type_table(results: Sequence[Mapping[str, Any]]) -> str:
    """The per-instruction-type table (base, then each iteration), or "" when the results carry none."""
    if not results or "by_type" not in results[0]:
        return ""

    def pct(x: Any) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    def p(test: Mapping[str, Any]) -> str:
        return f"{fmt(test['pvalue'], 3)} (+{test['trained_better']}/-{test['base_better']})"

    lines = ["## What moved, per instruction type", "",
             "Share of held-out rubrics (prompt x sample, one unit per instruction) that are valid, carry a check of "
             "the instruction's type (right check), carry it with the instruction's values (exact check); the "
             "exploitable share is of the valid rubrics. McNemar's exact test vs base on the paired 0/1 outcomes "
             "(+ trained better / - base better); none for the exploitable share (different denominators).", "",
             "| instruction type | prompts | generator | valid | right check | exact check | exploitable | "
             "McNemar p: right | exact | valid |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    types = [k for k in results[0]["by_type"] if k != "all"] + ["all"]
    for name in types:
        first = results[0]["by_type"].get(name)
        if first is None:
            continue
        g = first["base"]
        lines.append(f"| {name} | {first['prompts']} | base | {pct(g['valid_share'])} | {pct(g['right_share'])} "
                     f"({g['right']}/{first['rubrics']}) | {pct(g['exact_share'])} ({g['exact']}/{first['rubrics']}) | "
                     f"{pct(g['exploitable_share'])} | - | - | - |")
        for i, r in enumerate(results, 1):
            s = r.get("by_type", {}).get(name)
            if s is None:
                continue
            g, m = s["trained"], s["mcnemar"]
            lines.append(f"| {name} | {s['prompts']} | iter_{i} | {pct(g['valid_share'])} | {pct(g['right_share'])} "
                         f"({g['right']}/{s['rubrics']}) | {pct(g['exact_share'])} ({g['exact']}/{s['rubrics']}) | "
                         f"{pct(g['exploitable_share'])} | {p(m['right'])} | {p(m['exact'])} | {p(m['valid'])} |")
    return "\n".join(lines) + "\n"
