"""The asynchronous client: the same calls as :class:`deid_client.Client`, awaitable."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
    TypeVar,
)

import httpx

from . import _core
from ._core import Call, CsvSource, HierarchyInput, Ops, Settings
from ._progress import ProgressBar
from ._sse import aparse_lines
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

__all__ = ["AsyncClient"]


async def _aiter_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    # Reading a file or formatting a DataFrame chunk is quick; do it in a thread anyway so a
    # large upload does not stall the event loop.
    while True:
        chunk = await asyncio.to_thread(next, chunks, None)
        if chunk is None:
            return
        yield chunk


class AsyncClient:
    """The asynchronous client (``httpx.AsyncClient``); same arguments and calls as
    :class:`deid_client.Client`, every call a coroutine (``events`` an async iterator).
    Use it with ``async with`` or call :meth:`aclose`."""

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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._s = Settings.make(
            base_url, api_key, timeout, upload_timeout, max_retries, backoff, max_backoff, max_retry_after
        )
        self._http = httpx.AsyncClient(
            base_url=self._s.base_url, headers=self._s.headers(), timeout=self._s.timeout, transport=transport
        )
        self._ops = Ops()
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def base_url(self) -> str:
        return self._s.base_url

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ transport

    async def _send(self, call: Call, *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            content = call.content
            if content is not None and not isinstance(content, (bytes, str)):
                content = _aiter_chunks(iter(content))
            request = self._http.build_request(
                call.method,
                call.path,
                params=call.params,
                json=call.json,
                content=content,
                headers=call.headers,
                timeout=call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            try:
                response = await self._http.send(request, stream=stream)
            except _core.RETRYABLE_TRANSPORT_ERRORS as e:
                if self._s.should_retry(call, attempt):
                    await self._sleep(self._s.delay(attempt, None))
                    attempt += 1
                    continue
                raise DeidConnectionError(f"{call.method} {request.url}: {e}") from e
            except httpx.TimeoutException as e:
                raise DeidTimeoutError(f"{call.method} {request.url}: timed out ({e})") from e
            except httpx.TransportError as e:
                raise DeidConnectionError(f"{call.method} {request.url}: {e}") from e
            if response.status_code >= 400:
                if stream:
                    await response.aread()
                    await response.aclose()
                if response.status_code in _core.RETRYABLE_STATUS and self._s.should_retry(call, attempt):
                    await self._sleep(self._s.delay(attempt, response))
                    attempt += 1
                    continue
                raise error_from_response(response)
            return response

    async def _run(self, op: Generator[Call, httpx.Response, T]) -> T:
        call = next(op)
        while True:
            response = await self._send(call)
            try:
                call = op.send(response)
            except StopIteration as done:
                result: T = done.value
                return result

    # ------------------------------------------------------------ service

    async def health(self) -> Status:
        return await self._run(self._ops.health())

    async def ready(self) -> Status:
        return await self._run(self._ops.ready())

    async def metrics(self) -> str:
        return await self._run(self._ops.metrics())

    async def openapi(self) -> str:
        return await self._run(self._ops.openapi())

    # ------------------------------------------------------------ datasets

    async def upload_dataset(
        self,
        source: CsvSource,
        *,
        name: str | None = None,
        delimiter: str | None = None,
        header: bool | None = None,
        count_column: str | None = None,
    ) -> Dataset:
        return await self._run(self._ops.upload_dataset(source, name, delimiter, header, self._s.upload_timeout, count_column))

    async def list_datasets(self, *, limit: int | None = None, cursor: str | None = None) -> DatasetPage:
        return await self._run(self._ops.list_datasets(limit, cursor))

    async def iter_datasets(self, *, page_size: int = 100) -> AsyncIterator[Dataset]:
        cursor: str | None = None
        while True:
            page = await self.list_datasets(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get_dataset(self, dataset_id: str) -> Dataset:
        return await self._run(self._ops.get_dataset(dataset_id))

    async def delete_dataset(self, dataset_id: str) -> None:
        await self._run(self._ops.delete_dataset(dataset_id))

    async def analyse_risk(
        self,
        dataset_id: str,
        quasi_identifiers: Sequence[str],
        *,
        population: Mapping[str, Any] | None = None,
        risk_threshold: float | None = None,
        qi_combinations: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`deid_client.Client.analyse_risk`."""
        return await self._run(
            self._ops.analyse_risk(
                dataset_id, quasi_identifiers, population, risk_threshold, qi_combinations
            )
        )

    # ------------------------------------------------------------ hierarchies

    async def put_hierarchy(
        self, dataset_id: str, column: str, source: HierarchyInput, *, delimiter: str | None = None
    ) -> HierarchySummary:
        return await self._run(self._ops.put_hierarchy(dataset_id, column, source, delimiter))

    async def get_hierarchy(self, dataset_id: str, column: str) -> HierarchyTable:
        return await self._run(self._ops.get_hierarchy(dataset_id, column))

    async def get_hierarchy_csv(self, dataset_id: str, column: str) -> str:
        return (await self._run(self._ops.get_hierarchy_csv(dataset_id, column)))[0]

    async def get_hierarchy_frame(self, dataset_id: str, column: str) -> pd.DataFrame:
        return (await self.get_hierarchy(dataset_id, column)).to_frame()

    async def preview_hierarchy(
        self, dataset_id: str, column: str, spec: HierarchySpec | Mapping[str, Any], *, limit: int | None = None
    ) -> HierarchyTable:
        return await self._run(self._ops.preview_hierarchy(dataset_id, column, spec, limit))

    async def preview_hierarchy_csv(
        self,
        dataset_id: str,
        column: str,
        spec: HierarchySpec | Mapping[str, Any],
        *,
        limit: int | None = None,
        delimiter: str | None = None,
    ) -> str:
        return (await self._run(self._ops.preview_hierarchy_csv(dataset_id, column, spec, limit, delimiter)))[0]

    # ------------------------------------------------------------ jobs

    async def submit_job(self, spec: JobSpec | Mapping[str, Any]) -> Job:
        return await self._run(self._ops.submit_job(spec))

    async def list_jobs(
        self, *, status: JobStatusName | None = None, limit: int | None = None, cursor: str | None = None
    ) -> JobPage:
        return await self._run(self._ops.list_jobs(status, limit, cursor))

    async def iter_jobs(self, *, status: JobStatusName | None = None, page_size: int = 100) -> AsyncIterator[Job]:
        cursor: str | None = None
        while True:
            page = await self.list_jobs(status=status, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get_job(self, job_id: str) -> Job:
        return await self._run(self._ops.get_job(job_id))

    async def cancel_job(self, job_id: str) -> Job:
        return await self._run(self._ops.cancel_job(job_id))

    async def events(self, job_id: str, *, last_event_id: int | None = None) -> AsyncIterator[JobEvent]:
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        response = await self._send(Call("GET", _core.events_path(job_id), headers=headers), stream=True)
        try:
            ctype = response.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise DeidConnectionError(f"expected an event stream, got {ctype or 'no content type'}")
            try:
                async for msg in aparse_lines(response.aiter_lines()):
                    yield _core.parse_event(msg.event, msg.data, msg.id)
            except httpx.TimeoutException as e:
                raise DeidTimeoutError(f"event stream of job {job_id}: {e}") from e
            except httpx.TransportError as e:
                raise DeidConnectionError(f"event stream of job {job_id}: {e}") from e
        finally:
            await response.aclose()

    async def wait(
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
        """See :meth:`deid_client.Client.wait`."""
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
                stream = self.events(jid)
                try:
                    async for ev in stream:
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
                            raise WaitTimeoutError(last or await self.get_job(jid), timeout or 0.0)
                except (DeidConnectionError, DeidTimeoutError, ServerError, ValueError):
                    pass  # fall back to polling
                finally:
                    await stream.aclose()  # type: ignore[attr-defined]
            while True:
                job = await self.get_job(jid)
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
                await self._sleep(pause)
        finally:
            bar.close()

    async def get_result(self, job_id: str) -> Report:
        return await self._run(self._ops.get_result(job_id))

    async def get_evaluation(self, job_id: str) -> Evaluation:
        return await self._run(self._ops.get_evaluation(job_id))

    async def verify_job(
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
        return await self._run(
            self._ops.verify_job(job_id, released, count_column, show_values, delimiter, self._s.upload_timeout)
        )

    async def get_risk_analysis(self, job_id: str) -> RiskAnalysis:
        return await self._run(self._ops.get_risk_analysis(job_id))

    async def get_job_spec(self, job_id: str) -> dict[str, Any]:
        return await self._run(self._ops.get_job_spec(job_id))

    async def get_plan(self, job_id: str) -> Plan:
        return await self._run(self._ops.get_plan(job_id))

    def iter_result_csv(self, job_id: str) -> AsyncIterator[bytes]:
        return self._iter_bytes(_core.result_csv_path(job_id), job_id)

    def iter_result_parquet(self, job_id: str) -> AsyncIterator[bytes]:
        """The anonymized data as Apache Parquet bytes as they stream."""
        return self._iter_bytes(_core.result_parquet_path(job_id), job_id)

    async def _iter_bytes(self, path: str, job_id: str) -> AsyncIterator[bytes]:
        response = await self._send(Call("GET", path), stream=True)
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.TransportError as e:
            raise DeidConnectionError(f"result of job {job_id}: {e}") from e
        finally:
            await response.aclose()

    async def download_result(self, job_id: str, dest: str | os.PathLike[str] | IO[bytes]) -> None:
        """Streams the anonymized CSV to a path (via a temporary file) or a binary file object."""
        await _write_chunks(self.iter_result_csv(job_id), dest)

    async def download_result_parquet(self, job_id: str, dest: str | os.PathLike[str] | IO[bytes]) -> None:
        """Streams the anonymized data as Apache Parquet to a path (via a temporary file) or a
        binary file object."""
        await _write_chunks(self.iter_result_parquet(job_id), dest)

    async def result_frame(self, job_id: str, *, delimiter: str | None = None) -> pd.DataFrame:
        data = b"".join([c async for c in self.iter_result_csv(job_id)])
        frame: pd.DataFrame = _core.read_result_frame(data, delimiter)
        return frame


async def _write_chunks(chunks: AsyncIterator[bytes], dest: str | os.PathLike[str] | IO[bytes]) -> None:
    """Writes `chunks` to a path (via a temporary file) or a binary file object."""
    if isinstance(dest, (str, os.PathLike)):
        path = Path(dest)
        tmp = path.with_name(f".{path.name}.part")
        try:
            with open(tmp, "wb") as f:
                async for chunk in chunks:
                    f.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    else:
        async for chunk in chunks:
            dest.write(chunk)
