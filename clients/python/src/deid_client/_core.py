"""What the synchronous and the asynchronous client share: configuration, retries, request
building and answer decoding.

Each API call is written once, as a generator that yields the HTTP request(s) it needs
(:class:`Call`) and receives the answers; ``Client`` and ``AsyncClient`` only differ in how they
send them (``httpx.Client`` or ``httpx.AsyncClient``).
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generator, Iterator, Mapping, Sequence, Union
from urllib.parse import quote

import httpx

from ._pandas import is_dataframe
from ._version import __version__
from .builders import HierarchySpec, JobSpec, to_json
from .errors import retry_after_seconds
from .types import (
    Best,
    Dataset,
    DatasetPage,
    Evaluation,
    HierarchySummary,
    HierarchyTable,
    Job,
    JobEvent,
    JobPage,
    Plan,
    Report,
    RiskAnalysis,
    Verification,
    Status,
    from_json,
)

DEFAULT_URL = "http://127.0.0.1:8080"
CHUNK = 1 << 20
#: The media type of a Parquet upload (a path ending in ``.parquet``).
PARQUET_TYPE = "application/vnd.apache.parquet"

PathLike = Union[str, "os.PathLike[str]"]
# What an upload accepts: a path, bytes, a file object (binary or text) or a pandas DataFrame.
CsvSource = Any
# What a hierarchy PUT accepts: a path, bytes, a DataFrame, rows (a list of lists), or a builder
# specification (a dict with "type").
HierarchyInput = Any

# Connection errors after which a request can be repeated without doing anything twice:
# nothing was sent or the connection broke before an answer.
RETRYABLE_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
RETRYABLE_STATUS = frozenset({429, 503})


@dataclass
class Call:
    """One HTTP request of an API call."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = True
    timeout: Any = None  # an httpx timeout; None: the client's


