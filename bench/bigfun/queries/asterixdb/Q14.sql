-- Q14 join and grouping: for the users with user_since in [{{lo}}, {{hi}}), the id and the
-- number of their messages with send_time in [{{message_lo}}, {{message_hi}}).
USE bigfun;
SELECT VALUE [id, COUNT(*)]
FROM GleambookUsers u, GleambookMessages m
WHERE m.author_id = u.id
  AND u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}')
  AND m.send_time >= datetime('{{message_lo}}') AND m.send_time < datetime('{{message_hi}}')
GROUP BY u.id AS id;
