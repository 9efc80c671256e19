-- Q11 text similarity: send time and text of the 10 most recent chirps with a word within edit
-- distance 1 of '{{word}}' (case-insensitive; levenshtein from contrib's fuzzystrmatch).
SELECT send_time, message_text
FROM ChirpMessages
WHERE EXISTS (SELECT 1
              FROM unnest(regexp_split_to_array(lower(message_text), '[^a-z0-9]+')) AS w(word)
              WHERE levenshtein(w.word, lower('{{word}}')) <= 1)
ORDER BY send_time DESC
LIMIT 10
