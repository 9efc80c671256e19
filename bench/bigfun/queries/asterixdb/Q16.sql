-- Q16 spatial join: for each chirp with send_time in [{{lo}}, {{hi}}), its id and the texts of
-- the 10 nearest other chirps within circle(its location, {{radius}}), nearest first (ties by
-- chirpid). Chirps without a neighbour in the circle do not appear. AsterixDB 0.9.8 has no
-- nearest-neighbour operator: the circle join finds the candidates, a grouped subquery ranks.
USE bigfun;
SELECT VALUE [chirpid,
       (SELECT VALUE p.n.message_text
        FROM pairs AS p
        ORDER BY spatial_distance(p.n.sender_location, p.o.sender_location), p.n.chirpid
        LIMIT 10)]
FROM ChirpMessages o, ChirpMessages n
WHERE o.send_time >= datetime('{{lo}}') AND o.send_time < datetime('{{hi}}')
  AND spatial_intersect(n.sender_location, create_circle(o.sender_location, {{radius}}))
  AND n.chirpid != o.chirpid
GROUP BY o.chirpid AS chirpid GROUP AS pairs(o AS o, n AS n);
