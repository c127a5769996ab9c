"""Guard speed: the degenerate screen and the injection flag per response, for a normal answer and each
adversarial shape (``rubric_reward.testing.adversarial``) at several lengths.

Each cell is the least wall time of ``screen_response`` + ``flag_response`` over ``--repeats`` distinct texts of
the shape (the readings are memoised per text). ``--against PATH`` times the same texts through another checkout
(e.g. a worktree of an older commit) in a child process per cell, cut at ``--limit`` seconds, and prints the
ratio; both columns come from the same run on the same machine.

    python benchmarks/guard_speed.py
    python benchmarks/guard_speed.py --sizes 16000,32000,48000 --against /tmp/old-checkout --limit 120
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _bench import ROOT, filler

_CHILD = r"""
import importlib.util, json, sys, time
root, shape, n, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, root)
spec = importlib.util.spec_from_file_location("adversarial", sys.argv[5])
adversarial = importlib.util.module_from_spec(spec)
spec.loader.exec_module(adversarial)
try:
    from rubric_reward.guards.degenerate import screen_response
    from rubric_reward.guards.flag import flag_response
except ImportError:  # a checkout from before the guards had their room
    from rubric_reward.guards.degenerate import screen_response
    from rubric_reward.guards.flag import flag_response
flag_response("\u00e9 warm-up"), screen_response("\u00e9 warm-up", "q")
make = adversarial.SHAPES[shape] if shape in adversarial.SHAPES else None
best = float("inf")
for k in range(repeats):
    text = (make(n) if make else sys.argv[6]) + f" {k}"
    start = time.perf_counter()
    screen_response(text, "What is the task?"), flag_response(text)
    best = min(best, time.perf_counter() - start)
print(json.dumps(best))
"""


def _time_here(text_of, repeats: int) -> float:
    from rubric_reward.guards.degenerate import screen_response
    from rubric_reward.guards.flag import flag_response

    best = float("inf")
    for k in range(repeats):
        text = text_of() + f" {k}"
        start = time.perf_counter()
        screen_response(text, "What is the task?"), flag_response(text)
        best = min(best, time.perf_counter() - start)
    return best


def _time_there(root: str, shape: str, n: int, repeats: int, limit: float, text: str = "") -> float | None:
    cmd = [sys.executable, "-c", _CHILD, root, shape, str(n), str(repeats),
           str(ROOT / "rubric_reward" / "testing" / "adversarial.py"), text]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ms(seconds: float | None, limit: float) -> str:
    return f">{limit:.0f} s" if seconds is None else f"{seconds * 1e3:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16000,32000,64000,1000000", help="lengths in characters")
    parser.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", default="", help="another checkout to time the same texts through")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds a cell of --against may take")
    args = parser.parse_args()
    from rubric_reward.guards.degenerate import screen_response
    from rubric_reward.guards.flag import flag_response
    from rubric_reward.testing.adversarial import SHAPES

    flag_response("\u00e9 warm-up"), screen_response("\u00e9 warm-up", "q")  # tables built once, not timed
    sizes = [int(s) for s in args.sizes.split(",") if s]
    shapes = [s for s in args.shapes.split(",") if s] or sorted(SHAPES)
    head = "| shape | n | this checkout (ms) |" + (" against (ms) | against / this |" if args.against else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    answer = filler(0, 300)
    rows = [("300-word answer", len(answer), lambda: answer, None)]
    rows += [(shape, n, (lambda m=SHAPES[shape], k=n: m(k)), shape) for shape in shapes for n in sizes]
    for name, n, text_of, shape in rows:
        here = _time_here(text_of, args.repeats)
        line = f"| {name} | {n} | {here * 1e3:.2f} |"
        if args.against:
            there = _time_there(args.against, shape or "-", n, args.repeats, args.limit, "" if shape else answer)
            ratio = "-" if there is None else f"{there / here:.1f}x"
            line += f" {_ms(there, args.limit)} | {ratio} |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
