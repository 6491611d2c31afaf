"""The documentation site (issue 30): mkdocs.yml builds with warnings as errors, with the API reference and the CLI.

The site is built as a user builds it (``mkdocs build --strict``), into a temporary directory: nothing is written
into the repository (no ``site/``, no bytecode beside the build hook). The API reference must carry the rendered
docstrings, and the command-line reference every subcommand ``ppsvm --help`` lists (the page's ``--help`` sections
come from the real parser at build time: docs/hooks/cli_reference.py).
"""

from __future__ import annotations

import ast
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "mkdocs.yml"
TIMEOUT_S = 600

pytestmark = pytest.mark.slow  # about 20 s: mkdocstrings reads the API's modules, the hook builds the parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's directory; the build's output in the failure message."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[test]' (or '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    before = {path: path.exists() for path in (REPO / "site", REPO / "docs" / "hooks" / "__pycache__")}
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(out)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    for path, existed in before.items():
        assert existed or not path.exists(), f"the build wrote {path.relative_to(REPO)} into the repository"
    return out


def text_of(page: Path) -> str:
    """A page's visible text: tags dropped, entities decoded, whitespace collapsed."""
    raw = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    return " ".join(html.unescape(raw).split())


def docstring_summary(module: Path, qualname: str) -> str:
    """The first line of a docstring, read from the source (no import: the API needs scikit-learn)."""
    node: ast.AST = ast.parse(module.read_text(encoding="utf-8"))
    for name in qualname.split("."):
        node = next(
            child
            for child in ast.iter_child_nodes(node)
            if isinstance(child, ast.ClassDef | ast.FunctionDef) and child.name == name
        )
    assert isinstance(node, ast.ClassDef | ast.FunctionDef)
    doc = ast.get_docstring(node)
    assert doc, f"{qualname} has no docstring"
    return doc.splitlines()[0].replace("``", "")


def test_the_site_builds_with_warnings_as_errors(site: Path) -> None:
    for page in ("index.html", "reference/api/index.html", "reference/cli/index.html", "threat-model/index.html"):
        assert (site / page).is_file(), page


@pytest.mark.parametrize(
    ("module", "qualname"),
    [
        ("ppsvm/api/estimators.py", "RandomKernelClassifier.predict_proba"),
        ("ppsvm/api/client.py", "Client.predict"),
        ("ppsvm/api/federation.py", "Federation"),
        ("ppsvm/api/dp_estimator.py", "DpHybridClassifier"),
    ],
)
def test_the_api_reference_renders_the_docstrings(site: Path, module: str, qualname: str) -> None:
    page = site / "reference" / "api" / "index.html"
    dotted = module.removesuffix(".py").replace("/", ".")
    assert f'id="{dotted}.{qualname}"' in page.read_text(encoding="utf-8"), f"{dotted}.{qualname} is not rendered"
    summary = docstring_summary(REPO / module, qualname)
    # compared without whitespace: the page puts spaces where tags were (``<code>ids</code>,``)
    assert "".join(summary.split()) in "".join(text_of(page).split()), f"{qualname}'s docstring is missing: {summary!r}"


def test_no_sphinx_role_shows_as_text(site: Path) -> None:
    for page in site.rglob("*.html"):
        left = re.findall(r":(?:mod|func|class|meth|attr|data|exc|obj|const):<code>", page.read_text(encoding="utf-8"))
        assert not left, f"{page.relative_to(site)} shows {len(left)} Sphinx roles as text"


def listed_commands(help_text: str) -> list[str]:
    """The subcommands a ``--help`` lists under its COMMAND (or ACTION) positional."""
    return re.findall(r"^    ([a-z][a-z0-9-]*)(?:\s|$)", help_text, flags=re.MULTILINE)


def test_the_cli_reference_has_every_command(site: Path) -> None:
    top = subprocess.run(
        [sys.executable, "-m", "ppsvm", "--help"], capture_output=True, text=True, timeout=TIMEOUT_S, check=True
    ).stdout
    commands = listed_commands(top)
    assert {"entity", "coordinator", "split", "reproduce"} <= set(commands), top
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    text = text_of(site / "reference" / "cli" / "index.html")
    for command in commands:
        assert f'id="ppsvm-{command}"' in page, f"ppsvm {command} has no section"
        assert f"usage: ppsvm {command}" in text, f"ppsvm {command}'s --help is not on the page"
    coordinator = subprocess.run(
        [sys.executable, "-m", "ppsvm", "coordinator", "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    ).stdout
    for action in listed_commands(coordinator):
        assert f'id="ppsvm-coordinator-{action}"' in page, f"ppsvm coordinator {action} has no section"
