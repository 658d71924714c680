// Flow A to the end, and flow B, on the host: the KBS holding the image policy (default reject, `sigstoreSigned` for
// the signed prefix) and its public key; Debian's docker-registry holding a signed and an unsigned image
// of one static program; the guest components (attestation-agent, confidential-data-hub) started from
// an initdata document that also carries the agent policy; the sandbox agent running containers with
// Debian's runc, its image_guest_pull storages pulled through the data hub's PullImage; and the
// agent-policy gate in front of it, reading policy.rego from the same initdata. A client we did not
// write (the Go shim: containerd/ttrpc with gogo types from the agent's .proto text) makes kata's
// runtime calls through the gate:
// - the unsigned image: CreateContainer fails with the data hub's rejection text, and the KBS serves
//   the policy only (no key, no secret);
// - the signed image: the container is created, started, and its output read with ReadStdout;
// - ExecProcess is refused by the policy (`ExecProcessRequest is blocked by policy`) and runc never
//   hears of it;
// - the policy makes ReadStreamRequest true for one container and false for another, whose output the
//   gate drops although the container wrote it;
// - flow B: an init container fetches the application key through the guest's api-server-rest into an
//   emptyDir, and the main container reads it there.
// Root and runc (the agent runs containers), Go and protoc (the client).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_POLICY_REGO } from '@broker/agent-policy';
import { buildImage, buildLayer, parseImageReference, pushImage, RegistryClient } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { dataHubPuller, type RunningAgent, startSandboxAgent } from '@broker/sandbox-agent';
import {
  agentCall,
  buildGoShim,
  buildHelloRootfs,
  CAN_RUN_CONTAINERS,
  type CallResult,
  kataSpec,
  runGoScript,
  SKIP_GO,
} from '@broker/sandbox-agent/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const POLICY = 'default/image-policy/policy';
const SIGNATURE_KEY = 'default/signature-secret/pub-key';
const APP_SECRET = 'default/app-secret/key';
const SIGSTORE_DENIAL = 'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule';

/** The agent policy in initdata: the default policy, but logs readable only outside container "quiet". */
const POLICY_REGO = DEFAULT_POLICY_REGO.replace(
  'default ReadStreamRequest := true',
  'default ReadStreamRequest := false\n\nReadStreamRequest if input.container_id != "quiet"',
);

