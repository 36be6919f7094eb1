#!/usr/bin/env python3
"""A nightly release job: anonymize a CSV with deid, verify the result independently with
pyCANON, and publish it only if everything holds.

    python examples/pipeline.py examples/adult/adult.csv \\
        --qi age,sex,race,marital-status,education --sensitive salary-class \\
        --k 5 --l 2 --suppression-limit 0.02 --time-limit 30s \\
        --output out/adult-anonymized.csv --report out/adult-report.json

Steps: upload the CSV; store a hierarchy per quasi-identifier (``--hierarchy COL=FILE``, else
the ARX-layout file ``<name>_hierarchy_<COL>.csv`` beside the input, else the builder
specification deid suggests for the column); run a time-limited job (k-anonymity and, with
``--l``, ℓ-diversity of every sensitive attribute) while printing its progress; download the
result; check it with pyCANON; write it (and the report) out; delete the uploaded dataset.

Suppressed records are written by deid with every quasi-identifier and sensitive value
replaced by the marker (``*``, the default ``suppressed: mask``). The verification takes them
out as one block: they must be exactly the records the report counts as suppressed, within the
suppression limit, and disclose nothing (every quasi-identifier and sensitive value is the
marker); the remaining records must satisfy k-anonymity and ℓ-diversity by pyCANON's count.

The service comes from ``--url`` or ``$DEID_URL`` (default http://127.0.0.1:8080), the API key
from ``--api-key`` or ``$DEID_API_KEY``.

Exit status (for the scheduler):

  0  publish: the result was verified and written to --output
  1  unexpected error (a bug: see the traceback)
  2  bad input or configuration: arguments, files, or the service rejected the data,
     hierarchies or specification (4xx); fix the job before the next run
  3  no anonymous result: no transformation satisfies the models within the suppression
     limit and time limit; nothing written
  4  verification failed: pyCANON disagrees with deid's report; nothing written, investigate
  5  service unavailable or job did not finish (connection errors, timeouts, 429/5xx, the job
     failed for an operational reason or was cancelled); retry later

Nothing is written to --output unless the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pycanon import anonymity

from deid_client import (
    ApiError,
    Attribute,
    Client,
    DeidConnectionError,
    DeidTimeoutError,
    DistinctLDiversity,
    EntropyLDiversity,
    JobEvent,
    JobSpec,
    KAnonymity,
    RateLimitedError,
    RecursiveLDiversity,
    Report,
    ServerError,
    WaitTimeoutError,
)

PUBLISH, BUG, BAD_INPUT, NOT_ANONYMOUS, VERIFICATION_FAILED, UNAVAILABLE = 0, 1, 2, 3, 4, 5

# Job failures that are the data's or the specification's fault (the rest is operational).
INPUT_FAILURES = {"invalid_spec", "invalid_csv", "invalid_hierarchy", "hierarchy_missing_values"}


class Stop(Exception):
    """Ends the pipeline with an exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def log(msg: str) -> None:
    # Through tqdm when it is installed (deid-client[progress]), so that lines printed while the
    # progress bar is shown do not garble it.
    try:
        from tqdm import tqdm
    except ImportError:
        print(f"pipeline: {msg}", file=sys.stderr, flush=True)
    else:
        tqdm.write(f"pipeline: {msg}", file=sys.stderr)


# ---------------------------------------------------------------- verification


@dataclass
class Verification:
    ok: bool = True
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, **facts: Any) -> None:
        self.checks.append({"check": name, "passed": bool(passed), **facts})
        if not passed:
            self.ok = False


