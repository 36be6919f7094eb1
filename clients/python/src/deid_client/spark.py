"""Anonymize a Spark DataFrame inside Spark: only the frequency table of the columns the job
needs leaves Spark (docs/engines.md).

:func:`anonymize` uses the DataFrame API only — no RDD, no Python UDF — so it runs on Spark
Connect and on shared clusters as well as on a classic session:

1. *profile*: one aggregation: approximate distinct counts (``approx_count_distinct``) of the
   tuple of the quasi-identifiers, sensitive and microaggregated columns at level 0, the rows
   and the dates the typed→text rule refuses; when level 0 exceeds ``max_groups``, a second
   at every floor of a chain — a level per quasi-identifier, from the hierarchy tables given
   inline in the specification, raising one level at a time the column whose hierarchy shrinks
   most (the hierarchies as broadcast joins; a tuple's hash is the XOR of its columns' hashes,
   so a floor costs a sketch update per row); the lowest floor whose estimate fits
   ``max_groups`` is chosen;
2. *frequency table*: one ``groupBy`` over those columns as text (deid's typed→text rule in
   Spark SQL) with a count column, written by Spark as one Parquet file in a staging directory
   and uploaded as Parquet (``upload_format="parquet"``, the default), or streamed partition by
   partition (``toLocalIterator``) as CSV lines built in Spark SQL (``upload_format="csv"``:
   no shared directory needed) — this process never holds the table, never the rows;
3. the *job* on deid (``data_level`` set for the floor), waited for with progress; Ctrl-C
   cancels it;
4. *apply*: per quasi-identifier one broadcast join with its maps (a column per step), per
   step one join with the classes it publishes, one join with the suppressed tuples, one with
   the classes' values and aggregates; rows the plan does not cover are suppressed and
   counted (an ``Observation``: fail closed);
5. *verify*: a ``groupBy`` of the released data streamed as CSV lines built in Spark SQL to
   ``POST /v1/jobs/{id}/verify``; a failure raises :class:`VerificationFailedError` and leaves no released data (the target is
   erased when it was written).

pyspark is optional (``deid-client[spark]``): this module imports without it.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ._adapter import (
    DEFAULT_MAX_GROUPS,
    END_EPOCH_SECOND,
    FETCH_ROWS,
    FIRST_EPOCH_SECOND,
    PREFIX,
    AdapterResult,
    Columns,
    VerificationFailedError,
    _ChunkReader,
    check_plan,
    columns,
    count_name,
    csv_cell,
    floor_chain,
    floor_warning,
    out_of_range,
    pick_floor,
    plain_decimal,
    raw_spec,
    searched,
    unsupported,
    uploader,
)
from .builders import JobSpec
from .client import Client
from .errors import DeidError
from .types import Job, Plan, Report, Verification

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["SparkResult", "VerificationFailedError", "anonymize"]

#: Relative standard deviation of the profile's ``approx_count_distinct``.
PROFILE_RSD = 0.01
#: Tables of the plan with at most this many rows are broadcast (the maps always are).
BROADCAST_ROWS = 500_000

_DAY_MICROS = 86_400_000_000


@dataclass
class SparkResult(AdapterResult):
    """What :func:`anonymize` did (``groups_level0`` is an ``approx_count_distinct``)."""

    #: The released data: lazy (a plan over the source) or, when written, read from the target.
    df: DataFrame = field(kw_only=True)


# ---------------------------------------------------------------- the rule in Spark SQL


def _q(name: str) -> str:
    """A Spark SQL identifier: backquotes, a backquote inside doubled."""
    return "`" + name.replace("`", "``") + "`"


def _text(expr: str, column: str, dtype: Any) -> str:
    """The Spark SQL text of a typed value by deid's rule (NULL stays NULL)."""
    kind = type(dtype).__name__
    if kind in ("ByteType", "ShortType", "IntegerType", "LongType", "DecimalType", "StringType",
                "VarcharType", "CharType", "BooleanType", "DateType"):
        # Spark writes these as the rule does: digits, plain decimals with the scale's fraction
        # digits, true/false, yyyy-MM-dd (years 1–9999: checked by _out_of_range).
        return f"CAST({expr} AS STRING)"
    if kind in ("FloatType", "DoubleType"):
        return _float_text(expr, "FLOAT" if kind == "FloatType" else "DOUBLE")
    if kind == "TimestampNTZType":
        # Spark writes a timestamp without time zone as "yyyy-MM-dd HH:mm:ss" and the fraction
        # without trailing zeros, converting nothing (its arithmetic and date_format would go
        # through the session's time zone): its wall time taken as UTC.
        return f"concat(replace(CAST({expr} AS STRING), ' ', 'T'), 'Z')"
    if kind == "TimestampType":
        # Through microseconds since the epoch: independent of the session's time zone.
        micros = f"unix_micros({expr})"
        rem = f"pmod({micros}, {_DAY_MICROS})"
        day = f"CAST(date_from_unix_date(CAST(({micros} - {rem}) DIV {_DAY_MICROS} AS INT)) AS STRING)"
        secs = f"({rem} DIV 1000000)"
        clock = (
            f"lpad(CAST({secs} DIV 3600 AS STRING), 2, '0'), ':', lpad(CAST(({secs} DIV 60) % 60 AS STRING), 2, '0'), "
            f"':', lpad(CAST({secs} % 60 AS STRING), 2, '0')"
        )
        return f"concat({day}, 'T', {clock}, {_fraction(f'({rem} % 1000000)')}, 'Z')"
    raise unsupported(column, dtype.simpleString())


