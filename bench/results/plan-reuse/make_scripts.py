"""Writes the loop scripts of README.md: 1,000 BigFUN S statements each, fresh parameters.

Usage: python3 make_scripts.py OUT_DIR
  Q3S.sql .. Q5S.sql   users whose user_since falls in a random 12-hour window (about 100)
  Q6S.sql .. Q8S.sql   chirps whose send_time falls in a random 5.5-hour window (about 100)
  Q12IXS.sql           Q12-IX-S: 100 users' messages of one day (a join: planned in full)
The statements are the workload's (bench/bigfun/queries/cairn/) with the parameters filled in.
"""
import datetime
import pathlib
import random
import sys

out = pathlib.Path(sys.argv[1])
queries = pathlib.Path(__file__).resolve().parents[2] / "bigfun" / "queries" / "cairn"
start = datetime.datetime(2000, 1, 1)
span = (datetime.datetime(2013, 12, 1) - start).total_seconds()


def body(name):
    lines = (queries / name).read_text().splitlines()
    return " ".join(" ".join(l for l in lines if not l.startswith("--")).split())


def window(r, hours):
    width = datetime.timedelta(hours=hours)
    lo = start + datetime.timedelta(seconds=r.uniform(0, span - width.total_seconds()))
    fmt = "%Y-%m-%dT%H:%M:%S"
    return lo.strftime(fmt), (lo + width).strftime(fmt)


def write(name, template, make):
    r = random.Random(name)
    with open(out / name, "w") as f:
        for _ in range(1000):
            text = template
            for key, value in make(r).items():
                text = text.replace("{{" + key + "}}", value)
            f.write(text + ";\n")


def users(r):
    lo, hi = window(r, 12)
    return {"lo": lo, "hi": hi}


def chirps(r):
    lo, hi = window(r, 5.5)
    return {"lo": lo, "hi": hi}


def join(r):
    lo, hi = window(r, 12)
    message_lo, message_hi = window(r, 24)
    return {"lo": lo, "hi": hi, "message_lo": message_lo, "message_hi": message_hi}


for number in (3, 4, 5):
    write(f"Q{number}S.sql", body(f"Q0{number}.sql"), users)
for number in (6, 7, 8):
    write(f"Q{number}S.sql", body(f"Q0{number}.sql"), chirps)
write("Q12IXS.sql", body("Q12.sql"), join)
