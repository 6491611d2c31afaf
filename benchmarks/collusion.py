"""Collusion against the random-kernel federation: what a coordinator and one colluding entity recover, measured.

Privacy rules 8 and 9 (docs/design.md section 2) and issue 25: for each data set, partition shape (2 x 1 horizontal,
1 x 2 vertical, 2 x 2 and 2 x 3 checkerboards), kernel (Gaussian at the fetch width mu = 1/n, linear) and mbar
(min n_j - 1, the default, and min n_j // 2), the victim is entity (0, 0) and each colluder role attacks what it can
see, scored as the share of the victim's scaled values recovered within 0.05 and the share of whole records with
every value within 0.05, against the best guess that uses no release
(:func:`ppsvm.core.reconstruction.no_release_guess`):

- column-block peer (entity (1, 0): knows B_0 and its own records of the same features, its prior);
- row-block peer (entity (0, 1): knows its own share and B_1, not B_0);
- coordinator alone (neither B nor any record).

Two views: (a) *single*, the victim's block K(A_00, B_0') on its own (what every entity sent before secure
aggregation, and what a horizontal split or a consenting entity still sends); (b) *aggregate*, what the coordinator
holds now: the row block's combination (sum of A_0j B_j' or of the log-kernels -mu ||a_j - b_j||^2), from which the
row-block peer can subtract its own share. Attacks: :func:`ppsvm.core.reconstruction.reconstruct` (sphere or plane,
box, seen values, Gaussian prior) with B_0 where the role knows it and a stand-in B (another secret's) where it does
not; and, on the aggregate, the *learned inverse*: the column-block peer fits a ridge regression from its own row
block's combined kernel rows (the coordinator holds them, and the peer knows which rows are its records) to its own
values, applies it to the victim's row block and snaps discrete features to the values it has seen. Both row blocks'
combinations use the same B_j's, so the map learned on one transfers to the other.

Then the known-sample attack: whoever sees one block under an unknown B_j (the row-block peer after subtracting its
own share; the coordinator alone on a horizontal split) and knows k of its records (values and kernel rows) solves
for B_j (linear: least squares of K_known = A_known B'; Gaussian: d = -log K / mu = ||a||^2 + ||b||^2 - 2 a.b is
linear in (b, ||b||^2) per point, refined by bounded least squares on the exact equations) and runs the
reconstruction on the other records: recovered share against k = 1 .. n_j + 3, on the 2 x 2 partition. The same for
the coordinator alone on the aggregate with k known *whole* records: the combination is one block of the
concatenated features under B = [B_0 B_1] (width n), so it needs about n + 1 of them; with the learned inverse from
the same k records beside it.

Records are shuffled (``--seed``), dealt into row blocks and cut into contiguous column blocks as ``ppsvm split``
does, and scaled to [0, 1] by the per-feature min and max of all records (what the members' published ranges give).
Adult: ``--adult-rows`` records (default 3,000) of its 13 one-column attributes. At most ``--victims`` records
(default 100) of the victim are attacked.

    .venv/bin/python -m benchmarks.collusion                      # all five data sets: 5 minutes on 2 busy cores
    .venv/bin/python -m benchmarks.collusion --quick              # Cleveland and WDBC, 60 victims: under 2 minutes
    .venv/bin/python -m benchmarks.collusion --datasets cleveland pima --victims 100

Pure computation in this process (no gRPC); prints the tables and writes results/collusion.json
(``--quick``: results/collusion-quick.json). tests/integration/test_collusion.py runs the same attacks against
`ppsvm entity` processes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from benchmarks._shared import machine_info, table, write_json
from ppsvm.core.aggregation import log_share
from ppsvm.core.kernels import KernelName
from ppsvm.core.randomness import derive_B
from ppsvm.core.reconstruction import Recovery, reconstruct, score_recovery
from ppsvm.data.dataset import load_dataset
from ppsvm.data.partition import feature_blocks
from ppsvm.data.shipped import TABLE1_DATASETS
from ppsvm.experiments.adult import load_adult_attributes

NAME = "collusion"
TOLERANCE = 0.05
# A value within TOLERANCE counts as recovered; the slack keeps a guess exactly TOLERANCE away from failing on rounding.
DATASETS = ("cleveland", "pima", "wdbc", "ionosphere", "adult")
SHAPES = ((2, 1), (1, 2), (2, 2), (2, 3))
KERNELS: tuple[KernelName, ...] = ("gaussian", "linear")
# A feature counts as discrete (snapped to seen values by the learned inverse) when at least this share of the
# prior's rows sit on values two or more rows share: the rule ppsvm.core.reconstruction uses to enumerate.
_DISCRETE_SHARE = 0.5
# Ridge of the learned inverse, relative to the mean diagonal of the standardised normal equations: enough to keep
# a fit from fewer records than features finite, too little to matter with hundreds.
_RIDGE = 1e-6
# Random starts per point of the Gaussian known-sample solve (besides the linear estimate), and the weight that
# pulls an underdetermined solve towards the linear estimate (which is itself anchored at the box centre).
_SOLVE_STARTS = 2
_ANCHOR_WEIGHT = 1e-3


def score(guess: np.ndarray, truth: np.ndarray, prior: np.ndarray) -> Recovery:
    """How much of ``truth`` (m, n) ``guess`` gets within TOLERANCE, beside the no-release guess from ``prior``."""
    return score_recovery(guess, truth, prior, TOLERANCE)


def as_dict(found: Recovery) -> dict[str, float]:
    return {
        "recovered": found.recovered,
        "whole": found.whole,
        "baseline": found.baseline,
        "baseline_whole": found.baseline_whole,
        "gain": found.gain,
    }


# --- data and partitions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """A data set's records scaled to [0, 1] by its own per-feature min and max."""

    name: str
    X: np.ndarray
    y: np.ndarray


