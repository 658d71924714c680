import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AttesterModule } from '@broker/attester';
import { AttestationAgentClient } from '@broker/guest-api';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type MainOptions, main, socketPathOf } from './cli.js';
import type { RunningAttestationAgent } from './start.js';
import { LogCapture, startTestKbs, type TestKbs } from './testing/kbs.js';

describe('command line (upstream ttrpc-aa flags)', () => {
  async function parse(argv: string[]) {
    let out = '';
    let err = '';
    const code = await main(argv, {
      env: {},
      stdout: (t) => {
        out += t;
      },
      stderr: (t) => {
        err += t;
      },
    });
    return { code, out, err };
  }

  it.each([
    [['-c'], "option '-c' needs a value"],
    [['--config', 'x'], "unknown option '--config'"],
    [['--attestation-sock', 'unix:///x'], "unknown option '--attestation-sock'"],
    [['-c', 'a', '-c', 'b'], "option '-c' given more than once"],
    [['serve'], "unexpected argument 'serve'"],
    [['--log-format', 'xml'], "invalid value 'xml' for '--log-format' (allowed: json, text)"],
  ])('refuses %j with status 2', async (argv, message) => {
    expect(await parse(argv)).toEqual({
      code: 2,
      out: '',
      err: `attestation-agent: ${message}\nRun 'attestation-agent --help' for usage.\n`,
    });
  });

  it('answers help and version', async () => {
    const help = await parse(['-c', 'x', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('-a, --attestation_sock <ATTESTATION_SOCK>');
    expect(help.out).toContain('Exit status:');
    expect(await parse(['-V'])).toEqual({ code: 0, out: 'attestation-agent 0.1.0 (broker dev)\n', err: '' });
  });

  it('accepts only unix:// socket addresses, as upstream', () => {
    expect(socketPathOf('unix:///run/aa.sock')).toBe('/run/aa.sock');
    expect(() => socketPathOf('/run/aa.sock')).toThrow(/scheme is not expected/);
    expect(() => socketPathOf('tcp://127.0.0.1:1')).toThrow(/scheme is not expected/);
    expect(() => socketPathOf('unix://')).toThrow(/empty path/);
  });
});

describe('main', () => {
  let kbs: TestKbs;
  let dir: string;
  let logs: LogCapture;
  let stderr: string;

  beforeAll(async () => {
    kbs = await startTestKbs({ https: false });
    await kbs.admin.setResource('default/key/one', Buffer.from('secret'));
  });
  afterAll(async () => {
    await kbs.close();
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'aa-cli-'));
    logs = new LogCapture();
    stderr = '';
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const exists = (p: string) =>
    stat(p).then(
      () => true,
      () => false,
    );

  /** Runs main until `use` is done with the agent, then stops it; resolves with main's status. */
  async function run(
    argv: string[],
    use: (agent: RunningAttestationAgent) => Promise<void> = async () => {},
    options: MainOptions = {},
    stop: (controller: AbortController) => void = (c) => c.abort(),
  ): Promise<number> {
    const controller = new AbortController();
    let used: Promise<void> = Promise.resolve();
    const status = main(argv, {
      env: {},
      cmdlinePath: join(dir, 'no-cmdline'),
      logDestination: logs,
      stdout: () => {},
      stderr: (t) => {
        stderr += t;
      },
      signal: controller.signal,
      eventlogDir: join(dir, 'eventlog'),
      kbsRetryDelay: async () => {},
      onListening: (agent) => {
        used = use(agent).finally(() => stop(controller));
      },
      ...options,
    });
    const code = await status;
    await used;
    return code;
  }

  it('serves on the given socket, creating its folder, and stops cleanly', async () => {
    const config = join(dir, 'aa.toml');
    await writeFile(config, `[token_configs.kbs]\nurl = "${kbs.url}"\n[token_configs.cc_as]\nurl = "x"\n`);
    const socket = join(dir, 'nested', 'folder', 'aa.sock');
    const code = await run(['-c', config, '--attestation_sock', `unix://${socket}`], async () => {
      const c = await AttestationAgentClient.connect(`unix://${socket}`);
      try {
        expect(await c.getTeeType()).toBe('sample');
        expect((await c.getKbsToken()).token.split('.')).toHaveLength(3);
      } finally {
        c.close();
      }
    });
    expect(code).toBe(0);
    expect(await exists(socket)).toBe(false);
    const messages = logs.messages();
    expect(messages).toContain(`Using config file: ${config}`);
    expect(messages).toContain('unknown configuration key token_configs.cc_as ignored');
    expect(messages.some((m) => m.startsWith('No TEE platform detected; using the sample attester'))).toBe(
      true,
    );
    expect(messages).toContain('attestation agent stopped');
  });

  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)('stops on %s', async (signal) => {
    const socket = join(dir, 'aa.sock');
    const code = await run(
      ['-a', `unix://${socket}`],
      async () => {},
      {},
      () => {
        process.emit(signal, signal);
      },
    );
    expect(code).toBe(0);
    expect(logs.text).toContain(`"reason":"${signal}"`);
    expect(process.listenerCount(signal)).toBe(0);
  });

  it('replaces a stale socket, but refuses to remove a regular file', async () => {
    const socket = join(dir, 'aa.sock');
    // A crashed agent: its socket file stays behind with nobody listening.
    const child = spawn(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(socket)}, () => console.log('up'))`,
    ]);
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.kill('SIGKILL');
    await new Promise<void>((resolve) => child.once('exit', () => resolve()));
    expect((await stat(socket)).isSocket()).toBe(true);
    expect(
      await run(['-a', `unix://${socket}`], async () => {
        const c = await AttestationAgentClient.connect(`unix://${socket}`);
        c.close();
      }),
    ).toBe(0);

    const file = join(dir, 'regular');
    await writeFile(file, 'data');
    expect(await run(['-a', `unix://${file}`])).toBe(1);
    expect(await exists(file)).toBe(true);
  });

  it('takes the KBS from AA_KBC_PARAMS or the kernel command line without -c', async () => {
    const socket = join(dir, 'aa.sock');
    const cmdline = join(dir, 'cmdline');
    await writeFile(cmdline, `console=hvc0 agent.aa_kbc_params=cc_kbc::${kbs.url}\n`);
    const use = async () => {
      const c = await AttestationAgentClient.connect(`unix://${socket}`);
      try {
        expect((await c.getKbsToken()).token.split('.')).toHaveLength(3);
      } finally {
        c.close();
      }
    };
    expect(await run(['-a', `unix://${socket}`], use, { cmdlinePath: cmdline })).toBe(0);
    expect(logs.messages().some((m) => m.includes('(cmdline)'))).toBe(true);
    expect(await run(['-a', `unix://${socket}`], use, { env: { AA_KBC_PARAMS: `cc_kbc::${kbs.url}` } })).toBe(
      0,
    );
  });

  it('binds --initdata-toml at start-up (sample: logged and skipped)', async () => {
    const toml = join(dir, 'initdata.toml');
    await writeFile(toml, 'algorithm = "sha256"\nversion = "0.1.0"\n[data]\n');
    const code = await run(
      ['-a', `unix://${join(dir, 'aa.sock')}`, '--initdata-toml', toml],
      async (agent) => {
        expect(agent.initDataBinding).toBe('unsupported');
      },
    );
    expect(code).toBe(0);
    expect(logs.messages()).toContain('Platform sample does not support initdata checking. Jumping.');
  });

  describe('on a TEE that binds init-data', () => {
    const expected = createHash('sha256')
      .update('algorithm = "sha256"\nversion = "0.1.0"\n[data]\n')
      .digest();
    const seen: Buffer[] = [];
    const tdxLike: AttesterModule = {
      tee: 'tdx',
      detect: async () => ({ detected: true, reason: 'test' }),
      create: () => ({
        tee: 'tdx',
        getEvidence: async () => ({}),
        bindInitData: async (digest: Uint8Array) => {
          seen.push(Buffer.from(digest));
          if (!Buffer.from(digest).equals(expected)) throw new Error('Init data does not match!');
        },
      }),
    };
    const detect = { modules: [tdxLike] };

    it('starts when the digest matches (-i, standard base64)', async () => {
      const code = await run(
        ['-a', `unix://${join(dir, 'aa.sock')}`, '-i', expected.toString('base64')],
        async (a) => {
          expect(a.initDataBinding).toBe('bound');
        },
        { detect },
      );
      expect(code).toBe(0);
      expect(logs.messages()).toContain('Check initdata passed.');
    });

    it('prefers --initdata-toml over --initdata-digest, as upstream', async () => {
      const toml = join(dir, 'initdata.toml');
      await writeFile(toml, 'algorithm = "sha256"\nversion = "0.1.0"\n[data]\n');
      seen.length = 0;
      const code = await run(
        ['-a', `unix://${join(dir, 'aa.sock')}`, '-i', Buffer.alloc(32).toString('base64'), '-t', toml],
        async () => {},
        { detect },
      );
      expect(code).toBe(0);
      expect(seen).toEqual([expected]);
    });

    it('refuses to start, without creating the socket, when the TEE disagrees', async () => {
      const socket = join(dir, 'aa.sock');
      const code = await run(
        ['-a', `unix://${socket}`, '-i', Buffer.alloc(32, 1).toString('base64')],
        async () => {
          throw new Error('must not listen');
        },
        { detect },
      );
      expect(code).toBe(1);
      expect(await exists(socket)).toBe(false);
      expect(stderr).toContain('inconsistent with that of the current platform: Init data does not match!');
    });
  });

  it.each([
    [['-c', '/nonexistent/aa.toml'], 1, /cannot read \/nonexistent\/aa\.toml/],
    [['--bogus'], 2, /unknown option '--bogus'/],
  ])('exits with status for %j', async (argv, status, message) => {
    expect(await run(argv)).toBe(status);
    expect(stderr).toMatch(message);
  });

  it.each([
    ['a socket that is not unix://', ['-a', 'tcp://127.0.0.1:9'], /socket address scheme is not expected/],
    ['a bad digest', ['-i', 'not base64!'], /base64 decode initdata/],
    ['a missing initdata file', ['-t', '/nonexistent/initdata.toml'], /read initdata toml file/],
    [
      'a socket folder that cannot be created',
      ['-a', 'unix:///proc/broker-aa-test/aa.sock'],
      /^attestation-agent: cannot create directory \/proc\/broker-aa-test: /,
    ],
  ])('exits 1 for %s, saying why once on stderr', async (_name, argv, message) => {
    const socket = argv.includes('-a') ? [] : ['-a', `unix://${join(dir, 'aa.sock')}`];
    expect(await run([...socket, ...argv], undefined, { env: {} })).toBe(1);
    expect(stderr).toMatch(message);
    expect(stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refuses a config file with a bad value', async () => {
    const config = join(dir, 'aa.toml');
    await writeFile(config, '[token_configs.kbs]\ntee_key_algorithm = "RSA1_5"\nurl = "http://k"\n');
    expect(await run(['-c', config])).toBe(1);
    expect(stderr).toMatch(/unknown variant `RSA1_5`/);
  });

  it('honours [log] level, with RUST_LOG overriding it', async () => {
    const config = join(dir, 'aa.toml');
    const socket = `unix://${join(dir, 'aa.sock')}`;
    await writeFile(config, '[log]\nlevel = "warn"\n');
    expect(await run(['-c', config, '-a', socket])).toBe(0);
    expect(logs.messages()).not.toContain('attestation agent stopped');
    logs = new LogCapture();
    expect(await run(['-c', config, '-a', socket], async () => {}, { env: { RUST_LOG: 'debug' } })).toBe(0);
    expect(logs.messages()).toContain('attestation agent stopped');
  });
});
