import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import type { KvStorage, Namespace, SetOptions } from '@broker/kv-storage';
import { canonicalJson, type ReportDataHashAlgorithm } from '@broker/protocol';
import { RvpsError } from '@broker/rvps-core';
import { VerificationError } from '@broker/verifier';
import { decodeJwt, decodeProtectedHeader, importJWK, jwtVerify } from 'jose';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BROKER_DEFAULT_POLICY_CPU } from './broker-policy.js';
import { parseAttestationServiceConfig } from './config.js';
import {
  EAR_DEFAULT_POLICY_CPU,
  EAR_DEFAULT_POLICY_PPCIE,
  EAR_DEFAULT_POLICY_SWITCH,
} from './default-policies.gen.js';
import { AttestationFailed, InvalidPolicyId, ParsePolicyError } from './errors.js';
import { PolicyCheckError } from './limits.js';
import { createAttestationService } from './service.js';
import type { AttestationService, VerifyRequest } from './service-api.js';

class MemoryKv implements KvStorage {
  readonly data = new Map<string, Uint8Array>();
  async get(ns: Namespace, key: string) {
    return this.data.get(`${ns}/${key}`);
  }
  async set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions) {
    if (options?.overwrite === false && this.data.has(`${ns}/${key}`)) return false;
    this.data.set(`${ns}/${key}`, value);
    return true;
  }
  async delete(ns: Namespace, key: string) {
    return this.data.delete(`${ns}/${key}`);
  }
  async list(ns: Namespace) {
    return [...this.data.keys()].filter((k) => k.startsWith(`${ns}/`)).map((k) => k.slice(ns.length + 1));
  }
  async close() {}
}

// biome-ignore lint/suspicious/noExplicitAny: the tests walk decoded token JSON
type Json = any;

const logger = pino({ level: 'silent' });
const EXAMPLE_TOKEN = vector('trustee/example.token.json');
const teeKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
const teePubkey = { kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW', x: teeKey.x, y: teeKey.y };

function runtimeData(nonce = 'Z3Vlc3Qgbm9uY2U=', additional = ''): Record<string, unknown> {
  return { 'additional-evidence': additional, nonce, 'tee-pubkey': teePubkey };
}

function digest(rd: Record<string, unknown>, alg: ReportDataHashAlgorithm = 'sha384'): Buffer {
  return createHash(alg).update(canonicalJson(rd)).digest();
}

function request(over: Partial<VerifyRequest> = {}): VerifyRequest {
  const rd = over.runtimeData ?? runtimeData();
  const alg = over.runtimeDataHashAlgorithm ?? 'sha384';
  return {
    tee: 'sample',
    evidence:
      'evidence' in over ? over.evidence : { svn: '1', report_data: digest(rd, alg).toString('base64') },
    runtimeData: rd,
    runtimeDataHashAlgorithm: alg,
    initData: null,
    additional: [],
    policyIds: ['default'],
    ...over,
  };
}

function rvMessage(values: Record<string, unknown>): string {
  return JSON.stringify({
    version: '0.1.0',
    type: 'sample',
    payload: Buffer.from(JSON.stringify(values)).toString('base64'),
  });
}

async function service(
  table: unknown = undefined,
  kv: KvStorage = new MemoryKv(),
  now?: () => number,
): Promise<AttestationService> {
  return createAttestationService(parseAttestationServiceConfig(table), kv, logger, {
    ...(now !== undefined ? { now } : {}),
  });
}

/** Verifies the token with the header jwk (the KBS's insecure_header_jwk mode) and returns its claims. */
async function claimsOf(as: AttestationService, token: string): Promise<Record<string, Json>> {
  const header = decodeProtectedHeader(token);
  expect(header).toEqual({ typ: 'JWT', alg: 'ES256', jwk: as.signerPublicJwk });
  const { payload } = await jwtVerify(token, await importJWK(header.jwk as never, 'ES256'));
  return payload as Record<string, Json>;
}

async function failure(p: Promise<unknown>): Promise<AttestationFailed> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(AttestationFailed);
    return e as AttestationFailed;
  }
  throw new Error('expected AttestationFailed');
}

const SAMPLE_RVS = { launch_digest: ['abcde'], svn: ['1'], major_version: 1, minimum_minor_version: 0 };

