"""The distribution's metadata as the build reads it (issue 53): the licence an SPDX expression
(``python -m build`` warned that a TOML-table ``project.license`` stops being supported on
2027-02-18), under a setuptools that reads one (77 or later)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

# what the build backend does with pyproject.toml, warnings recorded (nothing is written)
_READ = textwrap.dedent(
    """
    import warnings
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), "pyproject.toml")
    for w in seen:
        print("warning:", w.category.__name__, str(w.message).splitlines()[0])
    print("license:", dist.metadata.license_expression)
    print("files:", *dist.metadata.license_files)
    """
)


def test_the_licence_is_an_spdx_expression_read_without_a_deprecation() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    (setuptools,) = (
        Requirement(r) for r in project["build-system"]["requires"] if r.startswith("setuptools")
    )
    # every setuptools the build may pick reads an SPDX expression and license-files
    assert not setuptools.specifier.contains(Version("76.1"))
    assert setuptools.specifier.contains(Version("77.0.3"))
    proc = subprocess.run(
        [sys.executable, "-c", _READ], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line.startswith("warning:")] == []
    assert "license: Apache-2.0" in lines
    for name in proc.stdout.split("files:", 1)[1].split():
        assert (ROOT / name).is_file()
