"""A scratch PostgreSQL server for the peer harnesses: postgres/server.sh (Debian's packages,
installed if missing) started on a fresh data directory on 127.0.0.1, and one autocommit
psycopg connection to it.
"""

import os
import shutil
import subprocess

SERVER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "postgres", "server.sh")


class ScratchPostgres:
    def __init__(self, data_dir, port):
        import psycopg

        self.data_dir = os.path.abspath(data_dir)
        subprocess.run(["bash", SERVER_SCRIPT, "stop", self.data_dir], check=False)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        started = subprocess.run(
            ["bash", SERVER_SCRIPT, "start", self.data_dir, str(port)],
            check=True, stdout=subprocess.PIPE, text=True,
        )
        # `postgres (PostgreSQL) 15.18 (Debian ...)` -> `15.18 (Debian ...)`
        self.version = started.stdout.strip().splitlines()[-1].replace("postgres (PostgreSQL) ", "")
        self.connection = psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
        )

    def size_bytes(self):
        return int(self.connection.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def stop(self, remove_data=False):
        self.connection.close()
        subprocess.run(["bash", SERVER_SCRIPT, "stop", self.data_dir], check=False)
        if remove_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
