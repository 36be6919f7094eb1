"""The progress bar of ``wait()``: tqdm is optional, and the bar is drawn only when asked for or
when stderr is a terminal."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
from typing import Iterator

import pytest

from deid_client import AsyncClient, Attribute, Client, Dataset, Job, JobSpec, KAnonymity, suppression
from conftest import ACME_KEY, Server


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def finished(client: Client) -> Iterator[Job]:
    """A small evaluation job, finished (waiting on it replays its events)."""
    ds: Dataset = client.upload_dataset(b"g,v\nA,1\nA,2\nB,3\nB,4\n", name="progress", delimiter=",")
    spec = JobSpec(
        dataset_id=ds.id,
        attributes={"g": Attribute.quasi_identifying(suppression())},
        privacy=[KAnonymity(2)],
        task="evaluate",
        levels={"g": 0},
    )
    job = client.wait(client.submit_job(spec), progress=False)
    assert job.status == "succeeded"
    yield job


def bar_of(job: Job) -> str:
    return f"job {job.id[:13]}"


def test_no_bar_on_stderr_unless_asked_or_a_terminal(
    client: Client, finished: Job, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # By default: nothing on a stderr that is not a terminal (here pytest's capture).
    assert client.wait(finished).status == "succeeded"
    assert capfd.readouterr().err == ""
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    client.wait(finished)
    assert plain.getvalue() == ""
    # Asked for: on stderr all the same.
    client.wait(finished, progress=True)
    assert bar_of(finished) in plain.getvalue() and "status=succeeded" in plain.getvalue()
    # A terminal: drawn by default, never with progress=False.
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    client.wait(finished, progress=False)
    assert terminal.getvalue() == ""
    client.wait(finished)
    assert bar_of(finished) in terminal.getvalue()
    # A progress_file is a request for the bar; stderr stays untouched.
    monkeypatch.setattr(sys, "stderr", plain := io.StringIO())
    into = io.StringIO()
    client.wait(finished, progress_file=into)
    assert bar_of(finished) in into.getvalue() and plain.getvalue() == ""


def test_without_tqdm_wait_works_and_shows_nothing(
    client: Client, finished: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` raises ImportError
    with pytest.raises(ImportError):
        import tqdm  # noqa: F401
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default (a terminal) warns about nothing
        assert client.wait(finished).status == "succeeded"
        assert client.wait(finished, events=False).status == "succeeded"
    # Asked for explicitly: a warning that says how to get the bar.
    with pytest.warns(RuntimeWarning, match=r"deid-client\[progress\]"):
        assert client.wait(finished, progress=True).status == "succeeded"
    assert terminal.getvalue() == ""


@pytest.mark.asyncio
async def test_async_wait_without_tqdm(server: Server, finished: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    async with AsyncClient(server.url, api_key=ACME_KEY) as c:
        assert (await c.wait(finished.id)).status == "succeeded"
    assert terminal.getvalue() == ""


def test_the_package_does_not_import_tqdm() -> None:
    code = (
        "import sys\n"
        "sys.modules['tqdm'] = None\n"
        "import deid_client, deid_client.aio, deid_client.client\n"
        "from deid_client import Client, AsyncClient\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
