-- Q8 top-k: Q7, the 10 senders with the highest average message length, descending (ties by
-- screen name, so that every system returns the same ten).
SELECT c.screen_name AS screen_name, avg(length(c.message_text)) AS avg_length
FROM ChirpMessages c
WHERE c.send_time >= TIMESTAMP '{{lo}}' AND c.send_time < TIMESTAMP '{{hi}}'
GROUP BY c.screen_name
ORDER BY avg_length DESC, screen_name
LIMIT 10
