-- Q14 join and grouping: for the users with user_since in [{{lo}}, {{hi}}), the id and the
-- number of their messages with send_time in [{{message_lo}}, {{message_hi}}).
SELECT u.id, count(*) AS messages
FROM GleambookUsers u
JOIN GleambookMessages m ON m.author_id = u.id
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
  AND m.send_time >= TIMESTAMP '{{message_lo}}' AND m.send_time < TIMESTAMP '{{message_hi}}'
GROUP BY u.id
