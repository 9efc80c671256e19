-- Q1 unique record retrieval: the user with id = {{id}}, with its FriendIds and Employments
-- rows gathered into lists (the normalized form of the nested record).
SELECT u.id, u.alias, u.name, u.user_since,
       (SELECT array_agg(f.friend_id) FROM FriendIds f WHERE f.id = u.id) AS friend_ids,
       (SELECT json_agg(json_build_object('organization_name', e.organization_name,
                                          'start_date', e.start_date, 'end_date', e.end_date))
        FROM Employments e WHERE e.id = u.id) AS employment
FROM GleambookUsers u
WHERE u.id = {{id}}
