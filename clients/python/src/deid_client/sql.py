"""Anonymize a table inside PostgreSQL (psycopg 3) or DuckDB: only the frequency table of the
columns the job needs leaves the database (docs/engines.md).

:func:`anonymize_table` runs, in one snapshot of the database (PostgreSQL: a REPEATABLE READ
transaction; DuckDB: one transaction):

1. *profile*: the number of distinct tuples of the quasi-identifiers, sensitive and
   microaggregated columns; when it exceeds ``max_groups``, a *floor* — a level per
   quasi-identifier, read from the hierarchy tables given inline in the specification — that
   brings it below, greedily raising the quasi-identifier that helps most;
2. *frequency table*: one ``GROUP BY`` over those columns as text (deid's typed→text rule,
   written as SQL per dialect), streamed from a server-side cursor to deid as a CSV upload with
   a count column;
3. the *job* on deid (``data_level`` set for the floor), waited for with progress; Ctrl-C
   cancels it;
4. *apply*: the plan's maps and classes as temporary tables joined to the source, suppressed
   and uncovered rows suppressed (fail closed, counted), ``CREATE TABLE target AS SELECT …``;
5. *verify*: the target's frequency table posted to ``POST /v1/jobs/{id}/verify``; a failed
   verification raises :class:`VerificationFailedError` and rolls the transaction back, so no
   target table is left.

psycopg and duckdb are optional (``deid-client[postgres]``, ``deid-client[duckdb]``): this
module imports without them and names the extra when a connection of the other kind is given.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence, Union

from .builders import JobSpec, to_json
from .client import Client
from .errors import DeidError
from .types import Job, Plan, Report, Verification

__all__ = [
    "SqlResult",
    "VerificationFailedError",
    "anonymize_table",
    "TableName",
]

#: A table: a name, or (schema, name). Names are quoted, never parsed: ``"a.b"`` is one name.
TableName = Union[str, tuple[str, str]]

#: Rows fetched from the database per round trip while streaming a frequency table.
FETCH_ROWS = 10_000
#: Default largest frequency table sent to deid before a floor is chosen.
DEFAULT_MAX_GROUPS = 1_000_000
#: Prefix of the names this module gives to temporary tables and helper columns.
PREFIX = "deid_"


class VerificationFailedError(DeidError):
    """The released table failed deid's verification; nothing was written (the transaction was
    rolled back). ``verification`` holds the verdict per model."""

    def __init__(self, verification: Verification, job_id: str) -> None:
        failed = [m.model for m in verification.models if not m.passed]
        super().__init__(f"verification of job {job_id} failed for: {', '.join(failed) or '?'}")
        self.verification = verification
        self.job_id = job_id


@dataclass
class SqlResult:
    """What :func:`anonymize_table` did."""

    #: The finished job (its id finds the report, plan and verification again).
    job: Job
    #: The job's report (records, not frequency rows: ``report.rows`` is the table's row count).
    report: Report
    #: The plan applied in the database.
    plan: Plan
    #: The floor: quasi-identifier → the level its values were sent at (empty: level 0).
    floor: dict[str, int]
    #: Rows of the frequency table at level 0 and as sent.
    groups_level0: int
    groups: int
    #: Source rows the plan does not cover (suppressed); 0 on the data the plan was made on.
    uncovered_rows: int
    #: deid's verdict on the released table.
    verification: Verification
    #: Rows written to the target.
    rows_written: int
    #: Notes for the user (e.g. a floor was chosen).
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the specification


@dataclass
class _Hierarchy:
    """A hierarchy table: level-0 value → its row (level j at index j)."""

    rows: dict[str, list[str]]
    height: int


@dataclass
class _Columns:
    """The roles of the source's columns, from the specification."""

    qis: list[str]
    sensitive: list[str]
    micro: list[str]
    identifying: list[str]
    hierarchies: dict[str, _Hierarchy]
    max_level: dict[str, int]

    @property
    def sent(self) -> list[str]:
        """The columns of the frequency table (without the count), in its order."""
        return self.qis + self.sensitive + self.micro


def _parse_hierarchy(column: str, source: Any) -> _Hierarchy | None:
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
    return _Hierarchy(rows, height)


def _highest_floor(h: _Hierarchy, max_level: int | None, marker: str) -> int:
    """The highest level a floor may use: at most ``max_level``, and below the first level with
    a label equal to the suppression marker (deid refuses data holding the marker)."""
    top = h.height - 1 if max_level is None else min(h.height - 1, max_level)
    for level in range(1, top + 1):
        if any(len(r) > level and r[level] == marker for r in h.rows.values()):
            return level - 1
    return top


