"""deid_client.spark on a real Spark: PySpark in ``local[2]`` (one session for this module, 4
shuffle partitions, the session's time zone Europe/Zurich so that nothing depends on UTC
being the default).

For adult and a generated table, the released DataFrame equals ``deid anonymize --output`` (the
CLI at DEID_BIN) on the same data exported by deid's typed→text rule — as multisets — and
deid's verification passes; a broken apply is caught by verification and leaves no data; rows
the plan does not cover are suppressed and counted; the rule's Spark SQL equals the rule
written again in Python (adapter_cases.py) on edge values; the module uses no RDD and no UDF."""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import shutil
import sys
import unicodedata
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from deid_client import Client, DeidError
from deid_client._adapter import columns

from adapter_cases import (
    ADULT_QIS,
    FLOATS,
    FLOATS32,
    SPARK_TYPES,
    adult_rows,
    adult_spec,
    cli_output,
    float_rule,
    generated,
    generated_spec,
    plans_without,
    rule,
)

if shutil.which("java") is None:  # scripts/test installs it; never skip silently
    raise RuntimeError("the Spark tests need Java 17 (apt-get install openjdk-17-jre-headless)")

pyspark = pytest.importorskip("pyspark", reason="pyspark is in requirements-test.txt")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from deid_client import spark as dspark  # noqa: E402

MODULE = Path(dspark.__file__)


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # The tests' own createDataFrame runs Python workers: this interpreter (the module runs none).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("deid-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "Europe/Zurich")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def released(df: DataFrame) -> Counter[tuple[str, ...]]:
    return Counter(tuple(rule(v) for v in r) for r in df.collect())


# ---------------------------------------------------------------- adult


def stored(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str) -> DataFrame:
    """The rows as a Parquet table of the session (read by the JVM alone in every test)."""
    name = f"src_{abs(hash(schema))}_{len(rows)}"
    if not spark.catalog.tableExists(name):
        spark.createDataFrame([tuple(r) for r in rows], schema).write.saveAsTable(name)
    return spark.table(name)


def adult_df(spark: SparkSession) -> tuple[list[str], list[list[Any]], DataFrame]:
    header, rows = adult_rows()
    schema = ", ".join(f"`{c}` {'INT' if c == 'age' else 'STRING'}" for c in header)
    return header, rows, stored(spark, rows, schema)


def test_adult_equals_the_cli(spark: SparkSession, client: Client, tmp_path: Path) -> None:
    header, rows, df = adult_df(spark)
    spec = adult_spec()
    result = dspark.anonymize(client, df, spec, progress=False)
    assert result.verification.passed
    assert result.floor == {} and result.uncovered_rows == 0
    assert result.report.rows == len(rows) and result.groups < len(rows)
    assert result.groups_level0 == result.groups  # counted: level 0 is sent
    expected = cli_output(tmp_path, header, rows, spec)
    assert released(result.df) == expected
    assert result.rows_written == sum(expected.values())
    assert result.df.columns == [c for c in header if c != "native-country"]  # the identifier dropped
    assert set(result.timings) == {"profile", "group", "search", "apply_verify"}


def test_adult_at_a_floor_written_as_parquet_equals_the_cli_with_min_levels(
    spark: SparkSession, client: Client, tmp_path: Path
) -> None:
    header, rows, df = adult_df(spark)
    spec = adult_spec()
    out = str(tmp_path / "adult.parquet")
    result = dspark.anonymize(client, df, spec, max_groups=2000, path=out, progress=False)
    assert result.floor and result.groups < 2000 < result.groups_level0
    assert result.warnings and "floor" in result.warnings[0]
    assert result.verification.passed
    cli_spec = json.loads(json.dumps(spec))
    for col, level in result.floor.items():
        cli_spec["attributes"][col]["min_level"] = level
    expected = cli_output(tmp_path, header, rows, cli_spec)
    assert released(spark.read.parquet(out)) == expected == released(result.df)


