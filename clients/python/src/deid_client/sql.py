"""Anonymize a table inside PostgreSQL (psycopg 3) or DuckDB: only the frequency table of the
columns the job needs leaves the database (docs/engines.md).

:func:`anonymize_table` runs, in one snapshot of the database (PostgreSQL: a REPEATABLE READ
transaction; DuckDB: one transaction):

1. *profile*: the rows of the source, and when they exceed ``max_groups`` the number of
   distinct tuples of the quasi-identifiers, sensitive and microaggregated columns; when that
   exceeds ``max_groups`` too, a *floor* — a level per
   quasi-identifier, read from the hierarchy tables given inline in the specification — that
   brings it below, greedily raising the quasi-identifier that helps most;
2. *frequency table*: one ``GROUP BY`` over those columns as text (deid's typed→text rule,
   written as SQL per dialect) — on PostgreSQL, when a sample shows nearly every tuple
   distinct, the rows ungrouped, each counting 1 — uploaded with a count column: PostgreSQL's
   ``COPY … TO STDOUT`` streamed as CSV, DuckDB's ``COPY … TO`` a Parquet file in a temporary
   directory, removed after the upload;
3. the *job* on deid (``data_level`` set for the floor), waited for with progress; Ctrl-C
   cancels it;
4. *apply*: the plan's maps and classes as tables of the run (DuckDB: temporary; PostgreSQL:
   unlogged tables of the target's schema, so that the join runs in parallel workers, dropped
   at the end or with a rollback) joined to the source, suppressed and uncovered rows
   suppressed (fail closed, counted), ``CREATE TABLE target AS SELECT …``;
5. *verify*: the target's frequency table posted to ``POST /v1/jobs/{id}/verify`` (when no
   privacy model reads sensitive values, each sensitive column is sent only as whether it is
   the suppression marker, so the table has a row per output class); a failed
   verification raises :class:`VerificationFailedError` and rolls the transaction back, so no
   target table is left.

psycopg and duckdb are optional (``deid-client[postgres]``, ``deid-client[duckdb]``): this
module imports without them and names the extra when a connection of the other kind is given.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence, Union

from ._adapter import (
    Codes as _Codes,
    DEFAULT_MAX_GROUPS,
    END_EPOCH_SECOND,
    FETCH_ROWS,
    FIRST_DATE,
    FIRST_EPOCH_SECOND,
    LAST_DATE,
    PREFIX,
    AdapterResult,
    Columns,
    VerificationFailedError,
    _ChunkReader,
    body,
    check_plan,
    choose_floor,
    columns,
    combine,
    count_name,
    csv_cell,
    floor_warning,
    out_of_range,
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
from .types import Job, Plan, Report, Verification

__all__ = [
    "SqlResult",
    "VerificationFailedError",
    "anonymize_table",
    "TableName",
]

#: A table: a name, or (schema, name). Names are quoted, never parsed: ``"a.b"`` is one name.
TableName = Union[str, tuple[str, str]]

@dataclass
class SqlResult(AdapterResult):
    """What :func:`anonymize_table` did (``rows_written``: rows of the target table)."""


# ---------------------------------------------------------------- dialects


class _Dialect:
    """What differs between the databases: quoting, types → text, transactions, temporary
    tables, streaming."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def ident(self, name: str) -> str:
        raise NotImplementedError

    def table(self, name: TableName) -> str:
        if isinstance(name, tuple):
            return ".".join(self.ident(p) for p in name)
        return self.ident(name)

    def columns(self, source: TableName) -> list[tuple[str, str]]:
        """(name, type) of every column of the source."""
        raise NotImplementedError

    def text(self, expr: str, column: str, typ: str) -> str:
        """The SQL text of a typed value by deid's rule (NULL stays NULL)."""
        raise NotImplementedError

    def literal(self, value: str) -> str:
        """``value`` as a text constant of the database's SQL."""
        raise NotImplementedError

    def out_of_range(self, expr: str, typ: str) -> str | None:
        """A condition true for a value the rule refuses (dates outside years 1–9999)."""
        raise NotImplementedError

    def execute(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def stream(self, query: str) -> Iterator[Sequence[Any]]:
        raise NotImplementedError

    def load(self, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        """Creates a temporary table and fills it with ``rows``."""
        raise NotImplementedError

    def scratch(self, name: str) -> str:
        """The SQL name of the apply's table ``name`` (:meth:`load_scratch`)."""
        return self.ident(name)

    def load_scratch(self, name: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        """A table of the apply (the plan's maps and classes), dropped with the transaction or
        at its end: a temporary table, unless the database scans those in one process only."""
        self.load(name, columns, rows)

    def distinct_tuples(self, exprs: Sequence[str]) -> str:
        raise NotImplementedError

    def mostly_distinct(self, q: "_Query", rows: int) -> bool:
        """Whether nearly every tuple of the level-0 frequency table of ``q`` (a source of
        ``rows`` rows) looks distinct: then grouping in the database costs more than it saves,
        and the rows are sent ungrouped. DuckDB groups in parallel and fast: never."""
        return False

    def temporary_as(self, table: str, query: str) -> None:
        """Creates the temporary table ``table`` (dropped with the transaction) from ``query``."""
        raise NotImplementedError

    def csv_body(self, header: Sequence[str], query: str) -> Any:
        """The rows of ``query`` (text columns, then a count) as a streamed CSV request body
        under ``header``."""
        return body(header, self.stream(query), "csv")

    @contextlib.contextmanager
    def upload_body(self, header: Sequence[str], query: str) -> Iterator[Any]:
        """The frequency table ``query`` as what :func:`uploader` sends, for the duration of
        the block: its streamed CSV (:meth:`csv_body`)."""
        yield self.csv_body(header, query)

    def drop_column(self, table: str, column: str) -> None:
        self.execute(f"ALTER TABLE {table} DROP COLUMN {self.ident(column)}")


def _fraction(frac: str, text: str, digits: int) -> str:
    """A timestamp's fraction of a second (``frac`` units of 10^-digits s, ``text`` its SQL
    text): '' when 0, else '.' and the digits without trailing zeros."""
    return f"CASE WHEN {frac} = 0 THEN '' ELSE '.' || rtrim(lpad({text}, {digits}, '0'), '0') END"


def _outside_dates(expr: str) -> str:
    """A condition true for a date outside the rule's years 1–9999."""
    return f"NOT ({expr} >= DATE '{FIRST_DATE}' AND {expr} <= DATE '{LAST_DATE}')"


_PG_INTEGERS = {20: "bigint", 21: "smallint", 23: "integer", 26: "oid"}
_PG_TEXT = {25: "text", 1043: "varchar", 1042: "char", 19: "name", 2950: "uuid"}
_PG_TYPES = {**_PG_INTEGERS, **_PG_TEXT, 16: "boolean", 1700: "numeric", 1082: "date",
             1114: "timestamp", 1184: "timestamptz", 700: "real", 701: "double precision"}


class _Postgres(_Dialect):
    def ident(self, name: str) -> str:
        from psycopg import sql

        return str(sql.Identifier(name).as_string(self.conn))

    def columns(self, source: TableName) -> list[tuple[str, str]]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {self.table(source)} LIMIT 0")
            return [(c.name, _PG_TYPES.get(c.type_code, c.type_display)) for c in cur.description]

    def text(self, expr: str, column: str, typ: str) -> str:
        if typ in _PG_INTEGERS.values() or typ in _PG_TEXT.values() or typ == "numeric":
            return f"({expr})::text"
        if typ == "boolean":
            return f"(CASE WHEN {expr} THEN 'true' WHEN NOT {expr} THEN 'false' END)"
        if typ in ("real", "double precision"):
            # PostgreSQL's text (extra_float_digits = 1, set for the transaction) reads back but
            # is not always the shortest (1e23 is 9.999999999999999e+22): as a numeric, rounded
            # to 1, 2, … significant digits, the first that reads back; a numeric is written
            # without exponent.
            n = f"({expr})::text::numeric"
            rounded = f"round({n}, p - 1 - floor(log(abs({n})))::int)"
            # Below the largest finite value and half a unit of its last place: casts that can work.
            top = "3.40282356e38" if typ == "real" else "1.7976931348623158e308"
            shortest = (
                f"(SELECT c::text FROM (SELECT p, {rounded} AS c FROM generate_series(1, 17) AS p) AS r "
                f"WHERE CASE WHEN abs(c) <= {top}::numeric THEN c::{typ} = {expr} ELSE false END ORDER BY p LIMIT 1)"
            )
            return (
                f"(CASE WHEN {expr} = 'NaN' THEN 'NaN' WHEN {expr} = 'Infinity' THEN 'Infinity' "
                f"WHEN {expr} = '-Infinity' THEN '-Infinity' WHEN {expr} = 0 THEN '0' ELSE {shortest} END)"
            )
        if typ == "date":
            return f"to_char({expr}, 'YYYY-MM-DD')"
        if typ in ("timestamp", "timestamptz"):
            ts = f"({expr} AT TIME ZONE 'UTC')" if typ == "timestamptz" else f"({expr})"
            frac = f"(extract(microseconds FROM {ts})::bigint % 1000000)"
            return f"(to_char({ts}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || {_fraction(frac, f'{frac}::text', 6)} || 'Z')"
        raise unsupported(column, typ)

    def literal(self, value: str) -> str:
        from psycopg import sql

        # psycopg quotes by the connection's settings (standard_conforming_strings).
        return f"CAST({sql.Literal(value).as_string(self.conn)} AS text)"

    def out_of_range(self, expr: str, typ: str) -> str | None:
        if typ == "date":
            return _outside_dates(expr)
        if typ in ("timestamp", "timestamptz"):
            ts = f"({expr} AT TIME ZONE 'UTC')" if typ == "timestamptz" else f"({expr})"
            return f"NOT ({ts} >= TIMESTAMP '{FIRST_DATE}' AND {ts} < TIMESTAMP '10000-01-01')"
        return None

    def execute(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(query, params or None)
            return list(cur.fetchall()) if cur.description else []

    def stream(self, query: str) -> Iterator[Sequence[Any]]:
        # A named cursor: rows arrive FETCH_ROWS at a time, never all in Python's memory.
        with self.conn.cursor(name=f"{PREFIX}stream") as cur:
            cur.itersize = FETCH_ROWS
            cur.execute(query)
            yield from cur

    #: Schema and name suffix of the apply's tables (:meth:`load_scratch`), set per run.
    scratch_schema: str = "public"
    scratch_suffix: str = ""

    def load(self, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        self._fill(f"TEMPORARY TABLE {self.ident(table)}", self.ident(table), " ON COMMIT DROP", columns, rows)

    def scratch(self, name: str) -> str:
        return f"{self.ident(self.scratch_schema)}.{self.ident(name + self.scratch_suffix)}"

    def load_scratch(self, name: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        # PostgreSQL scans temporary tables in the leader only, so a join with them never runs
        # in parallel workers: the apply's tables are unlogged tables of the target's schema,
        # under a name of this run. Created in the transaction, they vanish with a rollback
        # (or a lost connection); the end of the run drops them.
        self._fill(f"UNLOGGED TABLE {self.scratch(name)}", self.scratch(name), "", columns, rows)

    def _fill(self, create: str, table: str, suffix: str, columns: Sequence[tuple[str, str]],
              rows: Iterable[Sequence[Any]]) -> None:
        cols = ", ".join(f"{self.ident(n)} {t}" for n, t in columns)
        self.execute(f"CREATE {create} ({cols}){suffix}")
        with self.conn.cursor() as cur:
            names = ", ".join(self.ident(n) for n, _ in columns)
            with cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        self.execute(f"ANALYZE {table}")

    def distinct_tuples(self, exprs: Sequence[str]) -> str:
        return f"count(DISTINCT ROW({', '.join(exprs)}))"

    def mostly_distinct(self, q: "_Query", rows: int) -> bool:
        # A hash aggregation of 10 M distinct tuples of 11 text columns takes 22-27 s on 2
        # cores, a scan sending them 8-10 s; where tuples repeat, the aggregation is cheap and
        # shrinks what is sent. Decided on a sample of about _SAMPLE_ROWS rows (blocks chosen
        # with a fixed seed): at least 95 % distinct tuples there (in a 1 % sample of 10 M
        # rows, tuples that occur twice each show about 99 %, five times 97 %, twenty times
        # 91 %; duplicates stored side by side show fully). The planner's
        # estimate cannot tell: with several columns it is capped at a tenth of the rows. A
        # choice of speed only: either way deid receives the same records.
        # Views and foreign tables cannot be sampled: they are grouped (a savepoint keeps the
        # transaction usable after the refusal).
        import psycopg

        if rows < 2:
            return False
        pct = min(100.0, 100.0 * _SAMPLE_ROWS / rows)
        keys = ", ".join(q.keys({}))
        try:
            with self.conn.transaction():
                n, distinct = self.execute(
                    f"SELECT count(*), count(DISTINCT ROW({keys})) FROM {q.source} AS s "
                    f"TABLESAMPLE SYSTEM ({pct}) REPEATABLE (1)"
                )[0]
        except psycopg.Error:
            return False
        return int(n) > 0 and int(distinct) >= 0.95 * int(n)

    def temporary_as(self, table: str, query: str) -> None:
        self.execute(f"CREATE TEMPORARY TABLE {self.ident(table)} ON COMMIT DROP AS {query}")

    def csv_body(self, header: Sequence[str], query: str) -> Any:
        # COPY … TO STDOUT: PostgreSQL writes the CSV (quoted where needed, the empty value as
        # ""), so no row becomes a Python object; sent in blocks of about 1 MiB.
        def chunks() -> Iterator[bytes]:
            yield (",".join(csv_cell(h) for h in header) + "\n").encode("utf-8")
            block = bytearray()
            with self.conn.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT (FORMAT csv)") as copy:
                for data in copy:
                    block += data
                    if len(block) >= 1 << 20:
                        yield bytes(block)
                        block.clear()
            yield bytes(block)

        return io.BufferedReader(_ChunkReader(chunks()))


_DUCK_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT"}
_DUCK_TIMESTAMPS = {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_MS", "TIMESTAMP_S", "TIMESTAMP_NS"}


class _DuckDB(_Dialect):
    def ident(self, name: str) -> str:
        # DuckDB's identifier syntax (SQL's): double quotes, a quote inside doubled.
        if "\0" in name:
            raise ValueError(f"a name holds a NUL character: {name!r}")
        return '"' + name.replace('"', '""') + '"'

    def columns(self, source: TableName) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.execute(f"DESCRIBE SELECT * FROM {self.table(source)}")]

    def text(self, expr: str, column: str, typ: str) -> str:
        if typ in _DUCK_INTEGERS or typ in ("VARCHAR", "UUID", "DATE") or typ.startswith("DECIMAL("):
            return f"CAST({expr} AS VARCHAR)"
        if typ == "BOOLEAN":
            return f"(CASE WHEN {expr} THEN 'true' WHEN NOT {expr} THEN 'false' END)"
        if typ in ("FLOAT", "DOUBLE"):
            # DuckDB's CAST is the shortest text in the type's width (1e+21, 3.0, nan, inf).
            return (
                f"(CASE WHEN {expr} IS NULL THEN NULL WHEN isnan({expr}) THEN 'NaN' WHEN {expr} = 'inf'::{typ} "
                f"THEN 'Infinity' WHEN {expr} = '-inf'::{typ} THEN '-Infinity' "
                f"ELSE {plain_decimal(f'CAST({expr} AS VARCHAR)')} END)"
            )
        if typ in _DUCK_TIMESTAMPS:
            # Through the epoch: independent of the session's time zone; TIMESTAMP is UTC wall time.
            unit, digits = ("epoch_ns", 9) if typ == "TIMESTAMP_NS" else ("epoch_us", 6)
            scale = 10**digits
            epoch = f"{unit}({expr})"
            frac = f"((({epoch} % {scale}) + {scale}) % {scale})"
            micros = f"(({epoch} - {frac}) // {scale // 1_000_000})" if digits == 9 else f"({epoch} - {frac})"
            fraction = _fraction(frac, f"CAST({frac} AS VARCHAR)", digits)
            return f"(strftime(make_timestamp({micros}), '%Y-%m-%dT%H:%M:%S') || {fraction} || 'Z')"
        raise unsupported(column, typ)

    def literal(self, value: str) -> str:
        # DuckDB's string constants: a quote doubled, backslashes as they are.
        return "CAST('" + value.replace("'", "''") + "' AS VARCHAR)"

    def out_of_range(self, expr: str, typ: str) -> str | None:
        if typ == "DATE":
            return f"NOT isfinite({expr}) OR {_outside_dates(expr)}"
        if typ in _DUCK_TIMESTAMPS:
            unit, scale = ("epoch_ns", 10**9) if typ == "TIMESTAMP_NS" else ("epoch_us", 10**6)
            lo, hi = FIRST_EPOCH_SECOND * scale, END_EPOCH_SECOND * scale
            return f"NOT isfinite({expr}) OR NOT ({unit}({expr}) >= {lo} AND {unit}({expr}) < {hi})"
        return None

    def execute(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(query, list(params))
        try:
            return list(cur.fetchall())
        except Exception:  # statements without a result
            return []

    def stream(self, query: str) -> Iterator[Sequence[Any]]:
        # The connection itself: a cursor() would be another connection, outside the snapshot.
        self.conn.execute(query)
        while True:
            rows = self.conn.fetchmany(FETCH_ROWS)
            if not rows:
                return
            yield from rows

    def load(self, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        cols = ", ".join(f"{self.ident(n)} {t}" for n, t in columns)
        self.execute(f"CREATE OR REPLACE TEMPORARY TABLE {self.ident(table)} ({cols})")
        it = iter(rows)
        while True:
            chunk = list(itertools.islice(it, 50_000))
            if not chunk:
                return
            # Values are parameters (one list per column), unnested side by side.
            lists = [list(col) for col in zip(*chunk)]
            select = ", ".join(f"unnest(?::{t}[])" for _, t in columns)
            self.execute(f"INSERT INTO {self.ident(table)} SELECT {select}", lists)

    def distinct_tuples(self, exprs: Sequence[str]) -> str:
        return f"count(DISTINCT [{', '.join(exprs)}])"

    def temporary_as(self, table: str, query: str) -> None:
        self.execute(f"CREATE OR REPLACE TEMPORARY TABLE {self.ident(table)} AS {query}")

    @contextlib.contextmanager
    def upload_body(self, header: Sequence[str], query: str) -> Iterator[Any]:
        # DuckDB writes the table as Parquet itself, in parallel, into a temporary directory
        # that the block removes (10 M rows: 27 s fetched into Python as CSV, 12 s so); deid
        # reads Parquet by the same rule (every key column text, the count an integer).
        keys = [f"{self.ident(f'k{j}')} AS {self.ident(h)}" for j, h in enumerate(header[:-1])]
        names = ", ".join([*keys, f"CAST(n AS BIGINT) AS {self.ident(header[-1])}"])
        with tempfile.TemporaryDirectory(prefix=PREFIX) as tmp:
            path = os.path.join(tmp, "frequencies.parquet")
            quoted = path.replace("'", "''")
            self.execute(f"COPY (SELECT {names} FROM ({query}) AS f) TO '{quoted}' (FORMAT parquet)")
            yield path


def _dialect(conn: Any) -> _Dialect:
    module = type(conn).__module__
    if module.startswith("psycopg"):
        return _Postgres(conn)
    if module.startswith("duckdb") or module.startswith("_duckdb"):
        return _DuckDB(conn)
    raise TypeError(
        f"a {type(conn).__module__}.{type(conn).__name__} is no supported connection: give a psycopg 3 "
        "connection (pip install 'deid-client[postgres]') or a duckdb connection ('deid-client[duckdb]')"
    )


# ---------------------------------------------------------------- SQL of the steps


@dataclass
class _Query:
    """The source's rows with the frequency table's keys as text (``k0``, ``k1``, …: the
    quasi-identifiers at their floor, then sensitive and microaggregated columns)."""

    d: _Dialect
    source: str
    cols: Columns
    types: dict[str, str]
    floor: dict[str, int]
    #: The source is the level-0 frequency table (``k0``, ``k1``, … already text, and ``n``).
    texts: bool = False

    def value(self, column: str) -> str:
        """The column's text by the rule, NULL as the empty cell."""
        if self.texts:
            return "s." + self.d.ident(f"k{self.cols.sent.index(column)}")
        return f"COALESCE({self.d.text('s.' + self.d.ident(column), column, self.types[column])}, '')"

    def ungrouped(self) -> str:
        """The frequency table at level 0 without grouping: every row with the count 1 (the
        same expansion; deid groups the rows while loading them)."""
        keys = [f"{k} AS {self.d.ident('k' + str(j))}" for j, k in enumerate(self.keys({}))]
        return f"SELECT {', '.join(keys)}, 1 AS n FROM {self.from_clause({})}"

    def grouped(self, levels: Mapping[str, int]) -> str:
        """The frequency table at ``levels``: the keys ``k0``, ``k1``, … and the count ``n``."""
        keys = [f"{k} AS {self.d.ident('k' + str(j))}" for j, k in enumerate(self.keys(levels))]
        count = "sum(s.n)" if self.texts else "count(*)"
        group = ", ".join(str(j + 1) for j in range(len(keys)))
        return f"SELECT {', '.join(keys)}, {count} AS n FROM {self.from_clause(levels)} GROUP BY {group}"

    def joins(self, levels: Mapping[str, int]) -> str:
        return "".join(
            f" LEFT JOIN {self.d.ident(_htable(i))} AS {self.d.ident(f'h{i}')} "
            f"ON {self.d.ident(f'h{i}')}.v = {self.value(q)}"
            for i, q in enumerate(self.cols.qis)
            if levels.get(q, 0) > 0
        )

    def keys(self, levels: Mapping[str, int]) -> list[str]:
        """The key expressions: a quasi-identifier at level L > 0 is its hierarchy's label (the
        value itself when the hierarchy lacks it: deid then names it)."""
        out = []
        for i, q in enumerate(self.cols.qis):
            lvl = levels.get(q, 0)
            out.append(f"COALESCE({self.d.ident(f'h{i}')}.{self.d.ident(f'l{lvl}')}, {self.value(q)})" if lvl else self.value(q))
        return out + [self.value(c) for c in self.cols.sensitive + self.cols.micro]

    def from_clause(self, levels: Mapping[str, int]) -> str:
        return f"{self.source} AS s{self.joins(levels)}"


#: Rows of the sample that decides whether PostgreSQL sends the level-0 table ungrouped.
_SAMPLE_ROWS = 100_000

#: The temporary table of the level-0 frequency table.
_FREQ = f"{PREFIX}freq"


def _htable(i: int) -> str:
    return f"{PREFIX}h{i}"


def _check_ranges(q: _Query) -> None:
    """Dates and timestamps outside years 1–9999 are refused, naming the column."""
    checks = []
    for c in q.cols.sent:
        cond = q.d.out_of_range("s." + q.d.ident(c), q.types[c])
        if cond:
            checks.append((c, f"count(*) FILTER (WHERE {cond})"))
    if not checks:
        return
    counts = q.d.execute(f"SELECT {', '.join(e for _, e in checks)} FROM {q.source} AS s")[0]
    for (c, _), n in zip(checks, counts):
        if n:
            raise out_of_range(c, n)


def _load_hierarchies(q: _Query) -> None:
    for i, col in enumerate(q.cols.qis):
        h = q.cols.hierarchies.get(col)
        if h is None:
            continue
        width = h.height
        columns = [("v", "text" if isinstance(q.d, _Postgres) else "VARCHAR")] + [
            (f"l{j}", "text" if isinstance(q.d, _Postgres) else "VARCHAR") for j in range(1, width)
        ]
        rows = ([r[j] if j < len(r) else None for j in range(width)] for r in h.rows.values())
        q.d.load(_htable(i), columns, rows)


def _profile(q: _Query, max_groups: int) -> tuple[int | None, int | None, dict[str, int], str]:
    """(groups at level 0, groups at the floor, the floor, the query of the frequency table at
    the floor). A source of at most ``max_groups`` rows has no more tuples than that, so it
    needs no floor: its frequency table is the level-0 grouping, streamed as it is computed, or
    its rows ungrouped when :meth:`_Dialect.mostly_distinct` (the counts of groups are then
    those of the upload: ``None`` here). A larger source is
    grouped once at level 0 into a temporary table; when that has more than ``max_groups``
    rows, the floor is chosen on it (exact distinct counts, one scan per round), and the
    frequency table at the floor regroups it."""
    rows = int(q.d.execute(f"SELECT count(*) FROM {q.source}")[0][0])
    if rows <= max_groups:
        return None, None, {}, q.ungrouped() if q.d.mostly_distinct(q, rows) else q.grouped({})
    q.d.temporary_as(_FREQ, q.grouped({}))
    f = _Query(q.d, q.d.ident(_FREQ), q.cols, q.types, {}, texts=True)
    level0 = int(q.d.execute(f"SELECT count(*) FROM {f.source}")[0][0])
    if level0 <= max_groups:
        return level0, level0, {}, f"SELECT * FROM {f.source}"
    _load_hierarchies(q)

    def count(trials: Sequence[dict[str, int]]) -> Sequence[int]:
        top = {c: max(t.get(c, 0) for t in trials) for c in f.cols.qis}
        return f.d.execute(
            "SELECT " + ", ".join(f.d.distinct_tuples(f.keys(t)) for t in trials) + f" FROM {f.from_clause(top)}"
        )[0]

    groups, floor = choose_floor(q.cols, level0, max_groups, count)
    return level0, groups, floor, f.grouped(floor)


# ---------------------------------------------------------------- apply


#: Most rows of one table of maps: quasi-identifiers with small maps share a table holding the
#: combinations of their values (one join instead of several).
def _map_groups(plan: Plan) -> list[list[int]]:
    """The quasi-identifiers whose maps share a table (:func:`deid_client._adapter.combine`:
    the product of their maps' sizes, times the steps, within ``COMBINED_ROWS``)."""
    n = len(plan.quasi_identifiers)
    size = [max((len(step.maps[i]) for step in plan.steps), default=0) for i in range(n)]
    return combine(size, max(1, len(plan.steps)))


def _apply_tables(q: _Query, plan: Plan, codes: _Codes | None, groups: Sequence[Sequence[int]]) -> None:
    """The plan as tables of the run: per group of quasi-identifiers (:func:`_map_groups`) the
    combinations of their maps (step, the values, the outputs, and the sum of the outputs'
    codes times their strides); the output tuples each step publishes with their class, and
    those the last step suppresses with the class −1 (one join decides both), by their key when
    ``codes`` (else by their values); the classes' aggregates when columns are microaggregated."""
    text = "text" if isinstance(q.d, _Postgres) else "VARCHAR"
    n = len(plan.quasi_identifiers)
    for j, group in enumerate(groups):

        def combinations(group: Sequence[int] = group) -> Iterator[tuple[Any, ...]]:
            for s, step in enumerate(plan.steps):
                for combo in itertools.product(*(step.maps[i].items() for i in group)):
                    outputs = [o for _, o in combo]
                    yield (s, *(v for v, _ in combo), *outputs, codes.key(s, outputs, group) if codes else 0)

        columns = [("step", "integer"), *((f"v{i}", text) for i in group), *((f"o{i}", text) for i in group), ("k", "bigint")]
        q.d.load_scratch(f"{PREFIX}m{j}", columns, combinations())
    last = len(plan.steps) - 1
    published = {tuple(plan.classes[c].values) for c in plan.steps[last].publishes} if plan.steps else set()
    # A tuple the last step publishes is published, even if the plan also lists it suppressed.
    suppressed = {tuple(t) for t in plan.suppressed} - published
    pub = itertools.chain(
        ((s, c, plan.classes[c].values) for s, step in enumerate(plan.steps) for c in step.publishes),
        ((last, -1, t) for t in suppressed),
    )
    if codes:
        keyed = ((s, c, codes.key(s, values)) for s, c, values in pub)
        rows = ((s, c, key) for s, c, key in keyed if key is not None)
        q.d.load_scratch(f"{PREFIX}pub", [("step", "integer"), ("c", "integer"), ("key", "bigint")], rows)
    else:
        vcols = [(f"v{i}", text) for i in range(n)]
        q.d.load_scratch(f"{PREFIX}pub", [("step", "integer"), ("c", "integer"), *vcols],
                         ((s, c, *values) for s, c, values in pub))
    if plan.microaggregated:
        acols = [(f"a{j}", text) for j in range(len(plan.microaggregated))]
        cls = ((c, *k.aggregates) for c, k in enumerate(plan.classes))
        q.d.load_scratch(f"{PREFIX}cls", [("c", "integer"), *acols], cls)


def _state(q: _Query, plan: Plan, keys: Sequence[str], codes: _Codes | None,
           groups: Sequence[Sequence[int]]) -> tuple[str, str, list[str]]:
    """(joins, state expression, the published value of each quasi-identifier): the state is
    the row's class (≥ 0), −1 suppressed, −2 not covered — the first step whose maps send the
    tuple to a class it publishes, or −1 where the last step sends it to a suppressed tuple
    (docs/definitions.md §7.2); a class's values are the outputs of that step's maps."""
    d = q.d
    n = len(plan.quasi_identifiers)
    joins, cases = [], []
    values: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    for s in range(len(plan.steps)):
        ms = [d.ident(f"m{s}_{j}") for j in range(len(groups))]
        out = {i: f"{ms[j]}.{d.ident(f'o{i}')}" for j, g in enumerate(groups) for i in g}
        for j, g in enumerate(groups):
            on = " AND ".join([f"{ms[j]}.step = {s}"] + [f"{ms[j]}.{d.ident(f'v{i}')} = {keys[i]}" for i in g])
            joins.append(f"LEFT JOIN {d.scratch(f'{PREFIX}m{j}')} AS {ms[j]} ON {on}")
        p = d.ident(f"p{s}")
        if codes:
            key = " + ".join(f"{m}.k" for m in ms) or "0"
            on = f"{p}.step = {s} AND {p}.key = {key}"
        else:
            on = " AND ".join([f"{p}.step = {s}"] + [f"{p}.v{i} = {out[i]}" for i in range(n)])
        joins.append(f"LEFT JOIN {d.scratch(f'{PREFIX}pub')} AS {p} ON {on}")
        missing = " OR ".join(f"{m}.step IS NULL" for m in ms) or "FALSE"
        cases.append(f"WHEN {missing} THEN -2 WHEN {p}.c IS NOT NULL THEN {p}.c")
        for i in range(n):
            values[i].append((f"{p}.c IS NOT NULL", out[i]))
    state = f"CASE {' '.join(cases)} ELSE -2 END" if cases else "-2"
    # One step: its outputs; several: those of the first step that publishes the row.
    published = [
        v[0][1] if len(v) == 1 else "CASE " + " ".join(f"WHEN {c} THEN {o}" for c, o in v) + " END" for v in values
    ]
    return " ".join(joins), state, published


def _qi_output(q: _Query, i: int, key: str, published: str) -> str:
    """The released value of quasi-identifier ``i`` (source value ``key``) in a published row:
    its class's value, ``published``."""
    return published


def _outputs(q: _Query, plan: Plan, names: Sequence[str], state: str, published: Sequence[str]) -> list[str]:
    """The target's columns in the source's order: identifiers dropped, quasi-identifiers
    (``published``: their values in a published row) and microaggregated columns from the
    class, sensitive ones as text (the marker when suppressed, unless the plan keeps them), the
    rest as they are."""
    d = q.d
    # A constant, not a joined table: the columns are then computed by the parallel workers
    # below the Gather, not by the leader (10 M rows: CTAS 25.9-26.7 s → 22.7-25.1 s).
    marker = d.literal(plan.suppression.marker)
    roles = {c.name: c.role for c in plan.columns}
    keys = q.keys(q.floor)
    out = []
    for name in names:
        col = d.ident(name)
        if name in q.cols.identifying:
            continue
        if name in q.cols.qis:
            i = plan.quasi_identifiers.index(name)
            value = _qi_output(q, i, keys[q.cols.qis.index(name)], published[i])
            out.append(f"CASE WHEN {state} >= 0 THEN {value} ELSE {marker} END AS {col}")
        elif name in q.cols.micro:
            j = plan.microaggregated.index(name)
            out.append(f"CASE WHEN {state} >= 0 THEN {d.ident('cl')}.{d.ident(f'a{j}')} ELSE {marker} END AS {col}")
        elif name in q.cols.sensitive:
            value = q.value(name)
            if roles.get(name) == "sensitive":
                value = f"CASE WHEN {state} >= 0 THEN {value} ELSE {marker} END"
            out.append(f"{value} AS {col}")
        else:
            out.append(f"s.{col} AS {col}")
    return out


def _apply(q: _Query, plan: Plan, names: Sequence[str], target: str) -> tuple[int, int]:
    """Creates the target; (rows written, rows not covered)."""
    check_plan(q.cols, plan)
    codes = _Codes.of(plan)
    groups = _map_groups(plan)
    with gc_paused():  # the plan is alive: collections would walk it for every table
        _apply_tables(q, plan, codes, groups)
    d = q.d
    keys = q.keys(q.floor)
    joins, state_expr, published = _state(q, plan, keys, codes, groups)
    st = d.ident(f"{PREFIX}state")
    # The state and the published values are named in a subquery; the columns read them.
    inner = f"SELECT s.*, {state_expr} AS {st}"
    inner += "".join(f", {v} AS {d.ident(f'{PREFIX}o{i}')}" for i, v in enumerate(published))
    inner += f" FROM {q.from_clause(q.floor)} {joins}"
    outputs = _outputs(q, plan, names, f"s.{st}", [f"s.{d.ident(f'{PREFIX}o{i}')}" for i in range(len(published))])
    query = f"CREATE TABLE {target} AS SELECT {', '.join(outputs)}, s.{st} AS {st} FROM ({inner}) AS s "
    if plan.microaggregated:
        query += f"LEFT JOIN {d.scratch(f'{PREFIX}cls')} AS {d.ident('cl')} ON {d.ident('cl')}.c = s.{st} "
    with _parallel(d):
        d.execute(query)
    counts = d.execute(f"SELECT count(*) FILTER (WHERE {st} = -2), count(*) FILTER (WHERE {st} >= 0), count(*) FROM {target}")
    uncovered, published_rows, rows = (int(n) for n in counts[0])
    if plan.suppression.mode == "remove":
        d.execute(f"DELETE FROM {target} WHERE {st} < 0")
        rows = published_rows
    d.drop_column(target, f"{PREFIX}state")
    return rows, uncovered


# ---------------------------------------------------------------- verify


def _verify(
    client: Client, q: _Query, target: str, job_id: str, count_column: str, stand_ins: tuple[str, str] | None
) -> Verification:
    """The target's frequency table (a ``GROUP BY`` of the columns sent, as text) posted to
    deid's verification; sensitive columns as the marker or not when ``stand_ins`` is given
    (:func:`sensitive_stand_ins`)."""
    d = q.d
    text = "text" if isinstance(d, _Postgres) else "VARCHAR"
    exprs = [f"COALESCE(CAST({d.ident(c)} AS {text}), '')" for c in q.cols.sent]
    if stand_ins is not None:
        marker, other = (d.literal(t) for t in stand_ins)
        for j, c in enumerate(q.cols.sent):
            if c in q.cols.sensitive:
                exprs[j] = f"CASE WHEN {exprs[j]} = {marker} THEN {marker} ELSE {other} END"
    group = ", ".join(str(i + 1) for i in range(len(exprs)))
    query = f"SELECT {', '.join(exprs)}, count(*) FROM {target} GROUP BY {group}"
    with _parallel(d):
        return client.verify_job(job_id, d.csv_body([*q.cols.sent, count_column], query), count_column=count_column)


# ---------------------------------------------------------------- the whole


@contextlib.contextmanager
def _pg_setting(d: _Dialect, name: str, value: str) -> Iterator[None]:
    """PostgreSQL's setting ``name`` at ``value`` for the block (``SET LOCAL``: an error ends
    the transaction, rolled back, and the setting with it); other databases unchanged."""
    if not isinstance(d, _Postgres):
        yield
        return
    d.execute(f"SET LOCAL {name} = {value}")
    yield
    d.execute(f"SET LOCAL {name} TO DEFAULT")


def _serial(d: _Dialect) -> Any:
    """PostgreSQL without parallel workers for the frequency table's ``GROUP BY``: where most
    tuples are distinct, the workers' partial groups do not shrink and the leader groups every
    row again (10 M distinct rows: about 20 s serial, 23 s with two workers). The apply's and the
    verification's queries keep their workers."""
    return _pg_setting(d, "max_parallel_workers_per_gather", "0")


def _parallel(d: _Dialect) -> Any:
    """PostgreSQL with parallel workers for the apply and the verification whatever the rows
    they pass to the leader cost: the planner prices each row a worker passes on
    (``parallel_tuple_cost``) so high that it runs the apply's joins of 10 M rows in one
    process once the joins are cheap (44 s instead of 25 s on 2 cores)."""
    return _pg_setting(d, "parallel_tuple_cost", "0")


def _transaction(d: _Dialect) -> Any:
    """A context manager: one snapshot for every step (PostgreSQL: REPEATABLE READ)."""

    @contextlib.contextmanager
    def pg() -> Iterator[None]:
        from psycopg import IsolationLevel, pq

        conn = d.conn
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            raise ValueError("the connection is inside a transaction: commit or roll back first")
        saved = conn.isolation_level
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        try:
            with conn.transaction():
                conn.execute("SET LOCAL extra_float_digits = 1")  # floats as their shortest text
                # Hash joins and aggregations of the plan's tables in memory: the default 4 MB
                # makes PostgreSQL sort every row on the ten keys of the class tables to merge
                # them (10 M rows: apply 100 s → 44 s, verify 28 s → 8 s; docs/engines.md).
                conn.execute("SET LOCAL work_mem = '256MB'")
                conn.execute("SET LOCAL enable_mergejoin = off")
                yield
        finally:
            conn.isolation_level = saved

    @contextlib.contextmanager
    def duck() -> Iterator[None]:
        d.conn.begin()
        try:
            yield
        except BaseException:
            d.conn.rollback()
            raise
        d.conn.commit()

    return pg() if isinstance(d, _Postgres) else duck()


def anonymize_table(
    client: Client,
    connection: Any,
    source: TableName,
    target: TableName,
    spec: JobSpec | Mapping[str, Any],
    *,
    max_groups: int = DEFAULT_MAX_GROUPS,
    timeout: float | None = None,
    progress: bool | None = None,
    upload_format: str = "csv",
    keep_dataset: bool = False,
) -> SqlResult:
    """Anonymizes ``source`` into a new table ``target`` inside the database of ``connection``
    (psycopg 3 or duckdb), with deid searching on the frequency table (see the module's
    documentation for the steps).

    ``spec`` is the job specification without ``dataset_id`` (a dict or a :class:`JobSpec` whose
    ``dataset_id`` is ignored): ``attributes`` name the roles of the source's columns (columns
    not named are copied as they are); quasi-identifiers whose hierarchy is an inline CSV table
    (``{"csv": …}``) can be sent at a floor when the frequency table has more than
    ``max_groups`` rows. ``timeout`` bounds the wait for the job (the job's own ``time_limit``
    bounds its search); Ctrl-C cancels the job. The uploaded frequency table is deleted at the
    end unless ``keep_dataset``. Raises :class:`VerificationFailedError` (nothing written) when
    deid's verification of the released table fails, :class:`deid_client.JobFailedError` when
    the job fails, ValueError for a specification or data the rule refuses.
    """
    d = _dialect(connection)
    if upload_format != "csv":
        raise ValueError(f"upload_format: expected 'csv', got {upload_format!r}")
    raw = raw_spec(spec)
    src, dst = d.table(source), d.table(target)
    timings: dict[str, float] = {}
    with _transaction(d):
        if isinstance(d, _Postgres):
            schema = target[0] if isinstance(target, tuple) else d.execute("SELECT current_schema()")[0][0]
            d.scratch_schema = str(schema or "public")
            d.scratch_suffix = f"_{uuid.uuid4().hex[:12]}"
        types = dict(d.columns(source))
        names = list(types)
        cols = columns(raw, names, "anonymize_table")
        q = _Query(d, src, cols, types, {})
        for c in cols.sent:
            d.text("x", c, types[c])  # refuses unsupported types before any scan
        clock = time.monotonic()
        _check_ranges(q)
        level0, groups, floor, freq = _profile(q, max_groups)
        q.floor = floor
        timings["profile"], clock = time.monotonic() - clock, time.monotonic()
        count_column = count_name(cols.sent)
        with _serial(d), d.upload_body([*cols.sent, count_column], freq) as data:
            ds = uploader(client, count_column)(data)
        if level0 is None or groups is None:
            level0 = groups = ds.rows
        timings["group"], clock = time.monotonic() - clock, time.monotonic()
        with searched(client, raw, cols, ds.id, floor, timeout, progress, keep_dataset) as (job, report, plan):
            timings["search"], clock = time.monotonic() - clock, time.monotonic()
            rows, uncovered = _apply(q, plan, names, dst)
            verification = _verify(client, q, dst, job.id, count_column, sensitive_stand_ins(raw, plan))
            if not verification.passed:
                raise VerificationFailedError(verification, job.id)
            timings["apply_verify"] = time.monotonic() - clock
        _drop_temporary(d, cols, plan)
    warnings = floor_warning(level0, max_groups, floor, groups)
    return SqlResult(job, report, plan, floor, level0, groups, uncovered, verification, rows, timings, warnings)


def _drop_temporary(d: _Dialect, cols: Columns, plan: Plan) -> None:
    for n in [_htable(i) for i in range(len(cols.qis))] + [_FREQ]:
        d.execute(f"DROP TABLE IF EXISTS {d.ident(n)}")
    scratch = [f"{PREFIX}m{i}" for i in range(len(plan.quasi_identifiers))]
    for n in scratch + [f"{PREFIX}{n}" for n in ("pub", "cls")]:
        d.execute(f"DROP TABLE IF EXISTS {d.scratch(n)}")

