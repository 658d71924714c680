/**
 * Test builders of @broker/sandbox-agent: a container rootfs holding one static program, a kata-style
 * OCI spec for it, and the Go shim (containerd/ttrpc with gogo stubs generated from kata's own .proto
 * files) that plays kata's shim.
 */
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AGENT_METHODS } from '@broker/agent-policy';
import { vector } from '@broker/cli/testing';
import type { Decoded } from '../proto.js';
import { RESPONSES } from '../service.js';

const run = promisify(execFile);

/** `name` is an executable on PATH (as the agent runs runc, mount and unshare). */
function onPath(name: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && existsSync(join(dir, name)));
}

/** Root and `runc` on PATH: the host tests can run containers. */
export const CAN_RUN_CONTAINERS = process.getuid?.() === 0 && onPath('runc');

/** Set to skip the Go tests deliberately (as the other packages' Go interop tests). */
export const SKIP_GO = process.env.BROKER_SKIP_GO_INTEROP === '1';

export async function tempDir(
  prefix = 'sandbox-agent-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * The container's program: prints its first argument on stdout, "to stderr" on stderr, then
 * behaves as its second argument says: a number is its exit status; `cat [STATUS]` copies stdin to stdout, then exits with STATUS;
 * `flood` writes 4 MiB to stdout; `show FILE` prints the file; `sleep` waits to be signalled; `eat` waits two seconds, then takes memory until it is killed;
 * `write FILE TEXT` writes TEXT to FILE; `symlink TARGET PATH` makes a symbolic link; `get PORT PATH FILE`
 * writes the body of an HTTP GET of 127.0.0.1:PORT PATH to FILE; `winsize ROWS COLS` says whether it has a
 * terminal, prints the terminal's size at each SIGWINCH, and exits with 4 once it is ROWS x COLS; `connect PATH...` tries to connect to each unix socket and
 * prints `PATH: connected`, `PATH: ENOENT` or the error; `crash` dies of SIGSEGV; `flood-forever`
 * writes to stdout until it is killed; `clock` prints `clock <seconds since the epoch>` (as `date +%s` would:
 * the container has no shell or coreutils).
 */
export const HELLO_C = `#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
static volatile sig_atomic_t winched;
static void on_winch(int sig) { (void)sig; winched = 1; }
int main(int argc, char **argv) {
  printf("hello from %s\\n", argc > 1 ? argv[1] : "a container");
  fflush(stdout);
  fputs("to stderr\\n", stderr);
  const char *what = argc > 2 ? argv[2] : "0";
  if (strcmp(what, "cat") == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0) write(1, buf, n);
    return argc > 3 ? atoi(argv[3]) : 0;
  }
  if (strcmp(what, "flood") == 0) {
    static char buf[65536];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 64; i++) write(1, buf, sizeof buf);
    return 0;
  }
  if (strcmp(what, "show") == 0 && argc > 3) {
    FILE *f = fopen(argv[3], "r");
    if (!f) return 2;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
  }
  if (strcmp(what, "eat") == 0) {
    sleep(2); /* after the agent's OOM watcher has started */
    for (;;) {
      char *p = malloc(1 << 20);
      if (p) memset(p, 1, 1 << 20);
    }
  }
  if (strcmp(what, "write") == 0 && argc > 4) {
    FILE *f = fopen(argv[3], "w");
    if (!f) { perror(argv[3]); return 2; }
    fputs(argv[4], f);
    return fclose(f) == 0 ? 0 : 3;
  }
  if (strcmp(what, "get") == 0 && argc > 5) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 2; }
    dprintf(s, "GET %s HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n", argv[4]);
    static char buf[65536];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(s, buf + n, sizeof buf - 1 - n)) > 0) n += r;
    buf[n] = 0;
    if (strncmp(buf + 8, " 200", 4) != 0) { fprintf(stderr, "%.40s\\n", buf); return 3; }
    char *body = strstr(buf, "\\r\\n\\r\\n");
    if (!body) return 4;
    body += 4;
    FILE *f = fopen(argv[5], "w");
    if (!f) { perror(argv[5]); return 5; }
    fwrite(body, 1, n - (body - buf), f);
    fclose(f);
    printf("fetched %s\\n", argv[4]);
    return 0;
  }
  if (strcmp(what, "winsize") == 0 && argc > 4) {
    struct winsize w = {0};
    /* SIGWINCH stays blocked except inside sigsuspend: a signal arriving between the test of winched
       and the wait would otherwise be lost, and the wait would never end (stty resizes twice). */
    sigset_t winch, old;
    sigemptyset(&winch);
    sigaddset(&winch, SIGWINCH);
    sigprocmask(SIG_BLOCK, &winch, &old);
    signal(SIGWINCH, on_winch);
    printf("tty=%d\\n", isatty(0) && isatty(1));
    fflush(stdout);
    for (;;) {
      while (!winched) sigsuspend(&old);
      winched = 0;
      ioctl(0, TIOCGWINSZ, &w);
      printf("rows=%d cols=%d\\n", w.ws_row, w.ws_col);
      fflush(stdout);
      if (w.ws_row == atoi(argv[3]) && w.ws_col == atoi(argv[4])) return 4;
    }
  }
  if (strcmp(what, "symlink") == 0 && argc > 4) {
    if (symlink(argv[3], argv[4]) != 0) { perror(argv[4]); return 2; }
    return 0;
  }
  if (strcmp(what, "connect") == 0) {
    for (int i = 3; i < argc; i++) {
      struct sockaddr_un addr = { .sun_family = AF_UNIX };
      strncpy(addr.sun_path, argv[i], sizeof addr.sun_path - 1);
      int s = socket(AF_UNIX, SOCK_STREAM, 0);
      int r = connect(s, (struct sockaddr *)&addr, sizeof addr);
      printf("%s: %s\\n", argv[i], r == 0 ? "connected" : errno == ENOENT ? "ENOENT" : strerror(errno));
      close(s);
    }
    return 0;
  }
  if (strcmp(what, "crash") == 0) {
    volatile int *p = 0;
    return *p;
  }
  if (strcmp(what, "flood-forever") == 0) {
    static char buf[65536];
    memset(buf, 'y', sizeof buf);
    for (;;) write(1, buf, sizeof buf);
  }
  if (strcmp(what, "sleep") == 0) {
    for (;;) pause();
  }
  if (strcmp(what, "clock") == 0) {
    printf("clock %lld\\n", (long long)time(NULL));
    return 0;
  }
  return atoi(what);
}
`;

/** A directory holding `hello` (HELLO_C, static, built with musl-gcc) as a container rootfs. */
export async function buildHelloRootfs(rootfs: string): Promise<string> {
  const key = createHash('sha256').update(HELLO_C).digest('hex').slice(0, 16);
  const cached = join(tmpdir(), `sandbox-agent-hello-${key}`);
  if (!existsSync(cached)) {
    // Test files build at once in one process (worker threads): a unique name for each build.
    const unique = `${cached}.${randomUUID()}`;
    const src = `${unique}.c`;
    await writeFile(src, HELLO_C);
    const compiler = existsSync('/usr/bin/musl-gcc') ? 'musl-gcc' : 'gcc';
    await run(compiler, ['-static', '-Os', '-o', unique, src]);
    await rename(unique, cached);
    await rm(src, { force: true });
  }
  await mkdir(rootfs, { recursive: true });
  await writeFile(join(rootfs, 'hello'), await readFile(cached));
  await chmod(join(rootfs, 'hello'), 0o755);
  for (const d of ['proc', 'dev', 'scratch', 'etc']) await mkdir(join(rootfs, d), { recursive: true });
  await writeFile(join(rootfs, 'etc/hosts'), ''); // a mount point for the pod's hosts file
  return rootfs;
}

/** A `grpc.Spec` as kata's runtime sends it (PascalCase fields), running `args` from `rootPath`. */
export function kataSpec(
  args: readonly string[],
  rootPath: string,
  extra: { mounts?: object[]; memoryLimit?: number } = {},
): object {
  return {
    Version: '1.0.2',
    Process: { Args: [...args], Env: ['PATH=/'], Cwd: '/', User: { UID: 0, GID: 0 }, NoNewPrivileges: true },
    Root: { Path: rootPath, Readonly: true },
    Hostname: 'web',
    Mounts: [
      { destination: '/proc', source: 'proc', type: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
      { destination: '/dev', source: 'tmpfs', type: 'tmpfs', options: ['nosuid', 'mode=755'] },
      {
        destination: '/dev/pts',
        source: 'devpts',
        type: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'],
      },
      ...(extra.mounts ?? []),
    ],
    Linux: {
      Namespaces: [
        { Type: 'pid' },
        { Type: 'ipc' },
        { Type: 'uts' },
        { Type: 'mount' },
        { Type: 'network', Path: '/var/run/netns/x' },
      ],
      ...(extra.memoryLimit !== undefined && { Resources: { Memory: { Limit: extra.memoryLimit } } }),
    },
  };
}

const GOPATH = '/usr/share/gocode';

function shimSource(): string {
  const beside = fileURLToPath(new URL('../../testdata/shim/main.go', import.meta.url));
  if (existsSync(beside)) return beside;
  return join(process.cwd(), 'packages/sandbox-agent/testdata/shim/main.go');
}

/** kata's own .proto files (test/vectors/kata/protos), from which the Go shim's stubs are generated. */
const KATA_PROTOS = ['agent.proto', 'csi.proto', 'health.proto', 'oci.proto', 'types.proto'] as const;
/** Where kata's protos put their Go packages (their go_package options), as main.go imports them. */
const KATA_GO = 'github.com/kata-containers/kata-containers/src/runtime/virtcontainers/pkg/agent/protocols';

function kataProto(name: string): string {
  const path = `kata/protos/${name}`;
  try {
    return vector(path);
  } catch {
    // Bundled (the boot test's pod.mjs runs from a work folder, started in the repository's root).
    return join(process.cwd(), 'test/vectors', path);
  }
}

/**
 * Builds the Go shim once per source, kata .proto files and Go version: generates gogo stubs from kata's
 * own agent, oci, csi, types and health .proto files with protoc and protoc-gen-gogofaster (built from
 * Debian's gogo sources), then builds main.go. The stubs never come from our .proto text (AGENT_PROTO and
 * the rest, which our agent and gate decode with): a field number or type we got wrong would then agree
 * with itself on both sides of the test.
 */
export async function buildGoShim(): Promise<string> {
  const goVersion = (await run('go', ['version'])).stdout;
  const main = await readFile(shimSource());
  const protos = await Promise.all(
    KATA_PROTOS.map(async (name) => {
      const text = await readFile(kataProto(name), 'utf8');
      // gogo predates proto3 `optional` (protoc refuses the plugin for such files); only the MemAgent
      // messages use it, and the shim never sends them. Dropping the label keeps every field number and
      // type.
      return [name, text.replace(/^(\s*)optional /gm, '$1')] as const;
    }),
  );
  const hash = createHash('sha256').update(main);
  for (const [name, text] of protos) hash.update(name).update(text);
  const key = hash.update(goVersion).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `sandbox-agent-go-shim-${key}`);
  const bin = join(dir, 'shim');
  if (existsSync(bin)) return bin;
  const work = `${dir}.${randomUUID()}`; // unique: test files build at once in one process
  await rm(work, { recursive: true, force: true });
  const env = {
    ...process.env,
    GO111MODULE: 'off',
    GOCACHE: join(tmpdir(), 'sandbox-agent-gocache'),
    GOFLAGS: '',
  };
  try {
    const protoDir = join(work, 'proto');
    const src = join(work, 'gopath/src');
    await mkdir(protoDir, { recursive: true });
    await mkdir(src, { recursive: true });
    for (const [name, text] of protos) await writeFile(join(protoDir, name), text);
    const plugin = join(work, 'protoc-gen-gogofaster');
    await run('go', ['build', '-o', plugin, 'github.com/gogo/protobuf/protoc-gen-gogofaster'], {
      env: { ...env, GOPATH },
      timeout: 300_000,
    });
    // Each file lands under its go_package path below gopath/src (kata's own package layout); the
    // well-known Empty comes from gogo's types, the registry gogo's jsonpb and proto.MessageType use.
    const maps = 'Mgoogle/protobuf/empty.proto=github.com/gogo/protobuf/types';
    // gogo generates one Go package per protoc run (types.proto has a package of its own).
    const groups: string[][] = [['types.proto'], ['agent.proto', 'csi.proto', 'health.proto', 'oci.proto']];
    for (const files of groups) {
      await run(
        'protoc',
        [
          `--plugin=protoc-gen-gogofaster=${plugin}`,
          `-I${protoDir}`,
          `--gogofaster_out=${maps}:${src}`,
          ...files,
        ],
        { cwd: protoDir },
      );
    }
    if (!existsSync(join(src, KATA_GO, 'grpc/agent.pb.go'))) {
      throw new Error(`protoc wrote no ${KATA_GO}/grpc/agent.pb.go`);
    }
    await run('go', ['build', '-o', join(work, 'shim'), shimSource()], {
      cwd: dirname(shimSource()),
      env: { ...env, GOPATH: `${join(work, 'gopath')}:${GOPATH}` },
      timeout: 300_000,
    });
    await mkdir(dir, { recursive: true });
    // Within one directory, so the last rename puts a whole executable in place.
    const staged = `${bin}.${randomUUID()}`;
    await rename(join(work, 'shim'), staged);
    await rename(staged, bin);
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`building the Go shim failed: ${err.stderr || err.message}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return bin;
}

export interface ShimPlan {
  sandbox_id: string;
  container_id: string;
  /** Where CopyFile puts the pod's hosts file, bind-mounted on the container's /etc/hosts. */
  hosts_file: string;
  hosts: string;
  exec_args: string[];
  rootfs_source: string;
  rootfs_mount_point: string;
  empty_dir: string;
  args: string[];
}

export interface ShimReport {
  steps: { name: string; error?: string }[];
  healthy: boolean;
  agent_version: string;
  stdout: string;
  stderr: string;
  status: number;
  exec_stdout: string;
  exec_status: number;
  first_output_ms: number;
}

/** Runs the Go shim's pod sequence against the agent listening on `socket`. */
export function runGoShim(bin: string, socket: string, plan: ShimPlan): Promise<ShimReport> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, [socket], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`Go shim failed: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as ShimReport);
    });
    child.stdin?.end(JSON.stringify(plan));
  });
}

