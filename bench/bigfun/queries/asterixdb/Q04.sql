-- Q4 existential quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) who have SOME employment without an end date.
USE bigfun;
SELECT VALUE [u.name, u.employment]
FROM GleambookUsers u
WHERE u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}')
  AND (SOME e IN u.employment SATISFIES e.end_date IS UNKNOWN);
