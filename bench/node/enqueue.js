// The Node side of bench.node_enqueue: the TypeScript client's enqueue one by one and in
// batches, beside a raw pg insert of the same rows, interleaved, on one pool. Prints JSON.
//
//   node bench/node/enqueue.js DIST DATABASE_URL JOBS BATCH REPEAT
"use strict";
const path = require("node:path");
const { Pool } = require("pg");

const [dist, url, jobsText, batchText, repeatText] = process.argv.slice(2);
const { mail } = require(path.resolve(dist, "clients", "src"));
const JOBS = Number(jobsText);
const BATCH = Number(batchText);
const REPEAT = Number(repeatText);

const args = (i) => ({ to: { user_id: i, email: `user${i}@example.com`, name: null }, template: "welcome" });
const task = mail.mailSend;
// the row akadze writes, inserted the plainest way pg allows, waking workers as the raw peer of
// bench/adapters/adapter_raw.py does (a queue's producer must): one job with its pg_notify in
// one statement; a batch as one INSERT ... SELECT, then one NOTIFY
const RAW_ONE =
  "WITH job AS (INSERT INTO akadze_jobs (task, queue, priority, args, args_fp, max_attempts) " +
  "VALUES ($1, $2, $3, CAST($4 AS jsonb), $5, $6) RETURNING id) " +
  "SELECT job.id, pg_notify('akadze_jobs', $2) FROM job";
const RAW_MANY =
  "INSERT INTO akadze_jobs (task, queue, priority, args, args_fp, max_attempts) " +
  "SELECT $1, $2, $3, a.args, $5, $6 FROM jsonb_array_elements(CAST($4 AS jsonb)) AS a(args)";
const fixed = () => [task.name, task.queue, 0, null, task.argsFp, 5];

const steps = {
  async client_single(pool) {
    for (let i = 0; i < JOBS; i++) await task.enqueue(pool, args(i));
    return JOBS;
  },
  async raw_single(pool) {
    for (let i = 0; i < JOBS; i++) {
      const values = fixed();
      values[3] = JSON.stringify(args(i));
      await pool.query({ name: "raw_one", text: RAW_ONE, values });
    }
    return JOBS;
  },
  async client_batch(pool) {
    for (let b = 0; b < JOBS * 4; b += BATCH) {
      const items = [];
      for (let i = 0; i < BATCH; i++) items.push(args(b + i));
      await task.enqueueMany(pool, items);
    }
    return JOBS * 4;
  },
  async raw_batch(pool) {
    for (let b = 0; b < JOBS * 4; b += BATCH) {
      const items = [];
      for (let i = 0; i < BATCH; i++) items.push(args(b + i));
      const values = fixed();
      values[3] = JSON.stringify(items);
      await pool.query({ name: "raw_many", text: RAW_MANY, values });
      await pool.query("NOTIFY akadze_jobs, 'mail'");
    }
    return JOBS * 4;
  },
};

(async () => {
  const pool = new Pool({ connectionString: url, max: 1 });
  const results = {};
  for (let r = 0; r < REPEAT; r++) {
    for (const [name, step] of Object.entries(steps)) {
      await pool.query("TRUNCATE akadze_jobs");
      await pool.query("CHECKPOINT");
      const start = process.hrtime.bigint();
      const count = await step(pool);
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      (results[name] ??= []).push(count / seconds);
    }
  }
  await pool.end();
  console.log(JSON.stringify(results));
})();