describe("built-in attestation service with trustee's default EAR policy", () => {
  it('issues a contraindicated token for sample evidence without reference values', async () => {
    const as = await service();
    const rd = runtimeData();
    const claims = await claimsOf(as, await as.verify(request({ runtimeData: rd })));
    expect(Object.keys(claims)).toEqual(['eat_profile', 'iat', 'ear.verifier-id', 'submods', 'exp', 'iss']);
    expect(claims.eat_profile).toBe('tag:github.com,2024:confidential-containers/Trustee');
    expect(claims.iss).toBe('CoCo-Attestation-Service');
    expect(claims['ear.verifier-id']).toEqual({
      developer: 'https://confidentialcontainers.org',
      build: 'broker-attestation-service 0.1.0',
    });
    expect(claims.exp - claims.iat).toBe(300);
    expect(Object.keys(claims.submods)).toEqual(['cpu0']);
    const cpu0 = claims.submods.cpu0;
    expect(Object.keys(cpu0)).toEqual([
      'ear.status',
      'ear.trustworthiness-vector',
      'ear.appraisal-policy-id',
      'ear.veraison.annotated-evidence',
      'ear.trustee.identifiers',
    ]);
    expect(cpu0['ear.status']).toBe('contraindicated');
    // Defaults 33/97 stand without reference values; the sample's debug=false gives configuration 2.
    expect(cpu0['ear.trustworthiness-vector']).toEqual({
      'instance-identity': 0,
      configuration: 2,
      executables: 33,
      'file-system': 0,
      hardware: 97,
      'runtime-opaque': 0,
      'storage-opaque': 0,
      'sourced-data': 0,
    });
    expect(Object.keys(cpu0['ear.trustworthiness-vector'])).toEqual([
      'instance-identity',
      'configuration',
      'executables',
      'file-system',
      'hardware',
      'runtime-opaque',
      'storage-opaque',
      'sourced-data',
    ]);
    expect(cpu0['ear.appraisal-policy-id']).toBe('default');
    expect(cpu0['ear.veraison.annotated-evidence']).toEqual({
      report_data: digest(rd).toString('base64'),
      runtime_data_claims: rd,
      sample: { debug: false, launch_digest: 'abcde', platform_version: { major: 1, minor: 4 }, svn: '1' },
    });
    expect(cpu0['ear.trustee.identifiers']).toEqual({ validated: {} });
    // The KBS finds the TEE key here.
    expect(cpu0['ear.veraison.annotated-evidence'].runtime_data_claims['tee-pubkey']).toEqual(teePubkey);
  });

  it("keeps the member order of trustee's example token", async () => {
    const example = JSON.parse(readFileSync(EXAMPLE_TOKEN, 'utf8')) as Record<string, Json>;
    const as = await service();
    const ours = await claimsOf(as, await as.verify(request()));
    const order = (keys: string[], of: string[]) => of.filter((k) => keys.includes(k));
    // Ours adds `iss` (trustee's broker sets it; the example predates that) and the policy's extension.
    expect(order(Object.keys(example), Object.keys(ours))).toEqual(Object.keys(example));
    const exCpu = Object.keys(example.submods.cpu0);
    expect(order(exCpu, Object.keys(ours.submods.cpu0))).toEqual(exCpu);
    expect(Object.keys(ours.submods.cpu0['ear.trustworthiness-vector'])).toEqual(
      Object.keys(example.submods.cpu0['ear.trustworthiness-vector']),
    );
    expect(Object.keys(ours['ear.verifier-id']).sort()).toEqual(
      Object.keys(example['ear.verifier-id']).sort(),
    );
  });

  it('issues an affirming token when the reference values match', async () => {
    const as = await service();
    await as.registerReferenceValue(rvMessage(SAMPLE_RVS));
    const cpu0 = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(cpu0['ear.status']).toBe('affirming');
    expect(cpu0['ear.trustworthiness-vector']).toMatchObject({
      executables: 3,
      hardware: 2,
      configuration: 2,
    });
  });

  // hardware 97 is contraindicated; executables 33 is only a warning (AR4SI tiers).
  it.each([
    ['the svn is not listed', { svn: ['2'] }, 'contraindicated', { executables: 3, hardware: 97 }],
    ['the major version differs', { major_version: 2 }, 'contraindicated', { executables: 3, hardware: 97 }],
    ['the minor version is too low', { minimum_minor_version: 5 }, 'contraindicated', { hardware: 97 }],
    [
      'the launch digest is not listed',
      { launch_digest: ['xyz'] },
      'warning',
      { executables: 33, hardware: 2 },
    ],
  ])('is not affirming when %s', async (_name, change, status, vector) => {
    const as = await service();
    await as.registerReferenceValue(rvMessage({ ...SAMPLE_RVS, ...change }));
    const cpu0 = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(cpu0['ear.status']).toBe(status);
    expect(cpu0['ear.trustworthiness-vector']).toMatchObject({ ...vector, configuration: 2 });
  });

  it('sees reference values registered after an earlier attestation at once', async () => {
    const as = await service();
    const first = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(first['ear.status']).toBe('contraindicated');
    await as.registerReferenceValue(rvMessage(SAMPLE_RVS));
    const second = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(second['ear.status']).toBe('affirming');
    await as.registerReferenceValue(rvMessage({ svn: ['9'] }));
    const third = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(third['ear.trustworthiness-vector'].hardware).toBe(97);
  });

  it('serves reference values to the admin API', async () => {
    const as = await service();
    await as.registerReferenceValue(rvMessage({ svn: ['1'] }));
    expect(await as.getReferenceValue('svn')).toEqual(['1']);
    expect(await as.getReferenceValue('nope')).toBeUndefined();
    await expect(as.registerReferenceValue(42)).rejects.toBeInstanceOf(RvpsError);
    await expect(as.registerReferenceValue('{"version":"9"}')).rejects.toBeInstanceOf(RvpsError);
  });
});

