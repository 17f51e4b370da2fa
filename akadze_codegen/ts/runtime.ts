// The runtime of akadze's generated TypeScript clients: the argument guard and encoder, the
// unique key, and the insert. Copied as it is into every generated package (runtime.ts);
// the statements it runs are akadze's own, rendered into _sql.ts when the package is generated.
//
// A call's arguments are walked once against the task's types, as the manifest records them
// (the same manifest the Python clients are rendered from): each value is checked (types,
// enum and literal values, required and unknown fields, every constraint pydantic enforces)
// and turned into the JSON the worker reads, so the row is the one a Python client writes for
// the same call. A refusal is an InvalidArgsError naming the argument's path, never its value,
// thrown before any SQL runs.

import type { QueryResult } from "pg";

import { STATEMENTS, type Statement } from "./_sql";

// -- errors ------------------------------------------------------------------------------------

/** Base of the errors the client throws. */
export class AkadzeError extends Error {}

/** The arguments of a call are not what the worker's task takes: nothing was inserted. */
export class InvalidArgsError extends AkadzeError {
  constructor(
    readonly taskName: string,
    readonly problem: string,
    readonly path: string,
  ) {
    super(`task '${taskName}': ${problem} - at \`${path}\``);
    this.name = "InvalidArgsError";
  }
}

/** The encoded arguments are larger than the worker's limit (configure({ maxArgsBytes })). */
export class ArgsTooLargeError extends AkadzeError {
  constructor(
    readonly taskName: string,
    readonly size: number,
    readonly limit: number,
  ) {
    super(`task '${taskName}': the arguments take ${size} bytes as JSON; the limit is ${limit}`);
    this.name = "ArgsTooLargeError";
  }
}

/** The arguments nest deeper than the worker can read (100 levels). */
export class ArgsTooDeepError extends AkadzeError {
  constructor(
    readonly taskName: string,
    readonly limit: number,
  ) {
    super(`task '${taskName}': the arguments nest deeper than ${limit} levels`);
    this.name = "ArgsTooDeepError";
  }
}

// -- the manifest's types (akadze_codegen/signature.py) ---------------------------------------

export type Lit = string | number | boolean | null | { enum: string; member: string };
export interface Limits {
  gt?: number | string;
  ge?: number | string;
  lt?: number | string;
  le?: number | string;
  multiple_of?: number | string;
  pattern?: string;
  min_length?: number;
  max_length?: number;
  tz?: boolean;
  max_digits?: number;
  decimal_places?: number;
}
export type TypeNode =
  | { k: "prim"; name: string }
  | { k: "seq"; kind: string; item: TypeNode }
  | { k: "tuple"; items: TypeNode[] }
  | { k: "dict"; key: TypeNode; value: TypeNode; mapping?: boolean }
  | { k: "union"; members: TypeNode[]; discriminator?: string }
  | { k: "literal"; values: Lit[] }
  | { k: "ref"; name: string; args?: TypeNode[] }
  | { k: "var"; name: string }
  | { k: "annotated"; type: TypeNode; meta: Limits }
  | { k: "json"; type: TypeNode };
export interface FieldDef {
  name: string;
  wire: string;
  type: TypeNode;
  required: boolean;
  literal_default?: boolean;
}
export type Definition =
  | { kind: "struct"; name: string; fields: FieldDef[]; type_params?: string[]; forbid_unknown?: boolean }
  | { kind: "typeddict"; name: string; fields: FieldDef[] }
  | { kind: "namedtuple"; name: string; fields: FieldDef[] }
  | { kind: "enum"; name: string; base: string; members: [string, string | number][] }
  | { kind: "newtype"; name: string; type: TypeNode };
export interface ParamDef {
  name: string;
  type: TypeNode;
  required: boolean;
}
export interface TaskSpec {
  name: string;
  queue: string;
  priority: number;
  maxAttempts: number;
  argsFp: string;
  params: ParamDef[];
  /** the task's Unique: the argument names (null: all), the window as msgspec writes it */
  unique?: { args: string[] | null; periodS: number | null; periodText: string; states: string[] };
  /** the task's Limit: a job due now is parked by its enqueue, in the group of its `key`
   * argument (null: one group), as akadze's own enqueue parks it */
  limit?: { concurrency: number | null; rate: number | null; perS: number | null; key: string | null };
}

// -- configuration -------------------------------------------------------------------------------

const settings = { maxArgsBytes: 1024 * 1024, validate: true };

/** Process-wide settings: `maxArgsBytes` must match the worker app's limit if it changed it;
 * `validate: false` turns the type and constraint checks off (names are still checked). */
export function configure(options: { maxArgsBytes?: number; validate?: boolean }): void {
  if (options.maxArgsBytes !== undefined) settings.maxArgsBytes = options.maxArgsBytes;
  if (options.validate !== undefined) settings.validate = options.validate;
}

/** Arguments and results nest at most this many levels (akadze.codec.stored.MAX_JSON_DEPTH). */
export const MAX_JSON_DEPTH = 100;

// -- the walk: check a value and build the JSON the worker reads --------------------------------

/** A wire value: JSON, with int64-safe integers kept as bigint. */
type Wire = null | boolean | number | bigint | string | Wire[] | { [key: string]: Wire };

class Refusal {
  constructor(
    readonly problem: string,
    readonly path: string,
  ) {}
}

type Env = Record<string, TypeNode>;

/** The type variables of a call's top-level parameters: none. */
const NO_VARS: Env = Object.freeze({}) as Env;
/** The values of an enum, built once per enum. */
const enumValues = new WeakMap<object, (string | number)[]>();
/** The wire names of a field list, built once per list. */
const wireNames = new WeakMap<FieldDef[], Set<string>>();

class Walker {
  /** whether the wire value holds a bigint (JSON.stringify cannot write one) */
  big = false;

  constructor(
    readonly types: Record<string, Definition>,
    readonly check: boolean,
  ) {}

  refuse(problem: string, path: string): never {
    throw new Refusal(problem, path);
  }

  walk(node: TypeNode, value: unknown, path: string, env: Env, depth: number): Wire {
    if (depth > MAX_JSON_DEPTH && isContainer(value)) throw new DepthExceeded();
    switch (node.k) {
      case "prim":
        return this.prim(node.name, value, path, depth, undefined);
      case "annotated":
        if (node.type.k === "prim") return this.prim(node.type.name, value, path, depth, node.meta);
        return this.constrained(this.walk(node.type, value, path, env, depth), node.meta, path, node.type);
      case "seq":
        return this.seq(node, value, path, env, depth, undefined);
      case "tuple": {
        const items = arrayOf(value);
        if (items === null) return this.refuse(`Expected \`array\`, got \`${kind(value)}\``, path);
        if (items.length !== node.items.length)
          return this.refuse(`Expected \`array\` of length ${node.items.length}`, path);
        return node.items.map((t, i) => this.walk(t, items[i], `${path}[${i}]`, env, depth + 1));
      }
      case "dict":
        return this.dict(node.key, node.value, value, path, env, depth);
      case "union":
        return this.union(node, value, path, env, depth);
      case "literal":
        return this.literal(node.values, value, path);
      case "var":
        return this.walk(env[node.name] ?? { k: "prim", name: "any" }, value, path, env, depth);
      case "json": {
        if (typeof value !== "string") return this.refuse(`Expected \`str\`, got \`${kind(value)}\``, path);
        let inner: unknown;
        try {
          inner = JSON.parse(value);
        } catch {
          return this.refuse("Expected `str` holding JSON", path);
        }
        this.walk(node.type, inner, `${path}`, env, 0);
        return this.str(value, path);
      }
      case "ref":
        return this.ref(node, value, path, env, depth);
    }
  }

