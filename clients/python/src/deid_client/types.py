"""The API's response types, written by hand after ``openapi.yaml`` (``components/schemas``).

Each class is a dataclass whose fields are the schema's properties, with the JSON names
(``Job.links.self`` is ``JobLinks.self_``); required properties are fields without a default,
optional ones default to ``None`` (or an empty container). ``tests/test_openapi_types.py``
checks every modelled schema against these classes in both directions, so a property added to
or removed from ``openapi.yaml`` fails the tests until the types follow.

Unknown properties in answers are ignored (a newer service may add some), and every object
keeps its JSON as ``raw``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types as _pytypes
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "JobStatusName",
    "ErrorCode",
    "TERMINAL_STATUSES",
    "Status",
    "Column",
    "Dataset",
    "DatasetPage",
    "HierarchySummary",
    "HierarchyTable",
    "Best",
    "Progress",
    "JobLinks",
    "ErrorInfo",
    "Job",
    "JobPage",
    "QualityScore",
    "Risk",
    "Suppression",
    "SubsetReport",
    "DpReport",
    "Timings",
    "TraceEntry",
    "Candidate",
    "ValueCount",
    "ValueDistribution",
    "AttributeValues",
    "Report",
    "Evaluation",
    "RiskAnalysis",
    "TaskName",
    "JobEvent",
    "from_json",
]

JobStatusName = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TaskName = Literal["anonymize", "evaluate", "risk"]
ErrorCode = Literal[
    "malformed_json",
    "invalid_query",
    "invalid_request",
    "upload_interrupted",
    "unauthorized",
    "route_not_found",
    "dataset_not_found",
    "job_not_found",
    "column_not_found",
    "hierarchy_not_found",
    "method_not_allowed",
    "request_timeout",
    "dataset_in_use",
    "job_finished",
    "result_not_available",
    "payload_too_large",
    "too_many_rows",
    "too_many_columns",
    "invalid_spec",
    "invalid_csv",
    "invalid_hierarchy",
    "hierarchy_missing_values",
    "no_solution",
    "not_anonymous",
    "output_too_large",
    "too_many_requests",
    "queue_full",
    "internal_error",
    "storage_error",
    "dataset_unreadable",
    "worker_lost",
    "not_ready",
]
"""The API's error codes (``ErrorCode`` in openapi.yaml); a newer service may send others."""
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})

T = TypeVar("T")


def _json_name(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("json", f.name))


def _parse_datetime(value: str) -> datetime:
    # fromisoformat accepts "Z" only from Python 3.11 on.
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


def _same(value: Any) -> Any:
    return value