const INITDATA = `version = "0.1.0"
algorithm = "sha384"

[data]
"aa.toml" = '''
[token_configs]
[token_configs.kbs]
url = "https://kbs.example:8080"
'''

"policy.rego" = '''
package agent_policy

default AllowRequestsFailingPolicy := false

policy_data := {
  "containers": [
    {"OCI": {"Annotations": {"io.kubernetes.cri.image-name": "registry.example/pause:3.9"}, "Process": {"User": {"UID": 65535}}}},
    {"OCI": {"Annotations": {"io.kubernetes.cri.image-name": "registry.example/app:1"}, "Process": {"User": {"UID": 1000}}}}
  ]
}
'''
`;

describe('initdata', () => {
  it('exposes the digest (sample does not bind it) and the expanded claims, and the policy reads identifiers', async () => {
    const as = await service();
    const token = await as.verify(request({ initData: { format: 'toml', body: INITDATA } }));
    const cpu0 = (await claimsOf(as, token)).submods.cpu0;
    const ae = cpu0['ear.veraison.annotated-evidence'];
    expect(ae.init_data).toBe(createHash('sha384').update(INITDATA).digest('base64'));
    expect(ae.init_data_claims['aa.toml']).toEqual({
      token_configs: { kbs: { url: 'https://kbs.example:8080' } },
    });
    expect(ae.init_data_claims['policy.rego']).toBeUndefined();
    expect(ae.init_data_claims.agent_policy_claims.containers).toHaveLength(2);
    expect(Object.keys(ae)).toEqual([
      'init_data',
      'init_data_claims',
      'report_data',
      'runtime_data_claims',
      'sample',
    ]);
    expect(cpu0['ear.trustee.identifiers']).toEqual({
      validated: {
        container_images: ['registry.example/pause:3.9', 'registry.example/app:1'],
        container_uids: [65535, 1000],
      },
    });
  });

  it("digests with the document's own algorithm", async () => {
    const as = await service();
    const body = 'version = "0.1.0"\nalgorithm = "sha256"\n[data]\n';
    const ae = (await claimsOf(as, await as.verify(request({ initData: { format: 'toml', body } })))).submods
      .cpu0['ear.veraison.annotated-evidence'];
    expect(ae.init_data).toBe(createHash('sha256').update(body).digest('base64'));
    expect(ae.init_data_claims).toEqual({});
  });

  it.each([
    ['format json', { format: 'json', body: '{}' }, 'Unsupported initdata format'],
    ['TOML garbage', { format: 'toml', body: 'version = ' }, 'initdata'],
    [
      'a wrong version',
      { format: 'toml', body: 'version = "0.2.0"\nalgorithm = "sha256"\n[data]\n' },
      'version',
    ],
    [
      'an unknown algorithm',
      { format: 'toml', body: 'version = "0.1.0"\nalgorithm = "md5"\n[data]\n' },
      'algorithm',
    ],
    [
      'non-string data',
      { format: 'toml', body: 'version = "0.1.0"\nalgorithm = "sha256"\n[data]\na = 1\n' },
      'string',
    ],
  ])('refuses %s', async (_name, initData, text) => {
    const as = await service();
    const e = await failure(as.verify(request({ initData })));
    expect(e.reason).toBe('REQUEST');
    expect(e.message).toContain(text);
  });
});

