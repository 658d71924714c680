// The console's health view (`GET /kbs/v0/admin/health`): uptime, the storage backends, and the
// handshake and policy counters of /metrics, with their rate per minute over the last minute or more,
// and over Redis the number of live KBS replicas sharing it.
import type { Counter } from 'prom-client';
import type { KbsMetrics } from '../metrics.js';

const WINDOW_MS = 60_000;

type Totals = Record<string, number>;

async function total(c: Counter<string>): Promise<number> {
  return (await c.get()).values.reduce((sum, v) => sum + v.value, 0);
}

export interface HealthReport {
  readonly uptimeSeconds: number;
  readonly storage: { readonly backend: string; readonly sessions: string; readonly verdictLog?: string };
  /** Live KBS processes sharing the store (Redis); 1 when the store is this process's own. */
  readonly replicas: number | null;
  /** Why the replicas could not be counted. */
  readonly replicasError?: string;
  readonly totals: Totals;
  /** Counts per minute, measured over `rateWindowSeconds`. */
  readonly perMinute: Totals;
  readonly rateWindowSeconds: number;
}

export class Health {
  private readonly started: number;
  /** Snapshots for the rates: the newest at least a minute old is the rate's base. */
  private samples: { at: number; totals: Totals }[] = [];

  constructor(
    private readonly metrics: KbsMetrics,
    private readonly storage: HealthReport['storage'],
    private readonly now: () => number = Date.now,
    /** Counts the replicas sharing the store; absent when the store is not shared. */
    private readonly countReplicas?: () => Promise<number>,
  ) {
    this.started = now();
    this.samples.push({ at: this.started, totals: {} });
  }

  private async totals(): Promise<Totals> {
    const m = this.metrics;
    return {
      auth: await total(m.authRequests),
      authErrors: await total(m.authErrors),
      attestations: await total(m.attestationRequests),
      attestationSuccesses: await total(m.attestationSuccesses),
      attestationFailures: await total(m.attestationFailures),
      attestationErrors: await total(m.attestationErrors),
      policyApprovals: await total(m.policyApprovals),
      policyViolations: await total(m.policyViolations),
      policyErrors: await total(m.policyErrors),
    };
  }

  async report(): Promise<HealthReport> {
    const at = this.now();
    const totals = await this.totals();
    // The base: the newest sample a minute old or more, else the start.
    const old = this.samples.filter((s) => at - s.at >= WINDOW_MS);
    const base = old[old.length - 1] ?? (this.samples[0] as { at: number; totals: Totals });
    this.samples = [...old.slice(-1), ...this.samples.filter((s) => at - s.at < WINDOW_MS).slice(-10)];
    if (at - (this.samples[this.samples.length - 1]?.at ?? 0) >= 10_000) this.samples.push({ at, totals });
    const minutes = Math.max(at - base.at, 1) / WINDOW_MS;
    const perMinute: Totals = {};
    for (const [k, v] of Object.entries(totals)) {
      perMinute[k] = Math.round(((v - (base.totals[k] ?? 0)) / minutes) * 100) / 100;
    }
    let replicas: Pick<HealthReport, 'replicas' | 'replicasError'> = { replicas: 1 };
    if (this.countReplicas !== undefined) {
      try {
        replicas = { replicas: await this.countReplicas() };
      } catch (e) {
        replicas = { replicas: null, replicasError: (e as Error).message };
      }
    }
    return {
      uptimeSeconds: Math.floor((at - this.started) / 1000),
      storage: this.storage,
      ...replicas,
      totals,
      perMinute,
      rateWindowSeconds: Math.round((at - base.at) / 1000),
    };
  }
}
