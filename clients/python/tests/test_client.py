"""Every call of the synchronous client against a real deid."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import ACME_KEY, ADULT, ADULT_QIS, REPO, GLOBEX_KEY, Server, adult_job, long_job
from deid_client import (
    Attribute,
    Client,
    ConflictError,
    Dataset,
    DistinctLDiversity,
    HierarchyTable,
    Job,
    JobEvent,
    JobSpec,
    KAnonymity,
    NotFoundError,
    Plan,
    Quality,
    Report,
    ValidationError,
    WaitTimeoutError,
    interval,
    masking,
    order,
    suppression,
)


def test_service_endpoints(client: Client) -> None:
    assert client.health().status == "ok"
    ready = client.ready()
    assert ready.status == "ready" and ready.database == "sqlite"
    assert "deid_http_requests_total" in client.metrics()
    doc = yaml.safe_load(client.openapi())
    assert doc["openapi"].startswith("3.") and "/v1/jobs" in doc["paths"]


# ------------------------------------------------------------------ datasets

SMALL = "age,zip,disease\n34,81667,flu\n45,81675,asthma\n34,81667,ulcer\n"


def test_upload_from_path_file_objects_and_bytes(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "small.csv"
    path.write_text(SMALL)
    from_path = client.upload_dataset(path)
    assert from_path.name == "small" and from_path.rows == 3 and from_path.delimiter == ","
    assert [c.name for c in from_path.columns] == ["age", "zip", "disease"]
    assert from_path.column("age").detected_type == "integer"
    assert from_path.column("zip").distinct_count == 2
    assert from_path.size_bytes == len(SMALL)
    assert from_path.created_at.tzinfo is not None

    with open(path, "rb") as f:
        binary = client.upload_dataset(f, name="binary")
    assert binary.name == "binary" and binary.rows == 3

    text = client.upload_dataset(io.StringIO(SMALL.replace(",", ";")), name="text")
    assert text.delimiter == ";" and text.rows == 3

    raw = client.upload_dataset(SMALL.encode(), name="raw", delimiter=",", header=True)
    assert raw.rows == 3 and raw.header is True

    no_header = client.upload_dataset(b"1,2\n3,4\n", name="noheader", header=False)
    assert no_header.header is False and no_header.rows == 2


def test_upload_streams_a_large_file(client: Client) -> None:
    """adult.csv (2.5 MB) is sent in chunks: the stored size is the file's."""
    ds = client.upload_dataset(ADULT / "adult.csv")
    assert ds.rows == 30162 and ds.size_bytes == (ADULT / "adult.csv").stat().st_size
    assert ds.delimiter == ";"
    client.delete_dataset(ds.id)


def test_list_get_delete_datasets(client: Client) -> None:
    ids = [client.upload_dataset(SMALL.encode(), name=f"page-{i}").id for i in range(3)]
    page = client.list_datasets(limit=2)
    assert len(page.items) == 2 and page.next_cursor
    assert [d.id for d in page.items] == ids[::-1][:2]  # newest first
    second = client.list_datasets(limit=2, cursor=page.next_cursor)
    assert second.items[0].id == ids[0]
    every = [d.id for d in client.iter_datasets(page_size=2)]
    assert set(ids) <= set(every) and len(every) == len(set(every))

    got = client.get_dataset(ids[1])
    assert isinstance(got, Dataset) and got.name == "page-1" and got.raw["id"] == ids[1]
    client.delete_dataset(ids[1])
    with pytest.raises(NotFoundError) as e:
        client.get_dataset(ids[1])
    assert e.value.code == "dataset_not_found" and e.value.status == 404
    assert ids[1] not in [d.id for d in client.iter_datasets()]


