// What `brokerctl render --monitoring` adds for the Prometheus Operator and Grafana: a ServiceMonitor that
// scrapes the KBS's metrics listener through the `kbs-metrics` Service, a PrometheusRule with the alerts
// an operator needs (KBS down, HTTP errors, policy denials and attestation failures surging, collateral
// services failing, internal errors, certificates about to expire), and a Grafana dashboard in a ConfigMap (Grafana's dashboard
// sidecar picks up ConfigMaps labelled `grafana_dashboard: "1"`). Every expression uses only metrics the
// KBS exports (checked by the tests against its registry) and `up`, which Prometheus adds itself.
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { BrokerConfig } from './broker-config.js';
import { type KubeObject, objectLabels } from './kube-object.js';
import { type GeneratedNames, METRICS_PORT_NAME, METRICS_SERVICE_NAME } from './names.js';

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for: string;
  readonly labels: { readonly severity: 'warning' | 'critical' };
  readonly annotations: { readonly summary: string; readonly description: string };
}

export interface RuleGroup {
  readonly name: string;
  readonly rules: readonly AlertRule[];
}

/** The label matchers that pick this KBS's series: the ServiceMonitor's job (the Service) and namespace. */
function selector(cfg: BrokerConfig): string {
  return `job="${METRICS_SERVICE_NAME}",namespace="${cfg.namespace}"`;
}

/** The alert rules for the KBS of one BrokerConfig. */
export function kbsRuleGroups(cfg: BrokerConfig): RuleGroup[] {
  const sel = selector(cfg);
  const api = `${sel},route!="other"`;
  const rules: AlertRule[] = [
    {
      alert: 'KbsMetricsDown',
      expr: `up{${sel}} == 0`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'KBS metrics cannot be scraped',
        description:
          'Prometheus has not scraped {{ $labels.pod }} for 5 minutes: the KBS is down or its metrics listener is unreachable.',
      },
    },
    {
      alert: 'KbsHttpErrorRate',
      // trustee's API answers every refusal and failure with 401 (404 for unknown paths), so the
      // error rate is the share of API answers that are not 2xx.
      expr: `(sum(rate(kbs_http_requests_total{${api},status!~"2.."}[5m])) / sum(rate(kbs_http_requests_total{${api}}[5m]))) > 0.25 and sum(rate(kbs_http_requests_total{${api}}[5m])) > 0.05`,
      for: '10m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'More than a quarter of KBS API requests fail',
        description:
          '{{ $value | humanizePercentage }} of the KBS API answers are not 2xx (401 is how the KBS reports refusals and failures): see the kbs_http_requests_total route and status labels, and the KBS log.',
      },
    },
    {
      alert: 'KbsHttpServerErrors',
      expr: `sum(rate(kbs_http_requests_total{${sel},status=~"5.."}[5m])) > 0`,
      for: '10m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The KBS answers with 5xx',
        description:
          'The KBS has answered 5xx (e.g. 503 while its store is busy) for 10 minutes at {{ $value | humanize }} per second.',
      },
    },
    {
      alert: 'KbsPolicyDenySurge',
      expr: `sum(rate(kbs_policy_violations_total{${sel}}[5m])) > 3 * sum(rate(kbs_policy_violations_total{${sel}}[1h] offset 5m)) and sum(increase(kbs_policy_violations_total{${sel}}[5m])) > 10`,
      for: '5m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The resource policy denies far more requests than in the last hour',
        description:
          "Resource-policy denials run at three times the previous hour's rate: guests whose evidence changed (new firmware, an initdata not in the reference values) or a policy change that locks them out. The verdict log (/kbs/v0/admin/verdicts) names the rules.",
      },
    },
    {
      alert: 'KbsAttestationFailureSurge',
      expr: `sum by (tee_type) (rate(kbs_attestation_failures_total{${sel}}[5m])) > 3 * sum by (tee_type) (rate(kbs_attestation_failures_total{${sel}}[1h] offset 5m)) and sum by (tee_type) (increase(kbs_attestation_failures_total{${sel}}[5m])) > 10`,
      for: '5m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'Attestation of {{ $labels.tee_type }} evidence fails far more than in the last hour',
        description:
          'Evidence that does not verify: TCB or collateral changes, or guests on platforms the reference values do not cover. A collateral service that cannot be reached has its own alert, KbsCollateralFetchFailures.',
      },
    },
    {
      alert: 'KbsCollateralFetchFailures',
      // Any failed request in every 10-minute window for 15 minutes: one lost request is noise, a
      // service that keeps failing is an outage. Background refreshes count too, so this can fire
      // while cached collateral still lets guests attest, before their attestations start to fail.
      expr: `sum by (source) (increase(attestation_collateral_fetch_failures_total{${sel}}[10m])) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The KBS cannot fetch {{ $labels.source }} collateral',
        description:
          'Requests to the {{ $labels.source }} collateral service (pcs: Intel PCS or the configured PCCS; kds: AMD KDS) keep failing ({{ $value | humanize }} in the last 10 minutes). Guests attest from cached collateral until it expires; guests on hardware not seen before fail now. The KBS log names the URL and the error ("collateral refresh failed" or the attestation failure). Check that the KBS reaches the service (egress, proxy, DNS), that its TLS is trusted, and whether the service reports an outage; for a PCCS, its own log and its API key.',
      },
    },
    {
      alert: 'KbsInternalErrors',
      expr: `sum(rate(kbs_attestation_errors_total{${sel}}[5m])) + sum(rate(kbs_policy_errors_total{${sel}}[5m])) + sum(rate(kbs_auth_errors_total{${sel}}[5m])) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The KBS fails to process attestations or policies',
        description:
          'kbs_attestation_errors_total, kbs_policy_errors_total or kbs_auth_errors_total keeps rising: a policy that does not evaluate, an attestation service or store that fails. The KBS log names the cause.',
      },
    },
    {
      alert: 'KbsCertificateExpiresSoon',
      expr: `kbs_certificate_expiry_timestamp_seconds{${sel}} - time() < 14 * 86400`,
      for: '1h',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The KBS {{ $labels.certificate }} certificate expires within 14 days',
        description:
          'The {{ $labels.certificate }} certificate of {{ $labels.pod }} expires in {{ $value | humanizeDuration }}: renew the Secret (the KBS reloads the HTTPS pair in place; a new token certificate needs a restart).',
      },
    },
    {
      alert: 'KbsCertificateExpiresVerySoon',
      expr: `kbs_certificate_expiry_timestamp_seconds{${sel}} - time() < 2 * 86400`,
      for: '10m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'The KBS {{ $labels.certificate }} certificate expires within 2 days',
        description:
          'The {{ $labels.certificate }} certificate of {{ $labels.pod }} expires in {{ $value | humanizeDuration }}; guests will stop reaching the KBS (https) or refuse its tokens (token).',
      },
    },
  ];
  return [{ name: `kbs.${cfg.namespace}.${cfg.name}`, rules }];
}

