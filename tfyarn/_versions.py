"""The versions a pickled function depends on, and whether two Pythons agree.

A function pickled by one interpreter loads in another only if the Python
minor version and cloudpickle match (cloudpickle's format is private to a
version), and the TensorFlow objects it builds behave the same only under the
same TensorFlow minor version. ``tfyarn.run`` checks the job's Python before
submission (:mod:`tfyarn.client.function`) and again in every task
(:mod:`tfyarn._function_task`), where the job's Python could not be run first
(an archive, a pex, a Docker image).
"""

from __future__ import annotations

import sys
from importlib import metadata

# Distributions that provide the ``tensorflow`` module.
TENSORFLOW_DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")
FIX = (
    "ship this Python's environment with the job: python_env='auto' "
    "(--python_env auto), or install matching versions in the job's Python"
)


def dist_version(*names: str) -> str:
    """The installed version of the first of ``names`` found; "" for none."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return ""


def here() -> dict[str, str]:
    """This interpreter's versions that matter."""
    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "cloudpickle": dist_version("cloudpickle"),
        "tensorflow": dist_version(*TENSORFLOW_DISTS),
    }


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def disagreements(client: dict[str, str], job: dict[str, str]) -> list[str]:
    """What differs where it matters, in words ("Python 3.11 here, 3.10 in the job").

    >>> disagreements({"python": "3.11", "cloudpickle": "3.1.2", "tensorflow": ""},
    ...               {"python": "3.11", "cloudpickle": "3.1.2", "tensorflow": "2.21.0"})
    []
    >>> disagreements({"python": "3.11", "cloudpickle": "3.1.2", "tensorflow": "2.21.0"},
    ...               {"python": "3.10", "cloudpickle": "", "tensorflow": "2.20.1"})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['Python 3.11 here, 3.10 in the job', 'cloudpickle 3.1.2 here, none in the job',
     'TensorFlow 2.21.0 here, 2.20.1 in the job']
    """
    out = []
    if client.get("python") != job.get("python"):
        out.append(
            f"Python {client.get('python')} here, {job.get('python')} in the job"
        )
    if client.get("cloudpickle") != job.get("cloudpickle"):
        out.append(
            f"cloudpickle {client.get('cloudpickle') or 'none'} here, "
            f"{job.get('cloudpickle') or 'none'} in the job"
        )
    mine, theirs = client.get("tensorflow", ""), job.get("tensorflow", "")
    # A notebook without TensorFlow ships no TensorFlow objects.
    if mine and _minor(mine) != _minor(theirs):
        out.append(f"TensorFlow {mine} here, {theirs or 'none'} in the job")
    return out
