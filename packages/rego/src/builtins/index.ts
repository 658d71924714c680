// The builtin function table, keyed by OPA's full builtin names, merged from one module per family.
//
// Not here, because they are not plain functions of their arguments, and belong to the evaluator:
// `eq` (=), `assign` (:=), `print`/`internal.print`, `trace` and `walk` (a relation with many results).
import { RegoEvalError } from '../errors.js';
import { aggregateBuiltins } from './aggregates.js';
import { type BuiltinDef, type BuiltinTable, builtinError } from './api.js';
import { arrayBuiltins } from './arrays.js';
import { bitBuiltins } from './bits.js';
import { castBuiltins } from './casts.js';
import { comparisonBuiltins } from './comparison.js';
import { cryptoBuiltins } from './crypto.js';
import { encodingBuiltins } from './encoding.js';
import { globBuiltins } from './glob.js';
import { globsMatchBuiltins } from './globsmatch.js';
import { graphBuiltins } from './graph.js';
import { jsonOpBuiltins } from './jsonops.js';
import { netBuiltins } from './net.js';
import { numberBuiltins } from './numbers.js';
import { objectBuiltins } from './objects.js';
import { regexBuiltins } from './regex.js';
import { semverBuiltins } from './semver.js';
import { setBuiltins } from './sets.js';
import { stringBuiltins } from './strings.js';
import { timeBuiltins } from './time.js';
import { typeBuiltins } from './types.js';
import { unitBuiltins } from './units.js';
import { uuidBuiltins } from './uuid.js';

export type { BuiltinCode, BuiltinContext, BuiltinDef } from './api.js';
export { BuiltinError, builtinError, typeError } from './api.js';

const FAMILIES: readonly BuiltinTable[] = [
  aggregateBuiltins,
  arrayBuiltins,
  bitBuiltins,
  castBuiltins,
  comparisonBuiltins,
  cryptoBuiltins,
  encodingBuiltins,
  globBuiltins,
  globsMatchBuiltins,
  graphBuiltins,
  jsonOpBuiltins,
  netBuiltins,
  numberBuiltins,
  objectBuiltins,
  regexBuiltins,
  semverBuiltins,
  setBuiltins,
  stringBuiltins,
  timeBuiltins,
  typeBuiltins,
  unitBuiltins,
  uuidBuiltins,
];

// The engine's own limits (string, array and BigInt sizes, stack depth) surface as RangeError; a builtin
// that hits one (e.g. replace() amplifying a large input) fails with a builtin error instead of crashing.
function guarded(name: string, def: BuiltinDef): BuiltinDef {
  const fn = def.fn;
  return {
    ...def,
    fn: (args, ctx) => {
      try {
        return fn(args, ctx);
      } catch (e) {
        if (e instanceof RangeError) throw builtinError(name, `result too large (${e.message})`);
        throw e;
      }
    },
  };
}

function merge(tables: readonly BuiltinTable[]): Map<string, BuiltinDef> {
  const out = new Map<string, BuiltinDef>();
  for (const t of tables) {
    for (const [name, def] of Object.entries(t)) {
      if (out.has(name)) throw new RegoEvalError('eval_internal_error', `builtin defined twice: ${name}`);
      out.set(name, guarded(name, def));
    }
  }
  return out;
}

export const BUILTINS: ReadonlyMap<string, BuiltinDef> = merge(FAMILIES);

/** Builtins that exist only in Rego v0 (removed in OPA 1.0); a v1 policy calling one is an error. */
export const DEPRECATED: ReadonlySet<string> = new Set([
  'all',
  'any',
  'cast_array',
  'cast_boolean',
  'cast_null',
  'cast_object',
  'cast_set',
  'cast_string',
  'net.cidr_overlap',
  're_match',
  'set_diff',
]);

/**
 * OPA builtins this engine knows but deliberately does not implement (network access, JWT/X.509
 * handling, GraphQL, JSON Schema, templates, runtime metadata). Calling one is a load-time error.
 */
export const UNSUPPORTED: ReadonlySet<string> = new Set([
  'crypto.parse_private_keys',
  'crypto.x509.parse_and_verify_certificates',
  'crypto.x509.parse_and_verify_certificates_with_options',
  'crypto.x509.parse_certificate_request',
  'crypto.x509.parse_certificates',
  'crypto.x509.parse_keypair',
  'crypto.x509.parse_rsa_private_key',
  'graphql.is_valid',
  'graphql.parse',
  'graphql.parse_and_verify',
  'graphql.parse_query',
  'graphql.parse_schema',
  'graphql.schema_is_valid',
  'http.send',
  'io.jwt.decode',
  'io.jwt.decode_verify',
  'io.jwt.encode_sign',
  'io.jwt.encode_sign_raw',
  'io.jwt.verify_eddsa',
  'io.jwt.verify_es256',
  'io.jwt.verify_es384',
  'io.jwt.verify_es512',
  'io.jwt.verify_hs256',
  'io.jwt.verify_hs384',
  'io.jwt.verify_hs512',
  'io.jwt.verify_ps256',
  'io.jwt.verify_ps384',
  'io.jwt.verify_ps512',
  'io.jwt.verify_rs256',
  'io.jwt.verify_rs384',
  'io.jwt.verify_rs512',
  'json.match_schema',
  'json.verify_schema',
  'opa.runtime',
  'providers.aws.sign_req',
  'rego.metadata.chain',
  'rego.metadata.rule',
  'rego.parse_module',
  'strings.render_template',
  'uri.is_valid',
  'uri.parse',
]);
