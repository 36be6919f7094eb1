"""Fixtures of the client tests: real deid processes (``$DEID_BIN serve``, SQLite in a temporary
directory, a free port, API keys configured) and test datasets.

DEID_BIN names the deid binary (default: target/release/deid of this repository).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from deid_client import Client, Dataset

REPO = Path(__file__).resolve().parents[3]
ADULT = REPO / "examples" / "adult"
LISTENING = re.compile(r"listening on http://(127\.0\.0\.1:\d+)")

ACME_KEY = "correct-horse-battery-staple"
GLOBEX_KEY = "globex-key-0123456789abcdef"
ADULT_QIS = ["age", "sex", "race", "marital-status", "education"]


class Server:
    """A ``deid serve`` process on a free port with its own SQLite database."""

    def __init__(self, *extra: str, api_keys: str | None = None) -> None:
        binary = os.environ.get("DEID_BIN", str(REPO / "target" / "release" / "deid"))
        if not Path(binary).is_file():
            raise RuntimeError(f"no deid binary at {binary}: build it (cargo build --release) or set DEID_BIN")
        self.dir = tempfile.mkdtemp(prefix="deid-pyclient-")
        args = [binary, "serve", "--bind", "127.0.0.1:0", "--data-dir", self.dir, *extra]
        env = dict(os.environ, NO_COLOR="1", RUST_LOG="info")
        for var in ("DATABASE_URL", "DEID_API_KEYS", "DEID_BIND", "DEID_DATA_DIR"):
            env.pop(var, None)
        if api_keys:
            args += ["--api-keys", api_keys]
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.url = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.url:
            if self.process.poll() is not None:
                break
            self.log.seek(0)
            m = LISTENING.search(self.log.read())
            if m:
                self.url = "http://" + m.group(1)
            else:
                time.sleep(0.05)
        if not self.url:
            self.log.seek(0)
            out = self.log.read()
            self.stop()
            raise RuntimeError("deid did not start:\n" + out)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """deid with two tenants (acme and globex), one worker."""
    s = Server(api_keys=f"acme:{ACME_KEY},globex:{GLOBEX_KEY}")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def queue_full_server() -> Iterator[Server]:
    """deid that queues no job at all: every POST /v1/jobs is 429 queue_full."""
    s = Server("--max-queued-jobs", "0", api_keys=f"acme:{ACME_KEY}")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[Client]:
    with Client(server.url, api_key=ACME_KEY, timeout=30) as c:
        yield c


@pytest.fixture(scope="session")
def adult(client: Client) -> Dataset:
    """examples/adult uploaded with the ARX hierarchies of its five quasi-identifiers."""
    ds = client.upload_dataset(ADULT / "adult.csv", name="adult")
    for col in ADULT_QIS:
        client.put_hierarchy(ds.id, col, ADULT / f"adult_hierarchy_{col}.csv")
    return client.get_dataset(ds.id)


def adult_job(dataset_id: str, **extra: object) -> dict[str, object]:
    """The README's walkthrough job as JSON."""
    spec: dict[str, object] = {
        "dataset_id": dataset_id,
        "attributes": {**{c: {"type": "quasi_identifying"} for c in ADULT_QIS}, "salary-class": {"type": "sensitive"}},
        "privacy": ["k-anonymity(k=5)", {"model": "distinct-l-diversity", "attribute": "salary-class", "l": 2}],
        "suppression_limit": 0.02,
        "quality": "loss",
        "time_limit": "30s",
    }
    spec.update(extra)
    return spec


@pytest.fixture(scope="session")
def patients_csv() -> Iterator[Path]:
    """3,000 synthetic patients (fixed seed), seven quasi-identifiers whose suggested
    hierarchies span a solution space large enough for a search that runs for seconds."""
    rng = random.Random(14)
    d = tempfile.mkdtemp(prefix="deid-pyclient-csv-")
    path = Path(d) / "patients.csv"
    diseases = ["flu", "asthma", "diabetes", "gastritis", "bronchitis", "ulcer"]
    education = ["none", "primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
    with open(path, "w") as f:
        f.write("age,zip,sex,weight,height,income,education,disease\n")
        for _ in range(3000):
            f.write(
                f"{rng.randint(18, 90)},{rng.randint(10000, 19999):05d},{rng.choice('FM')},"
                f"{rng.randint(40, 140)},{rng.randint(150, 200)},{rng.randint(1000, 9999)},"
                f"{rng.choice(education)},{rng.choice(diseases)}\n"
            )
    yield path
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def patients(client: Client, patients_csv: Path) -> Dataset:
    return client.upload_dataset(patients_csv)


PATIENT_QIS = ["age", "zip", "sex", "weight", "height", "income", "education"]


def long_job(ds: Dataset, time_limit: str) -> dict[str, object]:
    """A genetic search over the patients that runs for its whole time limit."""
    return {
        "dataset_id": ds.id,
        "attributes": {
            c: {"type": "quasi_identifying", "hierarchy": ds.column(c).suggested_hierarchy} for c in PATIENT_QIS
        },
        "privacy": ["k-anonymity(k=5)"],
        "algorithm": "genetic",
        "suppression_limit": 0.05,
        "time_limit": time_limit,
        "seed": 7,
    }
