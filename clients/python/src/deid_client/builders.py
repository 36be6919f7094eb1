"""Small typed builders for job specifications and hierarchy builder specifications.

A job can also be submitted as a plain dict (the JSON of ``POST /v1/jobs``); these classes only
spell the same JSON with names and types an editor and mypy can check::

    spec = JobSpec(
        dataset_id=ds.id,
        attributes={
            "age": Attribute.quasi_identifying(),           # the stored hierarchy
            "zip": Attribute.quasi_identifying(masking()),  # a builder specification
            "disease": Attribute.sensitive(),
        },
        privacy=[KAnonymity(5), DistinctLDiversity("disease", 2)],
        suppression_limit=0.02,
        quality=Quality("loss"),
        time_limit="30s",
    )
    job = client.submit_job(spec)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping, Sequence, TypedDict, Union

__all__ = [
    "Json",
    "HierarchySpec",
    "Interval",
    "interval",
    "order",
    "masking",
    "date",
    "suppression",
    "StoredHierarchy",
    "InlineHierarchy",
    "HierarchySource",
    "Attribute",
    "PrivacyModel",
    "KAnonymity",
    "DistinctLDiversity",
    "EntropyLDiversity",
    "RecursiveLDiversity",
    "TCloseness",
    "DeltaDisclosure",
    "BasicBetaLikeness",
    "EnhancedBetaLikeness",
    "AverageRisk",
    "SampleUniqueness",
    "KMap",
    "DeltaPresence",
    "DifferentialPrivacy",
    "Quality",
    "GeneticParams",
    "JobSpec",
    "Algorithm",
    "to_json",
    "compact_value",
]

Json = Any
Decimal = Union[int, float, str]
GroupSizes = Union[int, Sequence[int]]
Algorithm = Literal[
    "auto", "flash", "lightning", "top-down", "genetic", "bfs", "datafly", "improved-greedy", "exhaustive"
]


class Interval(TypedDict, total=False):
    """One explicit interval of an ``interval`` hierarchy: [from, to[ with an optional label."""

    # "from" is a keyword: build it as a dict, e.g. {"from": 0, "to": 18, "label": "minor"}.
    to: Decimal
    label: str


class HierarchySpec(TypedDict, total=False):
    """A hierarchy builder specification (``HierarchySpec`` in openapi.yaml), selected by ``type``."""

    type: Literal["interval", "order", "masking", "date", "suppression"]
    width: Decimal
    start: Decimal
    intervals: list[dict[str, Any]]
    bottom_coding: Decimal
    top_coding: Decimal
    min: Decimal
    max: Decimal
    levels: list[Any]
    missing: list[str]
    order: Literal["auto", "numeric", "lexicographic"]
    values: list[str]
    labels: Literal["range", "set"]
    redact_from: Literal["left", "right"]
    pad_side: Literal["left", "right"]
    pad_char: str
    redaction_char: str
    alphabet_size: int
    domain_size: int
    format: str


def _spec(kind: str, **params: Any) -> HierarchySpec:
    out: dict[str, Any] = {"type": kind}
    out.update({k: v for k, v in params.items() if v is not None})
    return out  # type: ignore[return-value]


def interval(
    width: Decimal | None = None,
    *,
    start: Decimal | None = None,
    intervals: Sequence[Mapping[str, Any]] | None = None,
    levels: Sequence[GroupSizes] | None = None,
    bottom_coding: Decimal | None = None,
    top_coding: Decimal | None = None,
    min: Decimal | None = None,
    max: Decimal | None = None,
    missing: Sequence[str] | None = None,
    labels: Literal["range", "set"] | None = None,
) -> HierarchySpec:
    """``interval``: [lo, hi[ intervals of ``width`` (from ``start``) or explicit ``intervals``
    (``{"from": 0, "to": 18, "label": "minor"}``), grouped per level by ``levels``, then ``*``."""
    return _spec(
        "interval",
        width=width,
        start=start,
        intervals=[dict(i) for i in intervals] if intervals is not None else None,
        levels=list(levels) if levels is not None else None,
        bottom_coding=bottom_coding,
        top_coding=top_coding,
        min=min,
        max=max,
        missing=list(missing) if missing is not None else None,
        labels=labels,
    )


def order(
    levels: Sequence[GroupSizes] | None = None,
    *,
    values: Sequence[str] | None = None,
    order: Literal["auto", "numeric", "lexicographic"] | None = None,
    labels: Literal["range", "set"] | None = None,
) -> HierarchySpec:
    """``order``: runs of consecutive values (in ``values``' order, or numeric/lexicographic)."""
    return _spec(
        "order",
        levels=list(levels) if levels is not None else None,
        values=list(values) if values is not None else None,
        order=order,
        labels=labels,
    )


def masking(
    *,
    redact_from: Literal["left", "right"] | None = None,
    pad_side: Literal["left", "right"] | None = None,
    pad_char: str | None = None,
    redaction_char: str | None = None,
    alphabet_size: int | None = None,
    domain_size: int | None = None,
) -> HierarchySpec:
    """``masking``: one more character redacted per level (``81667`` → ``8166*`` → …)."""
    return _spec(
        "masking",
        redact_from=redact_from,
        pad_side=pad_side,
        pad_char=pad_char,
        redaction_char=redaction_char,
        alphabet_size=alphabet_size,
        domain_size=domain_size,
    )


def date(
    levels: Sequence[Literal["day", "week", "month", "quarter", "year", "decade", "century"]],
    *,
    format: str | None = None,
    missing: Sequence[str] | None = None,
) -> HierarchySpec:
    """``date``: calendar granularities (e.g. ``["month", "year"]``), then ``*``."""
    return _spec("date", levels=list(levels), format=format, missing=list(missing) if missing is not None else None)


def suppression() -> HierarchySpec:
    """``suppression``: value → ``*``."""
    return _spec("suppression")


class StoredHierarchy(TypedDict):
    """Use the column's stored hierarchy (the default for quasi-identifiers that have one)."""

    stored: bool


class _InlineBase(TypedDict):
    csv: str


class InlineHierarchy(_InlineBase, total=False):
    """An ARX-format table given inline."""

    delimiter: str


HierarchySource = Union[HierarchySpec, StoredHierarchy, InlineHierarchy, Mapping[str, Any]]


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass
class Attribute:
    """A column's role in a job (``Attribute`` in openapi.yaml)."""

    type: Literal["identifying", "quasi_identifying", "sensitive", "insensitive"]
    hierarchy: HierarchySource | None = None
    min_level: int | None = None
    max_level: int | None = None
    weight: float | None = None
    microaggregation: Mapping[str, Any] | None = None
    data_level: int | None = None

    @classmethod
    def microaggregated(
        cls,
        function: Literal["arithmetic_mean", "geometric_mean", "median", "mode", "interval", "set"],
        *,
        missing: Literal["ignore", "keep"] | None = None,
        date_format: str | None = None,
    ) -> Attribute:
        """A quasi-identifier without a hierarchy whose values become their class's aggregate."""
        spec = _drop_none({"function": function, "missing": missing, "date_format": date_format})
        return cls("quasi_identifying", microaggregation=spec)

    @classmethod
    def quasi_identifying(
        cls,
        hierarchy: HierarchySource | None = None,
        *,
        min_level: int | None = None,
        max_level: int | None = None,
        weight: float | None = None,
        data_level: int | None = None,
    ) -> Attribute:
        """A quasi-identifier; without ``hierarchy`` the column's stored hierarchy is used.
        ``data_level``: the level of the hierarchy the column's values are labels of (data
        already generalized to a floor)."""
        return cls("quasi_identifying", hierarchy, min_level, max_level, weight,
                   data_level=data_level)

    @classmethod
    def sensitive(cls, hierarchy: HierarchySource | None = None) -> Attribute:
        """A sensitive attribute (a hierarchy is needed only by hierarchical t-closeness)."""
        return cls("sensitive", hierarchy)

    @classmethod
    def identifying(cls) -> Attribute:
        """An identifier: removed from the output."""
        return cls("identifying")

    @classmethod
    def insensitive(cls) -> Attribute:
        """Kept as it is (the default for columns not named)."""
        return cls("insensitive")

    def to_json(self) -> dict[str, Any]:
        out = _drop_none({f.name: getattr(self, f.name) for f in fields(self)})
        if "hierarchy" in out:
            out["hierarchy"] = dict(out["hierarchy"])
        if "microaggregation" in out:
            out["microaggregation"] = dict(out["microaggregation"])
        return out


class PrivacyModel:
    """Base of the privacy model builders: ``to_json()`` gives the object form
    ``{"model": name, parameter: value, …}``, ``str()`` the compact text syntax."""

    model: str = ""

    def params(self) -> dict[str, Any]:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, **self.params()}

    def __str__(self) -> str:
        inner = ",".join(f"{k}={compact_value(v)}" for k, v in self.params().items())
        return f"{self.model}({inner})"


# What deid's parser trims around an unquoted value (Rust's char::is_whitespace, the Unicode
# White_Space property); str.isspace() is consulted as well, so quoting errs on the safe side.
_TRIMMED = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                     "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# What ends or breaks an unquoted value.
_SPECIAL = frozenset(',()="')


def compact_value(value: Any) -> str:
    """A parameter value in deid's compact privacy-model syntax (the rule of
    crates/deid-engine/src/privacy/syntax.rs): as it is, unless it is empty, starts or ends with
    whitespace, or contains ``,``, ``(``, ``)``, ``=`` or ``"`` — then in double quotes, with
    ``""`` for a quote inside. Backslashes are ordinary characters."""
    text = value if isinstance(value, str) else str(value)
    edges = (text[:1], text[-1:])
    plain = bool(text) and not any(c in _TRIMMED or c.isspace() for c in edges) and _SPECIAL.isdisjoint(text)
    if plain:
        return text
    return '"' + text.replace('"', '""') + '"'


@dataclass
class KAnonymity(PrivacyModel):
    """Every class has at least ``k`` records."""

    k: int
    model = "k-anonymity"


@dataclass
class DistinctLDiversity(PrivacyModel):
    """Every class has at least ``l`` distinct values of ``attribute``."""

    attribute: str
    l: int  # noqa: E741 - the model's parameter name
    model = "distinct-l-diversity"


@dataclass
class EntropyLDiversity(PrivacyModel):
    """The entropy of ``attribute`` in every class is at least ln ``l``."""

    attribute: str
    l: float  # noqa: E741
    estimator: Literal["shannon", "grassberger"] | None = None
    model = "entropy-l-diversity"


@dataclass
class RecursiveLDiversity(PrivacyModel):
    """Recursive (c, ℓ)-diversity of ``attribute``."""

    attribute: str
    c: float
    l: int  # noqa: E741
    model = "recursive-l-diversity"


@dataclass
class TCloseness(PrivacyModel):
    """The distance between ``attribute``'s distribution in every class and in the table is ≤ t."""

    attribute: str
    t: float
    distance: Literal["equal", "ordered", "hierarchical"] | None = None
    model = "t-closeness"


@dataclass
class DeltaDisclosure(PrivacyModel):
    attribute: str
    delta: float
    model = "delta-disclosure"


@dataclass
class BasicBetaLikeness(PrivacyModel):
    attribute: str
    beta: float
    model = "basic-beta-likeness"


@dataclass
class EnhancedBetaLikeness(PrivacyModel):
    attribute: str
    beta: float
    model = "enhanced-beta-likeness"


@dataclass
class AverageRisk(PrivacyModel):
    """Average prosecutor risk at most ``threshold`` (optionally: at most ``records_at_risk``
    of the records with a risk above ``highest``)."""

    threshold: float
    highest: float | None = None
    records_at_risk: float | None = None
    model = "average-risk"


@dataclass
class SampleUniqueness(PrivacyModel):
    """At most ``threshold`` of the published records are unique."""

    threshold: float
    model = "sample-uniqueness"


@dataclass
class KMap(PrivacyModel):
    """k-map. Estimated (with ``alpha``): every published class stands, with probability
    1 − ``alpha``, for at least ``k`` individuals of the population (the job needs
    ``population``); enforced as k′-anonymity (the report's ``warnings`` give k′). Without
    ``alpha``: the dataset is the population and every published class stands for at least ``k``
    of its records (the job needs ``research_subset``)."""

    k: int
    alpha: float | None = None
    estimator: Literal["poisson", "zero-truncated-poisson"] | None = None
    model = "k-map"


@dataclass
class DeltaPresence(PrivacyModel):
    """δ-presence: the dataset is the population and the released ``research_subset`` makes up
    between ``delta_min`` and ``delta_max`` of every class's records."""

    delta_min: float
    delta_max: float
    model = "delta-presence"


@dataclass
class DifferentialPrivacy(PrivacyModel):
    """(ε, δ)-differential privacy (SafePub): a sample of the records (probability
    β = 1 − e^(−ε_anon)), generalized, classes of fewer than the derived k sampled records
    suppressed. ``search_share`` of ``epsilon`` goes to the search over ``steps`` steps (none
    when the job gives ``levels``). Set the job's ``seed`` to reproduce a release."""

    epsilon: float
    delta: float
    search_share: float | None = None
    steps: int | None = None
    model = "differential-privacy"


@dataclass
class Quality:
    """The quality model the search minimises (``loss``, ``aecs``, ``discernibility``, …)."""

    model: str = "loss"
    gs_factor: float | None = None
    aggregate: Literal["sum", "maximum", "arithmetic_mean", "geometric_mean"] | None = None

    def to_json(self) -> str | dict[str, Any]:
        if self.gs_factor is None and self.aggregate is None:
            return self.model
        return _drop_none({"model": self.model, "gs_factor": self.gs_factor, "aggregate": self.aggregate})


@dataclass
class GeneticParams:
    """Parameters of the genetic algorithm (unset ones keep the service's defaults)."""

    iterations: int | None = None
    stop_after_iterations: bool | None = None
    subpopulation_size: int | None = None
    elite_fraction: float | None = None
    crossover_fraction: float | None = None
    production_fraction: float | None = None
    mutation_probability: float | None = None
    immigration_interval: int | None = None
    immigration_fraction: float | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass
class LocalGeneralization:
    """Local generalization (``local`` in the job specification): at most ``iterations`` steps,
    each publishing at least 1/iterations of the records; unset fields keep the defaults
    (100 steps, gs-factor 0)."""

    iterations: int | None = None
    gs_factor: float | None = None
    refine: bool | None = None
    """Refine the published classes into finer ones (default true); False gives ARX's procedure's output."""
    method: Literal["auto", "steps", "sweep"] | None = None
    """``auto`` (default: ``sweep`` for k-anonymity and k-map on spaces it can visit, else ``steps``), ``steps`` (ARX's procedure) or ``sweep`` (every transformation in order of its granularity loss)."""

    def to_json(self) -> dict[str, Any]:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass
class JobSpec:
    """A job specification (``JobSpec`` in openapi.yaml); ``to_json()`` is the body of ``POST /v1/jobs``.

    ``attributes`` and ``privacy`` take builders or plain JSON (dicts, compact model strings).
    """

    dataset_id: str
    attributes: Mapping[str, Attribute | Mapping[str, Any]]
    privacy: Sequence[PrivacyModel | str | Mapping[str, Any]] | None = None
    """Required by ``anonymize`` and ``evaluate``; a ``risk`` job takes none."""
    task: Literal["anonymize", "evaluate", "risk"] | None = None
    """What the job does (default ``anonymize``): ``evaluate`` the transformation in ``levels``,
    or analyse the ``risk`` of the data as they are (for the quasi-identifying attributes)."""
    levels: Mapping[str, int] | None = None
    """``task="evaluate"``: quasi-identifier → level (others keep their lowest level)."""
    suppression_limit: float | None = None
    quality: Quality | str | Mapping[str, Any] | None = None
    algorithm: Algorithm | None = None
    flash_max_space: int | None = None
    candidates: int | None = None
    time_limit: int | str | None = None
    check_limit: int | None = None
    seed: int | None = None
    threads: int | None = None
    genetic: GeneticParams | Mapping[str, Any] | None = None
    risk_threshold: float | None = None
    suppressed: Literal["mask", "remove", "keep_sensitive"] | None = None
    suppression_marker: str | None = None
    hierarchy_duplicates: Literal["reject", "last"] | None = None
    callback_url: str | None = None
    local: LocalGeneralization | Mapping[str, Any] | None = None
    population: Mapping[str, Any] | None = None
    """``{"size": N}``, ``{"sampling_fraction": f}`` or ``{"region": "usa"}``."""
    research_subset: Mapping[str, Any] | None = None
    """The records to release when the dataset is the population: ``{"column": "c"}`` (a
    yes/no mark), ``{"column": "c", "value": "v"}`` or ``{"rows": [1, 5, …]}``."""
    count_column: str | None = None
    """The dataset's count column (a frequency table; taken from the dataset, may be repeated)."""
    subset_count_column: str | None = None
    """The research subset of a frequency table: how many of each row's records are released."""
    neutralize_formulas: bool | None = None
    """Neutralize spreadsheet formulas in ``result.csv`` (cells starting with ``=``, ``+``,
    ``-``, ``@``, tab or carriage return get a leading ``'``)."""
    qi_combinations: Literal["auto", "all", "singles"] | None = None
    """``"task": "risk"``: distinction and separation of every combination of the
    quasi-identifiers (``"all"``), only while cheap (``"auto"``, the default), or of each
    alone and all together (``"singles"``, what the reports of anonymizations give)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further properties sent as they are (for service features newer than this client)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = to_json(value)
        out.update(self.extra)
        return out


def to_json(value: Any) -> Any:
    """The JSON of a builder (or of containers holding builders); other values as they are."""
    if hasattr(value, "to_json") and callable(value.to_json):
        return value.to_json()
    if isinstance(value, PrivacyModel):  # pragma: no cover - covered by to_json above
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value
