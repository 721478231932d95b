"""Record the parts of vLLM's API that the vLLM generator calls, read from a vLLM source tree.

    curl -LO <the vllm-X.tar.gz link of https://pypi.org/simple/vllm/> && tar xzf vllm-X.tar.gz
    python scripts/record_vllm_api.py vllm-X/ > tests/distributed/vllm_api.json

The source is parsed with ``ast`` (nothing is imported, so no GPU and no vLLM install is needed);
only names, parameter kinds, whether a parameter has a default, and a few ``Literal`` value sets
are written. ``tests/distributed/test_vllm_generator.py`` checks the generator's calls against this
table; docs/distributed.md says which version it holds.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
from pathlib import Path

# (table key, file under the source root, class, method or None for the class's fields)
CALLABLES = [
    ("LLM.__init__", "vllm/entrypoints/llm.py", "LLM", "__init__"),
    ("LLM.generate", "vllm/entrypoints/llm.py", "LLM", "generate"),
    ("LLMEngine.add_lora", "vllm/v1/engine/llm_engine.py", "LLMEngine", "add_lora"),
    ("LLMEngine.remove_lora", "vllm/v1/engine/llm_engine.py", "LLMEngine", "remove_lora"),
]
FIELDS = [
    ("SamplingParams", "vllm/sampling_params.py", "SamplingParams"),
    ("LoRARequest", "vllm/lora/request.py", "LoRARequest"),
    ("EngineArgs", "vllm/engine/arg_utils.py", "EngineArgs"),
    ("CompletionOutput", "vllm/outputs.py", "CompletionOutput"),
    ("RequestOutput", "vllm/outputs.py", "RequestOutput"),
]
LITERALS = [
    ("MaxLoRARanks", "vllm/config/lora.py"),
    ("LogprobsMode", "vllm/config/model.py"),
]


def find_class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"class {name} not found")


def parameters(fn: ast.FunctionDef) -> list[dict]:
    """Parameters in order, without ``self``: name, kind (as ``inspect.Parameter`` names it),
    and whether it has a default."""
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        kind = "POSITIONAL_ONLY" if arg in a.posonlyargs else "POSITIONAL_OR_KEYWORD"
        out.append({"name": arg.arg, "kind": kind, "default": i >= first_default})
    if a.vararg:
        out.append({"name": a.vararg.arg, "kind": "VAR_POSITIONAL", "default": False})
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append({"name": arg.arg, "kind": "KEYWORD_ONLY", "default": default is not None})
    if a.kwarg:
        out.append({"name": a.kwarg.arg, "kind": "VAR_KEYWORD", "default": False})
    return [p for p in out if p["name"] != "self"]


def init_fields(cls: ast.ClassDef) -> list[dict]:
    """Annotated class attributes in order (dataclass / msgspec.Struct constructor fields), with
    those declared ``init=False`` left out; a plain class gives its ``__init__`` parameters."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            return parameters(node)
    out = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in value.keywords
        ):
            continue
        out.append({"name": node.target.id, "kind": "FIELD", "default": value is not None})
    return out


def literal_values(tree: ast.Module, name: str) -> list:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Subscript)
        ):
            items = node.value.slice
            elts = items.elts if isinstance(items, ast.Tuple) else [items]
            return [ast.literal_eval(e) for e in elts]
    raise SystemExit(f"Literal {name} not found")


def version_of(root: Path) -> str:
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        match = re.search(r"^Version: (\S+)$", pkg_info.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    return "unknown"


def record(root: Path) -> dict:
    trees: dict[str, ast.Module] = {}

    def tree(rel: str) -> ast.Module:
        if rel not in trees:
            trees[rel] = ast.parse((root / rel).read_text(), rel)
        return trees[rel]

    table: dict = {"vllm_version": version_of(root), "callables": {}, "fields": {}, "literals": {}}
    for key, rel, cls, method in CALLABLES:
        body = find_class(tree(rel), cls).body
        fn = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == method)
        table["callables"][key] = parameters(fn)
    for key, rel, cls in FIELDS:
        table["fields"][key] = init_fields(find_class(tree(rel), cls))
    for key, rel in LITERALS:
        table["literals"][key] = literal_values(tree(rel), key)
    table["source_sha256"] = {
        rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in sorted(trees)
    }
    return table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", type=Path, help="an unpacked vLLM sdist (the folder holding vllm/)")
    args = p.parse_args()
    json.dump(record(args.source), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
