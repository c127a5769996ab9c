"""Plots a reader understands at a glance (issue 33.7): every mark is in a legend, titles name what is plotted,
and the IFEval chart shows n without letting one-prompt types set its scale."""

from __future__ import annotations

from rubric_reward.recipes.grpo import plots


def _captured(monkeypatch):
    figures = []
    original = plots._save

    def keep(fig, path):
        figures.append(fig)
        return original(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_monitor_legend_explains_the_watch_shading(tmp_path, monkeypatch):
    figures = _captured(monkeypatch)
    records = [{"step": 0, "mean": 0.6, "ci_low": 0.5, "ci_high": 0.7, "mean_length_tokens": 50},
               {"step": 5, "mean": 0.7, "ci_low": 0.6, "ci_high": 0.8, "mean_length_tokens": 40,
                "training_mean": 0.8, "watch": ["length fell"]},
               {"step": 10, "mean": 0.75, "ci_low": 0.6, "ci_high": 0.85, "mean_length_tokens": 30,
                "training_mean": 0.9, "watch": ["length fell"]}]
    plots.plot_monitor(tmp_path / "monitor.png", records)
    top, bottom = figures[-1].axes
    labels = top.get_legend_handles_labels()[1]
    assert labels.count("flagged by the reward-hacking watch") == 1  # once, however many checkpoints
    assert "selection split" in top.get_title() and "score" in top.get_title()
    assert "length" in bottom.get_title()


def test_score_histogram_title_names_what_is_plotted(tmp_path, monkeypatch):
    figures = _captured(monkeypatch)
    plots.plot_score_distributions(tmp_path / "s.png", {"judge": ([0.2, 0.5], [0.6, 0.9])}, metric="score")
    [ax] = figures[-1].axes
    assert "score per prompt" in ax.get_title() and "base vs best" in ax.get_title() and "judge" in ax.get_title()


def test_ifeval_chart_shows_n_and_few_instruction_types_do_not_set_the_scale(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from rubric_reward.evaluation import ifeval_report as r

    saved = []
    monkeypatch.setattr(plt.Figure, "savefig", lambda self, *a, **k: saved.append(self))
    group = r.GroupComparison
    fields = group.__dataclass_fields__
    def g(name, n, delta):
        values = {"name": name, "n": n, "base": 0.5, "trained": 0.5 + delta, "delta": delta, "b": 0, "c": 0,
                  "pvalue": 1.0, "pvalue_holm": 1.0}
        return group(**{k: v for k, v in values.items() if k in fields},
                     **{k: None for k in fields if k not in values})
    level = r.LevelComparison(n=40, base=0.5, trained=0.55, delta=0.05, ci_low=-0.05, ci_high=0.15, b=1, c=3,
                              pvalue=0.6)
    comparison = r.ModeComparison("strict", level, level, [g("big:up", 30, 0.10), g("big:down", 20, -0.05),
                                                           g("one:prompt", 1, 1.0)], [])
    r.write_delta_chart(tmp_path / "c.png", comparison)
    ax = saved[-1].axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "one:prompt (n=1, +100)" in ticks and "big:up (n=30)" in ticks
    assert ax.get_xlim()[1] < 20  # scaled to the 10-point move, not the one-prompt 100
    assert any("too few" in t.get_text() for t in ax.get_legend().get_texts())
    assert "40 prompts" in ax.get_title()