  ref(node: { name: string; args?: TypeNode[] }, value: unknown, path: string, env: Env, depth: number): Wire {
    const def = this.types[node.name];
    if (def === undefined) return this.any(value, path, depth);
    switch (def.kind) {
      case "newtype":
        return this.walk(def.type, value, path, env, depth);
      case "enum": {
        let values = enumValues.get(def);
        if (values === undefined) {
          values = def.members.map((m) => m[1]);
          enumValues.set(def, values);
        }
        const isInt = def.base !== "enum" && def.base !== "str" && def.base !== "strenum";
        if (def.base === "flag" || def.base === "intflag") {
          if (typeof value !== "number" || !Number.isInteger(value))
            return this.refuse(`Expected \`int\`, got \`${kind(value)}\``, path);
          const all = values.reduce<number>((a, v) => a | (v as number), 0);
          if (value < 0 || (value & ~all) !== 0) return this.refuse("Invalid enum value", path);
          return value;
        }
        if (!values.includes(value as string | number)) {
          const expected = typeof values[0] === "number" || isInt ? "int" : "str";
          if (typeof value !== (expected === "int" ? "number" : "string"))
            return this.refuse(`Expected \`${expected}\`, got \`${kind(value)}\``, path);
          return this.refuse("Invalid enum value", path);
        }
        return value as Wire;
      }
      case "namedtuple": {
        const items = arrayOf(value);
        if (items === null) return this.refuse(`Expected \`array\`, got \`${kind(value)}\``, path);
        if (items.length !== def.fields.length)
          return this.refuse(`Expected \`array\` of length ${def.fields.length}`, path);
        return def.fields.map((f, i) => this.walk(f.type, items[i], `${path}[${i}]`, env, depth + 1));
      }
      case "struct":
      case "typeddict": {
        let inner = env;
        if (def.kind === "struct" && def.type_params && def.type_params.length > 0) {
          inner = {};
          def.type_params.forEach((p, i) => {
            inner[p] = node.args?.[i] ?? { k: "prim", name: "any" };
          });
        }
        const forbid = def.kind === "struct" && def.forbid_unknown === true;
        return this.object(def.fields, value, path, inner, depth, forbid);
      }
    }
  }

  object(
    fields: FieldDef[],
    value: unknown,
    path: string,
    env: Env,
    depth: number,
    forbid: boolean,
  ): Wire {
    if (!isPlainObject(value)) return this.refuse(`Expected \`object\`, got \`${kind(value)}\``, path);
    const out: { [key: string]: Wire } = {};
    let known = wireNames.get(fields);
    if (known === undefined) {
      known = new Set(fields.map((f) => f.wire));
      wireNames.set(fields, known);
    }
    for (const f of fields) {
      const given = (value as Record<string, unknown>)[f.wire];
      if (given === undefined) {
        if (f.literal_default && f.type.k === "literal") {
          out[f.wire] = this.literal(f.type.values, f.type.values[0] ?? null, `${path}.${f.wire}`);
          continue;
        }
        if (f.required) return this.refuse(`Object missing required field \`${f.wire}\``, path);
        continue;
      }
      out[f.wire] = this.walk(f.type, given, `${path}.${f.wire}`, env, depth + 1);
    }
    const record = value as Record<string, unknown>;
    for (const key in record) {
      if (known.has(key) || record[key] === undefined) continue;
      if (forbid) return this.refuse(`Object contains unknown field \`${key}\``, path);
      out[key] = this.any(record[key], `${path}.${key}`, depth + 1);
    }
    return out;
  }

  union(node: { members: TypeNode[]; discriminator?: string }, value: unknown, path: string, env: Env, depth: number): Wire {
    const field = node.discriminator;
    if (field !== undefined && isPlainObject(value)) {
      // a pydantic discriminated union: the tag picks the member, and must be there
      const tag = (value as Record<string, unknown>)[field];
      if (tag === undefined) return this.refuse(`Object missing required field \`${field}\``, path);
      for (const member of node.members) {
        if (this.tagOf(member, field).some((v) => v === tag)) return this.walk(member, value, path, env, depth);
      }
      if (node.members.every((m) => this.tagOf(m, field).length > 0))
        return this.refuse("Invalid value", `${path}.${field}`);
    }
    // the members that can take a value of this JSON kind first: no refusal thrown and caught
    // for an optional value that is null, or a number given to a str | int
    for (const member of node.members) {
      if (!this.takesKind(member, value)) continue;
      try {
        return this.walk(member, value, path, env, depth);
      } catch (e) {
        if (!(e instanceof Refusal)) throw e;
        break;
      }
    }
    const refusals: Refusal[] = [];
    for (const member of node.members) {
      try {
        return this.walk(member, value, path, env, depth);
      } catch (e) {
        if (!(e instanceof Refusal)) throw e;
        refusals.push(e);
      }
    }
    // the one member of the value's own JSON kind says what is wrong inside it
    const same = node.members.map((m) => describe(m, this.types) === `\`${jsonKind(value)}\``);
    if (same.filter(Boolean).length === 1) throw refusals[same.indexOf(true)];
    return this.refuse(`Expected ${node.members.map((m) => describe(m, this.types)).join(" | ")}`, path);
  }

  /** Whether ``member`` can take a value of ``value``'s JSON kind at all (a cheap pre-check). */
  takesKind(member: TypeNode, value: unknown): boolean {
    const node = member.k === "annotated" ? member.type : member;
    if (node.k !== "prim") return value !== null && typeof value === "object";
    switch (node.name) {
      case "none":
        return value === null;
      case "bool":
        return typeof value === "boolean";
      case "int":
      case "float":
        return typeof value === "number" || typeof value === "bigint";
      case "any":
        return true;
      default:
        return typeof value === "string" || (value !== null && typeof value === "object");
    }
  }

  /** The tag values of a discriminated union's member (none for a member that has no tag). */
  tagOf(member: TypeNode, field: string): (string | number | boolean | null)[] {
    if (member.k !== "ref") return [];
    const def = this.types[member.name];
    if (def === undefined || (def.kind !== "struct" && def.kind !== "typeddict")) return [];
    const f = def.fields.find((x) => x.wire === field);
    if (f === undefined || f.type.k !== "literal") return [];
    return f.type.values.map((v) => this.litValue(v));
  }

  litValue(v: Lit): string | number | boolean | null {
    if (v !== null && typeof v === "object") {
      const def = this.types[v.enum];
      if (def?.kind === "enum") return def.members.find((m) => m[0] === v.member)?.[1] ?? null;
      return null;
    }
    return v;
  }

  literal(values: Lit[], value: unknown, path: string): Wire {
    for (const v of values) {
      const lit = this.litValue(v);
      if (lit === value) return lit;
    }
    return this.refuse("Invalid value", path);
  }

  seq(node: { kind: string; item: TypeNode }, value: unknown, path: string, env: Env, depth: number, meta: Limits | undefined): Wire {
    const items = arrayOf(value, node.kind === "set" || node.kind === "frozenset");
    if (items === null) return this.refuse(`Expected \`array\`, got \`${kind(value)}\``, path);
    const out = items.map((item, i) => this.walk(node.item, item, `${path}[${i}]`, env, depth + 1));
    if (meta !== undefined) {
      let count = out.length;
      if (node.kind === "set" || node.kind === "frozenset") count = new Set(out.map((w) => canonical(w))).size;
      this.lengths(count, meta, path, "array");
    }
    return out;
  }

  dict(keyType: TypeNode, valueType: TypeNode, value: unknown, path: string, env: Env, depth: number): Wire {
    let entries: [unknown, unknown][];
    if (value instanceof Map) entries = [...value.entries()];
    else if (isPlainObject(value)) entries = Object.entries(value as object);
    else return this.refuse(`Expected \`object\`, got \`${kind(value)}\``, path);
    const out: { [key: string]: Wire } = {};
    for (const [key, item] of entries) {
      if (item === undefined) continue;
      const text = this.key(keyType, key, path, env);
      out[text] = this.walk(valueType, item, `${path}[...]`, env, depth + 1);
    }
    return out;
  }

