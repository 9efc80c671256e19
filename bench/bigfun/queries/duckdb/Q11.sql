-- Q11 text similarity: send time and text of the 10 most recent chirps with a word within edit
-- distance 1 of '{{word}}' (case-insensitive; words are runs of letters and digits).
SELECT send_time, message_text
FROM ChirpMessages
WHERE len(list_filter(regexp_split_to_array(lower(message_text), '[^a-z0-9]+'),
                      lambda w: levenshtein(w, lower('{{word}}')) <= 1)) > 0
ORDER BY send_time DESC
LIMIT 10
