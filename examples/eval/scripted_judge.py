"""A scripted loopback judge for the bundled example: answers from the human labels, with some
deterministic mistakes, so ``rubric-reward eval --config configs/eval/example.yaml`` runs offline
and produces a non-trivial report.

    python examples/eval/scripted_judge.py --port 18123

Its mistakes imitate known judge habits: it misses verbosity (calls long answers "appropriate"),
rates clarity one level too high now and then, and flips a few binary verdicts.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from rubric_reward.io.rows import numbered_jsonl_rows
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

HERE = Path(__file__).resolve().parent
CLARITY = ["unclear", "adequate", "clear"]


def _labels_by_response(path: Path = HERE / "items.jsonl") -> dict[str, dict[str, str]]:
    return {r["response"]: r["labels"] for _, r in numbered_jsonl_rows(path)}


def _coin(response: str, criterion: str, modulus: int) -> bool:
    digest = hashlib.blake2b(f"{criterion}\x1f{response}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % modulus == 0


def make_judge() -> ScriptedJudge:
    truth = _labels_by_response()

    def answer(criterion: str):
        def label(response: str, body: dict) -> str:
            human = truth.get(response, {}).get(criterion)
            if human is None:
                return "CANNOT_ASSESS" if criterion in ("correct_answer", "explains_reasoning") else "N/A"
            if criterion == "length" and human == "too_long":
                return "appropriate"
            if criterion == "clarity" and _coin(response, criterion, 3):
                return CLARITY[min(CLARITY.index(human) + 1, 2)]
            if criterion in ("correct_answer", "explains_reasoning") and _coin(response, criterion, 6):
                return "UNMET" if human == "MET" else "MET"
            return human
        return label

    names = ("correct_answer", "explains_reasoning", "clarity", "length")
    return ScriptedJudge({name: answer(name) for name in names})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18123)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args()
    with JudgeServer(make_judge(), port=args.port, latency_s=args.latency_ms / 1000, record_bodies=False) as server:
        print(f"scripted judge on {server.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
