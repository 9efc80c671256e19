-- Q16 spatial join: for each chirp with send_time in [{{lo}}, {{hi}}), its id and the texts of
-- the 10 nearest other chirps within circle(its location, {{radius}}), nearest first (ties by
-- chirpid). Chirps without a neighbour in the circle do not appear.
WITH outer_chirps AS (
  SELECT chirpid, sender_location
  FROM ChirpMessages
  WHERE send_time >= TIMESTAMP '{{lo}}' AND send_time < TIMESTAMP '{{hi}}'
), neighbours AS (
  SELECT o.chirpid, n.message_text,
         row_number() OVER (
           PARTITION BY o.chirpid
           ORDER BY spatial_distance(o.sender_location, n.sender_location), n.chirpid
         ) AS nearness
  FROM outer_chirps o
  JOIN ChirpMessages n
    ON spatial_intersect(n.sender_location, circle(o.sender_location, {{radius}}))
   AND n.chirpid <> o.chirpid
)
SELECT chirpid, array_agg(message_text ORDER BY nearness) AS nearest
FROM neighbours
WHERE nearness <= 10
GROUP BY chirpid
