// Prometheus metrics with trustee's names (kbs/src/prometheus, kbs/docs/metrics.md). Each KBS instance
// has its own registry so that several can run in one process (tests, benchmarks).
import { Counter, exponentialBuckets, Gauge, Histogram, Registry } from 'prom-client';

export const KBS_VERSION = '0.1.0';

export class KbsMetrics {
  readonly registry = new Registry();
  readonly resourceReads: Counter<'resource_path'>;
  readonly resourceWrites: Counter<'resource_path'>;
  readonly resourceDeletes: Counter<'resource_path'>;
  readonly httpRequests: Counter;
  readonly httpDuration: Histogram;
  readonly httpRequestSize: Histogram;
  readonly httpResponseSize: Histogram;
  readonly activeConnections: Gauge;
  readonly policyEvaluations: Counter;
  readonly policyApprovals: Counter;
  readonly policyViolations: Counter;
  readonly policyErrors: Counter;
  readonly attestationRequests: Counter;
  readonly attestationSuccesses: Counter<'tee_type'>;
  readonly attestationFailures: Counter<'tee_type'>;
  readonly attestationErrors: Counter;
  readonly authRequests: Counter;
  readonly authSuccesses: Counter;
  readonly authErrors: Counter;

  constructor() {
    const registers = [this.registry];
    const counter = (name: string, help: string) => new Counter({ name, help, registers });
    this.resourceReads = new Counter({
      name: 'kbs_resource_reads_total',
      help: 'KBS resource read count',
      labelNames: ['resource_path'],
      registers,
    });
    this.resourceWrites = new Counter({
      name: 'kbs_resource_writes_total',
      help: 'KBS resource write count',
      labelNames: ['resource_path'],
      registers,
    });
    this.resourceDeletes = new Counter({
      name: 'kbs_resource_deletes_total',
      help: 'KBS resource delete count',
      labelNames: ['resource_path'],
      registers,
    });
    this.httpRequests = counter('kbs_http_requests_total', 'Total HTTP requests count');
    this.httpDuration = new Histogram({
      name: 'kbs_http_request_duration_seconds',
      help: 'Distribution of request handling duration',
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.5, 1.0],
      registers,
    });
    this.httpRequestSize = new Histogram({
      name: 'kbs_http_request_size_bytes',
      help: 'Distribution of request body sizes',
      buckets: exponentialBuckets(32, 4, 5),
      registers,
    });
    this.httpResponseSize = new Histogram({
      name: 'kbs_http_response_size_bytes',
      help: 'Distribution of response body sizes',
      buckets: exponentialBuckets(32, 4, 5),
      registers,
    });
    this.activeConnections = new Gauge({
      name: 'kbs_http_active_connections',
      help: 'Count of HTTP connections being processed at the moment',
      registers,
    });
    this.policyEvaluations = counter('kbs_policy_evaluations_total', 'Total count of KBS policy evaluations');
    this.policyApprovals = counter(
      'kbs_policy_approvals_total',
      'Total count of requests approved by KBS policy',
    );
    this.policyViolations = counter(
      'kbs_policy_violations_total',
      'Total count of requests denied by KBS policy',
    );
    this.policyErrors = counter('kbs_policy_errors_total', 'Total count of errors during KBS evaluation');
    this.attestationRequests = counter(
      'kbs_attestation_requests_total',
      'Total count of attestation requests',
    );
    this.attestationSuccesses = new Counter({
      name: 'kbs_attestation_successes_total',
      help: 'Total count of attestation successes',
      labelNames: ['tee_type'],
      registers,
    });
    this.attestationFailures = new Counter({
      name: 'kbs_attestation_failures_total',
      help: 'Total count of attestation failures',
      labelNames: ['tee_type'],
      registers,
    });
    this.attestationErrors = counter(
      'kbs_attestation_errors_total',
      'Total count of errors during attestation processing',
    );
    this.authRequests = counter('kbs_auth_requests_total', 'Total count of auth requests');
    this.authSuccesses = counter(
      'kbs_auth_successes_total',
      'Total count of successfully authenticated requests',
    );
    this.authErrors = counter('kbs_auth_errors_total', 'Total count of errors during auth processing');
    new Gauge({
      name: 'kbs_build_info',
      help: 'KBS binary build info',
      labelNames: ['version', 'git_hash', 'build_date'],
      registers,
    })
      .labels(KBS_VERSION, process.env.KBS_GIT_HASH ?? 'unknown', process.env.KBS_BUILD_DATE ?? 'unknown')
      .set(1);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
