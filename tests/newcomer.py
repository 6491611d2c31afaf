"""Issue 29's newcomer DP case on real data: three hospitals of 700 records, 18 encoded features, 200 public records.

UCI Adult (shipped as ppsvm/experiments/data/adult.data.gz), balanced by drawing as many records of each class,
as the newcomer's 46/54 outcome was: five numbers and three categories (sex, race, relationship) that one-hot
encode into 13 columns, 18 in all, read through a declared schema as the entities read theirs. The public records
hold 100 of each class; the held-out ones score the real models.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.experiments.adult import ADULT_FILE, AGE, EDUCATION_NUM, GAIN, HOURS, LABEL, LOSS, POSITIVE, read_rows

ENTITIES = 3
PER_ENTITY = 700
N_PUBLIC = 200
N_TEST = 2_000
EPSILON = 1.0
NEGATIVE = "<=50K"
NUMBERS = {"age": AGE, "education-num": EDUCATION_NUM, "capital-gain": GAIN, "capital-loss": LOSS, "hours": HOURS}
CATEGORIES = {
    "sex": (9, ("Female", "Male")),
    "race": (8, ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")),
    "relationship": (7, ("Husband", "Not-in-family", "Other-relative", "Own-child", "Unmarried", "Wife")),
}
HEADER = ["id", *NUMBERS, *CATEGORIES, "income"]


def schema_features() -> list[dict[str, Any]]:
    """The entities' ``[[schema.features]]`` entries: the numbers, then the categories in their declared order."""
    numbers: list[dict[str, Any]] = [{"name": name, "type": "number"} for name in NUMBERS]
    categories = [
        {"name": name, "type": "category", "categories": list(values)} for name, (_, values) in CATEGORIES.items()
    ]
    return numbers + categories


def schema_toml() -> str:
    """:func:`schema_features` as the TOML of an entity config."""
    blocks = []
    for feature in schema_features():
        lines = ["[[schema.features]]", f'name = "{feature["name"]}"', f'type = "{feature["type"]}"']
        if "categories" in feature:
            lines.append("categories = [" + ", ".join(f'"{c}"' for c in feature["categories"]) + "]")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def data_toml(path: str) -> str:
    """An entity config's ``[data]`` table for a newcomer CSV at ``path``."""
    return (
        f'[data]\nsource = "csv"\npath = "{path}"\nid = "id"\nlabel = "income"\n'
        f'labels = {{ positive = "{POSITIVE}", negative = "{NEGATIVE}" }}\n'
    )


def newcomer_rows() -> dict[str, list[list[str]]]:
    """Rows (HEADER's columns, as text) of the "public", "private" (ENTITIES x PER_ENTITY) and "test" records."""
    used = (*NUMBERS.values(), *(column for column, _ in CATEGORIES.values()), LABEL)
    rows, _ = read_rows(ADULT_FILE, used)
    rng = np.random.default_rng(29)
    positive = rng.permutation([k for k, r in enumerate(rows) if r[LABEL] == POSITIVE])
    negative = rng.permutation([k for k, r in enumerate(rows) if r[LABEL] != POSITIVE])
    half_public, half_rest = N_PUBLIC // 2, (ENTITIES * PER_ENTITY + N_TEST) // 2
    rest = rng.permutation(np.concatenate([positive[half_public:][:half_rest], negative[half_public:][:half_rest]]))
    chosen = {
        "public": np.concatenate([positive[:half_public], negative[:half_public]]),
        "private": rest[: ENTITIES * PER_ENTITY],
        "test": rest[ENTITIES * PER_ENTITY :],
    }

    def row(k: int) -> list[str]:
        record = rows[k]
        values = [record[column] for column in NUMBERS.values()] + [record[c] for c, _ in CATEGORIES.values()]
        return [f"a{k}", *values, POSITIVE if record[LABEL] == POSITIVE else NEGATIVE]

    return {part: [row(int(k)) for k in indices] for part, indices in chosen.items()}


def write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path
