"""Anonymize a Spark DataFrame inside Spark: only the frequency table of the columns the job
needs leaves Spark (docs/engines.md).

:func:`anonymize` uses the DataFrame API only — no RDD, no Python UDF — so it runs on Spark
Connect and on shared clusters as well as on a classic session:

1. *profile*: the rows' count (Parquet: from its footers), then one aggregation over a sample
   of the distinct tuples of the quasi-identifiers, sensitive and microaggregated columns
   (those whose hash falls in about ``PROFILE_SAMPLE`` × ``max_groups`` of them; all when the
   source is smaller): HyperLogLog estimates of the distinct tuples at level 0 and at every
   floor of a chain — a level per quasi-identifier, from the hierarchy tables given inline in
   the specification, raising one level at a time the column whose hierarchy shrinks most (the
   hierarchies as broadcast joins; a tuple's hash is the XOR of its columns' hashes, so a floor
   costs an XOR per column) —, one aggregation of Spark's ``hll_sketch_agg``. A sample never has more
   distinct tuples than the whole, so the first floor whose sample fits ``max_groups`` is
   where grouping starts: no floor below it fits;
2. *frequency table*: one ``groupBy`` over those columns as text (deid's typed→text rule in
   Spark SQL) with a count column, which also counts the dates the rule refuses — grouped on
   the integer codes of the labels, several columns per broadcast join (:func:`_coded_table`;
   on the texts when a value is in no hierarchy); when it has more than ``max_groups`` rows,
   the chain's later floors are counted on the table itself (``REFINE_FLOORS`` at a time) and
   the first that fits is grouped from it (a label has one parent), so the floor sent is the
   lowest that fits, counted. The table is written by Spark as one Parquet file in a staging directory and uploaded as
   Parquet (``upload_format="parquet"``, the default), or streamed partition by partition
   (``toLocalIterator``) as CSV lines built in Spark SQL (``upload_format="csv"``: no shared
   directory needed) — this process never holds the table, never the rows;
3. the *job* on deid (``data_level`` set for the floor), waited for with progress; Ctrl-C
   cancels it;
4. *apply*: broadcast joins of the quasi-identifiers' texts, several per join, with their
   maps composed with the floor's hierarchy level (an output and a part of the key per step);
   per step one join of the tuple's key — the codes in mixed radix, a ``long`` (the texts
   when it would not fit) — with the classes it publishes and, at the last step, the tuples it
   suppresses (−1);
   one join with the classes' aggregates when columns are microaggregated; rows the plan does
   not cover are suppressed and counted (an ``Observation``: fail closed);
5. *verify*: a ``groupBy`` of the released data streamed as CSV lines built in Spark SQL to
   ``POST /v1/jobs/{id}/verify`` (when no privacy model reads sensitive values, each sensitive
   column is sent only as whether it is the suppression marker); a failure raises
   :class:`VerificationFailedError` and leaves no released data (the target is erased when it
   was written).

pyspark is optional (``deid-client[spark]``): this module imports without it.
"""

from __future__ import annotations

import io
import itertools
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ._adapter import (
    Codes as _Codes,
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
    combine,
    count_name,
    csv_cell,
    floor_chain,
    floor_warning,
    out_of_range,
    too_many_groups,
    plain_decimal,
    raw_spec,
    searched,
    sensitive_stand_ins,
    unsupported,
    uploader,
)
from ._core import gc_paused
from .builders import JobSpec
from .client import Client
from .errors import DeidError
from .types import Plan, Verification

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["SparkResult", "VerificationFailedError", "anonymize"]

#: The profile's HyperLogLog sketches have 2^PROFILE_BITS registers …
PROFILE_BITS = 14
#: … for this relative standard deviation of their estimates.
PROFILE_RSD = 1.04 / 2 ** (PROFILE_BITS / 2)
#: The profile estimates on a sample of the distinct tuples about this many times
#: ``max_groups`` (all of them when the source has fewer rows).
PROFILE_SAMPLE = 4
#: Floors above the profile's that one job counts on the frequency table when it is too large.
REFINE_FLOORS = 2
#: Tables of the plan with at most this many rows are broadcast (the maps always are).
BROADCAST_ROWS = 500_000
#: The frequency table is grouped on integer keys of at most this many bits (``long``).
KEY_BITS = 63

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

    def with_levels(self, levels: Mapping[str, int], df: DataFrame | None = None) -> DataFrame:
        """The source (or ``df``, rows of it) joined with the hierarchy table of every
        quasi-identifier raised above level 0 in ``levels`` (left joins: a value the table
        lacks keeps its own text)."""
        from pyspark.sql import functions as F

        df = self.df if df is None else df
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


