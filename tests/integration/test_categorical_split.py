"""A CSV file with text columns, end to end: `ppsvm split` infers its categories and writes them into each cell's
[schema], the `ppsvm entity` processes encode the cells' text through it, and the coordinator trains and
evaluates over them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ppsvm.config import load_entity_config


def patients(path: Path, m: int = 300) -> Path:
    """Records whose outcome depends on a number (age) and on two text columns (sex, smoker)."""
    rng = np.random.default_rng(7)
    age = rng.uniform(20, 80, m)
    bmi = rng.normal(25, 4, m)
    sex = rng.choice(["F", "M"], m)
    smoker = rng.choice(["never", "former", "current"], m)
    region = rng.choice(["north", "south, coast"], m)  # a category holding the delimiter, quoted
    risk = (age - 50) / 10 + np.where(smoker == "current", 2.0, 0.0) - np.where(sex == "F", 1.0, 0.0)
    outcome = np.where(risk + rng.normal(0, 0.3, m) > 0, "sick", "healthy")
    lines = ["pid,age,sex,bmi,smoker,region,outcome"]
    lines += [f'p{k},{age[k]:.1f},{sex[k]},{bmi[k]:.1f},{smoker[k]},"{region[k]}",{outcome[k]}' for k in range(m)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_split_infers_categories_and_the_entities_train_on_them(federation, tmp_path: Path) -> None:
    data = patients(tmp_path / "patients.csv")
    options = ["--header", "--label", "outcome", "--positive", "sick", "--id-column", "pid", "--seed", "1"]
    run = federation(2, 2, data=data, options=options)
    config = load_entity_config(run.split_dir / "r0c1.toml")
    assert config.schema is not None
    assert [(f.name, f.categories) for f in config.schema.features] == [
        ("smoker", ("current", "former", "never")),
        ("region", ("north", "south, coast")),
    ]
    assert "current" in (run.split_dir / "r0c1.csv").read_text()  # the cells keep the text
    run.train("--basis", "product")
    result = run.evaluate()
    assert result["private"] is True
    # The majority class errs about 0.45 and the pooled reference about 0.08; with fresh secrets per split the
    # product basis erred 0.13 to 0.2 here, once 0.37 in a default run on a loaded machine (the paper basis, mbar = 3
    # at n_j = 4 encoded columns, 0.28 to 0.43). What this test checks is that the text columns reach the model.
    assert result["error_rate"] < result["trivial_baseline"]["majority_error_rate"] - 0.05, result