def verify(
    df: pd.DataFrame,
    *,
    qis: list[str],
    sensitive: list[str],
    k: int,
    l: float | None = None,  # noqa: E741
    l_model: str = "distinct",
    c: float | None = None,
    suppression_limit: float,
    marker: str = "*",
    mode: str = "mask",
    rows: int,
    suppressed_rows: int | None,
) -> Verification:
    """Checks an anonymized table with pyCANON (all values as text, as written by deid)."""
    v = Verification()
    if mode == "remove":
        block = df.iloc[0:0]
        rest = df
        n_suppressed = rows - len(df)
    else:
        is_suppressed = (df[qis] == marker).all(axis=1)
        block = df[is_suppressed]
        rest = df[~is_suppressed]
        n_suppressed = len(block)
    if mode != "remove":
        v.check("row count", len(df) == rows, rows=len(df), expected=rows)
    if suppressed_rows is not None:
        v.check("suppressed rows as reported", n_suppressed == suppressed_rows, found=n_suppressed, reported=suppressed_rows)
    limit = math.floor(suppression_limit * rows + 1e-9)
    v.check("suppression limit", n_suppressed <= limit, suppressed=n_suppressed, limit=limit)
    if mode == "mask" and len(block):
        leaked = [s for s in sensitive if not (block[s] == marker).all()]
        v.check("suppressed records disclose nothing", not leaked, leaking_columns=leaked)

    # pyCANON indexes equivalence classes by position: give it a fresh index.
    rest = rest.reset_index(drop=True)
    if len(rest) == 0:
        v.check("published records", False, published=0)
        return v
    k_found = int(anonymity.k_anonymity(rest, qis))
    v.check("k-anonymity (pyCANON)", k_found >= k, k=k_found, required=k)
    if mode == "keep_sensitive" and len(block):
        # The suppressed block keeps its sensitive values: it must satisfy the models as a class.
        v.check("suppressed block k-anonymity", len(block) >= k, size=len(block), required=k)
    if l is not None:
        for s in sensitive:
            parts = [("published records", rest)]
            if mode == "keep_sensitive" and len(block):
                parts.append(("suppressed block", block.reset_index(drop=True)))
            for where, part in parts:
                if l_model == "distinct":
                    found = int(anonymity.l_diversity(part, qis, [s]))
                    v.check(f"distinct l-diversity of {s} ({where}, pyCANON)", found >= l, l=found, required=l)
                elif l_model == "entropy":
                    # pyCANON rounds exp(entropy) down to an integer: an integer l is checked
                    # exactly, a fractional one needs the next integer (conservative).
                    found = int(anonymity.entropy_l_diversity(part, qis, [s]))
                    v.check(f"entropy l-diversity of {s} ({where}, pyCANON)", found >= math.ceil(l), l=found, required=l)
                elif l_model == "recursive":
                    c_found, l_found = anonymity.recursive_c_l_diversity(part, qis, [s])
                    # pyCANON gives the smallest integer c for its own (largest) l; that c
                    # satisfying the configured one at an l at least as large is sufficient.
                    ok = l_found >= l and c is not None and not math.isnan(float(c_found)) and float(c_found) <= c
                    v.check(
                        f"recursive (c,l)-diversity of {s} ({where}, pyCANON)",
                        ok,
                        c=None if math.isnan(float(c_found)) else float(c_found),
                        l=int(l_found),
                        required_c=c,
                        required_l=l,
                    )
    return v


# ---------------------------------------------------------------- the job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Anonymize a CSV with deid, verify it with pyCANON, publish it.",
        epilog="Exit status: 0 publish, 2 bad input, 3 not anonymous, 4 verification failed, "
        "5 service unavailable / job unfinished, 1 bug.",
    )
    p.add_argument("input", type=Path, help="the CSV to anonymize (with a header)")
    p.add_argument("--delimiter", help="field delimiter of the input (default: detected)")
    p.add_argument("--qi", required=True, help="quasi-identifiers, comma-separated")
    p.add_argument("--sensitive", default="", help="sensitive attributes, comma-separated")
    p.add_argument("--identifying", default="", help="identifiers (removed), comma-separated")
    p.add_argument("--hierarchy", action="append", default=[], metavar="COL=FILE", help="ARX hierarchy of a quasi-identifier")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--l", type=float, help="ℓ-diversity of every sensitive attribute")
    p.add_argument("--l-model", choices=["distinct", "entropy", "recursive"], default="distinct")
    p.add_argument("--c", type=float, help="c of recursive (c,ℓ)-diversity")
    p.add_argument("--suppression-limit", type=float, default=0.02)
    p.add_argument("--quality", default="loss")
    p.add_argument("--algorithm", default="auto")
    p.add_argument("--time-limit", default="30s", help="search time limit (deid syntax: 500ms, 30s, 5m)")
    p.add_argument("--wait-timeout", type=float, default=600.0, help="seconds to wait for the job before giving up (it is cancelled)")
    p.add_argument("--output", type=Path, required=True, help="where the verified CSV goes")
    p.add_argument("--report", type=Path, help="where deid's report and the verification go (JSON)")
    p.add_argument("--url", default=os.environ.get("DEID_URL"))
    p.add_argument("--api-key", default=None, help="default: $DEID_API_KEY")
    p.add_argument("--keep-dataset", action="store_true", help="do not delete the uploaded dataset")
    p.add_argument("--progress", action="store_true", help="a progress bar on stderr even when it is not a terminal")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (improvements are still printed)")
    args = p.parse_args(argv)
    split = lambda s: [c.strip() for c in s.split(",") if c.strip()]  # noqa: E731
    args.qi, args.sensitive, args.identifying = split(args.qi), split(args.sensitive), split(args.identifying)
    if args.l is not None and not args.sensitive:
        p.error("--l needs --sensitive")
    if args.l_model == "recursive" and args.l is not None and args.c is None:
        p.error("--l-model recursive needs --c")
    hier: dict[str, Path] = {}
    for h in args.hierarchy:
        col, sep, path = h.partition("=")
        if not sep:
            p.error(f"--hierarchy {h!r}: expected COL=FILE")
        hier[col] = Path(path)
    args.hierarchy = hier
    return args