def _tuple_hashes(
    names: Sequence[str], floors: Sequence[Mapping[str, int]], label: Callable[[int, int], Column]
) -> tuple[list[Column], list[Column]]:
    """(the columns' hashes as a projection, each floor's tuple hash over them) for the
    columns ``names``, ``label(j, level)`` being column j's label at a level: a tuple's hash is
    the XOR of its columns' seeded ``xxhash64`` at their levels, so a floor costs one XOR per
    column, not a hash of the whole tuple. The aggregations refer to the projected hashes by
    name, which keeps their generated code small for a long chain."""
    from pyspark.sql import functions as F

    hashes: dict[tuple[int, int], Column] = {}
    tuples = []
    for levels in floors:
        cols = []
        for j, name in enumerate(names):
            lvl = levels.get(name, 0)
            if (j, lvl) not in hashes:
                hashes[(j, lvl)] = F.xxhash64(label(j, lvl), F.lit(j)).alias(f"{PREFIX}hash{j}_{lvl}")
            cols.append(F.col(f"{PREFIX}hash{j}_{lvl}"))
        out = cols[0]
        for c in cols[1:]:
            out = out.bitwiseXOR(c)
        tuples.append(out)
    return list(hashes.values()), tuples


def _floor_hashes(df: DataFrame, projection: Sequence[Column], tuples: Sequence[Column]) -> DataFrame:
    """A row (``f``: the floor's index, ``h``: the tuple's hash) per row of ``df`` and floor."""
    from pyspark.sql import functions as F

    pairs = F.explode(F.array(*[F.struct(F.lit(f).alias("f"), t.alias("h")) for f, t in enumerate(tuples)]))
    return df.select(*projection).select(pairs.alias("p")).select("p.f", "p.h")


def _profile(src: _Source, max_groups: int) -> tuple[int, dict[str, int]]:
    """(estimated groups at level 0, the lowest floor the frequency table can start from).

    With ``r`` rows (``count()``: Parquet's footers), the estimates run on the level-0 tuples
    whose hash falls in a sample of ``s = min(1, PROFILE_SAMPLE · max_groups / r)`` — all of a
    tuple's rows or none, so that ``s`` of the distinct tuples are in it. One pass gives the
    approximate distinct tuples of the sample (:func:`_distinct_counts`) at level 0 and at
    every floor of the chain (:func:`deid_client._adapter.floor_chain`, the hierarchies as
    broadcast joins). Level 0's estimate is the sample's divided by ``s``. The floor returned
    is the first whose sample has at most ``max_groups`` tuples: a sample never has more
    distinct tuples than the whole, so no floor below it can fit and the exact count of
    :func:`_group` decides from there."""
    from pyspark.sql import functions as F

    rows = src.df.count()
    share = min(1.0, PROFILE_SAMPLE * max_groups / max(1, rows))
    level0_hash = F.xxhash64(*[F.col(src.x(c)) for c in src.cols.sent], F.lit(-1))
    sample = src.df
    if share < 1.0:
        # The low 20 bits of a seeded hash of the tuple: the same tuples on any partitioning.
        below = max(1, int(share * (1 << 20)))
        sample = sample.where(level0_hash.bitwiseAND(F.lit((1 << 20) - 1)) < F.lit(below))
        share = below / (1 << 20)
    chain = floor_chain(src.cols)
    if len(chain) > 1:
        _load_hierarchies(src)
        top = {c: max(f.get(c, 0) for f in chain) for c in src.cols.qis}
        sample = src.with_levels(top, sample)
    projection, tuples = _tuple_hashes(src.cols.sent, chain, lambda j, lvl: src.keys({src.cols.sent[j]: lvl})[j])
    counts = _distinct_counts(sample.select(*projection), tuples)
    level0 = round(counts[0] / share)
    if level0 <= max_groups:
        return level0, {}
    for levels, sampled in zip(chain, counts):
        # The margin keeps an estimate's error from skipping the floor that fits.
        if sampled <= max_groups * (1 + 3 * PROFILE_RSD):
            return level0, dict(levels)
    return level0, dict(chain[-1])


