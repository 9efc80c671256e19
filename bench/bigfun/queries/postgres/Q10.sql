-- Q10 text containment: send time and text of the 10 most recent chirps whose message_text
-- contains the word '{{word}}' (case-insensitive; words are runs of letters and digits).
SELECT send_time, message_text
FROM ChirpMessages
WHERE regexp_split_to_array(lower(message_text), '[^a-z0-9]+') @> ARRAY[lower('{{word}}')]
ORDER BY send_time DESC
LIMIT 10
