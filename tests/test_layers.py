"""The folders are the layers of docs/architecture.md, and no module imports a layer above its own.

From the bottom: the values shared by all (the top-level modules but `cli`, `records/`, `pacing/`,
`manifests/`), the one Kubernetes access layer (`kube/`), the data path and the control path side by side
(`sources/`, `reconcile/`, `providers/`; `sharding/`, `ownership/`), the replica's wiring (`replica/`), and
the commands (`cli`, each package's `command` module, and the tools `local/` and `shards/`), which may
import anything. Imports inside functions count too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "shardsync"

VALUES, KUBE, PATHS, WIRING, COMMANDS = range(5)
NAMES = {
    VALUES: "values",
    KUBE: "kube",
    PATHS: "data/control path",
    WIRING: "replica wiring",
    COMMANDS: "cli",
}
# A package's layer; a top-level module not named here (logs, flags, ...) is one of the values.
LAYERS = {
    "records": VALUES,
    "pacing": VALUES,
    "manifests": VALUES,
    "kube": KUBE,
    "sources": PATHS,
    "reconcile": PATHS,
    "providers": PATHS,
    "sharding": PATHS,
    "ownership": PATHS,
    "replica": WIRING,
    "local": COMMANDS,
    "shards": COMMANDS,
    "cli": COMMANDS,
    "__main__": COMMANDS,
}


def layer_of(module: str) -> int:
    """The layer of a dotted module name under `shardsync`."""
    parts = module.split(".")[1:]
    if parts and parts[-1] == "command":  # `shardsync run`, `webhook-server`, `fake-provider`, `apiserver`
        return COMMANDS
    return LAYERS.get(parts[0], VALUES) if parts else VALUES


def module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("shardsync"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("shardsync")
        ):
            found.add(str(node.module))
    return found


def upward_imports(paths: list[Path]) -> list[str]:
    bad = []
    for path in paths:
        module = module_of(path)
        for imported in sorted(imports_of(path)):
            if layer_of(imported) > layer_of(module):
                bad.append(
                    f"{module} ({NAMES[layer_of(module)]}) imports {imported} ({NAMES[layer_of(imported)]})"
                )
    return bad


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward_imports(sorted(PACKAGE.rglob("*.py"))) == []


def test_the_top_level_holds_few_modules_and_every_package_has_a_layer() -> None:
    modules = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 8, modules
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert [p for p in packages if p not in LAYERS] == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from shardsync.replica.config import Settings", "shardsync.sources.sneaky (data/control path)"),
        ("def f():\n    import shardsync.cli", "shardsync.sources.sneaky (data/control path)"),
    ],
)
def test_an_upward_import_is_found(
    source: str, found: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scan must be able to fail: a source module importing the replica's wiring or the command line.
    module = tmp_path / "shardsync" / "sources" / "sneaky.py"
    module.parent.mkdir(parents=True)
    module.write_text(source + "\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "shardsync")
    [line] = upward_imports([module])
    assert line.startswith(found)
