"""What the engine adapters share (:mod:`deid_client.sql`, :mod:`deid_client.spark`): the
specification's roles and hierarchies, the choice of a floor, the frequency table's upload body,
deid's typed→text rule as the adapters must write it, the job on the frequency table and the
verification's error (docs/engines.md). Each adapter writes only its engine's expressions.
"""

from __future__ import annotations

import contextlib
import csv
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .builders import JobSpec, to_json
from .client import Client
from .errors import DeidError, JobFailedError
from .types import Dataset, Job, Plan, Report, Verification

#: Rows per chunk of a streamed frequency table (and per database round trip).
FETCH_ROWS = 10_000
#: Default largest frequency table sent to deid before a floor is chosen.
DEFAULT_MAX_GROUPS = 1_000_000
#: Prefix of the names the adapters give to temporary tables and helper columns.
PREFIX = "deid_"

# deid's typed→text rule (docs/engines.md, "Typed values as text"): NULL → the empty value;
# integers → decimal digits; decimals → exactly their scale's fraction digits; floats → the
# shortest decimal that reads back as the same number in its width, without exponent (-0.0 →
# 0; NaN, Infinity, -Infinity); booleans →
# true/false; dates → YYYY-MM-DD for years 1–9999 (others refused); timestamps → UTC
# YYYY-MM-DDTHH:MM:SS, then "." and the fraction without trailing zeros when not zero, then "Z"
# (a timestamp without time zone: its wall time as UTC); text as is (no normalization). Other
# types are refused for the columns sent.

#: Seconds from 1970-01-01T00:00:00Z to 0001-01-01T00:00:00Z, the first instant the rule writes.
FIRST_EPOCH_SECOND = -62135596800
#: Seconds from 1970-01-01T00:00:00Z to 10000-01-01T00:00:00Z, the first instant it refuses.
END_EPOCH_SECOND = 253402300800
#: The rule's first and last dates (ISO 8601, proleptic Gregorian).
FIRST_DATE, LAST_DATE = "0001-01-01", "9999-12-31"


def plain_decimal(s: str) -> str:
    """SQL (Spark's and DuckDB's ``regexp_extract``, ``substring``, ``repeat``, ``length``) that
    writes ``s`` — the text of a finite number, ``-1.5E-7``, ``1e+21``, ``3.0`` — in the rule's
    plain notation: no exponent, no leading or trailing zeros, no ``.0``, ``0`` for zero."""
    mantissa = f"regexp_extract({s}, '^-?([0-9.]+)', 1)"
    exponent = f"CAST(coalesce(nullif(regexp_extract({s}, '[eE][+]?(-?[0-9]+)$', 1), ''), '0') AS INT)"
    whole = f"regexp_extract({mantissa}, '^([0-9]*)', 1)"
    digits = f"concat({whole}, regexp_extract({mantissa}, '[.]([0-9]*)$', 1))"
    lead = f"regexp_extract({digits}, '^(0*)', 1)"
    point = f"(length({whole}) + {exponent} - length({lead}))"  # digits before the point
    sig = f"regexp_extract({digits}, '^0*([0-9]*?)0*$', 1)"
    body = (
        f"CASE WHEN {point} <= 0 THEN concat('0.', repeat('0', -{point}), {sig}) "
        f"WHEN {point} >= length({sig}) THEN concat({sig}, repeat('0', {point} - length({sig}))) "
        f"ELSE concat(substring({sig}, 1, {point}), '.', substring({sig}, {point} + 1)) END"
    )
    return f"CASE WHEN {sig} = '' THEN '0' WHEN {s} LIKE '-%' THEN concat('-', {body}) ELSE {body} END"


def unsupported(column: str, typ: str) -> ValueError:
    """The error for a column sent whose type the rule does not cover."""
    return ValueError(
        f"column {column!r} has type {typ}, which deid's typed→text rule does not cover "
        "(integers, decimals, floats, booleans, dates, timestamps, text); cast it in a view"
    )


def out_of_range(column: str, n: int) -> ValueError:
    """The error for dates or timestamps outside the years the rule writes."""
    return ValueError(f"column {column!r}: {n} value(s) outside the years 1–9999, which deid's rule refuses")


class VerificationFailedError(DeidError):
    """The released data failed deid's verification; nothing was released (the adapter rolled
    back, erased or did not write the target). ``verification`` holds the verdict per model."""

    def __init__(self, verification: Verification, job_id: str) -> None:
        failed = [m.model for m in verification.models if not m.passed]
        super().__init__(f"verification of job {job_id} failed for: {', '.join(failed) or '?'}")
        self.verification = verification
        self.job_id = job_id


