"""A scheduler and nothing else, for the schedule tests' subprocesses: runs
TIMERS (`emq.tools.timers`) on one queue at random moments a few tens of ms
apart until killed, so it races the workers' beats for every tick.

    python -m tests.timers_loop URL QUEUE BACKEND    # BACKEND: plan or module

Run with the repository root as the working directory (as the worker tests'
subprocesses are). Errors the server answers are logged and the loop goes on:
a process that is SIGKILLed mid-call is what the tests want to see survive.
"""

from __future__ import annotations

import logging
import random
import sys
import time

import emq
import emq.tools


def main() -> None:
    url, queue, backend = sys.argv[1:4]
    client = emq.connect(url)
    rng = random.Random()
    while True:
        try:
            emq.tools.timers(client, queue, backend=backend)  # type: ignore[arg-type]
        except emq.EmqError as e:
            logging.warning("timers: %s", e)
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 0.04))


if __name__ == "__main__":
    main()
