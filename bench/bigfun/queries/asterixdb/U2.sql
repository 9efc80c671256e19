-- U2 (batch) delete: the GleambookUsers records with the given ids.
USE bigfun;
DELETE FROM GleambookUsers u WHERE u.id IN [{{ids}}];
