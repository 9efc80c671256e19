-- Q4 existential quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) who have SOME employment without an end date.
SELECT u.name,
       (SELECT json_agg(json_build_object('organization_name', e.organization_name,
                                       'start_date', e.start_date, 'end_date', e.end_date))
        FROM Employments e WHERE e.id = u.id) AS employment
FROM GleambookUsers u
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
  AND EXISTS (SELECT 1 FROM Employments e WHERE e.id = u.id AND e.end_date IS NULL)