  key(keyType: TypeNode, key: unknown, path: string, env: Env): string {
    const base = keyType.k === "annotated" ? keyType.type : keyType;
    if (base.k === "prim" && (base.name === "int" || base.name === "float")) {
      const text = typeof key === "number" || typeof key === "bigint" ? String(key) : key;
      if (typeof text !== "string" || !(base.name === "int" ? INT_TEXT : FLOAT_TEXT).test(text))
        return this.refuse(`Expected \`${base.name}\``, `key\` in \`${path}`);
      const number = base.name === "int" ? BigInt(text) : Number(text);
      try {
        this.walk(keyType, base.name === "int" && Number.isSafeInteger(Number(number)) ? Number(number) : number, path, env, 0);
      } catch (e) {
        if (e instanceof Refusal) this.refuse(e.problem, `key\` in \`${path}`);
        throw e;
      }
      return text;
    }
    try {
      const wire = this.walk(keyType, key, path, env, 0);
      if (typeof wire !== "string") return this.refuse("Expected `str`", `key\` in \`${path}`);
      return wire;
    } catch (e) {
      if (e instanceof Refusal) this.refuse(e.problem, `key\` in \`${path}`);
      throw e;
    }
  }

  any(value: unknown, path: string, depth: number): Wire {
    if (depth > MAX_JSON_DEPTH && isContainer(value)) throw new DepthExceeded();
    if (value === null || typeof value === "boolean") return value as Wire;
    if (typeof value === "string") return this.str(value, path);
    if (typeof value === "number") {
      if (!Number.isFinite(value)) return this.refuse("Expected a finite number", path);
      return value;
    }
    if (typeof value === "bigint") {
      this.big = true;
      return value;
    }
    if (value instanceof Date) return formatDatetime(value, this, path, undefined);
    if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
    const items = arrayOf(value);
    if (items !== null) return items.map((v, i) => this.any(v, `${path}[${i}]`, depth + 1));
    if (value instanceof Map || isPlainObject(value)) {
      const out: { [key: string]: Wire } = {};
      const entries = value instanceof Map ? [...value.entries()] : Object.entries(value as object);
      for (const [k, v] of entries) {
        if (v === undefined) continue;
        if (typeof k !== "string") return this.refuse("Expected `str` keys", path);
        out[this.str(k, path)] = this.any(v, `${path}.${k}`, depth + 1);
      }
      return out;
    }
    return this.refuse(`Expected a JSON value, got \`${kind(value)}\``, path);
  }

  str(value: string, path: string): string {
    if (!isWellFormed(value)) return this.refuse("a string holds a lone surrogate, which is not valid Unicode", path);
    if (value.includes("\u0000")) return this.refuse("a string holds a NUL character, which PostgreSQL cannot store in JSON", path);
    return value;
  }

  lengths(count: number, meta: Limits, path: string, what: string): void {
    if (meta.min_length !== undefined && count < meta.min_length)
      this.refuse(`Expected \`${what}\` of length >= ${meta.min_length}`, path);
    if (meta.max_length !== undefined && count > meta.max_length)
      this.refuse(`Expected \`${what}\` of length <= ${meta.max_length}`, path);
  }

  constrained(wire: Wire, meta: Limits, path: string, type: TypeNode): Wire {
    if (!this.check) return wire;
    if (type.k === "seq" || type.k === "dict" || type.k === "tuple") {
      let count = Array.isArray(wire) ? wire.length : Object.keys(wire as object).length;
      if (type.k === "seq" && (type.kind === "set" || type.kind === "frozenset"))
        count = new Set((wire as Wire[]).map((w) => canonical(w))).size;
      this.lengths(count, meta, path, Array.isArray(wire) ? "array" : "object");
    }
    return wire;
  }

  prim(name: string, value: unknown, path: string, depth: number, meta: Limits | undefined): Wire {
    const check = this.check;
    switch (name) {
      case "any":
        return this.any(value, path, depth);
      case "none":
        if (value !== null) return this.refuse(`Expected \`null\`, got \`${kind(value)}\``, path);
        return null;
      case "bool":
        if (typeof value !== "boolean") return this.refuse(`Expected \`bool\`, got \`${kind(value)}\``, path);
        return value;
      case "int": {
        if (typeof value === "bigint") {
          if (check && meta) numberBounds(this, value, meta, path, "int");
          if (Number.isSafeInteger(Number(value))) return Number(value);
          this.big = true;
          return value;
        }
        if (typeof value !== "number" || !Number.isInteger(value))
          return this.refuse(`Expected \`int\`, got \`${kind(value)}\``, path);
        if (!Number.isSafeInteger(value))
          return this.refuse("Expected `int` within 2**53 (pass a bigint for a larger one)", path);
        if (check && meta) numberBounds(this, value, meta, path, "int");
        return value;
      }
      case "float": {
        if (typeof value === "bigint") {
          if (check && meta) numberBounds(this, Number(value), meta, path, "float");
          this.big = true;
          return value;
        }
        if (typeof value !== "number") return this.refuse(`Expected \`float\`, got \`${kind(value)}\``, path);
        if (!Number.isFinite(value)) return this.refuse("Expected a finite `float`", path);
        if (check && meta) numberBounds(this, value, meta, path, "float");
        return value;
      }
      case "str":
      case "path": {
        if (typeof value !== "string") return this.refuse(`Expected \`str\`, got \`${kind(value)}\``, path);
        if (check && meta) {
          this.lengths([...value].length, meta, path, "str");
          if (meta.pattern !== undefined && !pattern(meta.pattern).test(value))
            this.refuse(`Expected \`str\` matching regex '${meta.pattern}'`, path);
        }
        return this.str(value, path);
      }
      case "bytes": {
        let bytes: Uint8Array;
        if (value instanceof Uint8Array) bytes = value;
        else if (typeof value === "string" && BASE64.test(value) && value.length % 4 === 0) bytes = Buffer.from(value, "base64");
        else return this.refuse(`Expected \`bytes\`, got \`${kind(value)}\``, path);
        if (check && meta) this.lengths(bytes.length, meta, path, "bytes");
        return Buffer.from(bytes).toString("base64");
      }
      case "datetime":
        return formatDatetime(value, this, path, meta);
      case "date":
        return checkDate(value, this, path, meta);
      case "time":
        return checkTime(value, this, path, meta);
      case "timedelta":
        return checkDuration(value, this, path, meta);
      case "uuid": {
        if (typeof value !== "string") return this.refuse(`Expected \`uuid\`, got \`${kind(value)}\``, path);
        const hex = value.replace(/-/g, "");
        if (!(UUID_TEXT.test(value) || /^[0-9a-fA-F]{32}$/.test(value))) return this.refuse("Invalid UUID", path);
        const l = hex.toLowerCase();
        return `${l.slice(0, 8)}-${l.slice(8, 12)}-${l.slice(12, 16)}-${l.slice(16, 20)}-${l.slice(20)}`;
      }
      case "decimal":
        return checkDecimal(value, this, path, meta);
      default:
        if (name in IP_KINDS) {
          if (typeof value !== "string") return this.refuse(`Expected \`str\`, got \`${kind(value)}\``, path);
          if (check && !IP_KINDS[name].some((parse) => parse(value))) return this.refuse(`Expected \`str\` holding ${IP_NAMES[name]}`, path);
          return value;
        }
        return this.any(value, path, depth);
    }
  }
}

class DepthExceeded {}

const INT_TEXT = /^-?(0|[1-9][0-9]*)$/;
const FLOAT_TEXT = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
const UUID_TEXT = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Whether ``text`` is valid Unicode (no lone surrogate): String.prototype.isWellFormed where
 * the runtime has it (Node 20), the regular expression elsewhere. */
