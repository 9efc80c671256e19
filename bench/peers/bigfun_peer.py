"""Runs a BigFUN plan written by `cairn-bench bigfun` on one peer system and reports timings,
answer sizes and answer checksums as JSON.

The plan names the system, its setup scripts (load, indexes) and the cases; every run's SQL is
already filled in by the Rust driver, so all systems answer the same parameter sets. Times are
end to end as the client sees them: execute plus fetching every row. The checksum (canonical.py)
is computed after the clock stops. After a run times out, the case's remaining runs are
reported as timeouts without being run: one says what the case costs.

Usage: python bigfun_peer.py PLAN.json OUT.json
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from canonical import canonical_row, checksum  # noqa: E402
from scratch_postgres import ScratchPostgres  # noqa: E402
import asterixdb_service  # noqa: E402
import bigfun_adm  # noqa: E402


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class DuckDbPeer:
    def __init__(self, plan):
        import duckdb

        self.duckdb = duckdb
        self.version = f"DuckDB {duckdb.__version__}"
        self.path = plan["database"]
        for leftover in (self.path, self.path + ".wal"):
            if os.path.exists(leftover):
                os.remove(leftover)
        self.con = duckdb.connect(self.path)
        self.con.execute(f"SET threads = {int(plan.get('threads', 2))}")

    def execute(self, sql: str, timeout: float):
        """Runs `sql` (one or more statements) and returns the last one's rows."""
        timer = threading.Timer(timeout, self.con.interrupt)
        timer.start()
        try:
            self.con.execute(sql)
            if self.con.description:
                return self.con.fetchall()
            # A change: DuckDB answers it with no rows; its count is not reported.
            return []
        finally:
            timer.cancel()

    def is_timeout(self, error: Exception) -> bool:
        return isinstance(error, self.duckdb.InterruptException)

    def size_bytes(self) -> int:
        self.con.execute("CHECKPOINT")
        return os.path.getsize(self.path)

    def close(self) -> None:
        self.con.close()


class PostgresPeer:
    """A scratch server started by postgres/server.sh in a fresh data directory, reached over
    TCP on 127.0.0.1 with psycopg (autocommit: every statement is its own transaction)."""

    def __init__(self, plan):
        import psycopg

        self.psycopg = psycopg
        self.server = ScratchPostgres(plan["database"], int(plan.get("port", 15432)))
        self.version = "PostgreSQL " + self.server.version
        self.con = self.server.connection
        self.con.execute(f"SET max_parallel_workers_per_gather = {int(plan.get('threads', 2))}")
        self.timeout = None

    def execute(self, sql: str, timeout: float):
        # Set only when it changes, so the timed statement is one round trip, as for the others.
        if timeout != self.timeout:
            self.con.execute(f"SET statement_timeout = {int(timeout * 1000)}")
            self.timeout = timeout
        cursor = self.con.execute(sql)
        return cursor.fetchall() if cursor.description else cursor.rowcount

    def is_timeout(self, error: Exception) -> bool:
        return isinstance(error, self.psycopg.errors.QueryCanceled)

    def size_bytes(self) -> int:
        return self.server.size_bytes()

    def close(self) -> None:
        self.server.stop()


class AsterixDbPeer:
    """AsterixDB's sample cluster, installed and started by asterixdb/server.sh; the BigFUN
    data lives in dataverse `bigfun`, dropped and loaded again by each variant's load.sql."""

    DATAVERSE = "bigfun"

    def __init__(self, plan):
        self.service = asterixdb_service.AsterixDb(plan["database"])
        self.version = self.service.version
        # The bulk loader reads ADM, written once per generated data set and kept beside it.
        log(f"{plan['system']}: converting the JSON Lines to ADM (once per data set)")
        bigfun_adm.convert(plan["data_dir"], os.path.join(plan["data_dir"], "adm"))
        self.service.start()

    def execute(self, sql: str, timeout: float):
        return self.service.query(sql, timeout)

    def is_timeout(self, error: Exception) -> bool:
        return isinstance(error, asterixdb_service.QueryTimeout)

    def size_bytes(self) -> int:
        return self.service.size_bytes(self.DATAVERSE)

    def close(self) -> None:
        self.service.stop()


PEERS = {
    "duckdb": DuckDbPeer,
    "postgres": PostgresPeer,
    "asterixdb": AsterixDbPeer,
    "asterixdb-keyonly": AsterixDbPeer,
}


def main() -> None:
    plan_path, out_path = sys.argv[1], sys.argv[2]
    with open(plan_path) as f:
        plan = json.load(f)
    peer = PEERS[plan["system"]](plan)
    timeout = float(plan["timeout_seconds"])
    report = {"system": plan["system"], "version": peer.version, "setup": [], "cases": []}

    try:
        for step in plan["setup"]:
            log(f"{plan['system']}: {step['name']}")
            started = time.perf_counter()
            peer.execute(step["statements"], float(step.get("timeout_seconds", 24 * 3600)))
            report["setup"].append({"name": step["name"], "seconds": time.perf_counter() - started})
        report["size_bytes"] = peer.size_bytes()

        for case in plan["cases"]:
            if case.get("before"):
                peer.execute(case["before"], 24 * 3600)
            runs = []
            for run in case["runs"]:
                outcome = {"warmup": run["warmup"]}
                if any(r.get("timed_out") for r in runs):
                    # One timeout says what the case costs; the other runs would only repeat it.
                    runs.append({**outcome, "seconds": timeout, "timed_out": True})
                    continue
                started = time.perf_counter()
                try:
                    rows = peer.execute(run["sql"], timeout)
                    outcome["seconds"] = time.perf_counter() - started
                    if isinstance(rows, int):
                        # A change without rows: the records it changed.
                        outcome["rows"] = rows
                    else:
                        outcome["rows"] = len(rows)
                        outcome["checksum"] = checksum([canonical_row(r) for r in rows])
                except Exception as error:  # reported per run; the plan goes on
                    outcome["seconds"] = time.perf_counter() - started
                    if peer.is_timeout(error):
                        outcome["timed_out"] = True
                    else:
                        outcome["error"] = f"{type(error).__name__}: {error}"[:2000]
                runs.append(outcome)
            log(f"{plan['system']}: {case['label']} done")
            report["cases"].append({"label": case["label"], "runs": runs})
    finally:
        peer.close()

    with open(out_path, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