/** The Grafana dashboard (JSON model) for the KBS of one BrokerConfig. */
export function kbsDashboard(cfg: BrokerConfig): Record<string, unknown> {
  const sel = selector(cfg);
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template.
  const ds = { type: 'prometheus', uid: '${datasource}' };
  let id = 0;
  const panel = (
    title: string,
    exprs: readonly (readonly [string, string])[],
    unit: string,
    x: number,
    y: number,
    type = 'timeseries',
  ) => ({
    id: ++id,
    type,
    title,
    datasource: ds,
    gridPos: { h: 8, w: 12, x, y },
    fieldConfig: { defaults: { unit }, overrides: [] },
    targets: exprs.map(([expr, legendFormat], i) => ({
      datasource: ds,
      expr,
      legendFormat,
      refId: String.fromCharCode(65 + i),
    })),
  });
  return {
    title: `KBS ${cfg.namespace}/${cfg.name}`,
    uid: `kbs-${cfg.namespace}-${cfg.name}`.slice(0, 40),
    tags: ['broker', 'kbs', 'confidential-containers'],
    timezone: 'utc',
    schemaVersion: 39,
    version: 1,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    templating: {
      list: [{ name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Data source' }],
    },
    panels: [
      panel(
        'Requests by route and status',
        [[`sum by (route, status) (rate(kbs_http_requests_total{${sel}}[5m]))`, '{{route}} {{status}}']],
        'reqps',
        0,
        0,
      ),
      panel(
        'API error ratio (not 2xx)',
        [
          [
            `sum(rate(kbs_http_requests_total{${sel},route!="other",status!~"2.."}[5m])) / sum(rate(kbs_http_requests_total{${sel},route!="other"}[5m]))`,
            'errors',
          ],
        ],
        'percentunit',
        12,
        0,
      ),
      panel(
        'Latency p95 by route',
        [
          [
            `histogram_quantile(0.95, sum by (le, route) (rate(kbs_http_request_duration_seconds_bucket{${sel}}[5m])))`,
            '{{route}}',
          ],
        ],
        's',
        0,
        8,
      ),
      panel(
        'Attestations by TEE',
        [
          [`sum by (tee_type) (rate(kbs_attestation_successes_total{${sel}}[5m]))`, '{{tee_type}} ok'],
          [`sum by (tee_type) (rate(kbs_attestation_failures_total{${sel}}[5m]))`, '{{tee_type}} failed'],
          [`sum(rate(kbs_attestation_errors_total{${sel}}[5m]))`, 'errors'],
        ],
        'ops',
        12,
        8,
      ),
      panel(
        'Resource policy',
        [
          [`sum(rate(kbs_policy_approvals_total{${sel}}[5m]))`, 'approved'],
          [`sum(rate(kbs_policy_violations_total{${sel}}[5m]))`, 'denied'],
          [`sum(rate(kbs_policy_errors_total{${sel}}[5m]))`, 'errors'],
          [`sum by (policy) (rate(kbs_policy_limit_refusals_total{${sel}}[5m]))`, 'limit {{policy}}'],
        ],
        'ops',
        0,
        16,
      ),
      panel(
        'Resources and plugins',
        [
          [`sum(rate(kbs_resource_reads_total{${sel}}[5m]))`, 'reads'],
          [`sum(rate(kbs_resource_writes_total{${sel}}[5m]))`, 'writes'],
          [`sum by (plugin_name) (rate(kbs_plugin_errors_total{${sel}}[5m]))`, '{{plugin_name}} errors'],
        ],
        'ops',
        12,
        16,
      ),
      panel(
        'Collateral fetch failures',
        [[`sum by (source) (rate(attestation_collateral_fetch_failures_total{${sel}}[5m]))`, '{{source}}']],
        'ops',
        0,
        32,
      ),
      panel(
        'Open connections',
        [[`sum by (pod) (kbs_http_active_connections{${sel}})`, '{{pod}}']],
        'short',
        0,
        24,
      ),
      panel(
        'Certificate expiry',
        [
          [
            `min by (certificate) (kbs_certificate_expiry_timestamp_seconds{${sel}}) - time()`,
            '{{certificate}}',
          ],
        ],
        's',
        12,
        24,
        'stat',
      ),
    ],
  };
}

/** ServiceMonitor, PrometheusRule and the dashboard ConfigMap of one BrokerConfig. */
export function renderMonitoring(cfg: BrokerConfig, n: GeneratedNames): KubeObject[] {
  const serviceMonitor: KubeObject = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'ServiceMonitor',
    metadata: { name: n.serviceMonitor, namespace: cfg.namespace, labels: objectLabels(cfg, 'monitoring') },
    spec: {
      selector: { matchLabels: objectLabels(cfg, 'metrics') },
      namespaceSelector: { matchNames: [cfg.namespace] },
      endpoints: [{ port: METRICS_PORT_NAME, path: '/metrics', scheme: 'http', interval: '30s' }],
    },
  };
  const rule: KubeObject = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: n.prometheusRule, namespace: cfg.namespace, labels: objectLabels(cfg, 'monitoring') },
    spec: { groups: kbsRuleGroups(cfg) },
  };
  const dashboard: IConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: n.dashboardConfigMap,
      namespace: cfg.namespace,
      labels: { ...objectLabels(cfg, 'monitoring'), grafana_dashboard: '1' },
    },
    data: { 'kbs-dashboard.json': `${JSON.stringify(kbsDashboard(cfg), null, 2)}\n` },
  };
  return [serviceMonitor, rule, dashboard as KubeObject];
}
