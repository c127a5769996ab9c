"""Bradley-Terry strengths by maximum likelihood, with a Gaussian prior so unbeaten candidates stay finite.

Model: P(i beats j) = sigmoid(theta_i - theta_j). A comparison is ``(i, j, credit_i)`` with
``credit_i`` in [0, 1]: 1 a win for i, 0 a win for j, 0.5 a tie (a tie counts as half a win each
way). The log-posterior

    sum_c [credit_i * log s(d) + (1 - credit_i) * log s(-d)]  -  prior / 2 * sum_i theta_i**2,   d = theta_i - theta_j

is strictly concave for ``prior > 0``, so Newton's method finds its unique maximum in a few steps;
with ``prior = 0`` a candidate that never lost would run off to infinity. Strengths are reported on
the log scale, centred to mean 0 (the prior already centres them; centring also fixes the free
offset when ``prior = 0``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["BTResult", "bradley_terry", "win_probability"]

Comparison = tuple[int, int, float]


@dataclass(frozen=True, slots=True)
class BTResult:
    """Log-strengths (mean 0), how many Newton steps it took, and whether it converged."""

    strengths: tuple[float, ...]
    iterations: int
    converged: bool

    def order(self) -> list[int]:
        """Candidate indices from strongest to weakest (ties broken by the lower index)."""
        return sorted(range(len(self.strengths)), key=lambda i: (-self.strengths[i], i))


def win_probability(theta_i: float, theta_j: float) -> float:
    """P(i beats j) under the model."""
    return _sigmoid(theta_i - theta_j)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve a x = b by Gaussian elimination with partial pivoting (n is tiny: candidates per prompt)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-300:
            raise ZeroDivisionError("singular system")
        m[col], m[piv] = m[piv], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            if f:
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def bradley_terry(n: int, comparisons: Iterable[Sequence[float]], *, prior: float = 0.1,
                  max_iter: int = 100, tol: float = 1e-10) -> BTResult:
    """Fit strengths for ``n`` candidates from ``(i, j, credit_i)`` comparisons.

    ``prior`` is the precision of a zero-mean Gaussian prior on each log-strength (0 gives the plain
    MLE, which diverges for a candidate that never lost or never won). Candidates that were never
    compared get strength 0 (the prior mean) when ``prior > 0``.
    """
    if n < 1:
        raise ValueError("bradley_terry: need at least one candidate")
    if prior < 0:
        raise ValueError(f"bradley_terry: prior must be >= 0, got {prior}")
    comps: list[Comparison] = []
    for c in comparisons:
        i, j, credit = int(c[0]), int(c[1]), float(c[2])
        if not (0 <= i < n and 0 <= j < n) or i == j:
            raise ValueError(f"bradley_terry: bad pair ({i}, {j}) for {n} candidates")
        if not 0.0 <= credit <= 1.0:
            raise ValueError(f"bradley_terry: credit must be in [0, 1], got {credit}")
        comps.append((i, j, credit))
    theta = [0.0] * n
    # with no prior, fix theta_0 = 0 (the likelihood only sees differences) and centre afterwards
    free = list(range(n)) if prior > 0 else list(range(1, n))
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        grad = [-prior * t for t in theta]
        hess = [[0.0] * n for _ in range(n)]
        for i in range(n):
            hess[i][i] = prior
        for i, j, credit in comps:
            p = _sigmoid(theta[i] - theta[j])
            g = credit - p
            grad[i] += g
            grad[j] -= g
            w = p * (1.0 - p)
            hess[i][i] += w
            hess[j][j] += w
            hess[i][j] -= w
            hess[j][i] -= w
        if not free:
            converged = True
            break
        try:
            step = _solve([[hess[r][c] for c in free] for r in free], [grad[r] for r in free])
        except ZeroDivisionError:
            # some candidate has no comparisons and no prior: it stays at 0
            free = [r for r in free if hess[r][r] > 0]
            continue
        # damp huge steps (plain MLE on separable data); concavity makes a damped Newton step safe
        biggest = max(abs(s) for s in step)
        scale = 1.0 if biggest <= 5.0 else 5.0 / biggest
        for r, s in zip(free, step, strict=True):
            theta[r] += scale * s
        if biggest * scale < tol:
            converged = True
            break
    mean = sum(theta) / n
    return BTResult(tuple(t - mean for t in theta), it, converged)
