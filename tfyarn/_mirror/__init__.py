"""The copy-and-mirror fallback: HDFS for installs without tfyarn's HDFS plugin.

tfyarn's plugin lets TensorFlow open ``hdfs://`` itself, and the helpers use it
wherever it is installed (:mod:`tfyarn.data._hdfs_route`). An install made without
cargo has no plugin, and TensorFlow alone cannot open ``hdfs://``; there the
helpers keep TensorFlow on local disk and copy through hdfs-native
(:mod:`tfyarn.data.fs`):

- :mod:`.checkpoints`: checkpoints saved locally, then uploaded (state file
  last), downloaded again to restore; also the TF1 helpers that copy a
  ``Saver``'s local directory to and from HDFS (with the plugin a ``Saver``
  saves to ``hdfs://`` itself).

A parameter-server worker's share of the input files is copied to its
container's disk by :func:`tfyarn.data.staging.copy_files`, beside the staging
it falls back from.
"""
