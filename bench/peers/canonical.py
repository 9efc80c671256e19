"""The canonical form of a query answer, for comparing answers across systems by checksum.

The same rules as crates/cairn-bench/src/bigfun/canonical.rs (which documents them); the Rust
test crates/cairn-bench/tests/bigfun_canonical.rs runs this module and checks that both sides
produce the same text and checksum.
"""

import datetime
import decimal
import hashlib


def canonical_value(value) -> str:
    if value is None:
        return "~"
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, (int, float, decimal.Decimal)):
        x = float(value)
        if x != x or x in (float("inf"), float("-inf")):
            return {"nan": "NaN", "inf": "inf", "-inf": "-inf"}[repr(x)]
        mantissa, exponent = ("%.8e" % x).split("e")
        return f"{mantissa}e{int(exponent)}"
    if isinstance(value, datetime.datetime):
        return canonical_value(value.isoformat())
    if isinstance(value, datetime.date):
        return canonical_value(value.isoformat())
    if isinstance(value, str):
        return f"s{len(value.encode('utf-8'))}:{value}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "~"
        return "[" + ",".join(sorted(canonical_value(v) for v in value)) + "]"
    if isinstance(value, dict):
        members = sorted((k, v) for k, v in value.items() if not _absent(v))
        return "{" + ",".join(f"{k}={canonical_value(v)}" for k, v in members) + "}"
    raise TypeError(f"no canonical form for {type(value).__name__}: {value!r}")


def _absent(value) -> bool:
    return value is None or (isinstance(value, (list, tuple)) and not value)


def canonical_row(columns) -> str:
    return "|".join(canonical_value(v) for v in columns)


def checksum(rows) -> str:
    """`rows` are canonical row texts, in any order."""
    text = "\n".join(sorted(rows))
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:16]
