/**
 * JSON as upstream's serde_json reads the sealed-secret structures:
 * JSON.parse does the grammar; a scan of the text adds what serde enforces
 * and JSON.parse does not: a nesting limit (serde_json's 128) and no
 * duplicate member names in the top-level object (serde's derived structs
 * refuse a field given twice, JSON.parse would keep the last one silently).
 */

import { SealedSecretError } from './errors.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonMap = { [key: string]: JsonValue };

/** serde_json's default recursion limit. */
export const MAX_JSON_DEPTH = 128;

export class JsonShapeError extends SealedSecretError {
  override readonly name: string = 'JsonShapeError';
  override readonly code = 'JSON_SHAPE_INVALID';
}

/** Nesting depth and top-level member names of a JSON text already accepted by JSON.parse. */
function scan(text: string): { depth: number; topKeys: string[] } {
  let depth = 0;
  let maxDepth = 0;
  const topKeys: string[] = [];
  // true right after `{` or `,` inside the top-level object: the next string is a member name.
  let expectKey = false;
  const stack: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      i++;
      while (i < text.length) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      if (expectKey && depth === 1) topKeys.push(JSON.parse(text.slice(start, i + 1)) as string);
      expectKey = false;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      stack.push(c === 0x7b ? '}' : ']');
      if (depth > maxDepth) maxDepth = depth;
      if (depth > MAX_JSON_DEPTH) return { depth, topKeys };
      expectKey = c === 0x7b && depth === 1;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      expectKey = depth === 1 && stack[0] === '}';
    }
  }
  return { depth: maxDepth, topKeys };
}

/**
 * Parses `text` as serde_json would for a struct: valid JSON, at most
 * 128 levels deep, no member name twice at the top level.
 */
export function parseStrictJson(text: string): JsonValue {
  // JSON.parse first: the scan below assumes well-formed input.
  const value = JSON.parse(text) as JsonValue;
  const { depth, topKeys } = scan(text);
  if (depth > MAX_JSON_DEPTH) throw new JsonShapeError(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  const seen = new Set<string>();
  for (const key of topKeys) {
    if (seen.has(key)) throw new JsonShapeError(`duplicate field \`${key.slice(0, 64)}\``);
    seen.add(key);
  }
  return value;
}

export function isJsonMap(v: unknown): v is JsonMap {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
