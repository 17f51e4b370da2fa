-- 0013_web_secret: the key that signs the dashboard's CSRF tokens (akadze/web/security.py).
-- One row, made here from two random UUIDs (gen_random_uuid, built in since PostgreSQL 13, draws
-- from the server's strong random source: 244 random bits). Kept in the database so that every
-- process that serves the dashboard of one database signs and checks tokens alike, with nothing
-- to configure. Replacing the row (UPDATE ... SET secret = ...) and restarting the dashboard's
-- processes invalidates every token issued before: pages reload with a new one.
CREATE TABLE akadze_web_secret (
    id integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    secret text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO akadze_web_secret (secret)
VALUES (replace(CAST(gen_random_uuid() AS text) || CAST(gen_random_uuid() AS text), '-', ''));
