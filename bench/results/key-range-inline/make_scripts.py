"""Writes the loop scripts of README.md: 1,000 BigFUN statements each with fresh parameters.

Usage: python3 make_scripts.py OUT_DIR
  Q1-fresh.sql   a user by a random key (1..1,000,000)
  Q2S-fresh.sql  100 consecutive users from a random key (Q2-S)
  Q7S-fresh.sql  chirps of a random 5.5-hour window grouped by sender (Q7-S, about 100 rows)
"""
import datetime
import pathlib
import random
import sys

out = pathlib.Path(sys.argv[1])
r = random.Random(7)
users = "SELECT id, alias, name, user_since, friend_ids, employment FROM GleambookUsers"
with open(out / "Q1-fresh.sql", "w") as f:
    for _ in range(1000):
        f.write(f"{users} WHERE id = {r.randint(1, 1000000)};\n")
with open(out / "Q2S-fresh.sql", "w") as f:
    for _ in range(1000):
        lo = r.randint(1, 999900)
        f.write(f"{users} WHERE id >= {lo} AND id < {lo + 100};\n")
r = random.Random(11)
start = datetime.datetime(2000, 1, 1)
span = (datetime.datetime(2013, 12, 1) - start).total_seconds()
width = datetime.timedelta(hours=5.5)
q7 = ("SELECT c.user.screen_name AS screen_name, avg(string_length(c.message_text)) AS avg_length "
      "FROM ChirpMessages c WHERE c.send_time >= TIMESTAMP '{}' AND c.send_time < TIMESTAMP '{}' "
      "GROUP BY c.user.screen_name;\n")
with open(out / "Q7S-fresh.sql", "w") as f:
    for _ in range(1000):
        lo = start + datetime.timedelta(seconds=r.uniform(0, span - width.total_seconds()))
        f.write(q7.format(lo.strftime("%Y-%m-%dT%H:%M:%S"), (lo + width).strftime("%Y-%m-%dT%H:%M:%S")))
