/**
 * RFC 8785 JSON Canonicalization Scheme. Both sides of the report-data
 * binding hash this form (`serde_json_canonicalizer` upstream).
 */
import { ProtocolError } from './errors.js';

/** Nesting limit so hostile input fails cleanly instead of overflowing the stack. */
export const JCS_MAX_DEPTH = 256;

const LONE_SURROGATE_RE = /\p{Surrogate}/u;

function serializeString(s: string): string {
  // JCS forbids lone surrogates; well-formed JSON.stringify would escape them.
  if (LONE_SURROGATE_RE.test(s)) throw new ProtocolError('', 'string contains a lone surrogate');
  // JSON.stringify applies exactly the JCS escaping rules (RFC 8785 §3.2.2.2).
  return JSON.stringify(s);
}

function serializeNumber(n: number): string {
  if (!Number.isFinite(n)) throw new ProtocolError('', 'JCS cannot encode NaN or Infinity');
  // ECMAScript Number.prototype.toString is the JCS number format; -0 becomes "0".
  return JSON.stringify(n);
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function walk(value: unknown, depth: number, out: string[]): void {
  if (depth > JCS_MAX_DEPTH) throw new ProtocolError('', `JSON nested deeper than ${JCS_MAX_DEPTH}`);
  switch (typeof value) {
    case 'string':
      out.push(serializeString(value));
      return;
    case 'number':
      out.push(serializeNumber(value));
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'object': {
      if (value === null) {
        out.push('null');
        return;
      }
      if (Array.isArray(value)) {
        out.push('[');
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out.push(',');
          walk(value[i], depth + 1, out);
        }
        out.push(']');
        return;
      }
      if (!isPlainObject(value)) throw new ProtocolError('', 'JCS accepts only plain JSON objects');
      // Default sort compares UTF-16 code units, which is what RFC 8785 §3.2.3 requires.
      const keys = Object.keys(value).sort();
      out.push('{');
      let first = true;
      for (const k of keys) {
        const v = value[k];
        if (v === undefined) continue;
        if (!first) out.push(',');
        first = false;
        out.push(serializeString(k), ':');
        walk(v, depth + 1, out);
      }
      out.push('}');
      return;
    }
    default:
      throw new ProtocolError('', `JCS cannot encode a ${typeof value}`);
  }
}

/** RFC 8785 canonical JSON text of a JSON value (plain objects, arrays, strings, finite numbers, booleans, null). */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  walk(value, 0, out);
  return out.join('');
}
