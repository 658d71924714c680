// Prometheus metrics with trustee's names (kbs/src/prometheus, kbs/docs/metrics.md). Each KBS instance
// has its own registry so that several can run in one process (tests, benchmarks).
import { COLLATERAL_FETCH_FAILURES_METRIC } from '@broker/attestation';
import { Counter, exponentialBuckets, Gauge, Histogram, Registry } from 'prom-client';

export const KBS_VERSION = '0.1.0';

export interface KbsMetricsOptions {
  /**
   * `[http_server] metrics_resource_paths`: label the resource counters with each resource's path
   * (trustee's `resource_path`). Off by default: the labels list every secret's path to whoever scrapes.
   */
  readonly resourcePaths?: boolean;
}

/** The labels of the HTTP request metrics: `route` is a template (`routeOf`), never a raw path. */
export type HttpLabel = 'method' | 'route' | 'status';

export class KbsMetrics {
  readonly registry = new Registry();
  readonly resourceReads: Counter<'resource_path'>;
  readonly resourceWrites: Counter<'resource_path'>;
  readonly resourceDeletes: Counter<'resource_path'>;
  /** By `method`, `route` (templated) and `status`: the error rate is `status=~"5.."` over the total. */
  readonly httpRequests: Counter<HttpLabel>;
  /** By `method` and `route`. */
  readonly httpDuration: Histogram<'method' | 'route'>;
  /**
   * This KBS's own: when the certificate the HTTPS sockets serve stops being valid (epoch seconds), by
   * `certificate` (`https`); set at start and on every reload of the key pair.
   */
  readonly certificateExpiry: Gauge<'certificate'>;
  readonly httpRequestSize: Histogram;
  readonly httpResponseSize: Histogram;
  readonly activeConnections: Gauge;
  readonly policyEvaluations: Counter;
  readonly policyApprovals: Counter;
  readonly policyViolations: Counter;
  readonly policyErrors: Counter;
  /**
   * This KBS's own: requests refused because a policy's evaluation exceeded a limit, by `policy`
   * (`resource`, `attestation`); `remembered="true"` when it was not evaluated again (an earlier
   * evaluation of that text exceeded it).
   */
  readonly policyLimitRefusals: Counter<'policy' | 'remembered'>;
  readonly attestationRequests: Counter;
  readonly attestationSuccesses: Counter<'tee_type'>;
  readonly attestationFailures: Counter<'tee_type'>;
  readonly attestationErrors: Counter;
  readonly authRequests: Counter;
  readonly authSuccesses: Counter;
  readonly authErrors: Counter;
  /**
   * trustee's external-plugin metrics (label `plugin_name`): here the built-in plugin (`resource`) is
   * measured, each call of it counted and timed, and its own failures (`PluginInternalError`, not
   * token or policy refusals, which have their own counters) counted as errors.
   */
  readonly pluginRequests: Counter<'plugin_name'>;
  readonly pluginErrors: Counter<'plugin_name'>;
  readonly pluginDuration: Histogram<'plugin_name'>;
  /**
   * This KBS's own: collateral requests of its attestation service that brought no usable answer, by
   * `source` (`pcs`: Intel's PCS or a PCCS; `kds`: AMD's KDS). Named like the standalone attestation
   * service's counter so that one alert and one dashboard query serve both.
   */
  readonly collateralFetchFailures: Counter<'source'>;

  private readonly resourcePaths: boolean;

  constructor(options: KbsMetricsOptions = {}) {
    this.resourcePaths = options.resourcePaths === true;
    const resourceLabels = this.resourcePaths ? ['resource_path' as const] : [];
    const registers = [this.registry];
    const counter = (name: string, help: string) => new Counter({ name, help, registers });
    this.resourceReads = new Counter({
      name: 'kbs_resource_reads_total',
      help: 'KBS resource read count',
      labelNames: resourceLabels,
      registers,
    });
    this.resourceWrites = new Counter({
      name: 'kbs_resource_writes_total',
      help: 'KBS resource write count',
      labelNames: resourceLabels,
      registers,
    });
    this.resourceDeletes = new Counter({
      name: 'kbs_resource_deletes_total',
      help: 'KBS resource delete count',
      labelNames: resourceLabels,
      registers,
    });
    this.httpRequests = new Counter({
      name: 'kbs_http_requests_total',
      help: 'Total HTTP requests count',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'kbs_http_request_duration_seconds',
      help: 'Distribution of request handling duration',
      labelNames: ['method', 'route'],
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
    this.policyLimitRefusals = new Counter({
      name: 'kbs_policy_limit_refusals_total',
      help: 'Requests refused because a policy exceeded an evaluation limit (remembered: not evaluated again)',
      labelNames: ['policy', 'remembered'],
      registers,
    });
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
    this.pluginRequests = new Counter({
      name: 'kbs_plugin_requests_total',
      help: 'Total Handle RPC calls to external plugin backends',
      labelNames: ['plugin_name'],
      registers,
    });
    this.pluginDuration = new Histogram({
      name: 'kbs_plugin_request_duration_seconds',
      help: 'External plugin Handle RPC latency in seconds',
      labelNames: ['plugin_name'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0],
      registers,
    });
    this.pluginErrors = new Counter({
      name: 'kbs_plugin_errors_total',
      help: 'Total gRPC errors from external plugin backends',
      labelNames: ['plugin_name'],
      registers,
    });
    this.collateralFetchFailures = new Counter({
      ...COLLATERAL_FETCH_FAILURES_METRIC,
      labelNames: ['source'],
      registers,
    });
    this.certificateExpiry = new Gauge({
      name: 'kbs_certificate_expiry_timestamp_seconds',
      help: 'When the served certificate stops being valid (notAfter), in seconds since the epoch',
      labelNames: ['certificate'],
      registers,
    });
    new Gauge({
      name: 'kbs_build_info',
      help: 'KBS binary build info',
      labelNames: ['version', 'git_hash', 'build_date'],
      registers,
    })
      .labels(KBS_VERSION, process.env.KBS_GIT_HASH ?? 'unknown', process.env.KBS_BUILD_DATE ?? 'unknown')
      .set(1);
  }

  /** Counts a resource read, write or delete; labelled by path only when configured to. */
  countResource(op: 'read' | 'write' | 'delete', path: string): void {
    const c =
      op === 'read' ? this.resourceReads : op === 'write' ? this.resourceWrites : this.resourceDeletes;
    if (this.resourcePaths) c.labels(path).inc();
    else c.inc();
  }

  /** Counts one answered HTTP request and its duration. */
  countHttp(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.labels(method, route, String(status)).inc();
    this.httpDuration.labels(method, route).observe(seconds);
  }

  /** Counts and times one plugin call; `failed` says which thrown errors are the plugin's own. */
  async measurePlugin<T>(name: string, failed: (e: unknown) => boolean, call: () => Promise<T>): Promise<T> {
    this.pluginRequests.labels(name).inc();
    const end = this.pluginDuration.startTimer({ plugin_name: name });
    try {
      return await call();
    } catch (e) {
      if (failed(e)) this.pluginErrors.labels(name).inc();
      throw e;
    } finally {
      end();
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
