-- U1 (batch) insert: {{count}} complete new GleambookUsers records. The driver spells them as a
-- SQL++ array with ADM constructors (datetime, date, and a multiset for friend_ids), since the
-- declared type wants those and SQL++ cannot turn a JSON array into a multiset.
USE bigfun;
INSERT INTO GleambookUsers ({{records}});
