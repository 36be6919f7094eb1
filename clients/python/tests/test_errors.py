"""Error mapping (against the real service), retries, backoff and timeouts."""

from __future__ import annotations

import io
import socket
import threading
import time
from typing import Iterator

import httpx
import pytest

from conftest import ACME_KEY, Server, adult_job
from deid_client import (
    ApiError,
    BadRequestError,
    Client,
    Dataset,
    DeidConnectionError,
    DeidTimeoutError,
    NotFoundError,
    RateLimitedError,
    ServiceUnavailableError,
    UnauthorizedError,
    ValidationError,
    interval,
)

# ------------------------------------------------------------------ the real service's errors


def test_422_names_the_field(client: Client, adult: Dataset) -> None:
    with pytest.raises(ValidationError) as e:
        client.submit_job(adult_job(adult.id, privacy=["k-anonymity(k=0)"]))
    err = e.value
    assert err.status == 422 and err.code == "invalid_spec"
    assert err.field == "privacy[0].k" and err.details["field"] == "privacy[0].k"
    assert "k" in err.message and isinstance(err, ApiError)

    with pytest.raises(ValidationError) as e:
        client.submit_job(adult_job(adult.id, time_limit="soon"))
    assert e.value.field == "time_limit"

    with pytest.raises(ValidationError) as e:
        client.submit_job(adult_job(adult.id, genetic={"elite_fraction": "much"}))
    assert e.value.field == "genetic.elite_fraction"


def test_422_of_a_hierarchy_preview_names_the_path_inside_the_spec(client: Client, adult: Dataset) -> None:
    spec = interval(intervals=[{"from": 0, "to": 50}, {"from": 40, "to": 100}])
    with pytest.raises(ValidationError) as e:
        client.preview_hierarchy(adult.id, "age", spec)
    assert e.value.code == "invalid_spec" and e.value.field == "intervals[1]"
    assert "overlaps" in e.value.message


def test_422_of_a_hierarchy_missing_values(client: Client, adult: Dataset) -> None:
    with pytest.raises(ValidationError) as e:
        client.put_hierarchy(adult.id, "sex", [["Male", "*"]])
    assert e.value.code == "hierarchy_missing_values"
    assert "Female" in str(e.value.details.get("missing"))


def test_404s(client: Client, adult: Dataset) -> None:
    cases = [
        (lambda: client.get_job("01a1ff3e-0000-7000-8000-000000000000"), "job_not_found"),
        (lambda: client.get_result("nope"), "job_not_found"),
        (lambda: client.get_dataset("nope"), "dataset_not_found"),
        (lambda: client.put_hierarchy(adult.id, "no-such-column", [["a", "*"]]), "column_not_found"),
        (lambda: list(client.events("nope")), "job_not_found"),
        (lambda: client.download_result("nope", io.BytesIO()), "job_not_found"),
    ]
    for call, code in cases:
        with pytest.raises(NotFoundError) as e:
            call()
        assert e.value.status == 404 and e.value.code == code, code


def test_401_without_or_with_a_wrong_key(server: Server) -> None:
    for key in (None, "not-the-right-key-at-all"):
        with Client(server.url, api_key=key or "") as c:
            with pytest.raises(UnauthorizedError) as e:
                c.list_datasets()
            assert e.value.status == 401 and e.value.code == "unauthorized"
            assert "API key" in e.value.message
            # Health needs no key.
            assert c.health().status == "ok"


def test_400_bad_query(client: Client) -> None:
    with pytest.raises(BadRequestError) as e:
        client.list_datasets(limit=1000)
    assert e.value.code == "invalid_query"


def test_409_result_of_a_running_job(client: Client, patients: Dataset) -> None:
    from conftest import long_job
    from deid_client import ConflictError

    job = client.submit_job(long_job(patients, "60s"))
    try:
        with pytest.raises(ConflictError) as e:
            client.get_result(job.id)
        assert e.value.code == "result_not_available"
    finally:
        client.cancel_job(job.id)
        client.wait(job, progress=False, timeout=30)


def test_429_queue_full_carries_retry_after_and_is_not_repeated(queue_full_server: Server) -> None:
    with Client(queue_full_server.url, api_key=ACME_KEY) as c:
        ds = c.upload_dataset(b"a,b\n1,2\n3,4\n")
        sleeps: list[float] = []
        c._sleep = sleeps.append
        with pytest.raises(RateLimitedError) as e:
            c.submit_job({"dataset_id": ds.id, "attributes": {"a": {"type": "quasi_identifying", "hierarchy": {"type": "suppression"}}},
                          "privacy": ["k-anonymity(k=2)"]})
        assert e.value.code == "queue_full" and e.value.status == 429
        assert e.value.retry_after == 10
        assert sleeps == []  # a submission is not idempotent: never repeated


