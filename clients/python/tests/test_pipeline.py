"""examples/pipeline.py end to end on examples/adult against a real deid, and its exit statuses."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

from conftest import ACME_KEY, ADULT, ADULT_QIS, REPO, Server
from deid_client import Client, NotFoundError

PIPELINE = REPO / "examples" / "pipeline.py"
ADULT_ARGS = [
    str(ADULT / "adult.csv"),
    "--qi", ",".join(ADULT_QIS),
    "--sensitive", "salary-class",
    "--k", "5", "--l", "2",
    "--suppression-limit", "0.02",
    "--time-limit", "20s",
]


def run_pipeline(server_url: str, *args: str, key: str = ACME_KEY) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEID_URL=server_url, DEID_API_KEY=key)
    return subprocess.run([sys.executable, str(PIPELINE), *args], capture_output=True, text=True, env=env, timeout=120)


def load_pipeline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pipeline", PIPELINE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["pipeline"] = module
    spec.loader.exec_module(module)
    return module


def test_pipeline_publishes_adult(server: Server, client: Client, tmp_path: Path) -> None:
    out, report_path = tmp_path / "release" / "adult.csv", tmp_path / "release" / "report.json"
    r = run_pipeline(server.url, *ADULT_ARGS, "--output", str(out), "--report", str(report_path))
    assert r.returncode == 0, r.stderr
    # Progress was printed while the job ran, and the checks were reported.
    assert "improvement: utility" in r.stderr and "k-anonymity (pyCANON)" in r.stderr
    assert "%|" not in r.stderr  # no progress bar: stderr is not a terminal
    assert f"verified and written: {out}" in r.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["adult.csv", "report.json"]  # no leftovers

    doc = json.loads(report_path.read_text())
    assert doc["publish"] is True and all(c["passed"] for c in doc["verification"])
    checks = {c["check"]: c for c in doc["verification"]}
    assert checks["k-anonymity (pyCANON)"]["k"] >= 5
    assert checks["distinct l-diversity of salary-class (published records, pyCANON)"]["l"] >= 2
    report = doc["report"]
    assert report["anonymous"] is True and report["suppressed_rows"] == 335

    # Our own check of the published file, without pyCANON.
    df = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    assert len(df) == 30162
    suppressed = (df[ADULT_QIS] == "*").all(axis=1)
    assert suppressed.sum() == 335 and (df.loc[suppressed, "salary-class"] == "*").all()
    classes = df[~suppressed].groupby(ADULT_QIS)["salary-class"]
    assert classes.size().min() >= 5 and classes.nunique().min() >= 2

    # The uploaded dataset was deleted; the job's result stays.
    with pytest.raises(NotFoundError):
        client.get_dataset(report["dataset_id"])
    assert client.get_result(doc["job_id"]).anonymous


def test_not_anonymous_exits_3(server: Server, tmp_path: Path) -> None:
    out = tmp_path / "adult.csv"
    # Recursive (2, 2)-diversity of the salary class: even the whole table has r1 ≈ 3 · r2.
    args = [str(ADULT / "adult.csv"), "--qi", "age,sex", "--sensitive", "salary-class", "--k", "5",
            "--l-model", "recursive", "--c", "2", "--l", "2", "--suppression-limit", "0", "--output", str(out)]
    r = run_pipeline(server.url, *args)
    assert r.returncode == 3, r.stderr
    assert "no_solution" in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_bad_input_exits_2(server: Server, tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    r = run_pipeline(server.url, str(ADULT / "adult.csv"), "--qi", "age,no-such-column", "--output", str(out))
    assert r.returncode == 2 and "no-such-column" in r.stderr
    r = run_pipeline(server.url, str(tmp_path / "missing.csv"), "--qi", "age", "--output", str(out))
    assert r.returncode == 2
    # The service rejects the specification (422 naming the field).
    r = run_pipeline(server.url, *ADULT_ARGS[:-2], "--time-limit", "soon", "--output", str(out))
    assert r.returncode == 2 and "time_limit" in r.stderr
    # A wrong API key is a configuration error.
    r = run_pipeline(server.url, *ADULT_ARGS, "--output", str(out), key="wrong-key-wrong-key")
    assert r.returncode == 2 and "unauthorized" in r.stderr
    assert not out.exists()


def test_unreachable_service_exits_5(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_pipeline(f"http://127.0.0.1:{port}", *ADULT_ARGS, "--output", str(tmp_path / "x.csv"))
    assert r.returncode == 5 and "service unavailable" in r.stderr


def test_a_result_that_fails_verification_is_not_published(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If what comes back is not what the report claims (here: one record's education altered after
    the download), pyCANON catches it: exit 4 and nothing written."""
    pipeline = load_pipeline()
    original = Client.download_result

    def tampered(self: Client, job_id: str, dest: Any) -> None:
        original(self, job_id, dest)
        df = pd.read_csv(dest, sep=";", dtype=str, keep_default_na=False)
        first = df.index[(df[ADULT_QIS] != "*").any(axis=1)][0]
        df.loc[first, "education"] = "a-unique-value"
        df.to_csv(dest, sep=";", index=False)

    monkeypatch.setattr(Client, "download_result", tampered)
    monkeypatch.setenv("DEID_URL", server.url)
    monkeypatch.setenv("DEID_API_KEY", ACME_KEY)
    out, report = tmp_path / "adult.csv", tmp_path / "report.json"
    status = pipeline.main([*ADULT_ARGS, "--output", str(out), "--report", str(report), "--no-progress"])
    assert status == pipeline.VERIFICATION_FAILED == 4
    assert not out.exists()
    doc = json.loads(report.read_text())
    failed = [c for c in doc["verification"] if not c["passed"]]
    assert doc["publish"] is False and failed[0]["check"] == "k-anonymity (pyCANON)" and failed[0]["k"] == 1


