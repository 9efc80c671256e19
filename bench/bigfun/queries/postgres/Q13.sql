-- Q13 select left-outer join: for each user with user_since in [{{lo}}, {{hi}}), the name and
-- the list of their messages with send_time in [{{message_lo}}, {{message_hi}}) (NULL if none),
-- in message_id order.
SELECT u.id, u.name,
       array_agg(m.message ORDER BY m.message_id) FILTER (WHERE m.message_id IS NOT NULL) AS messages
FROM GleambookUsers u
LEFT JOIN GleambookMessages m
  ON m.author_id = u.id
 AND m.send_time >= TIMESTAMP '{{message_lo}}' AND m.send_time < TIMESTAMP '{{message_hi}}'
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
GROUP BY u.id, u.name
