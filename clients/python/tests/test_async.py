"""The asynchronous client against a real deid: the same calls, awaited."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import httpx
import pandas as pd
import pytest

from conftest import ACME_KEY, ADULT, ADULT_QIS, Server, adult_job, long_job
from deid_client import (
    AsyncClient,
    Attribute,
    ConflictError,
    Dataset,
    DistinctLDiversity,
    JobEvent,
    JobSpec,
    KAnonymity,
    NotFoundError,
    ServiceUnavailableError,
    UnauthorizedError,
    ValidationError,
    interval,
)

pytestmark = pytest.mark.asyncio


async def test_whole_flow(server: Server, tmp_path: Path) -> None:
    async with AsyncClient(server.url, api_key=ACME_KEY) as c:
        assert (await c.health()).status == "ok"
        assert (await c.ready()).database == "sqlite"
        assert "deid_jobs" in await c.metrics()
        assert "openapi:" in await c.openapi()

        ds = await c.upload_dataset(ADULT / "adult.csv", name="adult-async")
        assert ds.rows == 30162 and ds.delimiter == ";"
        for col in ADULT_QIS:
            h = await c.put_hierarchy(ds.id, col, ADULT / f"adult_hierarchy_{col}.csv")
            assert h.kind == "csv"
        assert (await c.get_dataset(ds.id)).hierarchies["age"] == 5
        risk = await c.analyse_risk(ds.id, ["age", "sex"], risk_threshold=0.5)
        assert risk["input"]["risk_threshold"] == 0.5 and risk["input"]["classes"] > 1
        assert ds.id in [d.id async for d in c.iter_datasets(page_size=1)]
        assert (await c.list_datasets(limit=1)).items

        table = await c.get_hierarchy(ds.id, "age")
        assert table.levels == 5
        assert (await c.get_hierarchy_csv(ds.id, "sex")).splitlines()[0].endswith(";*")
        assert (await c.get_hierarchy_frame(ds.id, "race")).shape == (5, 2)
        preview = await c.preview_hierarchy(ds.id, "age", interval(10), limit=2)
        assert len(preview.rows) == 2 and preview.total_rows == 72
        assert len((await c.preview_hierarchy_csv(ds.id, "age", interval(10), limit=2)).splitlines()) == 2

        spec = JobSpec(
            ds.id,
            {**{q: Attribute.quasi_identifying() for q in ADULT_QIS}, "salary-class": Attribute.sensitive()},
            [KAnonymity(5), DistinctLDiversity("salary-class", 2)],
            suppression_limit=0.02,
            time_limit=30_000,
        )
        job = await c.submit_job(spec)
        seen: list[JobEvent] = []
        done = await c.wait(job, progress=False, on_event=seen.append)
        assert done.status == "succeeded" and seen[-1].event == "done"
        assert done.best is not None and done.best.suppressed_rows == 335
        assert job.id in [j.id async for j in c.iter_jobs(status="succeeded")]
        assert (await c.get_job(job.id)).status == "succeeded"
        assert (await c.list_jobs(limit=1)).items

        events = [e async for e in c.events(job.id)]
        assert events[0].event == "progress" and events[-1].event == "done"

        report = await c.get_result(job.id)
        assert report.anonymous and report.suppressed_rows == 335
        out = tmp_path / "adult.csv"
        await c.download_result(job.id, out)
        buf = io.BytesIO()
        await c.download_result(job.id, buf)
        assert buf.getvalue() == out.read_bytes() and len(out.read_text().splitlines()) == 30163
        df = await c.result_frame(job.id)
        assert len(df) == 30162
        verdict = await c.verify_job(job.id, out)
        assert verdict.passed and verdict.models[0].model == "k-anonymity(k=5)"

        await c.delete_dataset(ds.id)
        with pytest.raises(NotFoundError):
            await c.get_dataset(ds.id)


async def test_dataframe_round_trip(server: Server) -> None:
    df = pd.DataFrame({"age": [30, 31, 32, 33, 40, 41], "disease": ["a", "b", "a", "b", "c", "a"]})
    async with AsyncClient(server.url, api_key=ACME_KEY) as c:
        ds = await c.upload_dataset(df)
        assert ds.rows == 6 and ds.name is not None
        job = await c.submit_job({"dataset_id": ds.id, "attributes": {"age": {"type": "quasi_identifying", "hierarchy": interval(10)}},
                                  "privacy": ["k-anonymity(k=2)"]})
        await c.wait(job, progress=False)
        out = await c.result_frame(job.id)
        assert out["disease"].tolist() == df["disease"].tolist()
        assert out.groupby("age").size().min() >= 2


async def test_wait_on_a_running_job_and_cancel(server: Server, patients: Dataset) -> None:
    async with AsyncClient(server.url, api_key=ACME_KEY) as c:
        job = await c.submit_job(long_job(patients, "120s"))
        waiter = asyncio.create_task(c.wait(job, progress=False))
        await asyncio.sleep(1.0)
        assert not waiter.done()
        running = await c.get_job(job.id)
        assert running.status == "running" and running.progress.checks > 0
        await c.cancel_job(job.id)
        final = await asyncio.wait_for(waiter, 30)
        assert final.status == "cancelled"
        with pytest.raises(ConflictError):
            await c.cancel_job(job.id)


async def test_errors(server: Server, adult: Dataset) -> None:
    async with AsyncClient(server.url, api_key=ACME_KEY) as c:
        with pytest.raises(ValidationError) as e:
            await c.submit_job(adult_job(adult.id, privacy=[{"model": "k-anonymity", "k": 0}]))
        assert e.value.field == "privacy[0].k"
        with pytest.raises(NotFoundError) as nf:
            await c.get_job("nope")
        assert nf.value.code == "job_not_found"
        with pytest.raises(NotFoundError):
            [e async for e in c.events("nope")]
    async with AsyncClient(server.url, api_key="wrong-wrong-wrong-wrong") as bad:
        with pytest.raises(UnauthorizedError):
            await bad.list_jobs()


async def test_async_retries() -> None:
    seen: list[httpx.Request] = []
    answers = [
        httpx.Response(503, headers={"Retry-After": "3"}, json={"error": {"code": "not_ready", "message": "", "details": {}}}),
        httpx.Response(200, json={"status": "ok"}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    sleeps: list[float] = []

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)

    async with AsyncClient("http://deid.test", transport=httpx.MockTransport(handler)) as c:
        c._sleep = fake_sleep
        assert (await c.health()).status == "ok"
    assert len(seen) == 2 and sleeps == [3.0]

    answers[:] = [httpx.Response(503, json={"error": {"code": "not_ready", "message": "", "details": {}}})]
    async with AsyncClient("http://deid.test", transport=httpx.MockTransport(handler)) as c:
        c._sleep = fake_sleep
        with pytest.raises(ServiceUnavailableError):
            await c.submit_job({"dataset_id": "x", "attributes": {}, "privacy": []})
