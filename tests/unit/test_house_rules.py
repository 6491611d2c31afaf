"""House rules (issue 11): ruff lint and format clean, and mypy clean, on ppsvm/ and benchmarks/ (ruff on tests/ too).

The tools run as subprocesses of this interpreter (``python -m ruff``, ``python -m mypy``, both pinned in the
``test`` extra) with the settings in pyproject.toml, so the one test command of the README, which .ci/run runs,
enforces them. The generated gRPC stubs are excluded there: a test diffs them against protoc's output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
CHECKED = ("ppsvm", "tests", "benchmarks")
TIMEOUT_S = 600


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` from the repository root, output captured."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def report(result: subprocess.CompletedProcess[str], fix: str) -> str:
    return f"{' '.join(result.args[2:])} failed ({fix}):\n{result.stdout}{result.stderr}"


def test_ruff_check_is_clean() -> None:
    result = tool("ruff", "check", "--no-cache", *CHECKED)
    assert result.returncode == 0, report(result, "fix the findings; `ruff check --fix` does the safe ones")


def test_ruff_format_is_clean() -> None:
    result = tool("ruff", "format", "--check", "--no-cache", *CHECKED)
    assert result.returncode == 0, report(result, "run `ruff format ppsvm tests benchmarks`")


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = tool("mypy")  # what and how strictly: pyproject.toml [tool.mypy] (packages ppsvm and benchmarks)
    assert result.returncode == 0, report(result, "type the code; an ignore needs its error code and a reason")


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """Control: with this repository's settings, each tool reports a file that breaks its rules (so a clean
    run above means clean code, not a tool that checked nothing)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nx = '" + "a" * 130 + "'\ny=[1,2 ,3]\n\n\ndef f(v):\n    return v\n", encoding="utf-8")
    checked = tool("ruff", "check", "--no-cache", "--config", str(PYPROJECT), str(bad))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "F401" in checked.stdout and "E501" in checked.stdout, checked.stdout
    formatted = tool("ruff", "format", "--check", "--no-cache", "--config", str(PYPROJECT), str(bad))
    assert formatted.returncode == 1 and "bad.py" in formatted.stdout, formatted.stdout + formatted.stderr
    typed = tool("mypy", "--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path / "cache"), str(bad))
    assert typed.returncode == 1 and "[no-untyped-def]" in typed.stdout, typed.stdout + typed.stderr
