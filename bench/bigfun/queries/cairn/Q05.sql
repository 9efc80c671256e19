-- Q5 universal quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) EVERY one of whose employments has an end date.
SELECT name, employment
FROM GleambookUsers
WHERE user_since >= TIMESTAMP '{{lo}}' AND user_since < TIMESTAMP '{{hi}}'
  AND NOT array_any_match(employment, e -> e['end_date'] IS NULL)
