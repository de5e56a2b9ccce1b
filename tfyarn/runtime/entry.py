"""The entry point of ``python -m tfyarn.runtime`` (see ``tfyarn.client.compile.to_skein``)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from tfyarn.errors import SpecError
from tfyarn.runtime import prelude
from tfyarn.runtime.context import TaskContext
from tfyarn.runtime.task import EXIT_BAD_ENV, Runtime


def main() -> int:
    """Run the task this container is for; return its exit code."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s tfyarn.runtime %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        ctx = TaskContext.from_env(os.environ)
    except SpecError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_BAD_ENV
    # Before Runtime reads the environment: its helpers' temporary files too.
    prelude.use_tmpdir(prelude.task_tmpdir(Path.cwd()), ctx)
    runtime = Runtime(ctx)

    # SIGTERM (YARN preemption, `tfyarn kill`): pass it on with the job's grace.
    def on_sigterm(*_: object) -> None:
        # Said at once, in one write (no lock a signal could find held): YARN
        # sends SIGKILL 250 ms after its own SIGTERM, before the stop's line.
        os.write(2, b"tfyarn.runtime: SIGTERM received, stopping the task\n")
        runtime.stop.set("SIGTERM received", ctx.spec.stop_grace, container_ending=True)

    signal.signal(signal.SIGTERM, on_sigterm)
    return runtime.run()
