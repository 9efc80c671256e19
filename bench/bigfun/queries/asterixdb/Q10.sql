-- Q10 text containment: send time and text of the 10 most recent chirps whose message_text
-- contains the word '{{word}}' (case-insensitive; words are runs of letters and digits, which
-- is how AsterixDB's word tokenizer and its keyword index split text).
USE bigfun;
SELECT VALUE [c.send_time, c.message_text]
FROM ChirpMessages c
WHERE ftcontains(c.message_text, '{{word}}')
ORDER BY c.send_time DESC
LIMIT 10;
