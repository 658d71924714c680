// The built-in attestation service (trustee's CoCo AS inside the KBS):
// verify each evidence item, appraise its claims with the Rego policy of its
// TEE class, and issue one EAR token over all of them.
import { createHash } from 'node:crypto';
import { messageOf } from '@broker/cli';
import type { KvStorage } from '@broker/kv-storage';
import {
  canonicalJson,
  initDataClaims,
  initDataDigest,
  parseInitData,
  type ReportDataHashAlgorithm,
  type Tee,
} from '@broker/protocol';
import { createRvps, RvpsError, type RvpsMessageInput } from '@broker/rvps-core';
import {
  type CollateralSource,
  defaultHttpGet,
  getVerifier,
  type HttpGet,
  observedHttpGet,
  type TeeClass,
} from '@broker/verifier';
import type { Logger } from 'pino';
import { transformClaims } from './claims.js';
import type { AttestationServiceConfig } from './config.js';
import {
  type Appraisal,
  appraisalJson,
  earJson,
  extensionsFromPolicy,
  statusOf,
  trustVectorFromPolicy,
} from './ear.js';
import { AttestationFailed } from './errors.js';
import { explainAppraisal } from './explain.js';
import { connectGrpcRvps, readRemoteCredentials } from './grpc-remote.js';
import { checkPolicyId, PolicyStore } from './policy.js';
import type { AttestationService, VerifyRequest } from './service-api.js';
import { loadSigner } from './signer.js';
import { describeVerifierSettings, loadVerifierSettings } from './verifier-settings.js';

export interface AttestationServiceOptions {
  /** Store for reference values when `rvps_config.storage_type` selects another backend. */
  readonly rvpsStorage?: KvStorage;
  /** Clock in epoch ms (token times, caches, certificate validity); tests replace it. */
  readonly now?: () => number;
  /** Passed to the RVPS and policy caches; 0 reads the store on every use. Default 1000. */
  readonly cacheTtlMs?: number;
  /** HTTP client of the collateral services (Intel PCS/PCCS, AMD KDS); tests pass one that trusts a mock. */
  readonly httpGet?: HttpGet;
  /** Where policies look reference values up (a remote RVPS); default the built-in RVPS. */
  readonly queryReferenceValue?: (name: string) => Promise<unknown>;
  /**
   * Hears each appraisal refused because its attestation policy exceeded an evaluation limit:
   * `remembered` when the policy was not evaluated again (an earlier evaluation of its text exceeded it).
   */
  readonly onPolicyLimit?: (remembered: boolean) => void;
  /**
   * Hears each collateral request (Intel PCS/PCCS, AMD KDS) that brought no usable answer, including
   * background refreshes while cached collateral is still served: an outage shows here before
   * attestations start to fail.
   */
  readonly onCollateralFetchFailure?: (source: CollateralSource) => void;
}

/**
 * The Prometheus counter that the KBS and the standalone attestation service both export for
 * onCollateralFetchFailure, by `source`: one name, so that one alert and one dashboard query serve both.
 */
export const COLLATERAL_FETCH_FAILURES_METRIC = Object.freeze({
  name: 'attestation_collateral_fetch_failures_total',
  help: 'Collateral requests (source: pcs for Intel PCS/PCCS, kds for AMD KDS) that brought no usable answer',
});

/** More devices than this in one attestation is not a real platform. */
export const MAX_ADDITIONAL_EVIDENCE = 64;

interface Item {
  readonly tee: Tee;
  readonly evidence: unknown;
  readonly runtimeData: Record<string, unknown>;
  readonly alg: ReportDataHashAlgorithm;
  readonly rawReportData?: Uint8Array | undefined;
  readonly notProvided: boolean;
  readonly initData: VerifyRequest['initData'];
  readonly initDataDigest?: Uint8Array | undefined;
}

interface Appraised {
  readonly tee: Tee;
  readonly class: TeeClass;
  readonly claims: Record<string, unknown>;
}

function reportDataOf(item: Item): Buffer {
  if (item.notProvided) return Buffer.alloc(0);
  if (item.rawReportData !== undefined) return Buffer.from(item.rawReportData);
  try {
    return createHash(item.alg).update(canonicalJson(item.runtimeData), 'utf8').digest();
  } catch (e) {
    throw new AttestationFailed('REQUEST', `runtime data of ${item.tee} cannot be hashed: ${messageOf(e)}`, {
      cause: e,
    });
  }
}

/** Longer than any digest a TEE binds (CCA's 64 bytes): not a digest. */
export const MAX_INIT_DATA_DIGEST_BYTES = 64;

