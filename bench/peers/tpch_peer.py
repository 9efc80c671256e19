"""TPC-H on a peer system over the files `cairn gen tpch` wrote, for the Cairn TPC-H runner and
the answer tests to compare against: DuckDB (tables loaded into a database file or memory) or
plain DataFusion (the `datafusion` package, querying the Parquet files where they lie). Runs
the queries given as JSON the seeds' way — the whole sequence `--runs` times over — and prints
the last run's answers and every run's times as JSON.

Input (--queries FILE): [{"number": 1, "text": "select ..."}, ...]
Output: {"system": ..., "version": ..., "load_seconds": s, "bytes": stored size or null,
         "queries": [{"number": 1, "rows": [[...], ...], "seconds": [run, ...]}]}
"""

import argparse
import datetime
import decimal
import json
import os
import sys
import time

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def plain(value):
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def table_glob(args, table):
    return os.path.join(args.data, table, f"part-*.{args.format}")


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

    def run(self, text):
        return self.connection.execute(text).fetchall()


class DataFusion:
    def __init__(self, args):
        import datafusion

        self.version = datafusion.__version__
        config = datafusion.SessionConfig().with_target_partitions(args.threads)
        self.context = datafusion.SessionContext(config)
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

    def run(self, text):
        table = self.context.sql(text).to_arrow_table()
        columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
        return list(zip(*columns)) if columns else []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True, choices=["duckdb", "datafusion"])
    parser.add_argument("--data", required=True, help="directory written by cairn gen tpch")
    parser.add_argument("--format", default="parquet", choices=["parquet", "csv"])
    parser.add_argument("--queries", required=True, help="JSON file of queries to run")
    parser.add_argument("--database", help="DuckDB's database file (default: memory)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    started = time.perf_counter()
    system = {"duckdb": DuckDB, "datafusion": DataFusion}[args.system](args)
    load_seconds = time.perf_counter() - started

    with open(args.queries) as f:
        queries = json.load(f)
    answers = [{"number": q["number"], "rows": [], "seconds": []} for q in queries]
    for _ in range(args.runs):
        for query, answer in zip(queries, answers):
            began = time.perf_counter()
            rows = system.run(query["text"])
            answer["seconds"].append(time.perf_counter() - began)
            answer["rows"] = [[plain(v) for v in row] for row in rows]
    json.dump(
        {
            "system": args.system,
            "version": system.version,
            "load_seconds": load_seconds,
            "bytes": system.bytes(),
            "queries": answers,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
