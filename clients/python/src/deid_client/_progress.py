"""The progress bar of ``wait()``: the explored share of the solution space, with the search
phase, the checks and the utility of the best transformation so far.

The bar is drawn by tqdm, an optional dependency (``pip install 'deid-client[progress]'``):
without it ``wait()`` works the same and shows nothing.
"""

from __future__ import annotations

import sys
import warnings
from typing import IO, TYPE_CHECKING, Any

from .types import Best, Job

if TYPE_CHECKING:
    from tqdm import tqdm as Tqdm


def _tqdm_class() -> Any:
    """tqdm's bar class, or None when tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def wants_bar(progress: bool | None, file: IO[str] | None) -> bool:
    """Whether ``wait()`` draws a bar: ``progress=True`` asks for one, ``False`` refuses it,
    ``None`` (the default) draws one when a ``progress_file`` is given or stderr is a terminal."""
    if progress is not None:
        return progress
    if file is not None:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


class ProgressBar:
    """A tqdm bar following one job (inert when not wanted or tqdm is missing)."""

    def __init__(self, job_id: str, progress: bool | None, file: IO[str] | None = None) -> None:
        self._bar: Tqdm[Any] | None = None
        if wants_bar(progress, file):
            tqdm = _tqdm_class()
            if tqdm is None:
                if progress:
                    warnings.warn(
                        "wait(progress=True) shows no progress bar without tqdm: "
                        "pip install 'deid-client[progress]'",
                        RuntimeWarning,
                        stacklevel=3,
                    )
            else:
                self._bar = tqdm(
                    total=100.0,
                    desc=f"job {job_id[:13]}",
                    unit="%",
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}{postfix}",
                    file=file if file is not None else sys.stderr,
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
