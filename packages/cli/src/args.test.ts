import { describe, expect, it } from 'vitest';
import { choice, parseCommand, runCommand, UsageError } from './args.js';

const spec = {
  name: 'demo',
  version: '1.2.3',
  help: 'Usage: demo [OPTIONS] QUERY [FILE...]\n',
  options: {
    config: { type: 'string', short: 'c' },
    data: { type: 'string', short: 'd', multiple: true },
    quiet: { type: 'boolean', short: 'q' },
  },
  positionals: ['QUERY', '[FILE...]'],
} as const;

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env: {} },
  };
}

async function run(argv: string[], body = () => 0) {
  const o = io();
  const code = await runCommand(spec, argv, body, o.io);
  return { code, out: o.out.join(''), err: o.err.join('') };
}

describe('parseCommand', () => {
  it('reads long, short, inline and repeated options and positionals', () => {
    const r = parseCommand(spec, ['-c=a.toml', '--data', 'x', '-dy', '-q', 'q', 'f1', 'f2']);
    expect(r).toEqual({
      kind: 'run',
      parsed: {
        values: { config: 'a.toml', data: ['x', 'y'], quiet: true },
        positionals: ['q', 'f1', 'f2'],
        command: '',
        rest: [],
      },
    });
  });

  it.each([
    [['--nope', 'q'], "unknown option '--nope'"],
    [['-z', 'q'], "unknown option '-z'"],
    [['q', '--config'], "option '--config' needs a value"],
    [['--config', '--quiet', 'q'], "option '--config' needs a value"],
    [['--quiet=yes', 'q'], "option '--quiet' takes no value"],
    [['-c', 'a', '-c', 'b', 'q'], "option '-c' given more than once"],
    [[], 'missing argument <QUERY>'],
    [['--', '--config'], ''],
  ])('%j → %s', (argv, message) => {
    if (message === '') {
      expect(parseCommand(spec, argv)).toMatchObject({ kind: 'run', parsed: { positionals: ['--config'] } });
      return;
    }
    expect(() => parseCommand(spec, argv)).toThrow(new UsageError(message));
  });

  it('stops at a subcommand and leaves the rest to it', () => {
    const top = {
      name: 't',
      version: '1',
      help: 'h',
      options: { url: { type: 'string' } },
      subcommands: ['get'],
    } as const;
    expect(parseCommand(top, ['--url', 'u', 'get', '--path', 'p'])).toMatchObject({
      parsed: { values: { url: 'u' }, command: 'get', rest: ['--path', 'p'] },
    });
    expect(() => parseCommand(top, ['put'])).toThrow("unknown command 'put' (one of: get)");
    expect(() => parseCommand(top, [])).toThrow('missing command (one of: get)');
  });

  it('checks a restricted value', () => {
    expect(choice('log-format', 'text', ['json', 'text'])).toBe('text');
    expect(() => choice('log-format', 'xml', ['json', 'text'])).toThrow(
      "invalid value 'xml' for '--log-format' (allowed: json, text)",
    );
  });
});

describe('runCommand', () => {
  it('prints help with the exit statuses on stdout, exit 0', async () => {
    const r = await run(['q', '--help']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toContain('Usage: demo');
    expect(r.out).toMatch(/Exit status:\n {2}0 {2}success\n {2}1 {2}runtime failure.*\n {2}2 {2}usage error/);
  });

  it('prints the version line, exit 0', async () => {
    expect(await run(['--version'])).toEqual({ code: 0, out: 'demo 1.2.3 (broker dev)\n', err: '' });
    expect((await run(['-V'])).out).toBe('demo 1.2.3 (broker dev)\n');
  });

  it('names a usage error and points at --help, exit 2', async () => {
    expect(await run(['--bogus'])).toEqual({
      code: 2,
      out: '',
      err: "demo: unknown option '--bogus'\nRun 'demo --help' for usage.\n",
    });
    const thrown = await run(['q'], () => {
      throw new UsageError('--a and --b exclude each other');
    });
    expect(thrown).toMatchObject({ code: 2, err: expect.stringContaining("Run 'demo --help'") });
  });

  it('reports a missing file by its path, exit 1', async () => {
    const { readFileSync } = await import('node:fs');
    const r = await run(['q'], () => {
      readFileSync('/nonexistent/broker-cli-test');
      return 0;
    });
    expect(r).toEqual({
      code: 1,
      out: '',
      err: 'demo: /nonexistent/broker-cli-test: no such file or directory; check the path\n',
    });
  });
});
