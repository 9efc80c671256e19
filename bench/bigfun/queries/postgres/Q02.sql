-- Q2 key range scan: users with id in [{{lo}}, {{hi}}), with their friend ids and employments.
SELECT u.id, u.alias, u.name, u.user_since,
       (SELECT array_agg(f.friend_id) FROM FriendIds f WHERE f.id = u.id) AS friend_ids,
       (SELECT json_agg(json_build_object('organization_name', e.organization_name,
                                          'start_date', e.start_date, 'end_date', e.end_date))
        FROM Employments e WHERE e.id = u.id) AS employment
FROM GleambookUsers u
WHERE u.id >= {{lo}} AND u.id < {{hi}}