function initDataOf(item: Item): { digest: Buffer; claims: unknown } | undefined {
  const init = item.initData;
  if (item.initDataDigest !== undefined) {
    if (init !== null) {
      throw new AttestationFailed('REQUEST', `${item.tee}: initdata and an initdata digest both given`);
    }
    const d = item.initDataDigest;
    if (d.length === 0 || d.length > MAX_INIT_DATA_DIGEST_BYTES) {
      throw new AttestationFailed(
        'REQUEST',
        `${item.tee}: an initdata digest has 1 to ${MAX_INIT_DATA_DIGEST_BYTES} bytes, got ${d.length}`,
      );
    }
    // trustee's InitDataInput::Digest: compared as given, no claims.
    return { digest: Buffer.from(d), claims: null };
  }
  if (init === null) return undefined;
  if (init.format !== 'toml') {
    throw new AttestationFailed(
      'REQUEST',
      `Unsupported initdata format: ${JSON.stringify(init.format.slice(0, 32))}`,
    );
  }
  try {
    const parsed = parseInitData(init.body);
    return { digest: initDataDigest(init.body, parsed.algorithm), claims: initDataClaims(parsed) };
  } catch (e) {
    throw new AttestationFailed('REQUEST', `initdata rejected: ${messageOf(e)}`, { cause: e });
  }
}

