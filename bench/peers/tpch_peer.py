"""TPC-H on a peer system over the files `cairn gen tpch` wrote, for the Cairn TPC-H runner and
the answer tests to compare against: DuckDB (tables loaded into a database file or memory),
plain DataFusion (the `datafusion` package, querying the Parquet files where they lie),
PostgreSQL (Debian's, a scratch server on 127.0.0.1 started by postgres/server.sh, the tables
copied in with primary keys, foreign-key and date indexes, ANALYZE) or Spark SQL (PySpark in
local mode on every core, reading the Parquet files). Runs the queries given as JSON the seeds'
way — the whole sequence `--runs` times over — and prints the last run's answers and every
run's times as JSON; a query past --timeout-seconds is cancelled and reported as such.

Input (--queries FILE): [{"number": 1, "text": "select ..."}, ...]
Output: {"system": ..., "version": ..., "load_seconds": s, "bytes": stored size or null,
         "queries": [{"number": 1, "rows": [[...], ...], "seconds": [run or null, ...],
                      "error": null or text}]}
"""

import argparse
import datetime
import decimal
import glob
import io
import json
import os
import sys
import threading
import time

from scratch_postgres import ScratchPostgres

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def plain(value):
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def table_glob(args, table):
    return os.path.join(args.data, table, f"part-*.{args.format}")


class QueryTimeout(Exception):
    pass


class DuckDB:
    def __init__(self, args):
        import duckdb

        self.version = duckdb.__version__
        self.path = args.database or ":memory:"
        if self.path != ":memory:" and os.path.exists(self.path):
            os.remove(self.path)
        self.connection = duckdb.connect(self.path)
        self.connection.execute(f"SET threads = {args.threads}")
        reader = "read_parquet" if args.format == "parquet" else "read_csv_auto"
        for table in TABLES:
            self.connection.execute(
                f"CREATE TABLE {table} AS SELECT * FROM {reader}('{table_glob(args, table)}')"
            )
        self.connection.execute("CHECKPOINT")

    def bytes(self):
        return os.path.getsize(self.path) if self.path != ":memory:" else None

    def run(self, text, timeout):
        return self.connection.execute(text).fetchall()

    def close(self):
        self.connection.close()


class DataFusion:
    def __init__(self, args):
        import datafusion

        self.version = datafusion.__version__
        config = datafusion.SessionConfig().with_target_partitions(args.threads)
        # Without a pool, DataFusion's joins and aggregates grow until the kernel kills the
        # process (SF 10's Q18 passed 24 GB, and so did it with a 12 GiB pool: what the pool
        # counts is about half of what the process holds). With 6 GiB, operators that can
        # spill do, and one that cannot fails its query with a clear error.
        runtime = (
            datafusion.RuntimeEnvBuilder()
            .with_fair_spill_pool(args.datafusion_memory_bytes)
            .with_disk_manager_os()
        )
        self.context = datafusion.SessionContext(config, runtime)
        self.files = []
        for table in TABLES:
            directory = os.path.join(args.data, table)
            self.files += [os.path.join(directory, f) for f in os.listdir(directory)]
            if args.format == "parquet":
                self.context.register_parquet(table, directory, file_extension=".parquet")
            else:
                self.context.register_csv(table, directory, file_extension=".csv")

    def bytes(self):
        return sum(os.path.getsize(f) for f in self.files)

    def run(self, text, timeout):
        table = self.context.sql(text).to_arrow_table()
        columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
        return list(zip(*columns)) if columns else []

    def close(self):
        pass


# The specification's primary keys, and the foreign-key and date-column indexes the seeds'
# PostgreSQL-style systems were given.
PRIMARY_KEYS = {
    "region": ["r_regionkey"],
    "nation": ["n_nationkey"],
    "supplier": ["s_suppkey"],
    "customer": ["c_custkey"],
    "part": ["p_partkey"],
    "partsupp": ["ps_partkey", "ps_suppkey"],
    "orders": ["o_orderkey"],
    "lineitem": ["l_orderkey", "l_linenumber"],
}
# Cairn builds the one of these its planner uses, on lineitem (l_partkey, l_suppkey)
# (crates/cairn-bench/src/tpch/tables.rs, `indexes`).
INDEXES = [
    ("nation", ["n_regionkey"]),
    ("supplier", ["s_nationkey"]),
    ("customer", ["c_nationkey"]),
    ("partsupp", ["ps_suppkey"]),
    ("orders", ["o_custkey"]),
    ("orders", ["o_orderdate"]),
    ("lineitem", ["l_partkey", "l_suppkey"]),
    ("lineitem", ["l_suppkey"]),
    ("lineitem", ["l_shipdate"]),
]


def postgres_type(arrow_type):
    import pyarrow as pa

    if pa.types.is_int64(arrow_type):
        return "BIGINT"
    if pa.types.is_integer(arrow_type):
        return "INTEGER"
    if pa.types.is_floating(arrow_type):
        return "DOUBLE PRECISION"
    if pa.types.is_decimal(arrow_type):
        return f"NUMERIC({arrow_type.precision}, {arrow_type.scale})"
    if pa.types.is_date(arrow_type):
        return "DATE"
    return "TEXT"


