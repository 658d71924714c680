// `brokerctl render --monitoring`: the ServiceMonitor scrapes the metrics listener the rendered KBS
// configuration opens, Debian's promtool accepts the PrometheusRule's rules (and fires the alerts on
// sample series), and every metric the alerts and the dashboard name is one the KBS exports.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KbsMetrics, parseKbsConfigText } from '@broker/kbs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseBrokerConfig } from './broker-config.js';
import { kbsRuleGroups } from './monitoring.js';
import { type KubeObject, renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, NAMESPACE, sourceSecrets } from './testing/fixtures.js';

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'deploy-monitoring-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function render(monitoring: boolean) {
  const { secrets } = await sourceSecrets();
  return renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), {
    clusterDomain: CLUSTER_DOMAIN,
    secrets,
    monitoring,
  });
}

function find(objects: readonly KubeObject[], kind: string, name?: string): Any {
  const o = objects.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (o === undefined) throw new Error(`no ${kind} ${name ?? ''}`);
  return o;
}

const PROMQL_KEYWORDS = new Set(['and', 'or', 'unless', 'bool']);

/** The metric names a PromQL expression reads (not its functions, label names or keywords). */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\boffset\s+\w+/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const name = m[1] as string;
    if (m[2] === undefined && !PROMQL_KEYWORDS.has(name)) names.add(name);
  }
  return [...names];
}

/** Every series name the KBS's registry exports (histograms as their _bucket, _sum and _count). */
async function exportedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const m of await new KbsMetrics().registry.getMetricsAsJSON()) {
    if (String(m.type) === 'histogram')
      for (const s of ['_bucket', '_sum', '_count']) names.add(`${m.name}${s}`);
    else names.add(m.name);
  }
  return names;
}

