"""Prints where this task's Python and tfyarn come from; fails unless shipped.

Run with ``--python_env`` (tests/integration/multihost/test_python_env.py):
the interpreter and every imported package must come from the container's
own directory, where YARN unpacked the shipped environment, and not from the
client's environment (the filesystem is shared on the local cluster).
"""

import os
import sys

import grpc

import tfyarn

here = os.getcwd()
where = {
    "executable": sys.executable,
    "prefix": sys.prefix,
    "tfyarn": tfyarn.__file__,
    "grpc": grpc.__file__,
}
for name, path in where.items():
    print(f"env_probe {name}={path}", flush=True)
outside = {n: p for n, p in where.items() if not os.path.abspath(p).startswith(here)}
if outside:
    print(
        f"env_probe FAIL: not from the container ({here}): {outside}", file=sys.stderr
    )
    sys.exit(3)
print("env_probe OK", flush=True)
