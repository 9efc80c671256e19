-- Q7 grouping and aggregation: Q6 per sender (user.screen_name).
USE bigfun;
SELECT VALUE [screen_name, AVG(string_length(c.message_text))]
FROM ChirpMessages c
WHERE c.send_time >= datetime('{{lo}}') AND c.send_time < datetime('{{hi}}')
GROUP BY c.`user`.screen_name AS screen_name;
