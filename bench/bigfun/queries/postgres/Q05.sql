-- Q5 universal quantification: name and employment list of the users with user_since in
-- [{{lo}}, {{hi}}) EVERY one of whose employments has an end date.
SELECT u.name,
       (SELECT json_agg(json_build_object('organization_name', e.organization_name,
                                       'start_date', e.start_date, 'end_date', e.end_date))
        FROM Employments e WHERE e.id = u.id) AS employment
FROM GleambookUsers u
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
  AND NOT EXISTS (SELECT 1 FROM Employments e WHERE e.id = u.id AND e.end_date IS NULL)
