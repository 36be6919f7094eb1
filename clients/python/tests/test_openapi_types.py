"""The hand-written types against openapi.yaml, in both directions: every property of a
modelled schema is a field of its class and every field a property, required properties are
fields without a default, and the field types (JSON type, nullability, enums, items) agree.
Also: every operation of the API has a method on both clients."""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
import yaml

import deid_client
from deid_client import AsyncClient, Client, builders
from deid_client import types as t

REPO = Path(__file__).resolve().parents[3]
DOC = yaml.safe_load((REPO / "openapi.yaml").read_text())
SCHEMAS = DOC["components"]["schemas"]

RESPONSE_TYPES = [
    t.Status, t.Column, t.Dataset, t.DatasetPage, t.HierarchySummary, t.HierarchyTable, t.Best,
    t.Progress, t.JobLinks, t.ErrorInfo, t.Job, t.JobPage, t.Risk, t.Suppression, t.Timings,
    t.TraceEntry, t.Report, t.Measure, t.OutputQuality, t.LocalStep, t.LocalReport, t.Evaluation,
    t.RiskAnalysis, t.Verification, t.ModelVerdict, t.SizeBucket, t.Violation,
    t.Candidate, t.AttributeValues, t.ValueDistribution, t.ValueCount,
    t.RiskAnalysis, t.Plan, t.PlanColumn, t.PlanSuppression, t.PlanStep, t.PlanClass, t.PlanAudit,
]


