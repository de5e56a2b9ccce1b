"""Prints where this task's Python and packages come from; fails unless from the pex.

Run with ``--python_env app.pex`` (tests/integration/multihost/
test_python_env_pex.py): pex made a virtualenv of the shipped pex under the
node's ``tfyarn-pex`` cache (beside the NodeManager's cache of the user's
files), and this script, started by the runtime in its own interpreter, must
run that venv's Python and import tfyarn, grpc and yaml from it, not from the
client's environment on the shared filesystem. With ``PEX_PROBE_TF=1`` it also
imports TensorFlow and runs an op.
"""

import os
import sys

import grpc
import yaml

import tfyarn

prefix = os.path.realpath(sys.prefix)
where = {
    "executable": sys.executable,
    "tfyarn": tfyarn.__file__,
    "grpc": grpc.__file__,
    "yaml": yaml.__file__,
}
if os.environ.get("PEX_PROBE_TF") == "1":
    import tensorflow as tf

    print(f"pex_probe tf_sum={float(tf.reduce_sum(tf.ones([3])))}", flush=True)
    where["tensorflow"] = tf.__file__
print(f"pex_probe prefix={prefix}", flush=True)
for name, path in where.items():
    print(f"pex_probe {name}={path}", flush=True)
problems = []
if "/usercache/" not in prefix or "/tfyarn-pex/" not in prefix:
    problems.append(f"sys.prefix {prefix} is not a venv of the node's pex cache")
# Packages are links from the venv into pex's cache of unpacked wheels: the
# venv is where they are found from.
outside = {
    n: p
    for n, p in where.items()
    if not os.path.abspath(p).startswith(os.path.abspath(sys.prefix))
}
if outside:
    problems.append(f"not from the pex's venv ({sys.prefix}): {outside}")
if problems:
    print(f"pex_probe FAIL: {'; '.join(problems)}", file=sys.stderr)
    sys.exit(3)
print("pex_probe OK", flush=True)