def load(name: str, adult_rows: int, seed: int) -> Data:
    """One of DATASETS, scaled; Adult is a random sample of ``adult_rows`` records."""
    if name == "adult":
        adult = load_adult_attributes()
        pick = np.random.default_rng(seed).choice(len(adult.y), size=min(adult_rows, len(adult.y)), replace=False)
        X, y = adult.X[pick], adult.y[pick]
    else:
        shipped = TABLE1_DATASETS[name]
        dataset = load_dataset(shipped.path, shipped.options)
        X, y = dataset.X, dataset.y
    low, high = X.min(axis=0), X.max(axis=0)
    return Data(name, (X - low) / np.where(high > low, high - low, 1.0), y)


@dataclass(frozen=True)
class Partition:
    """Cells S[i][j] of an r x s checkerboard, their B_j, and each entity's additive share of its row block."""

    kernel: KernelName
    mbar: int
    mu: float
    cells: list[list[np.ndarray]]
    B: list[np.ndarray]
    shares: list[list[np.ndarray]]

    @property
    def rows(self) -> int:
        return len(self.cells)

    @property
    def cols(self) -> int:
        return len(self.cells[0])

    def combination(self, i: int, without: int | None = None) -> np.ndarray:
        """Row block i's summed shares (the log of its Gaussian kernel, or its linear kernel), less one share."""
        total = sum(share for j, share in enumerate(self.shares[i]) if j != without)
        assert isinstance(total, np.ndarray)  # callers always leave a share, so never sum()'s start 0
        return total

    def released(self, share: np.ndarray) -> np.ndarray:
        """A summed share as the coordinator reads it: the kernel (exp of the log-kernel for the Gaussian)."""
        return np.exp(share) if self.kernel == "gaussian" else share


def secret(label: str, seed: int) -> bytes:
    """A column block's secret for the benchmark: fixed by seed and label, so a run is repeatable."""
    return hashlib.sha256(f"ppsvm benchmark collusion/{seed}/{label}".encode()).digest()


