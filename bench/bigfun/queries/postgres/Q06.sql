-- Q6 global aggregation: the average length of message_text over the chirps with send_time in
-- [{{lo}}, {{hi}}).
SELECT avg(length(message_text)) AS avg_length
FROM ChirpMessages
WHERE send_time >= TIMESTAMP '{{lo}}' AND send_time < TIMESTAMP '{{hi}}'
