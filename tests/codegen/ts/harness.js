// The Node side of akadze's TypeScript client tests: loads a built client package and answers
// one JSON request per line on stdin with one JSON line on stdout.
//
//   node harness.js PACKAGE_DIST [DATABASE_URL]
//
// {"op": "check", "task": NAME, "args": JSON_TEXT}          -> {"ok": true, "payload": TEXT} | {"ok": false, "error": ...}
// {"op": "enqueue", "task": NAME, "args": VALUE, "options": {...}}  -> {"ok": true, "jobs": [...]} | {"ok": false, ...}
// {"op": "enqueueMany", "task": NAME, "items": [VALUE...], "options": {...}}
//
// For "check", JSON_TEXT is parsed keeping integers past 2**53 as bigint (the JS values a
// producer holds). For "enqueue", values tagged {"$date": ISO}, {"$bytes": BASE64},
// {"$bigint": DIGITS} become a Date, a Uint8Array, a bigint.
"use strict";
const readline = require("node:readline");
const path = require("node:path");

const dist = path.resolve(process.argv[2]);
const clients = require(dist);
const runtime = require(path.join(dist, "_runtime"));
const tasks = new Map();
function collect(ns) {
  for (const value of Object.values(ns)) {
    if (value instanceof runtime.Task) tasks.set(value.name, value);
    else if (value && typeof value === "object" && !Array.isArray(value) && Object.getPrototypeOf(value) === null) collect(value);
  }
}
collect(clients);
for (const value of Object.values(clients)) if (value && typeof value === "object") collect(value);

function parse(text) {
  let i = 0;
  const ws = () => { while (/\s/.test(text[i])) i++; };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++; const out = {}; ws();
      if (text[i] === "}") { i++; return out; }
      for (;;) { ws(); const k = value(); ws(); i++; out[k] = value(); ws(); if (text[i++] === "}") return out; }
    }
    if (c === "[") {
      i++; const out = []; ws();
      if (text[i] === "]") { i++; return out; }
      for (;;) { out.push(value()); ws(); if (text[i++] === "]") return out; }
    }
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const s = JSON.parse(text.slice(i, j + 1)); i = j + 1; return s;
    }
    const m = /^-?\d+(\.\d+)?([eE][-+]?\d+)?|^true|^false|^null/.exec(text.slice(i));
    i += m[0].length;
    if (m[0] === "true") return true;
    if (m[0] === "false") return false;
    if (m[0] === "null") return null;
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(Number(m[0]))) return BigInt(m[0]);
    return Number(m[0]);
  };
  return value();
}

function hydrate(v) {
  if (Array.isArray(v)) return v.map(hydrate);
  if (v && typeof v === "object") {
    if ("$date" in v) return new Date(v.$date);
    if ("$bytes" in v) return new Uint8Array(Buffer.from(v.$bytes, "base64"));
    if ("$bigint" in v) return BigInt(v.$bigint);
    if ("$set" in v) return new Set(v.$set.map(hydrate));
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = hydrate(x);
    return out;
  }
  return v;
}

function options(o) {
  const out = { ...(o || {}) };
  for (const k of ["runAt", "expiresAt"]) if (out[k]) out[k] = new Date(out[k]);
  return out;
}

function failure(e) {
  return { ok: false, error: `${e.name}: ${e.message}`, name: e.name, path: e.path, taskName: e.taskName };
}

let pool = null;
if (process.argv[3]) {
  const { Pool, types } = require("pg");
  // what many applications do: int8 and int8[] read as JS numbers, process-wide
  if (process.env.AKADZE_HARNESS_INT8_AS_NUMBER) {
    types.setTypeParser(20, Number);
    types.setTypeParser(1016, (text) => text.slice(1, -1).split(",").map(Number));
  }
  pool = new Pool({ connectionString: process.argv[3], max: 2 });
}

const rl = readline.createInterface({ input: process.stdin });
const queue = [];
let busy = false;
rl.on("line", (line) => { queue.push(line); pump(); });
rl.on("close", () => { queue.push(null); pump(); });

async function answer(request) {
  const task = tasks.get(request.task);
  if (task === undefined) return { ok: false, error: `no task ${request.task}` };
  try {
    if (request.op === "check") return { ok: true, payload: task.encode(parse(request.args)) };
    if (request.op === "enqueue") return { ok: true, jobs: [await task.enqueue(pool, hydrate(request.args), options(request.options))] };
    if (request.op === "enqueueMany") return { ok: true, jobs: await task.enqueueMany(pool, hydrate(request.items), options(request.options)) };
    return { ok: false, error: `unknown op ${request.op}` };
  } catch (e) {
    return failure(e);
  }
}

async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const line = queue.shift();
    if (line === null) {
      if (pool) await pool.end();
      busy = false;
      return;
    }
    if (!line.trim()) continue;
    process.stdout.write(JSON.stringify(await answer(JSON.parse(line))) + "\n");
  }
  busy = false;
}
