"""The house rules ARCHITECTURE.md draws, checked over the source (AST, nothing imported or run):

- only ``core/`` and ``tools/`` import ``subprocess`` or name a ``/sys`` or ``/proc`` path (the exemptions
  below are listed with their reason, and ARCHITECTURE.md lists them too);
- no subprocess is a shell script (``["sh", "-c", ...]``);
- no import cycle between modules (imports inside functions count: a cycle hidden in a function is one);
- a room imports only rooms below it (``LAYERS``), exemptions listed with their reason;
- no function longer than 60 lines in ``faults/``, ``soak/``, ``gates/``.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fxprobe"
KERNEL_PATH = re.compile(r"(?<![\w.~-])/(sys|proc)(/|\b)|^(sys|proc)/")    # /sys/..., or sys/... joined to a root
MAX_LINES = 60
SHORT_ROOMS = ("faults", "soak", "gates")

# room -> layer; a module imports only modules of its own layer or below (cli: anything)
LAYERS = {"core": 0, "tools": 1, "lab": 2, "host": 3, "network": 3, "workload": 3, "faults": 3, "soak": 3,
          "gates": 4, "report": 4, "rehearse": 5, "cli": 6}

# file (below fxprobe/) -> why it still names kernel paths outside core/ and tools/
KERNEL_PATH_EXEMPT: dict[str, str] = {}     # none: every kernel place is named in core/kernel.py or a tools/ module

# (importing module, imported room) -> why the import goes upward
LAYER_EXEMPT = {
    ("fxprobe.lab.target_control", "faults"): "the lab's target-control hook (the program a via = \"command\" "
                                              "scenario runs against the lab) drives the lab through the fault "
                                              "methods and their undo",
}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@lru_cache(maxsize=None)
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(name: str, path: Path) -> set[str]:
    """Every fxprobe module ``name`` imports, at the top or inside a function."""
    known = modules()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree(path)):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        out |= {t for t in targets if t in known and t != name}
    return out


def graph() -> dict[str, set[str]]:
    return {name: imports(name, path) for name, path in modules().items()}


def room(module: str) -> str:
    if module == "fxprobe.lab.rehearse":
        return "rehearse"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def docstring_nodes(module: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(module):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def kernel_path_literals(path: Path) -> list[int]:
    """Line numbers of string literals (not docstrings) that name a /sys or /proc path."""
    module = tree(path)
    skip = docstring_nodes(module)
    return sorted(node.lineno for node in ast.walk(module) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in skip and KERNEL_PATH.search(node.value))


def outside_core_and_tools() -> list[tuple[str, Path]]:
    return [(str(p.relative_to(PACKAGE)), p) for p in modules().values()
            if p.relative_to(PACKAGE).parts[0] not in ("core", "tools") and len(p.relative_to(PACKAGE).parts) > 1]


# -- the rules -----------------------------------------------------------------------------------
def test_only_core_and_tools_import_subprocess():
    offenders = []
    for rel, path in outside_core_and_tools():
        for node in ast.walk(tree(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "subprocess" or n.startswith("subprocess.") for n in names):
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], f"subprocess imported outside core/ and tools/ (use core.runner): {offenders}"


SHELLS = {"sh", "bash", "dash", "/bin/sh", "/bin/bash"}


def test_no_subprocess_is_a_shell_script():
    """Argument lists, never shell strings: no list in fxprobe/ starts a shell with -c (a script a lab guest runs is
    a file shipped in the package and run by path, such as tools/guestview.sh)."""
    found = []
    for path in modules().values():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.List) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) for e in node.elts[:2]) and node.elts[0].value in SHELLS \
                    and node.elts[1].value == "-c":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == [], f"sh -c in a subprocess: {found}"


def test_only_core_and_tools_name_kernel_paths_unless_exempt_with_a_reason():
    offenders = {rel: lines for rel, path in outside_core_and_tools()
                 if (lines := kernel_path_literals(path)) and rel not in KERNEL_PATH_EXEMPT}
    assert offenders == {}, f"/sys or /proc paths outside core/ and tools/ (file: lines): {offenders}"


def test_every_exemption_is_still_needed_and_written_in_architecture_md():
    stale = [rel for rel in KERNEL_PATH_EXEMPT if not kernel_path_literals(PACKAGE / rel)]
    assert stale == [], f"exempt but clean now: remove from KERNEL_PATH_EXEMPT (and ARCHITECTURE.md): {stale}"
    edges = graph()
    stale_layers = [key for key in LAYER_EXEMPT if not any(room(m) == key[1] for m in edges.get(key[0], ()))]
    assert stale_layers == [], stale_layers
    text = (PACKAGE / "ARCHITECTURE.md").read_text()
    missing = [rel for rel in KERNEL_PATH_EXEMPT if rel not in text]
    missing += [module for module, _ in LAYER_EXEMPT if module not in text]
    assert missing == [], f"ARCHITECTURE.md does not name these exemptions: {missing}"


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_rooms_import_only_rooms_below_them():
    upward = []
    for module, targets in graph().items():
        here = room(module)
        if here not in LAYERS or here == "cli":
            continue
        for target in targets:
            there = room(target)
            if there in LAYERS and LAYERS[there] > LAYERS[here] and (module, there) not in LAYER_EXEMPT:
                upward.append(f"{module} -> {target}")
    assert upward == [], f"imports that go up a layer (see LAYERS): {upward}"


def test_every_room_has_a_layer():
    rooms = {room(m) for m in modules()} - {""}
    assert rooms <= set(LAYERS), rooms - set(LAYERS)


@pytest.mark.parametrize("short_room", SHORT_ROOMS)
def test_no_function_over_60_lines(short_room):
    long = []
    for path in sorted((PACKAGE / short_room).rglob("*.py")):
        for node in ast.walk(tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    assert long == [], long