def test_a_floor_raised_from_the_table_equals_the_floor_chosen_from_the_rows(
    spark: SparkSession, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile's floor is only where grouping starts: started at level 0, the frequency
    table is raised along the chain from the table itself to the same floor and rows."""
    _, _, df = adult_df(spark)
    chosen = dspark.anonymize(client, df, adult_spec(), max_groups=2000, progress=False)
    monkeypatch.setattr(dspark, "_profile", lambda src, max_groups: (0, {}))
    raised = dspark.anonymize(client, df, adult_spec(), max_groups=2000, progress=False)
    assert raised.floor == chosen.floor and raised.groups == chosen.groups < 2000
    assert raised.groups_level0 > 2000  # counted at level 0
    assert raised.verification.passed
    assert released(raised.df) == released(chosen.df)


def test_plans_too_wide_for_integer_keys_join_on_the_texts(
    spark: SparkSession, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header, rows, df = adult_df(spark)
    monkeypatch.setattr(dspark._Codes, "of", staticmethod(lambda plan: None))
    spec = adult_spec()
    result = dspark.anonymize(client, df, spec, progress=False)
    assert result.verification.passed
    assert released(result.df) == cli_output(tmp_path, header, rows, spec)


@pytest.mark.parametrize("key_bits,combined", [(63, 65_536), (8, 1)], ids=["one-key", "many-keys"])
def test_grouping_on_codes_equals_grouping_on_the_texts(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, key_bits: int, combined: int
) -> None:
    """The frequency table grouped on the labels' integer codes (one or several keys, one
    join per column or several) equals the one grouped on the hierarchies' labels; the rows
    with a value the hierarchy lacks are counted as missing."""
    from deid_client import _adapter

    monkeypatch.setattr(dspark, "KEY_BITS", key_bits)
    monkeypatch.setattr(_adapter, "COMBINED_ROWS", combined)
    header, rows, df = adult_df(spark)
    cols = _adapter.columns(adult_spec(), list(df.columns), "anonymize")
    odd = df.withColumn("sex", F.when(F.col("age") == 90, F.lit("Other")).otherwise(F.col("sex")))
    keys = [f"deid_k{j}" for j in range(len(cols.sent))]
    n = F.count(F.lit(1)).alias("deid_n")
    for floor in [{}, {"age": 2, "education": 1, "marital-status": 1}]:
        levels = dspark._floor_labels(cols, floor)
        src = dspark._source(df, cols)
        dspark._load_hierarchies(src)
        texts = [src.x(c) for c in cols.sent]
        coded = dspark._coded_table(spark, src.df, texts, levels, [n], "deid_missing")
        plain = src.with_levels(floor).groupBy(*src.keys(floor)).agg(n)
        got = Counter(tuple(r) for r in coded.select(*keys, "deid_n").collect())
        assert got == Counter(tuple(r) for r in plain.select(*keys, "deid_n").collect())
        assert coded.agg(F.sum("deid_missing")).first()[0] == 0
        src = dspark._source(odd, cols)
        lacking = dspark._coded_table(spark, src.df, texts, levels, [n], "deid_missing")
        ninety = sum(1 for r in rows if r[header.index("age")] == 90)
        assert lacking.agg(F.sum("deid_missing")).first()[0] == ninety > 0


def test_a_value_no_hierarchy_has_is_refused_by_deid(spark: SparkSession, client: Client) -> None:
    """A value missing from its hierarchy is counted by the coded grouping, which then groups
    on the texts, so that deid refuses it as for any upload."""
    _, _, df = adult_df(spark)
    odd = df.withColumn("sex", F.when(F.col("age") == 90, F.lit("Other")).otherwise(F.col("sex")))
    with pytest.raises(DeidError, match="hierarchy of column 'sex' has no row for 1 value"):
        dspark.anonymize(client, odd, adult_spec(), progress=False)


@pytest.mark.parametrize("distinct", [1, 700, 30_000, 250_000])
def test_the_profile_sketch_estimates_distinct_counts(spark: SparkSession, distinct: int) -> None:
    """The profile's HyperLogLog sketches, several in one aggregation, are each within four
    standard deviations of their own count."""
    df = spark.range(300_000).select(
        F.xxhash64((F.col("id") % distinct).cast("string"), F.lit(0)).alias("h"),
        F.xxhash64((F.col("id") % (distinct // 3 + 1)).cast("string"), F.lit(1)).alias("g"),
    )
    estimates = dspark._distinct_counts(df, [F.col("h"), F.col("g")])
    for estimate, count in zip(estimates, [distinct, distinct // 3 + 1], strict=True):
        assert abs(estimate - count) <= 4 * dspark.PROFILE_RSD * count + 1


def test_a_broken_apply_is_caught_by_verify(
    spark: SparkSession, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, df = adult_df(spark)

    def original_value(src: Any, i: int, key: str, published: Any) -> Any:  # the class ignored
        return F.col(key)

    monkeypatch.setattr(dspark, "_qi_output", original_value)
    out = str(tmp_path / "broken.parquet")
    with pytest.raises(dspark.VerificationFailedError) as e:
        dspark.anonymize(client, df, adult_spec(), path=out, progress=False)
    assert not e.value.verification.passed
    assert spark.read.parquet(out).count() == 0  # erased: nothing released
    with pytest.raises(dspark.VerificationFailedError):
        dspark.anonymize(client, df, adult_spec(), table="adult_broken", progress=False)
    assert not spark.catalog.tableExists("adult_broken")


def test_without_a_model_on_sensitive_values_verify_groups_by_the_quasi_identifiers(
    spark: SparkSession, client: Client, tmp_path: Path
) -> None:
    # No model reads salary-class: verification sends it only as "the marker or not", so its
    # table has a row per output class (and the masked block); the release is unchanged.
    header, rows, df = adult_df(spark)
    spec = adult_spec(privacy=["k-anonymity(k=5)"], suppression_limit=0.05)
    result = dspark.anonymize(client, df, spec, progress=False)
    assert result.verification.passed
    out = released(result.df)
    assert out == cli_output(tmp_path, header, rows, spec)
    names = result.df.columns
    qi, s = [names.index(c) for c in ADULT_QIS], names.index("salary-class")
    classes = {tuple(r[i] for i in qi) + (r[s] == "*",) for r in out}
    assert result.verification.released_rows == len(classes) < len({tuple(r[i] for i in qi) + (r[s],) for r in out})
    assert result.verification.suppressed_records == sum(n for r, n in out.items() if r[s] == "*")

    # What is left of the sensitive value still tells the masked block from a class: a row of
    # masked quasi-identifiers with its salary shown is a class of one, which fails k = 5.
    cols = columns(spec, header, "test")
    for salary, passes in (("<=50K", False), ("*", True)):
        extra = spark.createDataFrame([tuple(salary if c == "salary-class" else "*" for c in names)], result.df.schema)
        verification, _ = dspark._verify(
            client, result.df.unionByName(extra), cols, result.job.id, dspark.count_name(cols.sent), ("*", "")
        )
        assert verification.passed is passes, salary
        assert verification.suppressed_records == result.verification.suppressed_records + passes


def test_uncovered_rows_are_suppressed_and_counted(
    spark: SparkSession, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    header, rows, df = adult_df(spark)
    ages = Counter(r[header.index("age")] for r in rows)

    plans_without(monkeypatch, "age", "90")  # a plan made on data without age 90
    name = "2025"  # a name Spark SQL reads as a number unless quoted
    result = dspark.anonymize(client, df, adult_spec(), table=name, progress=False)
    assert result.uncovered_rows == ages[90] > 0
    assert result.verification.passed
    assert result.df.where(F.col("age") == "*").count() >= ages[90]
    assert spark.table("`2025`").count() == len(rows)


# ---------------------------------------------------------------- generated types


def generated_df(spark: SparkSession) -> tuple[list[str], list[list[Any]], DataFrame]:
    columns, rows = generated()
    header = [c for c, _, _ in columns]
    schema = ", ".join(f"{c} {SPARK_TYPES[c]}" for c in header)
    return header, rows, stored(spark, rows, schema)


@pytest.mark.parametrize("local", [False, True], ids=["global", "local"])
def test_typed_columns_equal_the_cli(spark: SparkSession, client: Client, tmp_path: Path, local: bool) -> None:
    header, rows, df = generated_df(spark)
    extra = {"local": {"iterations": 4}, "suppression_limit": 0.0} if local else {}
    spec = generated_spec(rows, **extra)
    result = dspark.anonymize(client, df, spec, progress=False)
    assert result.verification.passed and result.uncovered_rows == 0
    if local:
        assert len(result.plan.steps) > 1
    assert released(result.df) == cli_output(tmp_path, header, rows, spec)


def test_nfc_and_nfd_are_different_values(spark: SparkSession, client: Client) -> None:
    _, rows, df = generated_df(spark)
    result = dspark.anonymize(client, df, generated_spec(rows), progress=False)
    city = result.plan.quasi_identifiers.index("city")
    keys = set(result.plan.steps[0].maps[city])
    assert {"Zürich", unicodedata.normalize("NFD", "Zürich"), ""} <= keys and len(keys) == 5


EDGE_VALUES: list[tuple[str, Sequence[Any]]] = [
    ("BIGINT", [0, -1, 9223372036854775807, None]),
    ("DECIMAL(20,10)", [Decimal("0E-10"), Decimal("1E-10"), Decimal("-12.5000000000"), Decimal("1234567890.0000000001")]),
    ("DECIMAL(10,0)", [Decimal("0"), Decimal("-7")]),
    ("BOOLEAN", [True, False, None]),
    ("DATE", [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1582, 10, 4), dt.date(1969, 12, 31)]),
    ("TIMESTAMP", [
        dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=dt.timezone.utc),
        dt.datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc),
        dt.datetime(2024, 3, 31, 2, 30, 0, 120000, tzinfo=dt.timezone(dt.timedelta(hours=-7))),
    ]),
    ("TIMESTAMP_NTZ", [dt.datetime(2024, 3, 31, 2, 30, 0), dt.datetime(1, 1, 1, 0, 0, 0, 10), dt.datetime(9999, 12, 31, 23, 59, 59)]),
    ("STRING", ["", "a,b", "Zürich", unicodedata.normalize("NFD", "Zürich"), None]),
    ("DOUBLE", FLOATS),
    ("FLOAT", FLOATS32),
]


@pytest.mark.parametrize("typ,values", EDGE_VALUES, ids=[t for t, _ in EDGE_VALUES])
def test_the_rule_in_spark_sql_equals_the_rule_in_python(spark: SparkSession, typ: str, values: Sequence[Any]) -> None:
    df = spark.createDataFrame([(v,) for v in values], f"v {typ}")
    text = F.coalesce(F.expr(dspark._text("v", "v", df.schema["v"].dataType)), F.lit(""))
    expected = [float_rule(v, 32) if typ == "FLOAT" and v is not None else rule(v) for v in values]
    assert [r[0] for r in df.select(text).collect()] == expected


def test_bad_input_is_refused_before_any_upload(spark: SparkSession, client: Client) -> None:
    _, rows, df = generated_df(spark)
    before = len(client.list_datasets(limit=100).items)
    with pytest.raises(ValueError, match="spec.attributes.nope"):
        dspark.anonymize(client, df, {"attributes": {"nope": {"type": "sensitive"}}})
    with pytest.raises(ValueError, match="spec.dataset_id"):
        dspark.anonymize(client, df, {**generated_spec(rows), "dataset_id": "d"})
    with pytest.raises(ValueError, match="'codes' has type array<int>"):
        dspark.anonymize(client, df.withColumn("codes", F.array(F.lit(1))), {"attributes": {"codes": {"type": "quasi_identifying"}}})
    far = spark.sql("SELECT DATE'+10000-01-01' AS d UNION ALL SELECT DATE'2000-01-01'")
    with pytest.raises(ValueError, match="column 'd': 1 value"):
        dspark.anonymize(client, far, {"attributes": {"d": {"type": "quasi_identifying"}}})
    with pytest.raises(ValueError, match="path, table"):
        dspark.anonymize(client, df, generated_spec(rows), path="p", table="t")
    with pytest.raises(ValueError, match="mode: expected"):
        dspark.anonymize(client, df, generated_spec(rows), table="t", mode="append")
    assert len(client.list_datasets(limit=100).items) == before


# ---------------------------------------------------------------- the module itself

#: What would tie the module to a classic session's JVM or run Python on the executors.
FORBIDDEN = {"rdd", "udf", "pandas_udf", "udtf", "mapInPandas", "mapInArrow", "applyInPandas", "applyInArrow",
             "applyInPandasWithState", "foreach", "foreachPartition", "sparkContext", "_jdf", "_jvm", "_jsc",
             "parallelize", "collect", "toPandas", "toArrow", "mapPartitions"}


def test_the_module_uses_no_rdd_no_udf_and_never_collects() -> None:
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.alias):
            used.update(node.name.split("."))
            used.add(node.asname or "")
    assert not used & FORBIDDEN
    assert "toLocalIterator" in used  # the tables stream

