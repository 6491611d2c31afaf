"""What `pip install .` puts into site-packages, and which layer may import which.

docs/design.md section 3: one import namespace (`ppsvm`), and layers that point one way:
core (math) <- wire <- entity | coordinator <- API <- CLI / demo / experiments.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ppsvm"

# What each layer may import of ppsvm (prefixes); the foundation modules are open to all.
# ppsvm.logs: the log format and the per-call log fields, which the wire layer sets and every layer logs with.
FOUNDATION = ("ppsvm.errors", "ppsvm.constants", "ppsvm.files", "ppsvm.progress", "ppsvm.logs", "ppsvm.memory")
ALLOWED = {
    "core": ("ppsvm.core", *FOUNDATION),
    "wire": ("ppsvm.wire", *FOUNDATION),
    "entity": ("ppsvm.entity", "ppsvm.core", "ppsvm.data", "ppsvm.wire", "ppsvm.config", "ppsvm", *FOUNDATION),
    "coordinator": ("ppsvm.coordinator", "ppsvm.core", "ppsvm.data", "ppsvm.wire", "ppsvm.config", *FOUNDATION),
    # The in-process simulation sits above both sides; the CLI, demo and experiments are its clients.
    "api": (
        "ppsvm.api",
        "ppsvm.entity",
        "ppsvm.coordinator",
        "ppsvm.core",
        "ppsvm.data",
        "ppsvm.wire",
        "ppsvm.config",
        *FOUNDATION,
    ),
}


def ppsvm_imports(path: Path) -> set[str]:
    """The ppsvm modules (or packages) that ``path`` imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "ppsvm")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "ppsvm"
        ):
            found.update(
                f"{node.module}.{alias.name}" if node.module == "ppsvm" else node.module for alias in node.names
            )
    return found


def allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes if prefix != "ppsvm") or (
        "ppsvm" in prefixes and module == "ppsvm.__version__"
    )


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_what_is_below_it(layer: str) -> None:
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files, f"ppsvm/{layer} has no modules"
    wrong = {
        f"{path.relative_to(REPO)} imports {module}"
        for path in files
        for module in ppsvm_imports(path)
        if not allowed(module, ALLOWED[layer])
    }
    assert not wrong, "\n".join(sorted(wrong))


def test_the_import_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """Control: the coordinator importing the entity, in each spelling, is caught."""
    module = tmp_path / "bad.py"
    module.write_text(
        "from ppsvm.entity.cell import EntityCore\nimport ppsvm.entity.guard\ndef f():\n    from ppsvm import entity\n",
        encoding="utf-8",
    )
    imports = ppsvm_imports(module)
    assert imports == {"ppsvm.entity.cell", "ppsvm.entity.guard", "ppsvm.entity"}
    assert not any(allowed(m, ALLOWED["coordinator"]) for m in imports)


def test_the_import_check_sees_the_api_import_the_cli(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from ppsvm.cli import main\nimport ppsvm.experiments.table1\n", encoding="utf-8")
    assert not any(allowed(m, ALLOWED["api"]) for m in ppsvm_imports(module))


@pytest.mark.parametrize("module", ["ppsvm", "ppsvm.cli", "ppsvm.entity.server"])
def test_importing_ppsvm_or_running_an_entity_loads_neither_the_api_nor_scikit_learn(module: str) -> None:
    """The API is loaded on first use of a name from it (``ppsvm.__getattr__``); an entity never uses one."""
    probe = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.startswith(('ppsvm.api', 'sklearn', 'pandas'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_api_names_load_on_first_use() -> None:
    import ppsvm

    assert set(ppsvm.__all__) <= set(dir(ppsvm))
    assert ppsvm.RandomKernelClassifier.__module__ == "ppsvm.api.estimators"
    assert ppsvm.Federation.__module__ == "ppsvm.api.federation"
    with pytest.raises(AttributeError, match="no attribute 'Regressor'"):
        ppsvm.Regressor  # noqa: B018


def test_no_module_edits_the_import_path() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for folder in ("ppsvm", "tests", "benchmarks")
        for path in (REPO / folder).rglob("*.py")
        if path != Path(__file__).resolve()
        and any(edit in path.read_text(encoding="utf-8") for edit in ("sys.path", "PYTHONPATH"))
    ]
    assert not offenders, offenders


@pytest.mark.slow
def test_the_wheel_holds_only_the_ppsvm_package(tmp_path: Path) -> None:
    """`pip wheel .` (what `pip install .` installs): no top-level name but ppsvm and its dist-info; the bundled
    data and the stubs' type hints are inside, the tests and benchmarks are not."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("ppsvm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {name for name in top if not name.endswith(".dist-info")} == {"ppsvm"}, sorted(top)
    assert "ppsvm/data/bundled/wdbc.data" in names
    assert "ppsvm/wire/rpc/ppsvm_pb2.pyi" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), "LICENSE not in the wheel"
