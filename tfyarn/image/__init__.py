"""Docker images tfyarn tasks run in: ``tfyarn image build`` and ``tfyarn image check``.

An image for YARN's Docker runtime needs the job's Python environment at the
path ``docker_python`` names (:data:`tfyarn.contract.docker.IMAGE_PYTHON`),
readable by any user (YARN runs the container as the job's user), and no
entry point of its own. :mod:`.build` makes one from a base image with a
Python of the client's version; :mod:`.check` runs it the way YARN would.
"""
