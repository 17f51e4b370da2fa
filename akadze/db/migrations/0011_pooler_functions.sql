-- 0011_pooler_functions: the claim cycle's statements as PL/pgSQL functions, for workers behind
-- a pooler in transaction mode, are made by every migrate from the statements' own files
-- (akadze.db.pooled), each named after a digest of its definition, so no copy of a statement
-- lives here. This file held such copies when it shipped (0.6.0); a database that applied that
-- text keeps its checksum (akadze.db.migrate.SUPERSEDED), and the functions it made, which the
-- workers of that version call by their plain names.
SELECT 1;
