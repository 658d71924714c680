// Hash and HMAC builtins (hex digests of the UTF-8 bytes), via node:crypto.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Value } from '../value.js';
import { argString, type BuiltinTable } from './api.js';
import { toBytes } from './bytes.js';

function hash(name: string, algo: string) {
  return {
    arity: 1,
    fn: (args: readonly Value[]) =>
      createHash(algo)
        .update(toBytes(argString(name, args, 0)))
        .digest('hex'),
  };
}

function hmac(name: string, algo: string) {
  return {
    arity: 2,
    fn: (args: readonly Value[]) => {
      const msg = argString(name, args, 0);
      const key = argString(name, args, 1);
      return createHmac(algo, toBytes(key)).update(toBytes(msg)).digest('hex');
    },
  };
}

export const cryptoBuiltins: BuiltinTable = {
  'crypto.md5': hash('crypto.md5', 'md5'),
  'crypto.sha1': hash('crypto.sha1', 'sha1'),
  'crypto.sha256': hash('crypto.sha256', 'sha256'),
  'crypto.hmac.md5': hmac('crypto.hmac.md5', 'md5'),
  'crypto.hmac.sha1': hmac('crypto.hmac.sha1', 'sha1'),
  'crypto.hmac.sha256': hmac('crypto.hmac.sha256', 'sha256'),
  'crypto.hmac.sha512': hmac('crypto.hmac.sha512', 'sha512'),
  'crypto.hmac.equal': {
    arity: 2,
    fn: (args) => {
      const a = toBytes(argString('crypto.hmac.equal', args, 0));
      const b = toBytes(argString('crypto.hmac.equal', args, 1));
      // Constant time for equal lengths, as Go's hmac.Equal.
      return a.length === b.length && timingSafeEqual(a, b);
    },
  },
};
