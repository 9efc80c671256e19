-- Q15 join and top-k: Q14, the 10 users with the most messages, descending (ties by id).
SELECT u.id, count(*) AS messages
FROM GleambookUsers u
JOIN GleambookMessages m ON m.author_id = u.id
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
  AND m.send_time >= TIMESTAMP '{{message_lo}}' AND m.send_time < TIMESTAMP '{{message_hi}}'
GROUP BY u.id
ORDER BY messages DESC, u.id
LIMIT 10
