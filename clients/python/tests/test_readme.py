"""The Python example of the repository's README, run as it is written (only the server's URL
is this test server's, the API key comes from DEID_API_KEY as the client reads it)."""

from __future__ import annotations

import os
import re

import pytest

from conftest import ACME_KEY, REPO, Server


def test_the_readme_python_example_runs(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(blocks) == 1, "tests/service/readme.rs expects one Python block in README"
    code = blocks[0].replace('"http://127.0.0.1:8080"', repr(server.url))
    assert server.url in code
    monkeypatch.setenv("DEID_API_KEY", ACME_KEY)
    monkeypatch.chdir(REPO)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    df = scope["df"]
    assert len(df) == 30162  # type: ignore[arg-type]
    assert os.getcwd() == str(REPO)