def _float_text(expr: str, width: str) -> str:
    """A FLOAT or DOUBLE by the rule: the shortest decimal that reads back as the same number in
    its width, in plain notation. Spark's CAST to STRING is Java's ``toString``, not always the
    shortest before Java 19 (``1e23`` is ``9.999999999999999E22``): the shortest is the first of
    ``%.{p}e`` for p = 0, 1, … that reads back as the value."""
    digits = 9 if width == "FLOAT" else 17
    # Lambdas bind the value and the shortest text once (an expression repeating them would
    # outgrow Java's code size limit).
    candidates = f"transform(sequence(0, {digits - 1}), p -> format_string(concat('%.', p, 'e'), v))"
    shortest = f"filter({candidates}, c -> CAST(c AS {width}) = v)[0]"
    text = f"transform(array({expr}), v -> transform(array({shortest}), s -> {plain_decimal('s')})[0])[0]"
    return (
        f"CASE WHEN {expr} IS NULL THEN NULL WHEN isnan({expr}) THEN 'NaN' "
        f"WHEN {expr} = CAST('Infinity' AS {width}) THEN 'Infinity' "
        f"WHEN {expr} = CAST('-Infinity' AS {width}) THEN '-Infinity' ELSE {text} END"
    )


def _fraction(micros: str) -> str:
    """'' for 0 microseconds, else '.' and the six digits without trailing zeros."""
    return f"CASE WHEN {micros} = 0 THEN '' ELSE concat('.', TRIM(TRAILING '0' FROM lpad(CAST({micros} AS STRING), 6, '0'))) END"


def _out_of_range(expr: str, dtype: Any) -> str | None:
    """A condition true for a value the rule refuses (years outside 1–9999)."""
    kind = type(dtype).__name__
    if kind in ("DateType", "TimestampNTZType"):
        return f"(year({expr}) < 1 OR year({expr}) > 9999)"
    if kind == "TimestampType":
        lo, hi = FIRST_EPOCH_SECOND * 1_000_000, END_EPOCH_SECOND * 1_000_000
        return f"(unix_micros({expr}) < {lo} OR unix_micros({expr}) >= {hi})"
    return None


# ---------------------------------------------------------------- the source with its keys