def hierarchy_sources(args: argparse.Namespace) -> dict[str, Path | None]:
    """The hierarchy file of each quasi-identifier (None: use deid's suggested builder)."""
    out: dict[str, Path | None] = {}
    for col in args.qi:
        if col in args.hierarchy:
            path = args.hierarchy[col]
            if not path.is_file():
                raise Stop(BAD_INPUT, f"no hierarchy file {path}")
            out[col] = path
        else:
            beside = args.input.with_name(f"{args.input.stem}_hierarchy_{col}.csv")
            out[col] = beside if beside.is_file() else None
    return out


def privacy_models(args: argparse.Namespace) -> list[Any]:
    models: list[Any] = [KAnonymity(args.k)]
    if args.l is not None:
        for s in args.sensitive:
            if args.l_model == "distinct":
                models.append(DistinctLDiversity(s, int(args.l)))
            elif args.l_model == "entropy":
                models.append(EntropyLDiversity(s, args.l))
            else:
                models.append(RecursiveLDiversity(s, args.c, int(args.l)))
    return models


def run(args: argparse.Namespace) -> int:
    if not args.input.is_file():
        raise Stop(BAD_INPUT, f"no input file {args.input}")
    sources = hierarchy_sources(args)
    with Client(args.url, api_key=args.api_key, timeout=60.0) as deid:
        ds = deid.upload_dataset(args.input, delimiter=args.delimiter)
        log(f"uploaded {args.input} as dataset {ds.id}: {ds.rows} rows, {len(ds.columns)} columns")
        try:
            return anonymize(deid, args, ds.id, sources)
        finally:
            if not args.keep_dataset:
                try:
                    deid.delete_dataset(ds.id)
                except ApiError as e:  # the job may still hold it; the service keeps results
                    log(f"dataset {ds.id} not deleted: {e}")


