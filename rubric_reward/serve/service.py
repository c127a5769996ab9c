"""The service's side of the reward core: request bodies in, answers out, errors as 4xx naming the field.

:class:`ServiceEngine` is the core's :class:`~rubric_reward.rewards.engine.RewardEngine` (the same
judges, rubric resolution, think stripping and reward read as the TRL plugin and the adapters) plus
the two request shapes (``/score`` and OpenRLHF's) and their answers. On ``/score`` a sample the
core cannot judge (a :class:`~rubric_reward.rewards.samples.SampleError`) becomes a
:class:`RequestError` with the same code and field, at this boundary only; on ``/openrlhf`` it is an
unscored sample (the core's :mod:`~rubric_reward.rewards.trainers` decision), since OpenRLHF turns
any non-2xx into lost rewards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..items import unencodable_at
from ..rewards.engine import Pair
from ..rewards.engine import RewardEngine as _CoreEngine
from ..rewards.records import RewardRecord
from ..rewards.samples import SampleError
from ..rewards.trainers import openrlhf_reply, score_openrlhf
from ..rubric import Rubric
from .config import ServeConfig
from .errors import RequestError

__all__ = ["Pair", "ServiceEngine"]

log = logging.getLogger("rubric_reward.serve")

_ITEM_FIELDS = {"id", "prompt", "conversation", "response", "rubric", "rubric_id", "label", "group"}


def _request_error(exc: SampleError) -> RequestError:
    return RequestError(422, exc.code, exc.field, exc.message)


class ServiceEngine(_CoreEngine):
    """The reward core for one :class:`ServeConfig`; build it inside the event loop that will use it."""

    config: ServeConfig

    def __init__(self, config: ServeConfig | Mapping[str, Any] | str | None = None):
        super().__init__(config)
        ignored = self.config.trainer_only_settings()
        if ignored:
            log.warning("serve config: %s apply in the TRL plugin only; the service does not use them",
                        ", ".join(ignored))

    @classmethod
    def config_class(cls) -> type[ServeConfig]:
        return ServeConfig

    # ------------------------------------------------------------------ answers
    def item_result(self, record: RewardRecord) -> dict[str, Any]:
        """One item of a ``/score`` answer."""
        result = record.result
        return {
            "id": result.metadata.get("id"),
            "reward": record.reward,
            "score": result.score,
            "raw_score": result.raw_score,
            "expected_score": result.expected_score,
            "unscored": record.reward is None,
            "error": result.error,
            "verdicts": [v.to_dict() for v in result.verdicts],
            "cost": result.cost,
            "judge_calls": len(result.calls),
            "cached_calls": sum(1 for c in result.calls if c.cached),
        }

    def openrlhf_answer(self, records: Sequence[RewardRecord]) -> dict[str, Any]:
        """OpenRLHF's reply shape (the reward core's): unscored entries get ``unscored_reward``, flagged."""
        return openrlhf_reply(records, float(self.config.unscored_reward))

    async def score_openrlhf(self, body: Any, *, draining: bool = False) -> list[RewardRecord]:
        """One record per sample of an OpenRLHF body. Only a body that cannot be read as OpenRLHF's
        samples is a RequestError; a sample's own problem (a query cut or unrelated to its prompt, a
        bad label, an unknown rubric id), more samples than ``serve.max_batch_items`` and a service
        shutting down make unscored samples, because OpenRLHF cannot take a non-2xx."""
        queries, prompts, labels = self.openrlhf_request(body)
        limit = self.config.serve.max_batch_items
        if draining or len(queries) > limit:
            why = ("the service is shutting down; retry elsewhere" if draining else
                   f"{len(queries)} samples in one request; this service takes at most {limit} (serve.max_batch_items)")
            return [RewardRecord.failed(why, "service") for _ in queries]
        return await score_openrlhf(self.score_samples, queries, prompts, labels)

    # ------------------------------------------------------------------ reading requests
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
        try:
            shared = self._rubric_of(body, "")
            deadline = self._deadline(body.get("deadline_s"))
            return [self._score_item(raw, i, shared) for i, raw in enumerate(items)], deadline
        except SampleError as exc:
            raise _request_error(exc) from None

    def _score_item(self, raw: Any, i: int, shared: Rubric | None) -> Pair:
        where = f"items[{i}]"
        if not isinstance(raw, Mapping):
            raise RequestError(422, "invalid_field", where, f"an item must be an object, got {_kind(raw)}")
        extra = set(raw) - _ITEM_FIELDS
        if extra:
            raise RequestError(422, "unknown_field", f"{where}.{sorted(extra)[0]}",
                               f"unknown field; expected {', '.join(sorted(_ITEM_FIELDS))}")
        rubric = self._rubric_of(raw, f"{where}.") or shared or self.rubrics.default_for(f"{where}.rubric")
        self.usable(rubric, f"{where}.rubric")
        if "response" not in raw:
            raise RequestError(422, "missing_field", f"{where}.response", "the response to judge is required")
        if raw.get("prompt") is not None and raw.get("conversation") is not None:
            raise RequestError(422, "invalid_field", f"{where}.conversation", "give 'prompt' or 'conversation', not both")
        key = "conversation" if raw.get("conversation") is not None else "prompt"
        item_id = raw.get("id")
        if isinstance(item_id, str) and unencodable_at(item_id) is not None:
            raise RequestError(422, "invalid_field", f"{where}.id", "not valid text (a lone surrogate)")
        group = raw.get("group")
        if group is not None and (isinstance(group, bool) or not isinstance(group, str | int)):
            raise RequestError(422, "invalid_field", f"{where}.group", f"must be a string or an integer, got {_kind(group)}")
        if isinstance(group, str) and unencodable_at(group) is not None:
            raise RequestError(422, "invalid_field", f"{where}.group", "not valid text (a lone surrogate)")
        item = self.item(raw.get(key), raw["response"], id=None if item_id is None else str(item_id),
                         group=None if group is None else str(group),
                         prompt_field=f"{where}.{key}", completion_field=f"{where}.response")
        return rubric, item

    def openrlhf_request(self, body: Any) -> tuple[list[Any], list[Any], list[Any] | None]:
        """OpenRLHF's remote reward body ``{"query": [...], "prompts": [...], "labels": [...]}`` as aligned
        lists; a RequestError only when they cannot be aligned (each entry is checked per sample)."""
        if not isinstance(body, Mapping):
            raise RequestError(400, "invalid_body", None, f"the body must be a JSON object, got {_kind(body)}")
        lists = {}
        for name in ("query", "prompts"):
            if name not in body:
                raise RequestError(422, "missing_field", name, "required (OpenRLHF sends query, prompts, labels)")
            value = body[name]
            lists[name] = [value] if isinstance(value, str) else value
            if not isinstance(lists[name], list):
                raise RequestError(422, "invalid_field", name, f"must be a list of strings, got {_kind(value)}")
        n = len(lists["query"])
        if len(lists["prompts"]) != n:
            raise RequestError(422, "invalid_field", "prompts",
                               f"has {len(lists['prompts'])} entries but query has {n}")
        labels = body.get("labels")
        if labels is not None and (not isinstance(labels, list) or len(labels) != n):
            raise RequestError(422, "invalid_field", "labels", f"must be a list of {n} labels (or null)")
        return lists["query"], lists["prompts"], labels

    # ------------------------------------------------------------------ helpers
    def _check_batch(self, n: int, field: str) -> None:
        limit = self.config.serve.max_batch_items
        if n > limit:
            raise RequestError(413, "too_many_items", field, f"{n} items; this service takes at most {limit} per request")

    @staticmethod
    def _deadline(raw: Any) -> float | None:
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:
            raise RequestError(422, "invalid_field", "deadline_s", f"must be a positive number, got {raw!r}")
        return float(raw)

    def _rubric_of(self, obj: Mapping[str, Any], prefix: str) -> Rubric | None:
        given = [k for k in ("rubric", "rubric_id", "label") if obj.get(k) is not None]
        if len(given) > 1:
            raise RequestError(422, "invalid_field", f"{prefix}{given[1]}",
                               f"give one of 'rubric', 'rubric_id', 'label', not {' and '.join(given)}")
        if given == ["label"]:
            return self.rubrics.resolve(obj["label"], f"{prefix}label")
        if given == ["rubric_id"]:
            return self.rubrics.by_id(obj["rubric_id"], f"{prefix}rubric_id")
        if given == ["rubric"]:
            return self.rubrics.resolve(obj["rubric"], f"{prefix}rubric", ids=False)
        return None




def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(x), type(x).__name__)
