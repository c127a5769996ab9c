"""Training prompts for rubric-reward RL: AdvancedIF and generic prompt/rubric rows, and a three-way split.

Every loader returns :class:`PromptRows`, a list of plain dicts::

    {"id": str, "prompt": [{"role", "content"}, ...],   # messages ending on the user turn to answer
     "rubric": list[str] | dict | str,                   # questions, an inline rubric, or a rubric id
     "benchmark": str | None}                            # the stratum of the split

:func:`split_rows` cuts rows into **train** (the policy learns on it), **selection** (the checkpoint monitor
scores it to pick the best checkpoint) and **report** (the final base-vs-best comparison, never used for
selection): disjoint, seeded, stratified by benchmark, deterministic. :func:`to_dataset` turns rows into the
``datasets.Dataset`` TRL trains on (``prompt`` messages, ``rubric`` as a JSON string, which the reward's
rubric column reads).

AdvancedIF (``facebook/AdvancedIF``, CC-BY-NC-4.0: downloaded at run time, never bundled) is one CSV of
1,645 rows: ``conversation_history`` (JSON messages), ``prompt_metadata`` (JSON object whose ``rubrics`` is
usually a JSON string of a list of yes/no questions: decoded twice), ``benchmark_name``.

The paper's split. Autorubric trains on "402 AdvancedIF prompts" and validates on 81; the single-turn
benchmark (``complex_if_single_turn_v5``) has exactly 402 rows and 81 = ceil(0.2 x 402), so its validation
set was most likely a fifth of those 402 and it picked and reported on that same set. 402 train + 81
selection + a separate report split cannot all come from 402 rows, so the default
(:data:`ADVANCEDIF_DEFAULT_SPLIT`) keeps the paper's subset and its 81-prompt selection split, adds an equally
sized report split, and trains on the rest: **240 train / 81 selection / 81 report** of the 402 single-turn
rows. For the paper's exact 402 training prompts, pass ``benchmarks=None`` (all 1,645 rows, three
benchmarks) with ``train=402``: the splits are then stratified over the three benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..files import json_problem
from ..rows import DataError, DataSource, read_rows

__all__ = [
    "ADVANCEDIF",
    "ADVANCEDIF_BENCHMARKS",
    "ADVANCEDIF_DEFAULT_SPLIT",
    "MULTI_TURN",
    "SINGLE_TURN",
    "SPLITS",
    "SYSTEM_STEERABILITY",
    "DataError",
    "PromptRows",
    "SkippedRow",
    "Splits",
    "load_advancedif",
    "load_advancedif_splits",
    "load_prompt_rows",
    "rows_from_dataset",
    "split_rows",
    "to_dataset",
]

ADVANCEDIF = "facebook/AdvancedIF"
SINGLE_TURN = "complex_if_single_turn_v5"
MULTI_TURN = "carried_context_multi_turn_eval_v5"
SYSTEM_STEERABILITY = "system_steerability_v2"
ADVANCEDIF_BENCHMARKS = (SINGLE_TURN, MULTI_TURN, SYSTEM_STEERABILITY)
SPLITS = ("train", "selection", "report")

#: Default split of AdvancedIF (see the module docstring): the single-turn subset, 81 selection, 81 report,
#: the rest (240) for training.
ADVANCEDIF_DEFAULT_SPLIT: Mapping[str, Any] = {
    "benchmarks": (SINGLE_TURN,), "train": "rest", "selection": 81, "report": 81, "seed": 0,
}

OnBadRow = Literal["error", "skip"]
Size = int | float | str
ROLES = frozenset({"system", "developer", "user", "assistant"})


class PromptRows(list):
    """Rows (dicts: id, prompt, rubric, benchmark) plus where they came from and what was left out.

    ``skipped`` lists the bad rows dropped under ``on_bad_row="skip"``; ``filtered`` counts rows of
    benchmarks that were not asked for.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, source: str = "rows",
                 skipped: Sequence[SkippedRow] = (), filtered: int = 0) -> None:
        super().__init__(rows)
        self.source = source
        self.skipped: list[SkippedRow] = list(skipped)
        self.filtered = filtered
        self.columns: list[str] = []  # of the source's first row, for error messages

    def benchmarks(self) -> dict[str | None, int]:
        """Rows per benchmark, in order of first appearance."""
        return dict(Counter(r.get("benchmark") for r in self))

    def skipped_reasons(self) -> dict[str, int]:
        """Skipped rows per field that made them unusable."""
        return dict(Counter(s.field for s in self.skipped))

    def describe(self) -> str:
        """One line: how many rows, per benchmark, and how many were skipped (and why)."""
        per = ", ".join(f"{b}: {n}" for b, n in self.benchmarks().items())
        text = f"{self.source}: {len(self)} rows ({per})"
        if self.skipped:
            why = ", ".join(f"{f}: {n}" for f, n in self.skipped_reasons().items())
            text += f"; skipped {len(self.skipped)} bad rows ({why})"
        if self.filtered:
            text += f"; {self.filtered} rows of other benchmarks left out"
        return text


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A row left out under ``on_bad_row="skip"``: its number in the source (from 0), the field, why."""

    row: int
    field: str
    reason: str


class _BadRow(Exception):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field, self.reason = field, reason


# ------------------------------------------------------------------------------------------- AdvancedIF
def load_advancedif(
    source: str | Path | Any = ADVANCEDIF,
    *,
    benchmarks: Iterable[str] | str | None = None,
    on_bad_row: OnBadRow = "error",
    split: str = "train",
    revision: str | None = None,
    limit: int | None = None,
) -> PromptRows:
    """AdvancedIF rows from the hub (``datasets.load_dataset``) or a local CSV / JSONL / ``save_to_disk`` folder.

    ``source``: a hub id (default ``facebook/AdvancedIF``), a local path (an existing file or folder is
    always read locally), a ``datasets.Dataset`` or an iterable of mappings with the AdvancedIF columns.
    ``benchmarks``: keep only these ``benchmark_name`` values (None: all). ``on_bad_row``: ``"error"``
    raises :class:`DataError` naming the source, the row (from 0, header excluded) and the field of the
    first bad row (missing or undecodable rubric, undecodable conversation, a conversation not ending on a
    user turn); ``"skip"`` drops such rows and records them in ``PromptRows.skipped``. ``limit`` stops
    after that many kept rows. Ids are content hashes (``advif-<12 hex>``), so they do not depend on row order.
    """
    name, rows = _open(source, split=split, revision=revision)
    wanted = _benchmark_filter(benchmarks)
    out = PromptRows(source=name)
    seen: dict[str, int] = {}
    for row_no, raw in enumerate(rows):
        if limit is not None and len(out) >= limit:
            break
        if row_no == 0:
            out.columns = sorted(map(str, raw)) if isinstance(raw, Mapping) else []
        benchmark = _opt_str(raw.get("benchmark_name"))
        if wanted is not None and benchmark not in wanted:
            out.filtered += 1
            continue
        try:
            prompt = _conversation(raw.get("conversation_history"), "conversation_history")
            rubric = _advancedif_rubric(raw.get("prompt_metadata"))
        except _BadRow as bad:
            _bad(out, name, row_no, bad, on_bad_row)
            continue
        out.append({"id": _unique(_content_id(prompt, rubric, benchmark), seen), "prompt": prompt,
                    "rubric": rubric, "benchmark": benchmark})
    _check_found(out, name, wanted)
    return out


def load_advancedif_splits(source: str | Path | Any = ADVANCEDIF, *, on_bad_row: OnBadRow = "error",
                           **overrides: Any) -> Splits:
    """Load AdvancedIF and split it with :data:`ADVANCEDIF_DEFAULT_SPLIT` (240 / 81 / 81 single-turn rows).

    ``overrides`` replace any of its keys (``benchmarks``, ``train``, ``selection``, ``report``, ``seed``)
    and may add ``split``/``revision``/``limit`` for the loader and ``stratify`` for :func:`split_rows`.
    ``Splits.source`` then says what was loaded (rows per benchmark, bad rows skipped).
    """
    settings = {**ADVANCEDIF_DEFAULT_SPLIT, **overrides}
    load_keys = ("benchmarks", "split", "revision", "limit")
    rows = load_advancedif(source, on_bad_row=on_bad_row, **{k: settings.pop(k) for k in load_keys if k in settings})
    return split_rows(rows, **settings)


def _advancedif_rubric(metadata: Any) -> list[str]:
    field_name = "prompt_metadata"
    if metadata is None or metadata == "":
        raise _BadRow(field_name, f"field {field_name!r} is missing or empty")
    meta = _decode(metadata, field_name, Mapping)
    questions = meta.get("rubrics", meta.get("rubric"))
    return _questions(questions, f"{field_name}.rubrics")


def _questions(value: Any, field_name: str) -> list[str]:
    if value is None or value == "" or value == []:
        raise _BadRow(field_name, f"field {field_name!r} is missing or empty")
    value = _decode(value, field_name, list)
    if not value:
        raise _BadRow(field_name, f"field {field_name!r} is an empty list")
    out = []
    for i, q in enumerate(value):
        if not isinstance(q, str) or not q.strip():
            raise _BadRow(field_name, f"field {field_name!r}: item {i} is not a non-empty question string: {q!r:.60}")
        out.append(q.strip())
    return out


# ------------------------------------------------------------------------------------------- generic rows
def load_prompt_rows(
    source: str | Path | Any,
    *,
    prompt_field: str = "prompt",
    rubric_field: str = "rubric",
    id_field: str = "id",
    benchmark_field: str = "benchmark",
    benchmarks: Iterable[str] | str | None = None,
    on_bad_row: OnBadRow = "error",
    validate: bool = True,
    limit: int | None = None,
) -> PromptRows:
    """Rows with a prompt and a rubric from JSONL / CSV / a ``save_to_disk`` folder / a Dataset / mappings.

    ``source="offline"`` gives the bundled offline prompts (``rubric_reward.data.load_offline_prompts()``:
    inline rubrics with judged criteria and programmatic checks, benchmark ``"offline"``).
    The prompt is a string (one user turn) or messages (maybe a JSON string) ending on a user turn. The
    rubric is an inline rubric mapping, a list of criteria or questions, either as a JSON string (decoded,
    twice if needed) or a multi-line YAML string, or a rubric id (a plain string, looked up by the reward's ``rubric_dir``). Inline
    rubrics are validated with ``Rubric.from_obj`` unless ``validate=False``. Missing ids become content hashes.
    Bad rows: as in :func:`load_advancedif`.
    """
    if isinstance(source, str) and source == "offline":
        return _offline_rows()
    name, rows = _open(source)
    wanted = _benchmark_filter(benchmarks)
    out = PromptRows(source=name)
    seen: dict[str, int] = {}
    for row_no, raw in enumerate(rows):
        if limit is not None and len(out) >= limit:
            break
        if row_no == 0:
            out.columns = sorted(map(str, raw)) if isinstance(raw, Mapping) else []
        benchmark = _opt_str(raw.get(benchmark_field))
        if wanted is not None and benchmark not in wanted:
            out.filtered += 1
            continue
        try:
            prompt = _conversation(raw.get(prompt_field), prompt_field)
            rubric = _generic_rubric(raw.get(rubric_field), rubric_field, validate)
        except _BadRow as bad:
            _bad(out, name, row_no, bad, on_bad_row)
            continue
        row_id = _opt_str(raw.get(id_field)) or _content_id(prompt, rubric, benchmark)
        if row_id in seen:
            _bad(out, name, row_no, _BadRow(id_field, f"field {id_field!r}: id {row_id!r} already used by row "
                                                      f"{seen[row_id]}"), on_bad_row)
            continue
        seen[row_id] = row_no
        out.append({"id": row_id, "prompt": prompt, "rubric": rubric, "benchmark": benchmark})
    _check_found(out, name, wanted)
    return out


def rows_from_dataset(dataset: Any, *, rubric_field: str = "rubric") -> PromptRows:
    """Rows back from a :func:`to_dataset` dataset (or any with ``prompt``/``rubric`` columns)."""
    return load_prompt_rows(dataset, rubric_field=rubric_field, validate=False)


def _offline_rows() -> PromptRows:
    from ..data import load_offline_prompts

    rows = [{"id": p.id, "prompt": [{"role": "user", "content": p.prompt}], "rubric": p.rubric.to_dict(),
             "benchmark": "offline"} for p in load_offline_prompts()]
    return PromptRows(rows, source="offline prompts (rubric_reward.data)")


def _generic_rubric(value: Any, field_name: str, validate: bool) -> Any:
    if value is None or value == "" or value == [] or value == {}:
        raise _BadRow(field_name, f"field {field_name!r} is missing or empty")
    if isinstance(value, str) and "\n" in value.strip() and value.lstrip()[:1] not in ("[", "{", '"'):
        value = _yaml(value, field_name)
    elif isinstance(value, str) and value.lstrip()[:1] not in ("[", "{", '"'):
        return value.strip()  # a rubric id
    value = _decode(value, field_name, (list, Mapping))
    if isinstance(value, Mapping):
        value = dict(value)
    if validate:
        from ..rubric import Rubric, RubricError

        try:
            Rubric.from_obj(value, source=f"field {field_name!r}")
        except RubricError as exc:
            raise _BadRow(field_name, str(exc)) from None
    return value


def _yaml(text: str, field_name: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _BadRow(field_name, f"field {field_name!r}: not valid YAML: {str(exc).splitlines()[0]}") from None


# ------------------------------------------------------------------------------------------- shared parsing
def _open(source: Any, *, split: str = "train", revision: str | None = None) -> tuple[str, Iterable[Mapping]]:
    """Local paths are read locally; any other string is a hub dataset id."""
    if isinstance(source, Path) or (isinstance(source, str) and (Path(source).exists() or _looks_local(source))):
        return read_rows(DataSource(path=str(source)))
    if isinstance(source, str):
        hub = DataSource(hf=source, split=split, revision=revision)
        try:
            return read_rows(hub)
        except DataError:
            raise
        except Exception as exc:  # offline, gated, unknown id: one clear line instead of a deep traceback
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise DataError(f"{hub.describe()}: could not load it from the Hugging Face hub "
                            f"({type(exc).__name__}: {first[:300]}); give a local CSV / JSONL / save_to_disk path "
                            "instead, or check the name and the network") from exc
    return read_rows(source)


def _looks_local(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.endswith((".csv", ".jsonl", ".json")) or text.count("/") != 1


def _decode(value: Any, field_name: str, want: type | tuple[type, ...]) -> Any:
    """Decode JSON text up to twice (AdvancedIF nests a JSON list inside a JSON object's string)."""
    for _ in range(3):
        if isinstance(value, want) and not isinstance(value, str):
            return value
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise _BadRow(field_name, f"field {field_name!r}: not valid JSON ({json_problem(exc)} at char {exc.pos})") from None
    names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
    names = names.replace("Mapping", "object").replace("list", "JSON list")
    raise _BadRow(field_name, f"field {field_name!r}: expected a {names}, got {type(value).__name__}")


def _conversation(value: Any, field_name: str) -> list[dict[str, str]]:
    if value is None or value == "" or value == []:
        raise _BadRow(field_name, f"field {field_name!r} is missing or empty")
    if isinstance(value, str) and value.lstrip()[:1] != "[":
        return [{"role": "user", "content": value}]
    messages = _decode(value, field_name, list)
    if not messages:
        raise _BadRow(field_name, f"field {field_name!r} is an empty conversation")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise _BadRow(field_name, f"field {field_name!r}: message {i} needs 'role' and 'content', got {m!r:.80}")
        role, content = str(m["role"]), m["content"]
        if role not in ROLES:
            raise _BadRow(field_name, f"field {field_name!r}: message {i} has unknown role {role!r}")
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if not isinstance(content, str):
            raise _BadRow(field_name, f"field {field_name!r}: message {i} content is not text")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise _BadRow(field_name, f"field {field_name!r}: the conversation ends on a {out[-1]['role']!r} turn, "
                                  "not on the user turn to answer")
    return out


def _opt_str(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def _content_id(prompt: Any, rubric: Any, benchmark: str | None) -> str:
    blob = json.dumps([benchmark, prompt, rubric], sort_keys=True, ensure_ascii=False)
    return "advif-" + hashlib.sha1(blob.encode("utf-8")).hexdigest()[:12]


def _unique(row_id: str, seen: dict[str, int]) -> str:
    """Identical rows get ``-2``, ``-3`` ... in order of appearance."""
    seen[row_id] = seen.get(row_id, 0) + 1
    return row_id if seen[row_id] == 1 else f"{row_id}-{seen[row_id]}"


def _bad(out: PromptRows, name: str, row_no: int, bad: _BadRow, on_bad_row: str) -> None:
    if on_bad_row == "skip":
        out.skipped.append(SkippedRow(row_no, bad.field, bad.reason))
        return
    if on_bad_row != "error":
        raise ValueError(f"on_bad_row must be 'error' or 'skip', got {on_bad_row!r}")
    raise DataError(f"{name}: row {row_no}: {bad.reason} (on_bad_row='skip' leaves such rows out)")


def _benchmark_filter(benchmarks: Iterable[str] | str | None) -> frozenset[str] | None:
    if benchmarks is None:
        return None
    chosen = frozenset([benchmarks] if isinstance(benchmarks, str) else benchmarks)
    if not chosen:
        raise ValueError("benchmarks: give at least one benchmark name, or None for all")
    return chosen


def _check_found(out: PromptRows, name: str, wanted: frozenset[str] | None) -> None:
    if out:
        return
    if wanted is not None and out.filtered:
        raise DataError(f"{name}: no row of benchmark(s) {sorted(wanted)} ({out.filtered} rows of others)")
    detail = ""
    if out.skipped:
        reason = Counter(s.reason for s in out.skipped).most_common(1)[0][0]
        detail = f" ({len(out.skipped)} skipped, most often: {reason}; the first row's columns: {out.columns[:20]})"
    raise DataError(f"{name}: no usable rows{detail}")


# ------------------------------------------------------------------------------------------- split
@dataclass(frozen=True)
class Splits:
    """Disjoint train / selection / report rows, with the settings that made them.

    ``unused`` holds rows left over when no size was ``"rest"``; ``source`` describes the rows split
    (:meth:`PromptRows.describe`) when known.
    """

    train: list[dict[str, Any]]
    selection: list[dict[str, Any]]
    report: list[dict[str, Any]]
    seed: int = 0
    stratify: str | None = "benchmark"
    unused: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None

    def __getitem__(self, name: str) -> list[dict[str, Any]]:
        if name not in SPLITS:
            raise KeyError(f"no split {name!r}; splits are {SPLITS}")
        return getattr(self, name)

    def ids(self, name: str) -> list[str]:
        return [r["id"] for r in self[name]]

    def counts(self) -> dict[str, dict[str, int]]:
        """Rows per split and per stratum: ``{"train": {"bench": n, ...}, ...}``."""
        key = self.stratify
        return {s: dict(sorted(Counter(str(r.get(key)) if key else "all" for r in self[s]).items())) for s in SPLITS}

    def describe(self) -> str:
        sizes = " / ".join(f"{len(self[s])} {s}" for s in SPLITS)
        text = f"{sizes} (seed {self.seed}, stratified by {self.stratify or 'nothing'})" + (
            f", {len(self.unused)} unused" if self.unused else "")
        return text + (f" of {self.source}" if self.source else "")

    def manifest(self) -> dict[str, Any]:
        """JSON-able record of the split (ids per split, counts, seed) for the run folder."""
        return {"seed": self.seed, "stratify": self.stratify, "source": self.source, "counts": self.counts(),
                **{f"{s}_ids": self.ids(s) for s in SPLITS}, "unused_ids": [r["id"] for r in self.unused]}

    def write_manifest(self, path: str | Path) -> Path:
        from ..journal import write_atomic

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.manifest(), indent=2, ensure_ascii=False) + "\n")
        return path


def split_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    train: Size = "rest",
    selection: Size = 81,
    report: Size = 81,
    seed: int = 0,
    stratify: str | Callable[[Mapping[str, Any]], Any] | None = "benchmark",
) -> Splits:
    """Seeded, stratified, disjoint, deterministic train / selection / report split.

    Sizes are counts (int), fractions of all rows (float in (0, 1), rounded), or ``"rest"`` (at most one).
    Each size is shared out over the strata (``stratify``: a row key, a function of the row, or None)
    in proportion to the rows each has left (largest remainder, ties by stratum name). Within a stratum the rows
    are ordered by id and shuffled with a generator seeded by ``(seed, stratum)``; selection takes the
    first rows, report the next, train the ones after. So the result does not depend on row order, and
    changing the train size never changes the selection or report rows. Rows need unique ``id`` s.
    Raises ValueError when the sizes do not fit.
    """
    rows_in, rows = rows, list(rows)
    n = len(rows)
    if n == 0:
        raise ValueError("split_rows: no rows")
    ids = [r.get("id") for r in rows]
    if any(i is None for i in ids) or len(set(ids)) != n:
        dup = [i for i, c in Counter(ids).items() if c > 1][:3]
        raise ValueError(f"split_rows: every row needs a unique 'id' (missing or repeated, e.g. {dup})")
    requested = {"selection": selection, "report": report, "train": train}
    rest = [s for s, v in requested.items() if v == "rest"]
    if len(rest) > 1:
        raise ValueError(f"split_rows: only one size may be 'rest', got {rest}")
    counts = {s: _count(s, v, n) for s, v in requested.items() if v != "rest"}
    if sum(counts.values()) > n:
        raise ValueError(f"split_rows: sizes {counts} add up to {sum(counts.values())}, more than the {n} rows")

    key_of = _stratum_key(stratify)
    strata: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        strata.setdefault(key_of(r), []).append(r)
    for name, members in strata.items():
        members.sort(key=lambda r: str(r["id"]))
        random.Random(_stratum_seed(seed, name)).shuffle(members)

    available = {name: len(members) for name, members in strata.items()}
    taken: dict[str, dict[str, int]] = {}
    for s in ("selection", "report", "train"):
        if s in counts:
            taken[s] = _allocate(counts[s], available)
            for name, k in taken[s].items():
                available[name] -= k
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in (*SPLITS, "unused")}
    for name in sorted(strata):
        members, start = strata[name], 0
        for s in ("selection", "report", "train"):
            k = available[name] if s in rest else taken.get(s, {}).get(name, 0)
            out[s] += [dict(r) for r in members[start:start + k]]
            start += k
        out["unused"] += [dict(r) for r in members[start:]]
    stratify_name = stratify if isinstance(stratify, str) or stratify is None else getattr(stratify, "__name__", "fn")
    source = rows_in.describe() if isinstance(rows_in, PromptRows) else None
    return Splits(out["train"], out["selection"], out["report"], seed, stratify_name, out["unused"], source)


