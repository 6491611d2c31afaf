"""Privacy rule 3 measured by attack: how well kernel rows pin records down, by mbar.

A column-block peer knows B_j (it shares the secret) and sees K(A_ij, B_j') for
another entity's records. For every mbar from 1 to n_j + 2 this script draws
records uniform on [0, 1]^n_j (the scaled feature box), B_j by
common.randomness.derive_B, and runs common.attacks.reconstruct_gaussian
(multi-start bounded least squares on the squared distances, mu = 1/n_j) and
common.attacks.reconstruct_linear (minimum-norm solution plus the null space).

It then runs common.attacks.reconstruct_by_rescaling: a coordinator that knows
neither A_ij nor B_j but varies the per-feature scaling (low, high) of its
kernel requests, answered by the same functions EntityCore.kernel_block uses.

    PYTHONPATH=. .venv/bin/python benchmarks/attacks.py [--features 8] [--rows 100] [--seed 0]

Pure computation in this process (no gRPC); prints the tables and writes results/attacks.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks._shared import machine_info, table, write_json  # noqa: E402
from coordinator.reproduce.inprocess import fixed_secret  # noqa: E402
from common.attacks import (  # noqa: E402
    FIT_TOLERANCE, Reconstruction, reconstruct_by_rescaling, reconstruct_gaussian, reconstruct_linear,
)
from common.kernels import gaussian_kernel, kernel, linear_kernel, scale_to_unit  # noqa: E402
from common.randomness import derive_B  # noqa: E402

NAME = "attacks"
RECOVERED = 1e-6   # a row counts as recovered when the best solution is this close (max abs, [0, 1] units)
AMBIGUOUS = 0.05   # a row counts as ambiguous when two exact solutions in the box are this far apart
STARTS = 8         # random starts per row for the Gaussian attack


def summary(result: Reconstruction, A: np.ndarray) -> dict[str, Any]:
    """Fraction recovered, median error and median spread of one attack on the records A (m, n)."""
    error = np.abs(result.X - A).max(axis=1)
    return {
        "recovered": float(np.mean(error < RECOVERED)),
        "ambiguous": float(np.mean(result.spread > AMBIGUOUS)),
        "median_error": float(np.median(error)),
        "median_spread": float(np.median(result.spread)),
        "solution_dim": result.solution_dim,
    }


def peer_attacks(n: int, rows: int, seed: int) -> list[dict[str, Any]]:
    """Both kernels' reconstructions for mbar = 1 .. n + 2 on the same records."""
    A = np.random.default_rng(seed).random((rows, n))
    secret = bytes.fromhex(fixed_secret(NAME, seed).strip())
    mu = 1.0 / n
    results = []
    for mbar in range(1, n + 3):
        B = derive_B(secret, mbar, n)
        started = time.perf_counter()
        gaussian = reconstruct_gaussian(gaussian_kernel(A, B, mu), B, mu, starts=STARTS,
                                        rng=np.random.default_rng(seed + 1))
        linear = reconstruct_linear(linear_kernel(A, B), B)
        results.append({"mbar": mbar, "private": mbar < n, "gaussian": summary(gaussian, A),
                        "linear": summary(linear, A), "seconds": time.perf_counter() - started})
        print(f"mbar={mbar} done in {results[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    return results


def coordinator_attacks(n: int, rows: int, seed: int) -> list[dict[str, Any]]:
    """The rescaling attack on raw (unscaled) records, both kernels, mbar = 1 and n - 1."""
    rng = np.random.default_rng(seed + 2)
    X = rng.normal(50.0, 20.0, size=(rows, n))
    secret = bytes.fromhex(fixed_secret(NAME, "coordinator", seed).strip())
    low, high = X.min(axis=0), X.max(axis=0)
    mu = 1.0 / n
    results = []
    for name in ("linear", "gaussian"):
        for mbar in sorted({1, max(n - 1, 1)}):
            B = derive_B(secret, mbar, n)
            asked = []

            def entity(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
                asked.append(1)
                return kernel(name, scale_to_unit(X, lo, hi), B, mu)  # what EntityCore.kernel_block returns

            found_X, found_B = reconstruct_by_rescaling(entity, low, high, name, mu)
            results.append({
                "kernel": name, "mbar": mbar, "queries": len(asked),
                "max_error_A_scaled": float(np.abs(scale_to_unit(found_X, low, high) - scale_to_unit(X, low, high)).max()),
                "max_error_B": float(np.abs(found_B - B).max()),
            })
    return results


def report(n: int, rows: int, seed: int, peer: list[dict[str, Any]], coordinator: list[dict[str, Any]]) -> str:
    headers = ["mbar", "rule 3", "Gaussian: recovered", "ambiguous", "median error", "median spread",
               "linear: recovered", "ambiguous", "median error", "median spread", "free dims (G/L)"]
    body = []
    for run in peer:
        g, lin = run["gaussian"], run["linear"]
        body.append([
            str(run["mbar"]), "kept" if run["private"] else "BROKEN",
            f"{g['recovered']:.0%}", f"{g['ambiguous']:.0%}", f"{g['median_error']:.1e}", f"{g['median_spread']:.3f}",
            f"{lin['recovered']:.0%}", f"{lin['ambiguous']:.0%}", f"{lin['median_error']:.1e}",
            f"{lin['median_spread']:.3f}",
            f"{g['solution_dim']}/{lin['solution_dim']}",
        ])
    lines = [
        f"Attack by a column-block peer that knows B_j: {rows} records uniform on [0, 1]^{n} (seed {seed}), "
        f"B_j = derive_B(sha256('ppsvm-benchmark/{NAME}/{seed}'), mbar, {n}), Gaussian mu = 1/{n}.",
        "",
        table(headers, body),
        "",
        f"recovered: share of rows whose best solution is within {RECOVERED:g} of the record (max abs error, "
        "[0, 1] feature units); the attacker cannot tell which rows those are when the row is ambiguous. "
        f"ambiguous: share of rows with a spread above {AMBIGUOUS:g}. median error: median over rows of that max abs error.",
        "median spread: median over rows of the distance between the two farthest solutions that reproduce the "
        f"kernel row exactly (residual <= {FIT_TOLERANCE:g}) inside [0, 1]^n. Gaussian: among {STARTS} random starts "
        "of bounded least squares on ||a - b_r||^2 = -log(k_r)/mu; linear: the ends of the longest segment in the box "
        "along a null-space direction of B_j through the fitting point deepest in the box (an LP). Both are lower "
        "bounds on the diameter of the set of records with that kernel row; 0 means the row pins the record down.",
        "free dims: dimension of the set of exact solutions in R^n (Gaussian: a sphere of dimension n - mbar, "
        "two points at mbar = n: the record and its mirror image in the hyperplane through the n points; "
        "linear: n - rank B_j). Rule 3 leaves only these dimensions free: the rest of the record (its projection "
        "onto the affine hull of the mbar points, resp. onto the row space of B_j) is determined exactly.",
        "rule 3: 'kept' when mbar < n_j (DESIGN.md section 2), 'BROKEN' otherwise (entities refuse without the override).",
        "",
        "Attack by a coordinator that knows neither A_ij nor B_j, through the Scaling (low, high) of its "
        f"KernelBlock requests: {rows} raw records N(50, 20^2) x {n} features (seed {seed + 2}), honest scaling from "
        "their min and max, one feature f moved at a time to s + x_f / c for (s, c) = (0, 2), (1/2, 2) and, Gaussian, "
        "(0, 4), x_f its honestly scaled value; the answers are computed as EntityCore.kernel_block computes them.",
        "",
        table(["kernel", "mbar", "queries", "max error, A (scaled units)", "max error, B_j"],
              [[c["kernel"], str(c["mbar"]), str(c["queries"]), f"{c['max_error_A_scaled']:.1e}",
                f"{c['max_error_B']:.1e}"] for c in coordinator]),
        "",
        "Every request of that attack has mbar < n_j and bounds that contain the honest ones (the entity's own rows "
        "still map into [0, 1]), so the entity serves it, and would even if it checked that its range is covered. "
        "tests/integration/test_coordinator_powers.py runs it against a real entity process.",
        "",
        f"rerun: PYTHONPATH=. .venv/bin/python benchmarks/{NAME}.py --features {n} --rows {rows} --seed {seed}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=8, help="n_j, the column block's width (default 8)")
    parser.add_argument("--rows", type=int, default=100, help="records attacked (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of records, secret and starts (default 0)")
    args = parser.parse_args(argv)
    if args.features < 2 or args.rows < 1:
        parser.error("need --features >= 2 and --rows >= 1")

    started = time.perf_counter()
    peer = peer_attacks(args.features, args.rows, args.seed)
    coordinator = coordinator_attacks(args.features, args.rows, args.seed)
    total = time.perf_counter() - started
    print(report(args.features, args.rows, args.seed, peer, coordinator))
    print(f"total wall time {total:.0f} s")
    settings = {"features": args.features, "rows": args.rows, "seed": args.seed, "starts": STARTS,
                "recovered_below": RECOVERED, "ambiguous_above": AMBIGUOUS, "fit_tolerance": FIT_TOLERANCE, "mu": 1.0 / args.features,
                "total_seconds": total}
    path = write_json(NAME, {"machine": machine_info(), "settings": settings, "peer": peer, "coordinator": coordinator})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
