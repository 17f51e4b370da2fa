// The Node side of bench.node_enqueue: the TypeScript client's enqueue one by one and in
// batches, beside a hand-written pg insert of the same rows, interleaved, on one connection.
// Prints JSON: per step and repeat, jobs/s, Node's CPU per job and the PostgreSQL backend's CPU
// per job (read from /proc: the database runs on this machine), and the load average.
//
//   node bench/node/enqueue.js DIST DATABASE_URL JOBS BATCH BATCH_JOBS REPEAT
//
// What each side does, per job, with the same pg.Pool (one connection) and the same arguments:
//   client_single  mail.mailSend.enqueue(pool, args): the guard walks the arguments, encodes
//                  them, and runs akadze's enqueue_now statement (prepared: a named query); it
//                  resolves to { id, duplicate }.
//   raw_single     a hand-written INSERT of the same row (task, queue, priority, args JSON,
//                  args_fp, max_attempts; every other column its default, as akadze writes it)
//                  waking workers as the raw peer of bench/adapters/adapter_raw.py does
//                  (pg_notify in the same statement), prepared, its id read back: no checks.
//   client_batch   mail.mailSend.enqueueMany(pool, items): every item guarded and encoded,
//                  akadze's enqueue_batch statement, an array of { id, duplicate } in order.
//   raw_batch      a hand-written INSERT ... SELECT of the same rows from one JSON array, in
//                  input order, its ids read back in that order and one NOTIFY, in one
//                  prepared statement: the fastest of the plain forms measured (RAW_FORMS).
// Both sides read back what a caller needs (the ids, in order) and nothing else; neither
// parses a column into a Date. Before timing, one job from each side is compared column by
// column: the bench stops if the rows differ.
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { Pool } = require("pg");

const [dist, url, jobsText, batchText, batchJobsText, repeatText] = process.argv.slice(2);
const { mail } = require(path.resolve(dist, "clients", "src"));
const JOBS = Number(jobsText);
const BATCH = Number(batchText);
const BATCH_JOBS = Math.ceil(Number(batchJobsText) / BATCH) * BATCH;
const REPEAT = Number(repeatText);

const args = (i) => ({ to: { user_id: i, email: `user${i}@example.com`, name: null }, template: "welcome" });
const task = mail.mailSend;
const COLUMNS = "task, queue, priority, args, args_fp, max_attempts";
const RAW_ONE =
  `WITH job AS (INSERT INTO akadze_jobs (${COLUMNS}) VALUES ($1, $2, $3, CAST($4 AS jsonb), $5, $6) RETURNING id) ` +
  "SELECT job.id, pg_notify('akadze_jobs', $2) FROM job";
const ORDERED =
  `INSERT INTO akadze_jobs (${COLUMNS}) SELECT $1, $2, $3, a.args, $5, $6 ` +
  "FROM jsonb_array_elements(CAST($4 AS jsonb)) WITH ORDINALITY AS a(args, n) ORDER BY a.n RETURNING id";
// the plain ways to write the batch by hand that return the ids in input order; bench.node_enqueue
// --raw-forms times them all, and raw_batch is the fastest
const RAW_FORMS = {
  // one row per job, then one NOTIFY: two round trips
  rows_then_notify: { text: ORDERED, notify: true, ids: (result) => result.rows.map((row) => row.id) },
  // one row per job and the NOTIFY in the same statement
  rows: {
    text: `WITH job AS (${ORDERED}), wake AS (SELECT pg_notify('akadze_jobs', $2)) SELECT job.id FROM job WHERE EXISTS (SELECT FROM wake) ORDER BY job.id`,
    ids: (result) => result.rows.map((row) => row.id),
  },
  // the ids as one array and the NOTIFY in the same statement
  array: {
    text: `WITH job AS (${ORDERED}) SELECT array_agg(job.id ORDER BY job.id) AS ids, pg_notify('akadze_jobs', $2) FROM job`,
    ids: (result) => result.rows[0].ids.slice(1, -1).split(","),
  },
};
const RAW_BATCH = RAW_FORMS.array;
const fixed = () => [task.name, task.queue, 0, null, task.argsFp, 5];
// every column as its text (as the client reads its own): no Date, ids with every digit
const TEXT = { getTypeParser: () => (text) => text };

