-- Q10 text containment: send time and text of the 10 most recent chirps whose message_text
-- contains the word '{{word}}' (case-insensitive).
SELECT send_time, message_text
FROM ChirpMessages
WHERE contains_word(message_text, '{{word}}')
ORDER BY send_time DESC
LIMIT 10