@dataclass
class _Source:
    """The source with the text of every column sent (``deid_x{j}``, NULL as ''), and the
    broadcast hierarchy tables of the quasi-identifiers that have one."""

    spark: SparkSession
    df: DataFrame
    cols: Columns
    names: list[str]
    hierarchies: dict[int, DataFrame] = field(default_factory=dict)

    def x(self, column: str) -> str:
        """The helper column holding ``column``'s text."""
        return f"{PREFIX}x{self.cols.sent.index(column)}"

    def with_levels(self, levels: Mapping[str, int]) -> DataFrame:
        """The source joined with the hierarchy table of every quasi-identifier raised above
        level 0 in ``levels`` (left joins: a value the table lacks keeps its own text)."""
        from pyspark.sql import functions as F

        df = self.df
        for i, q in enumerate(self.cols.qis):
            if levels.get(q, 0) > 0:
                h = F.broadcast(self.hierarchies[i])
                df = df.join(h, F.col(self.x(q)) == F.col(f"{PREFIX}h{i}_v"), "left")
        return df

    def keys(self, levels: Mapping[str, int]) -> list[Column]:
        """The frequency table's key columns (``deid_k{j}``): a quasi-identifier at level L > 0
        is its hierarchy's label (its own text when the table lacks it: deid then names it)."""
        from pyspark.sql import functions as F

        out = []
        for j, c in enumerate(self.cols.sent):
            lvl = levels.get(c, 0)
            col = F.col(self.x(c))
            if lvl:
                col = F.coalesce(F.col(f"{PREFIX}h{self.cols.qis.index(c)}_l{lvl}"), col)
            out.append(col.alias(f"{PREFIX}k{j}"))
        return out