describe('brokerctl render --monitoring', () => {
  it('adds the ServiceMonitor, PrometheusRule and dashboard only when asked', async () => {
    const plain = await render(false);
    expect(plain.objects.map((o) => o.kind)).not.toContain('ServiceMonitor');
    const r = await render(true);
    expect(r.objects.slice(-3).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      'ServiceMonitor/broker-kbs',
      'PrometheusRule/broker-kbs-alerts',
      'ConfigMap/broker-kbs-dashboard',
    ]);
    for (const o of r.objects.slice(-3)) expect(o.metadata.namespace).toBe(NAMESPACE);
  });

  it('scrapes the metrics listener the KBS configuration opens, through a ClusterIP Service only', async () => {
    const r = await render(true);
    const config = parseKbsConfigText(r.kbsConfigToml);
    expect(config.httpServer.metricsSocket).toEqual({ host: '0.0.0.0', port: 9090 });
    const container = find(r.objects, 'Deployment').spec.template.spec.containers[0];
    expect(container.ports).toContainEqual({ name: 'metrics', containerPort: 9090, protocol: 'TCP' });
    const metricsService = find(r.objects, 'Service', 'kbs-metrics');
    expect(metricsService.spec.type).toBe('ClusterIP');
    expect(metricsService.spec.ports).toEqual([
      { name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' },
    ]);
    // The public Service and the Route never carry the metrics port.
    expect(find(r.objects, 'Service', 'kbs-service').spec.ports.map((p: Any) => p.name)).toEqual([
      'kbs-port',
    ]);
    expect(find(r.objects, 'Route').spec.port.targetPort).toBe('kbs-port');
    const sm = find(r.objects, 'ServiceMonitor');
    expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(sm.spec.endpoints).toEqual([
      { port: 'metrics', path: '/metrics', scheme: 'http', interval: '30s' },
    ]);
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels))
      expect(metricsService.metadata.labels[k], k).toBe(v);
    expect(find(r.objects, 'Service', 'kbs-service').metadata.labels['app.kubernetes.io/component']).not.toBe(
      sm.spec.selector.matchLabels['app.kubernetes.io/component'],
    );
  });

  it("passes promtool check rules, and promtool's unit tests fire the alerts", async () => {
    const r = await render(true);
    const rule = find(r.objects, 'PrometheusRule');
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    const rulesFile = join(tmp, 'kbs-rules.yaml');
    writeFileSync(rulesFile, stringify(rule.spec));
    const checked = execFileSync('promtool', ['check', 'rules', rulesFile], { encoding: 'utf8' });
    expect(checked).toMatch(/SUCCESS: 9 rules found/);

    // Sample series: a KBS answering 401 to half its resource requests, a denial burst after an hour of
    // calm, an HTTPS certificate that expires in 10 days (at t=0 of the test clock), and KDS failing.
    const sel = `job="kbs-metrics",namespace="${NAMESPACE}"`;
    // promtool compares the expanded annotations too: the rule's, with the labels and the value filled in.
    const rules: Any[] = rule.spec.groups.flatMap((g: Any) => g.rules);
    const fired = (alertname: string, labels: Record<string, string>, value = '') => {
      const r = rules.find((x) => x.alert === alertname);
      const fill = (t: string) =>
        t
          .replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, k: string) => labels[k] ?? '')
          .replace(/\{\{ \$value[^}]*\}\}/g, value);
      return {
        exp_labels: { ...labels, severity: r.labels.severity },
        exp_annotations: {
          summary: fill(r.annotations.summary),
          description: fill(r.annotations.description),
        },
      };
    };
    const route = '/kbs/v0/resource/{repository}/{type}/{tag}';
    const tests = {
      rule_files: [rulesFile],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: [
            {
              series: `kbs_http_requests_total{${sel},method="GET",route="${route}",status="200"}`,
              values: '0+60x30',
            },
            {
              series: `kbs_http_requests_total{${sel},method="GET",route="${route}",status="401"}`,
              values: '0+60x30',
            },
            { series: `kbs_policy_violations_total{${sel}}`, values: '0x60 0+50x20' },
            {
              series: `kbs_certificate_expiry_timestamp_seconds{${sel},certificate="https",pod="kbs-0"}`,
              values: `${10 * 86400}x120`,
            },
            { series: `up{${sel},pod="kbs-0"}`, values: '1x120' },
            // KDS failing once a minute throughout; PCS failing once, which is not an outage.
            {
              series: `attestation_collateral_fetch_failures_total{${sel},pod="kbs-0",source="kds"}`,
              values: '0+1x120',
            },
            {
              series: `attestation_collateral_fetch_failures_total{${sel},pod="kbs-0",source="pcs"}`,
              values: '0 1x120',
            },
          ],
          alert_rule_test: [
            {
              eval_time: '20m',
              alertname: 'KbsHttpErrorRate',
              exp_alerts: [fired('KbsHttpErrorRate', {}, '50%')],
            },
            { eval_time: '20m', alertname: 'KbsHttpServerErrors', exp_alerts: [] },
            { eval_time: '20m', alertname: 'KbsMetricsDown', exp_alerts: [] },
            { eval_time: '50m', alertname: 'KbsPolicyDenySurge', exp_alerts: [] },
            {
              eval_time: '75m',
              alertname: 'KbsPolicyDenySurge',
              exp_alerts: [fired('KbsPolicyDenySurge', {})],
            },
            {
              eval_time: '90m',
              alertname: 'KbsCertificateExpiresSoon',
              exp_alerts: [
                fired(
                  'KbsCertificateExpiresSoon',
                  { certificate: 'https', pod: 'kbs-0', job: 'kbs-metrics', namespace: NAMESPACE },
                  '9d 22h 30m 0s',
                ),
              ],
            },
            { eval_time: '90m', alertname: 'KbsCertificateExpiresVerySoon', exp_alerts: [] },
            // Pending until the failures have lasted 15 minutes.
            { eval_time: '10m', alertname: 'KbsCollateralFetchFailures', exp_alerts: [] },
            {
              eval_time: '30m',
              alertname: 'KbsCollateralFetchFailures',
              exp_alerts: [fired('KbsCollateralFetchFailures', { source: 'kds' }, '10')],
            },
          ],
        },
      ],
    };
    const testFile = join(tmp, 'kbs-rules.test.yaml');
    writeFileSync(testFile, stringify(tests));
    let out: string;
    try {
      out = execFileSync('promtool', ['test', 'rules', testFile], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string };
      throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    }
    expect(out).toContain('SUCCESS');
  });

  it('names only metrics the KBS exports, in the alerts and in the dashboard', async () => {
    const exported = await exportedNames();
    const known = (name: string) => exported.has(name) || name === 'up';
    const r = await render(true);
    const rule = find(r.objects, 'PrometheusRule');
    const exprs: string[] = rule.spec.groups.flatMap((g: Any) => g.rules.map((x: Any) => x.expr));
    const dashboard = JSON.parse(
      find(r.objects, 'ConfigMap', 'broker-kbs-dashboard').data['kbs-dashboard.json'],
    );
    const panelExprs: string[] = dashboard.panels.flatMap((p: Any) => p.targets.map((t: Any) => t.expr));
    expect(exprs.length).toBeGreaterThan(5);
    expect(panelExprs.length).toBeGreaterThan(5);
    const used = new Set([...exprs, ...panelExprs].flatMap(metricNames));
    expect([...used].filter((n) => !known(n))).toEqual([]);
    // The names this relies on are really found (the check above would pass on an empty set).
    for (const n of [
      'kbs_http_requests_total',
      'kbs_policy_violations_total',
      'kbs_certificate_expiry_timestamp_seconds',
      'kbs_http_request_duration_seconds_bucket',
      'attestation_collateral_fetch_failures_total',
      'up',
    ])
      expect(used).toContain(n);
    expect(metricNames('sum by (route) (rate(kbs_no_such_metric{a="b"}[5m])) > 3 * time()')).toEqual([
      'kbs_no_such_metric',
    ]);
  });

  it('selects the series of its own namespace and Service in every rule', () => {
    const cfg = parseBrokerConfig(brokerConfigDoc());
    for (const r of kbsRuleGroups(cfg).flatMap((g) => g.rules)) {
      expect(r.expr, r.alert).toContain(`job="kbs-metrics",namespace="${NAMESPACE}"`);
    }
  });
});
