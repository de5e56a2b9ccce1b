"""skein imported by the master and the runtime: no setuptools, no warning.

Each case runs in a fresh interpreter: what a process imported first is the
point, and this test session has long imported skein (and maybe setuptools).
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig

import pytest

from tfyarn.runtime import discover

PROBE = """
import json, sys
{before}
from tfyarn.contract.skein_import import import_skein
skein = import_skein()
import distutils.version
print(json.dumps({{
    "client": hasattr(skein, "ApplicationClient"),
    "setuptools": "setuptools" in sys.modules,
    "distutils": distutils.__file__,
}}))
"""


def _probe(before: str = "") -> tuple[dict[str, object], str]:
    # -W error: a DeprecationWarning that escaped would be an exception here.
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::DeprecationWarning",
            "-c",
            PROBE.format(before=before),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="no distutils in the stdlib")
def test_skein_gets_the_standard_librarys_distutils_and_no_warning() -> None:
    found, stderr = _probe()
    assert found["client"] is True
    assert found["setuptools"] is False
    assert str(found["distutils"]).startswith(sysconfig.get_paths()["stdlib"])
    assert stderr == ""


def test_a_distutils_already_imported_is_left_as_it_is() -> None:
    found, _ = _probe(before="import setuptools, distutils")
    assert found["client"] is True
    assert found["setuptools"] is True
    assert "setuptools" in str(found["distutils"])


def test_the_runtimes_discovery_imports_skein_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    class FakeSkein:
        class ApplicationClient:
            @staticmethod
            def from_current() -> str:
                calls.append("from_current")
                return "client"

    monkeypatch.setattr(discover, "import_skein", lambda: FakeSkein)
    assert discover._from_current() == "client"
    assert calls == ["from_current"]
