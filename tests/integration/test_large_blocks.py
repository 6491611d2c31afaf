"""A kernel block over gRPC's 4 MB message cap crosses a real mutual-TLS channel in chunks, intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppsvm.api.inprocess import serve_split
from ppsvm.config import load_entity_config
from ppsvm.coordinator.federation import Session
from ppsvm.coordinator.reference import pool_cells
from ppsvm.core.randomness import derive_B
from ppsvm.data.partition import SplitOptions, split_dataset

from .conftest import rule_dataset

GRPC_MAX_MESSAGE = 4 * 1024 * 1024


def test_kernel_block_over_4_mb_arrives_equal_to_the_central_kernel(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    m, n, mbar = 31_000, 20, 19
    X = rng.random((m, n)) * rng.uniform(1, 100, n)
    dataset = rule_dataset(X)
    split = split_dataset(dataset, SplitOptions(rows=1, cols=1, out_dir=tmp_path / "split", test_fraction=0.02, seed=0))
    with serve_split(split, tmp_path) as federation, Session(federation) as session:
        session.load_metadata()
        blocks = session.align_records()
        K = session.kernel("gaussian", mbar, 1.0 / n, session.column_scaling(), blocks, "train")
    assert K.nbytes > GRPC_MAX_MESSAGE

    # Independent: the cell read from disk, the bounds its schema declares, B from the secret, squared distances
    # expanded.
    X_train = pool_cells(split.federation_path.parent)[0]
    config = load_entity_config(split.entity_config_paths[0])
    B = derive_B(config.read_secret(), mbar, n)
    assert config.schema is not None
    bounds = config.schema.declared_bounds()
    assert bounds is not None
    scaled = (X_train - bounds[0]) / (bounds[1] - bounds[0])
    squared = (scaled**2).sum(axis=1)[:, None] - 2 * scaled @ B.T + (B**2).sum(axis=1)[None, :]
    np.testing.assert_allclose(K, np.exp(-squared / n), rtol=0, atol=1e-12)
