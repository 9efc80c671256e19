-- Q5 universal quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) EVERY one of whose employments has an end date.
USE bigfun;
SELECT VALUE [u.name, u.employment]
FROM GleambookUsers u
WHERE u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}')
  AND (EVERY e IN u.employment SATISFIES e.end_date IS NOT UNKNOWN);
