"""Cairn's Flight SQL door from Python: the ADBC Flight SQL driver runs DDL, DML, queries and
prepared statements, and pyarrow holds the results. Prints what it saw as JSON for
tests/flight_sql.rs to check. Usage: flight_adbc.py grpc://127.0.0.1:PORT"""

import json
import sys

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.compute as pc


def main(uri):
    seen = {}
    # Cairn commits every statement on its own, so the connection runs in autocommit mode.
    with flightsql.connect(uri, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR, bucket BIGINT)")
            values = ", ".join(f"({i}, 'item-{i}', {i % 2})" for i in range(50))
            cur.execute(f"INSERT INTO items VALUES {values}")
            seen["inserted"] = cur.rowcount

            cur.execute("SELECT id, name FROM items")
            table = cur.fetch_arrow_table()
            assert isinstance(table, pa.Table)
            seen["count"] = table.num_rows
            seen["sum"] = pc.sum(table["id"]).as_py()

            cur.execute("SELECT name FROM items WHERE id = $1", parameters=(7,))
            seen["lookup"] = cur.fetchone()[0]

            cur.execute("DELETE FROM items WHERE bucket = $1", parameters=(1,))
            seen["deleted"] = cur.rowcount
            cur.execute("SELECT count(*) FROM items")
            seen["after_delete"] = cur.fetchone()[0]

        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        seen["tables"] = sorted(
            table["table_name"]
            for catalog in objects
            for schema in catalog["catalog_db_schemas"] or []
            for table in schema["db_schema_tables"] or []
        )
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1])
