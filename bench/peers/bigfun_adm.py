"""Writes BigFUN's generated JSON Lines as ADM, the text format AsterixDB's bulk loader reads.

AsterixDB's JSON parser cannot build multisets (`{{ }}`) and does not turn strings into
datetimes or arrays into points, so the nested datasets of BIGFUN.md §1 are rewritten with
ADM's constructors: `datetime("...")`, `date("...")`, `point("x,y")` and `{{ ... }}`. The
values are unchanged; only their spelling is. A converted file is written next to a `.tmp`
name and renamed when complete, so an interrupted conversion is redone, never half-used.

Usage: python bigfun_adm.py JSON_DIR ADM_DIR
"""

import json
import os
import sys

DATASETS = ("GleambookUsers", "GleambookMessages", "ChirpMessages")


def _string(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _point(xy) -> str:
    x, y = xy
    return f'point("{float(x)!r},{float(y)!r}")'


def _datetime(text: str) -> str:
    return f'datetime("{text}")'


def _date(text: str) -> str:
    return f'date("{text}")'


def _multiset(items) -> str:
    return "{{" + ",".join(_string(item) for item in items) + "}}"


def _object(members) -> str:
    """`members` are (name, ADM text) pairs; a None text leaves the field out (absent)."""
    return "{" + ",".join(f'"{name}":{text}' for name, text in members if text is not None) + "}"


def user(record) -> str:
    employment = ",".join(
        _object(
            [
                ("organization_name", _string(e["organization_name"])),
                ("start_date", _date(e["start_date"])),
                ("end_date", _date(e["end_date"]) if e.get("end_date") is not None else None),
            ]
        )
        for e in record["employment"]
    )
    return _object(
        [
            ("id", str(record["id"])),
            ("alias", _string(record["alias"])),
            ("name", _string(record["name"])),
            ("user_since", _datetime(record["user_since"])),
            ("friend_ids", _multiset(record["friend_ids"])),
            ("employment", f"[{employment}]"),
        ]
    )


def message(record) -> str:
    in_response_to = record.get("in_response_to")
    return _object(
        [
            ("message_id", str(record["message_id"])),
            ("author_id", str(record["author_id"])),
            ("in_response_to", str(in_response_to) if in_response_to is not None else None),
            ("sender_location", _point(record["sender_location"])),
            ("send_time", _datetime(record["send_time"])),
            ("message", _string(record["message"])),
        ]
    )


def chirp(record) -> str:
    return _object(
        [
            ("chirpid", str(record["chirpid"])),
            ("user", _string(record["user"])),
            ("sender_location", _point(record["sender_location"])),
            ("send_time", _datetime(record["send_time"])),
            ("referred_topics", _multiset(record["referred_topics"])),
            ("message_text", _string(record["message_text"])),
        ]
    )


CONVERTERS = {"GleambookUsers": user, "GleambookMessages": message, "ChirpMessages": chirp}


def convert(json_dir: str, adm_dir: str) -> None:
    """Converts every dataset whose ADM file is missing; finished files are kept."""
    os.makedirs(adm_dir, exist_ok=True)
    for dataset in DATASETS:
        target = os.path.join(adm_dir, f"{dataset}.adm")
        if os.path.exists(target):
            continue
        source = os.path.join(json_dir, f"{dataset}.json")
        to_adm = CONVERTERS[dataset]
        partial = target + ".tmp"
        with open(source, encoding="utf-8") as lines, open(partial, "w", encoding="utf-8") as out:
            for number, line in enumerate(lines, start=1):
                try:
                    out.write(to_adm(json.loads(line)))
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{source} line {number}: {error}") from error
                out.write("\n")
        os.replace(partial, target)


if __name__ == "__main__":
    convert(sys.argv[1], sys.argv[2])
