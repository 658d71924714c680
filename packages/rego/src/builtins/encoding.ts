// Encoding builtins: base64, base64url, hex, JSON, YAML and URL query strings.
import { parseAllDocuments, parse as parseYAML, stringify as stringifyYAML, type Tags } from 'yaml';
import { RegoEvalError } from '../errors.js';
import { fromJSON, ObjectValue, SetValue, type Value } from '../value.js';
import {
  argObject,
  argString,
  BuiltinError,
  type BuiltinTable,
  builtinError,
  operandError,
  typeError,
} from './api.js';
import {
  Base64Error,
  base64Decode,
  base64DecodeOrOffset,
  base64Encode,
  fromBytes,
  HexError,
  hexDecode,
  QueryError,
  queryEscape,
  queryUnescape,
  toBytes,
} from './bytes.js';
import { goJSONValid, goMarshal, goMarshalIndent, goUnmarshal, JSONSyntaxError } from './gojson.js';

function wrap<T>(name: string, f: () => T, ...errors: (abstract new (...a: never[]) => Error)[]): T {
  try {
    return f();
  } catch (e) {
    if (errors.some((cls) => e instanceof cls)) throw builtinError(name, (e as Error).message);
    throw e;
  }
}

function b64decode(name: string, s: string, alphabet: 'std' | 'url'): string {
  return wrap(name, () => fromBytes(base64Decode(s, alphabet)), Base64Error);
}

/** YAML text to a Rego value the way sigs.k8s.io/yaml does it (YAML 1.1 scalars, keys as strings). */
export function yamlToValue(text: string): Value {
  const options = {
    version: '1.1',
    intAsBigInt: true,
    uniqueKeys: false,
    // Timestamps stay strings, as they do in JSON.
    customTags: (tags: Tags) =>
      tags.filter((t) => typeof t === 'string' || t.tag !== 'tag:yaml.org,2002:timestamp'),
  } as const;
  if (!/^(---|\.\.\.)/m.test(text)) return yamlNode(parseYAML(text, { ...options, maxAliasCount: 100 }), 0);
  // Several documents: all must be well-formed; the value is the first one's, as Go's yaml.Unmarshal gives.
  const docs = parseAllDocuments(text, options);
  if (!Array.isArray(docs)) return null;
  for (const d of docs) if (d.errors.length > 0) throw d.errors[0];
  return yamlNode(docs[0]?.toJS({ maxAliasCount: 100 }) ?? null, 0);
}

function yamlNode(x: unknown, depth: number): Value {
  if (depth > 1000) throw new RegoEvalError('eval_builtin_error', 'exceeded max depth');
  if (x === undefined || x === null) return null;
  if (typeof x === 'bigint') return fromJSON(x);
  if (typeof x === 'number') {
    if (!Number.isFinite(x))
      throw new RegoEvalError('eval_builtin_error', `yaml: cannot represent ${x} in JSON`);
    return x;
  }
  if (typeof x === 'string' || typeof x === 'boolean') return x;
  if (x instanceof Date) return x.toISOString();
  if (Array.isArray(x)) return x.map((i) => yamlNode(i, depth + 1));
  if (x instanceof Map) {
    const o = new ObjectValue();
    for (const [k, v] of x) o.set(typeof k === 'string' ? k : String(k), yamlNode(v, depth + 1));
    return o;
  }
  if (x instanceof Set) return [...x].map((i) => yamlNode(i, depth + 1));
  if (typeof x === 'object') {
    const o = new ObjectValue();
    for (const [k, v] of Object.entries(x as Record<string, unknown>)) o.set(k, yamlNode(v, depth + 1));
    return o;
  }
  throw new RegoEvalError('eval_builtin_error', `yaml: unsupported value ${String(x)}`);
}

function toPlain(v: Value): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(toPlain);
  if (v instanceof SetValue) return v.sorted().map(toPlain);
  const out: Record<string, unknown> = {};
  const entries = (v as ObjectValue).sortedEntries();
  for (const [k, x] of entries) out[typeof k === 'string' ? k : goMarshal(k)] = toPlain(x);
  return out;
}

function yamlMarshal(v: Value): string {
  return stringifyYAML(toPlain(v), { version: '1.1', indentSeq: false, sortMapEntries: true, lineWidth: 0 });
}

const encodeObjectError = () =>
  operandError('urlquery.encode_object', 1, 'values must be string, array[string], or set[string]');

