-- Q3 temporal range scan: users with user_since in [{{lo}}, {{hi}}), with their friend ids and
-- employments.
SELECT u.id, u.alias, u.name, u.user_since,
       (SELECT array_agg(f.friend_id) FROM FriendIds f WHERE f.id = u.id) AS friend_ids,
       (SELECT json_agg(json_build_object('organization_name', e.organization_name,
                                          'start_date', e.start_date, 'end_date', e.end_date))
        FROM Employments e WHERE e.id = u.id) AS employment
FROM GleambookUsers u
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
