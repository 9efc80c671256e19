-- Q7 grouping and aggregation: Q6 per sender (user.screen_name).
SELECT c.screen_name AS screen_name, avg(length(c.message_text)) AS avg_length
FROM ChirpMessages c
WHERE c.send_time >= TIMESTAMP '{{lo}}' AND c.send_time < TIMESTAMP '{{hi}}'
GROUP BY c.screen_name