const isWellFormed: (text: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === "function"
    ? (text) => (text as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (text) => !LONE_SURROGATE.test(text);

const patterns = new Map<string, RegExp>();
function pattern(text: string): RegExp {
  let re = patterns.get(text);
  if (re === undefined) {
    re = new RegExp(text, "u");
    patterns.set(text, re);
  }
  return re;
}

function kind(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (typeof value === "bigint") return "int";
  if (typeof value === "string") return "str";
  if (Array.isArray(value)) return "array";
  if (value instanceof Date) return "datetime";
  if (value instanceof Uint8Array) return "bytes";
  return "object";
}

function isPlainObject(value: unknown): boolean {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Whether ``value`` (a container at ``depth``) nests containers deeper than MAX_JSON_DEPTH. */
function tooDeep(value: unknown, depth: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (Array.isArray(value)) {
    if (depth > MAX_JSON_DEPTH) return true;
    for (let i = 0; i < value.length; i++) if (tooDeep(value[i], depth + 1)) return true;
    return false;
  }
  if (value instanceof Map || value instanceof Set) {
    if (depth > MAX_JSON_DEPTH) return true;
    for (const item of value.values()) if (tooDeep(item, depth + 1)) return true;
    return false;
  }
  if (!isPlainObject(value)) return false;
  if (depth > MAX_JSON_DEPTH) return true;
  const record = value as Record<string, unknown>;
  for (const key in record) if (tooDeep(record[key], depth + 1)) return true;
  return false;
}

function isContainer(value: unknown): boolean {
  return Array.isArray(value) || value instanceof Set || value instanceof Map || isPlainObject(value);
}

function arrayOf(value: unknown, sets = false): unknown[] | null {
  if (Array.isArray(value)) return value;
  if (sets && value instanceof Set) return [...value];
  return null;
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value) || value instanceof Set) return "array";
  if (isPlainObject(value) || value instanceof Map) return "object";
  return "value";
}

function describe(node: TypeNode, types: Record<string, Definition>): string {
  switch (node.k) {
    case "prim":
      return `\`${node.name}\``;
    case "annotated":
      return describe(node.type, types);
    case "ref":
      return types[node.name]?.kind === "enum" ? "`enum`" : "`object`";
    case "seq":
    case "tuple":
      return "`array`";
    case "dict":
      return "`object`";
    case "literal":
      return "`literal`";
    default:
      return "`value`";
  }
}

// -- numbers, decimals ------------------------------------------------------------------------

function numberBounds(w: Walker, value: number | bigint, meta: Limits, path: string, what: string): void {
  const big = typeof value === "bigint";
  const cmp = (limit: number | string): number => {
    if (big) {
      const l = Number(limit);
      if (Number.isInteger(l)) {
        const bl = BigInt(l);
        return value < bl ? -1 : value > bl ? 1 : 0;
      }
      const v = Number(value);
      return v < l ? -1 : v > l ? 1 : 0;
    }
    const l = Number(limit);
    return (value as number) < l ? -1 : (value as number) > l ? 1 : 0;
  };
  if (meta.gt !== undefined && !(cmp(meta.gt) > 0)) w.refuse(`Expected \`${what}\` > ${meta.gt}`, path);
  if (meta.ge !== undefined && !(cmp(meta.ge) >= 0)) w.refuse(`Expected \`${what}\` >= ${meta.ge}`, path);
  if (meta.lt !== undefined && !(cmp(meta.lt) < 0)) w.refuse(`Expected \`${what}\` < ${meta.lt}`, path);
  if (meta.le !== undefined && !(cmp(meta.le) <= 0)) w.refuse(`Expected \`${what}\` <= ${meta.le}`, path);
  if (meta.multiple_of !== undefined) {
    const m = Number(meta.multiple_of);
    let ok: boolean;
    if (Number.isInteger(m) && (big || Number.isInteger(value as number))) {
      ok = BigInt(value) % BigInt(m) === 0n;
    } else {
      // as pydantic checks a float: the remainder of the division, exactly zero
      const v = Number(value);
      ok = v % m === 0;
    }
    if (!ok) w.refuse(`Expected \`${what}\` that is a multiple of ${meta.multiple_of}`, path);
  }
}

/** A decimal as sign, digits (a bigint) and exponent: the value is digits * 10 ** exponent. */
interface Dec {
  digits: bigint;
  exponent: number;
}

const DECIMAL_TEXT = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;

function parseDecimal(text: string): Dec {
  const t = text.trim();
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(t);
  if (m === null) throw new Error("not a decimal");
  const whole = m[2] ?? "";
  const frac = m[3] ?? "";
  const exp = Number(m[4] ?? "0") - frac.length;
  let digits = BigInt((whole + frac).replace(/^0+(?=\d)/, "") || "0");
  if (m[1] === "-") digits = -digits;
  return { digits, exponent: exp };
}

function compareDec(a: Dec, b: Dec): number {
  const e = Math.min(a.exponent, b.exponent);
  const x = a.digits * 10n ** BigInt(a.exponent - e);
  const y = b.digits * 10n ** BigInt(b.exponent - e);
  return x < y ? -1 : x > y ? 1 : 0;
}

function checkDecimal(value: unknown, w: Walker, path: string, meta: Limits | undefined): Wire {
  let text: string;
  if (typeof value === "string") {
    if (!DECIMAL_TEXT.test(value)) {
      if (/^\s*[+-]?(nan|snan|inf|infinity)\s*$/i.test(value)) return w.refuse("Expected a finite `decimal`", path);
      return w.refuse("Invalid decimal string", path);
    }
    text = value;
  } else if (typeof value === "bigint") {
    text = value.toString();
  } else if (typeof value === "number") {
    if (!Number.isInteger(value))
      return w.refuse(
        "Expected `decimal` as a string or an integer, got `float`: a float cannot carry an exact decimal; pass a string",
        path,
      );
    if (!Number.isSafeInteger(value)) return w.refuse("Expected `decimal` within 2**53 as a number; pass a string", path);
    text = String(value);
  } else {
    return w.refuse(`Expected \`decimal\`, got \`${kind(value)}\``, path);
  }
  if (w.check && meta !== undefined) {
    const d = parseDecimal(text);
    const bound = (key: "gt" | "ge" | "lt" | "le", sign: string, ok: (c: number) => boolean): void => {
      const limit = meta[key];
      if (limit !== undefined && !ok(compareDec(d, parseDecimal(String(limit)))))
        w.refuse(`Expected \`decimal\` ${sign} ${limit}`, path);
    };
    bound("gt", ">", (c) => c > 0);
    bound("ge", ">=", (c) => c >= 0);
    bound("lt", "<", (c) => c < 0);
    bound("le", "<=", (c) => c <= 0);
    if (meta.multiple_of !== undefined) {
      const m = parseDecimal(String(meta.multiple_of));
      const e = Math.min(d.exponent, m.exponent);
      const x = d.digits * 10n ** BigInt(d.exponent - e);
      const y = m.digits * 10n ** BigInt(m.exponent - e);
      if (y !== 0n && x % y !== 0n) w.refuse(`Expected \`decimal\` that is a multiple of ${meta.multiple_of}`, path);
    }
    if (meta.max_digits !== undefined || meta.decimal_places !== undefined) {
      // as pydantic counts them: of the normalized value, trailing zeros of an integer counted
      let digits = d.digits < 0n ? -d.digits : d.digits;
      let exponent = d.exponent;
      if (digits === 0n) exponent = 0;
      while (digits !== 0n && digits % 10n === 0n) {
        digits /= 10n;
        exponent += 1;
      }
      const n = digits === 0n ? 1 : digits.toString().length;
      const [count, places] = exponent >= 0 ? [n + exponent, 0] : [Math.max(n, -exponent), -exponent];
      if (meta.max_digits !== undefined && count > meta.max_digits)
        w.refuse(`Expected \`decimal\` with at most ${meta.max_digits} digits`, path);
      if (meta.decimal_places !== undefined) {
        if (places > meta.decimal_places)
          w.refuse(`Expected \`decimal\` with at most ${meta.decimal_places} decimal places`, path);
        if (meta.max_digits !== undefined && count - places > meta.max_digits - meta.decimal_places)
          w.refuse(`Expected \`decimal\` with at most ${meta.max_digits - meta.decimal_places} digits before the point`, path);
      }
    }
  }
  if (typeof value === "bigint") w.big = true;
  return typeof value === "string" ? value : typeof value === "bigint" ? value : (value as number);
}

// -- dates and times, as msgspec writes and reads them ----------------------------------------

const DATETIME_TEXT =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?$/;
const DATE_TEXT = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME_TEXT = /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?$/;

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

function validDate(y: number, m: number, d: number): boolean {
  if (y < 1 || m < 1 || m > 12 || d < 1) return false;
  const days = [31, (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  return d <= (days[m - 1] as number);
}

function offsetMinutes(tz: string | undefined): number | null {
  if (tz === undefined) return null;
  if (tz === "Z" || tz === "z") return 0;
  const sign = tz[0] === "-" ? -1 : 1;
  const digits = tz.slice(1).replace(":", "");
  const h = Number(digits.slice(0, 2));
  const m = Number(digits.slice(2));
  if (h > 23 || m > 59) return NaN;
  return sign * (h * 60 + m);
}

/** A datetime's wire text and its instant in microseconds (null offset: naive). */
function parseDatetime(text: string): { micros: bigint; offset: number | null } | null {
  const m = DATETIME_TEXT.exec(text);
  if (m === null) return null;
  const [y, mo, d, h, mi] = [1, 2, 3, 4, 5].map((i) => Number(m[i]));
  const s = Number(m[6] ?? "0");
  if (!validDate(y as number, mo as number, d as number) || (h as number) > 23 || (mi as number) > 59 || s > 59) return null;
  const offset = offsetMinutes(m[8]);
  if (Number.isNaN(offset)) return null;
  const frac = (m[7] ?? "").padEnd(6, "0").slice(0, 6);
  const day = BigInt(Date.UTC(y as number, (mo as number) - 1, d as number, h as number, mi as number, s) / 1000);
  const micros = day * 1_000_000n + BigInt(frac || "0") - BigInt((offset ?? 0) * 60) * 1_000_000n;
  return { micros, offset };
}

function formatDatetime(value: unknown, w: Walker, path: string, meta: Limits | undefined): Wire {
  let text: string;
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) return w.refuse("Invalid `datetime`: an invalid Date", path);
    const y = value.getUTCFullYear();
    if (y < 1 || y > 9999) return w.refuse("Expected `datetime` within the years 1 to 9999", path);
    const frac = value.getUTCMilliseconds() ? `.${pad(value.getUTCMilliseconds() * 1000, 6)}` : "";
    const head = `${pad(y, 4)}-${pad(value.getUTCMonth() + 1, 2)}-${pad(value.getUTCDate(), 2)}`;
    const clock = `${pad(value.getUTCHours(), 2)}:${pad(value.getUTCMinutes(), 2)}:${pad(value.getUTCSeconds(), 2)}`;
    // a naive datetime (tz=False) takes the Date's UTC wall-clock time
    text = `${head}T${clock}${frac}${meta?.tz === false ? "" : "Z"}`;
  } else if (typeof value === "string") {
    text = value;
  } else {
    return w.refuse(`Expected \`datetime\`, got \`${kind(value)}\``, path);
  }
  const parsed = parseDatetime(text);
  if (parsed === null) return w.refuse("Invalid RFC3339 encoded datetime", path);
  if (w.check && meta !== undefined) {
    if (meta.tz === true && parsed.offset === null) w.refuse("Expected `datetime` with a timezone component", path);
    if (meta.tz === false && parsed.offset !== null) w.refuse("Expected `datetime` with no timezone component", path);
    for (const [key, sign, ok] of BOUNDS) {
      const limit = meta[key];
      if (limit === undefined) continue;
      const l = parseDatetime(String(limit));
      if (l === null || (l.offset === null) !== (parsed.offset === null)) continue; // left to the worker
      const c = parsed.micros < l.micros ? -1 : parsed.micros > l.micros ? 1 : 0;
      if (!ok(c)) w.refuse(`Expected \`datetime\` ${sign} ${limit}`, path);
    }
  }
  return w.str(text, path);
}

const BOUNDS: ["gt" | "ge" | "lt" | "le", string, (c: number) => boolean][] = [
  ["gt", ">", (c) => c > 0],
  ["ge", ">=", (c) => c >= 0],
  ["lt", "<", (c) => c < 0],
  ["le", "<=", (c) => c <= 0],
];

function checkDate(value: unknown, w: Walker, path: string, meta: Limits | undefined): Wire {
  let text: string;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return w.refuse("Invalid `date`: an invalid Date", path);
    text = `${pad(value.getUTCFullYear(), 4)}-${pad(value.getUTCMonth() + 1, 2)}-${pad(value.getUTCDate(), 2)}`;
  } else if (typeof value === "string") {
    text = value;
  } else {
    return w.refuse(`Expected \`date\`, got \`${kind(value)}\``, path);
  }
  const m = DATE_TEXT.exec(text);
  if (m === null || !validDate(Number(m[1]), Number(m[2]), Number(m[3]))) return w.refuse("Invalid RFC3339 encoded date", path);
  if (w.check && meta !== undefined) {
    for (const [key, sign, ok] of BOUNDS) {
      const limit = meta[key];
      if (limit === undefined) continue;
      const c = text < String(limit) ? -1 : text > String(limit) ? 1 : 0;
      if (!ok(c)) w.refuse(`Expected \`date\` ${sign} ${limit}`, path);
    }
  }
  return text;
}