def _distinct_counts(df: DataFrame, hashes: Sequence[Column]) -> list[float]:
    """The approximate distinct values of each of ``hashes`` (``long`` columns over ``df``) in
    one aggregation: Spark's HyperLogLog sketches (``hll_sketch_agg``, Apache DataSketches,
    2^PROFILE_BITS registers: relative standard deviation PROFILE_RSD; exact while small). A
    row updates every sketch in place — on 4 M rows and 20 floors 5 s where a codegen'd
    aggregation of (floor, register) pairs, one row per floor, took 28 s, and
    ``approx_count_distinct`` 109 s."""
    from pyspark.sql import functions as F

    sketches = [F.hll_sketch_estimate(F.hll_sketch_agg(h, PROFILE_BITS)).alias(f"e{i}") for i, h in enumerate(hashes)]
    row = df.agg(*sketches).take(1)[0]  # one row
    return [float(row[i] or 0) for i in range(len(hashes))]


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


def _label(row: Sequence[str], level: int) -> str:
    """A hierarchy row's label at ``level`` (a short row keeps its value, as the table's join
    does)."""
    return row[level] if level < len(row) else row[0]


def _floor_labels(cols: Columns, floor: Mapping[str, int]) -> dict[int, dict[str, str]]:
    """Per column sent with an inline hierarchy (by its index j in ``cols.sent``): each value's
    label at the floor (level 0: the value itself)."""
    return {
        j: {v: _label(row, floor.get(c, 0)) for v, row in cols.hierarchies[c].rows.items()}
        for j, c in enumerate(cols.sent) if c in cols.hierarchies
    }


def _coded_table(
    spark: SparkSession, df: DataFrame, texts: Sequence[str], labels: Mapping[int, Mapping[str, str]],
    aggregates: Sequence[Column], missing: str,
) -> DataFrame:
    """One ``groupBy`` of the text columns ``texts`` of ``df`` (never NULL) with ``aggregates``,
    column j ∈ ``labels`` replaced by ``labels[j][its text]``: the key columns ``deid_k{j}`` as
    text, then the aggregates and ``missing``, the rows with a text some mapping lacks (whose
    keys are then wrong: the caller groups on the texts instead). It groups on integers: a
    mapped column becomes the code of its label (labels numbered in sorted order), packed in
    mixed radix into as few ``long`` keys as fit in ``KEY_BITS``, through one broadcast join
    per group of columns (:func:`deid_client._adapter.combine`, :func:`_combined`); the labels
    are joined back after the aggregation, on its few rows. A ``groupBy`` on a few integers
    instead of a text per column."""
    from pyspark.sql import functions as F

    coded: list[tuple[int, list[str], dict[str, int]]] = []
    for j in sorted(labels):
        names = sorted(set(labels[j].values()))
        number = {label: k for k, label in enumerate(names)}
        coded.append((j, names, {v: number[label] for v, label in labels[j].items()}))
    place: dict[int, tuple[int, int, int]] = {}  # j → (key, stride, radix)
    key, stride = 0, 1
    for j, names, _ in coded:
        radix = max(1, len(names))
        if stride > 1 and stride * radix >= 1 << KEY_BITS:
            key, stride = key + 1, 1
        place[j] = (key, stride, radix)
        stride *= radix
    parts: list[list[Column]] = [[] for _ in range(key + 1)]
    for g, group in enumerate(combine([len(codes) for _, _, codes in coded])):
        cols = [coded[i] for i in group]
        touched = sorted({place[j][0] for j, _, _ in cols})
        names = [f"{PREFIX}e{g}_p{k}" for k in touched]
        rows = []
        for combo in itertools.product(*(sorted(codes.items()) for _, _, codes in cols)):
            sums = dict.fromkeys(touched, 0)
            for (j, _, _), (_, code) in zip(cols, combo):
                sums[place[j][0]] += code * place[j][1]
            rows.append((*(v for v, _ in combo), *(sums[k] for k in touched)))
        df = _combined(spark, df, [texts[j] for j, _, _ in cols], f"{PREFIX}e{g}", names, rows, ["long"] * len(names))
        for k, name in zip(touched, names):
            parts[k].append(F.col(name))
    packed = []
    for k, ps in enumerate(parts):
        total = ps[0] if ps else F.lit(0).cast("long")
        for p in ps[1:]:
            total = total + p
        packed.append(total.alias(f"{PREFIX}g{k}"))
    plain = [F.col(t).alias(f"{PREFIX}k{j}") for j, t in enumerate(texts) if j not in labels]
    lacking = F.count_if(_any_null([p for ps in parts for p in ps])).alias(missing)
    out = df.groupBy(*packed, *plain).agg(*aggregates, lacking)
    for j, names, _ in coded:
        k, st, radix = place[j]
        decode = _table(spark, [f"{PREFIX}d{j}_c", f"{PREFIX}k{j}"], list(enumerate(names)), ["int", "string"])
        digit = F.expr(f"CAST(({PREFIX}g{k} DIV {st}) % {radix} AS INT)")
        out = out.join(F.broadcast(decode), digit == F.col(f"{PREFIX}d{j}_c"), "left")
    rest = [a for a in out.columns if not a.startswith((f"{PREFIX}g", f"{PREFIX}d", f"{PREFIX}k"))]
    return out.select(*[f"{PREFIX}k{j}" for j in range(len(texts))], *rest)