@dataclass
class AdapterResult:
    """What an adapter did (:class:`deid_client.sql.SqlResult`,
    :class:`deid_client.spark.SparkResult`)."""

    #: The finished job (its id finds the report, plan and verification again).
    job: Job
    #: The job's report (records, not frequency rows: ``report.rows`` is the source's rows).
    report: Report
    #: The plan applied in the engine.
    plan: Plan
    #: The floor: quasi-identifier → the level its values were sent at (empty: level 0).
    floor: dict[str, int]
    #: Rows of the frequency table at level 0 (Spark: estimated) and as sent (exact).
    groups_level0: int
    groups: int
    #: Source rows the plan does not cover (suppressed); 0 on the data the plan was made on.
    uncovered_rows: int
    #: deid's verdict on the released data.
    verification: Verification
    #: Rows released (suppressed ones included unless the mode is ``remove``).
    rows_written: int
    #: Seconds per phase: profile, group (frequency table and upload), search, apply_verify
    #: (apply, write, verification).
    timings: dict[str, float] = field(default_factory=dict)
    #: Notes for the user (e.g. a floor was chosen).
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the specification


@dataclass
class Hierarchy:
    """A hierarchy table: level-0 value → its row (level j at index j)."""

    rows: dict[str, list[str]]
    height: int


@dataclass
class Columns:
    """The roles of the source's columns, from the specification."""

    qis: list[str]
    sensitive: list[str]
    micro: list[str]
    identifying: list[str]
    hierarchies: dict[str, Hierarchy]
    max_level: dict[str, int]

    @property
    def sent(self) -> list[str]:
        """The columns of the frequency table (without the count), in its order."""
        return self.qis + self.sensitive + self.micro


def parse_hierarchy(column: str, source: Any) -> Hierarchy | None:
    """The table of an inline CSV hierarchy (``{"csv": …, "delimiter": …}``); None for other
    sources (builders, stored: usable at level 0 only)."""
    if not isinstance(source, Mapping) or "csv" not in source:
        return None
    text = source["csv"]
    delimiter = source.get("delimiter") or ";"
    rows: dict[str, list[str]] = {}
    height = 0
    for row in csv.reader(io.StringIO(text), delimiter=delimiter):
        if not row:
            continue
        height = max(height, len(row))
        if rows.get(row[0], row) != row:
            raise ValueError(
                f"attributes.{column}.hierarchy: a value is listed twice with different generalizations"
            )
        rows[row[0]] = row
    return Hierarchy(rows, height)


def highest_floor(h: Hierarchy, max_level: int | None, marker: str) -> int:
    """The highest level a floor may use: at most ``max_level``, and below the first level with
    a label equal to the suppression marker (deid refuses data holding the marker)."""
    top = h.height - 1 if max_level is None else min(h.height - 1, max_level)
    for level in range(1, top + 1):
        if any(len(r) > level and r[level] == marker for r in h.rows.values()):
            return level - 1
    return top