# ------------------------------------------------------------------ retries (scripted answers)


def scripted(answers: list[httpx.Response | Exception], seen: list[httpx.Request]) -> httpx.MockTransport:
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler)


def error(status: int, code: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return httpx.Response(status, json={"error": {"code": code, "message": code, "details": {}}}, headers=headers)


OK_STATUS = httpx.Response(200, json={"status": "ok"})


def test_idempotent_calls_are_retried_on_503_and_429_honouring_retry_after() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([error(503, "request_timeout", "2"), error(429, "queue_full", "7"), error(503, "not_ready"), OK_STATUS], seen)
    with Client("http://deid.test", api_key="k" * 16, transport=transport, backoff=0.25) as c:
        sleeps: list[float] = []
        c._sleep = sleeps.append
        assert c.health().status == "ok"
    assert len(seen) == 4
    assert sleeps[:2] == [2.0, 7.0]
    assert 0.25 <= sleeps[2] <= 1.0  # no Retry-After: backoff 0.25 · 2² with jitter in [½, 1]
    assert seen[0].headers["authorization"] == "Bearer " + "k" * 16


def test_retries_give_up_after_max_retries() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([error(503, "not_ready", "1")] * 3, seen)
    with Client("http://deid.test", transport=transport, max_retries=2) as c:
        c._sleep = lambda s: None
        with pytest.raises(ServiceUnavailableError) as e:
            c.ready()
    assert len(seen) == 3 and e.value.code == "not_ready" and e.value.retry_after == 1


def test_retry_after_is_capped() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([error(503, "not_ready", "3600"), OK_STATUS], seen)
    with Client("http://deid.test", transport=transport, max_retry_after=5) as c:
        sleeps: list[float] = []
        c._sleep = sleeps.append
        c.health()
    assert sleeps == [5]


def test_non_idempotent_calls_are_not_retried() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([error(503, "request_timeout", "1"), httpx.ConnectError("refused")], seen)
    with Client("http://deid.test", transport=transport) as c:
        c._sleep = lambda s: pytest.fail("slept")
        with pytest.raises(ServiceUnavailableError):
            c.submit_job({"dataset_id": "x", "attributes": {}, "privacy": []})
        with pytest.raises(DeidConnectionError):
            c.upload_dataset(b"a\n1\n")
    assert [r.method for r in seen] == ["POST", "POST"]


def test_connection_errors_are_retried_for_idempotent_calls() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([httpx.ConnectError("refused"), httpx.RemoteProtocolError("closed"), OK_STATUS], seen)
    with Client("http://deid.test", transport=transport) as c:
        sleeps: list[float] = []
        c._sleep = sleeps.append
        assert c.health().status == "ok"
    assert len(seen) == 3 and len(sleeps) == 2


def test_put_hierarchy_is_retried_with_the_same_body() -> None:
    seen: list[httpx.Request] = []
    summary = httpx.Response(200, json={"column": "age", "kind": "csv", "levels": 2, "rows": 1})
    transport = scripted([error(503, "request_timeout", "0"), summary], seen)
    with Client("http://deid.test", transport=transport) as c:
        c._sleep = lambda s: None
        assert c.put_hierarchy("d", "age", [["1", "*"]]).levels == 2
    assert [r.read() for r in seen] == [b"1;*\n", b"1;*\n"]
    assert seen[1].url.params["delimiter"] == ";"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_service() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, max_retries=2, backoff=0.01) as c:
        sleeps: list[float] = []
        c._sleep = sleeps.append
        with pytest.raises(DeidConnectionError):
            c.list_jobs()
    assert len(sleeps) == 2


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conns.append(sock.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    t.join()
    for c in conns:
        c.close()
    sock.close()


def test_timeouts(silent_server: str) -> None:
    with Client(silent_server, timeout=0.3, max_retries=0) as c:
        started = time.monotonic()
        with pytest.raises(DeidTimeoutError):
            c.get_job("x")
        assert time.monotonic() - started < 5


def test_errors_without_the_api_shape() -> None:
    seen: list[httpx.Request] = []
    transport = scripted([httpx.Response(502, text="Bad Gateway from a proxy")], seen)
    with Client("http://deid.test", transport=transport, max_retries=0) as c:
        with pytest.raises(ApiError) as e:
            c.health()
    assert e.value.status == 502 and e.value.code == "http_502" and "proxy" in e.value.message