def test_dataframe_upload_and_result_round_trip(client: Client) -> None:
    df = pd.DataFrame(
        {
            "age": [34, 45, 34, 45, 52, 52, 34, 45],
            "sex": ["F", "M", "F", "M", "F", "F", "F", "M"],
            "city": ["Köln, Nord", "Bonn", "Köln, Nord", "Bonn", 'Essen "Süd"', 'Essen "Süd"', "Köln, Nord", "Bonn"],
            "disease": ["flu", "asthma", "ulcer", "flu", "flu", "asthma", "asthma", "ulcer"],
        }
    )
    ds = client.upload_dataset(df, name="frame")
    assert ds.rows == 8 and [c.name for c in ds.columns] == list(df.columns)
    assert ds.column("city").distinct_count == 3  # quoting survived the CSV
    job = client.submit_job(
        JobSpec(
            ds.id,
            {
                "age": Attribute.quasi_identifying(interval(10)),
                "sex": Attribute.quasi_identifying(suppression()),
                "city": Attribute.quasi_identifying(suppression()),
                "disease": Attribute.insensitive(),
            },
            [KAnonymity(2)],
            time_limit="10s",
        )
    )
    job = client.wait(job, progress=False)
    assert job.status == "succeeded"
    out = client.result_frame(job.id)
    assert list(out.columns) == list(df.columns) and len(out) == 8
    # Insensitive values come back unchanged, as text, in the same order.
    assert out["disease"].tolist() == df["disease"].tolist()
    report = client.get_result(job.id)
    if report.transformation["city"] == 0:
        assert sorted(set(out["city"])) == sorted(set(df["city"]) | ({"*"} if report.suppressed_rows else set()))
    # Every class of the output has at least 2 records.
    assert out.groupby(["age", "sex", "city"]).size().min() >= 2


# ------------------------------------------------------------------ hierarchies


def test_hierarchies_from_path_frame_rows_and_builders(client: Client, patients: Dataset) -> None:
    ds = client.upload_dataset(ADULT / "adult.csv", name="adult-h")
    h = client.put_hierarchy(ds.id, "age", ADULT / "adult_hierarchy_age.csv")
    assert (h.column, h.kind, h.levels, h.rows) == ("age", "csv", 5, 100)

    sex = pd.read_csv(ADULT / "adult_hierarchy_sex.csv", sep=";", header=None, dtype=str)
    hs = client.put_hierarchy(ds.id, "sex", sex)
    assert (hs.kind, hs.levels, hs.rows) == ("csv", 2, 2)
    hr = client.put_hierarchy(ds.id, "race", [["White", "*"], ["Black", "*"], ["Asian-Pac-Islander", "*"],
                                              ["Amer-Indian-Eskimo", "*"], ["Other", "*"]])
    assert hr.rows == 5
    with open(ADULT / "adult_hierarchy_marital-status.csv", "rb") as f:
        hm = client.put_hierarchy(ds.id, "marital-status", f)
    assert (hm.kind, hm.levels, hm.rows) == ("csv", 3, 7)
    spec = order([3], order="lexicographic")
    hb = client.put_hierarchy(ds.id, "education", spec)
    assert hb.kind == "builder" and hb.rows == 16

    got = client.get_dataset(ds.id)
    assert got.hierarchies == {"age": 5, "sex": 2, "race": 2, "marital-status": 3, "education": hb.levels}
    assert got.hierarchy_kinds == {"age": "csv", "sex": "csv", "race": "csv", "marital-status": "csv", "education": "builder"}

    table = client.get_hierarchy(ds.id, "age")
    assert isinstance(table, HierarchyTable) and table.kind == "csv" and table.levels == 5
    assert table.rows[0] == ["1", "0-4", "0-9", "0-19", "*"]
    csv_text = client.get_hierarchy_csv(ds.id, "age")
    assert csv_text.splitlines()[0] == "1;0-4;0-9;0-19;*"
    frame = client.get_hierarchy_frame(ds.id, "sex")
    assert frame.shape == (2, 2) and set(frame["level0"]) == {"Male", "Female"}
    built = client.get_hierarchy(ds.id, "education")
    assert built.kind == "builder" and built.spec is not None and built.spec["type"] == "order"
    assert len(built.rows) == 16

    with pytest.raises(NotFoundError) as e:
        client.get_hierarchy(ds.id, "occupation")
    assert e.value.code == "hierarchy_not_found"
    client.delete_dataset(ds.id)


