-- Q6 global aggregation: the average length of message_text over the chirps with send_time in
-- [{{lo}}, {{hi}}).
USE bigfun;
SELECT VALUE [AVG(string_length(c.message_text))]
FROM ChirpMessages c
WHERE c.send_time >= datetime('{{lo}}') AND c.send_time < datetime('{{hi}}');