/** One call of a Go shim script: the RPC, its request as protobuf JSON, and the message types. */
export interface ScriptCall {
  readonly service?: string;
  readonly rpc: string;
  readonly request_type: string;
  readonly response_type: string;
  readonly request?: object;
  /** Repeat ReadStdout/ReadStderr until the agent answers empty data. */
  readonly read_to_end?: boolean;
  readonly timeout_ms?: number;
}

/** What the Go shim reports for one call: the response as protobuf JSON (proto field names), or the error. */
export interface CallResult {
  rpc: string;
  error?: string;
  response?: Decoded;
  /** The bytes a `read_to_end` call read, as text. */
  data?: string;
  /** Milliseconds since the script began at which the call was sent and answered. */
  sent_ms: number;
  done_ms: number;
}

/** A `grpc.AgentService` call for a Go shim script; `request` is protobuf JSON with proto field names. */
export function agentCall(
  rpc: string,
  request: object = {},
  options: { read_to_end?: boolean; timeout_ms?: number } = {},
): ScriptCall {
  const requestType = AGENT_METHODS[rpc];
  if (requestType === undefined) throw new Error(`${rpc} is not an RPC of grpc.AgentService`);
  return {
    rpc,
    request_type: `grpc.${requestType}`,
    // kata's agent.proto answers with google.protobuf.Empty where our own text has grpc.Empty.
    response_type:
      RESPONSES[rpc] === undefined
        ? 'google.protobuf.Empty'
        : RESPONSES[rpc].includes('.')
          ? RESPONSES[rpc]
          : `grpc.${RESPONSES[rpc]}`,
    request,
    ...options,
  };
}

/** Runs a script of calls with the Go shim against the agent (or a gate) listening on `socket`. */
export function runGoScript(
  bin: string,
  socket: string,
  calls: readonly ScriptCall[],
): Promise<CallResult[]> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      [socket],
      { timeout: 600_000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`Go shim failed: ${stderr || err.message}`));
        else resolve(JSON.parse(stdout) as CallResult[]);
      },
    );
    child.stdin?.end(JSON.stringify({ calls }));
  });
}