def _combined(
    spark: SparkSession, df: DataFrame, columns: Sequence[str], prefix: str, names: Sequence[str],
    rows: list[tuple[Any, ...]], types: Sequence[str],
) -> DataFrame:
    """``df`` left-joined with a broadcast table of combinations of the text columns
    ``columns`` (each row: the texts, then the values ``names`` of ``types``): on one ``long``,
    the ``xxhash64`` of the texts (a hash join on an integer, cheaper than on several texts),
    the texts themselves compared after the match, so that a hash collision cannot join rows
    that differ. The texts are never NULL (NULL is already the empty value)."""
    from pyspark.sql import functions as F

    texts = [f"{prefix}_v{i}" for i in range(len(columns))]
    table = _table(spark, [*texts, *names], rows, ["string"] * len(texts) + list(types))
    table = F.broadcast(table.select(F.xxhash64(*texts).alias(f"{prefix}_h"), *texts, *names))
    same = F.lit(True)
    for c, t in zip(columns, texts):
        same = same & (F.col(c) == F.col(t))
    on = (F.xxhash64(*[F.col(c) for c in columns]) == F.col(f"{prefix}_h")) & F.coalesce(same, F.lit(False))
    return df.join(table, on, "left").drop(f"{prefix}_h", *texts)


def _group(
    src: _Source, start: Mapping[str, int], max_groups: int, original: Any
) -> tuple[DataFrame, dict[str, int], int, DataFrame]:
    """(the frequency table, its floor, the rows of the table at ``start``, the persisted
    table to unpersist once it is sent). One ``groupBy`` of the source at the floor ``start``,
    which also counts the dates the rule refuses (ValueError). When it has more than
    ``max_groups`` rows, the later floors of the chain are counted from that table, not from
    the rows — every floor's distinct tuple hashes in one job (64-bit hashes: a collision
    among a few million tuples is as good as impossible) — and the first that fits is grouped
    from it: a label has one parent (deid refuses hierarchies that are not monotone), so the
    labels of the higher levels are joins with the table's labels."""
    from pyspark.sql import functions as F

    checks = [(c, _out_of_range(_q(c), original[c])) for c in src.cols.sent]
    refused = [F.count_if(F.expr(cond)).alias(f"{PREFIX}oor{j}") for j, (_, cond) in enumerate(checks) if cond]
    keys = [f"{PREFIX}k{j}" for j in range(len(src.cols.sent))]
    n = f"{PREFIX}n"
    texts = [src.x(c) for c in src.cols.sent]
    aggregates = [F.count(F.lit(1)).alias(n), *refused]
    at_start = _floor_labels(src.cols, start)
    table = _coded_table(src.spark, src.df, texts, at_start, aggregates, f"{PREFIX}missing").persist()
    sums = [F.sum(F.col(f"{PREFIX}oor{j}")).alias(f"oor{j}") for j, (_, c) in enumerate(checks) if c]
    got = table.agg(*sums, F.sum(F.col(f"{PREFIX}missing")).alias("missing")).first()
    assert got is not None
    if got["missing"]:  # a value some hierarchy lacks: grouped on the texts, deid refuses it
        table.unpersist()
        if start:
            _load_hierarchies(src)
        table = src.with_levels(start).groupBy(*src.keys(start)).agg(*aggregates).persist()
    if refused:
        for j, (c, cond) in enumerate(checks):
            if cond and got[f"oor{j}"]:
                table.unpersist()
                raise out_of_range(c, int(got[f"oor{j}"]))
    first = table.count()
    if first <= max_groups:
        return table.select(*keys, n), dict(start), first, table
    chain = floor_chain(src.cols)
    later = chain[next(i for i, f in enumerate(chain) if f == dict(start)) + 1:]
    if not later:
        table.unpersist()
        raise too_many_groups(first, max_groups)
    view = table
    labels: dict[tuple[str, int], Column] = {}
    for j, c in enumerate(src.cols.sent):
        a = start.get(c, 0)
        labels[(c, a)] = F.col(keys[j])
        top = later[-1].get(c, 0)
        if top == a:
            continue
        ups: dict[str, tuple[str, ...]] = {}
        for row in src.cols.hierarchies[c].rows.values():
            up = tuple(_label(row, lvl) for lvl in range(a, top + 1))
            if ups.setdefault(up[0], up) != up:
                table.unpersist()
                raise ValueError(f"attributes.{c}.hierarchy: the label {up[0]!r} of level {a} has two parents")
        names = [f"{PREFIX}u{j}_v"] + [f"{PREFIX}u{j}_l{lvl}" for lvl in range(a + 1, top + 1)]
        view = view.join(F.broadcast(_table(src.spark, names, sorted(ups.values()), ["string"] * len(names))),
                         F.col(keys[j]) == F.col(names[0]), "left")
        for lvl in range(a + 1, top + 1):  # a value the hierarchy lacks keeps its text
            labels[(c, lvl)] = F.coalesce(F.col(f"{PREFIX}u{j}_l{lvl}"), F.col(keys[j]))
    # The next floors are usually the ones that fit: counted a few at a time.
    for at in range(0, len(later), REFINE_FLOORS):
        batch = later[at:at + REFINE_FLOORS]
        projection, tuples = _tuple_hashes(src.cols.sent, batch, lambda j, lvl: labels[(src.cols.sent[j], lvl)])
        counted = _floor_hashes(view, projection, tuples).groupBy("f").agg(F.count_distinct("h").alias("d"))
        counts = {int(r["f"]): int(r["d"]) for r in counted.take(len(batch))}  # a row per floor
        fits = [i for i in range(len(batch)) if counts.get(i, 0) <= max_groups]
        if fits:
            break
    else:
        table.unpersist()
        raise too_many_groups(counts.get(len(batch) - 1, first), max_groups)
    floor = batch[fits[0]]
    raised = view.select(*[labels[(c, floor.get(c, 0))].alias(keys[j]) for j, c in enumerate(src.cols.sent)], F.col(n))
    return raised.groupBy(*keys).agg(F.sum(F.col(n)).alias(n)), dict(floor), first, table


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
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    kinds = {"int": IntegerType(), "long": LongType(), "string": StringType()}
    schema = StructType([StructField(n, kinds[t], True) for n, t in zip(names, types)])
    df = spark.createDataFrame(rows, schema)
    return F.broadcast(df) if len(rows) <= BROADCAST_ROWS else df


