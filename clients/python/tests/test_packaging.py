"""Packaging: type hints checked with mypy --strict, the version follows the API and the service."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import yaml

import deid_client

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parents[1]


def test_mypy_strict() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(PACKAGE / "src" / "deid_client")],
        capture_output=True,
        text=True,
        cwd=PACKAGE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_version_follows_the_api_version() -> None:
    doc = yaml.safe_load((REPO / "openapi.yaml").read_text())
    api_versions = {p.split("/")[1] for p in doc["paths"] if p.startswith("/v")}
    assert api_versions == {deid_client.API_VERSION} == {"v1"}
    major = int(deid_client.__version__.split(".")[0])
    assert f"v{major}" == deid_client.API_VERSION
    assert re.fullmatch(r"\d+\.\d+\.\d+", deid_client.__version__)
    # The installed distribution carries the same version.
    assert metadata.version("deid-client") == deid_client.__version__


def test_service_version_is_the_one_in_cargo_toml() -> None:
    cargo = tomllib.loads((REPO / "Cargo.toml").read_text())
    assert deid_client.SERVICE_VERSION == cargo["package"]["version"]
    doc = yaml.safe_load((REPO / "openapi.yaml").read_text())
    assert doc["info"]["version"] == cargo["package"]["version"]


def test_pyproject() -> None:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    assert project["name"] == "deid-client"
    deps = " ".join(project["dependencies"])
    assert "httpx" in deps and "tqdm" in deps and "pandas" not in deps  # pandas is optional
    assert project["optional-dependencies"]["pandas"]
    assert (PACKAGE / "src" / "deid_client" / "py.typed").exists()
    req = (PACKAGE / "requirements-test.txt").read_text()
    assert "./clients/python" in req  # installed from the repository root by scripts/test
