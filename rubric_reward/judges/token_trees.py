"""Token trees: prompts that share prefixes, run once through a causal LM under a token budget.

The prompts of one response's criterion calls share most of their tokens (the criterion comes last).
Put in one *row*, they form a trie: every distinct prefix is one node, laid out as one column of the
row, and every token attends only to its ancestors (a 4D attention mask) at its depth as position id.
A shared prefix is thus computed once, and the continuations hanging off it (criterion tails, label
tokens, generated tokens) are computed against it, all in one forward pass.

Rows are run together in forwards of at most ``token_budget`` new tokens (rows x columns); a row
longer than that is cut into column chunks that extend one KV cache, so a long response is split and
still scored. The LM head is applied only to the hidden states asked for, never to whole sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ForwardStats", "TokenTrees", "group_by_prefix", "pack_rows", "shared_prefix_len"]


@dataclass
class ForwardStats:
    """What went through the model: forwards, token slots (padding included), real tokens, LM-head rows."""

    forwards: int = 0
    token_slots: int = 0
    tokens: int = 0
    max_slots_per_forward: int = 0
    head_rows: int = 0
    max_head_rows: int = 0

    def add(self, other: ForwardStats) -> None:
        self.forwards += other.forwards
        self.token_slots += other.token_slots
        self.tokens += other.tokens
        self.max_slots_per_forward = max(self.max_slots_per_forward, other.max_slots_per_forward)
        self.head_rows += other.head_rows
        self.max_head_rows = max(self.max_head_rows, other.max_head_rows)


def shared_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def group_by_prefix(seqs: Sequence[Sequence[int]], token_budget: int, *, min_share: float = 0.5) -> list[list[int]]:
    """Indices of ``seqs`` grouped into rows: a row's sequences share at least ``min_share`` of their
    tokens with its first one, and a row holds at most ``max(token_budget, 2 x first length)`` nodes."""
    order = sorted(range(len(seqs)), key=lambda i: tuple(seqs[i]))
    rows: list[list[int]] = []
    first: Sequence[int] = ()
    size = limit = 0
    for i in order:
        s = seqs[i]
        shared = shared_prefix_len(first, s) if rows else 0
        if rows and shared >= min_share * len(s) and size + len(s) - shared <= limit:
            rows[-1].append(i)
            size += len(s) - shared
        else:
            rows.append([i])
            first, size, limit = s, len(s), max(token_budget, 2 * len(s))
    return rows


def pack_rows(sizes: Sequence[int], token_budget: int) -> list[list[int]]:
    """Row indices packed into forwards of at most ``token_budget`` slots (rows x widest row);
    a row wider than the budget goes alone (it is then cut into column chunks)."""
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * sizes[i] <= token_budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class TokenTrees:
    """Rows of token tries sharing one KV cache; see the module docstring.

    ``insert`` adds a sequence to a row (reusing the nodes of shared prefixes) and returns its
    columns; ``append`` adds one unshared node (a generated token); ``run`` computes every pending
    column and returns the hidden states of the columns asked for; ``logits`` applies the LM head.
    """

    def __init__(self, model: Any, n_rows: int, *, pad_id: int, token_budget: int):
        import torch

        self.model = model
        self.decoder = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.pad_id = pad_id
        self.token_budget = max(1, int(token_budget))
        self.n_rows = n_rows
        self.tokens: list[list[int]] = [[] for _ in range(n_rows)]
        self.depth: list[list[int]] = [[] for _ in range(n_rows)]
        self.children: list[dict[tuple[int, int], int]] = [{} for _ in range(n_rows)]
        self._cap = 64
        # ancestors[r, c, k]: column k is column c itself or one of its ancestors in row r
        self.ancestors = torch.zeros((n_rows, self._cap, self._cap), dtype=torch.bool)
        self.done = 0  # columns already in the cache (the same for every row)
        self.cache: Any = None
        self.stats = ForwardStats()
        import inspect

        # transformers >= 5.2x names the KV cache argument `cache` (`past_key_values` is deprecated)
        self._cache_kw = "cache" if "cache" in inspect.signature(self.decoder.forward).parameters else "past_key_values"
        self._pending_real = 0  # real (non-padding) columns added since the last run

    # ------------------------------------------------------------------ building
    def _new_column(self, row: int, token: int, parent: int, *, pad: bool = False) -> int:
        import torch

        col = len(self.tokens[row])
        if col >= self._cap:
            cap = 2 * self._cap
            grown = torch.zeros((self.n_rows, cap, cap), dtype=torch.bool)
            grown[:, : self._cap, : self._cap] = self.ancestors
            self.ancestors, self._cap = grown, cap
        if parent >= 0:
            self.ancestors[row, col] = self.ancestors[row, parent]
        self.ancestors[row, col, col] = True
        self._pending_real += not pad
        self.tokens[row].append(token)
        self.depth[row].append(self.depth[row][parent] + 1 if parent >= 0 else 0)
        return col

    def insert(self, row: int, ids: Sequence[int], parent: int = -1) -> list[int]:
        """Add ``ids`` below ``parent`` (-1: the root) in ``row``; returns the column of each token."""
        cols = []
        kids = self.children[row]
        for t in ids:
            col = kids.get((parent, t))
            if col is None:
                col = kids[(parent, t)] = self._new_column(row, t, parent)
            cols.append(col)
            parent = col
        return cols

    def append(self, row: int, token: int, parent: int) -> int:
        """Add one node that is never shared (a generated token); returns its column."""
        return self._new_column(row, token, parent)

    def width(self, row: int) -> int:
        return len(self.tokens[row])

    # ------------------------------------------------------------------ running
    def run(self, want: Iterable[tuple[int, int]]) -> dict[tuple[int, int], Any]:
        """Run every pending column through the model; hidden states of the ``(row, column)`` wanted."""
        import torch

        want_by_col: dict[int, list[int]] = {}
        for r, c in want:
            want_by_col.setdefault(c, []).append(r)
        end = max(len(t) for t in self.tokens)
        for r in range(self.n_rows):  # pad every row to the common width: a pad attends to itself only
            while len(self.tokens[r]) < end:
                self._new_column(r, self.pad_id, -1, pad=True)
        out: dict[tuple[int, int], Any] = {}
        step = max(1, self.token_budget // self.n_rows)
        neg = torch.finfo(self.dtype).min
        for c0 in range(self.done, end, step):
            c1 = min(end, c0 + step)
            ids = torch.tensor([t[c0:c1] for t in self.tokens], dtype=torch.long, device=self.device)
            pos = torch.tensor([d[c0:c1] for d in self.depth], dtype=torch.long, device=self.device)
            allowed = self.ancestors[:, c0:c1, :c1].to(self.device)
            mask = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device).masked_fill_(~allowed, neg)
            with torch.inference_mode():
                res = self.decoder(input_ids=ids, attention_mask=mask[:, None], position_ids=pos,
                                   use_cache=True, **{self._cache_kw: self.cache})
            self.cache = getattr(res, "cache", None) or res.past_key_values
            hidden = res.last_hidden_state
            for c in range(c0, c1):
                for r in want_by_col.get(c, ()):
                    out[(r, c)] = hidden[r, c - c0]
            self.stats.forwards += 1
            self.stats.token_slots += ids.numel()
            self.stats.max_slots_per_forward = max(self.stats.max_slots_per_forward, ids.numel())
        self.done = end
        self.stats.tokens += self._pending_real
        self._pending_real = 0
        return out

    def logprobs(self, hidden: Sequence[Any]) -> Any:
        """Log-softmax over the vocabulary of the LM head applied to these hidden states only."""
        import torch

        if not hidden:
            return torch.empty((0, 0))
        with torch.inference_mode():
            logits = self.head(torch.stack(list(hidden))).float()
            cap = getattr(self.model.config, "final_logit_softcapping", None)
            if cap:
                logits = torch.tanh(logits / cap) * cap
        self.stats.head_rows += len(hidden)
        self.stats.max_head_rows = max(self.stats.max_head_rows, len(hidden))
        return torch.log_softmax(logits, dim=-1).cpu()
