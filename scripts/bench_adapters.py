"""What scripts/bench-spark and scripts/bench-sql share: the job of `deid bench generate`'s data
(k = 5, 5 % suppression, Loss, `auto`, a time limit, its hierarchies inline), a `deid serve` of
the release binary for the adapters, and the peak memory of a process."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The quasi-identifiers of `deid bench generate` (src/cli/synth.rs); "diagnosis" is sensitive.
QIS = ["zip", "age", "sex", "state", "year", "income", "education", "marital", "occupation", "race"]


def deid_bin() -> str:
    """The deid binary: DEID_BIN, default the release build."""
    return os.environ.get("DEID_BIN", str(REPO / "target" / "release" / "deid"))


def job_spec(deid: str, work: Path, time_limit: str) -> dict[str, Any]:
    """The benchmark's job without input: the hierarchies `deid bench generate` writes, inline."""
    subprocess.run([deid, "bench", "generate", "--rows", "1", "--dir", str(work), "--name", "h"], check=True,
                   capture_output=True)
    attrs: dict[str, Any] = {
        q: {"type": "quasi_identifying", "hierarchy": {"csv": (work / "h" / f"h_hierarchy_{q}.csv").read_text()}}
        for q in QIS
    }
    attrs["diagnosis"] = {"type": "sensitive"}
    return {"attributes": attrs, "privacy": ["k-anonymity(k=5)"], "suppression_limit": 0.05, "quality": "loss",
            "algorithm": "auto", "time_limit": time_limit}


def peak_mib(pid: int) -> float:
    """A running process's peak resident memory (VmHWM) in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


class Server:
    """`deid serve` on a free port, for its peak memory."""

    def __init__(self, deid: str, work: Path) -> None:
        log = open(work / "serve.log", "w+")
        self.process = subprocess.Popen([deid, "serve", "--bind", "127.0.0.1:0", "--data-dir", str(work / "data")],
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        self.url = ""
        while not self.url and time.monotonic() < deadline:
            log.seek(0)
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", log.read())
            self.url = m.group(1) if m else ""
            time.sleep(0.1)
        if not self.url:
            raise RuntimeError("deid serve did not start")

    def peak_mib(self) -> float:
        """The server's peak memory so far."""
        return peak_mib(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