def test_hierarchy_previews(client: Client, patients: Dataset) -> None:
    spec = interval(10, levels=[2], top_coding=80)
    p = client.preview_hierarchy(patients.id, "age", spec)
    assert p.kind == "builder" and p.levels == 4 and p.total_rows == 73 and len(p.rows) == 73
    assert p.rows[0] == ["18", "[10, 20[", "[0, 20[", "*"]
    assert p.spec is not None and p.spec["top_coding"] == 80
    assert p.shares is not None and p.shares[0][-1] == 1.0
    cut = client.preview_hierarchy(patients.id, "age", spec, limit=3)
    assert len(cut.rows) == 3 and cut.total_rows == 73
    text = client.preview_hierarchy_csv(patients.id, "age", spec, limit=2)
    assert text.splitlines() == ["18;[10, 20[;[0, 20[;*", "19;[10, 20[;[0, 20[;*"]
    tabbed = client.preview_hierarchy_csv(patients.id, "zip", masking(), limit=1, delimiter="\t")
    first = tabbed.splitlines()[0].split("\t")
    assert len(first[0]) == 5 and first[1] == first[0][:4] + "*" and first[-1] == "*****"  # 10003 → 1000* → … → *****
    # Nothing was stored.
    assert client.get_dataset(patients.id).hierarchies == {}


# ------------------------------------------------------------------ jobs


def test_job_from_dict_and_from_builders_agree(client: Client, adult: Dataset) -> None:
    from_dict = client.submit_job(adult_job(adult.id))
    assert isinstance(from_dict, Job) and from_dict.dataset_id == adult.id
    assert from_dict.status in ("queued", "running")
    assert from_dict.links.self_ == f"/v1/jobs/{from_dict.id}"
    assert from_dict.links.result_csv == f"/v1/jobs/{from_dict.id}/result.csv"
    spec = JobSpec(
        dataset_id=adult.id,
        attributes={**{c: Attribute.quasi_identifying() for c in ADULT_QIS}, "salary-class": Attribute.sensitive()},
        privacy=[KAnonymity(5), DistinctLDiversity("salary-class", 2)],
        suppression_limit=0.02,
        quality=Quality("loss"),
        time_limit="30s",
    )
    from_builders = client.submit_job(spec)
    a = client.wait(from_dict, progress=False)
    b = client.wait(from_builders, progress=False)
    assert a.status == b.status == "succeeded"
    assert a.best is not None and b.best is not None
    # The README's walkthrough result.
    assert a.best.transformation == b.best.transformation == {"age": 4, "education": 1, "marital-status": 1, "race": 0, "sex": 0}
    assert a.best.suppressed_rows == 335
    assert a.finished_at is not None and a.started_at is not None and a.finished_at >= a.started_at


def test_plan(client: Client, adult: Dataset, tmp_path: Path) -> None:
    """The plan of an anonymize job is typed; written as served, ``deid apply`` turns adult into
    the job's CSV byte for byte; a risk job has none (409)."""
    job = client.wait(client.submit_job(adult_job(adult.id)), progress=False)
    plan = client.get_plan(job.id)
    assert isinstance(plan, Plan)
    assert (plan.format, plan.version, plan.delimiter) == ("deid-plan", 1, ";")
    assert sorted(plan.quasi_identifiers) == sorted(ADULT_QIS) and len(plan.steps) == 1
    assert [c.role for c in plan.columns if c.name in ADULT_QIS] == ["quasi_identifying"] * len(ADULT_QIS)
    assert plan.suppression.mode == "mask" and plan.suppressed
    assert all(len(c.values) == len(ADULT_QIS) for c in plan.classes)
    assert plan.audit.seed == 0 and len(plan.digest) == 64
    assert client.get_job(job.id).links.plan == f"/v1/jobs/{job.id}/plan"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.raw))
    binary = os.environ.get("DEID_BIN", str(REPO / "target" / "release" / "deid"))
    out = tmp_path / "applied.csv"
    subprocess.run([binary, "apply", "--plan", str(path), "--input", str(ADULT / "adult.csv"), "--output", str(out)], check=True)
    expected = io.BytesIO()
    client.download_result(job.id, expected)
    assert out.read_bytes() == expected.getvalue()
    risk = client.submit_job(JobSpec(dataset_id=adult.id, task="risk", attributes={"age": Attribute("quasi_identifying")}))
    client.wait(risk, progress=False)
    with pytest.raises(ConflictError):
        client.get_plan(risk.id)


