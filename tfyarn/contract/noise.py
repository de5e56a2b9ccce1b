"""TensorFlow's start-up chatter, kept out of failure diagnostics and CLI output.

Every TensorFlow process prints a few lines on stderr before it does anything
(absl's pre-init warning, ``cpu_feature_guard``, oneDNN notices, gRPC server
starts: C++ INFO lines). They stay in the task's log, but in the stderr tail
that the master quotes when a task fails they would push out the lines that
say what went wrong.
"""

from __future__ import annotations

import re

# absl/glog INFO lines: "I0000 00:00:1795371226.718134   18095 file.cc:227] ...".
_CPP_INFO = re.compile(r"^I\d{4} \d\d:\d\d:[\d.]+\s+\d+ [\w.\-/]+:\d+\] ")
_EXACT_STARTS = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    # cpu_feature_guard's second line.
    "To enable the following instructions:",
)


def is_startup_noise(line: str) -> bool:
    """Whether a stderr line is TensorFlow's routine start-up output.

    Examples
    --------
    >>> is_startup_noise("I0000 00:00:17.71 18095 cpu_feature_guard.cc:227] This ...")
    True
    >>> is_startup_noise("ValueError: wrong batch size")
    False
    """
    return bool(_CPP_INFO.match(line)) or line.startswith(_EXACT_STARTS)
