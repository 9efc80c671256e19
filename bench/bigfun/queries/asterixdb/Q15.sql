-- Q15 join and top-k: Q14, the 10 users with the most messages, descending (ties by id).
USE bigfun;
SELECT VALUE [id, COUNT(*)]
FROM GleambookUsers u, GleambookMessages m
WHERE m.author_id = u.id
  AND u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}')
  AND m.send_time >= datetime('{{message_lo}}') AND m.send_time < datetime('{{message_hi}}')
GROUP BY u.id AS id
ORDER BY COUNT(*) DESC, id
LIMIT 10;
