// A Node producer: an HTTP service that records a signup and enqueues the welcome mail for the
// Python worker (examples/worker_app.py) in one transaction of its own, through the typed
// TypeScript clients (`akadze codegen examples.worker_app:app --out examples/node_producer/clients
// --lang typescript`). The job commits with the signup or not at all.
//
//   npm ci && npm run build
//   AKADZE_DATABASE_URL=postgresql://... PORT=8080 node dist/src/server.js
//   curl -X POST localhost:8080/signups -d '{"user_id": 5, "email": "ada@example.com"}'
import * as http from "node:http";

import { Pool } from "pg";

import { InvalidArgsError, mail } from "../clients/src";

const pool = new Pool({ connectionString: process.env.AKADZE_DATABASE_URL });

async function body(request: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
}

/** POST /signups {user_id, email, name?}: 201 {job_id}, 422 when the mail's arguments are wrong. */
export async function signup(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
  const input = (await body(request)) as { user_id: number; email: string; name?: string };
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query(
      "CREATE TABLE IF NOT EXISTS signups (user_id bigint PRIMARY KEY, email text NOT NULL)",
    );
    // the job is inserted on this connection, inside this transaction: the guard checks the
    // arguments first (InvalidArgsError, before any SQL)
    const job = await mail.mailSend.enqueue(client, {
      to: { user_id: input.user_id, email: input.email, name: input.name ?? null },
      template: mail.Template.WELCOME,
    });
    await client.query("INSERT INTO signups (user_id, email) VALUES ($1, $2)", [input.user_id, input.email]);
    await client.query("COMMIT");
    reply(response, 201, { job_id: job.id });
  } catch (error) {
    await client.query("ROLLBACK");
    if (error instanceof InvalidArgsError) reply(response, 422, { error: error.message, path: error.path });
    else throw error;
  } finally {
    client.release();
  }
}

function reply(response: http.ServerResponse, status: number, data: unknown): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(data));
}

const server = http.createServer((request, response) => {
  if (request.method === "POST" && request.url === "/signups") {
    signup(request, response).catch((error: unknown) => {
      console.error(error);
      if (!response.headersSent) reply(response, 500, { error: "internal error" });
    });
  } else {
    reply(response, 404, { error: "not found" });
  }
});

server.listen(Number(process.env.PORT ?? 8080), "127.0.0.1", () => {
  const address = server.address();
  console.log(`listening on ${typeof address === "object" && address ? address.port : address}`);
});
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => server.close(() => void pool.end()));
}