@dataclass
class Settings:
    base_url: str
    api_key: str | None
    timeout: httpx.Timeout
    upload_timeout: httpx.Timeout
    max_retries: int
    backoff: float
    max_backoff: float
    max_retry_after: float

    @classmethod
    def make(
        cls,
        base_url: str | None,
        api_key: str | None,
        timeout: float | httpx.Timeout | None,
        upload_timeout: float | httpx.Timeout | None,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        max_retry_after: float,
    ) -> Settings:
        url = base_url or os.environ.get("DEID_URL") or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get("DEID_API_KEY") or None
        t = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        if isinstance(upload_timeout, httpx.Timeout):
            ut = upload_timeout
        else:
            # Uploads may take long to stream; the answer comes right after the last byte.
            ut = httpx.Timeout(t.connect if upload_timeout is None else upload_timeout, read=upload_timeout, connect=t.connect)
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        return cls(url.rstrip("/"), key, t, ut, max_retries, backoff, max_backoff, max_retry_after)

    def headers(self) -> dict[str, str]:
        h = {"User-Agent": f"deid-client-python/{__version__}"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before retry number ``attempt + 1``: the answer's ``Retry-After``
        (at most ``max_retry_after``), else exponential backoff with jitter."""
        if response is not None:
            ra = retry_after_seconds(response)
            if ra is not None:
                return min(ra, self.max_retry_after)
        base: float = min(self.max_backoff, self.backoff * (2**attempt))
        return base * (0.5 + random.random() / 2)

    def should_retry(self, call: Call, attempt: int) -> bool:
        return call.idempotent and attempt < self.max_retries


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (unless it already is): decoding
    a large answer allocates millions of lists, dicts and objects, each allocation counting
    towards a collection that walks them all again — a plan of 180,000 classes (30 MB) decodes
    in 0.7 s paused, 2.9 s not; the adapters build their tables of such a plan in 1.3 s
    paused, 2.6 s not. Nothing built in these blocks forms a cycle."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def json_body(r: httpx.Response) -> Any:
    """The decoded JSON body of an answer (UTF-8), with the collector paused (:func:`gc_paused`)."""
    with gc_paused():
        return json.loads(r.content)


def seg(value: str) -> str:
    """A path segment (ids and column names may hold any character)."""
    return quote(str(value), safe="")


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _bool(v: bool | None) -> str | None:
    return None if v is None else ("true" if v else "false")


# ---------------------------------------------------------------- CSV sources


def _file_chunks(f: IO[Any]) -> Iterator[bytes]:
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return
        yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)


def _path_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from _file_chunks(f)


def _frame_chunks(df: Any, delimiter: str, header: bool, rows_per_chunk: int = 20_000) -> Iterator[bytes]:
    n = len(df)
    if n == 0:
        yield df.to_csv(index=False, sep=delimiter, header=header, lineterminator="\n").encode("utf-8")
        return
    for start in range(0, n, rows_per_chunk):
        part = df.iloc[start : start + rows_per_chunk]
        text = part.to_csv(index=False, sep=delimiter, header=header and start == 0, lineterminator="\n")
        yield text.encode("utf-8")


def csv_upload(source: CsvSource, delimiter: str | None) -> tuple[Iterator[bytes] | bytes, str | None, str | None]:
    """(body, name guess, delimiter to send) for an upload source."""
    if is_dataframe(source):
        d = delimiter or ","
        return _frame_chunks(source, d, True), None, d
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), None, delimiter
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise FileNotFoundError(f"no such CSV file: {p}")
        return _path_chunks(p), p.stem, delimiter
    if hasattr(source, "read"):
        name = getattr(source, "name", None)
        return _file_chunks(source), Path(name).stem if isinstance(name, str) else None, delimiter
    raise TypeError(
        f"cannot upload a {type(source).__name__}: give a path, bytes, a file object or a pandas DataFrame"
    )


def _rows_csv(rows: Sequence[Sequence[Any]], delimiter: str) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    for r in rows:
        w.writerow(["" if v is None else str(v) for v in r])
    return buf.getvalue().encode("utf-8")


def hierarchy_body(source: HierarchyInput, delimiter: str | None) -> tuple[bytes, str, str | None]:
    """(body, content type, delimiter query parameter) for a hierarchy PUT."""
    if isinstance(source, Mapping):
        if delimiter is not None:
            raise ValueError("delimiter is for CSV tables, not for builder specifications")
        return json.dumps(to_json(source)).encode("utf-8"), "application/json", None
    if is_dataframe(source):
        d = delimiter or ";"
        # ARX format: no header, one row per value, column j = level j.
        rows = source.astype(str).values.tolist()
        return _rows_csv(rows, d), "text/csv", d
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "text/csv", delimiter
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise FileNotFoundError(f"no such hierarchy file: {p}")
        return p.read_bytes(), "text/csv", delimiter
    if hasattr(source, "read"):
        data = source.read()
        return (data.encode("utf-8") if isinstance(data, str) else bytes(data)), "text/csv", delimiter
    if isinstance(source, (list, tuple)):
        d = delimiter or ";"
        return _rows_csv(source, d), "text/csv", d
    raise TypeError(
        f"cannot store a {type(source).__name__} as a hierarchy: give a path, bytes, a DataFrame, "
        "a list of rows or a builder specification (dict)"
    )


def job_body(spec: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(spec, JobSpec):
        return spec.to_json()
    if isinstance(spec, Mapping):
        body: dict[str, Any] = to_json(spec)
        return body
    raise TypeError(f"a job specification is a JobSpec or a dict, not a {type(spec).__name__}")


def detect_delimiter(first_line: str) -> str:
    """The most frequent of , ; tab | outside quotes (``,`` on ties), as the service detects it."""
    counts = {",": 0, ";": 0, "\t": 0, "|": 0}
    quoted = False
    for ch in first_line:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in counts:
            counts[ch] += 1
    best = ","
    for d in (",", ";", "\t", "|"):
        if counts[d] > counts[best]:
            best = d
    return best


def parse_event(event: str, data: str, id_: str | None) -> JobEvent:
    payload = json.loads(data) if data else None
    eid = int(id_) if id_ is not None and id_.isdigit() else None
    if event == "improvement":
        return JobEvent(event, eid, best=from_json(Best, payload), data=payload)
    if isinstance(payload, dict) and "status" in payload and "id" in payload:
        return JobEvent(event, eid, job=from_json(Job, payload), data=payload)
    return JobEvent(event, eid, data=payload)


# ---------------------------------------------------------------- the calls

Op = Generator[Call, httpx.Response, Any]


class Ops:
    """The API calls without I/O: each yields its requests and returns the decoded answer."""

    # -- service
    def health(self) -> Generator[Call, httpx.Response, Status]:
        r = yield Call("GET", "/healthz")
        return from_json(Status, json_body(r))

    def ready(self) -> Generator[Call, httpx.Response, Status]:
        r = yield Call("GET", "/readyz")
        return from_json(Status, json_body(r))

    def metrics(self) -> Generator[Call, httpx.Response, str]:
        r = yield Call("GET", "/metrics")
        return r.text

    def openapi(self) -> Generator[Call, httpx.Response, str]:
        r = yield Call("GET", "/openapi.yaml")
        return r.text

    # -- datasets
    def upload_dataset(
        self,
        source: CsvSource,
        name: str | None,
        delimiter: str | None,
        header: bool | None,
        timeout: Any,
        count_column: str | None = None,
    ) -> Generator[Call, httpx.Response, Dataset]:
        body, guess, d = csv_upload(source, delimiter)
        # A path ending in .parquet is sent as Parquet (the service reads it by its typed→text rule).
        parquet = isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".parquet")
        params = _drop_none(
            {"name": name or guess, "delimiter": d, "header": _bool(header), "count_column": count_column}
        )
        r = yield Call(
            "POST",
            "/v1/datasets",
            params=params,
            content=body,
            headers={"Content-Type": PARQUET_TYPE if parquet else "text/csv"},
            idempotent=False,
            timeout=timeout,
        )
        return from_json(Dataset, json_body(r))

    def list_datasets(self, limit: int | None, cursor: str | None) -> Generator[Call, httpx.Response, DatasetPage]:
        r = yield Call("GET", "/v1/datasets", params=_drop_none({"limit": limit, "cursor": cursor}))
        return from_json(DatasetPage, json_body(r))

    def get_dataset(self, dataset_id: str) -> Generator[Call, httpx.Response, Dataset]:
        r = yield Call("GET", f"/v1/datasets/{seg(dataset_id)}")
        return from_json(Dataset, json_body(r))

    def delete_dataset(self, dataset_id: str) -> Generator[Call, httpx.Response, None]:
        yield Call("DELETE", f"/v1/datasets/{seg(dataset_id)}")
        return None

    def analyse_risk(
        self,
        dataset_id: str,
        quasi_identifiers: Sequence[str],
        population: Mapping[str, Any] | None,
        risk_threshold: float | None,
        qi_combinations: str | None = None,
    ) -> Generator[Call, httpx.Response, dict[str, Any]]:
        body = _drop_none(
            {
                "quasi_identifiers": list(quasi_identifiers),
                "population": dict(population) if population is not None else None,
                "risk_threshold": risk_threshold,
                "qi_combinations": qi_combinations,
            }
        )
        # A read: safe to repeat.
        r = yield Call("POST", f"/v1/datasets/{seg(dataset_id)}/risk", json=body)
        result: dict[str, Any] = json_body(r)
        return result

    # -- hierarchies
    def _hpath(self, dataset_id: str, column: str) -> str:
        return f"/v1/datasets/{seg(dataset_id)}/hierarchies/{seg(column)}"

    def put_hierarchy(
        self, dataset_id: str, column: str, source: HierarchyInput, delimiter: str | None
    ) -> Generator[Call, httpx.Response, HierarchySummary]:
        body, ctype, d = hierarchy_body(source, delimiter)
        r = yield Call(
            "PUT",
            self._hpath(dataset_id, column),
            params=_drop_none({"delimiter": d}),
            content=body,
            headers={"Content-Type": ctype},
        )
        return from_json(HierarchySummary, json_body(r))

    def get_hierarchy(self, dataset_id: str, column: str) -> Generator[Call, httpx.Response, HierarchyTable]:
        r = yield Call("GET", self._hpath(dataset_id, column), params={"format": "json"})
        return from_json(HierarchyTable, json_body(r))

    def get_hierarchy_csv(self, dataset_id: str, column: str) -> Generator[Call, httpx.Response, tuple[str, str]]:
        r = yield Call("GET", self._hpath(dataset_id, column), params={"format": "csv"})
        return r.text, r.headers.get("x-deid-delimiter", ";")

    def preview_hierarchy(
        self, dataset_id: str, column: str, spec: HierarchySpec | Mapping[str, Any], limit: int | None
    ) -> Generator[Call, httpx.Response, HierarchyTable]:
        # A preview stores nothing: safe to repeat.
        r = yield Call(
            "POST",
            self._hpath(dataset_id, column) + "/preview",
            params=_drop_none({"format": "json", "limit": limit}),
            json=to_json(spec),
        )
        return from_json(HierarchyTable, json_body(r))

    def preview_hierarchy_csv(
        self,
        dataset_id: str,
        column: str,
        spec: HierarchySpec | Mapping[str, Any],
        limit: int | None,
        delimiter: str | None,
    ) -> Generator[Call, httpx.Response, tuple[str, str, int | None]]:
        r = yield Call(
            "POST",
            self._hpath(dataset_id, column) + "/preview",
            params=_drop_none({"format": "csv", "limit": limit, "delimiter": delimiter}),
            json=to_json(spec),
        )
        total = r.headers.get("x-deid-total-rows")
        return r.text, r.headers.get("x-deid-delimiter", delimiter or ";"), int(total) if total else None

    # -- jobs
    def submit_job(self, spec: JobSpec | Mapping[str, Any]) -> Generator[Call, httpx.Response, Job]:
        r = yield Call("POST", "/v1/jobs", json=job_body(spec), idempotent=False)
        return from_json(Job, json_body(r))

    def list_jobs(
        self, status: str | None, limit: int | None, cursor: str | None
    ) -> Generator[Call, httpx.Response, JobPage]:
        r = yield Call("GET", "/v1/jobs", params=_drop_none({"status": status, "limit": limit, "cursor": cursor}))
        return from_json(JobPage, json_body(r))

    def get_job(self, job_id: str) -> Generator[Call, httpx.Response, Job]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}")
        return from_json(Job, json_body(r))

    def cancel_job(self, job_id: str) -> Generator[Call, httpx.Response, Job]:
        # Cancelling twice is harmless, but a repeated cancel of a job that ended in between
        # would turn into a 409: not retried.
        r = yield Call("POST", f"/v1/jobs/{seg(job_id)}/cancel", idempotent=False)
        return from_json(Job, json_body(r))

    def get_result(self, job_id: str) -> Generator[Call, httpx.Response, Report]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}/result")
        return from_json(Report, _result_of(job_id, json_body(r), "anonymize"))

    def get_evaluation(self, job_id: str) -> Generator[Call, httpx.Response, Evaluation]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}/result")
        return from_json(Evaluation, _result_of(job_id, json_body(r), "evaluate"))

    def get_risk_analysis(self, job_id: str) -> Generator[Call, httpx.Response, RiskAnalysis]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}/result")
        return from_json(RiskAnalysis, _result_of(job_id, json_body(r), "risk"))

    def verify_job(
        self,
        job_id: str,
        released: CsvSource,
        count_column: str | None,
        show_values: bool | None,
        delimiter: str | None,
        timeout: Any,
    ) -> Generator[Call, httpx.Response, Verification]:
        body, _, _ = csv_upload(released, delimiter)
        params = _drop_none({"count_column": count_column, "show_values": _bool(show_values)})
        # A read, but its body may be a one-shot stream: not repeated.
        r = yield Call(
            "POST",
            f"/v1/jobs/{seg(job_id)}/verify",
            params=params,
            content=body,
            headers={"Content-Type": "text/csv"},
            idempotent=False,
            timeout=timeout,
        )
        return from_json(Verification, json_body(r))
    def get_job_spec(self, job_id: str) -> Generator[Call, httpx.Response, dict[str, Any]]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}/spec")
        data: dict[str, Any] = json_body(r)
        return data

    def get_plan(self, job_id: str) -> Generator[Call, httpx.Response, Plan]:
        r = yield Call("GET", f"/v1/jobs/{seg(job_id)}/plan")
        with gc_paused():
            return from_json(Plan, json_body(r))


_RESULT_METHODS = {"anonymize": "get_result", "evaluate": "get_evaluation", "risk": "get_risk_analysis"}


def _result_of(job_id: str, data: Any, task: str) -> Any:
    """``data`` if it is the result of a job with ``task``, else a TypeError naming the method
    that reads it (the three results share one operation, getResult)."""
    found = (
        "risk"
        if isinstance(data, dict) and "input" in data and "anonymous" not in data
        else "anonymize"
        if isinstance(data, dict) and "algorithm" in data
        else "evaluate"
    )
    if found != task:
        raise TypeError(
            f"job {job_id} is a {found!r} job: read its result with {_RESULT_METHODS[found]}()"
        )
    return data


def events_path(job_id: str) -> str:
    return f"/v1/jobs/{seg(job_id)}/events"


def result_csv_path(job_id: str) -> str:
    return f"/v1/jobs/{seg(job_id)}/result.csv"


def result_parquet_path(job_id: str) -> str:
    return f"/v1/jobs/{seg(job_id)}/result.parquet"


def read_result_frame(data: bytes, delimiter: str | None) -> Any:
    from ._pandas import require_pandas

    pd = require_pandas()
    text = data.decode("utf-8")
    first = text.split("\n", 1)[0]
    d = delimiter or detect_delimiter(first)
    # Everything as text: generalized values ("[30, 40[", "*") are not numbers, and no value may
    # silently become NaN.
    return pd.read_csv(io.StringIO(text), sep=d, dtype=str, keep_default_na=False, na_filter=False)