def raw_spec(spec: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
    """The specification as JSON, without the ``dataset_id`` a :class:`JobSpec` carries."""
    raw: dict[str, Any] = dict(to_json(spec) if isinstance(spec, JobSpec) else spec)
    if isinstance(spec, JobSpec):
        raw.pop("dataset_id", None)
    return raw


def columns(spec: Mapping[str, Any], names: Sequence[str], caller: str) -> Columns:
    """The roles of ``names`` (the source's columns, in order) by the specification; ValueError
    naming the field for a column that does not exist, an unknown role, no quasi-identifier or
    a key the adapter sets itself (``caller`` names the adapter's function)."""
    attributes = spec.get("attributes")
    if not isinstance(attributes, Mapping) or not attributes:
        raise ValueError("spec.attributes: expected an object naming the columns' roles")
    cols = Columns([], [], [], [], {}, {})
    marker = spec.get("suppression_marker") or "*"
    for name, attr in attributes.items():
        if name not in names:
            raise ValueError(f"spec.attributes.{name}: no such column in the source (columns: {', '.join(names)})")
        kind = attr.get("type") if isinstance(attr, Mapping) else None
        if kind == "quasi_identifying" and attr.get("microaggregation") is not None:
            cols.micro.append(name)
        elif kind == "quasi_identifying":
            cols.qis.append(name)
            h = parse_hierarchy(name, attr.get("hierarchy"))
            if h is not None:
                cols.hierarchies[name] = h
                cols.max_level[name] = highest_floor(h, attr.get("max_level"), marker)
        elif kind == "sensitive":
            cols.sensitive.append(name)
        elif kind == "identifying":
            cols.identifying.append(name)
        elif kind not in ("insensitive", None):
            raise ValueError(f"spec.attributes.{name}.type: unknown role {kind!r}")
    if not cols.qis and not cols.micro:
        raise ValueError("spec.attributes: no quasi-identifier")
    for key in ("dataset_id", "input", "count_column"):
        if spec.get(key) is not None:
            raise ValueError(f"spec.{key}: set by {caller}; leave it out")
    if any(n.startswith(PREFIX) for n in names):
        raise ValueError(f"source column names may not start with {PREFIX!r}")
    order = {n: i for i, n in enumerate(names)}
    for group in (cols.qis, cols.sensitive, cols.micro):
        group.sort(key=order.__getitem__)
    return cols


#: The privacy models that read no sensitive value (every other model names the sensitive column
#: it reads with ``attribute``: ℓ-diversity, t-closeness, δ-disclosure, β-likeness).
MODELS_WITHOUT_SENSITIVE = frozenset(
    {"k-anonymity", "average-risk", "sample-uniqueness", "population-uniqueness", "k-map", "delta-presence",
     "differential-privacy"}
)


def sensitive_read(spec: Mapping[str, Any]) -> bool:
    """Whether a privacy model of ``spec`` may read sensitive values: a model outside
    :data:`MODELS_WITHOUT_SENSITIVE`, or an entry of ``privacy`` that is neither a model's text
    nor an object naming its ``model`` (what cannot be read here counts as reading)."""
    models = spec.get("privacy")
    if not isinstance(models, Sequence) or isinstance(models, (str, bytes)):
        return True
    for m in models:
        if isinstance(m, str):
            name = m.split("(", 1)[0]
        elif isinstance(m, Mapping) and isinstance(m.get("model"), str):
            name = m["model"]
        else:
            return True
        if name.strip().lower() not in MODELS_WITHOUT_SENSITIVE:
            return True
    return False


def sensitive_stand_ins(spec: Mapping[str, Any], plan: Plan) -> tuple[str, str] | None:
    """What the verification sends in place of sensitive values: None (the values) when a model
    may read them (:func:`sensitive_read`), otherwise (the plan's marker, a text that is not the
    marker) — the marker for a cell that is the marker, the other text for any other cell. The
    verifier needs only whether the cell is the marker (the suppressed block of the ``mask``
    mode is recognised by it), so the released table is grouped by its quasi-identifiers alone:
    10 M rows give the output classes, not 1.8 M (quasi-identifier, sensitive) tuples."""
    if sensitive_read(spec):
        return None
    marker = plan.suppression.marker
    return marker, ("" if marker != "" else "-")


# ---------------------------------------------------------------- the floor


def choose_floor(
    cols: Columns, level0: int, max_groups: int, count: Callable[[Sequence[dict[str, int]]], Sequence[int]]
) -> tuple[int, dict[str, int]]:
    """(groups at the floor, the floor: quasi-identifier → level > 0) for a frequency table of
    ``level0`` rows at level 0. While it has more than ``max_groups`` rows, each
    quasi-identifier with an inline hierarchy below its highest floor is raised by one level in
    a trial; ``count`` gives the rows of every trial (one scan) and the smallest wins (the first
    on ties)."""
    floor: dict[str, int] = {}
    groups = level0
    while groups > max_groups:
        candidates = [c for c in cols.qis if c in cols.hierarchies and floor.get(c, 0) < cols.max_level[c]]
        if not candidates:
            raise too_many_groups(groups, max_groups)
        trials = [{**floor, c: floor.get(c, 0) + 1} for c in candidates]
        counts = count(trials)
        best = min(range(len(trials)), key=lambda j: (counts[j], j))
        floor, groups = trials[best], int(counts[best])
    return groups, {c: lvl for c, lvl in floor.items() if lvl > 0}


def floor_chain(cols: Columns) -> list[dict[str, int]]:
    """Floors from level 0 up, each one level above the previous in one quasi-identifier: the
    one (with an inline hierarchy, below its highest floor) whose hierarchy has the most labels
    per label of the next level there (the first on ties) — the raise that shrinks the product
    of the columns' domains most. The first floor is level 0 (empty)."""
    labels = {
        c: [len({r[min(lvl, len(r) - 1)] for r in h.rows.values()}) for lvl in range(h.height)]
        for c, h in cols.hierarchies.items()
    }
    floor: dict[str, int] = {}
    chain = [dict(floor)]
    while True:
        candidates = [c for c in cols.qis if c in labels and floor.get(c, 0) < cols.max_level[c]]
        if not candidates:
            return chain
        ratio = {c: labels[c][floor.get(c, 0)] / max(1, labels[c][floor.get(c, 0) + 1]) for c in candidates}
        best = max(candidates, key=lambda c: (ratio[c], -candidates.index(c)))
        floor[best] = floor.get(best, 0) + 1
        chain.append(dict(floor))


def pick_floor(chain: Sequence[dict[str, int]], counts: Sequence[int], max_groups: int) -> tuple[int, dict[str, int]]:
    """(groups, floor): the first floor of ``chain`` whose frequency table (``counts`` rows) has
    at most ``max_groups`` rows; ValueError when none has."""
    for floor, groups in zip(chain, counts):
        if groups <= max_groups:
            return int(groups), dict(floor)
    raise too_many_groups(int(counts[-1]), max_groups)


def too_many_groups(groups: int, max_groups: int) -> ValueError:
    """The error for a frequency table above ``max_groups`` at the highest floor."""
    return ValueError(
        f"the frequency table has {groups} rows at the highest floor the hierarchies allow, more "
        f"than max_groups={max_groups}: raise max_groups or give hierarchies (inline CSV) for more "
        "quasi-identifiers"
    )


def floor_warning(level0: int, max_groups: int, floor: Mapping[str, int], groups: int) -> list[str]:
    """The note the result carries when a floor was chosen."""
    if not floor:
        return []
    return [
        f"the frequency table had {level0} rows at level 0, more than max_groups={max_groups}: sent at the "
        f"floor {dict(floor)} ({groups} rows)"
    ]


# ---------------------------------------------------------------- upload (one switchable format)


class _ChunkReader(io.RawIOBase):
    """A binary file object over an iterator of byte chunks (a streamed request body)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buffer))
        b[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def csv_cell(value: str) -> str:
    """A CSV cell as :func:`csv_chunks` writes it: quoted (quotes doubled) when it holds ``,``,
    a quote or a line break."""
    if any(ch in value for ch in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def csv_chunks(header: Sequence[str], rows: Iterable[Sequence[Any]], rows_per_chunk: int = FETCH_ROWS) -> Iterator[bytes]:
    """The frequency table as CSV (``,``, LF, quoted where needed), a chunk at a time."""
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=",", lineterminator="\n")
    writer.writerow(header)
    for n, row in enumerate(rows, 1):
        writer.writerow(row)
        if n % rows_per_chunk == 0:
            yield buf.getvalue().encode("utf-8")
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode("utf-8")


def body(header: Sequence[str], rows: Iterable[Sequence[Any]], upload_format: str) -> Any:
    """The request body of a frequency table in ``upload_format`` (today ``csv``), streamed:
    ``rows`` are read as the body is sent."""
    if upload_format != "csv":
        raise ValueError(f"upload_format: expected 'csv', got {upload_format!r}")
    return io.BufferedReader(_ChunkReader(csv_chunks(header, rows)))


def count_name(names: Sequence[str]) -> str:
    """A count column's name that is none of ``names``."""
    name, i = "count", 0
    while name in names:
        i += 1
        name = f"count_{i}"
    return name


# ---------------------------------------------------------------- the job and the plan


def job_spec(raw: Mapping[str, Any], cols: Columns, dataset_id: str, floor: Mapping[str, int]) -> dict[str, Any]:
    """The job on the frequency table: the attributes of its columns only (identifiers and
    copied columns stay in the engine), ``data_level`` for the floor."""
    spec = dict(raw)
    spec["dataset_id"] = dataset_id
    attributes = {k: dict(v) for k, v in raw["attributes"].items() if k in cols.sent}
    for col, lvl in floor.items():
        attributes[col]["data_level"] = lvl
    spec["attributes"] = attributes
    return spec


def run_job(
    client: Client, raw: Mapping[str, Any], cols: Columns, dataset_id: str, floor: Mapping[str, int],
    timeout: float | None, progress: bool | None,
) -> Job:
    """Submits the job on the uploaded frequency table and waits for it (Ctrl-C cancels it);
    JobFailedError unless it succeeds."""
    job = client.submit_job(job_spec(raw, cols, dataset_id, floor))
    try:
        job = client.wait(job, timeout=timeout, progress=progress)
    except KeyboardInterrupt:
        with contextlib.suppress(DeidError):
            client.cancel_job(job.id)
        raise
    if job.status != "succeeded":
        raise JobFailedError(job)
    return job


def uploader(client: Client, count_column: str) -> Callable[[Any], Dataset]:
    """Uploads a frequency table (a streamed CSV body, or a path ending in ``.parquet``) with
    its count column."""

    def upload(data: Any) -> Dataset:
        return client.upload_dataset(data, name=f"{PREFIX}frequencies", delimiter=",", count_column=count_column)

    return upload


@contextlib.contextmanager
def searched(
    client: Client, raw: Mapping[str, Any], cols: Columns, dataset_id: str, floor: Mapping[str, int],
    timeout: float | None, progress: bool | None, keep_dataset: bool,
) -> Iterator[tuple[Job, Report, Plan]]:
    """The job on the uploaded frequency table, its report and its plan (:func:`run_job`); the
    frequency table is deleted when the block ends, unless ``keep_dataset``."""
    try:
        job = run_job(client, raw, cols, dataset_id, floor, timeout, progress)
        yield job, client.get_result(job.id), client.get_plan(job.id)
    finally:
        if not keep_dataset:
            forget(client, dataset_id)


def check_plan(cols: Columns, plan: Plan) -> None:
    """The plan is for these quasi-identifiers and has a step."""
    if sorted(plan.quasi_identifiers) != sorted(cols.qis) or sorted(plan.microaggregated) != sorted(cols.micro):
        raise DeidError("the plan's quasi-identifiers are not the job's: was the specification changed?")
    if not plan.steps:
        raise DeidError("the plan has no step")


#: Most rows of a table of combinations of several columns' values (the adapters' combined
#: joins: one join for several small maps).
COMBINED_ROWS = 65_536


def combine(sizes: Sequence[int], factor: int = 1) -> list[list[int]]:
    """Indices of ``sizes`` in groups whose tables of combinations stay within
    ``COMBINED_ROWS`` rows: greedily, smallest first, while ``factor`` times the product of the
    group's sizes fits; a larger one has a group of its own. Each group is sorted."""
    groups: list[list[int]] = []
    current: list[int] = []
    rows = factor
    for i in sorted(range(len(sizes)), key=lambda i: (sizes[i], i)):
        if current and rows * max(1, sizes[i]) > COMBINED_ROWS:
            groups.append(current)
            current, rows = [], factor
        current.append(i)
        rows *= max(1, sizes[i])
    if current:
        groups.append(current)
    return [sorted(g) for g in groups]


@dataclass
class Codes:
    """Integer codes of the maps' outputs, per step and quasi-identifier, so that the apply of
    both adapters joins a row's tuple of outputs with the published and suppressed tuples on
    one 64-bit integer: output ``o`` of quasi-identifier ``i`` at step ``s`` has the code
    ``codes[s][i][o]``, and a tuple the key Σ code·stride with ``strides[s][i]`` the product of
    the code counts before ``i``. ``None`` when some step's key would not fit in 63 bits (the
    join is then on the texts)."""

    codes: list[list[dict[str, int]]]
    strides: list[list[int]]

    @staticmethod
    def of(plan: Plan) -> "Codes | None":
        codes = [[{o: k for k, o in enumerate(sorted(set(m.values())))} for m in step.maps] for step in plan.steps]
        strides = []
        for step in codes:
            stride, row = 1, []
            for c in step:
                row.append(stride)
                stride *= max(1, len(c))
            if stride >= 1 << 63:
                return None
            strides.append(row)
        return Codes(codes, strides)

    def key(self, s: int, values: Sequence[str], qis: Sequence[int] | None = None) -> int | None:
        """The key of output ``values`` at step ``s`` of the quasi-identifiers ``qis`` (all when
        None; of some, a part of a tuple's key); ``None`` when no row can reach them (a value
        that step's maps never give)."""
        key = 0
        for i, v in zip(range(len(values)) if qis is None else qis, values):
            k = self.codes[s][i].get(v)
            if k is None:
                return None
            key += k * self.strides[s][i]
        return key


def forget(client: Client, dataset_id: str) -> None:
    """Deletes the uploaded frequency table (regulated data); a job still using it keeps it."""
    with contextlib.suppress(DeidError):
        client.delete_dataset(dataset_id)