def test_verify_rules() -> None:
    pipeline = load_pipeline()
    qis, sens = ["age", "zip"], ["disease"]
    rows = [["30", "81*", "flu"], ["30", "81*", "cold"], ["40", "82*", "flu"], ["40", "82*", "ulcer"], ["*", "*", "*"]]
    df = pd.DataFrame(rows, columns=["age", "zip", "disease"])
    common = dict(qis=qis, sensitive=sens, k=2, l=2, suppression_limit=0.2, rows=5, suppressed_rows=1)
    assert pipeline.verify(df, **common).ok
    # More suppressed than reported, or beyond the limit.
    assert not pipeline.verify(df, **{**common, "suppressed_rows": 0}).ok
    assert not pipeline.verify(df, **{**common, "suppression_limit": 0.1}).ok
    # A suppressed record that shows its sensitive value leaks it.
    leak = df.copy()
    leak.loc[4, "disease"] = "flu"
    v = pipeline.verify(leak, **common)
    assert not v.ok and any(c["check"] == "suppressed records disclose nothing" and not c["passed"] for c in v.checks)
    # ... unless the job said keep_sensitive — then the block must satisfy k itself (here: 1 < 2).
    assert not pipeline.verify(leak, **common, mode="keep_sensitive").ok
    # Not 3-diverse / not 3-anonymous.
    assert not pipeline.verify(df, **{**common, "l": 3}).ok
    assert not pipeline.verify(df, **{**common, "k": 3}).ok
    # Entropy l-diversity of 2: each class has two equally frequent values (entropy ln 2).
    # pyCANON rounds exp(entropy) down, which may land just below 2: whatever it says, a
    # fractional l is required up to the next integer, so 1.5 passes exactly when 2 does.
    e2 = pipeline.verify(df, **{**common, "l_model": "entropy"}).ok
    assert pipeline.verify(df, **{**common, "l_model": "entropy", "l": 1.5}).ok == e2
    # Recursive (c, l): (c=2, l=2) holds (r1 = 1 < 2 · 1).
    assert pipeline.verify(df, **{**common, "l_model": "recursive", "c": 2}).ok
    assert not pipeline.verify(df, **{**common, "l_model": "recursive", "c": 0.5}).ok


def test_log_lines_without_tqdm(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = load_pipeline()
    pipeline.log("through tqdm")
    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed
    pipeline.log("printed")
    assert capsys.readouterr().err == "pipeline: through tqdm\npipeline: printed\n"