def _map_joins(
    src: _Source, plan: Plan, floor: Mapping[str, int], codes: _Codes | None, df: DataFrame
) -> tuple[DataFrame, list[list[Column]]]:
    """The quasi-identifiers' maps composed with the floor's hierarchy level (no join with the
    hierarchy), joined on the source's texts, several quasi-identifiers per join
    (:func:`deid_client._adapter.combine`, :func:`_combined`): ``deid_m{i}_o{s}`` is the output
    of quasi-identifier i at step s (NULL: the value is in no map). A value the hierarchy lacks
    keeps its text at the floor, as when grouping. (The joined data, per step the parts of the
    output tuple's key — one per joined table, the sum of its outputs' codes times their
    strides; empty without ``codes``.)"""
    from pyspark.sql import functions as F

    steps = plan.steps
    labels = _floor_labels(src.cols, floor)
    composed: list[list[tuple[str, list[str | None], list[int | None]]]] = []
    for i, q in enumerate(plan.quasi_identifiers):
        maps = [step.maps[i] for step in steps]
        at_floor = dict(labels.get(src.cols.sent.index(q), {}))
        for m in maps:
            for k in m:
                at_floor.setdefault(k, k)
        rows = []
        for v, label in sorted(at_floor.items()):
            outputs = [m.get(label) for m in maps]
            if all(o is None for o in outputs):
                continue
            cs = [codes.codes[s][i].get(o) if codes and o is not None else None for s, o in enumerate(outputs)]
            rows.append((v, outputs, cs))
        composed.append(rows)
    parts: list[list[Column]] = [[] for _ in steps]
    for g, group in enumerate(combine([len(rows) for rows in composed])):
        names = [f"{PREFIX}m{i}_o{s}" for i in group for s in range(len(steps))]
        keys = [f"{PREFIX}m{g}_k{s}" for s in range(len(steps))] if codes else []
        table = []
        for combo in itertools.product(*(composed[i] for i in group)):
            row: list[Any] = [v for v, _, _ in combo]
            for _, outputs, _ in combo:
                row += outputs
            if codes:
                for s in range(len(steps)):
                    cs = [c[s] for _, _, c in combo]
                    known = [c for c in cs if c is not None]
                    fits = len(known) == len(cs)
                    row.append(sum(c * codes.strides[s][i] for c, i in zip(known, group)) if fits else None)
            table.append(tuple(row))
        qis = [src.x(plan.quasi_identifiers[i]) for i in group]
        df = _combined(src.spark, df, qis, f"{PREFIX}m{g}", [*names, *keys], table,
                       ["string"] * len(names) + ["long"] * len(keys))
        for s, k in enumerate(keys):
            parts[s].append(F.col(k))
    return df, parts if codes else []


