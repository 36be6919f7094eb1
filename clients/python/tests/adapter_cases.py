"""The cases every engine adapter is tested on (test_sql_adapters.py, test_spark_adapter.py):
deid's typed→text rule written again in Python (no code shared with the adapters), the CLI's
output on the data exported by it, adult and a generated table with their specifications."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import subprocess
import unicodedata
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Sequence

from conftest import ADULT, REPO

DEID_BIN = os.environ.get("DEID_BIN", str(REPO / "target" / "release" / "deid"))
ADULT_QIS = ["age", "sex", "race", "marital-status", "education"]


# ---------------------------------------------------------------- the rule, independently


def float_rule(value: float, bits: int = 64) -> str:
    """A float by the rule: the shortest decimal that reads back in its width (numpy's Dragon4),
    plain notation, -0.0 as 0, NaN and the infinities spelled out."""
    import math

    import numpy as np

    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    typed = np.float32(value) if bits == 32 else np.float64(value)
    return np.format_float_positional(typed, unique=True, trim="-")


#: Floats whose text is hard: not Java 17's toString (1e23, 2.82879384806159e17), exponents,
#: the smallest subnormal, signed zero, NaN and the infinities.
FLOATS = [0.1, -0.0, 0.0, 3.0, -12.5, 1e21, 1.5e-7, 1e23, 2.82879384806159e17, 5e-324, 1.7976931348623157e308,
          float("nan"), float("inf"), float("-inf"), None]
#: Those within a FLOAT's (REAL's) range, and values a FLOAT rounds or barely holds.
FLOATS32 = [0.1, -0.0, 0.0, 3.0, -12.5, 1e21, 1.5e-7, 1e23, 2.82879384806159e17, float("nan"), float("inf"),
            float("-inf"), None, 123456789.125, 16777217.0, 3.4028234663852886e38, 1.401298464324817e-45]


def rule(value: Any) -> str:
    """deid's typed→text rule for the values these tests use."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float_rule(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        if value.microsecond:
            text += "." + f"{value.microsecond:06d}".rstrip("0")
        return text + "Z"
    if isinstance(value, dt.date):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    return str(value)


# ---------------------------------------------------------------- the CLI on the exported data


def cli_output(tmp: Path, header: Sequence[str], rows: Sequence[Sequence[Any]], spec: dict[str, Any]) -> Counter[tuple[str, ...]]:
    data = tmp / "data.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([rule(v) for v in r])
    config = tmp / "job.json"
    config.write_text(json.dumps({**spec, "input": str(data), "delimiter": ","}))
    out = tmp / "out.csv"
    run = subprocess.run([DEID_BIN, "anonymize", "--config", str(config), "--output", str(out), "--report", str(tmp / "r.json")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with open(out, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        next(reader)
        return Counter(tuple(r) for r in reader)


# ---------------------------------------------------------------- a plan made on other data


def plans_without(monkeypatch: Any, column: str, value: str) -> None:
    """``Client.get_plan`` answers plans whose maps lack ``value`` of ``column``: plans made on
    data without it."""
    from deid_client import Client

    real = Client.get_plan

    def get_plan(self: Client, job_id: str) -> Any:
        plan = real(self, job_id)
        for step in plan.steps:
            step.maps[plan.quasi_identifiers.index(column)].pop(value, None)
        return plan

    monkeypatch.setattr(Client, "get_plan", get_plan)


# ---------------------------------------------------------------- adult


def adult_rows() -> tuple[list[str], list[list[Any]]]:
    with open(ADULT / "adult.csv", newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=";")
        header = next(reader)
        rows = [[int(v) if header[i] == "age" else v for i, v in enumerate(r)] for r in reader]
    return header, rows


def adult_spec(**extra: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        c: {"type": "quasi_identifying", "hierarchy": {"csv": (ADULT / f"adult_hierarchy_{c}.csv").read_text()}}
        for c in ADULT_QIS
    }
    attributes["salary-class"] = {"type": "sensitive"}
    attributes["native-country"] = {"type": "identifying"}
    spec = {
        "attributes": attributes,
        "privacy": ["k-anonymity(k=5)", {"model": "distinct-l-diversity", "attribute": "salary-class", "l": 2}],
        "suppression_limit": 0.02,
        "algorithm": "flash",
        "quality": "loss",
    }
    spec.update(extra)
    return spec


# ---------------------------------------------------------------- generated types


def generated() -> tuple[list[tuple[str, str, str]], list[list[Any]]]:
    """300 rows: NULLs, NFC/NFD spellings, a value equal to the marker (in a copied column),
    integers, decimals, dates, timestamps (with and without time zone), booleans, floats (-0.0,
    NaN, infinity, exponents), several sensitive columns."""
    import random

    rng = random.Random(25)
    cities = ["Zürich", unicodedata.normalize("NFD", "Zürich"), "Bern", "Genève", None]
    utc = dt.timezone.utc
    plus2 = dt.timezone(dt.timedelta(hours=2))
    rows = []
    for i in range(300):
        birth = dt.date(1950 + rng.randrange(8), rng.randrange(1, 13), rng.randrange(1, 28)) if i % 37 else None
        seen = dt.datetime(2024, 1, 1, rng.randrange(24), 30, 15, rng.choice([0, 500000, 123400]), tzinfo=rng.choice([utc, plus2]))
        rows.append([
            i + 1,
            rng.choice(cities),
            rng.randrange(-3, 40) if i % 29 else None,
            birth,
            (Decimal(rng.randrange(100000, 900000)) / 100).quantize(Decimal("0.01")),
            rng.choice(["flu", "asthma", "ulcer", None]),
            rng.choice([True, False, None]),
            seen,
            dt.datetime(2023, 6, 1, 8, 0, 0, rng.choice([0, 250000])),
            rng.choice(["*", "note", None]),
            rng.choice([0.1, -0.0, 0.0, 1e21, 1.5e-7, 1e23, float("nan"), float("inf"), None]),
        ])
    columns = [
        ("id", "integer", "INTEGER"),
        ("city", "text", "VARCHAR"),
        ("score", "smallint", "SMALLINT"),
        ("birth", "date", "DATE"),
        ("salary", "numeric(10,2)", "DECIMAL(10,2)"),
        ("disease", "text", "VARCHAR"),
        ("smoker", "boolean", "BOOLEAN"),
        ("seen", "timestamptz", "TIMESTAMPTZ"),
        ("visit", "timestamp", "TIMESTAMP"),
        ("note", "text", "VARCHAR"),
        ("ratio", "double precision", "DOUBLE"),
    ]
    return columns, rows


def hierarchy(values: Sequence[str], *levels: Callable[[str], str]) -> dict[str, str]:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=";", lineterminator="\n")
    for v in sorted(set(values)):
        w.writerow([v, *(f(v) for f in levels)])
    return {"csv": buf.getvalue()}


def generated_spec(rows: Sequence[Sequence[Any]], **extra: Any) -> dict[str, Any]:
    text = [[rule(v) for v in r] for r in rows]
    col = lambda i: [r[i] for r in text]  # noqa: E731
    band = lambda v: "" if v == "" else f"{int(v) // 10 * 10}-{int(v) // 10 * 10 + 9}"  # noqa: E731
    spec: dict[str, Any] = {
        "attributes": {
            "id": {"type": "identifying"},
            "city": {"type": "quasi_identifying", "hierarchy": hierarchy(col(1), lambda v: "CH" if v else "", lambda v: "*")},
            "score": {"type": "quasi_identifying", "hierarchy": hierarchy(col(2), band, lambda v: "*")},
            "birth": {"type": "quasi_identifying", "hierarchy": hierarchy(col(3), lambda v: v[:4], lambda v: v[:3], lambda v: "*")},
            "salary": {"type": "quasi_identifying", "microaggregation": {"function": "arithmetic_mean"}},
            "disease": {"type": "sensitive"},
            "smoker": {"type": "sensitive"},
            "seen": {"type": "sensitive"},
            "ratio": {"type": "sensitive"},
        },
        "privacy": ["k-anonymity(k=3)", {"model": "distinct-l-diversity", "attribute": "disease", "l": 2}],
        "suppression_limit": 0.1,
        "algorithm": "flash",
    }
    spec.update(extra)
    return spec


#: The generated table's columns as Spark types (DDL), by name.
SPARK_TYPES = {
    "id": "INT", "city": "STRING", "score": "SMALLINT", "birth": "DATE", "salary": "DECIMAL(10,2)",
    "disease": "STRING", "smoker": "BOOLEAN", "seen": "TIMESTAMP", "visit": "TIMESTAMP_NTZ", "note": "STRING",
    "ratio": "DOUBLE",
}
