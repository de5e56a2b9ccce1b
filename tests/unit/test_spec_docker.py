"""Docker images per role: options, checks before submission, YARN's variables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _fake_yarn import FakeYarn

from tfyarn.cli import main
from tfyarn.client import connection
from tfyarn.client.compile import to_skein
from tfyarn.contract import docker
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec, Role


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user file
    path = tmp_path / "train.py"
    path.write_text("")
    return str(path)


@pytest.mark.parametrize(
    "name",
    [
        "tfyarn",
        "tfyarn:1",
        "local/tfyarn:cpu-2.21",
        "registry.example.com:5000/team/tf_gpu:v1.2",
        "my-registry/a.b/c-d_e",
    ],
)
def test_image_names_yarn_accepts(name: str) -> None:
    assert docker.image_problem(name) is None


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("Local/TFyarn:1", "lower case"),
        ("tfyarn@sha256:" + "a" * 64, "no digests"),
        ("tfyarn:1 2", "not an image name"),
        ("", "not an image name"),
        ("tf:yarn:1", "not an image name"),
    ],
)
def test_image_names_yarn_refuses(name: str, hint: str) -> None:
    problem = docker.image_problem(name)
    assert problem and hint in problem


def test_mounts_are_normalized_and_checked() -> None:
    assert docker.parse_mount("/data:/data") == "/data:/data:ro"
    assert docker.parse_mount("/scratch:/out:rw") == "/scratch:/out:rw"
    assert docker.parse_mount("vocab.txt:/vocab.txt:ro") == "vocab.txt:/vocab.txt:ro"
    for bad, words in [
        ("/data", "not a mount"),
        ("/a:/b:rx", "mode must be ro or rw"),
        ("/a:b", "absolute path inside the container"),
        ("rel/dir:/b", "absolute path on the node"),
        ("/a:/b:ro:x", "not a mount"),
    ]:
        with pytest.raises(ValueError, match=words):
            docker.parse_mount(bad)


def test_per_role_images_and_yarns_variables(script: str) -> None:
    spec = JobSpec(
        script=script,
        tasks={
            "ps": {"count": 1, "docker_image": "local/tf-cpu:1"},
            "worker": {"count": 2, "gpus": 1},
            "chief": {"count": 1, "docker_image": "none"},
        },
        docker_image="local/tf-gpu:1",
        docker_mounts=("/data:/data",),
        docker_runtime="nvidia",
    )
    assert spec.docker_image_of(Role.PS) == "local/tf-cpu:1"
    assert spec.docker_image_of(Role.WORKER) == "local/tf-gpu:1"
    assert spec.docker_image_of(Role.CHIEF) == ""
    assert spec.docker_env(Role.CHIEF) == {}
    assert spec.docker_env(Role.WORKER) == {
        "YARN_CONTAINER_RUNTIME_TYPE": "docker",
        "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE": "local/tf-gpu:1",
        "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK": "host",
        "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS": "/data:/data:ro",
        "YARN_CONTAINER_RUNTIME_DOCKER_RUNTIME": "nvidia",
        # NVIDIA's runtime as YARN's GPU plugin drives it: every device of
        # the node, narrowed per task by the runtime (CUDA_VISIBLE_DEVICES).
        "NVIDIA_VISIBLE_DEVICES": "all",
    }
    # The ps asks for no GPU: none of the node's, whatever its image says.
    assert spec.docker_env(Role.PS)["NVIDIA_VISIBLE_DEVICES"] == "void"
    app = to_skein(spec, am_source="/dev/null")
    worker, ps, chief = (app.services[r] for r in ("worker", "ps", "chief"))
    assert worker.env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "local/tf-gpu:1"
    assert ps.env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "local/tf-cpu:1"
    assert "YARN_CONTAINER_RUNTIME_TYPE" not in chief.env
    # The image's interpreter in Docker, the client's on the node.
    assert docker.IMAGE_PYTHON in worker.script
    assert spec.python in chief.script and docker.IMAGE_PYTHON not in chief.script
    # The master never runs in Docker.
    assert not any(k.startswith("YARN_CONTAINER_RUNTIME") for k in app.master.env)
    assert worker.resources.gpus == 1
    # The images travel with the job to the master and the tasks.
    again = JobSpec.from_env(spec.to_env())
    assert again.docker_image_of(Role.PS) == "local/tf-cpu:1"
    assert again.docker_mounts == ("/data:/data:ro",)


def test_no_image_no_docker(script: str) -> None:
    app = to_skein(JobSpec(script=script), am_source="/dev/null")
    assert not any("DOCKER" in k for s in app.services.values() for k in s.env)


def test_bad_docker_options_are_refused_before_submission(
    script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn()
    monkeypatch.setattr(connection, "connect", lambda: fake)
    for argv, words in [
        (["--worker_docker_image", "Bad/Image"], "--worker_docker_image: 'Bad/Image'"),
        (["--docker_image", "x@sha256:00"], "no digests"),
        (["--docker_mount", "/a:/b:rx"], "--docker_mount: mount '/a:/b:rx'"),
        (["--docker_runtime", "nv idia"], "not a Docker runtime name"),
        (
            ["--docker_image", "tf:1", "--docker_python", "python3"],
            "must be an absolute path",
        ),
    ]:
        assert main(["submit", "--detach", *argv, script]) == 1
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert fake.submitted == []
    # In Python the same checks speak of keywords.
    with pytest.raises(SpecError, match="docker_image=: 'Bad/Image'"):
        JobSpec(script=script, docker_image="Bad/Image")


def test_cli_options_reach_the_request(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeYarn()
    monkeypatch.setattr(connection, "connect", lambda: fake)
    argv = ["--docker_image", "local/a:1", "--ps_docker_image", "local/b:1"]
    argv += ["--num_ps", "1", "--docker_mount", "/x:/x", "--docker_mount", "/y:/y:rw"]
    assert main(["submit", "--detach", *argv, script]) == 0
    (app,) = fake.submitted
    assert app.services["ps"].env[docker.IMAGE] == "local/b:1"
    assert app.services["worker"].env[docker.IMAGE] == "local/a:1"
    assert app.services["worker"].env[docker.MOUNTS] == "/x:/x:ro,/y:/y:rw"


def test_dry_run_prints_each_roles_yarn_request(
    script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn(nodes=[(8192, 8, 2)])
    monkeypatch.setattr(connection, "connect", lambda: fake)
    argv = ["submit", "--dry_run", "--num_ps", "1", "--worker_gpus", "1"]
    argv += ["--worker_docker_image", "local/gpu:1", "--docker_mount", "/d:/d"]
    assert main([*argv, script]) == 0
    out = capsys.readouterr().out
    assert fake.submitted == []
    # The request is YAML comments after the job's YAML, which still parses.
    job = yaml.safe_load(out.split("OK: ")[0])
    assert job["tasks"]["worker"]["docker_image"] == "local/gpu:1"
    request = out[out.index("# YARN request") :].replace("\n# ", "\n")
    worker = request[request.index("\nworker:") :]
    head = "worker: 1 x 2048 MiB, 1 vcores, 1 yarn.io/gpu (in Docker image local/gpu:1)"
    assert head in worker
    assert "YARN_CONTAINER_RUNTIME_TYPE=docker" in worker
    assert "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS=/d:/d:ro" in worker
    assert f"command: exec {docker.IMAGE_PYTHON} -u -m tfyarn.runtime" in worker
    assert "train.py (file) <- " in worker
    ps = request[request.index("\nps:") : request.index("\nworker:")]
    assert "(on the node itself)" in ps and "DOCKER" not in ps
    master = request[request.index("master:") : request.index("\nps:")]
    assert "-m am" in master and "DOCKER" not in master


def test_the_examples_config_makes_per_role_images(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tfyarn.client import config

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    cfg = config.load(root / "examples" / "docker_per_role.yaml")
    spec = config.to_spec("examples/ps_coordinator.py", (), cfg).validate()
    assert spec.docker_image_of(Role.PS) == "registry.example.com/ml/tfyarn-cpu:2.21"
    assert spec.docker_image_of(Role.CHIEF) == spec.docker_image_of(Role.PS)
    assert spec.docker_image_of(Role.WORKER).endswith("tfyarn-gpu:2.21")
    assert spec.group(Role.WORKER).gpus == 1
    assert spec.docker_env(Role.WORKER)[docker.MOUNTS].startswith("/etc/hadoop/conf")


def test_dry_run_shows_how_each_task_gets_its_gpus(
    script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn(nodes=[(8192, 8, 2)])
    monkeypatch.setattr(connection, "connect", lambda: fake)
    argv = ["submit", "--dry_run", "--num_ps", "1", "--num_worker", "2"]
    argv += ["--worker_gpus", "1", "--docker_image", "local/gpu:1"]
    argv += ["--docker_runtime", "nvidia"]
    assert main([*argv, script]) == 0
    out = capsys.readouterr().out
    assert fake.submitted == []
    request = out[out.index("# YARN request") :].replace("\n# ", "\n")
    worker = request[request.index("\nworker:") : request.index("\nEach task")]
    ps = request[request.index("\nps:") : request.index("\nworker:")]
    # NVIDIA's runtime gets the node's devices for a GPU task, none for a ps.
    assert "NVIDIA_VISIBLE_DEVICES=all" in worker
    assert "NVIDIA_VISIBLE_DEVICES=void" in ps
    gpus = request[request.index("GPUs (CUDA_VISIBLE_DEVICES") :]
    assert 'ps:0: none (CUDA_VISIBLE_DEVICES="")' in gpus
    assert "worker:0, worker:1: 1 each, named by index and UUID" in gpus
    # Without --docker_runtime nvidia, YARN's own plugin sets the variable.
    assert main([*argv[:-2], script]) == 0
    assert "NVIDIA_VISIBLE_DEVICES=" not in capsys.readouterr().out
