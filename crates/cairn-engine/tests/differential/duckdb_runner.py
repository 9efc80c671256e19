"""DuckDB side of the differential test: loads the test's JSON Lines files into DuckDB tables
with the same column types Cairn declares, runs each query and prints every result as JSON."""

import datetime
import decimal
import json
import sys

import duckdb


def plain(value):
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main() -> None:
    spec = json.load(sys.stdin)
    con = duckdb.connect()
    for table in spec["tables"]:
        columns = ", ".join(f"'{name}': '{sql_type}'" for name, sql_type in table["columns"])
        con.execute(
            f"CREATE TABLE {table['name']} AS SELECT * FROM read_json(?, format = 'newline_delimited', columns = {{{columns}}})",
            [table["path"]],
        )
    results = []
    for query in spec["queries"]:
        rows = con.execute(query).fetchall()
        results.append([[plain(v) for v in row] for row in rows])
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
