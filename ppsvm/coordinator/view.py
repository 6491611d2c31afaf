"""What the coordinator holds after a training's kernel fetch, written out for audits and attack tests.

``ppsvm coordinator view`` (and :meth:`ppsvm.api.federation.Federation.view`) asks the entities for
the training records' kernel at the training view, exactly as :func:`ppsvm.coordinator.train.train`
does, and writes what arrived:

- ``replies/<entity>-train.npy``: every entity's reply as received, in the kernel's row order (uint64
  masked shares where its row block combines its blocks by secure aggregation);
- ``kernel-train.npy``: the assembled kernel K(A, B') at the width the entities were asked for;
- ``ids-train.txt``: the records of K's rows, one pseudonym a line;
- ``view.json``: kernel, mbar, mu, each column block's scaling, the row blocks and their entities, and which
  entities' replies are masked (those of row blocks of two or more).

A privacy reviewer (or a test) then attacks exactly what a coordinator sees. The fetch is a release
like any other: it is recorded in every entity's log and counts against its pins.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import Federation
from ppsvm.coordinator.federation import Session
from ppsvm.coordinator.train import TrainOptions, check_privacy, default_mbar
from ppsvm.files import PUBLIC_MODE, write_all

logger = logging.getLogger(__name__)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def write_view(federation: Federation, options: TrainOptions, out_dir: Path) -> dict[str, Any]:
    """Fetch the training records' kernel as a training would and write what the coordinator received.

    Returns
    -------
    dict
        The contents of ``view.json``.

    Raises
    ------
    EntityError, DataError, PrivacyError, ConfigError
        As :func:`ppsvm.coordinator.train.train`; nothing is written then.
    """
    with Session(federation, options.deadline) as session:
        blocks, scaling = session.survey()
        widths = [session.n_features(j) for j in federation.column_blocks]
        n_train = sum(b.size("train") for b in blocks)
        mbar = options.mbar if options.mbar is not None else default_mbar(widths, n_train)
        check_privacy(session, mbar, widths)
        fetch_mu = session.fetch_width(options.kernel)
        replies: dict[str, np.ndarray] = {}
        K = session.kernel(options.kernel, mbar, fetch_mu, scaling, blocks, "train", replies=replies)
        view = {
            "kernel": options.kernel,
            "mbar": mbar,
            "mu": fetch_mu,
            "scaling": [{"column_block": s.column_block, "low": list(s.low), "high": list(s.high)} for s in scaling],
            "row_blocks": [
                {"row_block": b.row_block, "rows": b.size("train"), "entities": [e.id for e in session.row_block(i)]}
                for b in blocks
                for i in (b.row_block,)
            ],
            # Combined with a row-block peer's; an entity alone in its row block sends its block as it is.
            "masked": sorted(
                e.id for b in blocks if len(session.row_block(b.row_block)) > 1 for e in session.row_block(b.row_block)
            ),
        }
        ids = np.concatenate([b.train_ids for b in blocks])
    # The replies first: view.json, written last, says the directory is complete.
    write_all(
        out_dir / "replies", {f"{entity}-train.npy": (_npy(reply), PUBLIC_MODE) for entity, reply in replies.items()}
    )
    files: dict[str, tuple[str | bytes, int]] = {
        "kernel-train.npy": (_npy(K), PUBLIC_MODE),
        "ids-train.txt": ("".join(f"{record}\n" for record in ids.tolist()), PUBLIC_MODE),
        "view.json": (json.dumps(view, indent=2) + "\n", PUBLIC_MODE),
    }
    write_all(out_dir, files)
    logger.info("wrote what the coordinator received (%d replies, K %s) to %s", len(replies), K.shape, out_dir)
    return view