def _source(df: DataFrame, cols: Columns) -> _Source:
    """The source with its text columns; ValueError for a type the rule does not cover."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in df.schema.fields}
    texts = [
        F.coalesce(F.expr(_text(_q(c), c, types[c])), F.lit("")).alias(f"{PREFIX}x{j}")
        for j, c in enumerate(cols.sent)
    ]
    return _Source(df.sparkSession, df.select("*", *texts), cols, list(df.columns))


def _load_hierarchies(src: _Source) -> None:
    """The inline hierarchies as DataFrames: ``deid_h{i}_v`` and one column per level."""
    from pyspark.sql.types import StringType, StructField, StructType

    for i, col in enumerate(src.cols.qis):
        h = src.cols.hierarchies.get(col)
        if h is None:
            continue
        names = [f"{PREFIX}h{i}_v"] + [f"{PREFIX}h{i}_l{j}" for j in range(1, h.height)]
        schema = StructType([StructField(n, StringType(), True) for n in names])
        rows = [tuple(r[j] if j < len(r) else None for j in range(h.height)) for r in h.rows.values()]
        src.hierarchies[i] = src.spark.createDataFrame(rows, schema)


# ---------------------------------------------------------------- profile and frequency table


def _profile(src: _Source, max_groups: int, original: Any) -> tuple[int, int, dict[str, int], int]:
    """(estimated groups at level 0, at the floor, the floor, the source's rows). One
    aggregation gives the approximate distinct tuples at level 0, the rows and the dates the
    rule refuses (ValueError); when level 0 exceeds ``max_groups``, a second gives those at every
    floor of the chain (:func:`deid_client._adapter.floor_chain`) at once. A tuple's hash is the
    XOR of its columns' seeded ``xxhash64`` at their levels, so a floor costs one sketch update
    per row, not a scan."""
    from pyspark.sql import functions as F

    # The columns' hashes are a projection below the aggregation: the aggregation refers to
    # them by name, which keeps its generated code small for a long chain.
    hashes: dict[tuple[int, int], Column] = {}

    def tuple_hash(levels: Mapping[str, int]) -> Column:
        cols = []
        for j, key in enumerate(src.keys(levels)):
            lvl = levels.get(src.cols.sent[j], 0)
            hashes.setdefault((j, lvl), F.xxhash64(key, F.lit(j)).alias(f"{PREFIX}hash{j}_{lvl}"))
            cols.append(F.col(f"{PREFIX}hash{j}_{lvl}"))
        out = cols[0]
        for c in cols[1:]:
            out = out.bitwiseXOR(c)
        return out

    checks = [(c, _out_of_range(_q(c), original[c])) for c in src.cols.sent]
    aggs = [F.approx_count_distinct(tuple_hash({}), PROFILE_RSD).alias("level0"), F.count(F.lit(1)).alias("rows")]
    aggs += [F.expr(f"count_if({cond})").alias(f"oor{j}") for j, (_, cond) in enumerate(checks) if cond]
    first = src.df.select("*", *hashes.values()).agg(*aggs).first()
    assert first is not None
    for j, (c, cond) in enumerate(checks):
        if cond and first[f"oor{j}"]:
            raise out_of_range(c, int(first[f"oor{j}"]))
    level0, rows = int(first["level0"]), int(first["rows"])
    if level0 <= max_groups:
        return level0, level0, {}, rows
    chain = floor_chain(src.cols)
    if len(chain) == 1:  # no quasi-identifier can be raised
        pick_floor(chain, [level0], max_groups)
    _load_hierarchies(src)
    top = {c: max(f.get(c, 0) for f in chain) for c in src.cols.qis}
    hashes.clear()
    estimates = [F.approx_count_distinct(tuple_hash(f), PROFILE_RSD) for f in chain[1:]]
    row = src.with_levels(top).select(*hashes.values()).agg(*estimates).first()
    assert row is not None
    groups, floor = pick_floor(chain, [level0, *(int(v) for v in row)], max_groups)
    return level0, groups, floor, rows


def _lines(table: DataFrame, names: Sequence[str]) -> DataFrame:
    """The rows of a table of text columns and a count as CSV lines (``,``, quoted where
    needed, as :func:`deid_client._adapter.csv_chunks` writes them), built in Spark SQL so that
    one string per row reaches this process."""
    from pyspark.sql import functions as F

    def cell(name: str) -> Column:
        c = F.col(name)
        quoted = F.concat(F.lit('"'), F.regexp_replace(c, '"', '""'), F.lit('"'))
        return F.when(c.rlike('[",\r\n]'), quoted).otherwise(c)

    return table.select(F.concat_ws(",", *[cell(n) for n in names[:-1]], F.col(names[-1]).cast("string")).alias("line"))


class _Lines:
    """CSV lines of a local iterator, each with its newline, counted as they pass: ``n`` rows,
    ``records`` the sum of their counts (the line's last field)."""

    def __init__(self, header: Sequence[str], rows: Iterator[Any]) -> None:
        self.header = header
        self.rows = rows
        self.n = 0
        self.records = 0

    def chunks(self) -> Iterator[bytes]:
        yield (",".join(csv_cell(h) for h in self.header) + "\n").encode("utf-8")
        buf: list[str] = []
        for row in self.rows:
            line = row[0]
            self.n += 1
            self.records += int(line[line.rindex(",") + 1:])
            buf.append(line)
            if len(buf) == FETCH_ROWS:
                yield ("\n".join(buf) + "\n").encode("utf-8")
                buf = []
        if buf:
            yield ("\n".join(buf) + "\n").encode("utf-8")


def _keys_table(df: DataFrame, keys: Sequence[Column]) -> DataFrame:
    """One ``groupBy`` of the key columns ``deid_k{j}`` with the rows' count ``deid_n``."""
    from pyspark.sql import functions as F

    return df.select(*keys).groupBy(*[f"{PREFIX}k{j}" for j in range(len(keys))]).agg(
        F.count(F.lit(1)).alias(f"{PREFIX}n")
    )


def _frequency_table(src: _Source, floor: Mapping[str, int]) -> DataFrame:
    """The frequency table at the floor: the keys and the rows' count."""
    return _keys_table(src.with_levels(floor), src.keys(floor))


def _send(
    table: DataFrame, header: Sequence[str], upload_format: str, staging: str | None,
    post: Callable[[Any], Any],
) -> tuple[Any, int, int]:
    """Sends a frequency table (key columns, then the count) with ``post`` (a path or a
    streamed CSV body → the answer): ``parquet`` writes it as one Parquet file under
    ``staging`` (a temporary directory when None) and posts that file; ``csv`` streams CSV
    lines built in Spark partition by partition (``toLocalIterator``). (The answer, rows,
    records.)"""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    if upload_format == "csv":
        lines = _Lines(header, _lines(table, table.columns).toLocalIterator(prefetchPartitions=True))
        answer = post(io.BufferedReader(_ChunkReader(lines.chunks())))
        return answer, lines.n, lines.records
    if upload_format != "parquet":
        raise ValueError(f"upload_format: expected 'parquet' or 'csv', got {upload_format!r}")
    named = table.toDF(*header)
    obs = Observation(f"{PREFIX}sent")
    counted = named.observe(obs, F.count(F.lit(1)).alias("n"), F.sum(F.col(_q(header[-1]))).alias("records"))
    with tempfile.TemporaryDirectory(prefix=PREFIX, dir=staging) as tmp:
        out = os.path.join(tmp, "table")
        counted.repartition(1).write.parquet(out)  # the grouping stays parallel; one writer
        files = [f for f in os.listdir(out) if f.endswith(".parquet")]
        if len(files) != 1:
            raise DeidError(f"Spark wrote {len(files)} Parquet files for the frequency table; expected 1")
        answer = post(os.path.join(out, files[0]))
    got = obs.get
    return answer, int(got["n"]), int(got["records"] or 0)


# ---------------------------------------------------------------- apply


def _table(spark: SparkSession, names: Sequence[str], rows: list[tuple[Any, ...]], types: Sequence[str]) -> DataFrame:
    """A small DataFrame of the plan (broadcast when it has at most BROADCAST_ROWS rows)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    kinds = {"int": IntegerType(), "string": StringType()}
    schema = StructType([StructField(n, kinds[t], True) for n, t in zip(names, types)])
    df = spark.createDataFrame(rows, schema)
    return F.broadcast(df) if len(rows) <= BROADCAST_ROWS else df


def _map_joins(src: _Source, plan: Plan, df: DataFrame) -> DataFrame:
    """Per quasi-identifier one broadcast join with its maps: ``deid_m{i}_o{s}`` is the output
    of step s (NULL: the value is in no map). The keys are text that is never NULL (NULL is
    already the empty value), so plain ``=`` is null-safe and keeps the join a hash join."""
    from pyspark.sql import functions as F

    steps = plan.steps
    for i, q in enumerate(plan.quasi_identifiers):
        values = sorted(set().union(*(s.maps[i].keys() for s in steps)))
        names = [f"{PREFIX}m{i}_v"] + [f"{PREFIX}m{i}_o{s}" for s in range(len(steps))]
        rows = [(v, *(s.maps[i].get(v) for s in steps)) for v in values]
        m = F.broadcast(_table(src.spark, names, rows, ["string"] * len(names)))
        key = f"{PREFIX}k{src.cols.sent.index(q)}"
        df = df.join(m, F.col(key) == F.col(f"{PREFIX}m{i}_v"), "left")
    return df


def _class_joins(src: _Source, plan: Plan, df: DataFrame) -> tuple[DataFrame, Column]:
    """Per step one join with the classes it publishes (on the step's mapped tuple), one with
    the suppressed tuples (on the last step's); the row's state: its class (≥ 0), −1
    suppressed, −2 not covered — the first step whose maps send the tuple to a class it
    publishes (docs/definitions.md §7.2)."""
    from pyspark.sql import functions as F

    n = len(plan.quasi_identifiers)
    state = None
    for s, step in enumerate(plan.steps):
        names = [f"{PREFIX}p{s}_v{i}" for i in range(n)] + [f"{PREFIX}p{s}_c"]
        rows = [(*plan.classes[c].values, c) for c in step.publishes]
        p = _table(src.spark, names, rows, ["string"] * n + ["int"])
        df = df.join(p, _tuple_eq([f"{PREFIX}m{i}_o{s}" for i in range(n)], names[:n]), "left")
        missing = _any_null([f"{PREFIX}m{i}_o{s}" for i in range(n)])
        published = F.col(f"{PREFIX}p{s}_c")
        state = (F.when(missing, -2) if state is None else state.when(missing, -2)).when(published.isNotNull(), published)
    last = len(plan.steps) - 1
    names = [f"{PREFIX}sp_v{i}" for i in range(n)] + [f"{PREFIX}sp_hit"]
    rows = [(*t, 1) for t in sorted({tuple(t) for t in plan.suppressed})]
    sp = _table(src.spark, names, rows, ["string"] * n + ["int"])
    df = df.join(sp, _tuple_eq([f"{PREFIX}m{i}_o{last}" for i in range(n)], names[:n]), "left")
    assert state is not None
    state = state.when(F.col(f"{PREFIX}sp_hit").isNotNull(), -1).otherwise(-2)
    return df, state


def _tuple_eq(left: Sequence[str], right: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for a, b in zip(left, right):
        cond = cond & (F.col(a) == F.col(b))
    return cond


def _any_null(names: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    cond = F.lit(False)
    for name in names:
        cond = cond | F.col(name).isNull()
    return cond


def _qi_output(src: _Source, i: int, key: str) -> Column:
    """The released value of quasi-identifier ``i`` of a published row: its class's value."""
    from pyspark.sql import functions as F

    return F.col(f"{PREFIX}cl_v{i}")


def _outputs(src: _Source, plan: Plan, state: str) -> list[Column]:
    """The released columns in the source's order: identifiers dropped, quasi-identifiers and
    microaggregated columns from the class, sensitive ones as text (the marker when
    suppressed, unless the plan keeps them), the rest as they are."""
    from pyspark.sql import functions as F

    marker = F.lit(plan.suppression.marker)
    published = F.col(state) >= 0
    roles = {c.name: c.role for c in plan.columns}
    out = []
    for name in src.names:
        if name in src.cols.identifying:
            continue
        if name in src.cols.qis:
            i = plan.quasi_identifiers.index(name)
            key = f"{PREFIX}k{src.cols.sent.index(name)}"
            value = F.when(published, _qi_output(src, i, key)).otherwise(marker)
        elif name in src.cols.micro:
            j = plan.microaggregated.index(name)
            value = F.when(published, F.col(f"{PREFIX}cl_a{j}")).otherwise(marker)
        elif name in src.cols.sensitive:
            value = F.col(src.x(name))
            if roles.get(name) == "sensitive":
                value = F.when(published, value).otherwise(marker)
        else:
            value = F.col(_q(name))
        out.append(value.alias(name))
    return out


def _apply(src: _Source, plan: Plan, floor: Mapping[str, int]) -> tuple[DataFrame, Column]:
    """(the released DataFrame, the count of rows not covered as an aggregate over the
    intermediate state column ``deid_state`` — observed on the DataFrame returned)."""
    from pyspark.sql import functions as F

    check_plan(src.cols, plan)
    df = src.with_levels(floor).select(*[F.col(_q(n)) for n in src.names], *[F.col(src.x(c)) for c in src.cols.sent],
                                       *src.keys(floor))
    df = _map_joins(src, plan, df)
    df, state = _class_joins(src, plan, df)
    st = f"{PREFIX}state"
    df = df.withColumn(st, state)
    n, m = len(plan.quasi_identifiers), len(plan.microaggregated)
    names = [f"{PREFIX}cl_c"] + [f"{PREFIX}cl_v{i}" for i in range(n)] + [f"{PREFIX}cl_a{j}" for j in range(m)]
    rows = [(c, *k.values, *k.aggregates) for c, k in enumerate(plan.classes)]
    cl = _table(src.spark, names, rows, ["int"] + ["string"] * (n + m))
    df = df.join(cl, F.col(st) == F.col(f"{PREFIX}cl_c"), "left")
    if plan.suppression.mode == "remove":
        df = df.where(F.col(st) >= 0)
    uncovered = F.count_if(F.col(st) == -2).alias("uncovered")
    return df.select(*_outputs(src, plan, st), F.col(st)), uncovered


# ---------------------------------------------------------------- verify and write


def _verify(client: Client, released: DataFrame, cols: Columns, job_id: str, count_column: str) -> tuple[Verification, int]:
    """The released data's frequency table (a ``groupBy`` of the columns sent, as text) posted
    to ``POST /v1/jobs/{id}/verify`` (always CSV lines built in Spark: the endpoint reads CSV):
    (the verdict, the released rows)."""
    from pyspark.sql import functions as F

    keys = [F.coalesce(F.col(_q(c)).cast("string"), F.lit("")).alias(f"{PREFIX}k{j}") for j, c in enumerate(cols.sent)]

    def post(data: Any) -> Verification:
        return client.verify_job(job_id, data, count_column=count_column)

    verification, _, records = _send(_keys_table(released, keys), [*cols.sent, count_column], "csv", None, post)
    return verification, records


def _write(df: DataFrame, path: str | None, table: str | None, mode: str) -> DataFrame:
    """Writes the released data as Parquet at ``path`` or as the table ``table``; the data as
    written."""
    spark = df.sparkSession
    if path is not None:
        df.write.mode(mode).parquet(path)
        return spark.read.parquet(path)
    assert table is not None
    df.write.mode(mode).saveAsTable(table)
    return spark.table(table)


def _table_name(table: str | tuple[str, ...] | None) -> str | None:
    """A table's name as Spark SQL: each part quoted (a name is never parsed: ``"a.b"`` is one
    name; a tuple is catalog/schema parts, then the name)."""
    if table is None:
        return None
    parts = (table,) if isinstance(table, str) else tuple(table)
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise ValueError(f"table: expected a non-empty name or a tuple of names, got {table!r}")
    return ".".join(_q(p) for p in parts)


def _erase(df: DataFrame, path: str | None, table: str | None) -> None:
    """Leaves no released data at the target: the table dropped, the path overwritten empty."""
    spark = df.sparkSession
    if table is not None:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    elif path is not None:
        spark.createDataFrame([], df.schema).write.mode("overwrite").parquet(path)


# ---------------------------------------------------------------- the whole


def anonymize(
    client: Client,
    df: DataFrame,
    spec: JobSpec | Mapping[str, Any],
    *,
    path: str | None = None,
    table: str | tuple[str, ...] | None = None,
    mode: str = "error",
    max_groups: int = DEFAULT_MAX_GROUPS,
    timeout: float | None = None,
    progress: bool | None = None,
    upload_format: str = "parquet",
    staging: str | None = None,
    keep_dataset: bool = False,
) -> SparkResult:
    """Anonymizes the DataFrame ``df`` inside Spark, with deid searching on its frequency table
    (see the module's documentation for the steps).

    ``spec`` is the job specification without ``dataset_id`` (a dict or a :class:`JobSpec` whose
    ``dataset_id`` is ignored): ``attributes`` name the roles of ``df``'s columns (columns not
    named are copied as they are); quasi-identifiers whose hierarchy is an inline CSV table
    (``{"csv": …}``) can be sent at a floor when the frequency table has more than
    ``max_groups`` rows (estimated). ``upload_format`` ``parquet`` has Spark write the
    frequency table as one Parquet file under ``staging``, a directory that Spark and this
    process both reach by that path (default: a temporary directory here — right for
    ``local`` mode; on a cluster, a mount shared at the same path, or ``csv``, which streams
    through the driver instead). The released data are written as Parquet at ``path`` or as
    the table ``table`` (a name, quoted, never parsed: ``"a.b"`` is one name; or a tuple of
    catalog or schema parts and the name) with ``mode`` ``error`` or ``overwrite``, then
    verified as read back; with neither, they are verified and returned lazily (``SparkResult.df``: every action on it
    reads the source again). ``timeout`` bounds the wait for the job (the job's own
    ``time_limit`` bounds its search); Ctrl-C cancels the job. The uploaded frequency table is
    deleted at the end unless ``keep_dataset``. Raises :class:`VerificationFailedError` when
    deid's verification fails (a written target is erased first),
    :class:`deid_client.JobFailedError` when the job fails, ValueError for a specification or
    data the rule refuses.
    """
    if path is not None and table is not None:
        raise ValueError("path, table: give at most one target")
    table = _table_name(table)
    if mode not in ("errorifexists", "error", "overwrite"):
        # Appending would mix released data with what the target holds, and verify both.
        raise ValueError(f"mode: expected 'error' or 'overwrite', got {mode!r}")
    mode = "error" if mode == "errorifexists" else mode  # Spark Connect knows only "error"
    raw = raw_spec(spec)
    cols = columns(raw, list(df.columns), "anonymize")
    types = {f.name: f.dataType for f in df.schema.fields}
    for c in cols.sent:
        _text("x", c, types[c])  # refuses unsupported types before any scan
    timings: dict[str, float] = {}
    clock = time.monotonic()
    src = _source(df, cols)
    level0, _, floor, _ = _profile(src, max_groups, types)
    timings["profile"], clock = time.monotonic() - clock, time.monotonic()
    count_column = count_name(cols.sent)
    header = [*cols.sent, count_column]
    ds, groups, _ = _send(_frequency_table(src, floor), header, upload_format, staging, uploader(client, count_column))
    timings["group"], clock = time.monotonic() - clock, time.monotonic()
    with searched(client, raw, cols, ds.id, floor, timeout, progress, keep_dataset) as (job, report, plan):
        timings["search"], clock = time.monotonic() - clock, time.monotonic()
        released, uncovered, verification, rows = _release(
            client, src, plan, floor, job.id, count_column, (path, table, mode)
        )
        timings["apply_verify"] = time.monotonic() - clock
    warnings = floor_warning(level0, max_groups, floor, groups)
    return SparkResult(job, report, plan, floor, level0, groups, uncovered, verification, rows, timings, warnings,
                       df=released)


def _release(
    client: Client, src: _Source, plan: Plan, floor: Mapping[str, int], job_id: str, count_column: str,
    target: tuple[str | None, str | None, str],
) -> tuple[DataFrame, int, Verification, int]:
    """Applies the plan, writes the result when asked (``target``: path, table, mode) and
    verifies it: (the released data, rows not covered, the verdict, rows released);
    VerificationFailedError with the target erased."""
    from pyspark.sql import Observation

    path, table, mode = target
    applied, uncovered = _apply(src, plan, floor)
    observation = Observation(f"{PREFIX}apply")
    observed = applied.observe(observation, uncovered).drop(f"{PREFIX}state")
    lazy = applied.drop(f"{PREFIX}state")
    if path is None and table is None:
        verification, rows = _verify(client, observed, src.cols, job_id, count_column)
        released = lazy
    else:
        released = _write(observed, path, table, mode)
        verification, rows = _verify(client, released, src.cols, job_id, count_column)
        if not verification.passed:
            _erase(released, path, table)
    if not verification.passed:
        raise VerificationFailedError(verification, job_id)
    return released, int(observation.get["uncovered"]), verification, rows
