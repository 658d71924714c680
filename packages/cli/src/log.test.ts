import { describe, expect, it } from 'vitest';
import {
  accessRecord,
  createLogger,
  formatLogLine,
  LogLevelError,
  parseLogDirectives,
  resolveLogLevel,
} from './log.js';

const targets = ['kbs'];

describe('RUST_LOG', () => {
  it.each([
    ['info', 'info'],
    ['DEBUG', 'debug'],
    ['off', 'silent'],
    ['kbs=debug,info', 'debug'],
    ['info,kbs=trace', 'trace'],
    ['kbs::http=debug,kbs=warn,error', 'debug'],
    ['hyper=trace,warn', 'warn'],
    ['hyper=trace', undefined],
    ['kbs', 'trace'],
    [' info , ', 'info'],
  ])('%s → %s', (value, level) => {
    expect(parseLogDirectives('RUST_LOG', value, targets)).toBe(level);
  });

  it.each(['verbose', 'kbs=loud', 'info,=x'])('refuses %s naming the variable and the levels', (value) => {
    expect(() => parseLogDirectives('RUST_LOG', value, targets)).toThrow(LogLevelError);
    expect(() => parseLogDirectives('RUST_LOG', value, targets)).toThrow(
      /^RUST_LOG: .* is not a log level: use one of off, error, warn, info, debug, trace/,
    );
  });

  it('prefers RUST_LOG, then an alias, then the configuration, then info', () => {
    const configured = { value: 'warn', source: 'config [log] level' };
    expect(
      resolveLogLevel({
        env: { RUST_LOG: 'debug', KBS_LOG_LEVEL: 'error' },
        targets,
        aliases: ['KBS_LOG_LEVEL'],
      }),
    ).toBe('debug');
    expect(
      resolveLogLevel({ env: { KBS_LOG_LEVEL: 'error' }, targets, aliases: ['KBS_LOG_LEVEL'], configured }),
    ).toBe('error');
    expect(resolveLogLevel({ env: {}, targets, configured })).toBe('warn');
    expect(resolveLogLevel({ env: {}, targets })).toBe('info');
    expect(() =>
      resolveLogLevel({ env: { KBS_LOG_LEVEL: 'chatty' }, targets, aliases: ['KBS_LOG_LEVEL'] }),
    ).toThrow(/^KBS_LOG_LEVEL: /);
  });
});

describe('createLogger', () => {
  it('writes JSON lines by default and a human line with --log-format text', () => {
    const lines: string[] = [];
    const json = createLogger({ name: 'kbs', env: {}, destination: { write: (l) => void lines.push(l) } });
    json.info({ port: 8080 }, 'listening');
    json.debug('hidden');
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0] as string);
    expect(entry).toMatchObject({ level: 'info', name: 'kbs', port: 8080, msg: 'listening' });
    // ISO-8601 UTC, as log collectors parse it.
    expect(entry.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Math.abs(Date.parse(entry.time) - Date.now())).toBeLessThan(60_000);
    expect(lines[0]).toMatch(/^\{"level":"info","time":"/);
    const text = createLogger({
      name: 'kbs',
      env: { RUST_LOG: 'kbs=debug' },
      format: 'text',
      destination: { write: (l) => void lines.push(l) },
    });
    text.debug({ path: '/a b' }, 'shown');
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z DEBUG kbs: shown path="\/a b"\n$/);
  });

  it('keeps a line that is not JSON as it is', () => {
    expect(formatLogLine('plain\n')).toBe('plain\n');
  });
});

describe('accessRecord', () => {
  it('bounds the client-chosen fields', () => {
    const r = accessRecord({
      method: 'X'.repeat(40),
      path: `/${'p'.repeat(500)}`,
      status: 200,
      bytes: 3,
      ms: 1.23456,
      peer: '::1',
      ua: undefined,
    });
    expect(r.method).toHaveLength(17);
    expect(r.path.length).toBeLessThan(300);
    expect(r.ms).toBe(1.235);
    expect(Object.keys(r)).toEqual(['method', 'path', 'status', 'bytes', 'ms', 'peer', 'ua']);
  });
});
