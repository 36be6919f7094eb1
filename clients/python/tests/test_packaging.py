"""Packaging: type hints checked with mypy --strict, the code runs on the oldest Python the
package declares, the version follows the API and the service, optional dependencies."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

import deid_client

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI (requirements-test.txt)
    import tomli as tomllib

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
    assert "httpx" in deps and "pandas" not in deps and "tqdm" not in deps  # both optional
    assert project["optional-dependencies"]["pandas"]
    assert any(d.startswith("tqdm") for d in project["optional-dependencies"]["progress"])
    assert (PACKAGE / "src" / "deid_client" / "py.typed").exists()
    req = (PACKAGE / "requirements-test.txt").read_text()
    assert "./clients/python" in req  # installed from the repository root by scripts/test


def declared_minimum() -> str:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    m = re.fullmatch(r">=(3\.\d+)", project["project"]["requires-python"])
    assert m, project["project"]["requires-python"]
    assert project["tool"]["mypy"]["python_version"] == m.group(1)  # mypy checks against it too
    return m.group(1)


def vermin(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys, vermin; sys.exit(vermin.main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_the_code_runs_on_the_declared_minimum_python(tmp_path: Path) -> None:
    """vermin finds no syntax, module, function or parameter newer than requires-python in the
    package, its tests and examples/pipeline.py (tomllib is imported only from 3.11 on)."""
    target = f"--target={declared_minimum()}-"
    paths = [PACKAGE / "src" / "deid_client", PACKAGE / "tests", REPO / "examples" / "pipeline.py"]
    result = vermin(target, "--violations", "--eval-annotations", "--no-tips", "--no-parse-comments", *map(str, paths))
    assert result.returncode == 0, result.stdout + result.stderr
    # The check can fail: 3.11-only code is found.
    probe = tmp_path / "probe.py"
    probe.write_text("import tomllib\n")
    result = vermin(target, "--violations", "--no-tips", str(probe))
    assert result.returncode != 0 and "'tomllib' module requires !2, 3.11" in result.stdout, result.stdout


def test_the_sql_module_imports_without_its_engines() -> None:
    """deid_client.sql needs psycopg or duckdb only when a connection of that kind is given;
    another object is refused with a message naming the extras."""
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['duckdb'] = None\n"
        "from deid_client import sql\n"
        "try:\n"
        "    sql.anonymize_table(None, object(), 't', 'u', {})\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "deid-client[postgres]" in result.stdout and "deid-client[duckdb]" in result.stdout


def test_the_spark_module_imports_without_pyspark() -> None:
    """deid_client.spark imports pyspark only when it runs."""
    code = "import sys; sys.modules['pyspark'] = None; import deid_client.spark as s; print(s.anonymize.__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "anonymize"