class Postgres:
    """A fresh scratch server in --database (a directory), on --port of 127.0.0.1."""

    def __init__(self, args):
        import psycopg
        import pyarrow.csv as arrow_csv
        import pyarrow.parquet as parquet

        if args.format != "parquet":
            raise SystemExit("postgres: the TPC-H peer loads Parquet files only")
        if not args.database:
            raise SystemExit("postgres: --database DIR (the server's data directory) is required")
        self.psycopg = psycopg
        self.server = ScratchPostgres(args.database, args.port)
        self.version = self.server.version
        self.con = self.server.connection
        self.con.execute(f"SET max_parallel_workers_per_gather = {args.threads}")
        for table in TABLES:
            files = sorted(glob.glob(table_glob(args, table)))
            schema = parquet.read_schema(files[0])
            columns = ", ".join(f"{f.name} {postgres_type(f.type)} NOT NULL" for f in schema)
            # Created and filled in one transaction, so COPY can write the rows frozen.
            with self.con.transaction():
                self.con.execute(f"CREATE TABLE {table} ({columns})")
                for file in files:
                    text = io.BytesIO()
                    arrow_csv.write_csv(
                        parquet.read_table(file), text,
                        arrow_csv.WriteOptions(include_header=False),
                    )
                    with self.con.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, FREEZE)") as copy:
                        copy.write(text.getbuffer())
        for table, key in PRIMARY_KEYS.items():
            self.con.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({', '.join(key)})")
        for table, columns in INDEXES:
            self.con.execute(f"CREATE INDEX ON {table} ({', '.join(columns)})")
        self.con.execute("VACUUM ANALYZE")

    def bytes(self):
        return self.server.size_bytes()

    def run(self, text, timeout):
        self.con.execute(f"SET statement_timeout = {int(timeout * 1000)}")
        try:
            return self.con.execute(text).fetchall()
        except self.psycopg.errors.QueryCanceled:
            raise QueryTimeout()

    def close(self):
        # Its size is in the report; the directory itself (GBs from SF 1 up) is not kept.
        self.server.stop(remove_data=True)


class Spark:
    """PySpark in local mode on --threads cores, the Parquet files registered as views."""

    def __init__(self, args):
        import pyspark
        from pyspark.sql import SparkSession

        self.version = pyspark.__version__
        self.spark = (
            SparkSession.builder.master(f"local[{args.threads}]")
            .appName("cairn-tpch")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", args.spark_memory)
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.files = []
        for table in TABLES:
            directory = os.path.join(args.data, table)
            self.files += glob.glob(table_glob(args, table))
            reader = self.spark.read
            frame = reader.parquet(directory) if args.format == "parquet" else reader.csv(directory, header=True, inferSchema=True)
            frame.createOrReplaceTempView(table)

    def bytes(self):
        return sum(os.path.getsize(f) for f in self.files)

    def run(self, text, timeout):
        timed_out = threading.Event()

        def cancel():
            timed_out.set()
            self.spark.sparkContext.cancelAllJobs()

        timer = threading.Timer(timeout, cancel)
        timer.start()
        try:
            return [tuple(row) for row in self.spark.sql(text).collect()]
        except Exception:
            if timed_out.is_set():
                raise QueryTimeout()
            raise
        finally:
            timer.cancel()

    def close(self):
        self.spark.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    parser.add_argument("--data", required=True, help="directory written by cairn gen tpch")
    parser.add_argument("--format", default="parquet", choices=["parquet", "csv"])
    parser.add_argument("--queries", required=True, help="JSON file of queries to run")
    parser.add_argument(
        "--database",
        help="DuckDB's database file (default: memory); PostgreSQL's data directory (required)",
    )
    parser.add_argument("--port", type=int, default=15433, help="PostgreSQL's port on 127.0.0.1")
    parser.add_argument("--spark-memory", default="8g", help="Spark driver memory")
    parser.add_argument(
        "--datafusion-memory-bytes",
        type=int,
        default=6 << 30,
        help="DataFusion's memory pool; past it, operators spill to disk",
    )
    parser.add_argument("--timeout-seconds", type=float, default=600.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    started = time.perf_counter()
    system = SYSTEMS[args.system](args)
    load_seconds = time.perf_counter() - started

    with open(args.queries) as f:
        queries = json.load(f)
    answers = [{"number": q["number"], "rows": None, "seconds": [], "error": None} for q in queries]
    for _ in range(args.runs):
        for query, answer in zip(queries, answers):
            began = time.perf_counter()
            try:
                rows = system.run(query["text"], args.timeout_seconds)
            except QueryTimeout:
                answer["seconds"].append(None)
                answer["error"] = f"timed out after {args.timeout_seconds:g} s"
                continue
            except Exception as error:  # reported per query; the other queries still run
                answer["seconds"].append(None)
                answer["error"] = f"{type(error).__name__}: {error}"
                continue
            answer["seconds"].append(time.perf_counter() - began)
            answer["rows"] = [[plain(v) for v in row] for row in rows]
            # Progress on stderr: if the process dies (the kernel's OOM killer), the runner's
            # error message says how far it got.
            print(f"Q{query['number']}: {answer['seconds'][-1]:.3f} s", file=sys.stderr, flush=True)
    stored = system.bytes()
    system.close()
    json.dump(
        {
            "system": args.system,
            "version": system.version,
            "load_seconds": load_seconds,
            "bytes": stored,
            "queries": answers,
        },
        sys.stdout,
    )


SYSTEMS = {"duckdb": DuckDB, "datafusion": DataFusion, "postgres": Postgres, "spark": Spark}


if __name__ == "__main__":
    main()