def anonymize(deid: Client, args: argparse.Namespace, dataset_id: str, sources: dict[str, Path | None]) -> int:
    ds = deid.get_dataset(dataset_id)
    columns = {c.name for c in ds.columns}
    unknown = [c for c in [*args.qi, *args.sensitive, *args.identifying] if c not in columns]
    if unknown:
        raise Stop(BAD_INPUT, f"no such column in {args.input.name}: {', '.join(unknown)}")
    attributes: dict[str, Attribute] = {}
    for col, path in sources.items():
        if path is not None:
            h = deid.put_hierarchy(dataset_id, col, path)
            log(f"hierarchy of {col}: {h.levels} levels, {h.rows} values ({path.name})")
            attributes[col] = Attribute.quasi_identifying()
        else:
            spec = ds.column(col).suggested_hierarchy
            if spec is None:
                raise Stop(BAD_INPUT, f"no hierarchy for {col}: give --hierarchy {col}=FILE")
            log(f"hierarchy of {col}: deid's suggestion {json.dumps(spec)}")
            attributes[col] = Attribute.quasi_identifying(spec)
    for col in args.sensitive:
        attributes[col] = Attribute.sensitive()
    for col in args.identifying:
        attributes[col] = Attribute.identifying()

    spec = JobSpec(
        dataset_id=dataset_id,
        attributes=attributes,
        privacy=privacy_models(args),
        suppression_limit=args.suppression_limit,
        quality=args.quality,
        algorithm=args.algorithm,
        time_limit=args.time_limit,
    )
    job = deid.submit_job(spec)
    log(f"job {job.id} queued: {', '.join(str(m) for m in spec.privacy)}, time limit {args.time_limit}")

    def on_event(ev: JobEvent) -> None:
        if ev.event == "improvement" and ev.best is not None:
            b = ev.best
            log(f"improvement: utility {b.utility:.4f}, {b.suppressed_rows} suppressed, found by {b.strategy or '?'} after {b.elapsed_ms} ms")

    # A bar when stderr is a terminal (a scheduler's log gets the improvements only).
    progress = False if args.no_progress else (True if args.progress else None)
    try:
        job = deid.wait(job, timeout=args.wait_timeout, progress=progress, on_event=on_event)
    except WaitTimeoutError as e:
        deid.cancel_job(job.id)
        raise Stop(UNAVAILABLE, f"job {job.id} did not end within {args.wait_timeout:g} s; cancelled") from e
    if job.status == "failed":
        err = job.error
        code = err.code if err else "unknown"
        msg = f"job {job.id} failed: {code}: {err.message if err else ''}"
        if code == "no_solution":
            raise Stop(NOT_ANONYMOUS, msg)
        raise Stop(BAD_INPUT if code in INPUT_FAILURES else UNAVAILABLE, msg)
    if job.status == "cancelled":
        raise Stop(UNAVAILABLE, f"job {job.id} was cancelled")

    report = deid.get_result(job.id)
    log(
        f"job {job.id} {job.status}: anonymous={report.anonymous}, utility {report.utility}, "
        f"{report.suppressed_rows} suppressed, {report.checks} checks, stop: {report.stop}, "
        f"optimal proven: {report.optimal_proven}"
    )
    if not report.anonymous:
        raise Stop(NOT_ANONYMOUS, "no transformation satisfies the models within the limits")

    args.output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{args.output.name}.", suffix=".unverified", dir=args.output.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        deid.download_result(job.id, tmp)
        verification = verify_download(tmp, args, report)
        write_report(args, job.id, report, verification)
        if not verification.ok:
            failed = [c["check"] for c in verification.checks if not c["passed"]]
            raise Stop(VERIFICATION_FAILED, "pyCANON verification failed: " + "; ".join(failed))
        os.replace(tmp, args.output)
    finally:
        tmp.unlink(missing_ok=True)
    log(f"verified and written: {args.output}")
    return PUBLISH


def verify_download(path: Path, args: argparse.Namespace, report: Report) -> Verification:
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    delimiter = max([",", ";", "\t", "|"], key=first.count)
    df = pd.read_csv(path, sep=delimiter, dtype=str, keep_default_na=False, na_filter=False)
    supp = report.suppression
    v = verify(
        df,
        qis=args.qi,
        sensitive=args.sensitive,
        k=args.k,
        l=args.l,
        l_model=args.l_model,
        c=args.c,
        suppression_limit=args.suppression_limit,
        marker=(supp.marker if supp and supp.marker else "*"),
        mode=(supp.mode if supp and supp.mode else "mask"),
        rows=report.rows,
        suppressed_rows=report.suppressed_rows,
    )
    for c in v.checks:
        log(("ok    " if c["passed"] else "FAIL  ") + c["check"] + " " + json.dumps({k: x for k, x in c.items() if k not in ("check", "passed")}))
    return v


def write_report(args: argparse.Namespace, job_id: str, report: Report, v: Verification) -> None:
    if args.report is None:
        return
    args.report.parent.mkdir(parents=True, exist_ok=True)
    doc = {"job_id": job_id, "publish": v.ok, "verification": v.checks, "report": report.raw}
    args.report.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except Stop as e:
        log(str(e))
        return e.status
    except (DeidConnectionError, DeidTimeoutError, RateLimitedError, ServerError) as e:
        log(f"service unavailable: {e}")
        return UNAVAILABLE
    except ApiError as e:
        field = f" (field {e.field})" if e.field else ""
        log(f"rejected by the service: {e}{field}")
        return BAD_INPUT
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        log(f"bad input: {e}")
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