@functools.lru_cache(maxsize=None)
def _decoder(tp: Any) -> Callable[[Any], Any]:
    """The function that decodes a JSON value of type ``tp`` (None stays None), built once per
    type: a plan's hundreds of thousands of classes are decoded without looking at their type
    hints again."""
    origin = get_origin(tp)
    inner: Callable[[Any], Any]
    if origin is Union or (sys.version_info >= (3, 10) and origin is _pytypes.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        inner = _decoder(members[0]) if len(members) == 1 else _same
    elif origin is list:
        (item,) = get_args(tp)
        if _plain(item):
            inner = list
        else:
            each = _decoder(item)
            inner = lambda value: [each(v) for v in value]  # noqa: E731
    elif origin is dict:
        _, item = get_args(tp)
        if _plain(item):
            inner = dict
        else:
            each = _decoder(item)
            inner = lambda value: {k: each(v) for k, v in value.items()}  # noqa: E731
    elif origin is Literal or tp is Any or tp is object:
        inner = _same
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        inner = functools.partial(from_json, tp)
    elif tp is datetime:
        inner = _parse_datetime
    elif tp is float:
        inner = lambda value: float(value) if isinstance(value, int) and not isinstance(value, bool) else value  # noqa: E731
    else:
        inner = _same
    return lambda value: None if value is None else inner(value)


@functools.lru_cache(maxsize=None)
def _plain(tp: Any) -> bool:
    """Whether JSON values of type ``tp`` are used as decoded (no dataclass, date or float
    inside): a list of them is copied, not walked (a plan lists millions of strings)."""
    return tp in (str, int, bool, Any, object) or get_origin(tp) is Literal


_FIELDS: dict[Any, tuple[tuple[str, str, Callable[[Any], Any]], ...]] = {}


def _fields(cls: Any) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
    """(attribute, JSON name, decoder) of a response dataclass's fields but ``raw``, computed
    once per class."""
    fields = _FIELDS.get(cls)
    if fields is None:
        hints = get_type_hints(cls)
        fields = tuple(
            (f.name, _json_name(f), _decoder(hints[f.name]))
            for f in dataclasses.fields(cls)
            if f.name != "raw"
        )
        _FIELDS[cls] = fields
    return fields


def from_json(cls: type[T], data: Any) -> T:
    """Builds a response dataclass from the decoded JSON of an answer."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for attribute, name, decode in _fields(cls):
        if name in data:
            kwargs[attribute] = decode(data[name])
    obj = cls(**kwargs)
    object.__setattr__(obj, "raw", data)
    return obj


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False, metadata={"json": None})


@dataclass
class Status:
    """``/healthz`` and ``/readyz``."""

    SCHEMA: ClassVar[str] = "Status"
    status: str
    database: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Column:
    """A column profile of a dataset."""

    SCHEMA: ClassVar[str] = "Column"
    name: str
    detected_type: Literal["integer", "decimal", "date", "code", "text"]
    distinct_count: int
    date_format: str | None = None
    code_length: int | None = None
    missing: list[str] = field(default_factory=list)
    suggested_hierarchy: dict[str, Any] | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Dataset:
    """An uploaded dataset with its column profiles and stored hierarchies."""

    SCHEMA: ClassVar[str] = "Dataset"
    id: str
    name: str
    delimiter: str
    header: bool
    size_bytes: int
    rows: int
    records: int
    """Records: the sum of a frequency table's counts, else the rows."""
    columns: list[Column]
    hierarchies: dict[str, int]
    created_at: datetime
    hierarchy_kinds: dict[str, Literal["csv", "builder"]] = field(default_factory=dict)
    count_column: str | None = None
    """A frequency table's count column (given at upload)."""
    raw: dict[str, Any] = _raw()

    def column(self, name: str) -> Column:
        """The profile of one column (KeyError if there is none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass
class DatasetPage:
    SCHEMA: ClassVar[str] = "DatasetPage"
    items: list[Dataset]
    next_cursor: str | None
    raw: dict[str, Any] = _raw()


@dataclass
class HierarchySummary:
    """The answer of storing a hierarchy."""

    SCHEMA: ClassVar[str] = "HierarchySummary"
    column: str
    kind: Literal["csv", "builder"]
    levels: int
    rows: int
    raw: dict[str, Any] = _raw()


@dataclass
class HierarchyTable:
    """A hierarchy as a table (a stored one in JSON form, or a preview)."""

    SCHEMA: ClassVar[str] = "HierarchyTable"
    column: str
    kind: Literal["csv", "builder"]
    levels: int
    rows: list[list[str]]
    spec: dict[str, Any] | None = None
    shares: list[list[float]] | None = None
    total_rows: int | None = None
    raw: dict[str, Any] = _raw()

    def to_frame(self) -> pd.DataFrame:
        """The table as a DataFrame of strings, one column per level (``level0`` = the values)."""
        from ._pandas import require_pandas

        pandas = require_pandas()
        width = max((len(r) for r in self.rows), default=self.levels)
        frame: pd.DataFrame = pandas.DataFrame(self.rows, columns=[f"level{i}" for i in range(width)], dtype=str)
        return frame


@dataclass
class Best:
    """A transformation found by a search (a job's best so far, an ``improvement`` event)."""

    SCHEMA: ClassVar[str] = "Best"
    transformation: dict[str, int]
    score: float
    utility: float
    suppressed_rows: int
    elapsed_ms: int
    checks: int
    strategy: str | None = None
    step: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Progress:
    SCHEMA: ClassVar[str] = "Progress"
    phase: str
    checks: int
    elapsed_ms: int
    explored_share: float
    raw: dict[str, Any] = _raw()


@dataclass
class JobLinks:
    SCHEMA: ClassVar[str] = "Job.links"
    self_: str | None = field(default=None, metadata={"json": "self"})
    events: str | None = None
    result: str | None = None
    result_csv: str | None = None
    plan: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class ErrorInfo:
    """The ``error`` object of an error answer or of a failed job."""

    SCHEMA: ClassVar[str] = "Error.error"
    code: ErrorCode
    message: str
    details: dict[str, Any]
    raw: dict[str, Any] = _raw()

    @property
    def field(self) -> str | None:
        value = self.details.get("field")
        return value if isinstance(value, str) else None


@dataclass
class Job:
    """A job: status, progress, best transformation so far, error."""

    SCHEMA: ClassVar[str] = "Job"
    id: str
    dataset_id: str
    task: TaskName
    algorithm: str | None
    status: JobStatusName
    attempts: int
    max_attempts: int
    cancel_requested: bool
    progress: Progress
    best: Best | None
    error: ErrorInfo | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    links: JobLinks
    webhook: Literal["pending", "delivered", "failed"] | None = None
    raw: dict[str, Any] = _raw()

    @property
    def finished(self) -> bool:
        """Whether the job has ended (succeeded, failed or cancelled)."""
        return self.status in TERMINAL_STATUSES


@dataclass
class JobPage:
    SCHEMA: ClassVar[str] = "JobPage"
    items: list[Job]
    next_cursor: str | None
    raw: dict[str, Any] = _raw()


@dataclass
class QualityScore:
    """One quality model's score and utility in a report."""

    score: float
    utility: float
    raw: dict[str, Any] = _raw()


@dataclass
class Risk:
    """Re-identification risks before (``input``) and after (``output``) anonymization."""

    SCHEMA: ClassVar[str] = "Report.risk"
    input: dict[str, Any] | None = None
    output: dict[str, Any] | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Suppression:
    """How suppressed records were written to the result CSV."""

    SCHEMA: ClassVar[str] = "Report.suppression"
    mode: Literal["mask", "remove", "keep_sensitive"] | None = None
    marker: str | None = None
    removed_rows: int | None = None
    block_satisfies_models: bool | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class SubsetReport:
    """The research subset of a job whose dataset is the population: ``records`` released
    (suppressed ones included), ``population_records`` in the dataset."""

    SCHEMA: ClassVar[str] = "SubsetReport"
    records: int
    population_records: int
    raw: dict[str, Any] = _raw()


@dataclass
class DpReport:
    """(ε, δ)-differential privacy of a job: the parameters, the split of ε, the derived ``k``
    and ``beta``, the ``seed`` (keep it private) and the input, sampled and released records.
    The report's rows, quality and risks measure the released sample."""

    SCHEMA: ClassVar[str] = "DpReport"
    epsilon: float
    delta: float
    epsilon_search: float
    epsilon_anonymization: float
    seed: int
    k: int
    beta: float
    input_records: int
    sampled_records: int
    released_records: int
    measured_on: str
    steps: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Timings:
    SCHEMA: ClassVar[str] = "Report.timings"
    load_ms: float | None = None
    search_ms: float | None = None
    output_ms: float | None = None
    peak_memory_bytes: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class TraceEntry:
    """One improvement of the best transformation (utility over time)."""

    SCHEMA: ClassVar[str] = "Report.trace[]"
    time_ms: float | None = None
    score: float | None = None
    utility: float | None = None
    suppressed_rows: int | None = None
    checks: int | None = None
    levels: list[int] | None = None
    strategy: str | None = None
    step: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Candidate:
    """One of the best anonymous transformations a search checked (``Report.candidates``);
    its ``transformation`` goes into an evaluate job as ``levels``."""

    SCHEMA: ClassVar[str] = "Candidate"
    transformation: dict[str, int]
    levels: list[int]
    score: float
    utility: float
    suppressed_rows: int
    raw: dict[str, Any] = _raw()


@dataclass
class ValueCount:
    """One value and the records showing it."""

    SCHEMA: ClassVar[str] = "ValueCount"
    value: str
    records: int
    raw: dict[str, Any] = _raw()


@dataclass
class ValueDistribution:
    """The most frequent values of an attribute on one side (before or after)."""

    SCHEMA: ClassVar[str] = "ValueDistribution"
    distinct: int
    top: list[ValueCount]
    other_records: int
    suppressed_records: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class AttributeValues:
    """A quasi-identifier's values before and after anonymization."""

    SCHEMA: ClassVar[str] = "AttributeValues"
    before: ValueDistribution
    after: ValueDistribution
    raw: dict[str, Any] = _raw()


@dataclass
class Measure:
    """One post-hoc quality measure of an output: raw value, loss in [0, 1], 1 − loss."""

    SCHEMA: ClassVar[str] = "Report.output_quality.granularity"
    value: float | None = None
    loss: float | None = None
    quality: float | None = None
    attributes: list[float] | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class OutputQuality:
    """Quality measured on the output's records (comparable between global and local)."""

    SCHEMA: ClassVar[str] = "Report.output_quality"
    records: int | None = None
    suppressed: int | None = None
    classes: int | None = None
    granularity: Measure | None = None
    generalization_intensity: Measure | None = None
    non_uniform_entropy: Measure | None = None
    discernibility: Measure | None = None
    aecs: Measure | None = None
    ambiguity: Measure | None = None
    microaggregation: Measure | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class LocalStep:
    """One step of local generalization."""

    SCHEMA: ClassVar[str] = "Report.local.steps[]"
    step: int | None = None
    transformation: dict[str, int] | None = None
    levels: list[int] | None = None
    candidate_rows: int | None = None
    published_rows: int | None = None
    suppression_limit: float | None = None
    algorithm: str | None = None
    checks: int | None = None
    elapsed_ms: float | None = None
    stop: Literal["completed", "time-limit", "check-limit", "cancelled"] | None = None
    optimal_proven: bool | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class LocalReport:
    """What local generalization did."""

    SCHEMA: ClassVar[str] = "Report.local"
    method: Literal["steps", "sweep"] | None = None
    """The method that made the output: ``steps`` (ARX's procedure) or ``sweep``."""
    iterations: int | None = None
    gs_factor: float | None = None
    starts_global: bool | None = None
    """Whether the result is the global search's (step 0), which suppressed fewer records."""
    attempts: int | None = None
    suppressed_rows: int | None = None
    refined_rows: int | None = None
    """Records published in a class split off a step's class by the refinement."""
    refined_transformations: int | None = None
    """Distinct transformations of the refined classes."""
    steps: list[LocalStep] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class Report:
    """The report of a job's result."""

    SCHEMA: ClassVar[str] = "Report"
    anonymous: bool
    transformation: dict[str, int]
    rows: int
    risk: Risk
    algorithm: str
    levels: list[int]
    checks: int
    elapsed_ms: float
    optimal_proven: bool
    stop: Literal[
        "completed",
        "time-limit",
        "check-limit",
        "cancelled",
        "complete",
        "no-progress",
        "iterations",
    ]
    solution_space: str
    trace: list[TraceEntry]
    job_id: str | None = None
    dataset_id: str | None = None
    suppressed_rows: int | None = None
    classes: int | None = None
    quality_model: str | None = None
    score: float | None = None
    lower_bound: float | None = None
    quality: dict[str, QualityScore] | None = None
    per_attribute: dict[str, float] | None = None
    utility: float | None = None
    expansions: int | None = None
    best_found_ms: float | None = None
    time_limit_ms: int | None = None
    suppression: Suppression | None = None
    research_subset: SubsetReport | None = None
    differential_privacy: DpReport | None = None
    timings: Timings | None = None
    output_quality: OutputQuality | None = None
    local: LocalReport | None = None
    candidates: list[Candidate] | None = None
    values: dict[str, AttributeValues] | None = None
    quasi_identifiers: list[str] | None = None
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class Evaluation:
    """The report of one given transformation (a job with ``task="evaluate"``)."""

    SCHEMA: ClassVar[str] = "Evaluation"
    anonymous: bool
    transformation: dict[str, int]
    suppressed_rows: int
    rows: int
    classes: int
    quality_model: str
    score: float
    lower_bound: float
    quality: dict[str, QualityScore]
    per_attribute: dict[str, float]
    utility: float
    risk: Risk
    output_quality: OutputQuality
    job_id: str | None = None
    dataset_id: str | None = None
    time_limit_ms: int | None = None
    suppression: Suppression | None = None
    research_subset: SubsetReport | None = None
    differential_privacy: DpReport | None = None
    timings: Timings | None = None
    values: dict[str, AttributeValues] | None = None
    quasi_identifiers: list[str] | None = None
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class RiskAnalysis:
    """The risks of data as they are (``analyse_risk``, a job with ``task="risk"``);
    ``input`` is the RiskReport as JSON."""

    SCHEMA: ClassVar[str] = "RiskAnalysis"
    input: dict[str, Any]
    raw: dict[str, Any] = _raw()


PlanColumnRole = Literal[
    "drop", "copy", "sensitive", "quasi_identifying", "microaggregated", "count", "subset_count"
]


@dataclass
class PlanColumn:
    """An input column of a plan and what the output makes of it."""

    SCHEMA: ClassVar[str] = "Plan.columns[]"
    name: str
    role: PlanColumnRole
    raw: dict[str, Any] = _raw()


@dataclass
class PlanSuppression:
    """How a plan writes suppressed records."""

    SCHEMA: ClassVar[str] = "Plan.suppression"
    mode: Literal["mask", "remove", "keep_sensitive"]
    marker: str
    raw: dict[str, Any] = _raw()


@dataclass
class PlanStep:
    """One step of a plan: per quasi-identifier original value → output value, and the classes
    (indices into ``Plan.classes``) it publishes."""

    SCHEMA: ClassVar[str] = "Plan.steps[]"
    levels: list[int]
    maps: list[dict[str, str]]
    publishes: list[int]
    raw: dict[str, Any] = _raw()


@dataclass
class PlanClass:
    """A published output class: its quasi-identifier values and microaggregated values."""

    SCHEMA: ClassVar[str] = "Plan.classes[]"
    values: list[str]
    aggregates: list[str]
    raw: dict[str, Any] = _raw()


@dataclass
class PlanAudit:
    """Where a plan comes from: SHA-256 digests, seed, deid's version."""

    SCHEMA: ClassVar[str] = "Plan.audit"
    input_sha256: str | None
    hierarchies_sha256: dict[str, str]
    specification_sha256: str
    seed: int
    deid_version: str
    raw: dict[str, Any] = _raw()


@dataclass
class Plan:
    """The recoding plan of a job's output (``GET /v1/jobs/{id}/plan``; ``deid apply --plan``).
    ``raw`` is the document as served: write it with ``json.dump(plan.raw, f)`` to keep its
    digest valid."""

    SCHEMA: ClassVar[str] = "Plan"
    format: str
    version: int
    delimiter: str
    columns: list[PlanColumn]
    quasi_identifiers: list[str]
    microaggregated: list[str]
    suppression: PlanSuppression
    neutralize_formulas: bool
    steps: list[PlanStep]
    classes: list[PlanClass]
    suppressed: list[list[str]]
    audit: PlanAudit
    digest: str
    raw: dict[str, Any] = _raw()


@dataclass
class SizeBucket:
    """A bucket of the class-size histogram of a verification (``max_size`` None: unbounded)."""

    SCHEMA: ClassVar[str] = "Verification.class_sizes[]"
    min_size: int
    max_size: int | None
    classes: int
    records: int
    raw: dict[str, Any] = _raw()


@dataclass
class Violation:
    """A class violating a model: its size; ``values`` only when asked for with
    ``show_values``; ``suppressed_block`` for the suppressed block of ``keep_sensitive``."""

    SCHEMA: ClassVar[str] = "ModelVerdict.violations[]"
    size: int
    suppressed_block: bool
    values: list[str] | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class ModelVerdict:
    """The verdict of a verification on one privacy model."""

    SCHEMA: ClassVar[str] = "ModelVerdict"
    model: str
    passed: bool
    violating_classes: int
    violating_records: int
    violations: list[Violation]
    measured: float | None = None
    reason: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Verification:
    """Released data re-checked against every privacy model of a job (``verify_job``);
    ``passed`` is False when a model fails (a verdict, not an error)."""

    SCHEMA: ClassVar[str] = "Verification"
    passed: bool
    released_rows: int
    released_records: int
    suppressed_records: int
    classes: int
    models: list[ModelVerdict]
    class_sizes: list[SizeBucket]
    removed_records: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class JobEvent:
    """One Server-Sent Event of ``GET /v1/jobs/{id}/events``.

    ``event`` is ``progress``, ``improvement``, ``done``, ``failed`` or ``cancelled``; ``job``
    is set for every event but ``improvement``, which carries ``best``. ``id`` counts the
    improvements sent (for ``Last-Event-ID``).
    """

    event: str
    id: int | None
    job: Job | None = None
    best: Best | None = None
    data: Any = None

    @property
    def terminal(self) -> bool:
        return self.event in ("done", "failed", "cancelled")
