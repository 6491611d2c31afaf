"""Issue 29 item 4 from the command line: `coordinator train --class-weight balanced` on a rare outcome.

Pima diabetes (shipped) cut to 15 % positive, split 2 x 1 with 30 % held out: the balanced model finds the positive
class where the unweighted one predicts the majority for nearly everyone; a DP method refuses the flag.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppsvm.core.model import Model

from .conftest import REPO


def _rare_outcome(directory: Path) -> Path:
    lines = (REPO / "ppsvm" / "data" / "bundled" / "pima-indians-diabetes.data").read_text().splitlines()
    positive = [line for line in lines if line.endswith(",1")]
    negative = [line for line in lines if line.endswith(",0")]
    chosen = np.random.default_rng(1).choice(len(positive), int(0.15 * len(negative) / 0.85), replace=False)
    path = directory / "rare.csv"
    path.write_text("\n".join([*negative, *(positive[k] for k in sorted(chosen))]) + "\n")
    return path


def test_balanced_class_weight_finds_the_rare_class(federation, tmp_path: Path) -> None:
    run = federation(2, 1, data=_rare_outcome(tmp_path), options=["--test-fraction", "0.3"])
    common = ["--kernel", "gaussian", "--basis", "paper"]
    run.train(*common)
    plain = run.evaluate()
    run.train(*common, "--class-weight", "balanced")
    balanced = run.evaluate()
    assert Model.load(run.split_dir / "model.json").training["class_weight"] == "balanced"
    assert balanced["sensitivity"] > plain["sensitivity"] + 0.3, (plain, balanced)
    assert balanced["balanced_accuracy"] > plain["balanced_accuracy"]
    refused = run.train("--method", "dp-hybrid", "--public", "p.toml", "--class-weight", "balanced", check=False)
    assert refused.returncode == 1 and "sensitivity bound no longer holds" in refused.stderr
