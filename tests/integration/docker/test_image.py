"""``tfyarn image build`` and ``tfyarn image check`` with the real Docker engine.

The job image holds this client's environment on a debootstrapped Debian
base; the check runs it as YARN's Docker runtime would (unprivileged user,
host network, the local cluster's Hadoop configuration mounted read-only)
and must reach the session's HDFS through hdfs-native.
"""

from __future__ import annotations

import json

import pytest

from tfyarn.cli import main
from tfyarn.contract import docker
from tfyarn.image import build as image_build
from tfyarn.image import check as image_check
from tfyarn.image._engine import ImageError
from tfyarn.image._engine import docker as run_docker

pytestmark = [pytest.mark.slow, pytest.mark.hdfs]


def test_a_built_image_passes_every_check_as_yarn_would_run_it(
    job_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["image", "check", job_image]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == [
        "ok   tfyarn imports",
        "ok   TensorFlow imports",
        "ok   HDFS answers",
        "ok   TensorFlow server starts",
    ], out
    assert "listed / through hdfs-native" in out
    assert "uid 0" not in out  # never root, as under YARN
    # The interpreter sits where docker_python says, and no entry point wraps it.
    inspect = run_docker(
        ["image", "inspect", "--format", "{{json .Config.Entrypoint}}", job_image],
        timeout=60,
    )
    assert inspect.stdout.strip() in ("null", "[]")
    assert docker.image_problem(job_image) is None


def _layers(image: str) -> list[str]:
    inspect = run_docker(
        ["image", "inspect", "--format", "{{json .RootFS.Layers}}", image], timeout=60
    )
    return list(json.loads(inspect.stdout))


def test_a_rebuild_copies_tfyarn_onto_the_kept_environment_layer(
    base_image: str, job_image: str
) -> None:
    tag = "tfyarn-test/rebuild:1"
    try:
        built = image_build.build(tag, base=base_image)
        # The distributions' layer is the job image's; only tfyarn was copied.
        assert built.reused_environment, built
        assert built.size_bytes < 64 * 2**20, built
        assert (
            _layers(tag)[:-1] == _layers(job_image)[:-1] == _layers(built.environment)
        )
        assert main(["image", "check", tag]) == 0
    finally:
        run_docker(["rmi", tag], timeout=300, check=False)


def test_an_image_without_the_environment_fails_in_one_line(
    base_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["image", "check", base_image]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: image ") and len(err.splitlines()) == 1, err
    assert docker.IMAGE_PYTHON in err and "tfyarn image build" in err


def test_each_failed_check_is_one_line(
    base_image: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    # The base's own Python: the probe cannot even be imported there.
    with pytest.raises(ImageError, match="No module named"):
        image_check.check(base_image, python="/usr/bin/python3")
    assert main(["image", "check", "tfyarn-test/no-such-image:1"]) == 1
    err = capsys.readouterr().err
    assert "no image tfyarn-test/no-such-image:1" in err and "tfyarn image build" in err


def test_build_refuses_a_name_yarn_would_refuse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["image", "build", "--tag", "Team/TF:1", "--base", "x"]) == 1
    err = capsys.readouterr().err
    assert "--tag: 'Team/TF:1' is not an image name YARN accepts" in err
