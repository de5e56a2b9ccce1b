"""Arrow columns to TensorFlow tensors, a record batch at a time."""

from __future__ import annotations

from typing import Any

from tfyarn.errors import TfyarnError


class ColumnTypeError(TfyarnError, TypeError):
    """A column's Arrow type has no tensor equivalent."""


def _tf_dtype(arrow_type: Any, name: str) -> Any:
    import pyarrow as pa
    import tensorflow as tf

    t = arrow_type
    if pa.types.is_boolean(t):
        return tf.bool
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return tf.as_dtype(t.to_pandas_dtype())
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return tf.string
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return tf.int64
    raise ColumnTypeError(
        f"column {name!r} has Arrow type {t}, which tfyarn cannot turn into a tensor "
        "(supported: bool, integers, floats, strings/binary, dates/timestamps as "
        "int64, and fixed-size lists of those). Select other columns with columns=."
    )


def output_signature(schema: Any, columns: list[str] | None) -> dict[str, Any]:
    """``{column: tf.TensorSpec}`` for batches of the given Arrow schema."""
    import pyarrow as pa
    import tensorflow as tf

    names = columns if columns is not None else schema.names
    missing = [c for c in names if c not in schema.names]
    if missing:
        raise ColumnTypeError(
            f"columns {missing} are not in the data (it has {schema.names})"
        )
    spec = {}
    for name in names:
        t = schema.field(name).type
        if pa.types.is_fixed_size_list(t):
            spec[name] = tf.TensorSpec(
                [None, t.list_size], _tf_dtype(t.value_type, name)
            )
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            raise ColumnTypeError(
                f"column {name!r} holds variable-length lists ({t}); write it as a "
                "fixed-size list (pyarrow.list_(type, n)) so its shape is known"
            )
        else:
            spec[name] = tf.TensorSpec([None], _tf_dtype(t, name))
    return spec


def to_numpy(batch: Any, names: list[str]) -> dict[str, Any]:
    """One Arrow RecordBatch (or Table) to ``{column: numpy array}``."""
    import numpy as np
    import pyarrow as pa

    out = {}
    for name in names:
        col = batch.column(name)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = col.type
        if pa.types.is_fixed_size_list(t):
            values = col.flatten().to_numpy(zero_copy_only=False)
            out[name] = values.reshape(len(col), t.list_size)
        elif pa.types.is_timestamp(t) or pa.types.is_date(t):
            out[name] = col.cast(pa.int64()).to_numpy(zero_copy_only=False)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            # bytes objects convert to tf.string without re-encoding.
            out[name] = np.array(
                [s.encode() if s is not None else b"" for s in col.to_pylist()],
                dtype=object,
            )
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            out[name] = np.array(
                [b if b is not None else b"" for b in col.to_pylist()], dtype=object
            )
        else:
            if col.null_count:
                raise ColumnTypeError(
                    f"column {name!r} has {col.null_count} null value(s) in a batch; "
                    "fill them before training (tensors have no nulls)"
                )
            out[name] = col.to_numpy(zero_copy_only=False)
    return out