def partition(data: Data, rows: int, cols: int, kernel: KernelName, mbar: int, seed: int) -> Partition:
    """Records shuffled and dealt into ``rows`` row blocks, features into ``cols`` contiguous column blocks."""
    order = np.random.default_rng(seed).permutation(len(data.X))
    row_blocks = np.array_split(order, rows)
    column_blocks = feature_blocks(data.X.shape[1], cols)
    cells = [[data.X[np.ix_(r, c)] for c in column_blocks] for r in row_blocks]
    B = [derive_B(secret(f"column block {j}", seed), mbar, len(c)) for j, c in enumerate(column_blocks)]
    mu = 1.0 / data.X.shape[1]  # the fetch width every entity is asked at
    shares = [[log_share(kernel, cell, B[j], mu) for j, cell in enumerate(row)] for row in cells]
    return Partition(kernel, mbar, mu, cells, B, shares)


def mbars(widths: list[int]) -> list[int]:
    """The default mbar (min n_j - 1) and half the smallest width, at least 1, without repeats."""
    low = min(widths)
    return sorted({max(low - 1, 1), max(low // 2, 1)}, reverse=True)


# --- attacks ----------------------------------------------------------------------------------------------------


def discrete_values(prior: np.ndarray) -> list[np.ndarray | None]:
    """Per feature, the values two or more prior rows share when they hold most rows (else None: continuous)."""
    values: list[np.ndarray | None] = []
    for column in prior.T:
        seen, counts = np.unique(column, return_counts=True)
        shared = counts >= 2
        values.append(seen[shared] if counts[shared].sum() >= _DISCRETE_SHARE * len(column) else None)
    return values


def snap(guess: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Each discrete feature of ``guess`` set to the nearest value the prior's rows share."""
    out = np.clip(guess, 0.0, 1.0)
    for feature, values in enumerate(discrete_values(prior)):
        if values is not None and len(values):
            out[:, feature] = values[np.abs(out[:, feature, None] - values[None, :]).argmin(axis=1)]
    return out


def learned_inverse(
    train_rows: np.ndarray, train_values: np.ndarray, rows: np.ndarray, prior: np.ndarray, *, ridge: float = _RIDGE
) -> np.ndarray:
    """Ridge regression from kernel rows (summed shares) to values, fitted on known pairs, applied to ``rows``.

    Parameters
    ----------
    train_rows : ndarray, shape (k, mbar)
        Summed shares (log-kernel or linear kernel) of records whose values the attacker knows.
    train_values : ndarray, shape (k, n)
        Those records' scaled values (of the features attacked).
    rows : ndarray, shape (m, mbar)
        The victims' summed shares.
    prior : ndarray, shape (m_p, n)
        Records whose seen values the guesses are snapped to.
    ridge : float
        Ridge relative to the mean diagonal of the standardised normal equations (default _RIDGE).

    Returns
    -------
    ndarray, shape (m, n)
    """
    centre, spread = train_rows.mean(axis=0), train_rows.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    Z = np.hstack([np.ones((len(train_rows), 1)), (train_rows - centre) / spread])
    normal = Z.T @ Z
    penalty = ridge * max(float(np.trace(normal)) / len(normal), 1.0) * np.eye(len(normal))
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    W = np.linalg.solve(normal + penalty, Z.T @ train_values)
    guess = np.hstack([np.ones((len(rows), 1)), (rows - centre) / spread]) @ W
    return snap(guess, prior)


def solve_B(kernel: KernelName, known: np.ndarray, released: np.ndarray, mu: float, seed: int) -> np.ndarray:
    """The known-sample attack's estimate of B (mbar, n) from k known records (k, n) and their kernel rows.

    Linear: B' = 0.5 + pinv(A)(K - A 0.5), exact once the known records span R^n (k >= n), otherwise the solution
    nearest the box centre (B's entries are uniform on [0, 1]). Gaussian: per point, d - ||a||^2 = ||b||^2 - 2 a.b
    is linear in (b, ||b||^2), exact from k >= n + 1 records; then bounded least squares on the exact equations
    ||a_r - b||^2 = d_r from that estimate (and, at k = n - 1 and n, a few random starts in the box), keeping the
    best fit, which settles most points from k = n records already.
    """
    k, n = known.shape
    mbar = released.shape[1]
    if kernel == "linear":
        return (0.5 + np.linalg.pinv(known) @ (released - known @ np.full((n, mbar), 0.5))).T
    d = -np.log(np.clip(released, np.finfo(float).tiny, 1.0)) / mu  # (k, mbar) squared distances
    M = np.hstack([-2.0 * known, np.ones((k, 1))])
    anchor = np.append(np.full(n, 0.5), n / 3.0)  # E b = 0.5, E ||b||^2 = n / 3 for b uniform on [0, 1]^n
    rhs = d - (known**2).sum(axis=1, keepdims=True)
    Z = anchor[:, None] + np.linalg.pinv(M) @ (rhs - M @ anchor[:, None])
    linear = np.clip(Z[:n].T, 0.0, 1.0)
    # The linear solve treats ||b||^2 as a free unknown: a feature constant over the known records (a code they all
    # share, Ionosphere's constant column) leaves b's coordinate along it to that unknown, and the estimate then
    # misses the exact equations. Refining on ||a_r - b||^2 = d_r settles it; with far fewer than n records the
    # exact equations leave a large set and refining only picks another point of it.
    if k < n - 1:
        return linear
    rng = np.random.default_rng(seed)
    refined = np.empty_like(linear)
    for point in range(mbar):

        def residual(b: np.ndarray, point: int = point) -> np.ndarray:
            exact = ((known - b) ** 2).sum(axis=1) - d[:, point]
            return np.append(exact, _ANCHOR_WEIGHT * (b - linear[point]))

        def jacobian(b: np.ndarray) -> np.ndarray:
            return np.vstack([-2.0 * (known - b), _ANCHOR_WEIGHT * np.eye(n)])

        # From n + 1 records the linear estimate is the answer up to such coordinates: one start suffices.
        starts = [linear[point], *rng.random((_SOLVE_STARTS if k <= n else 0, n))]
        fits = [least_squares(residual, start, jac=jacobian, bounds=(0.0, 1.0), max_nfev=100) for start in starts]
        refined[point] = min(fits, key=lambda fit: fit.cost).x
    return refined


# --- one configuration -------------------------------------------------------------------------------------------


def victims_and_prior(p: Partition, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of row block 0 attacked, the attacked records of cell (0, 0), and the prior of similar records.

    With two or more row blocks the prior is cell (1, 0) (the column-block peer's own records, and the "similar
    records" of the roles that have none); with one, the victims are the first half of the row block and the prior
    the second.
    """
    size = len(p.cells[0][0])
    if p.rows >= 2:
        rows = np.arange(min(limit, size))
        return rows, p.cells[0][0][rows], p.cells[1][0]
    half = size // 2
    rows = np.arange(min(limit, half))
    return rows, p.cells[0][0][rows], p.cells[0][0][half:]


def configuration(p: Partition, victims: int, seed: int) -> dict[str, Any]:
    """Every role's score on the single block and on the aggregate, for victim (0, 0)."""
    rows, truth, prior = victims_and_prior(p, victims)
    stand_in = derive_B(secret("stand-in", seed), p.mbar, truth.shape[1])
    single = p.released(p.shares[0][0][rows])
    aggregate = p.combination(0)[rows]
    attack = {}

    def run(points: np.ndarray, released: np.ndarray) -> Recovery:
        return score(reconstruct(released, points, p.kernel, p.mu, prior, seed=seed), truth, prior)

    if p.rows >= 2:
        peer_single = run(p.B[0], single)
        if p.cols == 1:
            # A horizontal row block's kernel is the block itself: nothing is combined.
            peer_aggregate, learned = peer_single, None
        else:
            peer_aggregate = run(p.B[0], p.released(aggregate))
            learned = score(learned_inverse(p.combination(1), p.cells[1][0], aggregate, prior), truth, prior)
        attack["column_peer"] = {
            "single": as_dict(peer_single),
            "aggregate": as_dict(peer_aggregate),
            "aggregate_learned": None if learned is None else as_dict(learned),
        }
    unknown_single = run(stand_in, single)
    if p.cols >= 2:
        # The row-block peer subtracts its own share: with two column blocks the victim's block is left.
        remaining = p.combination(0, without=1)[rows]
        row_aggregate = unknown_single if p.cols == 2 else run(stand_in, p.released(remaining))
        attack["row_peer"] = {"single": as_dict(unknown_single), "aggregate": as_dict(row_aggregate)}
    coordinator_aggregate = unknown_single if p.cols == 1 else run(stand_in, p.released(aggregate))
    attack["coordinator"] = {"single": as_dict(unknown_single), "aggregate": as_dict(coordinator_aggregate)}
    return attack


def known_samples(p: Partition, victims: int, seed: int) -> dict[str, Any]:
    """Recovered share against k known records, on a 2 x 2 partition.

    ``block``: the victim's block under an unknown B_0 (the row-block peer after subtracting its own share),
    k = 1 .. n_0 + 3 known records of cell (0, 0). ``aggregate``: the coordinator alone on row block 0's
    combination, k known whole records (every column block's values): B = [B_0 B_1] solved as one block of the
    n concatenated features, or the learned inverse fitted on the same k records; scored on column block 0.
    """
    order = np.random.default_rng(seed + 1).permutation(len(p.cells[0][0]))
    truth_all = p.cells[0][0]
    prior = p.cells[1][0]
    n0 = truth_all.shape[1]
    whole = np.hstack(p.cells[0])
    whole_prior = np.hstack(p.cells[1])
    n = whole.shape[1]
    single = p.released(p.shares[0][0])
    combined = p.combination(0)
    B_whole = np.hstack(p.B)
    block, aggregate = [], []
    for k in range(1, n0 + 4):
        known, rest = order[:k], order[k:][:victims]
        estimate = solve_B(p.kernel, truth_all[known], single[known], p.mu, seed)
        guess = reconstruct(single[rest], estimate, p.kernel, p.mu, prior, seed=seed)
        error = float(np.abs(estimate - p.B[0]).max())
        block.append({"k": k, "B_error": error, **as_dict(score(guess, truth_all[rest], prior))})
    for k in sorted({n0 + 1, n, n + 1, n + 3}):
        known, rest = order[:k], order[k:][:victims]
        estimate = solve_B(p.kernel, whole[known], p.released(combined[known]), p.mu, seed)
        guess = reconstruct(p.released(combined[rest]), estimate, p.kernel, p.mu, whole_prior, seed=seed)[:, :n0]
        learned = learned_inverse(combined[known], truth_all[known], combined[rest], prior)
        aggregate.append(
            {
                "k": k,
                "B_error": float(np.abs(estimate - B_whole).max()),
                "solve_B": as_dict(score(guess, truth_all[rest], prior)),
                "learned": as_dict(score(learned, truth_all[rest], prior)),
            }
        )
    return {"n_0": n0, "n": n, "block": block, "aggregate": aggregate}


# --- the run and its report --------------------------------------------------------------------------------------


def run_dataset(data: Data, victims: int, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {"records": len(data.X), "features": data.X.shape[1], "shapes": [], "known_samples": []}
    for rows, cols in SHAPES:
        widths = [len(c) for c in feature_blocks(data.X.shape[1], cols)]
        for kernel in KERNELS:
            for mbar in mbars(widths):
                started = time.perf_counter()
                p = partition(data, rows, cols, kernel, mbar, seed)
                entry = {"shape": f"{rows}x{cols}", "widths": widths, "kernel": kernel, "mbar": mbar}
                entry["roles"] = configuration(p, victims, seed)
                entry["seconds"] = time.perf_counter() - started
                results["shapes"].append(entry)
                log(f"  {data.name} {rows}x{cols} {kernel} mbar {mbar}: {entry['seconds']:.1f} s")
                if (rows, cols) == (2, 2):
                    started = time.perf_counter()
                    known = known_samples(p, victims, seed)
                    results["known_samples"].append({"kernel": kernel, "mbar": mbar, **known})
                    log(f"  {data.name} known samples {kernel} mbar {mbar}: {time.perf_counter() - started:.1f} s")
    return results


def _cell(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else f"{entry['recovered']:.2f}/{entry['whole']:.2f}"


def report(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "Share of the victim's (entity (0, 0)) values within 0.05 / of whole records, by colluder role and view.",
        "single: its block on its own; agg: what the coordinator holds now (row block's combination).",
        "col peer knows B_0 (reconstruct; 'learned': regression fitted on its own row block's combined rows);",
        "row peer and coordinator do not know B_0 (reconstruct with a stand-in B). base: the no-release guess;",
        "a figure below it is an attack that misleads itself (its user would fall back to the guess).",
    ]
    headers = [
        "shape",
        "kernel",
        "mbar",
        "base",
        "col single",
        "col agg",
        "col learned",
        "row single",
        "row agg",
        "coord agg",
    ]
    for name, result in results.items():
        body = []
        for entry in result["shapes"]:
            roles = entry["roles"]
            any_role = next(iter(roles.values()))["single"]
            column, row, coordinator = roles.get("column_peer"), roles.get("row_peer"), roles["coordinator"]
            body.append(
                [
                    entry["shape"],
                    entry["kernel"],
                    str(entry["mbar"]),
                    f"{any_role['baseline']:.2f}/{any_role['baseline_whole']:.2f}",
                    _cell(column and column["single"]),
                    _cell(column and column["aggregate"]),
                    _cell(column and column["aggregate_learned"]),
                    _cell(row and row["single"]),
                    _cell(row and row["aggregate"]),
                    _cell(coordinator["aggregate"]),
                ]
            )
        lines += ["", f"{name}: {result['records']} records, {result['features']} features", table(headers, body)]
    lines += [
        "",
        "Known-sample attack, 2 x 2: recovered share of the victim's values within 0.05 against k known records.",
        "block: the victim's block under an unknown B_0 (row-block peer + coordinator), B_0 solved from k of its",
        "records. agg: the coordinator alone on the combination, k known whole records, B = [B_0 B_1] solved",
        "(solveB) or a regression fitted on them (learned). 'first k' = fewest known records for a gain > 0.05 / a",
        "recovered share >= 0.95.",
    ]
    for name, result in results.items():
        for known in result["known_samples"]:
            block = known["block"]
            gains = [e["k"] for e in block if e["gain"] > 0.05]
            full = [e["k"] for e in block if e["recovered"] >= 0.95]
            lines.append(
                f"\n{name} {known['kernel']} mbar {known['mbar']} (n_0 = {known['n_0']}, n = {known['n']}; "
                f"base {block[0]['baseline']:.2f}): first k {gains[0] if gains else '-'} / {full[0] if full else '-'}"
            )
            recovered = [f"{e['recovered']:.2f}" for e in block]
            lines.append(table(["k", *(str(e["k"]) for e in block)], [["block", *recovered]]))
            aggregate = known["aggregate"]
            lines.append(
                table(
                    ["k", *(str(e["k"]) for e in aggregate)],
                    [
                        ["agg solveB", *(f"{e['solve_B']['recovered']:.2f}" for e in aggregate)],
                        ["agg learned", *(f"{e['learned']['recovered']:.2f}" for e in aggregate)],
                    ],
                )
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, help="default: all five")
    parser.add_argument("--victims", type=int, default=100, help="most victim records attacked (default 100)")
    parser.add_argument("--adult-rows", type=int, default=3000, help="Adult records sampled (default 3,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="Cleveland and WDBC, 60 victims")
    args = parser.parse_args(argv)
    names = args.datasets or (["cleveland", "wdbc"] if args.quick else list(DATASETS))
    victims = 60 if args.quick and args.victims == 100 else args.victims
    if victims < 1:
        parser.error("--victims must be >= 1")

    started = time.perf_counter()
    results = {}
    for name in names:
        data = load(name, args.adult_rows, args.seed)
        results[name] = run_dataset(data, victims, args.seed, lambda line: print(line, file=sys.stderr, flush=True))
    total = time.perf_counter() - started
    print(report(results))
    print(f"\ntotal wall time {total:.0f} s")
    settings = {
        "victims": victims,
        "adult_rows": args.adult_rows,
        "seed": args.seed,
        "tolerance": TOLERANCE,
        "shapes": [f"{r}x{c}" for r, c in SHAPES],
        "mu": "1 / n (the fetch width)",
        "total_seconds": total,
    }
    path = write_json(NAME, {"machine": machine_info(), "settings": settings, "datasets": results}, quick=args.quick)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
