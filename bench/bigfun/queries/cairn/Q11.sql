-- Q11 text similarity: send time and text of the 10 most recent chirps with a word within edit
-- distance 1 of '{{word}}' (case-insensitive).
SELECT send_time, message_text
FROM ChirpMessages
WHERE edit_distance_contains(message_text, '{{word}}', 1)
ORDER BY send_time DESC
LIMIT 10