def test_list_and_get_jobs(client: Client, adult: Dataset) -> None:
    job = client.wait(client.submit_job(adult_job(adult.id)), progress=False)
    page = client.list_jobs(limit=1)
    assert len(page.items) == 1 and page.next_cursor
    succeeded = list(client.iter_jobs(status="succeeded", page_size=2))
    assert job.id in [j.id for j in succeeded] and all(j.status == "succeeded" for j in succeeded)
    assert job.id not in [j.id for j in client.list_jobs(status="failed").items]
    got = client.get_job(job.id)
    assert got.status == "succeeded" and got.progress.phase == "finished" and got.progress.explored_share == 1.0
    assert got.attempts == 1 and got.max_attempts >= 1 and got.cancel_requested is False and got.error is None


def test_typed_report_and_result_csv(client: Client, adult: Dataset, tmp_path: Path) -> None:
    job = client.wait(client.submit_job(adult_job(adult.id)), progress=False)
    report = client.get_result(job.id)
    assert isinstance(report, Report)
    assert report.anonymous is True and report.job_id == job.id and report.dataset_id == adult.id
    assert report.rows == 30162 and report.suppressed_rows == 335
    assert report.optimal_proven is True and report.stop == "completed"
    assert report.quality_model == "loss" and report.quality is not None
    assert report.quality["loss"].score == pytest.approx(report.score)
    assert report.quality["loss"].utility == pytest.approx(report.utility)
    assert report.suppression is not None
    assert (report.suppression.mode, report.suppression.marker) == ("mask", "*")
    assert report.suppression.block_satisfies_models is True
    assert report.risk.input is not None and report.risk.output is not None
    assert report.risk.output["min_class_size"] >= 5
    assert report.trace and report.trace[-1].utility == pytest.approx(report.utility)
    assert report.trace[-1].strategy is not None and len(report.trace[-1].levels or []) == len(ADULT_QIS)
    assert report.timings is not None and report.timings.search_ms is not None
    assert report.time_limit_ms == 30000 and report.warnings == []

    path = tmp_path / "out" / "adult.csv"
    path.parent.mkdir()
    client.download_result(job.id, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "sex;age;race;marital-status;education;native-country;workclass;occupation;salary-class"
    assert len(lines) == 30163
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    buf = io.BytesIO()
    client.download_result(job.id, buf)
    assert buf.getvalue() == path.read_bytes()

    df = client.result_frame(job.id)
    assert len(df) == 30162 and list(df.columns) == lines[0].split(";")
    masked = df[(df[ADULT_QIS] == "*").all(axis=1)]
    assert len(masked) == 335 and (masked["salary-class"] == "*").all()


def test_events_of_a_finished_job_replay_everything(client: Client, adult: Dataset) -> None:
    job = client.wait(client.submit_job(adult_job(adult.id)), progress=False)
    events = list(client.events(job.id))
    kinds = [e.event for e in events]
    assert kinds[0] == "progress" and kinds[-1] == "done"
    improvements = [e for e in events if e.event == "improvement"]
    report = client.get_result(job.id)
    assert len(improvements) == len(report.trace)
    assert [e.id for e in improvements] == list(range(1, len(improvements) + 1))
    assert improvements[-1].best is not None and improvements[-1].best.utility == pytest.approx(report.utility)
    assert events[-1].job is not None and events[-1].job.status == "succeeded" and events[-1].terminal
    # Resuming after the second improvement replays only the later ones.
    later = [e for e in client.events(job.id, last_event_id=2) if e.event == "improvement"]
    assert [e.id for e in later] == list(range(3, len(improvements) + 1))


def test_wait_follows_a_running_job(client: Client, patients: Dataset) -> None:
    job = client.submit_job(long_job(patients, "3s"))
    seen: list[JobEvent] = []
    bar = io.StringIO()
    started = time.monotonic()
    done = client.wait(job, progress=True, progress_file=bar, on_event=seen.append)
    elapsed = time.monotonic() - started
    assert done.status == "succeeded" and done.finished
    assert elapsed >= 2.0  # it really waited for the search
    running = [e for e in seen if e.event == "progress" and e.job is not None and e.job.status == "running"]
    assert len(running) >= 3  # about four progress events a second
    assert any(e.event == "improvement" for e in seen) and seen[-1].event == "done"
    assert f"job {job.id[:13]}" in bar.getvalue() and "utility=" in bar.getvalue()
    assert client.get_result(job.id).stop == "time-limit"


def test_a_failed_job_carries_the_api_error(client: Client, adult: Dataset) -> None:
    from deid_client import JobFailedError

    impossible = adult_job(
        adult.id,
        privacy=["k-anonymity(k=5)", "recursive-l-diversity(attribute=salary-class,c=2,l=2)"],
        suppression_limit=0,
    )
    job = client.submit_job(impossible)
    failed = client.wait(job, progress=False)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "no_solution" and failed.error.details["optimal_proven"] is True
    with pytest.raises(JobFailedError) as e:
        client.wait(job, progress=False, raise_on_failure=True)
    assert e.value.code == "no_solution" and e.value.job.id == job.id


def test_wait_by_polling(client: Client, patients: Dataset) -> None:
    job = client.submit_job(long_job(patients, "1500ms"))
    polls: list[JobEvent] = []
    done = client.wait(job.id, events=False, poll_interval=0.2, progress=False, on_event=polls.append)
    assert done.status == "succeeded"
    assert len(polls) >= 3 and all(p.event == "progress" and p.job is not None for p in polls)
    assert polls[-1].job is not None and polls[-1].job.status == "succeeded"


def test_wait_falls_back_to_polling_when_the_stream_breaks(server: Server, patients: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    from deid_client import DeidConnectionError

    with Client(server.url, api_key=ACME_KEY) as c:
        job = c.submit_job(long_job(patients, "1s"))
        opened: list[str] = []

        def broken_events(job_id: str, **_: object) -> object:
            opened.append(job_id)
            raise DeidConnectionError("stream refused by a proxy")
            yield  # pragma: no cover

        monkeypatch.setattr(c, "events", broken_events)
        done = c.wait(job, poll_interval=0.2, progress=False)
        assert opened == [job.id] and done.status == "succeeded"


def test_wait_timeout_and_cancel(client: Client, patients: Dataset) -> None:
    job = client.submit_job(long_job(patients, "120s"))
    with pytest.raises(WaitTimeoutError) as e:
        client.wait(job, timeout=1.5, progress=False)
    assert e.value.job.id == job.id and e.value.job.status in ("queued", "running")
    cancelled = client.cancel_job(job.id)
    assert cancelled.cancel_requested is True
    final = client.wait(job, progress=False, timeout=30)
    assert final.status == "cancelled"
    report = client.get_result(job.id)
    assert report.stop == "cancelled"
    with pytest.raises(ConflictError) as c:
        client.cancel_job(job.id)
    assert c.value.code == "job_finished" and c.value.status == 409


def test_cancel_while_waiting_in_another_thread(client: Client, patients: Dataset) -> None:
    job = client.submit_job(long_job(patients, "120s"))
    result: dict[str, Job] = {}
    t = threading.Thread(target=lambda: result.setdefault("job", client.wait(job, progress=False)))
    t.start()
    time.sleep(1.0)
    client.cancel_job(job.id)
    t.join(timeout=30)
    assert not t.is_alive() and result["job"].status == "cancelled"


def test_delete_a_dataset_in_use_is_a_conflict(client: Client, patients_csv: Path) -> None:
    ds = client.upload_dataset(patients_csv)
    job = client.submit_job(long_job(ds, "60s"))
    try:
        with pytest.raises(ConflictError) as e:
            client.delete_dataset(ds.id)
        assert e.value.code == "dataset_in_use"
    finally:
        client.cancel_job(job.id)
        client.wait(job, progress=False, timeout=30)
    client.delete_dataset(ds.id)


def test_tenants_do_not_see_each_other(server: Server, adult: Dataset) -> None:
    with Client(server.url, api_key=GLOBEX_KEY) as globex:
        with pytest.raises(NotFoundError):
            globex.get_dataset(adult.id)
        assert adult.id not in [d.id for d in globex.iter_datasets()]


def test_api_key_from_the_environment(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_API_KEY", ACME_KEY)
    monkeypatch.setenv("DEID_URL", server.url)
    with Client() as c:
        assert c.base_url == server.url
        assert c.list_datasets(limit=1).items  # acme's datasets


def test_risk_analysis_of_a_dataset_as_it_is(client: Client, adult: Dataset) -> None:
    risk = client.analyse_risk(adult.id, ["age", "sex", "race"], population={"region": "usa"})
    report = risk["input"]
    # Prosecutor statistics over the classes of (age, sex, race), checked from the CSV itself.
    rows = (ADULT / "adult.csv").read_text().splitlines()
    header = rows[0].split(";")
    cols = [header.index(c) for c in ("age", "sex", "race")]
    sizes: dict[tuple[str, ...], int] = {}
    for line in rows[1:]:
        f = line.split(";")
        key = tuple(f[c] for c in cols)
        sizes[key] = sizes.get(key, 0) + 1
    assert report["classes"] == len(sizes)
    assert report["min_class_size"] == min(sizes.values())
    assert report["sample_uniques"] == sum(1 for s in sizes.values() if s == 1)
    assert "population_uniqueness" in report
    # Every combination of the three quasi-identifiers, on request as by default (cheap here).
    combos = client.analyse_risk(adult.id, ["age", "sex", "race"], qi_combinations="all")
    assert len(combos["input"]["quasi_identifiers"]) == 7
    with pytest.raises(ValidationError):
        client.analyse_risk(adult.id, ["age"], qi_combinations="some")
    # Bad input: a 422 naming the field; an unknown dataset: 404.
    with pytest.raises(ValidationError) as e:
        client.analyse_risk(adult.id, ["age"], population={"size": 1})
    assert e.value.field == "population.size"
    with pytest.raises(NotFoundError):
        client.analyse_risk("00000000-0000-7000-8000-000000000000", ["age"])


def test_evaluate_and_risk_tasks(client: Client, adult: Dataset) -> None:
    # A search, then the evaluation of its transformation: the same scores and the same CSV.
    found_job = client.wait(client.submit_job(adult_job(adult.id, time_limit="3s")), progress=False)
    assert found_job.task == "anonymize" and found_job.status == "succeeded"
    found = client.get_result(found_job.id)
    spec = JobSpec(
        dataset_id=adult.id,
        attributes={**{c: Attribute.quasi_identifying() for c in ADULT_QIS}, "salary-class": Attribute.sensitive()},
        privacy=["k-anonymity(k=5)", DistinctLDiversity("salary-class", 2)],
        suppression_limit=0.02,
        quality="loss",
        task="evaluate",
        levels=found.transformation,
    )
    job = client.wait(client.submit_job(spec), progress=False)
    assert job.task == "evaluate" and job.status == "succeeded"
    evaluation = client.get_evaluation(job.id)
    assert evaluation.anonymous
    assert (evaluation.transformation, evaluation.score, evaluation.suppressed_rows) == (
        found.transformation,
        found.score,
        found.suppressed_rows,
    )
    assert b"".join(client.iter_result_csv(job.id)) == b"".join(client.iter_result_csv(found_job.id))
    # The three results share one operation: the wrong reader names the right one.
    with pytest.raises(TypeError, match="get_evaluation"):
        client.get_result(job.id)
    # Not anonymous: the job fails with not_anonymous and keeps its evaluation; no CSV.
    spec.levels = {}
    failed = client.wait(client.submit_job(spec), progress=False)
    assert failed.status == "failed" and failed.error is not None and failed.error.code == "not_anonymous"
    assert not client.get_evaluation(failed.id).anonymous
    with pytest.raises(ConflictError):
        b"".join(client.iter_result_csv(failed.id))

    # A risk-analysis job answers what analyse_risk answers.
    risk_spec = JobSpec(
        dataset_id=adult.id,
        attributes={c: Attribute.quasi_identifying() for c in ("age", "sex", "race")},
        task="risk",
        population={"region": "usa"},
    )
    risk_job = client.wait(client.submit_job(risk_spec), progress=False)
    assert risk_job.task == "risk" and risk_job.status == "succeeded"
    analysis = client.get_risk_analysis(risk_job.id)
    assert analysis.raw == client.analyse_risk(adult.id, ["age", "sex", "race"], population={"region": "usa"})
    with pytest.raises(TypeError, match="get_risk_analysis"):
        client.get_evaluation(risk_job.id)
    with pytest.raises(ValidationError) as e:
        client.submit_job(JobSpec(dataset_id=adult.id, attributes=risk_spec.attributes, task="evaluate"))
    assert e.value.field == "levels"


def test_verify_job(client: Client, adult: Dataset, tmp_path: Path) -> None:
    """The job's output passes; a row shown with its input values fails k-anonymity (a verdict,
    not an error); released data without the job's columns are a ValidationError."""
    job = client.wait(client.submit_job(adult_job(adult.id, time_limit="3s")), progress=False)
    out = tmp_path / "out.csv"
    client.download_result(job.id, out)
    verdict = client.verify_job(job.id, out)
    assert verdict.passed and verdict.released_records == 30162
    assert [m.model for m in verdict.models] == ["k-anonymity(k=5)", "distinct-l-diversity(attribute=salary-class,l=2)"]
    assert sum(b.records for b in verdict.class_sizes) + verdict.suppressed_records == 30162
    rows = out.read_text().splitlines()
    rows[1] = (ADULT / "adult.csv").read_text().splitlines()[1]
    tampered = ("\n".join(rows) + "\n").encode()
    failed = client.verify_job(job.id, tampered, show_values=True)
    assert not failed.passed
    k = failed.models[0]
    assert not k.passed and k.violating_classes >= 1 and k.violations[0].values is not None
    assert client.verify_job(job.id, tampered).models[0].violations[0].values is None
    with pytest.raises(ValidationError) as e:
        client.verify_job(job.id, b"sex;age\nMale;39\n")
    assert e.value.code == "invalid_csv" and e.value.details["column"] == "education"


def test_estimated_k_map(client: Client, adult: Dataset) -> None:
    from deid_client import KMap

    spec = adult_job(adult.id, privacy=[KMap(1000, 0.01).to_json()], time_limit="5s")
    with pytest.raises(ValidationError) as e:
        client.submit_job(spec)
    assert e.value.field == "population"
    spec["population"] = {"region": "usa"}
    job = client.wait(client.submit_job(spec), progress=False)
    assert job.status == "succeeded"
    assert any("holds as 3-anonymity" in w for w in client.get_result(job.id).warnings)
    assert str(KMap(5, 0.05, "zero-truncated-poisson")) == "k-map(k=5,alpha=0.05,estimator=zero-truncated-poisson)"


def test_delta_presence_and_k_map_with_a_research_subset(client: Client, adult: Dataset) -> None:
    from deid_client import DeltaPresence, KMap

    spec = adult_job(
        adult.id,
        privacy=[DeltaPresence(0.0, 0.6).to_json(), str(KMap(5))],
        time_limit="10s",
    )
    with pytest.raises(ValidationError) as e:
        client.submit_job(spec)
    assert e.value.field == "research_subset"
    rows = list(range(1, adult.rows + 1, 3))
    spec["research_subset"] = {"rows": rows}
    job = client.wait(client.submit_job(spec), progress=False)
    assert job.status == "succeeded"
    report = client.get_result(job.id)
    assert report.anonymous and report.rows == len(rows)
    assert report.research_subset is not None
    assert report.research_subset.records == len(rows)
    assert report.research_subset.population_records == adult.rows
    assert report.risk.output is not None
    assert report.risk.output["attacker_models"]["population_classes"] == "population_table"
    buf = io.BytesIO()
    client.download_result(job.id, buf)
    assert len(buf.getvalue().decode().splitlines()) == len(rows) + 1
    spec["research_subset"] = {"rows": [0]}
    with pytest.raises(ValidationError) as e:
        client.submit_job(spec)
    assert e.value.field == "research_subset.rows[0]"
    assert str(DeltaPresence(0.1, 0.5)) == "delta-presence(delta_min=0.1,delta_max=0.5)"
    assert str(KMap(5)) == "k-map(k=5)"
    from deid_client import DifferentialPrivacy

    assert str(DifferentialPrivacy(1, 1e-06, steps=50)) == "differential-privacy(epsilon=1,delta=1e-06,steps=50)"
    assert DifferentialPrivacy(0.5, 1e-6).to_json() == {"model": "differential-privacy", "epsilon": 0.5, "delta": 1e-6}


def test_answers_are_decoded_with_the_collector_paused_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import httpx

    from deid_client._core import json_body

    seen = []
    original = json.loads

    def loads(data: bytes) -> object:
        seen.append(gc.isenabled())
        return original(data)

    monkeypatch.setattr(json, "loads", loads)
    body = httpx.Response(200, content=b'{"a": [1, {"b": 2}]}')
    try:
        assert gc.isenabled()
        assert json_body(body) == {"a": [1, {"b": 2}]}
        assert seen == [False] and gc.isenabled()  # paused while decoding, then restored
        gc.disable()
        assert json_body(body) == {"a": [1, {"b": 2}]} and not gc.isenabled()  # left as it was
    finally:
        gc.enable()
