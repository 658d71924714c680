import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { CommandExit, UsageError } from './args.js';
import { ConfigError } from './config-reader.js';
import {
  ActionableError,
  backtraceOf,
  CliError,
  describeFailure,
  hintOf,
  wantsBacktrace,
  withHint,
} from './errors.js';

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

describe('describeFailure', () => {
  it('says what to do about a missing file, after its path', () => {
    const e = thrown(() => readFileSync('/nonexistent/broker-errors-test'));
    expect(describeFailure(e)).toBe(
      '/nonexistent/broker-errors-test: no such file or directory; check the path',
    );
  });

  it('finds the hint of a system error among the causes', async () => {
    const refused = await new Promise<Error>((resolve) => {
      const s = connect({ host: '127.0.0.1', port: 1 });
      s.on('error', resolve);
    });
    const wrapped = new Error(`GET http://127.0.0.1:1/x: ${refused.message}`, { cause: refused });
    expect(describeFailure(wrapped)).toBe(
      'GET http://127.0.0.1:1/x: connect ECONNREFUSED 127.0.0.1:1; nothing listens there: is the service running, and are the host and port right?',
    );
  });

  it("prefers the error's own hint, and says it once", () => {
    const e = new ActionableError('no policy', 'give --policy-file');
    expect(describeFailure(e)).toBe('no policy; give --policy-file');
    expect(describeFailure(new Error('no policy; give --policy-file', { cause: e }))).toBe(
      'no policy; give --policy-file',
    );
    const plain = withHint(new Error('bad key'), 'make one with keygen');
    expect(hintOf(plain)).toBe('make one with keygen');
    expect(hintOf(withHint(plain, 'another'))).toBe('make one with keygen');
  });

  it('finds a network code or a certificate complaint in words only', () => {
    const grpc = new Error(
      'cannot listen on 127.0.0.1:1: No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use 127.0.0.1:1]',
    );
    expect(hintOf(grpc)).toBe('another process listens there: stop it or choose another address');
    expect(hintOf(new Error('GET https://x/: self-signed certificate'))).toMatch(
      /certificate is not trusted/,
    );
    expect(hintOf(new Error('ECONNREFUSEDISH is no code'))).toBeUndefined();
  });

  it("puts a wrapped system error's code in words, with its hint", () => {
    const enoent = thrown(() => readFileSync('/nonexistent/broker-x'));
    const wrapped = new Error(`cannot read /nonexistent/broker-x: ${(enoent as Error).message}`);
    expect(describeFailure(wrapped)).toBe(
      'cannot read /nonexistent/broker-x: no such file or directory; check the path',
    );
    expect(describeFailure(new Error('cannot read /x: ENOENT'))).toBe(
      'cannot read /x: no such file or directory; check the path',
    );
    expect(describeFailure(new Error('--user-data /x: EACCES'))).toBe(
      '--user-data /x: permission denied; check its permissions, or run as a user who may use it',
    );
    // Network codes stay as they are (they name the call), with their hint.
    expect(describeFailure(new Error('connect ECONNREFUSED 127.0.0.1:1'))).toMatch(
      /^connect ECONNREFUSED 127\.0\.0\.1:1; nothing listens there/,
    );
  });

  it('names a certificate the peer did not verify', () => {
    const e = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    expect(describeFailure(e)).toMatch(/certificate is not trusted/);
  });

  it('gives the line and column of a TOML error on one line', () => {
    const toml = thrown(() => parse('a = 1\nfoo = [\n'));
    const wrapped = new Error(`config.toml: ${(toml as Error).message}`, { cause: toml });
    const line = describeFailure(wrapped);
    expect(line).not.toContain('\n');
    expect(line).toMatch(/^config\.toml: Invalid TOML document: invalid value \(line 3, column 1\)$/);
  });

  it('keeps a quoted excerpt whole on one line (JSON errors)', () => {
    const json = thrown(() => JSON.parse('foo = [\n1'));
    const line = describeFailure(new Error(`as.json: ${(json as Error).message}`));
    expect(line).not.toContain('\n');
    expect(line).toMatch(/^as\.json: Unexpected token .*"foo = \[ 1".* is not valid JSON$/);
  });
});

describe('wantsBacktrace', () => {
  it.each([
    [{}, false],
    [{ RUST_BACKTRACE: '0' }, false],
    [{ RUST_BACKTRACE: '1' }, true],
    [{ RUST_BACKTRACE: 'full' }, true],
    [{ RUST_LOG: 'info' }, false],
    [{ RUST_LOG: 'debug' }, true],
    [{ RUST_LOG: 'warn,kbs=trace' }, true],
    [{ RUST_LOG: 'DEBUG' }, true],
  ])('%j → %s', (env, wanted) => {
    expect(wantsBacktrace(env)).toBe(wanted);
  });

  it('shows each cause with its stack', () => {
    const text = backtraceOf(new Error('outer', { cause: new Error('inner') }));
    expect(text).toMatch(/^Error: outer\n\s+at /);
    expect(text).toMatch(/\nCaused by: Error: inner\n\s+at /);
  });
});

describe('CliError', () => {
  it('is the base of the helpers’ errors, each with its code', () => {
    const config = new ConfigError('[http_server] sockets: at least one socket is required');
    expect(config).toBeInstanceOf(CliError);
    expect(config).toBeInstanceOf(Error);
    expect(config.code).toBe('CONFIG_INVALID');
    expect(new UsageError('missing option').code).toBe('USAGE_INVALID');
    const exit = new CommandExit(3);
    expect(exit).toBeInstanceOf(CliError);
    expect([exit.code, exit.status]).toEqual(['COMMAND_EXIT', 3]);
  });
});