function checkTime(value: unknown, w: Walker, path: string, meta: Limits | undefined): Wire {
  if (typeof value !== "string") return w.refuse(`Expected \`time\`, got \`${kind(value)}\``, path);
  const m = TIME_TEXT.exec(value);
  if (m === null || Number(m[1]) > 23 || Number(m[2]) > 59 || Number(m[3] ?? "0") > 59)
    return w.refuse("Invalid ISO8601 encoded time", path);
  const offset = offsetMinutes(m[5]);
  if (Number.isNaN(offset)) return w.refuse("Invalid ISO8601 encoded time", path);
  if (w.check && meta !== undefined) {
    if (meta.tz === true && offset === null) w.refuse("Expected `time` with a timezone component", path);
    if (meta.tz === false && offset !== null) w.refuse("Expected `time` with no timezone component", path);
    const micros = (t: RegExpExecArray): number =>
      ((Number(t[1]) * 60 + Number(t[2])) * 60 + Number(t[3] ?? "0")) * 1e6 + Number((t[4] ?? "").padEnd(6, "0").slice(0, 6) || "0");
    for (const [key, sign, ok] of BOUNDS) {
      const limit = meta[key];
      if (limit === undefined) continue;
      const l = TIME_TEXT.exec(String(limit));
      if (l === null || (l[5] === undefined) !== (m[5] === undefined)) continue;
      const a = micros(m) - (offset ?? 0) * 60e6;
      const b = micros(l) - (offsetMinutes(l[5]) ?? 0) * 60e6;
      if (!ok(a < b ? -1 : a > b ? 1 : 0)) w.refuse(`Expected \`time\` ${sign} ${limit}`, path);
    }
  }
  return value;
}

const DURATION_TEXT = /^([-+]?)P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?$/;

