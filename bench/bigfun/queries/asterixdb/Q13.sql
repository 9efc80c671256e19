-- Q13 select left-outer join: for each user with user_since in [{{lo}}, {{hi}}), the name and
-- the list of their messages with send_time in [{{message_lo}}, {{message_hi}}) (empty if
-- none), in message_id order. AsterixDB turns the correlated subquery into a left outer join.
USE bigfun;
SELECT VALUE [u.id, u.name,
       (SELECT VALUE m.message
        FROM GleambookMessages m
        WHERE m.author_id = u.id
          AND m.send_time >= datetime('{{message_lo}}')
          AND m.send_time < datetime('{{message_hi}}')
        ORDER BY m.message_id)]
FROM GleambookUsers u
WHERE u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}');