export async function createAttestationService(
  cfg: AttestationServiceConfig,
  storage: KvStorage,
  logger: Logger,
  options: AttestationServiceOptions = {},
): Promise<AttestationService> {
  const now = options.now ?? Date.now;
  const ttl = options.cacheTtlMs ?? 1000;
  const broker = cfg.tokenBroker;
  const signer = await loadSigner(broker.signer);
  // Root bundles and collateral are read once: a broken file stops the start, not each attestation.
  const observe = options.onCollateralFetchFailure;
  const httpGet =
    observe !== undefined
      ? observedHttpGet(options.httpGet ?? defaultHttpGet(), (source) => observe(source))
      : options.httpGet;
  const verifierSettings = await loadVerifierSettings(cfg.verifierConfig, {
    ...(httpGet !== undefined ? { httpGet } : {}),
    onRefreshError: (key, e) =>
      logger.warn(
        { url: key, err: messageOf(e) },
        'collateral refresh failed; the cached collateral stays in use',
      ),
  });
  logger.info(describeVerifierSettings(cfg.verifierConfig), 'verifier settings');
  if (cfg.verifierConfig?.snpVerifier?.trustedArkPaths?.length) {
    logger.warn(
      'snp_verifier trusted_ark_paths: AMD roots besides the built-in ones are trusted (test hardware)',
    );
  }
  if (cfg.verifierConfig?.tdxVerifier?.trustedSgxRootPaths.length) {
    logger.warn("tdx_verifier trusted_sgx_root_paths: SGX roots besides Intel's are trusted (test hardware)");
  }
  const rvps = createRvps(options.rvpsStorage ?? storage, { cacheTtlMs: ttl, now: () => new Date(now()) });
  // rvps_config.type = "GrpcRemote": reference values live in trustee's RVPS process.
  const remoteRvps =
    cfg.rvps.type === 'GrpcRemote'
      ? await connectGrpcRvps(
          cfg.rvps.address ?? 'http://127.0.0.1:50003',
          readRemoteCredentials(cfg.rvps.credentials ?? {}, '[attestation_service.rvps_config]'),
        )
      : undefined;
  const queryReferenceValue =
    options.queryReferenceValue ??
    (remoteRvps !== undefined
      ? (name: string) => remoteRvps.query(name)
      : (name: string) => rvps.query(name));
  const policies = new PolicyStore(storage, logger, {
    revalidateMs: ttl,
    now,
    ...(options.onPolicyLimit !== undefined && { onLimit: options.onPolicyLimit }),
  });
  await policies.seedDefaults();
  if (broker.signer === undefined) {
    logger.info('no attestation token signer configured: signing with an ephemeral P-256 key (no x5c)');
  }

  async function verifyItem(item: Item, out: Appraised[]): Promise<void> {
    let verifier: ReturnType<typeof getVerifier>;
    try {
      verifier = getVerifier(item.tee);
    } catch (e) {
      throw new AttestationFailed('EVIDENCE', messageOf(e), { cause: e });
    }
    const reportData = reportDataOf(item);
    const init = initDataOf(item);
    let results: Awaited<ReturnType<typeof verifier.evaluate>>;
    try {
      results = await verifier.evaluate(item.evidence, {
        ...verifierSettings,
        reportData,
        ...(item.notProvided && { reportDataNotProvided: true }),
        ...(init !== undefined ? { initDataHash: init.digest } : {}),
        now: new Date(now()),
      });
    } catch (e) {
      throw new AttestationFailed('EVIDENCE', `${item.tee} evidence rejected: ${messageOf(e)}`, { cause: e });
    }
    for (const r of results) {
      out.push({
        tee: item.tee,
        class: r.class,
        claims: transformClaims({
          tee: item.tee,
          claims: r.claims,
          runtimeDataClaims: item.notProvided ? null : item.runtimeData,
          initDataClaims: init?.claims ?? null,
          verbose: broker.verboseToken,
        }),
      });
    }
  }

  return {
    signerPublicJwk: signer.publicJwk,
    ...(signer.certChainPem !== undefined ? { signerCertChainPem: signer.certChainPem } : {}),

    async verify(req) {
      const policyId = req.policyIds[0];
      if (policyId === undefined) throw new AttestationFailed('REQUEST', 'no attestation policy id given');
      try {
        checkPolicyId(policyId);
      } catch (e) {
        throw new AttestationFailed('REQUEST', messageOf(e), { cause: e });
      }
      if (req.additional.length > MAX_ADDITIONAL_EVIDENCE) {
        throw new AttestationFailed(
          'REQUEST',
          `more than ${MAX_ADDITIONAL_EVIDENCE} additional evidence items`,
        );
      }
      const items: Item[] = [
        {
          tee: req.tee,
          evidence: req.evidence,
          runtimeData: req.runtimeData,
          alg: req.runtimeDataHashAlgorithm,
          rawReportData: req.rawReportData,
          notProvided: req.runtimeDataNotProvided === true,
          initData: req.initData,
          initDataDigest: req.initDataDigest,
        },
        ...req.additional.map((a) => ({
          tee: a.tee,
          evidence: a.evidence,
          runtimeData: a.runtimeData,
          alg: a.runtimeDataHashAlgorithm ?? req.runtimeDataHashAlgorithm,
          rawReportData: a.rawReportData,
          notProvided: a.runtimeDataNotProvided === true,
          initData: a.initData ?? null,
          initDataDigest: a.initDataDigest,
        })),
      ];
      const appraised: Appraised[] = [];
      for (const item of items) await verifyItem(item, appraised);

      const submods = new Map<string, Appraisal>();
      const perClass = new Map<string, number>();
      for (const a of appraised) {
        const classPolicy = `${policyId}_${a.class}`;
        const result = await policies.evaluate(classPolicy, a.claims, queryReferenceValue);
        const vector = trustVectorFromPolicy(result.trustClaims, classPolicy);
        const appraisal: Appraisal = {
          status: statusOf(vector),
          vector,
          policyId,
          annotatedEvidence: a.claims,
          extensions: extensionsFromPolicy(result.extensions, classPolicy),
        };
        const n = perClass.get(a.class) ?? 0;
        perClass.set(a.class, n + 1);
        submods.set(`${a.class}${n}`, appraisal);
        const fields = {
          tee: a.tee,
          class: a.class,
          policy: classPolicy,
          status: appraisal.status,
          trustVector: vector,
        };
        if (appraisal.status === 'affirming') logger.info(fields, 'attestation appraised');
        else {
          // Not a failure yet (the token is issued; the resource policy decides), but the operator
          // needs to see which claim kept it from affirming.
          const reasons = explainAppraisal(appraisalJson(appraisal));
          logger.warn(
            { ...fields, ...(reasons.length > 0 ? { reasons } : {}) },
            'attestation appraised: not affirming',
          );
        }
      }

      const iat = Math.floor(now() / 1000);
      const payload = earJson({
        profile: broker.profileName,
        iat,
        developer: broker.developerName,
        build: broker.buildName,
        submods,
        exp: iat + broker.durationMin * 60,
        iss: broker.issuerName,
      });
      try {
        return signer.signJwt(JSON.stringify(payload));
      } catch (e) {
        throw new AttestationFailed('TOKEN', 'the attestation token cannot be signed', { cause: e });
      }
    },

    async setPolicy(id, regoText) {
      await policies.set(id, regoText);
      logger.info({ policy: id }, 'attestation policy set');
    },

    async registerReferenceValue(msg) {
      if (
        typeof msg !== 'string' &&
        !(msg instanceof Uint8Array) &&
        (msg === null || typeof msg !== 'object')
      ) {
        throw new RvpsError('MESSAGE_MALFORMED', 'RVPS message must be a JSON object');
      }
      if (remoteRvps !== undefined) {
        const text =
          typeof msg === 'string'
            ? msg
            : msg instanceof Uint8Array
              ? Buffer.from(msg).toString('utf8')
              : JSON.stringify(msg);
        await remoteRvps.register(text);
        logger.info('reference values registered with the remote RVPS');
        return;
      }
      const names = await rvps.register(msg as RvpsMessageInput);
      logger.info(names.length > 32 ? { count: names.length } : { names }, 'reference values registered');
    },

    async getReferenceValue(name) {
      if (remoteRvps !== undefined) return remoteRvps.query(name);
      return (await rvps.get(name))?.value;
    },

    async close() {
      remoteRvps?.close();
    },
  };
}