def _class_joins(
    plan: Plan, codes: _Codes | None, src: _Source, df: DataFrame, parts: Sequence[Sequence[Column]]
) -> tuple[DataFrame, Column, list[Column]]:
    """Per step one join with the output tuples it publishes, with their class, and — at the
    last step — those it suppresses, with −1: on the tuple's key when ``codes``, else on its
    texts; ``parts``: per step the parts of a tuple's key (:func:`_map_joins`). (The joined
    data, the row's state, each quasi-identifier's published value.) The
    state is the row's class (≥ 0), −1 suppressed, −2 not covered — the first step whose maps
    send the tuple to a class it publishes (docs/definitions.md §7.2); a class's values are the
    outputs of that step's maps."""
    from pyspark.sql import functions as F

    n = len(plan.quasi_identifiers)
    last = len(plan.steps) - 1
    published_last = {tuple(plan.classes[c].values) for c in plan.steps[last].publishes}
    # A tuple the last step publishes is published, even if the plan also lists it suppressed.
    suppressed = sorted({tuple(t) for t in plan.suppressed} - published_last)
    state: Column | None = None
    values: list[list[tuple[Column, Column]]] = [[] for _ in range(n)]
    for s, step in enumerate(plan.steps):
        tuples = [(plan.classes[c].values, c) for c in step.publishes]
        if s == last:
            tuples += [(list(t), -1) for t in suppressed]
        outputs = [F.col(f"{PREFIX}m{i}_o{s}") for i in range(n)]
        hit = f"{PREFIX}p{s}_c"
        if codes:
            keyed = ((codes.key(s, v), c) for v, c in tuples)
            rows = [(k, c) for k, c in keyed if k is not None]
            p = _table(src.spark, [f"{PREFIX}p{s}_k", hit], rows, ["long", "int"])
            key = parts[s][0]
            for part in parts[s][1:]:
                key = key + part
            on = key == F.col(f"{PREFIX}p{s}_k")
        else:
            names = [f"{PREFIX}p{s}_v{i}" for i in range(n)]
            p = _table(src.spark, [*names, hit], [(*v, c) for v, c in tuples], ["string"] * n + ["int"])
            on = _tuple_eq(outputs, [F.col(x) for x in names])
        df = df.join(p, on, "left")
        missing = _any_null(outputs)
        found = F.col(hit)
        state = (F.when(missing, -2) if state is None else state.when(missing, -2)).when(found.isNotNull(), found)
        for i in range(n):
            values[i].append((found.isNotNull(), outputs[i]))
    assert state is not None
    published = []
    for v in values:
        if len(v) == 1:
            published.append(v[0][1])
        else:
            case = F.when(v[0][0], v[0][1])
            for cond, out in v[1:]:
                case = case.when(cond, out)
            published.append(case)
    return df, state.otherwise(-2), published