def _columns(spec: Mapping[str, Any], names: Sequence[str]) -> _Columns:
    attributes = spec.get("attributes")
    if not isinstance(attributes, Mapping) or not attributes:
        raise ValueError("spec.attributes: expected an object naming the columns' roles")
    cols = _Columns([], [], [], [], {}, {})
    for name, attr in attributes.items():
        if name not in names:
            raise ValueError(f"spec.attributes.{name}: no such column in the source (columns: {', '.join(names)})")
        kind = attr.get("type") if isinstance(attr, Mapping) else None
        if kind == "quasi_identifying" and attr.get("microaggregation") is not None:
            cols.micro.append(name)
        elif kind == "quasi_identifying":
            cols.qis.append(name)
            h = _parse_hierarchy(name, attr.get("hierarchy"))
            if h is not None:
                cols.hierarchies[name] = h
                cols.max_level[name] = _highest_floor(h, attr.get("max_level"), spec.get("suppression_marker") or "*")
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
            raise ValueError(f"spec.{key}: set by anonymize_table; leave it out")
    order = {n: i for i, n in enumerate(names)}
    for group in (cols.qis, cols.sensitive, cols.micro):
        group.sort(key=order.__getitem__)
    return cols


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

    def distinct_tuples(self, exprs: Sequence[str]) -> str:
        raise NotImplementedError

    def drop_column(self, table: str, column: str) -> None:
        self.execute(f"ALTER TABLE {table} DROP COLUMN {self.ident(column)}")


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
        if typ == "date":
            return f"to_char({expr}, 'YYYY-MM-DD')"
        if typ in ("timestamp", "timestamptz"):
            ts = f"({expr} AT TIME ZONE 'UTC')" if typ == "timestamptz" else f"({expr})"
            frac = f"(extract(microseconds FROM {ts})::bigint % 1000000)"
            return (
                f"(to_char({ts}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN {frac} = 0 THEN '' "
                f"ELSE '.' || rtrim(lpad({frac}::text, 6, '0'), '0') END || 'Z')"
            )
        raise _unsupported(column, typ)

    def out_of_range(self, expr: str, typ: str) -> str | None:
        if typ == "date":
            return f"NOT ({expr} >= DATE '0001-01-01' AND {expr} <= DATE '9999-12-31')"
        if typ in ("timestamp", "timestamptz"):
            ts = f"({expr} AT TIME ZONE 'UTC')" if typ == "timestamptz" else f"({expr})"
            return f"NOT ({ts} >= TIMESTAMP '0001-01-01' AND {ts} < TIMESTAMP '10000-01-01')"
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

    def load(self, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
        cols = ", ".join(f"{self.ident(n)} {t}" for n, t in columns)
        self.execute(f"CREATE TEMPORARY TABLE {self.ident(table)} ({cols}) ON COMMIT DROP")
        with self.conn.cursor() as cur:
            names = ", ".join(self.ident(n) for n, _ in columns)
            with cur.copy(f"COPY {self.ident(table)} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        self.execute(f"ANALYZE {self.ident(table)}")

    def distinct_tuples(self, exprs: Sequence[str]) -> str:
        return f"count(DISTINCT ROW({', '.join(exprs)}))"


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
        if typ in _DUCK_TIMESTAMPS:
            # Through the epoch: independent of the session's time zone; TIMESTAMP is UTC wall time.
            unit, digits = ("epoch_ns", 9) if typ == "TIMESTAMP_NS" else ("epoch_us", 6)
            scale = 10**digits
            epoch = f"{unit}({expr})"
            frac = f"((({epoch} % {scale}) + {scale}) % {scale})"
            micros = f"(({epoch} - {frac}) // {scale // 1_000_000})" if digits == 9 else f"({epoch} - {frac})"
            return (
                f"(strftime(make_timestamp({micros}), '%Y-%m-%dT%H:%M:%S') || CASE WHEN {frac} = 0 THEN '' "
                f"ELSE '.' || rtrim(lpad(CAST({frac} AS VARCHAR), {digits}, '0'), '0') END || 'Z')"
            )
        raise _unsupported(column, typ)

    def out_of_range(self, expr: str, typ: str) -> str | None:
        if typ == "DATE":
            return f"NOT isfinite({expr}) OR NOT ({expr} >= DATE '0001-01-01' AND {expr} <= DATE '9999-12-31')"
        if typ in _DUCK_TIMESTAMPS:
            unit, scale = ("epoch_ns", 10**9) if typ == "TIMESTAMP_NS" else ("epoch_us", 10**6)
            lo, hi = -62135596800 * scale, 253402300800 * scale  # 0001-01-01, 10000-01-01 UTC
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


def _unsupported(column: str, typ: str) -> ValueError:
    return ValueError(
        f"column {column!r} has type {typ}, which deid's typed→text rule does not cover "
        "(integers, decimals, booleans, dates, timestamps, text); cast it in a view"
    )


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
    cols: _Columns
    types: dict[str, str]
    floor: dict[str, int]
    key: list[str] = field(default_factory=list)

    def value(self, column: str) -> str:
        """The column's text by the rule, NULL as the empty cell."""
        return f"COALESCE({self.d.text('s.' + self.d.ident(column), column, self.types[column])}, '')"

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
            raise ValueError(f"column {c!r}: {n} value(s) outside the years 1–9999, which deid's rule refuses")


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


def _profile(q: _Query, max_groups: int) -> tuple[int, int, dict[str, int]]:
    """(groups at level 0, groups at the floor, the floor)."""
    level0 = q.d.execute(f"SELECT {q.d.distinct_tuples(q.keys({}))} FROM {q.from_clause({})}")[0][0]
    floor: dict[str, int] = {}
    groups = int(level0)
    if groups <= max_groups:
        return int(level0), groups, floor
    _load_hierarchies(q)
    while groups > max_groups:
        candidates = [c for c in q.cols.qis if c in q.cols.hierarchies and floor.get(c, 0) < q.cols.max_level[c]]
        if not candidates:
            raise ValueError(
                f"the frequency table has {groups} rows at the highest floor the hierarchies allow, more "
                f"than max_groups={max_groups}: raise max_groups or give hierarchies (inline CSV) for more "
                "quasi-identifiers"
            )
        trials = [{**floor, c: floor.get(c, 0) + 1} for c in candidates]
        top = {c: max(t.get(c, 0) for t in trials) for c in q.cols.qis}
        counts = q.d.execute(
            "SELECT " + ", ".join(q.d.distinct_tuples(q.keys(t)) for t in trials) + f" FROM {q.from_clause(top)}"
        )[0]
        best = min(range(len(trials)), key=lambda j: (counts[j], j))
        floor, groups = trials[best], int(counts[best])
    return int(level0), groups, {c: lvl for c, lvl in floor.items() if lvl > 0}


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


def _csv_chunks(header: Sequence[str], rows: Iterable[Sequence[Any]], rows_per_chunk: int = FETCH_ROWS) -> Iterator[bytes]:
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


def _body(header: Sequence[str], rows: Iterable[Sequence[Any]], upload_format: str) -> Any:
    """The request body of a frequency table in ``upload_format`` (today ``csv``)."""
    if upload_format != "csv":
        raise ValueError(f"upload_format: expected 'csv', got {upload_format!r}")
    return io.BufferedReader(_ChunkReader(_csv_chunks(header, rows)))


# ---------------------------------------------------------------- apply


def _apply_tables(q: _Query, plan: Plan) -> None:
    """The plan as temporary tables: per quasi-identifier its maps (step, value, output), the
    classes each step publishes, the classes' values and aggregates, the suppressed tuples and
    the marker."""
    text = "text" if isinstance(q.d, _Postgres) else "VARCHAR"
    n = len(plan.quasi_identifiers)
    for i in range(n):
        rows = ((s, v, o) for s, step in enumerate(plan.steps) for v, o in step.maps[i].items())
        q.d.load(f"{PREFIX}m{i}", [("step", "integer"), ("v", text), ("o", text)], rows)
    vcols = [(f"v{i}", text) for i in range(n)]
    pub = ((s, c, *plan.classes[c].values) for s, step in enumerate(plan.steps) for c in step.publishes)
    q.d.load(f"{PREFIX}pub", [("step", "integer"), ("c", "integer"), *vcols], pub)
    acols = [(f"a{j}", text) for j in range(len(plan.microaggregated))]
    cls = ((c, *k.values, *k.aggregates) for c, k in enumerate(plan.classes))
    q.d.load(f"{PREFIX}cls", [("c", "integer"), *vcols, *acols], cls)
    sup = {tuple(t) for t in plan.suppressed}
    q.d.load(f"{PREFIX}sup", [*vcols, ("hit", "integer")], ((*t, 1) for t in sup))
    q.d.load(f"{PREFIX}marker", [("marker", text)], [(plan.suppression.marker,)])


def _state(q: _Query, plan: Plan, keys: Sequence[str]) -> tuple[str, str]:
    """(joins, state expression): the row's class (≥ 0), −1 suppressed, −2 not covered — the
    first step whose maps send the tuple to a class it publishes (docs/definitions.md §7.2)."""
    d = q.d
    n = len(plan.quasi_identifiers)
    joins, cases = [], []
    for s in range(len(plan.steps)):
        ms = [d.ident(f"m{s}_{i}") for i in range(n)]
        for i in range(n):
            joins.append(f"LEFT JOIN {d.ident(f'{PREFIX}m{i}')} AS {ms[i]} ON {ms[i]}.step = {s} AND {ms[i]}.v = {keys[i]}")
        p = d.ident(f"p{s}")
        on = " AND ".join([f"{p}.step = {s}"] + [f"{p}.v{i} = {ms[i]}.o" for i in range(n)])
        joins.append(f"LEFT JOIN {d.ident(f'{PREFIX}pub')} AS {p} ON {on}")
        missing = " OR ".join(f"{m}.o IS NULL" for m in ms) or "FALSE"
        cases.append(f"WHEN {missing} THEN -2 WHEN {p}.c IS NOT NULL THEN {p}.c")
    last = len(plan.steps) - 1
    on = " AND ".join([f"{d.ident('sp')}.v{i} = {d.ident(f'm{last}_{i}')}.o" for i in range(n)] or ["TRUE"])
    joins.append(f"LEFT JOIN {d.ident(f'{PREFIX}sup')} AS {d.ident('sp')} ON {on}")
    state = f"CASE {' '.join(cases)} WHEN {d.ident('sp')}.hit IS NOT NULL THEN -1 ELSE -2 END"
    return " ".join(joins), state


def _qi_output(q: _Query, i: int, key: str) -> str:
    """The released value of quasi-identifier ``i``: its class's value."""
    return f"{q.d.ident('cl')}.{q.d.ident(f'v{i}')}"


def _outputs(q: _Query, plan: Plan, names: Sequence[str], state: str) -> list[str]:
    """The target's columns in the source's order: identifiers dropped, quasi-identifiers and
    microaggregated columns from the class, sensitive ones as text (the marker when
    suppressed, unless the plan keeps them), the rest as they are."""
    d = q.d
    marker = f"{d.ident('mk')}.marker"
    roles = {c.name: c.role for c in plan.columns}
    keys = q.keys(q.floor)
    out = []
    for name in names:
        col = d.ident(name)
        if name in q.cols.identifying:
            continue
        if name in q.cols.qis:
            i = plan.quasi_identifiers.index(name)
            value = _qi_output(q, i, keys[q.cols.qis.index(name)])
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
    _check_plan(q, plan)
    _apply_tables(q, plan)
    d = q.d
    keys = q.keys(q.floor)
    joins, state_expr = _state(q, plan, keys)
    st = d.ident(f"{PREFIX}state")
    inner = (
        f"SELECT s.*, {state_expr} AS {st} FROM {q.from_clause(q.floor)} {joins}"
    )
    outputs = _outputs(q, plan, names, f"s.{st}")
    query = (
        f"CREATE TABLE {target} AS SELECT {', '.join(outputs)}, s.{st} AS {st} FROM ({inner}) AS s "
        f"LEFT JOIN {d.ident(f'{PREFIX}cls')} AS {d.ident('cl')} ON {d.ident('cl')}.c = s.{st} "
        f"CROSS JOIN {d.ident(f'{PREFIX}marker')} AS {d.ident('mk')}"
    )
    d.execute(query)
    uncovered = int(d.execute(f"SELECT count(*) FROM {target} WHERE {st} = -2")[0][0])
    if plan.suppression.mode == "remove":
        d.execute(f"DELETE FROM {target} WHERE {st} < 0")
    d.drop_column(target, f"{PREFIX}state")
    rows = int(d.execute(f"SELECT count(*) FROM {target}")[0][0])
    return rows, uncovered


def _check_plan(q: _Query, plan: Plan) -> None:
    if sorted(plan.quasi_identifiers) != sorted(q.cols.qis) or sorted(plan.microaggregated) != sorted(q.cols.micro):
        raise DeidError("the plan's quasi-identifiers are not the job's: was the specification changed?")
    if not plan.steps:
        raise DeidError("the plan has no step")


# ---------------------------------------------------------------- verify


def _verify(client: Client, q: _Query, target: str, job_id: str, count_column: str, names: Sequence[str]) -> Verification:
    d = q.d
    cols = [c for c in q.cols.sent]
    exprs = [f"COALESCE(CAST({d.ident(c)} AS {'text' if isinstance(d, _Postgres) else 'VARCHAR'}), '')" for c in cols]
    group = ", ".join(str(i + 1) for i in range(len(exprs)))
    query = f"SELECT {', '.join(exprs)}, count(*) FROM {target} GROUP BY {group}"
    body = _body([*cols, count_column], d.stream(query), "csv")
    return client.verify_job(job_id, body, count_column=count_column)


# ---------------------------------------------------------------- the whole


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


def _count_name(names: Sequence[str]) -> str:
    name, i = "count", 0
    while name in names:
        i += 1
        name = f"count_{i}"
    return name


def _wait(client: Client, job: Job, timeout: float | None, progress: bool | None) -> Job:
    try:
        return client.wait(job, timeout=timeout, progress=progress)
    except KeyboardInterrupt:
        with contextlib.suppress(DeidError):
            client.cancel_job(job.id)
        raise


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
    raw: dict[str, Any] = dict(to_json(spec) if isinstance(spec, JobSpec) else spec)
    if isinstance(spec, JobSpec):
        raw.pop("dataset_id", None)
    src, dst = d.table(source), d.table(target)
    with _transaction(d):
        types = dict(d.columns(source))
        names = list(types)
        cols = _columns(raw, names)
        if any(n.startswith(PREFIX) for n in names):
            raise ValueError(f"source column names may not start with {PREFIX!r}")
        q = _Query(d, src, cols, types, {})
        for c in cols.sent:
            d.text("x", c, types[c])  # refuses unsupported types before any scan
        _check_ranges(q)
        level0, groups, floor = _profile(q, max_groups)
        q.floor = floor
        count_column = _count_name(cols.sent)
        keys = q.keys(floor)
        group = ", ".join(str(i + 1) for i in range(len(keys)))
        freq = f"SELECT {', '.join(keys)}, count(*) FROM {q.from_clause(floor)} GROUP BY {group}"
        ds = client.upload_dataset(_body([*cols.sent, count_column], d.stream(freq), upload_format),
                                   name=f"{PREFIX}frequencies", delimiter=",", count_column=count_column)
        try:
            job_spec = _job_spec(raw, cols, ds.id, floor)
            job = client.submit_job(job_spec)
            job = _wait(client, job, timeout, progress)
            if job.status != "succeeded":
                from .errors import JobFailedError

                raise JobFailedError(job)
            report, plan = client.get_result(job.id), client.get_plan(job.id)
            rows, uncovered = _apply(q, plan, names, dst)
            verification = _verify(client, q, dst, job.id, count_column, names)
            if not verification.passed:
                raise VerificationFailedError(verification, job.id)
        finally:
            if not keep_dataset:
                _forget(client, ds.id)
        _drop_temporary(d, cols, plan)
    warnings = []
    if floor:
        warnings.append(
            f"the frequency table had {level0} rows at level 0, more than max_groups={max_groups}: sent at the "
            f"floor {floor} ({groups} rows)"
        )
    return SqlResult(job, report, plan, floor, level0, groups, uncovered, verification, rows, warnings)


def _job_spec(raw: Mapping[str, Any], cols: _Columns, dataset_id: str, floor: Mapping[str, int]) -> dict[str, Any]:
    """The job on the frequency table: the attributes of its columns only (identifiers and
    copied columns stay in the database), ``data_level`` for the floor."""
    spec = dict(raw)
    spec["dataset_id"] = dataset_id
    attributes = {k: dict(v) for k, v in raw["attributes"].items() if k in cols.sent}
    for col, lvl in floor.items():
        attributes[col]["data_level"] = lvl
    spec["attributes"] = attributes
    return spec


def _forget(client: Client, dataset_id: str) -> None:
    """Deletes the uploaded frequency table (regulated data); a job still using it keeps it."""
    try:
        client.delete_dataset(dataset_id)
    except DeidError:
        pass


def _drop_temporary(d: _Dialect, cols: _Columns, plan: Plan) -> None:
    names = [_htable(i) for i in range(len(cols.qis))] + [f"{PREFIX}m{i}" for i in range(len(plan.quasi_identifiers))]
    names += [f"{PREFIX}{n}" for n in ("pub", "cls", "sup", "marker")]
    for n in names:
        d.execute(f"DROP TABLE IF EXISTS {d.ident(n)}")