describe.skipIf(!CAN_RUN_CONTAINERS || SKIP_GO)(
  'flow A to the end: the sandbox agent behind the gate',
  () => {
    let dir: string;
    let kbs: KbsHandle;
    let registry: RunningRegistry;
    let guest: GuestHandle;
    let agent: RunningAgent;
    let gate: Running;
    let shim: string;
    let root: string;
    const agentLogs: { msg: string; obj: Record<string, unknown> }[] = [];
    const runcCalls = () =>
      existsSync(join(dir, 'runc-calls.log')) ? readFileSync(join(dir, 'runc-calls.log'), 'utf8') : '';
    const signed = () => `${registry.host}/signed/app:v1`;
    const unsigned = () => `${registry.host}/signed/unsigned:v1`;

    /** KBS resource paths fetched so far, from its access log. */
    const resourceGets = () =>
      [...kbs.process.output().matchAll(/"method":"GET","path":"\/kbs\/v0\/resource\/([^ "?]+)/g)].map(
        (m) => m[1]!,
      );
    /** Waits until the KBS has logged every request answered so far (a marker request to /healthz). */
    async function kbsLogSettled(): Promise<void> {
      const count = () => (kbs.process.output().match(/"method":"GET","path":"\/healthz"/g) ?? []).length;
      const before = count();
      await new Promise<void>((resolve, reject) => {
        const req = request(`${kbs.url}/healthz`, { ca: kbs.tls.certPem }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        req.end();
      });
      while (count() <= before) await new Promise((r) => setTimeout(r, 20));
    }

    async function setResource(path: string, content: string | Buffer): Promise<void> {
      const file = join(dir, `resource-${path.replaceAll('/', '_')}`);
      writeFileSync(file, content);
      await mustSucceed(kbs.admin('set-resource', '--path', path, '--resource-file', file));
    }

    /** Pushes an image holding the static test program at /hello. */
    async function publish(reference: string, hello: Buffer): Promise<string> {
      const ref = parseImageReference(reference);
      const layer = await buildLayer([
        { name: 'hello', content: hello, mode: 0o755 },
        ...['proc', 'dev', 'etc', 'keys'].map((name) => ({ name, type: 'directory' as const })),
      ]);
      const client = new RegistryClient({ insecure: () => true });
      try {
        return await pushImage(
          client,
          { domain: ref.domain, path: ref.path },
          ref.tag!,
          buildImage({ layers: [layer], cmd: ['/hello'] }),
        );
      } finally {
        client.close();
      }
    }

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'broker-sandbox-agent-flow-a-'));
      shim = await buildGoShim();
      kbs = await prepareKbs(dir);
      [registry] = await Promise.all([startDockerRegistry(), kbs.start()]);
      const keys = join(dir, 'keys');
      mkdirSync(keys);
      await mustSucceed(runToEnd(binary('image-policy'), ['generate-key', join(keys, 'workshop')]));
      const hello = readFileSync(join(await buildHelloRootfs(join(dir, 'hello-rootfs')), 'hello'));
      await publish(signed(), hello);
      await publish(unsigned(), hello);
      await mustSucceed(
        runToEnd(binary('image-policy'), [
          'sign',
          '--key',
          join(keys, 'workshop.key'),
          '--plain-http',
          `docker://${signed()}`,
        ]),
      );
      await setResource(
        POLICY,
        JSON.stringify({
          default: [{ type: 'reject' }],
          transports: {
            docker: {
              [`${registry.host}/signed`]: [{ type: 'sigstoreSigned', keyPath: `kbs:///${SIGNATURE_KEY}` }],
            },
          },
        }),
      );
      await setResource(SIGNATURE_KEY, readFileSync(join(keys, 'workshop.pub')));
      await setResource(APP_SECRET, 'the pod secret');
      for (const rv of SAMPLE_REFERENCE_VALUES)
        await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
      await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));

      const guestDir = join(dir, 'guest');
      guest = await startGuest(kbs, guestDir, {
        cdhTomlExtra: `[image]\nimage_security_policy_uri = "kbs:///${POLICY}"\nwork_dir = "${join(guestDir, 'image-work')}"\n\n[[image.registry_config.registry]]\nlocation = "${registry.host}"\ninsecure = true\n`,
        policyRego: POLICY_REGO,
      });

      // runc as the agent runs it, recording every call.
      const runc = execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim();
      writeFileSync(
        join(dir, 'runc'),
        `#!/bin/sh\nprintf '%s\\n' "$*" >> '${join(dir, 'runc-calls.log')}'\nexec '${runc}' "$@"\n`,
        { mode: 0o755 },
      );
      const pause = join(dir, 'pause_bundle');
      await buildHelloRootfs(join(pause, 'rootfs'));
      writeFileSync(
        join(pause, 'config.json'),
        JSON.stringify({ process: { args: ['/hello', 'pause', 'sleep'] } }),
      );
      mkdirSync(join(dir, 'kata'));
      agent = await startSandboxAgent({
        listen: [{ path: join(dir, 'kata/agent.sock') }],
        roots: [join(dir, 'kata')],
        stateDir: join(dir, 'agent-state'),
        runc: join(dir, 'runc'),
        pullImage: dataHubPuller(`unix://${guest.cdhSock}`),
        protectedPaths: [guest.cdhSock],
        pauseBundle: pause,
        logger: {
          info: (obj, msg) => agentLogs.push({ msg, obj: obj as Record<string, unknown> }),
          warn: (obj, msg) => agentLogs.push({ msg, obj: obj as Record<string, unknown> }),
        },
      });
      root = agent.agent.roots[0]!;
      gate = start(binary('agent-policy-gate'), [
        'serve',
        '--listen',
        `unix://${join(dir, 'gate.sock')}`,
        '--agent',
        `unix://${join(dir, 'kata/agent.sock')}`,
        '--initdata',
        join(guestDir, 'initdata/initdata.toml'),
      ]);
      await waitForListen({ path: join(dir, 'gate.sock') }, gate);
    }, 600_000);

    afterAll(async () => {
      await gate?.stop();
      await agent?.close();
      await guest?.stop();
      await registry?.stop();
      await kbs?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const imageStorage = (cid: string, image: string, type: 'sandbox' | 'container') => ({
      driver: 'image_guest_pull',
      driver_options: [
        `image_guest_pull=${JSON.stringify({ metadata: { 'io.kubernetes.cri.container-type': type, 'io.kubernetes.cri.image-name': image } })}`,
      ],
      source: image,
      fstype: 'overlay',
      mount_point: join(root, cid, 'rootfs'),
    });
    /** The emptyDir flow B's containers share, as kata's runtime sends it with each. */
    const keysDir = () => ({
      driver: 'local',
      source: 'local',
      fstype: 'local',
      options: ['mode=0700'],
      mount_point: join(root, 'sandbox/local/keys'),
    });
    const keysMount = () => ({
      destination: '/keys',
      source: join(root, 'sandbox/local/keys'),
      type: 'bind',
      options: ['rbind', 'rw'],
    });
    const create = (
      cid: string,
      image: string,
      args: string[],
      type: 'sandbox' | 'container' = 'container',
      keys = false,
    ) =>
      agentCall(
        'CreateContainer',
        {
          container_id: cid,
          exec_id: cid,
          storages: [imageStorage(cid, image, type), ...(keys ? [keysDir()] : [])],
          OCI: {
            ...kataSpec(args, join(root, cid, 'rootfs'), { mounts: keys ? [keysMount()] : [] }),
            Annotations: { 'io.kubernetes.cri.container-type': type, 'io.kubernetes.cri.image-name': image },
          },
        },
        { timeout_ms: 300_000 },
      );
    const io = (cid: string) => ({ container_id: cid, exec_id: cid });

    it('the unsigned image is refused at CreateContainer with the data hub rejection, and only the image policy is fetched', async () => {
      await kbsLogSettled();
      const before = resourceGets().length;
      const results = await runGoScript(shim, join(dir, 'gate.sock'), [
        agentCall('GetGuestDetails', { mem_block_size: true }),
        agentCall('CreateSandbox', { hostname: 'pod-a', sandbox_id: 'pod-a' }),
        create('pause', 'registry.k8s.io/pause:3.9', ['/hello', 'pause', 'sleep'], 'sandbox'),
        agentCall('StartContainer', { container_id: 'pause' }),
        create('unsigned', unsigned(), ['/hello', 'unsigned']),
      ]);
      await kbsLogSettled();
      expect(results.slice(0, 4).map((r) => r.error)).toEqual([undefined, undefined, undefined, undefined]);
      const refused = results[4]!;
      expect(refused.error).toContain('code = Internal');
      // The data hub's words, as kata reports them in the pod's events.
      expect(refused.error).toContain(
        `[CDH] [ERROR]: Image Pull error: Failed to pull image ${unsigned()} from all mirror/mapping locations or original location: image: ${unsigned()}, error: ${SIGSTORE_DENIAL}`,
      );
      // The first pull of this guest: it attests and fetches the policy; an unsigned image needs no key.
      expect(resourceGets().slice(before)).toEqual([POLICY]);
      expect(runcCalls()).not.toMatch(/ unsigned$/m);
      expect(existsSync(join(root, 'unsigned'))).toBe(false);
      expect(existsSync(join(agent.agent.stateDir, 'containers/unsigned'))).toBe(false);
    }, 600_000);

    let results: CallResult[];

    it('the signed image runs: created, started, its output read; exec is refused by the policy before runc', async () => {
      await kbsLogSettled();
      const before = resourceGets().length;
      results = await runGoScript(shim, join(dir, 'gate.sock'), [
        create('app', signed(), ['/hello', 'flow A', 'sleep']),
        agentCall('StartContainer', { container_id: 'app' }),
        agentCall('ReadStdout', { ...io('app'), len: 4096 }),
        agentCall('ExecProcess', {
          container_id: 'app',
          exec_id: '6b1f3f0e-5a61-4a53-9e1b-0d8d1c2a9e77',
          process: { Args: ['/hello', 'exec'], Env: ['PATH=/'], Cwd: '/', User: {} },
        }),
        agentCall('SignalProcess', { ...io('app'), signal: 9 }),
        agentCall('WaitProcess', io('app')),
        agentCall('ReadStdout', { ...io('app'), len: 4096 }, { read_to_end: true }),
        // The policy hides this container's output.
        create('quiet', signed(), ['/hello', 'quiet']),
        agentCall('StartContainer', { container_id: 'quiet' }),
        agentCall('WaitProcess', io('quiet')),
        agentCall('ReadStdout', { ...io('quiet'), len: 4096 }),
        agentCall('ReadStderr', { ...io('quiet'), len: 4096 }),
      ]);
      await kbsLogSettled();
      const outcome = results.map((r) => [r.rpc, r.error ?? 'ok']);
      expect(outcome).toEqual([
        ['CreateContainer', 'ok'],
        ['StartContainer', 'ok'],
        ['ReadStdout', 'ok'],
        [
          'ExecProcess',
          'rpc error: code = PermissionDenied desc = "ExecProcessRequest is blocked by policy: "',
        ],
        ['SignalProcess', 'ok'],
        ['WaitProcess', 'ok'],
        ['ReadStdout', 'ok'],
        ['CreateContainer', 'ok'],
        ['StartContainer', 'ok'],
        ['WaitProcess', 'ok'],
        ['ReadStdout', 'ok'],
        ['ReadStderr', 'ok'],
      ]);
      // The container's output, through the gate.
      expect(Buffer.from(results[2]!.response!.data, 'base64').toString()).toBe('hello from flow A\n');
      expect(results[5]!.response).toEqual({ status: 128 + 9 });
      expect(results[6]!.data ?? '').toBe('');
      // The pulled image is the signed one (the container's root, bound into its bundle, is the pulled
      // rootfs); the key was fetched to check it, the secret never.
      const bound = statSync(join(agent.agent.stateDir, 'containers/app/rootfs'));
      const pulled = statSync(join(root, 'app/rootfs'));
      expect([bound.dev, bound.ino]).toEqual([pulled.dev, pulled.ino]);
      expect(resourceGets().slice(before)).toEqual([SIGNATURE_KEY]);
      expect(resourceGets()).not.toContain(APP_SECRET);
      // The refused exec never reached the agent, so runc never ran it.
      expect(runcCalls()).toMatch(/ run --bundle \S+ --pid-file \S+ app$/m);
      expect(runcCalls()).not.toMatch(/ exec /);
      // "quiet" wrote its line, but ReadStreamRequest is false for it: the gate answers no data.
      expect(results[9]!.response).toEqual({ status: 0 });
      expect(results[10]!.response?.data ?? '').toBe(''); // empty bytes
      expect(results[11]!.response?.data ?? '').toBe('');
      expect(
        agentLogs.some(
          (l) => l.msg === 'first output, measured from CreateContainer' && l.obj.container === 'quiet',
        ),
      ).toBe(true);
      const agentMs = agentLogs.find(
        (l) => l.msg === 'first output, measured from CreateContainer' && l.obj.container === 'app',
      )?.obj.ms;
      console.log(
        `signed image: CreateContainer (pull included) → first output ${(results[2]!.done_ms - results[0]!.sent_ms).toFixed(1)} ms at the Go client through the gate, ${String(agentMs)} ms in the agent; the pull itself took ${(results[0]!.done_ms - results[0]!.sent_ms).toFixed(1)} ms`,
      );
    }, 600_000);

    it("flow B: the init container fetches the key through the guest's api-server-rest into the emptyDir, the main container reads it", async () => {
      await kbsLogSettled();
      const before = resourceGets().length;
      const path = `/cdh/resource/${APP_SECRET}`;
      // Containers share the guest's network, so 127.0.0.1 is the guest's, where api-server-rest listens.
      const flowB = await runGoScript(shim, join(dir, 'gate.sock'), [
        create(
          'fetch-key',
          signed(),
          ['/hello', 'init', 'get', String(guest.restPort), path, '/keys/key'],
          'container',
          true,
        ),
        agentCall('StartContainer', { container_id: 'fetch-key' }),
        agentCall('ReadStdout', { ...io('fetch-key'), len: 4096 }, { read_to_end: true }),
        agentCall('WaitProcess', io('fetch-key')),
        create('main', signed(), ['/hello', 'main', 'show', '/keys/key'], 'container', true),
        agentCall('StartContainer', { container_id: 'main' }),
        agentCall('ReadStdout', { ...io('main'), len: 4096 }, { read_to_end: true }),
        agentCall('WaitProcess', io('main')),
      ]);
      await kbsLogSettled();
      expect(flowB.map((r) => r.error)).toEqual(Array(8).fill(undefined));
      expect(flowB[2]!.data).toBe(`hello from init\nfetched ${path}\n`);
      expect(flowB[3]!.response).toEqual({ status: 0 });
      expect(flowB[6]!.data).toBe('hello from main\nthe pod secret');
      expect(flowB[7]!.response).toEqual({ status: 0 });
      // The secret came from the KBS now, for this pod, and not before.
      expect(resourceGets().slice(before)).toEqual([APP_SECRET]);
    }, 600_000);

    it('the pod goes away', async () => {
      const end = await runGoScript(shim, join(dir, 'gate.sock'), [
        agentCall('RemoveContainer', { container_id: 'main' }),
        agentCall('RemoveContainer', { container_id: 'fetch-key' }),
        agentCall('RemoveContainer', { container_id: 'quiet' }),
        agentCall('RemoveContainer', { container_id: 'app' }),
        agentCall('SignalProcess', { ...io('pause'), signal: 9 }),
        agentCall('RemoveContainer', { container_id: 'pause' }),
        agentCall('DestroySandbox'),
      ]);
      expect(end.map((r) => r.error)).toEqual(Array(7).fill(undefined));
      expect(agent.agent.storagesInUse.size).toBe(0);
      expect(existsSync(join(root, 'sandbox/local/keys'))).toBe(false);
      expect(agent.agent.sandboxId).toBeUndefined();
      expect(existsSync(join(root, 'app'))).toBe(false);
    }, 120_000);
  },
);