/** A duration as msgspec writes a timedelta: ``P1DT2.5S``, ``-PT1.5S``, ``P0D``. */
function formatDuration(micros: bigint): string {
  if (micros === 0n) return "P0D";
  const sign = micros < 0n ? "-" : "";
  let rest = micros < 0n ? -micros : micros;
  const day = 86_400_000_000n;
  const days = rest / day;
  rest %= day;
  let text = `${sign}P${days ? `${days}D` : ""}`;
  if (rest) {
    const seconds = rest / 1_000_000n;
    const frac = (rest % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "");
    text += `T${seconds}${frac ? `.${frac}` : ""}S`;
  }
  return text;
}

function durationMicros(text: string): bigint | null {
  const m = DURATION_TEXT.exec(text);
  if (m === null || text === "P" || text.endsWith("T")) return null;
  const [, sign, d, h, mi, s] = m;
  if (d === undefined && h === undefined && mi === undefined && s === undefined) return null;
  const [whole, frac = ""] = (s ?? "0").split(".");
  let micros =
    ((BigInt(d ?? "0") * 24n + BigInt(h ?? "0")) * 60n + BigInt(mi ?? "0")) * 60_000_000n +
    BigInt(whole ?? "0") * 1_000_000n +
    BigInt(frac.padEnd(6, "0").slice(0, 6) || "0");
  if (sign === "-") micros = -micros;
  return micros;
}

function checkDuration(value: unknown, w: Walker, path: string, meta: Limits | undefined): Wire {
  let micros: bigint | null;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return w.refuse("Expected a finite duration", path);
    // as Python's timedelta(seconds=x): rounded to the microsecond, half to even
    const scaled = value * 1e6;
    let r = Math.round(scaled);
    if (Math.abs(scaled % 1) === 0.5 && r % 2 !== 0) r -= 1;
    micros = BigInt(r);
  } else if (typeof value === "string") {
    micros = durationMicros(value);
    if (micros === null) return w.refuse("Invalid ISO8601 duration", path);
  } else {
    return w.refuse(`Expected \`duration\`, got \`${kind(value)}\``, path);
  }
  const limit = 999_999_999n * 86_400_000_000n;
  if (micros > limit || micros < -limit) return w.refuse("Duration is out of range", path);
  if (w.check && meta !== undefined) {
    for (const [key, sign, ok] of BOUNDS) {
      const bound = meta[key];
      if (bound === undefined) continue;
      const b = parseDecimal(String(bound));
      const c = compareDec({ digits: micros, exponent: -6 }, b);
      if (!ok(c)) w.refuse(`Expected \`duration\` ${sign} ${formatDuration(BigInt(Math.round(Number(bound) * 1e6)))}`, path);
    }
  }
  return typeof value === "string" ? value : formatDuration(micros);
}

// -- network addresses, as Python's ipaddress parses them ------------------------------------

function ipv4(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || (p.length > 1 && p[0] === "0")) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

function ipv6(text: string): number[] | null {
  let t = text;
  const scope = t.indexOf("%");
  if (scope >= 0) {
    if (scope === t.length - 1 || t.slice(scope + 1).includes("/")) return null;
    t = t.slice(0, scope);
  }
  if (!/^[0-9a-fA-F:.]+$/.test(t)) return null;
  let groups = t.split(":");
  if (groups.length < 3) return null;
  let tail: number[] = [];
  const last = groups[groups.length - 1] as string;
  if (last.includes(".")) {
    const v4 = ipv4(last);
    if (v4 === null) return null;
    tail = [(v4[0] as number) * 256 + (v4[1] as number), (v4[2] as number) * 256 + (v4[3] as number)];
    groups = groups.slice(0, -1);
    groups.push("x");
  }
  const limit = 8;
  const skip = groups.indexOf("");
  let parts: string[];
  if (t.includes("::")) {
    if (t.indexOf("::") !== t.lastIndexOf("::")) return null;
    const [a, b] = t.split("::") as [string, string];
    const left = a === "" ? [] : a.split(":");
    let right = b === "" ? [] : b.split(":");
    if (tail.length) right = right.slice(0, -1).concat(["x"]);
    const have = left.length + right.length + (tail.length ? 1 : 0);
    const missing = limit - have;
    if (missing < 1) return null;
    parts = [...left, ...Array(missing).fill("0"), ...right];
  } else {
    if (skip >= 0) return null;
    parts = groups;
    if (parts.length + (tail.length ? 1 : 0) !== limit) return null;
  }
  const out: number[] = [];
  for (const p of parts) {
    if (p === "x") {
      out.push(...tail);
      continue;
    }
    if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return null;
    out.push(parseInt(p, 16));
  }
  return out.length === 8 ? out : null;
}

function network(text: string, parse: (t: string) => number[] | null, bits: number, strict: boolean): boolean {
  const [address, prefix, ...rest] = text.split("/");
  if (rest.length || address === undefined) return false;
  const words = parse(address);
  if (words === null) return false;
  if (prefix === undefined) return true;
  let length: number;
  if (/^\d+$/.test(prefix)) {
    if (prefix.length > 1 && prefix[0] === "0" && bits === 128) return false;
    length = Number(prefix);
    if (length > bits) return false;
  } else if (bits === 32) {
    const mask = ipv4(prefix);
    if (mask === null) return false;
    const n = mask.reduce((a, b) => a * 256 + b, 0) >>> 0;
    const ones = n.toString(2).replace(/^1*/, "");
    const inverted = (~n >>> 0).toString(2).replace(/^1*/, "");
    if (/^0*$/.test(ones)) length = 32 - ones.length;
    else if (/^0*$/.test(inverted)) length = inverted.length === 32 ? 0 : 32 - inverted.length;
    else return false;
  } else {
    return false;
  }
  if (!strict) return true;
  const size = bits === 32 ? 8 : 16;
  for (let bit = length; bit < bits; bit++) {
    const word = words[Math.floor(bit / size)] as number;
    if ((word >> (size - 1 - (bit % size))) & 1) return false;
  }
  return true;
}

type Parse = (text: string) => boolean;
const v4a: Parse = (t) => ipv4(t) !== null;
const v6a: Parse = (t) => ipv6(t) !== null;
const v4n: Parse = (t) => network(t, ipv4, 32, true);
const v6n: Parse = (t) => !t.includes("%") && network(t, ipv6, 128, true);
const v4i: Parse = (t) => network(t, ipv4, 32, false);
const v6i: Parse = (t) => !t.includes("%") && network(t, ipv6, 128, false);
const IP_KINDS: Record<string, Parse[]> = {
  ipv4address: [v4a],
  ipv6address: [v6a],
  ipaddress: [v4a, v6a],
  ipv4network: [v4n],
  ipv6network: [v6n],
  ipnetwork: [v4n, v6n],
  ipv4interface: [v4i],
  ipv6interface: [v6i],
  ipinterface: [v4i, v6i],
};
const IP_NAMES: Record<string, string> = {
  ipv4address: "an IPv4 address",
  ipv6address: "an IPv6 address",
  ipaddress: "an IPv4 address or an IPv6 address",
  ipv4network: "an IPv4 network",
  ipv6network: "an IPv6 network",
  ipnetwork: "an IPv4 network or an IPv6 network",
  ipv4interface: "an IPv4 interface",
  ipv6interface: "an IPv6 interface",
  ipinterface: "an IPv4 interface or an IPv6 interface",
};

// -- JSON text ------------------------------------------------------------------------------------

