"""The module graph of docs/architecture.md ("Module graph"): every harness module imports on
its own, harness imports sit at module top unless a `# lazy: <reason>` comment says why, and
the command line and the light modules never load torch, vLLM or transformers."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"
HEAVY = ("torch", "vllm", "transformers")
# The modules that import torch (or vLLM) at their top: the probe's and the attention bias's
# tensor code. Every other module must import without torch, vLLM or transformers; these are
# imported lazily (`# lazy: loads torch`) from the light ones.
TORCH_MODULES = {
    "harness.engines.attention_bias",
    "harness.engines.guidance",
    "harness.engines.share_steering",
    "harness.probes.attention",
    "harness.probes.checkpoint",
    "harness.probes.divergence",
    "harness.probes.head",
    "harness.probes.hooks",
    "harness.probes.floor",
    "harness.probes.vllm_backend",
    "harness.probes.vllm_connector",
}
# imports vllm at its top (~15 s): vLLM's workers load it by name (see its docstring); the
# integration tier imports it with every vLLM probe
NOT_IMPORTED_HERE = {"harness.probes.vllm_connector"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def _python(code: str, pycache: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    if pycache is not None:  # byte-code kept across the children: each module compiles once
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


# The parent loads the third-party libraries once, then each module is imported in a forked
# child that holds no harness module yet: an import cycle fails there whichever module of the
# cycle comes first, as it would for a user's first import.
_EACH_ALONE = """
import os, sys, traceback
import numpy, pandas, pydantic, scipy.stats, torch, typer, yaml  # shared, not under test
failed, running = [], {}
names = list(sys.argv[1:])
while names or running:
    # two children at a time: the suite runs in one process, the second core is idle
    while names and len(running) < 2:
        name = names.pop(0)
        pid = os.fork()
        if pid == 0:
            try:
                __import__(name)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        running[pid] = name
    pid, status = os.wait()
    if status:
        failed.append(running[pid])
    del running[pid]
print("FAILED", *failed)
sys.exit(1 if failed else 0)
"""


def test_every_module_imports_first_in_a_process_without_harness_modules(tmp_path):
    names = [m for m in MODULES if m not in NOT_IMPORTED_HERE]
    assert len(names) > 90, names
    code = "import sys; sys.argv[1:] = " + repr(names) + "\n" + _EACH_ALONE
    result = _python(code, pycache=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-6000:]
    assert result.stdout.strip() == "FAILED"


def test_the_cli_and_the_light_modules_load_no_torch_vllm_or_transformers():
    light = [m for m in MODULES if m not in TORCH_MODULES and m != "harness.__main__"]
    code = (
        "import importlib, sys\n"
        f"for name in {light!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == "[]", f"a light module loaded {result.stdout.strip()}"


def test_the_cli_starts_without_pydantic_pandas_or_numpy():
    """`harness --help` and typer's argument errors: the commands import what they run inside
    their body (`# lazy: CLI start-up`)."""
    libs = (*HEAVY, "pydantic", "pandas", "numpy", "scipy")
    result = _python(
        f"import sys, harness.cli; print(sorted(m for m in {libs!r} if m in sys.modules))"
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == "[]"


def lazy_imports_without_reason(source: str) -> list[int]:
    """Line numbers of imports of harness modules inside a function body whose first line has
    no `# lazy: <reason>` comment."""
    lines = source.splitlines()
    bad = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if inside and _imports_harness(child):
                _, _, reason = lines[child.lineno - 1].partition("# lazy:")
                if not reason.strip():
                    bad.append(child.lineno)
            visit(child, inside)

    visit(ast.parse(source), False)
    return bad


def _imports_harness(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "harness" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "harness"
    return False


def test_harness_imports_inside_functions_give_their_reason():
    offenders = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := lazy_imports_without_reason(path.read_text()))
    }
    assert offenders == {}, "move these imports to the module top, or add `# lazy: <reason>`"


def test_the_lazy_import_rule_flags_what_it_should():
    source = (
        "from harness.errors import UserError\n"
        "import numpy\n"
        "def f():\n"
        "    import torch\n"
        "    from harness.config.run import RunConfig\n"
        "    from harness.probes.divergence import pair_divergence  # lazy: loads torch\n"
        "    from . import sibling\n"
        "    from harness.plan import (  # lazy:\n"
        "        plan_run,\n"
        "    )\n"
        "class C:\n"
        "    def m(self):\n"
        "        import harness.report\n"
    )
    assert lazy_imports_without_reason(source) == [5, 7, 8, 13]
