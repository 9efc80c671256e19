-- Q12 select equi-join: (user name, message) for the messages with send_time in
-- [{{message_lo}}, {{message_hi}}) written by users with user_since in [{{lo}}, {{hi}}).
SELECT u.name, m.message
FROM GleambookUsers u
JOIN GleambookMessages m ON m.author_id = u.id
WHERE u.user_since >= TIMESTAMP '{{lo}}' AND u.user_since < TIMESTAMP '{{hi}}'
  AND m.send_time >= TIMESTAMP '{{message_lo}}' AND m.send_time < TIMESTAMP '{{message_hi}}'