describe('evidence binding and failures', () => {
  it('refuses evidence whose report data is not H(JCS(runtime data))', async () => {
    const as = await service();
    const good = request();
    const e = await failure(as.verify({ ...good, runtimeData: runtimeData('another nonce') }));
    expect(e.reason).toBe('EVIDENCE');
    expect(e.cause).toBeInstanceOf(VerificationError);
    expect((e.cause as VerificationError).code).toBe('REPORT_DATA_MISMATCH');
  });

  it('uses the negotiated hash algorithm', async () => {
    const as = await service();
    await as.verify(request({ runtimeDataHashAlgorithm: 'sha512' }));
    const sha384Evidence = request();
    const e = await failure(as.verify({ ...sha384Evidence, runtimeDataHashAlgorithm: 'sha512' }));
    expect(e.reason).toBe('EVIDENCE');
  });

  it('refuses a TEE without a verifier', async () => {
    const as = await service();
    const e = await failure(as.verify(request({ tee: 'sgx' })));
    expect(e.reason).toBe('EVIDENCE');
    expect(e.message).toContain('sgx');
  });

  it('refuses malformed evidence', async () => {
    const as = await service();
    expect((await failure(as.verify(request({ evidence: 'garbage' })))).reason).toBe('EVIDENCE');
  });

  it('refuses runtime data that has no JSON form', async () => {
    const as = await service();
    const e = await failure(
      as.verify(request({ runtimeData: { n: Number.NaN }, evidence: { svn: '1', report_data: '' } })),
    );
    expect(e.reason).toBe('REQUEST');
  });

  it('refuses a request without policy ids or with a bad one', async () => {
    const as = await service();
    expect((await failure(as.verify(request({ policyIds: [] })))).reason).toBe('REQUEST');
    expect((await failure(as.verify(request({ policyIds: ['../x'] })))).reason).toBe('REQUEST');
  });

  it('fails when the class policy does not exist', async () => {
    const as = await service();
    const e = await failure(as.verify(request({ policyIds: ['custom'] })));
    expect(e.reason).toBe('POLICY');
    expect(e.message).toContain('custom_cpu');
  });

  it('appraises additional evidence in its own submodule with its own runtime data', async () => {
    const as = await service();
    const extra = { nonce: 'Z3Vlc3Qgbm9uY2U=', 'tee-pubkey': teePubkey };
    const token = await as.verify(
      request({
        additional: [
          {
            tee: 'sample',
            evidence: { svn: '2', report_data: digest(extra).toString('base64') },
            runtimeData: extra,
          },
        ],
      }),
    );
    const submods = (await claimsOf(as, token)).submods;
    expect(Object.keys(submods)).toEqual(['cpu0', 'cpu1']);
    expect(submods.cpu1['ear.veraison.annotated-evidence'].sample.svn).toBe('2');
    expect(submods.cpu1['ear.veraison.annotated-evidence'].runtime_data_claims).toEqual(extra);
  });

  it('refuses more additional evidence than any platform has', async () => {
    const as = await service();
    const item = { tee: 'sample' as const, evidence: {}, runtimeData: {} };
    const e = await failure(as.verify(request({ additional: Array.from({ length: 65 }, () => item) })));
    expect(e.reason).toBe('REQUEST');
  });

  it('refuses a request when any additional evidence fails', async () => {
    const as = await service();
    const e = await failure(
      as.verify(
        request({
          additional: [{ tee: 'sample', evidence: { svn: '1', report_data: '' }, runtimeData: {} }],
        }),
      ),
    );
    expect(e.reason).toBe('EVIDENCE');
  });
});

describe('token settings', () => {
  it('honours duration, names and verbose_token = false', async () => {
    let t = 1_700_000_000_000;
    const as = await service(
      {
        type: 'coco_as_builtin',
        attestation_token_broker: {
          duration_min: 7,
          issuer_name: 'issuer',
          developer_name: 'dev',
          build_name: 'build',
          profile_name: 'profile',
          verbose_token: false,
        },
      },
      new MemoryKv(),
      () => t,
    );
    const rd = runtimeData(undefined, '{"sample":{}}');
    const token = await as.verify(request({ runtimeData: rd }));
    const claims = decodeJwt(token) as Record<string, Json>;
    expect(claims.iat).toBe(1_700_000_000);
    expect(claims.exp).toBe(1_700_000_000 + 420);
    expect(claims.iss).toBe('issuer');
    expect(claims.eat_profile).toBe('profile');
    expect(claims['ear.verifier-id']).toEqual({ developer: 'dev', build: 'build' });
    expect(claims.submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims).toEqual({
      nonce: rd.nonce,
      'tee-pubkey': teePubkey,
    });
    t += 1000;
  });

  it('signs every token with the same key for the service lifetime', async () => {
    const as = await service();
    const a = decodeProtectedHeader(await as.verify(request()));
    const b = decodeProtectedHeader(await as.verify(request()));
    expect(a.jwk).toEqual(b.jwk);
  });
});

