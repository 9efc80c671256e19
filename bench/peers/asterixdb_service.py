"""A client for an AsterixDB 0.9.8 sample cluster on 127.0.0.1: starts and stops it with
asterixdb/server.sh and runs SQL++ through its query service (/query/service).

A statement that outlives its timeout is cancelled on the server (DELETE on
/admin/requests/running with the request's client_context_id) and reported as a timeout, so a
slow query never keeps running behind the next one.
"""

import json
import os
import re
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = "http://127.0.0.1:19002/query/service"
REQUESTS = "http://127.0.0.1:19002/admin/requests/running"
VERSION = "0.9.8"
# AsterixDB prints every datetime with milliseconds; the canonical form (Python's isoformat,
# Cairn's Arrow JSON) leaves a zero fraction out.
_ZERO_MILLIS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.000$")


class QueryTimeout(Exception):
    pass


class QueryFailed(Exception):
    pass


class AsterixDb:
    def __init__(self, install_dir: str):
        self.install_dir = os.path.abspath(install_dir)
        self.home = os.path.join(self.install_dir, f"apache-asterixdb-{VERSION}")
        self.version = f"AsterixDB {VERSION}"

    def _server(self, command: str) -> None:
        subprocess.run(
            ["bash", os.path.join(HERE, "asterixdb", "server.sh"), command, self.install_dir],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        self._server("start")

    def stop(self) -> None:
        self._server("stop")

    def query(self, statement: str, timeout: float) -> list:
        """Runs `statement` (one or more SQL++ statements) and returns the last one's results."""
        context = uuid.uuid4().hex
        body = urllib.parse.urlencode({"statement": statement, "client_context_id": context})
        timed_out = threading.Event()

        def cancel() -> None:
            timed_out.set()
            url = REQUESTS + "?" + urllib.parse.urlencode({"client_context_id": context})
            try:
                urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30)
            except (urllib.error.URLError, OSError):
                pass  # the request may have finished meanwhile

        timer = threading.Timer(timeout, cancel)
        timer.start()
        try:
            request = urllib.request.Request(SERVICE, data=body.encode("utf-8"))
            try:
                with urllib.request.urlopen(request) as response:
                    reply = json.load(response)
            except urllib.error.HTTPError as error:
                reply = json.load(error)
        finally:
            timer.cancel()
        if reply.get("status") != "success":
            if timed_out.is_set():
                raise QueryTimeout(f"cancelled after {timeout} s")
            messages = "; ".join(e.get("msg", "") for e in reply.get("errors", []))
            raise QueryFailed(messages or f"status {reply.get('status')}")
        return [_row(result) for result in reply.get("results", [])]

    def size_bytes(self, dataverse: str) -> int:
        """Bytes of the dataverse's storage on every node (primary and secondary indexes)."""
        total = 0
        data = os.path.join(self.home, "opt", "local", "data")
        for root, _dirs, files in os.walk(data):
            if f"{os.sep}{dataverse}{os.sep}" in root + os.sep and f"{os.sep}storage{os.sep}" in root:
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total


def _row(result) -> list:
    """The columns of one result. The BigFUN queries return each row as an array (`SELECT VALUE
    [a, b]`) because AsterixDB does not keep an object's fields in SELECT order; any other
    value is a one-column row."""
    if isinstance(result, list):
        return [_plain(v) for v in result]
    return [_plain(result)]


def _plain(value):
    if isinstance(value, str):
        match = _ZERO_MILLIS.match(value)
        return match.group(1) if match else value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
