-- Q4 existential quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) who have SOME employment without an end date.
SELECT name, employment
FROM GleambookUsers
WHERE user_since >= TIMESTAMP '{{lo}}' AND user_since < TIMESTAMP '{{hi}}'
  AND array_any_match(employment, e -> e['end_date'] IS NULL)