function json(value: Wire): string {
  if (value === null) return "null";
  if (typeof value === "bigint") return value.toString();
  if (typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(json).join(",")}]`;
  return `{${Object.entries(value)
    .map(([k, v]) => `${JSON.stringify(k)}:${json(v)}`)
    .join(",")}}`;
}

function compareCodePoints(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0) as number);
  const y = [...b].map((c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  return x.length - y.length;
}

/** JSON with sorted keys and numbers as msgspec writes the values it decodes from ours. */
function canonical(value: Wire): string {
  if (value === null) return "null";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") return String(value).replace("e+", "e");
  if (typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  return `{${Object.keys(value)
    .sort(compareCodePoints)
    .map((k) => `${JSON.stringify(k)}:${canonical(value[k] as Wire)}`)
    .join(",")}}`;
}

// -- the unique key: blake2b of 16 bytes over the canonical key material (akadze.flow) -----------

const IV = [
  0x6a09e667f3bcc908n, 0xbb67ae8584caa73bn, 0x3c6ef372fe94f82bn, 0xa54ff53a5f1d36f1n,
  0x510e527fade682d1n, 0x9b05688c2b3e6c1fn, 0x1f83d9abfb41bd6bn, 0x5be0cd19137e2179n,
];
const SIGMA = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];
const MASK = (1n << 64n) - 1n;
const rotr = (x: bigint, n: bigint): bigint => ((x >> n) | (x << (64n - n))) & MASK;

/** BLAKE2b (RFC 7693) with a 16-byte digest, as Python's hashlib.blake2b(digest_size=16). */
export function blake2b16(data: Uint8Array): string {
  const h = IV.slice();
  h[0] = (h[0] as bigint) ^ 0x01010000n ^ 16n;
  const blocks = Math.max(1, Math.ceil(data.length / 128));
  for (let b = 0; b < blocks; b++) {
    const block = new Uint8Array(128);
    block.set(data.subarray(b * 128, b * 128 + 128));
    const m: bigint[] = [];
    for (let i = 0; i < 16; i++) {
      let word = 0n;
      for (let j = 7; j >= 0; j--) word = (word << 8n) | BigInt(block[i * 8 + j] as number);
      m.push(word);
    }
    const last = b === blocks - 1;
    const t = BigInt(last ? data.length : (b + 1) * 128);
    const v = [...h, ...IV];
    v[12] = (v[12] as bigint) ^ (t & MASK);
    if (last) v[14] = (v[14] as bigint) ^ MASK;
    const g = (a: number, bb: number, c: number, d: number, x: bigint, y: bigint): void => {
      v[a] = ((v[a] as bigint) + (v[bb] as bigint) + x) & MASK;
      v[d] = rotr((v[d] as bigint) ^ (v[a] as bigint), 32n);
      v[c] = ((v[c] as bigint) + (v[d] as bigint)) & MASK;
      v[bb] = rotr((v[bb] as bigint) ^ (v[c] as bigint), 24n);
      v[a] = ((v[a] as bigint) + (v[bb] as bigint) + y) & MASK;
      v[d] = rotr((v[d] as bigint) ^ (v[a] as bigint), 16n);
      v[c] = ((v[c] as bigint) + (v[d] as bigint)) & MASK;
      v[bb] = rotr((v[bb] as bigint) ^ (v[c] as bigint), 63n);
    };
    for (let r = 0; r < 12; r++) {
      const s = SIGMA[r % 10] as number[];
      const w = (i: number): bigint => m[s[i] as number] as bigint;
      g(0, 4, 8, 12, w(0), w(1));
      g(1, 5, 9, 13, w(2), w(3));
      g(2, 6, 10, 14, w(4), w(5));
      g(3, 7, 11, 15, w(6), w(7));
      g(0, 5, 10, 15, w(8), w(9));
      g(1, 6, 11, 12, w(10), w(11));
      g(2, 7, 8, 13, w(12), w(13));
      g(3, 4, 9, 14, w(14), w(15));
    }
    for (let i = 0; i < 8; i++) h[i] = (h[i] as bigint) ^ (v[i] as bigint) ^ (v[i + 8] as bigint);
  }
  let out = "";
  for (let i = 0; i < 2; i++) {
    let word = h[i] as bigint;
    for (let j = 0; j < 8; j++) {
      out += Number(word & 0xffn).toString(16).padStart(2, "0");
      word >>= 8n;
    }
  }
  return out;
}

function uniqueKey(spec: TaskSpec, args: { [key: string]: Wire }): string {
  const unique = spec.unique as NonNullable<TaskSpec["unique"]>;
  let chosen = args;
  if (unique.args !== null) {
    chosen = {};
    for (const name of unique.args) if (name in args) chosen[name] = args[name] as Wire;
  }
  const material = `[${JSON.stringify("akadze-unique-1")},${JSON.stringify(spec.name)},${unique.periodText},${canonical(chosen)}]`;
  return blake2b16(Buffer.from(material, "utf8"));
}

// -- the task --------------------------------------------------------------------------------

/** What `enqueue` takes: a pg.Pool, or a pg.Client or pg.PoolClient (the caller's transaction). */
export interface Queryable {
  query(config: { name: string; text: string; values: unknown[]; types?: TextTypes }): Promise<QueryResult>;
}

/** pg's per-query type parsers (its CustomTypesConfig): here every column comes back as its text. */
export interface TextTypes {
  getTypeParser(oid: number, format?: string): (text: string) => unknown;
}

/** The options of one call: `delay` in milliseconds, or `runAt`; `priority` and `queue`
 * override the task's; `expiresAt` cancels the job if it has not started by then. */
export interface EnqueueOptions {
  delay?: number;
  runAt?: Date;
  priority?: number;
  queue?: string;
  expiresAt?: Date;
}

/** A job as inserted: its id (an int64, every digit kept) and whether Unique found it already. */
export interface JobRef {
  id: string;
  duplicate: boolean;
}

/** A task of the worker app, enqueued by name with typed arguments. */
export class Task<A> {
  readonly name: string;
  readonly queue: string;
  readonly argsFp: string;

  constructor(
    readonly spec: TaskSpec,
    private readonly types: Record<string, Definition>,
  ) {
    this.name = spec.name;
    this.queue = spec.queue;
    this.argsFp = spec.argsFp;
    this.names = new Set(spec.params.map((p) => p.name));
    this.required = spec.params.filter((p) => p.required).map((p) => p.name);
    this.paths = spec.params.map((p) => `$.${p.name}`);
  }

  /** the parameters' names, the required ones, and each parameter's path (`$.name`) */
  private readonly names: Set<string>;
  private readonly required: string[];
  private readonly paths: string[];

  /** The JSON the worker reads for these arguments; InvalidArgsError (and no SQL) if they are not the task's. */
  encode(args: A): string {
    return this.payload(args).text;
  }

  private wire(args: A): { value: { [key: string]: Wire }; big: boolean } {
    const spec = this.spec;
    if (!isPlainObject(args)) throw new TypeError(`task '${spec.name}': arguments must be an object, got ${kind(args)}`);
    const given = args as Record<string, unknown>;
    for (const key in given) {
      if (!this.names.has(key) && given[key] !== undefined) {
        const unknown = Object.keys(given).filter((k) => !this.names.has(k) && given[k] !== undefined).sort();
        throw new TypeError(`task '${spec.name}': unexpected argument(s) ${unknown.map((k) => `'${k}'`).join(", ")}`);
      }
    }
    for (const p of this.required) {
      if (given[p] === undefined) {
        const missing = this.required.filter((name) => given[name] === undefined).map((name) => `'${name}'`);
        throw new TypeError(`task '${spec.name}': missing required argument(s) ${missing.join(", ")}`);
      }
    }
    // as the Python client does: the nesting limit first (the worker cannot read such a row)
    if (tooDeep(given, 1)) throw new ArgsTooDeepError(spec.name, MAX_JSON_DEPTH);
    const walker = new Walker(this.types, settings.validate);
    const out: { [key: string]: Wire } = {};
    const params = spec.params;
    try {
      for (let i = 0; i < params.length; i++) {
        const p = params[i] as ParamDef;
        const value = given[p.name];
        if (value === undefined) continue;
        const path = this.paths[i] as string;
        out[p.name] = settings.validate ? walker.walk(p.type, value, path, NO_VARS, 2) : walker.any(value, path, 2);
      }
    } catch (e) {
      if (e instanceof Refusal) throw new InvalidArgsError(spec.name, e.problem, e.path);
      if (e instanceof DepthExceeded) throw new ArgsTooDeepError(spec.name, MAX_JSON_DEPTH);
      throw e;
    }
    return { value: out, big: walker.big };
  }

  private payload(args: A): { text: string; wire: { [key: string]: Wire } } {
    const { value: wire, big } = this.wire(args);
    return { text: this.text(wire, big), wire };
  }

  /** The JSON text of a wire value, refused if larger than the worker takes. */
  private text(wire: Wire, big: boolean): string {
    // the native writer unless a bigint needs every digit written
    const text = big ? json(wire) : JSON.stringify(wire);
    // a UTF-16 unit takes at most 3 bytes in UTF-8: most payloads need no count
    if (text.length * 3 > settings.maxArgsBytes) {
      const size = Buffer.byteLength(text, "utf8");
      if (size > settings.maxArgsBytes) throw new ArgsTooLargeError(this.name, size, settings.maxArgsBytes);
    }
    return text;
  }

  /** Insert one job; resolves to its id. With a pg.Client or pg.PoolClient after BEGIN, the job
   * commits or rolls back with the caller's transaction. A job of a task with a Limit that is
   * due now goes in parked, as the worker's own enqueue parks it (docs/flow-control.md). */
  async enqueue(db: Queryable, args: A, options: EnqueueOptions = {}): Promise<JobRef> {
    const payload = this.payload(args);
    const params = this.params(options);
    if (this.spec.unique !== undefined) return (await this.insertUnique(db, [payload], params))[0] as JobRef;
    let stmt = STATEMENTS.enqueue;
    if (dueNow(options)) stmt = this.spec.limit === undefined ? STATEMENTS.enqueue_now : STATEMENTS.enqueue_parked;
    const result = await run(db, stmt, { ...params, args: payload.text });
    return { id: result.rows[0].id as string, duplicate: false };
  }

  /** Insert many jobs of this task in one statement; one invalid item rejects them all. */
  async enqueueMany(db: Queryable, items: readonly A[], options: EnqueueOptions = {}): Promise<JobRef[]> {
    if (this.spec.unique !== undefined) {
      const payloads = items.map((item) => this.payload(item));
      if (payloads.length === 0) return [];
      return this.insertUnique(db, payloads, this.params(options));
    }
    const wires: Wire[] = new Array(items.length);
    let big = false;
    for (let i = 0; i < items.length; i++) {
      const { value, big: needed } = this.wire(items[i] as A);
      wires[i] = value;
      big ||= needed;
    }
    if (wires.length === 0) return [];
    // one native write of the whole array: no item can be over the size limit when the whole
    // text is within a third of it (as payload counts); else each item is written and counted
    let whole = big ? "" : JSON.stringify(wires);
    if (big || whole.length * 3 > settings.maxArgsBytes) whole = `[${wires.map((w) => this.text(w, big)).join(",")}]`;
    // a limited task's jobs due now go in parked, one arrival row per group (enqueue_parked)
    const parks = this.spec.limit !== undefined && dueNow(options);
    const stmt = parks ? STATEMENTS.enqueue_parked_batch : STATEMENTS.enqueue_batch;
    const result = await run(db, stmt, { ...this.params(options), args: whole });
    // an int8[] as PostgreSQL writes it: {1,2,3} (integers are never quoted)
    const ids = (result.rows[0].ids as string).slice(1, -1).split(",");
    const jobs: JobRef[] = new Array(ids.length);
    for (let i = 0; i < ids.length; i++) jobs[i] = { id: ids[i] as string, duplicate: false };
    return jobs;
  }

  private async insertUnique(
    db: Queryable,
    payloads: { text: string; wire: { [key: string]: Wire } }[],
    params: Record<string, unknown>,
  ): Promise<JobRef[]> {
    const unique = this.spec.unique as NonNullable<TaskSpec["unique"]>;
    const keys = payloads.map((p) => uniqueKey(this.spec, p.wire));
    const first = new Map<string, number>();
    keys.forEach((key, i) => {
      if (!first.has(key)) first.set(key, i);
    });
    const found = new Map<string, JobRef>();
    // in the order of the keys, as the Python client sends them: racing batches of the same
    // keys wait for each other's rows in one order, never in a cycle (a deadlock)
    let pending = [...first.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const extra = { unique_states: unique.states, period_s: unique.periodS };
    for (let round = 0; round < 10 && pending.length; round++) {
      const result = await run(db, STATEMENTS.enqueue_unique, {
        ...params,
        ...extra,
        args: pending.map(([, position]) => (payloads[position] as { text: string }).text),
        unique_keys: pending.map(([key]) => key),
      });
      for (const row of result.rows) {
        const [key] = pending[Number(row.n) - 1] as [string, number];
        found.set(key, { id: row.id as string, duplicate: row.duplicate === "t" });
      }
      pending = pending.filter(([key]) => !found.has(key));
    }
    if (pending.length) throw new AkadzeError(`task '${this.name}': a unique key kept meeting racing inserts; try again`);
    return keys.map((key, i) => {
      const job = found.get(key) as JobRef;
      return i !== first.get(key) ? { id: job.id, duplicate: true } : job;
    });
  }

  private params(options: EnqueueOptions): Record<string, unknown> {
    const spec = this.spec;
    if (options.delay !== undefined && options.runAt !== undefined) throw new TypeError("pass delay or runAt, not both");
    if (options.delay !== undefined && !(Number.isFinite(options.delay) && options.delay >= 0))
      throw new TypeError("delay must be a number of milliseconds of 0 or more");
    for (const [label, moment] of [["runAt", options.runAt], ["expiresAt", options.expiresAt]] as const)
      if (moment !== undefined && !(moment instanceof Date && !Number.isNaN(moment.getTime())))
        throw new TypeError(`${label} must be a valid Date`);
    const priority = options.priority ?? spec.priority;
    if (!Number.isInteger(priority) || priority < -(2 ** 31) || priority >= 2 ** 31)
      throw new TypeError(`priority must be a 32-bit integer, got ${priority}`);
    const queue = options.queue ?? spec.queue;
    if (typeof queue !== "string" || !queue.trim() || queue.length > 200 || queue.includes("\u0000"))
      throw new TypeError("queue must be a non-empty string of at most 200 characters");
    return {
      task: spec.name,
      queue,
      priority,
      args_fp: spec.argsFp,
      max_attempts: spec.maxAttempts,
      run_at: options.runAt ?? null,
      delay_s: options.delay === undefined ? 0 : options.delay / 1000,
      expires_at: options.expiresAt ?? null,
      trace_context: null,
      trace_parent: null,
      limit_key: spec.limit === undefined ? null : spec.limit.key,
    };
  }
}

/** Whether a call's jobs are due at once (no runAt, no delay or a delay of 0), as akadze's
 * NewJobs.parks reads it: a limited task's such jobs are parked by their enqueue. A unique
 * task's never are: enqueue_unique inserts them, and a claim parks them if their group is full. */
function dueNow(options: EnqueueOptions): boolean {
  return options.runAt === undefined && (options.delay === undefined || options.delay === 0);
}

function run(db: Queryable, stmt: Statement, values: Record<string, unknown>): Promise<QueryResult> {
  // a named statement: pg prepares it once per connection (as asyncpg does for Python), so
  // PostgreSQL plans it once rather than at every call
  return db.query({
    name: `akadze_${stmt.name}_${stmt.hash}`,
    text: stmt.text,
    values: stmt.params.map((name) => (values[name] === undefined ? null : values[name])),
    types: TEXT,
  });
}

/** Every column as PostgreSQL's text: an id keeps every digit whatever parsers the caller set
 * with pg.types.setTypeParser, and the columns the client does not read (run_at, created_at)
 * are not parsed into Dates at every call. */
const asText = (text: string): string => text;
const TEXT: TextTypes = { getTypeParser: () => asText };
