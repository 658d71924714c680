// The resource policy's decision on a verified token's claims, as every client call gets it (the
// `resource` plugin and the others behind trustee's plugin gate): counted, an anomaly logged, and a
// refusal thrown as trustee's PolicyDeny with the appraisals that kept it from release as its cause
// (the client only learns "denied"). `record` hears every outcome, for the verdict log.

import { explainAppraisals } from '@broker/attestation';
import { KbsError } from '@broker/protocol';
import type { Logger } from 'pino';
import type { KbsMetrics } from '../metrics.js';
import {
  type PolicyData,
  PolicyEngineError,
  type PolicyVersion,
  type ResourcePolicy,
} from './resource-policy.js';

export type PolicyOutcome = 'allowed' | 'denied' | 'error';

export interface PolicyGateDeps {
  readonly policy: ResourcePolicy;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
}

/**
 * Resolves (with the policy text that decided) when the policy allows; throws PolicyDeny or
 * PolicyEngineError otherwise.
 */
export async function requirePolicyAllows(
  deps: PolicyGateDeps,
  claims: Record<string, unknown>,
  data: PolicyData,
  record?: (outcome: PolicyOutcome, reason?: string, policy?: PolicyVersion) => void,
): Promise<PolicyVersion | undefined> {
  const { policy, metrics, logger } = deps;
  metrics.policyEvaluations.inc();
  let allow: boolean;
  let version: PolicyVersion | undefined;
  try {
    const decision = await policy.evaluate(claims, data);
    if (decision.anomaly !== undefined) {
      metrics.policyErrors.inc();
      logger.warn(decision.anomaly);
    }
    allow = decision.allow;
    version = decision.policy;
  } catch (e) {
    metrics.policyErrors.inc();
    record?.('error', (e as Error).message);
    if (e instanceof PolicyEngineError) {
      throw new KbsError('PolicyEngineError', `Policy engine error: ${e.message}`, { cause: e });
    }
    throw e;
  }
  if (!allow) {
    metrics.policyViolations.inc();
    const why =
      explainAppraisals(claims) ??
      'every appraisal in the token is affirming; the resource policy refused it';
    record?.('denied', why, version);
    throw new KbsError('PolicyDeny', undefined, { cause: new Error(why) });
  }
  metrics.policyApprovals.inc();
  record?.('allowed', undefined, version);
  return version;
}