def _tuple_eq(left: Sequence[Column], right: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for a, b in zip(left, right):
        cond = cond & (a == b)
    return cond


def _any_null(cols: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    cond = F.lit(False)
    for c in cols:
        cond = cond | c.isNull()
    return cond


def _qi_output(src: _Source, i: int, key: str, published: Column) -> Column:
    """The released value of quasi-identifier ``i`` (source text in the column ``key``) in a
    published row: its class's value, ``published``."""
    return published


def _outputs(src: _Source, plan: Plan, state: str, published: Sequence[Column]) -> list[Column]:
    """The released columns in the source's order: identifiers dropped, quasi-identifiers
    (``published``: their values in a published row) and microaggregated columns from the
    class, sensitive ones as text (the marker when suppressed, unless the plan keeps them), the
    rest as they are."""
    from pyspark.sql import functions as F

    marker = F.lit(plan.suppression.marker)
    is_published = F.col(state) >= 0
    roles = {c.name: c.role for c in plan.columns}
    out = []
    for name in src.names:
        if name in src.cols.identifying:
            continue
        if name in src.cols.qis:
            i = plan.quasi_identifiers.index(name)
            value = F.when(is_published, _qi_output(src, i, src.x(name), published[i])).otherwise(marker)
        elif name in src.cols.micro:
            j = plan.microaggregated.index(name)
            value = F.when(is_published, F.col(f"{PREFIX}cl_a{j}")).otherwise(marker)
        elif name in src.cols.sensitive:
            value = F.col(src.x(name))
            if roles.get(name) == "sensitive":
                value = F.when(is_published, value).otherwise(marker)
        else:
            value = F.col(_q(name))
        out.append(value.alias(name))
    return out


def _apply(src: _Source, plan: Plan, floor: Mapping[str, int]) -> tuple[DataFrame, Column]:
    """(the released DataFrame, the count of rows not covered as an aggregate over the
    intermediate state column ``deid_state`` — observed on the DataFrame returned)."""
    from pyspark.sql import functions as F

    check_plan(src.cols, plan)
    codes = _Codes.of(plan)
    df = src.df.select(*[F.col(_q(n)) for n in src.names], *[F.col(src.x(c)) for c in src.cols.sent])
    with gc_paused():  # the plan is alive: collections would walk it for every table built
        df, parts = _map_joins(src, plan, floor, codes, df)
        df, state, published = _class_joins(plan, codes, src, df, parts)
    st = f"{PREFIX}state"
    outs = [f"{PREFIX}o{i}" for i in range(len(published))]
    df = df.select("*", state.alias(st), *[v.alias(o) for v, o in zip(published, outs)])
    if plan.microaggregated:
        m = len(plan.microaggregated)
        names = [f"{PREFIX}cl_c"] + [f"{PREFIX}cl_a{j}" for j in range(m)]
        rows = [(c, *k.aggregates) for c, k in enumerate(plan.classes)]
        cl = _table(src.spark, names, rows, ["int"] + ["string"] * m)
        df = df.join(cl, F.col(st) == F.col(f"{PREFIX}cl_c"), "left")
    if plan.suppression.mode == "remove":
        df = df.where(F.col(st) >= 0)
    uncovered = F.count_if(F.col(st) == -2).alias("uncovered")
    return df.select(*_outputs(src, plan, st, [F.col(o) for o in outs]), F.col(st)), uncovered


# ---------------------------------------------------------------- verify and write


def _verify(
    client: Client, released: DataFrame, cols: Columns, job_id: str, count_column: str,
    stand_ins: tuple[str, str] | None,
) -> tuple[Verification, int]:
    """The released data's frequency table (a ``groupBy`` of the columns sent, as text) posted
    to ``POST /v1/jobs/{id}/verify`` (always CSV lines built in Spark: the endpoint reads CSV;
    sensitive columns as the marker or not when ``stand_ins`` is given:
    :func:`sensitive_stand_ins`): (the verdict, the released rows)."""
    from pyspark.sql import functions as F

    def text(c: str) -> Any:
        value = F.coalesce(F.col(_q(c)).cast("string"), F.lit(""))
        if stand_ins is None or c not in cols.sensitive:
            return value
        marker, other = stand_ins
        return F.when(value == F.lit(marker), F.lit(marker)).otherwise(F.lit(other))

    keys = [text(c).alias(f"{PREFIX}k{j}") for j, c in enumerate(cols.sent)]

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
    level0, start = _profile(src, max_groups)
    timings["profile"], clock = time.monotonic() - clock, time.monotonic()
    count_column = count_name(cols.sent)
    header = [*cols.sent, count_column]
    frequencies, floor, first, cached = _group(src, start, max_groups, types)
    if not start:
        level0 = first  # counted, not estimated
    try:
        ds, groups, _ = _send(frequencies, header, upload_format, staging, uploader(client, count_column))
    finally:
        cached.unpersist()
    timings["group"], clock = time.monotonic() - clock, time.monotonic()
    with searched(client, raw, cols, ds.id, floor, timeout, progress, keep_dataset) as (job, report, plan):
        timings["search"], clock = time.monotonic() - clock, time.monotonic()
        released, uncovered, verification, rows = _release(
            client, src, plan, floor, job.id, count_column, (path, table, mode), sensitive_stand_ins(raw, plan)
        )
        timings["apply_verify"] = time.monotonic() - clock
    warnings = floor_warning(level0, max_groups, floor, groups)
    return SparkResult(job, report, plan, floor, level0, groups, uncovered, verification, rows, timings, warnings,
                       df=released)


def _release(
    client: Client, src: _Source, plan: Plan, floor: Mapping[str, int], job_id: str, count_column: str,
    target: tuple[str | None, str | None, str], stand_ins: tuple[str, str] | None,
) -> tuple[DataFrame, int, Verification, int]:
    """Applies the plan, writes the result when asked (``target``: path, table, mode) and
    verifies it (``stand_ins``: as in :func:`_verify`): (the released data, rows not covered, the
    verdict, rows released); VerificationFailedError with the target erased."""
    from pyspark.sql import Observation

    path, table, mode = target
    applied, uncovered = _apply(src, plan, floor)
    observation = Observation(f"{PREFIX}apply")
    observed = applied.observe(observation, uncovered).drop(f"{PREFIX}state")
    lazy = applied.drop(f"{PREFIX}state")
    if path is None and table is None:
        verification, rows = _verify(client, observed, src.cols, job_id, count_column, stand_ins)
        released = lazy
    else:
        released = _write(observed, path, table, mode)
        verification, rows = _verify(client, released, src.cols, job_id, count_column, stand_ins)
        if not verification.passed:
            _erase(released, path, table)
    if not verification.passed:
        raise VerificationFailedError(verification, job_id)
    return released, int(observation.get["uncovered"]), verification, rows
