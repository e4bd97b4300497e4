"""The benchmarks' baselines do the work emq does: `benches/claims.py` compares
emq's claim and complete with Lua scripts of the same steps
(`benches/lua_claim.py`), and a script that did less (no retention, ghosts
counted differently) would flatter Lua. Its `--check` runs one sequence (flat
jobs, lanes, a paused and a limited lane, ghosts) with each implementation and
compares what they hand out and leave."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from emq.embedded import module_path

from servers import binary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

import claims  # noqa: E402  (benches/claims.py)


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_the_claim_benchmarks_lua_scripts_hand_out_and_leave_what_emq_does(kind, capsys):
    path = binary(kind)
    if path is None:
        pytest.skip(f"no {kind} server here")
    impls = ["emq", "lua", *(["module"] if module_path() else [])]
    failed = claims.check(path, impls)
    out = capsys.readouterr().out
    assert failed == 0, out
    assert out.count("claims/completes same; final state same") == len(impls) - 1, out