def _count(name: str, value: Size, n: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"split_rows: {name} must be a count, a fraction or 'rest', got {value!r}")
    if isinstance(value, float):
        if not 0 < value < 1:
            raise ValueError(f"split_rows: {name} fraction must be in (0, 1), got {value}")
        return int(math.floor(value * n + 0.5))
    if value < 0:
        raise ValueError(f"split_rows: {name} must not be negative, got {value}")
    return value


def _stratum_key(stratify: str | Callable[[Mapping[str, Any]], Any] | None) -> Callable[[Mapping[str, Any]], str]:
    if stratify is None:
        return lambda r: "all"
    if callable(stratify):
        return lambda r: str(stratify(r))
    return lambda r: str(r.get(stratify))


def _stratum_seed(seed: int, stratum: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\0{stratum}".encode()).digest()[:8], "big")


def _allocate(k: int, available: Mapping[str, int]) -> dict[str, int]:
    """Share ``k`` over strata in proportion to the rows each still has (largest remainder)."""
    total = sum(available.values())
    if k > total:
        raise ValueError(f"split_rows: cannot take {k} rows, only {total} left")
    quota = {name: k * a / max(total, 1) for name, a in available.items()}
    alloc = {name: min(int(math.floor(q)), available[name]) for name, q in quota.items()}
    order = sorted(available, key=lambda name: (-(quota[name] - math.floor(quota[name])), name))
    while sum(alloc.values()) < k:
        progressed = False
        for name in order:
            if sum(alloc.values()) >= k:
                break
            if alloc[name] < available[name]:
                alloc[name] += 1
                progressed = True
        if not progressed:  # cannot happen: k <= total
            raise ValueError("split_rows: allocation failed")
    return alloc


# ------------------------------------------------------------------------------------------- to datasets
def to_dataset(rows: Iterable[Mapping[str, Any]], *, extra_columns: Sequence[str] = ("id", "benchmark")) -> Any:
    """A ``datasets.Dataset`` with ``prompt`` (messages), ``rubric`` (JSON text, or the rubric id) and the
    ``extra_columns`` (TRL passes them to reward functions as keyword arguments)."""
    import datasets

    records = []
    for r in rows:
        rubric = r["rubric"]
        record = {"prompt": [dict(m) for m in r["prompt"]],
                  "rubric": rubric if isinstance(rubric, str) else json.dumps(rubric, ensure_ascii=False)}
        for column in extra_columns:
            value = r.get(column)
            record[column] = None if value is None else str(value)
        records.append(record)
    if not records:
        raise ValueError("to_dataset: no rows")
    return datasets.Dataset.from_list(records)
