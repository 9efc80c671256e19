"""Writes the loop scripts of README.md: 500 BigFUN Q10/Q11 statements each, words drawn as
the driver draws them (S: the rare tier's Lumia and XPeria; M: the medium tier's Galaxy and
Kindle, BIGFUN.md §3).

Usage: python3 make_scripts.py OUT_DIR   (writes Q10S.sql, Q10M.sql, Q11S.sql, Q11M.sql)
"""
import pathlib
import random
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
r = random.Random(7)
words = {"S": ["Lumia", "XPeria"], "M": ["Galaxy", "Kindle"]}
queries = {
    "Q10": "SELECT send_time, message_text FROM ChirpMessages "
    "WHERE contains_word(message_text, '{w}') ORDER BY send_time DESC LIMIT 10;",
    "Q11": "SELECT send_time, message_text FROM ChirpMessages "
    "WHERE edit_distance_contains(message_text, '{w}', 1) ORDER BY send_time DESC LIMIT 10;",
}
for name, template in queries.items():
    for version in "SM":
        with open(out / f"{name}{version}.sql", "w") as f:
            for _ in range(500):
                f.write(template.format(w=r.choice(words[version])) + "\n")
