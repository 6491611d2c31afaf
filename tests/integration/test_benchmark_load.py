"""``benchmarks/load.py --quick`` as its README runs it: every request answered, every served decision equal to the
benchmark's independent computation, and the fan-out floor measured in the same run.

The benchmark stopped running once before without anyone noticing (it assumed clear record ids after they became
pseudonyms). Its timing targets are figures for its report, not asserted here: a loaded CI machine would fail them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]
# 8 entity processes, a training run and 2 x 2 loads of 80 requests: about 40 s on 2 idle cores.
TIMEOUT_S = 900


def test_quick_load_answers_every_request_with_the_independently_computed_decision() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "--quick", "--requests", "80"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    # 1 is a missed timing target; anything else is a crash.
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "target: zero errors under load: PASS (0 errors in 160 requests)" in out, out[-3000:]
    assert re.search(r"target: served decisions = independent computation to 1e-09: PASS \(\d+ decisions", out)
    for batch in (1, 64):
        assert re.search(rf"^load, batch {batch}: 80 requests .* 0 errors", out, re.MULTILINE), out[-3000:]
        assert re.search(rf"^floor, batch {batch}: [0-9.]+ requests/s, .* 0 errors", out, re.MULTILINE), out[-3000:]
        assert f"target: batch {batch}: within 2x of the bare fan-out floor" in out
    # The batches reached the entities: fewer kernel-row calls than requests times entities touched.
    calls = re.search(r"entity calls \(KernelBlock by ids; unbatched\)\s+([\d,]+) \(([\d,]+)\)", out)
    assert calls is not None, out[-3000:]
    made, unbatched = (int(group.replace(",", "")) for group in calls.groups())
    assert 0 < made < unbatched  # 8 clients start together: their first requests at least share a batch
