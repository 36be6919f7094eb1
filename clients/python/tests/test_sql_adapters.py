"""deid_client.sql on real engines: PostgreSQL 15 (a database created and dropped for this module;
$DEID_TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres) and DuckDB (in memory).

For each engine and table, the released table equals ``deid anonymize --output`` (the CLI at
DEID_BIN) on the same data exported by deid's typed→text rule — as multisets — and deid's
verification passes; a broken apply is caught by verification; rows the plan does not cover
are suppressed and counted. The rule is written here again in Python (no code shared with the
module's SQL; adapter_cases.py)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import unicodedata
import uuid
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Sequence

import pytest

from deid_client import Client
from deid_client import sql as dsql
from deid_client._adapter import columns

from adapter_cases import ADULT_QIS, FLOATS, FLOATS32, adult_rows, adult_spec, cli_output, float_rule, generated, generated_spec, plans_without, rule

psycopg = pytest.importorskip("psycopg")
duckdb = pytest.importorskip("duckdb")

PG_URL = os.environ.get("DEID_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")


# ---------------------------------------------------------------- engines


class Engine:
    """A database with a table loader, for one test module."""

    name: str
    conn: Any

    def load(self, table: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def leftovers(self) -> list[str]:
        raise NotImplementedError

    def exists(self, table: str) -> bool:
        raise NotImplementedError


class Postgres(Engine):
    name = "postgres"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def load(self, table: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[Sequence[Any]]) -> None:
        from psycopg import sql

        with self.conn.transaction():
            cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(pg)) for n, pg, _ in columns)
            self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
            self.conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(table), cols))
            with self.conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as copy:
                for r in rows:
                    copy.write_row(r)

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        from psycopg import sql

        with self.conn.transaction():
            return list(self.conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))).fetchall())

    def drop(self, table: str) -> None:
        from psycopg import sql

        with self.conn.transaction():
            self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    def exists(self, table: str) -> bool:
        with self.conn.transaction():
            return bool(self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", [f'"{table}"']).fetchone()[0])

    def leftovers(self) -> list[str]:
        """Tables of the adapter's runs left in the database (temporary ones end with the
        session; the apply's unlogged tables must be dropped by the run)."""
        with self.conn.transaction():
            rows = self.conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'deid\\_%'").fetchall()
        return [r[0] for r in rows]


