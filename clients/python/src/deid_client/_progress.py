"""The progress bar of ``wait()`` (tqdm): the explored share of the solution space, with the
search phase, the checks and the utility of the best transformation so far."""

from __future__ import annotations

from typing import IO, Any

from tqdm import tqdm

from .types import Best, Job


class ProgressBar:
    def __init__(self, job_id: str, enabled: bool, file: IO[str] | None = None) -> None:
        self.enabled = enabled
        self._bar: tqdm[Any] | None = None
        if enabled:
            self._bar = tqdm(
                total=100.0,
                desc=f"job {job_id[:13]}",
                unit="%",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}{postfix}",
                file=file,
                leave=True,
                dynamic_ncols=True,
            )
        self._utility: float | None = None
        self._phase = ""
        self._checks = 0
        self._status = ""

    def _refresh(self) -> None:
        if self._bar is None:
            return
        post: dict[str, Any] = {"status": self._status, "phase": self._phase, "checks": self._checks}
        if self._utility is not None:
            post["utility"] = f"{self._utility:.4f}"
        self._bar.set_postfix(post, refresh=False)
        self._bar.refresh()

    def job(self, job: Job) -> None:
        self._status = job.status
        self._phase = job.progress.phase
        self._checks = job.progress.checks
        if job.best is not None:
            self._utility = job.best.utility
        if self._bar is not None:
            self._bar.n = round(min(1.0, max(0.0, job.progress.explored_share)) * 100.0, 1)
        self._refresh()

    def best(self, best: Best) -> None:
        # A late subscriber gets every earlier improvement replayed first: keep the best one.
        if self._utility is None or best.utility > self._utility:
            self._utility = best.utility
        self._refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
