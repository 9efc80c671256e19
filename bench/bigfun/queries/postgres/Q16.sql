-- Q16 spatial join: for each chirp with send_time in [{{lo}}, {{hi}}), its id and the texts of
-- the 10 nearest other chirps within circle(its location, {{radius}}), nearest first (ties by
-- chirpid). Chirps without a neighbour in the circle do not appear.
WITH outer_chirps AS (
  SELECT chirpid, sender_location_x AS x, sender_location_y AS y
  FROM ChirpMessages
  WHERE send_time >= TIMESTAMP '{{lo}}' AND send_time < TIMESTAMP '{{hi}}'
), pairs AS (
  SELECT o.chirpid, n.chirpid AS neighbour, n.message_text,
         sqrt((n.sender_location_x - o.x) ^ 2 + (n.sender_location_y - o.y) ^ 2) AS distance
  FROM outer_chirps o
  JOIN ChirpMessages n ON n.chirpid <> o.chirpid
), neighbours AS (
  SELECT chirpid, message_text,
         row_number() OVER (PARTITION BY chirpid ORDER BY distance, neighbour) AS nearness
  FROM pairs
  WHERE distance <= {{radius}}
)
SELECT chirpid, array_agg(message_text ORDER BY nearness) AS nearest
FROM neighbours
WHERE nearness <= 10
GROUP BY chirpid
