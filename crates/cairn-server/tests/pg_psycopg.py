"""Cairn's PostgreSQL door from psycopg: parameterized queries and changes over the extended
protocol, an error that leaves the connection usable, and the refusal to roll back a change.
Prints what it saw as JSON for tests/pg_wire.rs to check. Usage: pg_psycopg.py PORT TOKEN"""

import json
import sys

import psycopg


def main(port, token):
    seen = {}
    dsn = f"host=127.0.0.1 port={port} user=cairn dbname=cairn password={token} sslmode=disable"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id BIGINT PRIMARY KEY, name VARCHAR, score DOUBLE)")
        with conn.cursor() as cur:
            inserted = 0
            for i in range(20):
                cur.execute(
                    "INSERT INTO users VALUES (%s, %s, %s)", (i, f"user-{i}", (i % 4) * 1.25)
                )
                inserted += cur.rowcount
            seen["inserted"] = inserted

            cur.execute("SELECT id, name, score FROM users WHERE id = %s", (7,))
            seen["lookup"] = list(cur.fetchone())
            cur.execute("SELECT count(*) FROM users WHERE id >= %s AND id < %s", (10, 15))
            seen["range"] = cur.fetchone()[0]

            cur.execute("UPDATE users SET name = %s WHERE id = %s", ("renamed", 3))
            cur.execute("SELECT name FROM users WHERE id = 3")
            seen["updated_name"] = cur.fetchone()[0]

            cur.execute("DELETE FROM users WHERE id %% 2 = %s", (1,))
            seen["deleted"] = cur.rowcount
            cur.execute("SELECT count(*) FROM users")
            seen["remaining"] = cur.fetchone()[0]

            try:
                cur.execute("SELECT * FROM missing_table")
            except psycopg.Error as e:
                seen["error"] = str(e)
            cur.execute("SELECT 1")
            assert cur.fetchone()[0] == 1

    # Without autocommit psycopg opens a transaction; Cairn commits each statement, so a
    # rollback after a change is refused rather than silently not undoing it.
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO users VALUES (100, 'late', 0.0)")
        try:
            conn.rollback()
        except psycopg.Error as e:
            seen["rollback_refused"] = str(e)
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
