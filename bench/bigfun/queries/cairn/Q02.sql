-- Q2 key range scan: users with id in [{{lo}}, {{hi}}).
SELECT id, alias, name, user_since, friend_ids, employment
FROM GleambookUsers
WHERE id >= {{lo}} AND id < {{hi}}
