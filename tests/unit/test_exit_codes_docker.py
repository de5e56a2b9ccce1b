"""container-executor's exit codes and Docker refusals, named.

The diagnostics below are shaped as Hadoop 3's LinuxContainerExecutor writes
them (``handleExitCode``: "Exception from container-launch ... Exit code: N
... Exception message: ... Shell error output: ... Shell output: main : ...")
with the sentences DockerLinuxContainerRuntime, OCIContainerRuntime and
container-executor print for each refusal.
"""

from __future__ import annotations

import pytest

from am.checks import container_end_meaning
from tfyarn.contract.exit_codes import (
    explain_diagnostics,
    explain_executor_exit,
    explain_exit,
)
from tfyarn.spec import JobSpec, Role


def lce(code: int, message: str, errors: str = "", output: str = "") -> str:
    """A NodeManager's diagnostics for a container container-executor ended."""
    out = output or (
        "main : command provided 4\nmain : run as user is alice\n"
        "main : requested yarn user is alice\n"
    )
    return (
        "Exception from container-launch.\n"
        "Container id: container_1700000000000_0001_01_000002\n"
        f"Exit code: {code}\nException message: {message}\n"
        + (f"Shell error output: {errors}\n" if errors else "")
        + f"Shell output: {out}\n"
    )


CASES = [
    (
        "untrusted image",
        lce(7, "Launch container failed", "image: team/tf:1 is not trusted.\n"),
        "not from a registry this cluster trusts",
    ),
    (
        "disallowed network (NodeManager)",
        (
            "Exception from container-launch.\nExit code: -1\nException message: "
            "Disallowed network:  'host' specified. Allowed networks: are [bridge]\n"
        ),
        "does not allow the host network",
    ),
    (
        "disallowed network (container-executor)",
        lce(
            29,
            "Launch container failed",
            "Could not find requested network in allowed networks\nError "
            "constructing docker command, docker error code=60, error "
            "message='Invalid docker network'\n",
        ),
        "docker.allowed.networks",
    ),
    (
        "user below min.user.id",
        (
            "Application application_1_0001 initialization failed (exitCode=255) "
            "with output: main : command provided 0\nmain : run as user is alice\n"
            "Requested user alice is not whitelisted and has id 500,which is below "
            "the minimum allowed 1000\n"
        ),
        "min.user.id",
    ),
    (
        "image not found",
        lce(7, "Launch container failed")
        + "Unable to find image 'team/tf:2' locally\ndocker: Error response from "
        "daemon: pull access denied for team/tf",
        "not on the node and could not be pulled",
    ),
    (
        "image name",
        (
            "Exception from container-launch.\nExit code: -1\nException message: "
            "Image name 'Team/TF' doesn't match docker image name pattern\n"
        ),
        "not one YARN accepts",
    ),
    (
        "runtime not allowed",
        (
            "Exception message: Disallowed runtime:  'nvidia' specified. Allowed "
            "runtimes: are [runc]"
        ),
        "docker.allowed.runtimes",
    ),
    (
        "runtime unknown to dockerd",
        lce(7, "Launch container failed")
        + "docker: Error response from daemon: unknown or invalid runtime name: nvidia",
        "no such runtime",
    ),
    (
        "read-write mount not allowed",
        lce(
            29,
            "Launch container failed",
            "Invalid docker rw mount '/data:/data:rw'\nError constructing docker "
            "command, docker error code=51, error message='Invalid read-write mount'",
        ),
        "docker.allowed.rw-mounts",
    ),
    (
        "banned user",
        "main : command provided 0\nRequested user yarn is banned\n",
        "banned.users",
    ),
    (
        "bad container-executor.cfg",
        lce(
            24,
            "Launch container failed",
            "Invalid permissions on container-executor.cfg",
        ),
        "container-executor.cfg is missing or invalid",
    ),
]


@pytest.mark.parametrize(
    ("what", "diagnostics", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_each_refusal_is_named(what: str, diagnostics: str, words: str) -> None:
    lines = explain_diagnostics(diagnostics)
    assert any(words in line for line in lines), (what, lines)
    assert len(lines) == len(set(lines))


def test_a_bare_exit_code_7_from_container_executor_is_explained() -> None:
    (line,) = explain_diagnostics(lce(7, "Launch container failed"))
    assert line.startswith(
        "exit code 7: container-executor could not run the container"
    )
    assert "docker run" in line and "--yarn_files" in line


def test_small_codes_are_the_scripts_without_container_executor() -> None:
    # The DefaultContainerExecutor, a script exiting 7: nothing to add.
    plain = (
        "Exception from container-launch.\nContainer id: c_1\nExit code: 7\n"
        "Stack trace: ExitCodeException exitCode=7:"
    )
    assert explain_diagnostics(plain) == []
    assert explain_exit(7) == ""
    assert explain_executor_exit(7).startswith("container-executor")
    assert explain_executor_exit(None) == ""


def test_the_masters_words_for_a_container_in_docker_that_found_no_python(
    tmp_path: object,
) -> None:
    spec = JobSpec(script="train.py", docker_image="team/tf:1")
    lines = container_end_meaning(
        spec, Role.WORKER, lce(127, "Launch container failed")
    )
    assert "Docker image team/tf:1" in lines[0] and "--docker_python" in lines[0]
    assert any("exit code 127" in line for line in lines)
    # On the node, 127 is the interpreter the client named.
    plain = JobSpec(script="train.py")
    lines = container_end_meaning(plain, Role.WORKER, "Exit code: 127")
    assert lines and "Docker" not in lines[0]
