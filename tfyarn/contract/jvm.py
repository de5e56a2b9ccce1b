"""How tfyarn starts the JVMs of a job: skein's ApplicationMaster and the
master's one-shot helpers (``am/Unregister.java``, ``am/FetchTokens.java``).

Both do little computing: a gRPC server, YARN heartbeats, one RPC. C1 alone
and the serial collector start them with much less CPU than the default
(C2 and G1 on every core): the helpers compile in half the time (2.8 s ->
1.5 s), and the ApplicationMaster, which JIT-compiles Hadoop's and gRPC's
start-up paths while the tasks import TensorFlow on the same cores, lets a
job's cluster form 0.3-0.9 s sooner (``tests/benchmarks/formation.py``).
Without the perf-data counters (read only by ``jstat``), an idle JVM spends
0.02 CPU-s a minute instead of 0.1, as the local clusters' daemons do.
"""

from __future__ import annotations

LIGHT_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData")

#: skein builds the ApplicationMaster's command line itself; the JVM also
#: reads its options from this variable of the master's container.
TOOL_OPTIONS = "JAVA_TOOL_OPTIONS"


def tool_options() -> str:
    return " ".join(LIGHT_FLAGS)
