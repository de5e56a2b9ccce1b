"""tfyarn's application master: run as ``python -m am`` in the AM container.

It launches every task's container, serves the ``tfyarn.Master`` gRPC contract
to them (see proto/tfyarn/_proto/master.proto), forms the TensorFlow cluster and
decides the job's outcome. ``am`` may import ``tfyarn``; never the reverse.
"""
