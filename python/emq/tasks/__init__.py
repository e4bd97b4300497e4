"""Tasks: functions registered with an app by name, called by jobs.

    import emq

    app = emq.App()

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.enqueue(1, 2)     # a job whose data is the call, as JSON
    # elsewhere: emq worker tasks:app

The modules: `app` (`App`: the tasks and their server), `task` (`Task`,
`ContextTask`, `TaskOptions`), `options` (an enqueue's options), `handle`
(`Handle`), `status` (`JobStatus`, `JobState`: a job's row as a handle reads
it), `waiting` (the collector that resolves the waits for results), `context`
(`Context`, what a running task knows of its job), `codec` (the call format and
how values are written and read back), `runner` (`TaskRunner`, the handler a
worker of the app runs).
"""

from __future__ import annotations

from .app import App, AppOptions, TaskDecorator
from .codec import FORMAT_VERSION, RESULT_LIMIT, Call, decode_call, decode_result, encode_call, encode_result
from .context import Context
from .handle import Handle
from .options import Options
from .runner import TaskRunner
from .status import JobState, JobStatus
from .task import ContextTask, Task, TaskOptions

__all__ = [
    "FORMAT_VERSION",
    "RESULT_LIMIT",
    "App",
    "AppOptions",
    "Call",
    "Context",
    "ContextTask",
    "Handle",
    "JobState",
    "JobStatus",
    "Options",
    "Task",
    "TaskDecorator",
    "TaskOptions",
    "TaskRunner",
    "decode_call",
    "decode_result",
    "encode_call",
    "encode_result",
]
