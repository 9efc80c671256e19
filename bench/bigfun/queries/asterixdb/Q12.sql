-- Q12 select equi-join: (user name, message) for the messages with send_time in
-- [{{message_lo}}, {{message_hi}}) written by users with user_since in [{{lo}}, {{hi}}).
USE bigfun;
SELECT VALUE [u.name, m.message]
FROM GleambookUsers u, GleambookMessages m
WHERE m.author_id = u.id
  AND u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}')
  AND m.send_time >= datetime('{{message_lo}}') AND m.send_time < datetime('{{message_hi}}');
