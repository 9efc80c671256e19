"""DuckDB side of the SQL benchmark: loads the same Parquet file into a native DuckDB table and
times the same one-column aggregate. Prints one JSON object on stdout."""

import argparse
import json
import time

import duckdb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parquet", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    con = duckdb.connect()  # in-memory database, native table
    con.execute(f"SET threads = {args.threads}")
    started = time.perf_counter()
    con.execute("CREATE TABLE messages AS SELECT * FROM read_parquet(?)", [args.parquet])
    load_seconds = time.perf_counter() - started
    rows = con.execute("SELECT count(*) FROM messages").fetchone()[0]

    query = "SELECT avg(length(message_text)) FROM messages"
    con.execute(query).fetchone()  # warm-up
    times = []
    result = None
    for _ in range(args.runs):
        started = time.perf_counter()
        result = con.execute(query).fetchone()[0]
        times.append(time.perf_counter() - started)

    lookup = con.cursor()
    lookup_times = []
    for i in range(2000):
        started = time.perf_counter()
        lookup.execute("SELECT message_text FROM messages WHERE id = ?", [(i * 7919) % rows]).fetchall()
        lookup_times.append(time.perf_counter() - started)
    lookup_times.sort()

    print(json.dumps({
        "version": duckdb.__version__,
        "rows": rows,
        "load_seconds": load_seconds,
        "aggregate_query": query,
        "aggregate_seconds": times,
        "aggregate_result": result,
        "lookup_p50_us": lookup_times[len(lookup_times) // 2] * 1e6,
        "lookup_p99_us": lookup_times[int(len(lookup_times) * 0.99)] * 1e6,
    }))


if __name__ == "__main__":
    main()