export const encodingBuiltins: BuiltinTable = {
  'base64.encode': {
    arity: 1,
    fn: (args) => base64Encode(toBytes(argString('base64.encode', args, 0)), 'std', true),
  },
  'base64.decode': {
    arity: 1,
    fn: (args) => b64decode('base64.decode', argString('base64.decode', args, 0), 'std'),
  },
  'base64.is_valid': {
    arity: 1,
    fn: ([s = null]) => {
      return typeof s === 'string' && typeof base64DecodeOrOffset(s, 'std') !== 'number';
    },
  },
  'base64url.encode': {
    arity: 1,
    fn: (args) => base64Encode(toBytes(argString('base64url.encode', args, 0)), 'url', true),
  },
  'base64url.encode_no_pad': {
    arity: 1,
    fn: (args) => base64Encode(toBytes(argString('base64url.encode_no_pad', args, 0)), 'url', false),
  },
  'base64url.decode': {
    arity: 1,
    fn: (args) => {
      let s = argString('base64url.decode', args, 0);
      // Unpadded input is accepted (RFC 7515 appendix C), as OPA does.
      if (!s.endsWith('=')) {
        const rem = toBytes(s).length % 4;
        if (rem === 2) s += '==';
        else if (rem === 3) s += '=';
        else if (rem === 1) throw builtinError('base64url.decode', `illegal base64url string: ${s}`);
      }
      return b64decode('base64url.decode', s, 'url');
    },
  },
  'hex.encode': {
    arity: 1,
    fn: (args) => Buffer.from(toBytes(argString('hex.encode', args, 0))).toString('hex'),
  },
  'hex.decode': {
    arity: 1,
    fn: (args) => wrap('hex.decode', () => fromBytes(hexDecode(argString('hex.decode', args, 0))), HexError),
  },
  'json.marshal': { arity: 1, fn: ([v = null]) => goMarshal(v) },
  'json.marshal_with_options': {
    arity: 2,
    fn: (args) => {
      const name = 'json.marshal_with_options';
      const v = args[0] ?? null;
      const opts = argObject(name, args, 1);
      let indent = '\t';
      let prefix = '';
      let implicitPretty = false;
      let explicit: boolean | undefined;
      for (const [k, val] of opts.sortedEntries()) {
        if (typeof k !== 'string') {
          throw operandError(name, 2, `failed to stringify key ${goMarshal(k)}: key must be a string`);
        }
        switch (k) {
          case 'prefix':
          case 'indent':
            if (typeof val !== 'string') {
              throw operandError(
                name,
                2,
                `key ${k} failed cast to string: operand must be string but got ${typeof val}`,
              );
            }
            if (k === 'prefix') prefix = val;
            else indent = val;
            implicitPretty = true;
            break;
          case 'pretty':
            if (typeof val !== 'boolean') throw operandError(name, 2, `key ${k} failed cast to bool`);
            explicit = val;
            break;
          default:
            throw operandError(name, 2, `object contained unknown key ${k}`);
        }
      }
      const pretty = explicit ?? implicitPretty;
      return pretty ? prefix + goMarshalIndent(v, prefix, indent) : goMarshal(v);
    },
  },
  'json.unmarshal': {
    arity: 1,
    fn: (args) =>
      wrap('json.unmarshal', () => goUnmarshal(argString('json.unmarshal', args, 0)), JSONSyntaxError),
  },
  'json.is_valid': {
    arity: 1,
    fn: ([s = null]) => typeof s === 'string' && goJSONValid(s),
  },
  'yaml.marshal': { arity: 1, fn: ([v = null]) => yamlMarshal(v) },
  'yaml.unmarshal': {
    arity: 1,
    fn: (args) => {
      const text = argString('yaml.unmarshal', args, 0);
      try {
        return yamlToValue(text);
      } catch (e) {
        if (e instanceof BuiltinError) throw e;
        throw builtinError('yaml.unmarshal', `yaml: ${(e as Error).message}`);
      }
    },
  },
  'yaml.is_valid': {
    arity: 1,
    fn: ([s = null]) => {
      if (typeof s !== 'string') return false;
      try {
        yamlToValue(s);
        return true;
      } catch {
        return false;
      }
    },
  },
  'urlquery.encode': { arity: 1, fn: (args) => queryEscape(argString('urlquery.encode', args, 0)) },
  'urlquery.decode': {
    arity: 1,
    fn: (args) =>
      wrap('urlquery.decode', () => queryUnescape(argString('urlquery.decode', args, 0)), QueryError),
  },
  'urlquery.encode_object': {
    arity: 1,
    fn: ([o = null]) => {
      if (!(o instanceof ObjectValue)) throw typeError('urlquery.encode_object', 1, 'object', o);
      const pairs: [string, string[]][] = [];
      for (const [k, v] of o.entries.values()) {
        const key = typeof k === 'string' ? k : goMarshal(k);
        let vals: string[];
        if (typeof v === 'string') vals = [v];
        else if (Array.isArray(v) || v instanceof SetValue) {
          const items = Array.isArray(v) ? v : v.sorted();
          vals = items.map((x) => {
            if (typeof x !== 'string') throw encodeObjectError();
            return x;
          });
        } else throw encodeObjectError();
        pairs.push([key, vals]);
      }
      pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      return pairs.flatMap(([k, vs]) => vs.map((x) => `${queryEscape(k)}=${queryEscape(x)}`)).join('&');
    },
  },
  'urlquery.decode_object': {
    arity: 1,
    fn: (args) => {
      const q = argString('urlquery.decode_object', args, 0);
      const out = new Map<string, string[]>();
      let firstError: string | undefined;
      for (const part of q.split('&')) {
        if (part === '') continue;
        if (part.includes(';')) {
          firstError ??= 'invalid semicolon separator in query';
          continue;
        }
        const eq = part.indexOf('=');
        const rawKey = eq < 0 ? part : part.slice(0, eq);
        const rawVal = eq < 0 ? '' : part.slice(eq + 1);
        let key: string;
        let val: string;
        try {
          key = queryUnescape(rawKey);
          val = queryUnescape(rawVal);
        } catch (e) {
          if (!(e instanceof QueryError)) throw e;
          firstError ??= e.message;
          continue;
        }
        const list = out.get(key);
        if (list === undefined) out.set(key, [val]);
        else list.push(val);
      }
      if (firstError !== undefined) throw builtinError('urlquery.decode_object', firstError);
      return ObjectValue.fromEntries([...out].map(([k, v]) => [k, v] as const));
    },
  },
};
