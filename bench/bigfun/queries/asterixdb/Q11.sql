-- Q11 text similarity: send time and text of the 10 most recent chirps with a word within edit
-- distance 1 of '{{word}}' (case-insensitive; word_tokens lower-cases the words it splits).
USE bigfun;
SELECT VALUE [c.send_time, c.message_text]
FROM ChirpMessages c
WHERE (SOME w IN word_tokens(c.message_text)
       SATISFIES edit_distance(w, lowercase('{{word}}')) <= 1)
ORDER BY c.send_time DESC
LIMIT 10;
