"""The scoring core shared by the HTTP service and the in-process trainer adapters.

One :class:`RewardEngine` owns one judge pool (limits, cache, pooled connections) and scores
(rubric, item) pairs with ``Grader.grade_many`` under a per-request deadline, exactly as ``Scorer``
does. It also reads the two request shapes (``/score`` and OpenRLHF's) into such pairs, with errors
that name the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..items import Item, as_messages
from ..judges.judge import as_judges
from ..results import ScoreResult
from ..rubric import Rubric
from ..scorer import Scorer
from .config import ServeConfig
from .errors import RequestError
from .rubrics import RubricResolver
from .text import chat_text_to_prompt, split_query, strip_think

__all__ = ["Pair", "RewardEngine"]

Pair = tuple[Rubric, Item]
_ITEM_FIELDS = {"id", "prompt", "conversation", "response", "rubric", "rubric_id", "label"}


class RewardEngine:
    """Scores pairs for one :class:`ServeConfig`; build it inside the event loop that will use it."""

    def __init__(self, config: ServeConfig | Mapping[str, Any] | str | None = None):
        self.config = config = ServeConfig.load(config)
        self.cache = None
        if config.cache:
            from ..judges.cache import SQLiteCache

            self.cache = SQLiteCache(config.cache)
        judges = as_judges(config.judge, base_url=config.base_url, cache=self.cache) if config.judge is not None else []
        self.scorer = Scorer(None, judges, scoring=config.scoring_config(), grading=config.grading_config())
        self.has_judge = bool(judges)
        self.rubrics = RubricResolver(config.rubric, config.rubric_dir)
        if self.rubrics.default is not None:
            self._usable(self.rubrics.default, "rubric")

    # ------------------------------------------------------------------ scoring
    async def score(self, pairs: Sequence[Pair], deadline_s: float | None = None) -> list[ScoreResult]:
        """Grade every pair; failures come back as unscored results, never as exceptions or hangs."""
        deadline = self.config.deadline_s if deadline_s is None else deadline_s
        return await self.scorer.grader.grade_many(list(pairs), deadline_s=deadline)

    def reward(self, result: ScoreResult) -> float | None:
        """The configured reward field; None when unscored (never NaN)."""
        value = getattr(result, self.config.reward) if result.score is not None else None
        return None if value is None or not math.isfinite(value) else float(value)

    def numeric_reward(self, result: ScoreResult) -> float:
        """For trainers that need a number: the reward, or ``serve.unscored_reward`` when unscored."""
        r = self.reward(result)
        return float(self.config.serve.unscored_reward) if r is None else r

    def item_result(self, result: ScoreResult) -> dict[str, Any]:
        """One item of a ``/score`` answer."""
        return {
            "id": result.metadata.get("id"),
            "reward": self.reward(result),
            "score": result.score,
            "raw_score": result.raw_score,
            "expected_score": result.expected_score,
            "unscored": result.score is None,
            "error": result.error,
            "verdicts": [v.to_dict() for v in result.verdicts],
            "cost": result.cost,
            "judge_calls": len(result.calls),
            "cached_calls": sum(1 for c in result.calls if c.cached),
        }

    async def aclose(self) -> None:
        await self.scorer.aclose()
        if self.cache is not None:
            self.cache.close()

    # ------------------------------------------------------------------ reading requests
    def response_text(self, response: str) -> str:
        return strip_think(response) if self.config.strip_think else response

    def _usable(self, rubric: Rubric, field: str) -> Rubric:
        if rubric.judged and not self.has_judge:
            raise RequestError(422, "no_judge", field,
                               f"rubric {rubric.name!r} has judged criteria, but the service has no 'judge'")
        return rubric

    def score_request(self, body: Any) -> tuple[list[Pair], float | None]:
        """Read a ``/score`` body: ``{"items": [...], "rubric"|"rubric_id"?: ..., "deadline_s"?: s}``."""
        if not isinstance(body, Mapping):
            raise RequestError(400, "invalid_body", None, f"the body must be a JSON object, got {_kind(body)}")
        unknown = set(body) - {"items", "rubric", "rubric_id", "deadline_s"}
        if unknown:
            raise RequestError(422, "unknown_field", sorted(unknown)[0],
                               "unknown field; expected items, rubric, rubric_id, deadline_s")
        if "items" not in body:
            raise RequestError(422, "missing_field", "items", "a list of items to score is required")
        items = body["items"]
        if not isinstance(items, list):
            raise RequestError(422, "invalid_field", "items", f"must be a list, got {_kind(items)}")
        self._check_batch(len(items), "items")
        shared = self._rubric_of(body, "", required=False)
        deadline = self._deadline(body.get("deadline_s"))
        pairs = []
        for i, raw in enumerate(items):
            where = f"items[{i}]"
            if not isinstance(raw, Mapping):
                raise RequestError(422, "invalid_field", where, f"an item must be an object, got {_kind(raw)}")
            extra = set(raw) - _ITEM_FIELDS
            if extra:
                raise RequestError(422, "unknown_field", f"{where}.{sorted(extra)[0]}",
                                   f"unknown field; expected {', '.join(sorted(_ITEM_FIELDS))}")
            rubric = self._rubric_of(raw, f"{where}.", required=False) or shared
            if rubric is None:
                rubric = self.rubrics.default_for(f"{where}.rubric")
            self._usable(rubric, f"{where}.rubric")
            pairs.append((rubric, self._item(raw, where)))
        return pairs, deadline

    def openrlhf_request(self, body: Any) -> list[Pair]:
        """Read OpenRLHF's remote reward body ``{"query": [...], "prompts": [...], "labels": [...]}``."""
        if not isinstance(body, Mapping):
            raise RequestError(400, "invalid_body", None, f"the body must be a JSON object, got {_kind(body)}")
        lists = {}
        for name in ("query", "prompts"):
            if name not in body:
                raise RequestError(422, "missing_field", name, "required (OpenRLHF sends query, prompts, labels)")
            lists[name] = _str_list(body[name], name)
        n = len(lists["query"])
        self._check_batch(n, "query")
        if len(lists["prompts"]) != n:
            raise RequestError(422, "invalid_field", "prompts",
                               f"has {len(lists['prompts'])} entries but query has {n}")
        labels = body.get("labels")
        if labels is None:
            labels = [None] * n
        elif not isinstance(labels, list) or len(labels) != n:
            raise RequestError(422, "invalid_field", "labels", f"must be a list of {n} labels (or null)")
        return [self.openrlhf_pair(q, p, label, i)
                for i, (q, p, label) in enumerate(zip(lists["query"], lists["prompts"], labels, strict=True))]

    def openrlhf_pair(self, query: str, prompt: str, label: Any, i: int) -> Pair:
        """One OpenRLHF sample: the response is what follows the prompt in the query."""
        response = split_query(query, prompt)
        if response is None:
            raise RequestError(422, "invalid_field", f"query[{i}]", f"does not contain prompts[{i}] "
                               "(the query must be the prompt followed by the response)")
        rubric = self._usable(self.rubrics.from_label(label, f"labels[{i}]"), f"labels[{i}]")
        return rubric, Item(response=self.response_text(response), prompt=chat_text_to_prompt(prompt) or None, id=str(i))

    def label_pair(self, prompt: Any, response: str, label: Any, field: str, id: str | None = None) -> Pair:
        """One (rubric, item) from a trainer's prompt, response text and label (verl ground truth)."""
        rubric = self._usable(self.rubrics.from_label(label, field), field)
        return rubric, Item(response=self.response_text(str(response)), prompt=prompt or None, id=id)

    # ------------------------------------------------------------------ helpers
    def _check_batch(self, n: int, field: str) -> None:
        limit = self.config.serve.max_batch_items
        if n > limit:
            raise RequestError(413, "too_many_items", field, f"{n} items; this service takes at most {limit} per request")

    def _deadline(self, raw: Any) -> float | None:
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:
            raise RequestError(422, "invalid_field", "deadline_s", f"must be a positive number, got {raw!r}")
        cap = self.config.deadline_s
        return float(raw) if cap is None else min(float(raw), cap)

    def _rubric_of(self, obj: Mapping[str, Any], prefix: str, *, required: bool) -> Rubric | None:
        given = [k for k in ("rubric", "rubric_id", "label") if obj.get(k) is not None]
        if len(given) > 1:
            raise RequestError(422, "invalid_field", f"{prefix}{given[1]}",
                               f"give one of 'rubric', 'rubric_id', 'label', not {' and '.join(given)}")
        if given == ["label"]:
            return self.rubrics.from_label(obj["label"], f"{prefix}label")
        if given == ["rubric_id"]:
            return self.rubrics.by_id(obj["rubric_id"], f"{prefix}rubric_id")
        if given == ["rubric"]:
            return self.rubrics.inline(obj["rubric"], f"{prefix}rubric")
        return self.rubrics.default_for(f"{prefix}rubric") if required else None

    def _item(self, raw: Mapping[str, Any], where: str) -> Item:
        if "response" not in raw:
            raise RequestError(422, "missing_field", f"{where}.response", "the response to judge is required")
        response = raw["response"]
        if not isinstance(response, str | list | Mapping):
            raise RequestError(422, "invalid_field", f"{where}.response",
                               f"must be a string or assistant messages, got {_kind(response)}")
        if raw.get("prompt") is not None and raw.get("conversation") is not None:
            raise RequestError(422, "invalid_field", f"{where}.conversation", "give 'prompt' or 'conversation', not both")
        key = "conversation" if raw.get("conversation") is not None else "prompt"
        prompt = raw.get(key)
        try:
            if prompt is not None and not isinstance(prompt, str):
                if not isinstance(prompt, list):
                    raise ValueError(f"must be a string or a list of messages, got {_kind(prompt)}")
                prompt = as_messages(prompt)
            item_id = raw.get("id")
            item = Item(response=response, prompt=prompt, id=None if item_id is None else str(item_id))
        except ValueError as exc:
            field = f"{where}.{key}" if "prompt" in str(exc) or key in str(exc) else f"{where}.response"
            raise RequestError(422, "invalid_field", field, str(exc)) from None
        if self.config.strip_think:
            item = Item(response=strip_think(item.response), prompt=item.prompt, id=item.id)
        return item


def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(x), type(x).__name__)


def _str_list(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise RequestError(422, "invalid_field", field, f"must be a list of strings, got {_kind(value)}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise RequestError(422, "invalid_field", f"{field}[{i}]", f"must be a string, got {_kind(v)}")
    return value
