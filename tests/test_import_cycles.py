"""No import cycles in `bert_jax`, function-level imports included.

import-linter's contracts (setup.cfg) order packages and layers; a loop inside one layer, or one
closed by an import deferred into a function body, passes them. This test reads every module's
imports statically, wherever they stand, and fails on any strongly connected component.
"""

import ast
import pathlib

from tests import helpers

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "bert_jax"


def package_sources(root: pathlib.Path) -> dict[str, str]:
  """Module name -> source text of every module under ``root/bert_jax``."""
  sources = {}
  for path in sorted((root / PACKAGE).rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
      parts = parts[:-1]
    sources[".".join(parts)] = path.read_text(encoding="utf-8")
  return sources


def _targets(node, module: str, is_package: bool, modules) -> list[str]:
  """The package modules one import statement loads (a ``from`` import of a submodule names
  the submodule; of anything else, the module it comes from)."""
  if isinstance(node, ast.Import):
    return [alias.name for alias in node.names]
  base = node.module or ""
  if node.level:
    anchor = module.split(".")
    anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
    base = ".".join(anchor + ([base] if base else []))
  found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
  return found if len(found) == len(node.names) else [*found, base]


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
  """Module -> the package modules it imports, from every import statement in its source
  (top level, inside functions, classes and ``if`` blocks alike).

  Args:
    sources: module name -> source text; a package is named by its ``__init__``'s module.
  """
  packages = {name for name in sources if any(m.startswith(f"{name}.") for m in sources)}
  graph = {}
  for module, source in sources.items():
    edges = set()
    for node in ast.walk(helpers.parse_source(source)):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        for target in _targets(node, module, module in packages, sources):
          # `import a.b.c` loads a.b.c; an unlisted name is outside the package.
          while target and target not in sources:
            target = target.rpartition(".")[0]
          if target and target != module:
            edges.add(target)
    graph[module] = edges
  return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components with more than one module (Tarjan), sorted."""
  index, low, on_stack, stack, found = {}, {}, set(), [], []
  for root in sorted(graph):
    if root in index:
      continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on_stack.add(root)
    while work:
      node, children = work[-1]
      child = next(children, None)
      if child is not None:
        if child not in index:
          index[child] = low[child] = len(index)
          stack.append(child)
          on_stack.add(child)
          work.append((child, iter(sorted(graph.get(child, ())))))
        elif child in on_stack:
          low[node] = min(low[node], index[child])
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[node])
      if low[node] == index[node]:
        component = []
        while True:
          member = stack.pop()
          on_stack.discard(member)
          component.append(member)
          if member == node:
            break
        if len(component) > 1:
          found.append(sorted(component))
  return sorted(found)


def test_the_package_has_no_import_cycle():
  loops = cycles(import_graph(package_sources(REPO)))
  assert loops == [], "\n".join(" -> ".join(loop) for loop in loops)


def test_a_deferred_import_of_the_registry_is_a_cycle():
  """The checker bites: the registry imported inside a function of `models/config.py` (which
  every family's modules import) closes a loop."""
  sources = package_sources(REPO)
  sources["bert_jax.models.config"] += (
    "\n\ndef _family_record(config):\n"
    "  from bert_jax.models import families\n\n"
    "  return families.get(config.family)\n"
  )
  loops = cycles(import_graph(sources))
  assert any({"bert_jax.models.config", "bert_jax.models.families"} <= set(c) for c in loops)


def test_the_graph_reads_every_import_form():
  sources = {
    "pkg": "",
    "pkg.a": "import pkg.b\n",
    "pkg.b": "def f():\n  from pkg import c\n",
    "pkg.c": "from .a import name\nfrom . import b\n",
    "pkg.d": "from pkg.c import thing\nimport os\n",
  }
  graph = import_graph(sources)
  assert graph == {
    "pkg": set(),
    "pkg.a": {"pkg.b"},
    "pkg.b": {"pkg.c"},
    "pkg.c": {"pkg.a", "pkg.b"},
    "pkg.d": {"pkg.c"},
  }
  assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