def deref(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def resolve(path: str) -> dict[str, Any]:
    """"Job.links" → the links property of Job; "Report.trace[]" → the items of trace."""
    first, *rest = path.split(".")
    schema = deref(SCHEMAS[first])
    for part in rest:
        items = part.endswith("[]")
        schema = deref(schema["properties"][part.removesuffix("[]")])
        if items:
            schema = deref(schema["items"])
    if path.endswith("[]") and not rest:
        schema = deref(schema["items"])
    return schema


def json_fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {str(f.metadata.get("json", f.name)): f for f in dataclasses.fields(cls) if f.name != "raw"}


def has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def split_optional(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        nullable = len(args) < len(get_args(hint))
        return (args[0] if len(args) == 1 else Union[tuple(args)]), nullable
    return hint, False


def schema_types(schema: dict[str, Any]) -> tuple[dict[str, Any], set[str], bool]:
    """(the non-null schema, its JSON types, nullable)."""
    schema = deref(schema)
    if "oneOf" in schema:
        members = [deref(m) for m in schema["oneOf"]]
        nullable = any(m.get("type") == "null" for m in members)
        rest = [m for m in members if m.get("type") != "null"]
        if len(rest) == 1:
            inner, kinds, n = schema_types(rest[0])
            return inner, kinds, nullable or n
        return schema, {k for m in rest for k in schema_types(m)[1]}, nullable
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else ({kind} if kind else set())
    if "properties" in schema or "additionalProperties" in schema:
        kinds.add("object")
    nullable = "null" in kinds
    return schema, kinds - {"null"}, nullable


def check_type(where: str, hint: Any, schema: dict[str, Any], required: bool) -> None:
    inner, kinds, nullable = schema_types(schema)
    py, optional = split_optional(hint)
    if nullable:
        assert optional, f"{where}: nullable in openapi.yaml, not Optional in the type"
    if optional and required and not nullable:
        pytest.fail(f"{where}: required and not nullable in openapi.yaml, Optional in the type")
    if not kinds:  # untyped ("any value"): anything goes
        return
    origin = get_origin(py)
    if "enum" in inner:
        assert origin is Literal, f"{where}: an enum in openapi.yaml, {py} in the type"
        assert set(get_args(py)) == set(inner["enum"]), f"{where}: enum values differ"
        return
    if kinds == {"string"}:
        if inner.get("format") == "date-time":
            assert py is datetime.datetime, where
        else:
            assert py is str, f"{where}: string in openapi.yaml, {py} in the type"
    elif kinds == {"integer"}:
        assert py is int, f"{where}: integer in openapi.yaml, {py} in the type"
    elif kinds == {"number"}:
        assert py is float, f"{where}: number in openapi.yaml, {py} in the type"
    elif kinds == {"boolean"}:
        assert py is bool, f"{where}: boolean in openapi.yaml, {py} in the type"
    elif kinds == {"array"}:
        assert origin is list, f"{where}: array in openapi.yaml, {py} in the type"
        if "items" in inner:
            check_type(where + "[]", get_args(py)[0], inner["items"], True)
    elif kinds == {"object"}:
        if dataclasses.is_dataclass(py):
            assert set(json_fields(py)) == set(inner.get("properties", {})) or not inner.get("properties"), where
        else:
            assert origin is dict or py is Any, f"{where}: object in openapi.yaml, {py} in the type"
            extra = inner.get("additionalProperties")
            if isinstance(extra, dict) and origin is dict:
                check_type(where + "{}", get_args(py)[1], extra, True)
    else:
        pytest.fail(f"{where}: unexpected JSON types {kinds}")


@pytest.mark.parametrize("cls", RESPONSE_TYPES, ids=lambda c: c.__name__)
def test_response_type_matches_its_schema(cls: type) -> None:
    schema = resolve(cls.SCHEMA)  # type: ignore[attr-defined]
    props = schema.get("properties", {})
    fields = json_fields(cls)
    assert set(fields) - set(props) == set(), f"{cls.__name__}: fields that openapi.yaml does not have"
    assert set(props) - set(fields) == set(), f"{cls.__name__}: properties of openapi.yaml the type misses"
    required = set(schema.get("required", []))
    hints = get_type_hints(cls)
    for name, f in fields.items():
        assert has_default(f) != (name in required), f"{cls.__name__}.{name}: required ↔ no default"
        check_type(f"{cls.__name__}.{name}", hints[f.name], props[name], name in required)


def test_every_schema_of_an_answer_is_modelled() -> None:
    modelled = {c.SCHEMA for c in RESPONSE_TYPES}  # type: ignore[attr-defined]
    answered: set[str] = set()
    for item in DOC["paths"].values():
        for op in item.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for resp in op["responses"].values():
                for content in resp.get("content", {}).values():
                    schema = content.get("schema", {})
                    # One schema, or the alternatives of an answer (getResult: one per task).
                    for member in [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]:
                        ref = member.get("$ref")
                        if ref:
                            answered.add(ref.rsplit("/", 1)[1])
    # Error answers become exceptions; their inner object is ErrorInfo ("Error.error").
    answered.discard("Error")
    # getJobSpec answers the JSON of POST /v1/jobs as a dict (its schema is checked against the
    # request builder, builders.JobSpec, below).
    answered.discard("JobSpec")
    assert answered <= modelled, f"answers without a type: {answered - modelled}"
    assert {"Best", "Progress", "Column", "Error.error"} <= modelled


def test_error_info_matches_the_error_schema_and_the_exceptions() -> None:
    inner = resolve("Error.error")
    assert set(inner["required"]) == {"code", "message", "details"}
    for attr in ("code", "message", "details", "field", "status", "retry_after"):
        assert hasattr(deid_client.ApiError(400, "c", "m", {"field": "x"}), attr)


def test_job_status_literal_matches_the_enum() -> None:
    assert set(get_args(t.JobStatusName)) == set(SCHEMAS["JobStatus"]["enum"])
    assert t.TERMINAL_STATUSES == {"succeeded", "failed", "cancelled"}


# ------------------------------------------------------------------ request builders

REQUEST_TYPES = [
    (builders.JobSpec, "JobSpec", {"extra"}),
    (builders.Attribute, "Attribute", set()),
    (builders.GeneticParams, "JobSpec.genetic", set()),
    (builders.LocalGeneralization, "JobSpec.local", set()),
]


@pytest.mark.parametrize("cls,path,own", REQUEST_TYPES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_request_builder_matches_its_schema(cls: type, path: str, own: set[str]) -> None:
    schema = resolve(path)
    props = schema["properties"]
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in own}
    assert set(fields) == set(props)
    required = set(schema.get("required", []))
    hints = get_type_hints(cls)
    for name, f in fields.items():
        assert has_default(f) != (name in required), f"{cls.__name__}.{name}: required ↔ no default"
        enum = deref(props[name]).get("enum")
        if enum:
            lit, _ = split_optional(hints[name])
            assert set(get_args(lit)) == set(enum), f"{cls.__name__}.{name}: enum values differ"


def test_hierarchy_spec_typed_dict_matches_the_schema() -> None:
    props = SCHEMAS["HierarchySpec"]["properties"]
    hints = typing.get_type_hints(builders.HierarchySpec)
    assert set(hints) == set(props)
    for name in ("type", "order", "labels", "redact_from", "pad_side"):
        assert set(get_args(hints[name])) == set(props[name]["enum"]), name
    item = SCHEMAS["HierarchySpec"]["properties"]["intervals"]["items"]["properties"]
    assert set(item) == {"from", "to", "label"}


def test_builders_produce_valid_json_shapes() -> None:
    spec = builders.JobSpec(
        "ds",
        {"age": builders.Attribute.quasi_identifying(builders.interval(10, levels=[2]), max_level=3),
         "d": builders.Attribute.sensitive()},
        [builders.KAnonymity(5), builders.EntropyLDiversity("d", 1.5, estimator="grassberger"), "average-risk(threshold=0.1)"],
        quality=builders.Quality("loss", gs_factor=0.2),
        genetic=builders.GeneticParams(iterations=10),
        time_limit="5s",
        extra={"future_option": True},
    ).to_json()
    assert spec == {
        "dataset_id": "ds",
        "attributes": {
            "age": {"type": "quasi_identifying", "hierarchy": {"type": "interval", "width": 10, "levels": [2]}, "max_level": 3},
            "d": {"type": "sensitive"},
        },
        "privacy": [
            {"model": "k-anonymity", "k": 5},
            {"model": "entropy-l-diversity", "attribute": "d", "l": 1.5, "estimator": "grassberger"},
            "average-risk(threshold=0.1)",
        ],
        "quality": {"model": "loss", "gs_factor": 0.2},
        "genetic": {"iterations": 10},
        "time_limit": "5s",
        "future_option": True,
    }
    assert str(builders.DistinctLDiversity("disease", 2)) == "distinct-l-diversity(attribute=disease,l=2)"
    assert builders.Quality().to_json() == "loss"


# ------------------------------------------------------------------ operations

OPERATIONS = {
    "healthz": "health",
    "readyz": "ready",
    "metrics": "metrics",
    "openapi": "openapi",
    "listDatasets": "list_datasets",
    "uploadDataset": "upload_dataset",
    "getDataset": "get_dataset",
    "deleteDataset": "delete_dataset",
    "analyseRisk": "analyse_risk",
    "getHierarchy": "get_hierarchy",
    "putHierarchy": "put_hierarchy",
    "previewHierarchy": "preview_hierarchy",
    "listJobs": "list_jobs",
    "createJob": "submit_job",
    "getJob": "get_job",
    "jobEvents": "events",
    "cancelJob": "cancel_job",
    "getResult": "get_result",
    "getResultCsv": "download_result",
    "getResultParquet": "download_result_parquet",
    "verifyJob": "verify_job",
    "getPlan": "get_plan",
    "getJobSpec": "get_job_spec",
}


def test_every_operation_has_a_method_on_both_clients() -> None:
    ops = {op["operationId"] for item in DOC["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
    assert ops == set(OPERATIONS), "operations of openapi.yaml and the client's table differ"
    for name in OPERATIONS.values():
        sync, asyn = getattr(Client, name), getattr(AsyncClient, name)
        assert list(inspect.signature(sync).parameters) == list(inspect.signature(asyn).parameters), name
    # Every public method of one client exists on the other.
    public = lambda c: {n for n in dir(c) if not n.startswith("_")}  # noqa: E731
    assert public(Client) - {"close"} == public(AsyncClient) - {"aclose"}


def test_error_code_literal_matches_the_enum() -> None:
    assert list(get_args(t.ErrorCode)) == SCHEMAS["ErrorCode"]["enum"]


def test_the_check_notices_drift() -> None:
    """A type that lost a property, gained one, or got a type wrong fails the check."""

    @dataclasses.dataclass
    class MissingOne:
        SCHEMA: typing.ClassVar[str] = "Progress"
        phase: str
        checks: int
        elapsed_ms: int

    @dataclasses.dataclass
    class WrongType:
        SCHEMA: typing.ClassVar[str] = "Progress"
        phase: str
        checks: int
        elapsed_ms: int
        explored_share: str

    @dataclasses.dataclass
    class Optional:
        SCHEMA: typing.ClassVar[str] = "Progress"
        phase: str
        checks: int
        elapsed_ms: int
        explored_share: float = 0.0

    for cls in (MissingOne, WrongType, Optional):
        with pytest.raises(AssertionError):
            test_response_type_matches_its_schema(cls)
