-- Q8 top-k: Q7, the 10 senders with the highest average message length, descending (ties by
-- screen name, so that every system returns the same ten).
USE bigfun;
SELECT VALUE [screen_name, AVG(string_length(c.message_text))]
FROM ChirpMessages c
WHERE c.send_time >= datetime('{{lo}}') AND c.send_time < datetime('{{hi}}')
GROUP BY c.`user`.screen_name AS screen_name
ORDER BY AVG(string_length(c.message_text)) DESC, screen_name
LIMIT 10;
