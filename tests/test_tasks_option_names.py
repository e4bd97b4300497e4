"""The keyword names of the task layer's options (`@app.task(...)`, `task.options(...)`,
`app.options(...)`): written once, as TypedDicts (`emq.tasks.options`), and still
refused by name when wrong, at run time and by the type checker."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import emq

ROOT = Path(__file__).resolve().parent.parent


def test_a_wrong_option_keyword_is_refused_naming_the_call_and_the_keyword():
    """Each call that takes the options as `**options` refuses a keyword that is
    not one of its options with a `TypeError` naming the call and the keyword (as
    Python did when they were parameters), before anything is registered or
    written; an option of the other list (`delay` is an enqueue's, `retry_in` a
    task's) is refused too. A version that dropped, or kept, an unknown keyword
    silently fails here. No server: none of these calls connects."""
    app = emq.App("redis://127.0.0.1:1")

    @app.task(queue="mail", retry_in=1)
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(TypeError, match=r"add\.options\(\) got an unexpected keyword argument 'dely'"):
        add.options(dely=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"add\.options\(\) got an unexpected keyword argument 'retry_in'"):
        add.options(delay=5).options(retry_in=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"emq\.App\.options\(\) got an unexpected keyword argument 'timeout'"):
        app.options(queue="mail", timeout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"emq\.App\.task\(\) got an unexpected keyword argument 'delay'"):
        app.task(delay=5)  # type: ignore[call-overload]
    assert list(app.tasks) == [add.name], "a refused registration registered something"
    # The right keywords still pass, and None still means "not given".
    assert add.options(delay=5, queue=None).given.delay == 5
    assert add.options(delay=5).given.queue == "mail"


def test_the_type_checker_refuses_a_wrong_option_keyword_by_name(tmp_path, monkeypatch):
    """mypy (strict) reads the options' TypedDicts through `Unpack`: a caller's
    misspelt keyword, or an option of the wrong type, is an error that names it,
    and right calls pass. A version whose `**options` were untyped (`Any`) would
    let each of these through."""
    api = pytest.importorskip("mypy.api", reason="mypy is installed by the lint extra")
    snippet = tmp_path / "callers.py"
    snippet.write_text(
        textwrap.dedent(
            """
            import emq

            app = emq.App()

            @app.task(queue="mail", retry_in=1.5, timeout=30)
            def add(x: int, y: int) -> int:
                return x + y

            add.options(delay=5, id="a").options(lane="eu").enqueue(1, 2)
            app.options(queue="mail", unique_for=60).enqueue("tasks.add", 1, 2)
            add.options(dely=5)
            add.options(delay=5).options(retry_in=1)
            app.options(priority="high")
            """
        )
    )
    monkeypatch.setenv("MYPYPATH", str(ROOT / "python"))
    out, err, status = api.run(
        ["--strict", "--python-version", "3.10", "--no-incremental", "--cache-dir", os.devnull, "--no-error-summary", str(snippet)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, (out, err)
    assert len(errors) == 3, out
    assert 'Unexpected keyword argument "dely" for "options" of "Task"' in errors[0], out
    assert 'Unexpected keyword argument "retry_in" for "options" of "TaskOptions"' in errors[1], out
    assert '"priority"' in errors[2] and "int | None" in errors[2], out
