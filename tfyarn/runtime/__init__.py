"""The task runtime: ``python -m tfyarn.runtime`` in every task container.

One module per concept, in the order of a task's life:

- :mod:`~tfyarn.runtime.entry`: the entry point (``__main__`` calls it);
- :mod:`~tfyarn.runtime.context`: who this task is, from the environment;
- :mod:`~tfyarn.runtime.ports`: the port held for the task's life;
- :mod:`~tfyarn.runtime.session`: register, watch the cluster, heartbeat,
  report the end (through :mod:`tfyarn.contract.channel`);
- :mod:`~tfyarn.runtime.notice`: a stop notice shown to the script (the file
  ``tfyarn.should_stop()`` checks), and whether the script heeds them;
- :mod:`~tfyarn.runtime.prelude`: what the script gets before its first line
  (environment, arguments, the two commands); :mod:`~tfyarn.runtime.tfconfig`
  writes TF_CONFIG, the legacy flags and the placeholders;
- :mod:`~tfyarn.runtime.child`: the script's interpreter, pre-started or plain;
  ``_bootstrap/preload.py`` is the pre-started one's first program;
- :mod:`~tfyarn.runtime.task`: :class:`Runtime`, one task's life end to end;
- :mod:`~tfyarn.runtime.timeouts`: the runtime's own fixed waits.
"""

from tfyarn.runtime.context import TaskContext
from tfyarn.runtime.entry import main
from tfyarn.runtime.prelude import BOOTSTRAP
from tfyarn.runtime.task import EXIT_BAD_ENV, EXIT_RUNTIME_ERROR, Runtime
from tfyarn.runtime.timeouts import Timeouts

__all__ = [
    "BOOTSTRAP",
    "EXIT_BAD_ENV",
    "EXIT_RUNTIME_ERROR",
    "Runtime",
    "TaskContext",
    "Timeouts",
    "main",
]