class DuckDB(Engine):
    name = "duckdb"

    def __init__(self) -> None:
        self.conn = duckdb.connect()

    def load(self, table: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[Sequence[Any]]) -> None:
        q = '"' + table + '"'
        self.conn.execute(f"DROP TABLE IF EXISTS {q}")
        self.conn.execute(f"CREATE TABLE {q} ({', '.join(f'{json.dumps(n)} {duck}' for n, _, duck in columns)})")
        self.conn.executemany(f"INSERT INTO {q} VALUES ({', '.join('?' for _ in columns)})", [list(r) for r in rows])

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(f'SELECT * FROM "{table}"').fetchall())

    def drop(self, table: str) -> None:
        self.conn.execute(f'DROP TABLE IF EXISTS "{table}"')

    def exists(self, table: str) -> bool:
        return bool(self.conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0])

    def leftovers(self) -> list[str]:
        rows = self.conn.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND table_name LIKE 'deid\\_%' ESCAPE '\\'").fetchall()
        return [r[0] for r in rows]


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A database of its own for this module, dropped at the end."""
    name = f"deid_sql_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_URL.rsplit("/", 1)[0] + "/" + name
    yield url
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["postgres", "duckdb"])
def engine(request: pytest.FixtureRequest, pg_database: str) -> Iterator[Engine]:
    if request.param == "postgres":
        conn = psycopg.connect(pg_database)
        yield Postgres(conn)
        conn.close()
    else:
        e = DuckDB()
        yield e
        e.conn.close()


def released(engine: Engine, table: str) -> Counter[tuple[str, ...]]:
    return Counter(tuple(rule(v) for v in r) for r in engine.rows(table))


# ---------------------------------------------------------------- adult


def load_adult(engine: Engine) -> tuple[list[str], list[list[Any]]]:
    header, rows = adult_rows()
    engine.load("adult", [(c, "integer" if c == "age" else "text", "INTEGER" if c == "age" else "VARCHAR") for c in header], rows)
    return header, rows


@pytest.mark.parametrize("grouping", ["grouped", "ungrouped"])
def test_adult_equals_the_cli(engine: Engine, client: Client, tmp_path: Path, grouping: str,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    # Grouped in the database or sent ungrouped (each row counting 1), the release is the same.
    for dialect in (dsql._Postgres, dsql._DuckDB):
        monkeypatch.setattr(dialect, "mostly_distinct", lambda self, q, n: grouping == "ungrouped")
    header, rows = load_adult(engine)
    engine.drop("adult_out")
    spec = adult_spec()
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_out", spec, progress=False)
    assert result.verification.passed
    assert result.floor == {} and result.uncovered_rows == 0
    assert result.report.rows == len(rows)
    # No floor: the frequency table was streamed as it was computed; grouped, its rows are the
    # distinct tuples of the columns sent (the quasi-identifiers and the sensitive column).
    sent = [i for i, c in enumerate(header) if spec["attributes"].get(c, {}).get("type") in ("quasi_identifying", "sensitive")]
    distinct = len({tuple(r[i] for i in sent) for r in rows})
    assert distinct < len(rows)
    assert result.groups == result.groups_level0 == (distinct if grouping == "grouped" else len(rows))
    expected = cli_output(tmp_path, header, rows, spec)
    assert released(engine, "adult_out") == expected
    assert result.rows_written == sum(expected.values())
    assert all(len(r) == len(header) - 1 for r in engine.rows("adult_out"))  # the identifier dropped
    assert engine.leftovers() == []  # the apply's tables are dropped


def test_postgres_groups_without_workers_and_applies_with_them(pg_database: str, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # The frequency table's GROUP BY runs without parallel workers (most tuples distinct), the
    # apply with the session's setting.
    conn = psycopg.connect(pg_database)
    engine = Postgres(conn)
    load_adult(engine)
    engine.drop("adult_workers")
    seen: dict[str, str] = {}
    show = "SHOW max_parallel_workers_per_gather"
    upload, apply = dsql.uploader, dsql._apply

    def recording_uploader(*a: Any) -> Any:
        seen["group"] = conn.execute(show).fetchone()[0]
        return upload(*a)

    def recording_apply(*a: Any) -> Any:
        seen["apply"] = conn.execute(show).fetchone()[0]
        return apply(*a)

    monkeypatch.setattr(dsql, "uploader", recording_uploader)
    monkeypatch.setattr(dsql, "_apply", recording_apply)
    session = conn.execute(show).fetchone()[0]
    conn.rollback()
    result = dsql.anonymize_table(client, conn, "adult", "adult_workers", adult_spec(), progress=False)
    assert result.verification.passed
    assert seen == {"group": "0", "apply": session} and session != "0"
    conn.close()


def test_postgres_sends_mostly_distinct_rows_ungrouped(pg_database: str) -> None:
    # A sample decides: distinct tuples are sent as they are, tuples repeated
    # twenty times are grouped first; small tables are sampled whole.
    with psycopg.connect(pg_database, autocommit=True) as conn:
        d = dsql._Postgres(conn)
        cols = columns({"attributes": {"a": {"type": "quasi_identifying"}, "b": {"type": "sensitive"}}}, ["a", "b"], "t")
        for rows, expr, expected in [(20000, "g", True), (300000, "g", True), (300000, "g % 15000", False),
                                     (20000, "g % 19000", True), (20000, "g % 18000", False)]:
            conn.execute("DROP TABLE IF EXISTS sample_rows")
            conn.execute(f"CREATE TABLE sample_rows AS SELECT ({expr})::text AS a, 'x' AS b FROM generate_series(1, {rows}) AS g")
            q = dsql._Query(d, "sample_rows", cols, {"a": "text", "b": "text"}, {})
            assert d.mostly_distinct(q, rows) is expected, (rows, expr)
        conn.execute("DROP TABLE sample_rows")


def test_duckdb_uploads_parquet_it_writes_and_removes(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = DuckDB()
    load_adult(engine)
    sent: list[Any] = []
    upload = dsql.uploader

    def recording_uploader(*a: Any) -> Any:
        post = upload(*a)

        def recorded(data: Any) -> Any:
            sent.append(data)
            assert isinstance(data, str) and data.endswith(".parquet") and os.path.exists(data)
            return post(data)

        return recorded

    monkeypatch.setattr(dsql, "uploader", recording_uploader)
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_parquet", adult_spec(), progress=False)
    assert result.verification.passed and len(sent) == 1
    assert not os.path.exists(sent[0])  # the frequency table does not outlive the upload
    engine.conn.close()


def test_postgres_views_are_grouped_not_sampled(pg_database: str, client: Client, tmp_path: Path) -> None:
    # A view cannot be sampled: its frequency table is grouped, in the same transaction.
    conn = psycopg.connect(pg_database)
    engine = Postgres(conn)
    header, rows = load_adult(engine)
    conn.execute("CREATE OR REPLACE VIEW adult_view AS SELECT * FROM adult")
    conn.commit()
    engine.drop("adult_from_view")
    spec = adult_spec()
    try:
        result = dsql.anonymize_table(client, conn, "adult_view", "adult_from_view", spec, progress=False)
        assert result.verification.passed and result.groups < len(rows)  # grouped
        assert released(engine, "adult_from_view") == cli_output(tmp_path, header, rows, spec)
    finally:
        conn.rollback()
        conn.execute("DROP VIEW IF EXISTS adult_view")  # the other tests reload the table
        conn.commit()
        conn.close()


def test_adult_at_a_floor_equals_the_cli_with_min_levels(engine: Engine, client: Client, tmp_path: Path) -> None:
    header, rows = load_adult(engine)
    engine.drop("adult_floor")
    spec = adult_spec()
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_floor", spec, max_groups=400, progress=False)
    assert result.floor and result.groups <= 400 < result.groups_level0
    assert result.warnings and "floor" in result.warnings[0]
    assert result.verification.passed
    cli_spec = json.loads(json.dumps(spec))
    for col, level in result.floor.items():
        cli_spec["attributes"][col]["min_level"] = level
    assert released(engine, "adult_floor") == cli_output(tmp_path, header, rows, cli_spec)


def test_a_broken_apply_is_caught_by_verify(engine: Engine, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    load_adult(engine)
    engine.drop("adult_broken")

    def original_value(q: Any, i: int, key: str, published: str) -> str:  # the maps ignored
        return key

    monkeypatch.setattr(dsql, "_qi_output", original_value)
    with pytest.raises(dsql.VerificationFailedError) as e:
        dsql.anonymize_table(client, engine.conn, "adult", "adult_broken", adult_spec(), progress=False)
    assert not e.value.verification.passed
    assert not engine.exists("adult_broken")  # rolled back: nothing written
    assert engine.leftovers() == []  # nor the apply's tables


def test_a_marker_with_quotes_and_backslashes_is_written_as_it_is(engine: Engine, client: Client, tmp_path: Path) -> None:
    # The marker is a constant of the apply's SQL: quoting must keep it whole and inert.
    header, rows = load_adult(engine)
    engine.drop("adult_marker")
    spec = adult_spec(suppression_marker="it's \\' -- *")
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_marker", spec, progress=False)
    assert result.verification.passed
    out = released(engine, "adult_marker")
    assert out == cli_output(tmp_path, header, rows, spec)
    assert any("it's \\' -- *" in r for r in out)


def test_without_a_model_on_sensitive_values_verify_groups_by_the_quasi_identifiers(engine: Engine, client: Client, tmp_path: Path) -> None:
    # No model reads salary-class: verification sends it only as "the marker or not", so its
    # table has a row per output class (and the masked block); the release is unchanged.
    header, rows = load_adult(engine)
    engine.drop("adult_k")
    spec = adult_spec(privacy=["k-anonymity(k=5)"], suppression_limit=0.05)
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_k", spec, progress=False)
    assert result.verification.passed
    out = released(engine, "adult_k")
    assert out == cli_output(tmp_path, header, rows, spec)
    names = [c for c in header if c != "native-country"]
    qi, s = [names.index(c) for c in ADULT_QIS], names.index("salary-class")
    classes = {tuple(r[i] for i in qi) + (r[s] == "*",) for r in out}
    assert result.verification.released_rows == len(classes) < len({tuple(r[i] for i in qi) + (r[s],) for r in out})
    assert result.verification.suppressed_records == sum(n for r, n in out.items() if r[s] == "*")

    # What is left of the sensitive value still tells the masked block from a class: a row of
    # masked quasi-identifiers with its salary shown is a class of one, which fails k = 5.
    d = dsql._dialect(engine.conn)
    cols = columns(spec, header, "test")
    q = SimpleNamespace(d=d, cols=cols)
    for salary, passes in (("<=50K", False), ("*", True)):
        engine.drop("adult_k_extra")
        with contextlib.nullcontext() if engine.name == "duckdb" else engine.conn.transaction():
            d.execute(f'CREATE TABLE "adult_k_extra" AS SELECT * FROM "adult_k"')
            d.execute(f'INSERT INTO "adult_k_extra" VALUES ({", ".join("?" if engine.name == "duckdb" else "%s" for _ in names)})',
                      [salary if c == "salary-class" else "*" for c in names])
            verification = dsql._verify(client, q, '"adult_k_extra"', result.job.id, dsql.count_name(cols.sent), ("*", ""))  # type: ignore[arg-type]
        assert verification.passed is passes, salary
        assert verification.suppressed_records == result.verification.suppressed_records + passes


def test_uncovered_rows_are_suppressed_and_counted(engine: Engine, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    header, rows = load_adult(engine)
    engine.drop("adult_uncovered")
    ages = Counter(r[header.index("age")] for r in rows)

    plans_without(monkeypatch, "age", "90")  # a plan made on data without age 90
    result = dsql.anonymize_table(client, engine.conn, "adult", "adult_uncovered", adult_spec(), progress=False)
    assert result.uncovered_rows == ages[90] > 0
    assert result.verification.passed
    out = engine.rows("adult_uncovered")
    age = [c for c in header if c != "native-country"].index("age")
    assert sum(1 for r in out if r[age] == "*") >= ages[90]


# ---------------------------------------------------------------- generated types


@pytest.mark.parametrize("local", [False, True], ids=["global", "local"])
def test_typed_columns_equal_the_cli(engine: Engine, client: Client, tmp_path: Path, local: bool) -> None:
    columns, rows = generated()
    engine.load("gen", columns, rows)
    engine.drop("gen_out")
    extra = {"local": {"iterations": 4}, "suppression_limit": 0.0} if local else {}
    spec = generated_spec(rows, **extra)
    result = dsql.anonymize_table(client, engine.conn, "gen", "gen_out", spec, progress=False)
    assert result.verification.passed and result.uncovered_rows == 0
    if local:
        assert len(result.plan.steps) > 1
    header = [c for c, _, _ in columns]
    assert released(engine, "gen_out") == cli_output(tmp_path, header, rows, spec)


def test_plans_too_wide_for_integer_keys_join_on_the_texts(engine: Engine, client: Client, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Output tuples join the plan's tuples on one integer key unless it would overflow; then on
    # the texts, with the same release (local generalization: several steps).
    monkeypatch.setattr(dsql._Codes, "of", staticmethod(lambda plan: None))
    columns, rows = generated()
    engine.load("gen_text", columns, rows)
    engine.drop("gen_text_out")
    spec = generated_spec(rows, local={"iterations": 4}, suppression_limit=0.0)
    result = dsql.anonymize_table(client, engine.conn, "gen_text", "gen_text_out", spec, progress=False)
    assert result.verification.passed and len(result.plan.steps) > 1
    header = [c for c, _, _ in columns]
    assert released(engine, "gen_text_out") == cli_output(tmp_path, header, rows, spec)


def test_integer_keys_overflow_to_none() -> None:
    # 63 bits: ten quasi-identifiers of 80 outputs need 64 bits, of 60 outputs 60.
    def plan(outputs: int) -> Any:  # what _Codes reads of a plan: its steps' maps
        maps = [{str(v): str(v) for v in range(outputs)} for _ in range(10)]
        return SimpleNamespace(steps=[SimpleNamespace(maps=maps)])

    assert dsql._Codes.of(plan(80)) is None
    codes = dsql._Codes.of(plan(60))
    assert codes is not None and codes.strides[0][9] == 60 ** 9
    assert codes.key(0, ["9"] * 10) == 60 ** 10 - 1  # "9" sorts last and codes.key(0, ["60"] + ["0"] * 9) is None


def test_small_maps_share_a_table() -> None:
    # Smallest maps first, while the combinations (times the steps) stay within 65,536 rows; a
    # larger map has a table of its own. Every quasi-identifier is in exactly one group.
    sizes = [100_000, 100, 2, 50, 24, 210, 17, 6, 30, 6]

    def plan(steps: int) -> Any:  # what _map_groups reads of a plan: its steps' maps
        maps = [{str(v): "*" for v in range(n)} for n in sizes]
        return SimpleNamespace(quasi_identifiers=[str(i) for i in range(len(sizes))],
                               steps=[SimpleNamespace(maps=maps) for _ in range(steps)])

    assert dsql._map_groups(plan(1)) == [[2, 4, 6, 7, 9], [3, 8], [1, 5], [0]]
    for steps in (1, 2, 40):
        groups = dsql._map_groups(plan(steps))
        assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
        for g in groups:
            assert len(g) == 1 or steps * math.prod(sizes[i] for i in g) <= 65_536, (steps, g)
    assert len(dsql._map_groups(plan(40))) > 4


def test_nfc_and_nfd_are_different_values(engine: Engine, client: Client) -> None:
    columns, rows = generated()
    engine.load("gen_nf", columns, rows)
    engine.drop("gen_nf_out")
    result = dsql.anonymize_table(client, engine.conn, "gen_nf", "gen_nf_out", generated_spec(rows), progress=False)
    city = result.plan.quasi_identifiers.index("city")
    keys = set(result.plan.steps[0].maps[city])
    assert {"Zürich", unicodedata.normalize("NFD", "Zürich"), ""} <= keys and len(keys) == 5


def test_bad_input_is_refused_before_any_upload(engine: Engine, client: Client) -> None:
    columns, rows = generated()
    engine.load("gen_bad", columns, rows)
    with pytest.raises(ValueError, match="spec.attributes.nope"):
        dsql.anonymize_table(client, engine.conn, "gen_bad", "x", {"attributes": {"nope": {"type": "sensitive"}}})
    with pytest.raises(ValueError, match="spec.dataset_id"):
        dsql.anonymize_table(client, engine.conn, "gen_bad", "x", {**generated_spec(rows), "dataset_id": "d"})
    with pytest.raises(TypeError, match="psycopg 3 connection"):
        dsql.anonymize_table(client, object(), "gen_bad", "x", generated_spec(rows))


@pytest.mark.parametrize("bits", [64, 32])
def test_floats_are_written_by_the_rule(engine: Engine, bits: int) -> None:
    values = FLOATS if bits == 64 else FLOATS32
    typ = {("postgres", 64): "double precision", ("postgres", 32): "real", ("duckdb", 64): "DOUBLE",
           ("duckdb", 32): "FLOAT"}[(engine.name, bits)]
    engine.load("floats", [("i", "integer", "INTEGER"), ("v", typ, typ)], list(enumerate(values)))
    if engine.name == "postgres":  # the adapter sets the shortest text itself
        with engine.conn.transaction():
            engine.conn.execute("SET extra_float_digits = 0")
    d = dsql._dialect(engine.conn)
    with dsql._transaction(d):
        got = d.execute(f"SELECT COALESCE({d.text('v', 'v', typ)}, '') FROM floats ORDER BY i")
    assert [r[0] for r in got] == ["" if v is None else float_rule(v, bits) for v in values]