describe('attestation policies', () => {
  const AFFIRM_ALL = `package policy
import rego.v1
trust_claims := {"executables": 2, "hardware": 2, "configuration": 2}
`;

  it('seeds default_cpu and default_gpu without overwriting a stored policy', async () => {
    const kv = new MemoryKv();
    await kv.set('attestation_service_policy', 'default_cpu.rego', Buffer.from(AFFIRM_ALL));
    const as = await service(undefined, kv);
    expect(Buffer.from(kv.data.get('attestation_service_policy/default_gpu.rego')!).toString()).toContain(
      'package policy',
    );
    const cpu0 = (await claimsOf(as, await as.verify(request()))).submods.cpu0;
    expect(cpu0['ear.status']).toBe('affirming');
    expect(cpu0['ear.trustworthiness-vector']).toEqual({ configuration: 2, executables: 2, hardware: 2 });
    expect(cpu0['ear.trustee.identifiers']).toBeUndefined();
  });

  it("stores trustee's defaults unmodified as default_*, and broker's five-PCR policy as broker_default_cpu", async () => {
    const kv = new MemoryKv();
    await service(undefined, kv);
    const text = (id: string) =>
      Buffer.from(kv.data.get(`attestation_service_policy/${id}.rego`)!).toString();
    expect(text('default_cpu')).toBe(EAR_DEFAULT_POLICY_CPU);
    expect(text('broker_default_cpu')).toBe(BROKER_DEFAULT_POLICY_CPU);
    expect(text('broker_default_gpu')).toBe(text('default_gpu'));
    expect(text('trustee_default_cpu')).toBe(EAR_DEFAULT_POLICY_CPU);
    expect(text('trustee_default_gpu')).toBe(text('default_gpu'));
    expect(text('default_switch')).toBe(EAR_DEFAULT_POLICY_SWITCH);
    expect(text('default_ppcie')).toBe(EAR_DEFAULT_POLICY_PPCIE);
    for (const prefix of ['broker_default', 'trustee_default']) {
      expect(text(`${prefix}_switch`)).toBe(EAR_DEFAULT_POLICY_SWITCH);
      expect(text(`${prefix}_ppcie`)).toBe(EAR_DEFAULT_POLICY_PPCIE);
    }
  });

  it("appraises with trustee's policy when asked for the trustee_default id", async () => {
    const as = await service();
    await as.registerReferenceValue(rvMessage(SAMPLE_RVS));
    const cpu0 = (await claimsOf(as, await as.verify(request({ policyIds: ['trustee_default'] })))).submods
      .cpu0;
    expect(cpu0['ear.appraisal-policy-id']).toBe('trustee_default');
    expect(cpu0['ear.status']).toBe('affirming');
  });

  it("says at start when the store's default_cpu is broker's five-PCR policy (an earlier version's seed)", async () => {
    const kv = new MemoryKv();
    await kv.set('attestation_service_policy', 'default_cpu.rego', Buffer.from(BROKER_DEFAULT_POLICY_CPU));
    const lines: string[] = [];
    const capture = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    await createAttestationService(parseAttestationServiceConfig(undefined), kv, capture);
    expect(lines.join('')).toContain("default_cpu is broker's five-PCR policy (broker_default_cpu)");
    lines.length = 0;
    await createAttestationService(parseAttestationServiceConfig(undefined), new MemoryKv(), capture);
    expect(lines.join('')).not.toContain('five-PCR');
  });

  it('applies a policy set through the service at once', async () => {
    const as = await service();
    await as.setPolicy('default_cpu', AFFIRM_ALL);
    expect((await claimsOf(as, await as.verify(request()))).submods.cpu0['ear.status']).toBe('affirming');
  });

  it('picks up a policy another replica wrote to the shared store', async () => {
    const kv = new MemoryKv();
    let t = Date.now();
    const as = await service(undefined, kv, () => t);
    await as.verify(request());
    const other = await service(undefined, kv);
    await other.setPolicy('default_cpu', AFFIRM_ALL);
    t += 60_000;
    expect((await claimsOf(as, await as.verify(request()))).submods.cpu0['ear.status']).toBe('affirming');
  });

  it('refuses a policy that does not compile and keeps the old one', async () => {
    const kv = new MemoryKv();
    const as = await service(undefined, kv);
    await expect(as.setPolicy('default_cpu', 'package policy\nallow if {')).rejects.toBeInstanceOf(
      ParsePolicyError,
    );
    expect(Buffer.from(kv.data.get('attestation_service_policy/default_cpu.rego')!).toString()).toBe(
      EAR_DEFAULT_POLICY_CPU,
    );
  });

  it('refuses policy ids that cannot name a file', async () => {
    const as = await service();
    for (const id of ['', '../x', 'a/b', '.hidden', 'x'.repeat(200)]) {
      await expect(as.setPolicy(id, AFFIRM_ALL)).rejects.toBeInstanceOf(InvalidPolicyId);
    }
  });

  it('refuses to store a policy without trust_claims, and appraises one stored anyway with every claim 0', async () => {
    const kv = new MemoryKv();
    const as = await service(undefined, kv);
    const text = 'package policy\nimport rego.v1\nx := 1\n';
    const refused = await as.setPolicy('none_cpu', text).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PolicyCheckError);
    expect(refused).toMatchObject({ code: 'missing_rule' });
    expect((refused as Error).message).toContain('`trust_claims`');
    expect(await kv.get('attestation_service_policy', 'none_cpu.rego')).toBeUndefined();
    // A store written by an earlier version may hold one.
    await kv.set('attestation_service_policy', 'none_cpu.rego', Buffer.from(text));
    const cpu0 = (await claimsOf(as, await as.verify(request({ policyIds: ['none'] })))).submods.cpu0;
    expect(cpu0['ear.status']).toBe('none');
    expect(Object.values(cpu0['ear.trustworthiness-vector'])).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(cpu0['ear.appraisal-policy-id']).toBe('none');
  });

  it.each([
    ['empty trust claims', 'trust_claims := {}', 'at least one'],
    ['an unknown claim', 'trust_claims := {"exec": 3}', 'unknown trust claim'],
    [
      'a non-string reference value id',
      'trust_claims := {"executables": count(query_reference_value(1))}',
      '',
    ],
    ['a rule conflict', 'trust_claims := {"executables": 1}\ntrust_claims := {"executables": 2}', ''],
  ])('fails closed on %s', async (_name, body, text) => {
    const as = await service();
    const ok = await as
      .setPolicy('bad_cpu', `package policy\nimport rego.v1\n${body}\n`)
      .then(() => true)
      .catch((e) => {
        expect(e).toBeInstanceOf(ParsePolicyError);
        return false;
      });
    if (!ok) return;
    const e = await failure(as.verify(request({ policyIds: ['bad'] })));
    expect(e.reason).toBe('POLICY');
    expect(e.message).toContain(text);
  });

  it('lets a policy look reference values up by computed ids, and bounds how many', async () => {
    const as = await service();
    await as.registerReferenceValue(rvMessage({ k3: ['1'] }));
    await as.setPolicy(
      'dyn_cpu',
      `package policy
import rego.v1
hits := [i | some i in numbers.range(0, 5); input.sample.svn in query_reference_value(sprintf("k%d", [i]))]
trust_claims := {"hardware": 2} if count(hits) == 1
`,
    );
    const cpu0 = (await claimsOf(as, await as.verify(request({ policyIds: ['dyn'] })))).submods.cpu0;
    expect(cpu0['ear.trustworthiness-vector']).toEqual({ hardware: 2 });
    await as.setPolicy(
      'greedy_cpu',
      `package policy
import rego.v1
n := count([v | some i in numbers.range(0, 1000); v := query_reference_value(sprintf("r%d", [i]))])
trust_claims := {"hardware": n}
`,
    );
    expect((await failure(as.verify(request({ policyIds: ['greedy'] })))).reason).toBe('POLICY');
  });

  it('returns null for an unknown reference value, as trustee does', async () => {
    const as = await service();
    await as.setPolicy(
      'nul_cpu',
      'package policy\nimport rego.v1\ntrust_claims := {"hardware": 2} if query_reference_value("absent") == null\n',
    );
    expect(
      (await claimsOf(as, await as.verify(request({ policyIds: ['nul'] })))).submods.cpu0['ear.status'],
    ).toBe('affirming');
  });
});
