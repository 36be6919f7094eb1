"""The synchronous client."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Generator, Iterator, Mapping, Sequence, TypeVar

import httpx

from . import _core
from ._core import Call, CsvSource, HierarchyInput, Ops, Settings
from ._progress import ProgressBar
from ._sse import parse_lines
from .builders import HierarchySpec, JobSpec
from .errors import (
    DeidConnectionError,
    DeidTimeoutError,
    JobFailedError,
    ServerError,
    WaitTimeoutError,
    error_from_response,
)
from .types import (
    Dataset,
    DatasetPage,
    Evaluation,
    HierarchySummary,
    HierarchyTable,
    Job,
    JobEvent,
    JobPage,
    JobStatusName,
    Plan,
    Report,
    RiskAnalysis,
    Verification,
    Status,
)

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")

__all__ = ["Client"]


class Client:
    """A client of one deid service (API v1).

    ``base_url`` defaults to ``$DEID_URL`` or ``http://127.0.0.1:8080``; ``api_key`` to
    ``$DEID_API_KEY`` (sent as ``Authorization: Bearer``). ``timeout`` bounds every network
    operation of ordinary requests (connect, each read and write), ``upload_timeout`` those of
    uploads (default: no read timeout, the service answers once it has stored the data).
    Idempotent calls (GET, PUT, DELETE, previews) are retried up to ``max_retries`` times on
    429 and 503 (waiting ``Retry-After`` when the service sends it, at most ``max_retry_after``
    seconds) and on connection errors (exponential backoff from ``backoff`` seconds, at most
    ``max_backoff``); uploads, job submissions and cancels are never repeated.

    Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = 30.0,
        upload_timeout: float | httpx.Timeout | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_retry_after: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._s = Settings.make(
            base_url, api_key, timeout, upload_timeout, max_retries, backoff, max_backoff, max_retry_after
        )
        self._http = httpx.Client(
            base_url=self._s.base_url, headers=self._s.headers(), timeout=self._s.timeout, transport=transport
        )
        self._ops = Ops()
        self._sleep: Callable[[float], None] = time.sleep

    @property
    def base_url(self) -> str:
        return self._s.base_url

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def _send(self, call: Call, *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            request = self._http.build_request(
                call.method,
                call.path,
                params=call.params,
                json=call.json,
                content=call.content,
                headers=call.headers,
                timeout=call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            try:
                response = self._http.send(request, stream=stream)
            except _core.RETRYABLE_TRANSPORT_ERRORS as e:
                if self._s.should_retry(call, attempt):
                    self._sleep(self._s.delay(attempt, None))
                    attempt += 1
                    continue
                raise DeidConnectionError(f"{call.method} {request.url}: {e}") from e
            except httpx.TimeoutException as e:
                raise DeidTimeoutError(f"{call.method} {request.url}: timed out ({e})") from e
            except httpx.TransportError as e:
                raise DeidConnectionError(f"{call.method} {request.url}: {e}") from e
            if response.status_code >= 400:
                if stream:
                    response.read()
                    response.close()
                if response.status_code in _core.RETRYABLE_STATUS and self._s.should_retry(call, attempt):
                    self._sleep(self._s.delay(attempt, response))
                    attempt += 1
                    continue
                raise error_from_response(response)
            return response

    def _run(self, op: Generator[Call, httpx.Response, T]) -> T:
        call = next(op)
        while True:
            response = self._send(call)
            try:
                call = op.send(response)
            except StopIteration as done:
                result: T = done.value
                return result

    # ------------------------------------------------------------ service

    def health(self) -> Status:
        """``GET /healthz``: the process answers."""
        return self._run(self._ops.health())

    def ready(self) -> Status:
        """``GET /readyz``: the database answers (ServiceUnavailableError otherwise)."""
        return self._run(self._ops.ready())

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus text."""
        return self._run(self._ops.metrics())

    def openapi(self) -> str:
        """``GET /openapi.yaml``: the service's API document."""
        return self._run(self._ops.openapi())

    # ------------------------------------------------------------ datasets

    def upload_dataset(
        self,
        source: CsvSource,
        *,
        name: str | None = None,
        delimiter: str | None = None,
        header: bool | None = None,
        count_column: str | None = None,
    ) -> Dataset:
        """Uploads a CSV, streamed: a path, bytes, a file object (binary or text) or a pandas
        DataFrame (written as CSV chunk by chunk with ``delimiter``, default ``,``); a path
        ending in ``.parquet`` is sent as Parquet (docs/definitions.md §8).
        ``name`` defaults to the file's name; ``delimiter`` to the service's detection.
        ``count_column``: the data are a frequency table, each row standing for as many records
        as this column says (checked at upload; jobs on the dataset use it)."""
        return self._run(self._ops.upload_dataset(source, name, delimiter, header, self._s.upload_timeout, count_column))

    def list_datasets(self, *, limit: int | None = None, cursor: str | None = None) -> DatasetPage:
        """One page of the tenant's datasets, newest first."""
        return self._run(self._ops.list_datasets(limit, cursor))

    def iter_datasets(self, *, page_size: int = 100) -> Iterator[Dataset]:
        """Every dataset of the tenant, newest first, following ``next_cursor``."""
        cursor: str | None = None
        while True:
            page = self.list_datasets(limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get_dataset(self, dataset_id: str) -> Dataset:
        return self._run(self._ops.get_dataset(dataset_id))

    def delete_dataset(self, dataset_id: str) -> None:
        """Deletes a dataset and its hierarchies (ConflictError while a job uses it)."""
        self._run(self._ops.delete_dataset(dataset_id))

    def analyse_risk(
        self,
        dataset_id: str,
        quasi_identifiers: Sequence[str],
        *,
        population: Mapping[str, Any] | None = None,
        risk_threshold: float | None = None,
        qi_combinations: str | None = None,
    ) -> dict[str, Any]:
        """The re-identification risks of the dataset as it is for these quasi-identifiers
        (``{"input": RiskReport}``); ``population`` is ``{"size": N}``,
        ``{"sampling_fraction": f}`` or ``{"region": "usa"}``; ``qi_combinations`` is
        ``"auto"`` (default), ``"all"`` (distinction and separation of every combination of
        the quasi-identifiers, whatever it costs) or ``"singles"`` (each alone and all
        together)."""
        return self._run(
            self._ops.analyse_risk(
                dataset_id, quasi_identifiers, population, risk_threshold, qi_combinations
            )
        )

    # ------------------------------------------------------------ hierarchies

    def put_hierarchy(
        self, dataset_id: str, column: str, source: HierarchyInput, *, delimiter: str | None = None
    ) -> HierarchySummary:
        """Stores (or replaces) a column's hierarchy: an ARX-format table from a path, bytes, a
        file object, a DataFrame or a list of rows (one row per value, column j = level j), or a
        builder specification (a dict such as ``interval(width=10)``)."""
        return self._run(self._ops.put_hierarchy(dataset_id, column, source, delimiter))

    def get_hierarchy(self, dataset_id: str, column: str) -> HierarchyTable:
        """The stored hierarchy as a table (with the specification for builders)."""
        return self._run(self._ops.get_hierarchy(dataset_id, column))

    def get_hierarchy_csv(self, dataset_id: str, column: str) -> str:
        """The stored hierarchy as ARX CSV text."""
        return self._run(self._ops.get_hierarchy_csv(dataset_id, column))[0]

    def get_hierarchy_frame(self, dataset_id: str, column: str) -> pd.DataFrame:
        """The stored hierarchy as a DataFrame (needs pandas)."""
        return self.get_hierarchy(dataset_id, column).to_frame()

    def preview_hierarchy(
        self, dataset_id: str, column: str, spec: HierarchySpec | Mapping[str, Any], *, limit: int | None = None
    ) -> HierarchyTable:
        """The table a builder specification produces for the column (nothing is stored),
        with the analytic domain shares; ``limit`` cuts the rows (``total_rows`` has them all)."""
        return self._run(self._ops.preview_hierarchy(dataset_id, column, spec, limit))

    def preview_hierarchy_csv(
        self,
        dataset_id: str,
        column: str,
        spec: HierarchySpec | Mapping[str, Any],
        *,
        limit: int | None = None,
        delimiter: str | None = None,
    ) -> str:
        """The preview as ARX CSV text (``;``-separated unless ``delimiter``)."""
        return self._run(self._ops.preview_hierarchy_csv(dataset_id, column, spec, limit, delimiter))[0]

    # ------------------------------------------------------------ jobs

    def submit_job(self, spec: JobSpec | Mapping[str, Any]) -> Job:
        """Validates and queues a job (a :class:`JobSpec` or the JSON as a dict).
        ValidationError names the offending field; RateLimitedError when the queue is full."""
        return self._run(self._ops.submit_job(spec))

    def list_jobs(
        self, *, status: JobStatusName | None = None, limit: int | None = None, cursor: str | None = None
    ) -> JobPage:
        return self._run(self._ops.list_jobs(status, limit, cursor))

    def iter_jobs(self, *, status: JobStatusName | None = None, page_size: int = 100) -> Iterator[Job]:
        cursor: str | None = None
        while True:
            page = self.list_jobs(status=status, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get_job(self, job_id: str) -> Job:
        """Status, progress and best transformation so far."""
        return self._run(self._ops.get_job(job_id))

    def cancel_job(self, job_id: str) -> Job:
        """Cancels a job: a queued one at once, a running one stops and keeps its best so far
        (ConflictError once it has ended)."""
        return self._run(self._ops.cancel_job(job_id))

    def events(self, job_id: str, *, last_event_id: int | None = None) -> Iterator[JobEvent]:
        """The job's Server-Sent Events: ``progress`` (a Job), ``improvement`` (a Best) and
        finally ``done``, ``failed`` or ``cancelled``; the iterator ends with the stream."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        call = Call("GET", _core.events_path(job_id), headers=headers)
        response = self._send(call, stream=True)
        try:
            ctype = response.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise DeidConnectionError(f"expected an event stream, got {ctype or 'no content type'}")
            try:
                for msg in parse_lines(response.iter_lines()):
                    yield _core.parse_event(msg.event, msg.data, msg.id)
            except httpx.TimeoutException as e:
                raise DeidTimeoutError(f"event stream of job {job_id}: {e}") from e
            except httpx.TransportError as e:
                raise DeidConnectionError(f"event stream of job {job_id}: {e}") from e
        finally:
            response.close()

    def wait(
        self,
        job_id: str | Job,
        *,
        timeout: float | None = None,
        progress: bool | None = None,
        progress_file: IO[str] | None = None,
        events: bool = True,
        poll_interval: float = 1.0,
        raise_on_failure: bool = False,
        on_event: Callable[[JobEvent], None] | None = None,
    ) -> Job:
        """Waits until the job ends and returns it.

        Follows the event stream (falling back to polling ``GET /v1/jobs/{id}`` every
        ``poll_interval`` seconds when the stream cannot be opened or breaks, or with
        ``events=False``). A progress bar (tqdm, installed with ``deid-client[progress]``) is
        drawn on ``progress_file`` (default stderr) with ``progress=True``; with the default
        ``progress=None`` only when ``progress_file`` is given or stderr is a terminal;
        never with ``progress=False`` or without tqdm. ``on_event`` sees every event (while
        polling: a ``progress`` event per poll). ``timeout``: WaitTimeoutError after that many
        seconds (the job keeps running). ``raise_on_failure``: JobFailedError for a failed job.
        """
        jid = job_id.id if isinstance(job_id, Job) else job_id
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = ProgressBar(jid, progress, progress_file)
        last: Job | None = job_id if isinstance(job_id, Job) else None

        def expired() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        def finish(job: Job) -> Job:
            if raise_on_failure and job.status == "failed":
                raise JobFailedError(job)
            return job

        try:
            if events:
                try:
                    for ev in self.events(jid):
                        if on_event is not None:
                            on_event(ev)
                        if ev.job is not None:
                            last = ev.job
                            bar.job(ev.job)
                        if ev.best is not None:
                            bar.best(ev.best)
                        if ev.terminal and ev.job is not None:
                            return finish(ev.job)
                        if expired():
                            raise WaitTimeoutError(last or self.get_job(jid), timeout or 0.0)
                except (DeidConnectionError, DeidTimeoutError, ServerError, ValueError):
                    pass  # fall back to polling
            while True:
                job = self.get_job(jid)
                last = job
                bar.job(job)
                if on_event is not None:
                    on_event(JobEvent("progress", None, job=job, data=job.raw))
                if job.finished:
                    return finish(job)
                if expired():
                    raise WaitTimeoutError(job, timeout or 0.0)
                pause = poll_interval
                if deadline is not None:
                    pause = max(0.0, min(pause, deadline - time.monotonic()))
                self._sleep(pause)
        finally:
            bar.close()

    def get_result(self, job_id: str) -> Report:
        """The report of a finished anonymization job (ConflictError while it runs or when it has
        none; TypeError naming the right method for an evaluation or risk-analysis job)."""
        return self._run(self._ops.get_result(job_id))

    def get_evaluation(self, job_id: str) -> Evaluation:
        """The report of a job with ``task="evaluate"`` (also kept when it failed with
        ``not_anonymous``: ``anonymous`` is then false and there is no CSV)."""
        return self._run(self._ops.get_evaluation(job_id))

    def verify_job(
        self,
        job_id: str,
        released: CsvSource,
        *,
        count_column: str | None = None,
        show_values: bool | None = None,
        delimiter: str | None = None,
    ) -> Verification:
        """Re-checks released data (a path, bytes, a file object or a DataFrame: the job's
        result CSV or its frequency table, delimited as the job's dataset — ``delimiter`` is the
        one a DataFrame is written with) against every privacy model of the job, from scratch.
        ``passed`` is False when a model fails; ``count_column`` reads the data as a frequency
        table (default: the job's count column); ``show_values`` lists the quasi-identifier
        values of violating classes."""
        return self._run(
            self._ops.verify_job(job_id, released, count_column, show_values, delimiter, self._s.upload_timeout)
        )

    def get_risk_analysis(self, job_id: str) -> RiskAnalysis:
        """The result of a job with ``task="risk"`` (the shape of :meth:`analyse_risk`)."""
        return self._run(self._ops.get_risk_analysis(job_id))

    def get_job_spec(self, job_id: str) -> dict[str, Any]:
        """The job's specification as stored (normalized, stored hierarchies inlined): the
        JSON of ``POST /v1/jobs``, e.g. to submit it again as an evaluate job."""
        return self._run(self._ops.get_job_spec(job_id))

    def get_plan(self, job_id: str) -> Plan:
        """The recoding plan of an anonymization job's output (ConflictError while it has no
        output, and for evaluation and risk-analysis jobs)."""
        return self._run(self._ops.get_plan(job_id))

    def iter_result_csv(self, job_id: str) -> Iterator[bytes]:
        """The anonymized CSV as it streams (the dataset's delimiter)."""
        return self._iter_bytes(_core.result_csv_path(job_id), job_id)

    def iter_result_parquet(self, job_id: str) -> Iterator[bytes]:
        """The anonymized data as Apache Parquet bytes as they stream (UTF8 columns, NULL for
        an empty cell; a frequency table's count column as INT64)."""
        return self._iter_bytes(_core.result_parquet_path(job_id), job_id)

    def _iter_bytes(self, path: str, job_id: str) -> Iterator[bytes]:
        response = self._send(Call("GET", path), stream=True)
        try:
            yield from response.iter_bytes()
        except httpx.TransportError as e:
            raise DeidConnectionError(f"result of job {job_id}: {e}") from e
        finally:
            response.close()

    def download_result(self, job_id: str, dest: str | os.PathLike[str] | IO[bytes]) -> None:
        """Streams the anonymized CSV to a path (written to a temporary file, then renamed: no
        partial file on errors) or a binary file object."""
        _write_chunks(self.iter_result_csv(job_id), dest)

    def download_result_parquet(self, job_id: str, dest: str | os.PathLike[str] | IO[bytes]) -> None:
        """Streams the anonymized data as Apache Parquet to a path (via a temporary file) or a
        binary file object."""
        _write_chunks(self.iter_result_parquet(job_id), dest)

    def result_frame(self, job_id: str, *, delimiter: str | None = None) -> pd.DataFrame:
        """The anonymized CSV as a DataFrame of strings (needs pandas); the delimiter is
        detected from the header line unless given."""
        data = b"".join(self.iter_result_csv(job_id))
        frame: pd.DataFrame = _core.read_result_frame(data, delimiter)
        return frame


def _write_chunks(chunks: Iterator[bytes], dest: str | os.PathLike[str] | IO[bytes]) -> None:
    """Writes `chunks` to a path (a temporary file renamed at the end: no partial file on
    errors) or a binary file object."""
    if isinstance(dest, (str, os.PathLike)):
        path = Path(dest)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    else:
        for chunk in chunks:
            dest.write(chunk)
