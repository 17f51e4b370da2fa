// Wrong calls to the clients of tests/codegen/apps/producers: each marked line must be a tsc
// error naming the argument (tests/codegen/test_codegen_typescript.py). The first part is right.
import type { Pool } from "pg";

import { orders } from "../clients/src";

declare const pool: Pool;
const to = { street: "Main 1", zipCode: "1011AB" };
const payment = { kind: "card", last4: "1234" } as const;
const parcel = { weight: "1.50" };

export async function calls(): Promise<void> {
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red" });
  await orders.ordersPlace.enqueue(pool, { order_id: 1n, to, payment, parcel, color: orders.Color.GREEN, at: new Date() });

  await orders.ordersPlace.enqueue(pool, { order_id: "1", to, payment, parcel, color: "red" }); // error: order_id
  await orders.ordersPlace.enqueue(pool, { order_idd: 1, to, payment, parcel, color: "red" }); // error: order_idd
  await orders.ordersPlace.enqueue(pool, { to, payment, parcel, color: "red" }); // error: order_id
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "blue" }); // error: color
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", priority: 5 }); // error: priority
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to: { street: "x" }, payment, parcel, color: "red" }); // error: zipCode
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to: { street: "x", zip_code: "1011" }, payment, parcel, color: "red" }); // error: zip_code
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to: { street: 5, zipCode: "1011" }, payment, parcel, color: "red" }); // error: street
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment: { kind: "cash" }, parcel, color: "red" }); // error: kind
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment: { kind: "card" }, parcel, color: "red" }); // error: last4
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel: { weight: 1.5 }, color: "red" }); // error: weight
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel: { weight: "1", label: "abc" }, color: "red" }); // error: label
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", at: 1700000000 }); // error: at
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", on: new Date() }); // error: on
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", within: "PT5S" }); // error: within
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", tags: "a,b" }); // error: tags
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment: { kind: "transfer" }, parcel, color: "red" }); // error: iban
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", counts: 5 }); // error: counts
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", ratio: "1.5" }); // error: ratio
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red", note: 5 }); // error: note
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red" }, { delay: "5s" }); // error: delay
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red" }, { runAt: "2030-01-01" }); // error: runAt
  await orders.ordersPlace.enqueue(pool, { order_id: 1, to, payment, parcel, color: "red" }, { prio: 1 }); // error: prio
  await orders.ordersPlace.enqueueMany(pool, [{ order_id: 1, to, payment, parcel, color: "red", extra: 1 }]); // error: extra
  await orders.ordersRemind.enqueue(pool, { order_id: 1, text: null }); // error: text
  await orders.ordersStats.enqueue(pool, { ids: [1, 2], post: { code: "1011NL" }, due: "2030-01-01" }); // error: ids
  await orders.ordersStats.enqueue(pool, { ids: "[1]", post: { code: 1011 }, due: "2030-01-01" }); // error: code
  await orders.ordersStats.enqueue(pool, { ids: "[1]", post: { code: "1011NL" } }); // error: due
}
