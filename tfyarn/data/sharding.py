"""Which files this task reads: list a pattern, then take this task's share.

Every input pipeline gets the files whose position in the sorted listing is
congruent to its index (``files[index::count]``): no file is read twice, none is
skipped, and the split is the same after a restart because listings are sorted
by full URL.

Where the index comes from, in order:

1. an explicit ``shard=Shard(index, count)``;
2. a ``tf.distribute.InputContext`` (``input_pipeline_id`` of
   ``num_input_pipelines``), which MultiWorkerMirroredStrategy's
   ``distribute_datasets_from_function`` passes to the dataset function on
   every worker;
3. ``TF_CONFIG`` of this process: the tasks that read training data are the
   ``chief`` (if any) followed by the ``worker`` tasks, except in a
   parameter-server cluster (one with ``ps`` tasks), where only the workers read
   (the chief coordinates). An ``evaluator`` reads everything.

ParameterServerStrategy: ``create_per_worker_dataset`` traces the dataset
function once on the coordinator and runs the graph on each worker, and its
InputContext is always pipeline 0 of 1; Python generators do not run on the
workers at all (measured on TF 2.21: the generator op is placed on the
coordinator, which crashes). So for PS the shard is picked on the *worker*, by
its own ``TF_CONFIG``, before it serves; see :func:`tfyarn.data.stage_shard`
and :func:`tfyarn.data.per_worker_dataset_fn`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError, TfyarnError


class ShardError(TfyarnError, ValueError):
    """The files cannot be split across the input pipelines as asked."""


@dataclass(frozen=True)
class Shard:
    """Input pipeline ``index`` of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ShardError(f"shard count must be >= 1, got {self.count}")
        if not 0 <= self.index < self.count:
            raise ShardError(
                f"shard index must be in [0, {self.count}), got {self.index}"
            )


def current_shard(input_context: Any = None) -> Shard:
    """This process's input pipeline, from an InputContext or ``TF_CONFIG``.

    Parameters
    ----------
    input_context : tf.distribute.InputContext, optional
        As passed by ``strategy.distribute_datasets_from_function``.

    Returns
    -------
    Shard
        ``Shard(0, 1)`` outside a cluster (no ``TF_CONFIG``).

    Raises
    ------
    ShardError
        For a task that reads no training data (a ``ps`` task, or the
        coordinator of a parameter-server cluster) or a malformed ``TF_CONFIG``.
    """
    if input_context is not None:
        return Shard(
            int(input_context.input_pipeline_id),
            int(input_context.num_input_pipelines),
        )
    return shard_from_tf_config(os.environ.get("TF_CONFIG", ""))


def shard_from_tf_config(raw: str) -> Shard:
    """The shard of the task that ``TF_CONFIG`` (a JSON string) describes."""
    if not raw.strip():
        return Shard(0, 1)
    try:
        config = json.loads(raw)
        cluster: dict[str, list[str]] = config.get("cluster", {}) or {}
        task = config.get("task", {}) or {}
        role = str(task.get("type", ""))
        index = int(task.get("index", 0))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ShardError(f"TF_CONFIG is not valid JSON of a TF cluster: {exc}") from exc
    if role == "evaluator" or not cluster:
        return Shard(0, 1)
    readers: list[tuple[str, int]] = []
    parameter_server = bool(cluster.get("ps"))
    if not parameter_server:
        readers += [("chief", i) for i in range(len(cluster.get("chief", [])))]
    readers += [("worker", i) for i in range(len(cluster.get("worker", [])))]
    if (role, index) not in readers:
        why = (
            "in a parameter-server cluster only workers read training data; the "
            "chief builds datasets with create_per_worker_dataset (see "
            "tfyarn.data.per_worker_dataset_fn)"
            if parameter_server
            else "it is not a chief or worker task"
        )
        raise ShardError(f"task {role}:{index} has no input shard: {why}")
    return Shard(readers.index((role, index)), len(readers))


def list_files(pattern: str | list[str]) -> list[str]:
    """All files matching a pattern (or a list of patterns), sorted, deduplicated.

    A pattern naming a directory lists the files in it (names starting with
    ``_`` or ``.`` are skipped, as Hadoop and Spark do for ``_SUCCESS`` and
    temporary files).

    Raises
    ------
    HdfsError
        If nothing matches: the message names the pattern.
    """
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    if not patterns:
        raise HdfsError("no file pattern given")
    urls: set[str] = set()
    for pat in patterns:
        fs = _fs.resolve(pat)
        if _fs.has_magic(pat):
            infos = fs.glob(pat)
        else:
            info = fs.info(pat)
            infos = fs.ls(pat) if info.is_dir else [info]
        for info in infos:
            name = info.url.rstrip("/").rsplit("/", 1)[-1]
            if info.is_dir or name.startswith(("_", ".")):
                continue
            urls.add(info.url)
        if not urls and len(patterns) == 1:
            raise HdfsError(
                f"no files match {pat}. Check the pattern (list the directory with "
                f"`tfyarn data ls {pat.rsplit('/', 1)[0] or '/'}`)."
            )
    if not urls:
        raise HdfsError(f"no files match any of {patterns}")
    return sorted(urls)


def shard_files(
    pattern: str | list[str],
    *,
    input_context: Any = None,
    shard: Shard | None = None,
) -> list[str]:
    """This input pipeline's share of the files matching ``pattern``.

    Parameters
    ----------
    pattern : str or list of str
        ``hdfs://nn/data/part-*.tfrecord``, ``viewfs://...``, a local glob, a
        directory, or a list of these.
    input_context : tf.distribute.InputContext, optional
        Picks the shard (see the module docstring); ignored if ``shard`` is given.
    shard : Shard, optional
        Explicit shard, for tests and custom placements.

    Returns
    -------
    list of str
        ``files[index::count]`` of the sorted listing; never empty.

    Raises
    ------
    HdfsError
        Nothing matches, or the filesystem cannot be reached.
    ShardError
        Fewer files than input pipelines (some pipeline would read nothing, and
        MultiWorkerMirroredStrategy would stall waiting for it).

    Examples
    --------
    >>> def dataset_fn(ctx):
    ...     files = shard_files("hdfs:///data/train-*", input_context=ctx)
    ...     return tf.data.TFRecordDataset(files)
    """
    files = list_files(pattern)
    chosen = shard if shard is not None else current_shard(input_context)
    if len(files) < chosen.count:
        raise ShardError(
            f"{len(files)} file(s) match {pattern} but there are {chosen.count} input "
            "pipelines; each pipeline needs at least one file. Write the data as "
            f"at least {chosen.count} shards (`tfyarn data put --shards N`), or use "
            "fewer workers."
        )
    return files[chosen.index :: chosen.count]