async function rawBatch(pool, form, name, items) {
  const values = fixed();
  values[3] = JSON.stringify(items);
  const result = await pool.query({ name, text: form.text, values, types: TEXT });
  if (form.notify) await pool.query("NOTIFY akadze_jobs, 'mail'");
  return form.ids(result);
}

function batches(run) {
  return async (pool) => {
    let last;
    for (let b = 0; b < BATCH_JOBS; b += BATCH) {
      const items = [];
      for (let i = 0; i < BATCH; i++) items.push(args(b + i));
      last = await run(pool, items);
    }
    if (last.length !== BATCH) throw new Error(`a batch returned ${last.length} ids`);
    return BATCH_JOBS;
  };
}

const steps = {
  async client_single(pool) {
    for (let i = 0; i < JOBS; i++) await task.enqueue(pool, args(i));
    return JOBS;
  },
  async raw_single(pool) {
    for (let i = 0; i < JOBS; i++) {
      const values = fixed();
      values[3] = JSON.stringify(args(i));
      await pool.query({ name: "raw_one", text: RAW_ONE, values, types: TEXT });
    }
    return JOBS;
  },
  client_batch: batches((pool, items) => task.enqueueMany(pool, items)),
  raw_batch: batches((pool, items) => rawBatch(pool, RAW_BATCH, "raw_batch", items)),
};
if (process.env.RAW_FORMS)
  for (const [form, spec] of Object.entries(RAW_FORMS))
    steps[`raw_batch_${form}`] = batches((pool, items) => rawBatch(pool, spec, `raw_${form}`, items));

/** CPU time of a process in microseconds (utime + stime from /proc, in clock ticks of 10 ms). */
function cpuMicros(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** One job from each side, compared column by column (everything but id and the timestamps). */
async function sameRow(pool) {
  await pool.query("TRUNCATE akadze_jobs");
  await task.enqueue(pool, args(7));
  const values = fixed();
  values[3] = JSON.stringify(args(7));
  await pool.query({ name: "raw_one", text: RAW_ONE, values });
  const { rows } = await pool.query(
    "SELECT to_jsonb(j) - 'id' - 'run_at' - 'created_at' AS row FROM akadze_jobs AS j ORDER BY id",
  );
  const [client, raw] = rows.map((r) => JSON.stringify(r.row));
  if (rows.length !== 2 || client !== raw) throw new Error(`the rows differ:\n${client}\n${raw}`);
}

(async () => {
  const pool = new Pool({ connectionString: url, max: 1 });
  const backend = (await pool.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
  await sameRow(pool);
  const results = {};
  const load = [os.loadavg()[0]];
  const names = Object.keys(steps);
  for (let r = 0; r < REPEAT; r++) {
    // the client's and the raw step swap places every other repeat
    const order = r % 2 === 0 ? names : names.map((_, i) => names[i ^ 1] ?? names[i]);
    for (const name of order) {
      await pool.query("TRUNCATE akadze_jobs");
      await pool.query("CHECKPOINT");
      const cpu = process.cpuUsage();
      const db = cpuMicros(backend);
      const start = process.hrtime.bigint();
      const count = await steps[name](pool);
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const used = process.cpuUsage(cpu);
      (results[name] ??= []).push({
        rate: count / seconds,
        node_us: (used.user + used.system) / count,
        db_us: (cpuMicros(backend) - db) / count,
      });
    }
    load.push(os.loadavg()[0]);
  }
  await pool.end();
  console.log(JSON.stringify({ results, load }));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
