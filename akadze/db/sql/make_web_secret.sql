-- make_web_secret: makes the key that signs the dashboard's CSRF tokens when its row is missing
-- (migration 0013 makes it; a test suite that truncates every akadze_ table removes it), from two
-- random UUIDs as the migration does; a row that exists is kept (two processes that make it at
-- once end with one key). Primary-key insert.
INSERT INTO akadze_web_secret (id, secret)
VALUES (1, replace(CAST(gen_random_uuid() AS text) || CAST(gen_random_uuid() AS text), '-', ''))
ON CONFLICT (id) DO NOTHING
