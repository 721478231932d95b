"""The import rules of docs/architecture.md, checked over the source of the four packages.

An AST read (no imports run), so the check is fast and sees function-local imports too:

* a module imports only from its own layer or the layers :data:`LAYERS` allows below it;
* no module imports a private name (``_name``) from another module, nor a private module of
  another package: a need for one is a need for public API;
* no two modules import each other, directly or through others (function-local imports
  included: a cycle there is still two modules that each need the other);
* no module reads or writes a private attribute (``obj._name``) of an object other than
  ``self``/``cls``, except the few listed in :data:`ALLOWED_REACH_INS` with their reason.
"""

from __future__ import annotations

import ast
import graphlib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tasks", "marft_envs", "baselines", "leaderboard")

#: layer (a package or sub-package) -> the layers it may import; the most specific prefix wins.
#: A layer may always import itself. Third-party imports are not checked here.
LAYERS: dict[str, set[str]] = {
    "tasks": set(),
    "marft_envs": {"tasks"},
    "leaderboard": {"marft_envs", "tasks"},
    "baselines.core": {"marft_envs", "tasks"},
    "baselines.methods": {"baselines.core"},
    "baselines.distributed": {"baselines.core", "marft_envs", "tasks"},
    # the run level: the trainer, CLIs and presets put the parts below together
    "baselines": {
        "baselines.core",
        "baselines.methods",
        "baselines.distributed",
        "marft_envs",
        "tasks",
        "leaderboard.schema",  # result bundles (the 'baselines' extra declares pydantic)
        "leaderboard.regrade",  # the demo re-grades its bundles (schema + marft_envs only)
    },
}

#: The deep-learning stack the environment packages never import (DESIGN.md: a user who only
#: wants the environments installs no torch), function-local imports included.
NO_DEEP_LEARNING = {"torch", "transformers", "peft", "trl", "vllm"}
LIGHT_PACKAGES = ("tasks", "marft_envs")


#: expression -> why it may touch a private attribute of another object (keyed by expression, not
#: file, so splitting a module does not stale the list).
ALLOWED_REACH_INS: dict[str, str] = {
    "os._exit": "public API despite its name (exit without cleanup)",
    "_os._exit": "os._exit, imported under another name",
    "threading._shutdown": "a forked sandbox child exits the way CPython's finalisation does",
    "atexit._run_exitfuncs": "a forked sandbox child exits the way CPython's finalisation does",
    "Session._local": "the class's own thread-local, reached from its static methods (code harness)",
    "v._name": "the code harness's own proxy classes, which keep no public attributes",
    "v._request": "the code harness's own proxy classes, which keep no public attributes",
    "_RunDir._libc": "a class of the same module (bubblewrap backend)",
    "layer._active_adapter": (
        "peft's LoRA layers: its public set_adapter re-freezes every other adapter on each "
        "switch; pyproject bounds peft and test_fast_adapter_switch_computes_what_peft_"
        "set_adapter_computes fails if peft changes the attribute"
    ),
    "layer._disable_adapters": (
        "peft's LoRA layers: a checkpointed layer's recomputation must run under exactly the "
        "adapter state of its forward, and the public enable_adapters also flips requires_grad "
        "on every LoRA weight; test_checkpointing_gives_every_adapter_and_critic_the_same_"
        "gradient fails if peft changes the attribute"
    ),
    "super()._reset_async": (
        "OpenEnv 0.10.0's client: its sync and async clients both send through these two "
        "coroutines and it has no public hook for server errors; serve pins openenv==0.10.0 "
        "and tests/serve/test_serve.py fails (no EnvOrderError) if they change"
    ),
    "super()._step_async": "as super()._reset_async (OpenEnv 0.10.0's client)",
}


def layer_of(module: str) -> str | None:
    """The most specific layer a dotted module name belongs to (None: not ours)."""
    best = None
    for layer in LAYERS:
        if (module == layer or module.startswith(layer + ".")) and (
            best is None or len(layer) > len(best)
        ):
            best = layer
    return best


@cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, imported module, imported names)`` of every import in a file, relative ones
    resolved against the file's package."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, base, [a.name for a in node.names]))
    return out


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def allowed(importer: str, imported: str) -> bool:
    src, dst = layer_of(importer), layer_of(imported)
    if dst is None or src is None:
        return True
    if src == dst:
        return True
    return any(imported == a or imported.startswith(a + ".") for a in LAYERS[src])


def violations() -> tuple[list[str], list[str]]:
    upward, private = [], []
    for path in sources():
        me = module_name(path)
        for line, target, names in imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if not allowed(me, target):
                upward.append(f"{where}: {me} ({layer_of(me)}) imports {target}")
            if layer_of(target) is None or target == me:
                continue
            hidden = [p for p in target.split(".") if p.startswith("_") and p != "__init__"]
            if hidden and target.rpartition(".")[0] != me.rpartition(".")[0]:
                private.append(f"{where}: {me} imports the private module {target}")
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    private.append(f"{where}: {me} imports {target}.{name}")
    return upward, private


def private_attributes(path: Path) -> list[tuple[int, str]]:
    """``(line, expression)`` of every ``obj._name`` in a file whose ``obj`` is not self/cls."""
    out = []
    for node in ast.walk(parse(path)):
        if not isinstance(node, ast.Attribute):
            continue
        if not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        out.append((node.lineno, ast.unparse(node)))
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    modules = {module_name(p): p for p in sources()}
    graph: dict[str, set[str]] = {}
    for me, path in modules.items():
        graph[me] = set()
        for _, target, names in imports(path):
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            graph[me] |= set(subs) if subs else ({target} & set(modules))
        graph[me].discard(me)
    return graph


def test_every_module_belongs_to_a_layer():
    assert all(layer_of(module_name(p)) for p in sources())


def test_no_module_imports_upward():
    upward, _ = violations()
    assert not upward, "imports against the layer map (docs/architecture.md):\n" + "\n".join(upward)


def test_no_module_imports_a_private_name_of_another():
    _, private = violations()
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_the_environment_packages_never_import_the_deep_learning_stack():
    found = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for path in sources()
        if module_name(path).split(".")[0] in LIGHT_PACKAGES
        for line, target, _ in imports(path)
        if target.split(".")[0] in NO_DEEP_LEARNING
    ]
    assert not found, "the environments must stay torch-free:\n" + "\n".join(found)


def test_no_import_cycles():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as e:
        pytest.fail("modules that import each other: " + " -> ".join(e.args[1]))


def test_the_cycle_check_catches_the_workers_ray_group_cycle_main_had():
    graph = import_graph()
    assert "baselines.distributed.workers" in graph["baselines.distributed.ray_group"]
    graph["baselines.distributed.workers"].add("baselines.distributed.ray_group")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()


def test_no_module_touches_a_private_attribute_of_another_object():
    found = []
    for path in sources():
        rel = str(path.relative_to(ROOT))
        for line, expr in private_attributes(path):
            if expr not in ALLOWED_REACH_INS:
                found.append(f"{rel}:{line}: {expr}")
    assert not found, "private attributes reached into:\n" + "\n".join(found)


def test_every_allowed_reach_in_still_exists():
    present = {e for p in sources() for _, e in private_attributes(p)}
    assert not set(ALLOWED_REACH_INS) - present, "stale ALLOWED_REACH_INS entries"


@pytest.mark.parametrize(
    ("importer", "imported", "ok"),
    [
        ("marft_envs.flexmg", "tasks.dataset", True),
        ("tasks.dataset", "marft_envs", False),
        ("marft_envs.vector", "baselines.core.rollout", False),
        ("baselines.core.trainer", "baselines.methods", False),
        ("baselines.core.rollout", "leaderboard.schema", False),
        ("baselines.distributed.workers", "baselines.trainer", False),
        ("baselines.trainer", "baselines.distributed", True),
        ("baselines.eval", "leaderboard.schema", True),
        ("baselines.eval", "leaderboard.server", False),
        ("leaderboard.regrade", "baselines.core", False),
    ],
)
def test_the_layer_map_says_what_docs_say(importer: str, imported: str, ok: bool):
    assert allowed(importer, imported) is ok
