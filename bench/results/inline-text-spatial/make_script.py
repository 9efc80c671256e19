"""Writes Q9S.sql: 300 BigFUN Q9-S statements, circles of the driver's S radius (0.100979,
about a hundred chirps) around random points of the generated senders' area.

Usage: python3 make_script.py OUT_DIR
"""
import pathlib
import random
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
r = random.Random(9)
template = (
    "SELECT c.user.screen_name AS screen_name, c.message_text FROM ChirpMessages c "
    "WHERE spatial_intersect(c.sender_location, circle(point({x:.6f}, {y:.6f}), 0.100979));"
)
with open(out / "Q9S.sql", "w") as f:
    for _ in range(300):
        f.write(template.format(x=r.uniform(30, 50), y=r.uniform(65, 90)) + "\n")
