// Test-only: a real PostgreSQL server (Debian's packages) in a temporary data directory on a free
// loopback port, so tests can stop, hang and restart it. PostgreSQL refuses to run as root: when the
// tests run as root, the data directory belongs to the `postgres` account and the server (and initdb)
// run under it. Connections over TCP need the password; psql reaches it the same way.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeLoopbackPort } from './redis-server.js';

export const TEST_POSTGRES_PASSWORD = 'test-password';

export interface PostgresServer {
  readonly port: number;
  readonly dir: string;
  /** `postgresql://postgres:<password>@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  readonly password: string;
  /** Process id of the running server (undefined while stopped). */
  readonly pid: number | undefined;
  /** Starts the server (again); resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it: SIGINT is PostgreSQL's fast shutdown; SIGKILL a crash. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it and removes its directory. */
  dispose(): Promise<void>;
  /** Freezes (SIGSTOP) or thaws (SIGCONT) the server and every backend it runs: a hung database. */
  freeze(frozen: boolean): void;
  /** Runs SQL through Debian's psql; rejects on an SQL error. Output: unaligned, tuples only. */
  psql(sql: string, args?: readonly string[]): Promise<string>;
  output(): string;
}

/** The newest installed PostgreSQL's server programs (Debian keeps them off PATH). */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

function postgresAccount(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

function run(
  file: string,
  args: readonly string[],
  options: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv; input?: string },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = spawn(file, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(options.uid !== undefined && { uid: options.uid, gid: options.gid }),
      env: { ...process.env, ...options.env },
      cwd: tmpdir(),
    });
    let out = '';
    let err = '';
    c.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    c.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    c.once('error', reject);
    c.once('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${file} ${args.join(' ')} exited with ${code}: ${err}${out}`));
    });
    c.stdin.end(options.input ?? '');
  });
}

/** The processes whose parent is `pid` (PostgreSQL's backends and workers), from /proc. */
function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so read after the last `)`.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) children.push(Number(name));
  }
  return children;
}

export interface PostgresServerOptions {
  /**
   * Flush every commit to the log as a deployment does (fsync on). Default false: a test server, whose
   * committed data may be lost in a machine crash but never in a process stop or kill.
   */
  readonly durable?: boolean;
}

export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  if (bin === undefined) throw new Error('PostgreSQL is not installed (Debian package postgresql)');
  const account = postgresAccount();
  const ids = account === undefined ? {} : account;
  const port = await freeLoopbackPort();
  const dir = mkdtempSync(join(tmpdir(), 'kbs-postgres-'));
  const data = join(dir, 'data');
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, `${TEST_POSTGRES_PASSWORD}\n`, { mode: 0o600 });
  if (account !== undefined) {
    chownSync(dir, account.uid, account.gid);
    chownSync(pwfile, account.uid, account.gid);
  }
  await run(
    join(bin, 'initdb'),
    [
      '-D',
      data,
      '-U',
      'postgres',
      '--pwfile',
      pwfile,
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
    ],
    ids,
  );
  let child: ChildProcess | undefined;
  let out = '';
  const server: PostgresServer = {
    port,
    dir,
    url: `postgresql://postgres:${TEST_POSTGRES_PASSWORD}@127.0.0.1:${port}/postgres`,
    password: TEST_POSTGRES_PASSWORD,
    get pid() {
      return child?.exitCode === null && child.signalCode === null ? child.pid : undefined;
    },
    async start() {
      const args = [
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'max_connections=100',
        // Small: several test files run a server at once.
        '-c',
        'shared_buffers=16MB',
        ...(options.durable === true ? [] : ['-c', 'fsync=off', '-c', 'full_page_writes=off']),
      ];
      const c = spawn(join(bin, 'postgres'), args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        ...ids,
        cwd: tmpdir(),
      });
      child = c;
      const ready = new Promise<void>((resolve, reject) => {
        const onData = (d: Buffer) => {
          out += d.toString();
          if (out.includes('ready to accept connections')) resolve();
        };
        c.stdout?.on('data', onData);
        c.stderr?.on('data', onData);
        c.once('error', reject);
        c.once('exit', (code) => reject(new Error(`postgres exited with ${code}:\n${out}`)));
      });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`postgres did not start:\n${out}`)), 30_000);
      });
      try {
        await Promise.race([ready, timeout]);
      } finally {
        clearTimeout(timer);
      }
      out = '';
    },
    async stop(signal = 'SIGINT') {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      // A crash takes the backends with it, as a machine or container failure would: none is left
      // holding the shared memory that the next start checks.
      const backends = signal === 'SIGKILL' && c.pid !== undefined ? childPids(c.pid) : [];
      c.kill(signal);
      for (const p of backends) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // exited meanwhile
        }
      }
      await exited;
    },
    freeze(frozen) {
      const pid = server.pid;
      if (pid === undefined) return;
      const signal = frozen ? 'SIGSTOP' : 'SIGCONT';
      // The postmaster first, so that it starts no backend meanwhile; then each of its children.
      if (frozen) process.kill(pid, signal);
      for (const p of childPids(pid)) {
        try {
          process.kill(p, signal);
        } catch {
          // exited meanwhile
        }
      }
      if (!frozen) process.kill(pid, signal);
    },
    async dispose() {
      // A frozen server must be let go on before it can shut down.
      server.freeze(false);
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    psql: (sql, args = []) =>
      run(
        join(bin, 'psql'),
        [
          '-X',
          '-q',
          '-h',
          '127.0.0.1',
          '-p',
          String(port),
          '-U',
          'postgres',
          '-d',
          'postgres',
          '-v',
          'ON_ERROR_STOP=1',
          '-At',
          ...args,
          '-f',
          '-',
        ],
        { env: { PGPASSWORD: TEST_POSTGRES_PASSWORD, PGCONNECT_TIMEOUT: '5' }, input: sql },
      ),
    output: () => out,
  };
  await server.start();
  return server;
}
