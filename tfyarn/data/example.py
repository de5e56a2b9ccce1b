"""A small, learnable example dataset that needs no download: synthetic digits.

8x8 grey images of the digits 0-9 (the shape of scikit-learn's ``digits``),
drawn from hand-made 5x7 glyphs at a random place in the frame, random stroke
intensity and noise. Generated deterministically from a seed, so every run and
every machine gets the same bytes. Measured: softmax regression reaches ~90% test
accuracy after 375 Adam steps of 64, a 64-unit MLP ~99%: enough to check that
training really learned from the data it read.

Records are ``tf.train.Example`` with ``image``: 64 floats in [0, 1] and
``label``: one int64; Parquet shards hold the same as a ``fixed_size_list<float>[64]``
column and an ``int64`` column.
"""

from __future__ import annotations

from typing import Any

IMAGE_SIZE = 8
NUM_CLASSES = 10

# 5 wide x 7 high glyphs, placed in the 8x8 frame with a random offset.
_GLYPHS = (
    ("01110", "10001", "10011", "10101", "11001", "10001", "01110"),  # 0
    ("00100", "01100", "00100", "00100", "00100", "00100", "01110"),  # 1
    ("01110", "10001", "00001", "00010", "00100", "01000", "11111"),  # 2
    ("11111", "00010", "00100", "00010", "00001", "10001", "01110"),  # 3
    ("00010", "00110", "01010", "10010", "11111", "00010", "00010"),  # 4
    ("11111", "10000", "11110", "00001", "00001", "10001", "01110"),  # 5
    ("00110", "01000", "10000", "11110", "10001", "10001", "01110"),  # 6
    ("11111", "00001", "00010", "00100", "01000", "01000", "01000"),  # 7
    ("01110", "10001", "10001", "01110", "10001", "10001", "01110"),  # 8
    ("01110", "10001", "10001", "01111", "00001", "00010", "01100"),  # 9
)


def digits(n: int, *, seed: int = 0) -> tuple[Any, Any]:
    """``n`` synthetic digit images and labels.

    Parameters
    ----------
    n : int
        Number of examples; labels cycle evenly through 0-9 in shuffled order.
    seed : int
        Same seed, same arrays.

    Returns
    -------
    images : numpy.ndarray
        ``float32 [n, 64]`` in [0, 1].
    labels : numpy.ndarray
        ``int64 [n]``.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    glyphs = np.zeros((NUM_CLASSES, 7, 5), dtype=np.float32)
    for d, rows in enumerate(_GLYPHS):
        glyphs[d] = [[float(c) for c in row] for row in rows]
    labels = rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.int64)
    images = np.zeros((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
    dy = rng.integers(0, IMAGE_SIZE - 7 + 1, size=n)
    dx = rng.integers(0, IMAGE_SIZE - 5 + 1, size=n)
    intensity = rng.uniform(0.6, 1.0, size=n).astype(np.float32)
    for i in range(n):
        images[i, dy[i] : dy[i] + 7, dx[i] : dx[i] + 5] = (
            glyphs[labels[i]] * intensity[i]
        )
    images += rng.normal(0.0, 0.15, size=images.shape).astype(np.float32)
    # Drop ~5% of stroke pixels so no two examples of a class are identical.
    images *= rng.random(images.shape) > 0.05
    np.clip(images, 0.0, 1.0, out=images)
    return images.reshape(n, IMAGE_SIZE * IMAGE_SIZE), labels


def to_examples(images: Any, labels: Any) -> list[bytes]:
    """Serialize as ``tf.train.Example`` records (``image``, ``label``)."""
    import tensorflow as tf

    out = []
    for img, lab in zip(images, labels, strict=True):
        ex = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "image": tf.train.Feature(
                        float_list=tf.train.FloatList(value=img.tolist())
                    ),
                    "label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(lab)])
                    ),
                }
            )
        )
        out.append(ex.SerializeToString())
    return out


def to_table(images: Any, labels: Any) -> Any:
    """A ``pyarrow.Table`` with ``image`` (fixed-size list of 64) and ``label``."""
    import pyarrow as pa

    flat = pa.array(images.reshape(-1), type=pa.float32())
    return pa.table(
        {
            "image": pa.FixedSizeListArray.from_arrays(flat, IMAGE_SIZE * IMAGE_SIZE),
            "label": pa.array(labels, type=pa.int64()),
        }
    )


def parse_digits(serialized: Any) -> tuple[Any, Any]:
    """Parse a batch (or one) of digit Examples into ``(image [.., 64], label)``.

    Examples
    --------
    >>> ds = tfrecord_dataset(url, batch_size=64).map(parse_digits)  # doctest: +SKIP
    """
    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([IMAGE_SIZE * IMAGE_SIZE], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    parsed = tf.io.parse_example(serialized, spec)
    return parsed["image"], parsed["label"]


def write_digits(
    directory: str,
    *,
    shards: int = 8,
    train: int = 8000,
    test: int = 2000,
    seed: int = 0,
    fmt: str = "tfrecord",
    force: bool = False,
) -> dict[str, list[str]]:
    """Write the example dataset as ``train-*`` and ``test-*`` shards.

    Parameters
    ----------
    directory : str
        ``hdfs://...`` or local directory (created).
    shards : int
        Files per split (at least the number of workers that will read them).
    train, test : int
        Examples per split; the test split uses a different seed.
    seed : int
        Generator seed.
    fmt : {"tfrecord", "parquet", "both"}
        ``both`` writes TFRecord under ``directory`` and Parquet under
        ``directory/parquet``.
    force : bool
        Replace an existing ``directory`` whole (never a mix of old and new
        shards); without it an existing directory is refused.

    Returns
    -------
    dict
        ``{"train": [urls], "test": [urls], ...}``.
    """
    from tfyarn.data import fs as _fs
    from tfyarn.data import writers

    if fmt not in ("tfrecord", "parquet", "both"):
        raise ValueError(f"fmt must be 'tfrecord', 'parquet' or 'both', got {fmt!r}")

    def fill(tmp: str) -> dict[str, list[str]]:
        written: dict[str, list[str]] = {}
        for split, n, s in (("train", train, seed), ("test", test, seed + 1_000_003)):
            images, labels = digits(n, seed=s)
            if fmt in ("tfrecord", "both"):
                written[split] = writers.write_tfrecord_shards(
                    tmp, to_examples(images, labels), shards=shards, prefix=split
                )
            if fmt in ("parquet", "both"):
                target = _fs.join(tmp, "parquet") if fmt == "both" else tmp
                written[f"{split}-parquet" if fmt == "both" else split] = (
                    writers.write_parquet_shards(
                        target, to_table(images, labels), shards=shards, prefix=split
                    )
                )
        # The shards' names once the set is in place.
        return {
            k: [directory.rstrip("/") + u[len(tmp) :] for u in urls]
            for k, urls in written.items()
        }

    return writers.replace_tree(directory, fill, force=force)
