// What every rendered object shares: its shape and the labels that tie it to its BrokerConfig.
import type { BrokerConfig } from './broker-config.js';

/** A rendered Kubernetes object (plain JSON). */
export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
} & Record<string, unknown>;

/** The labels of every object rendered for `cfg`, as the `component` it is. */
export function objectLabels(cfg: BrokerConfig, component: string): Record<string, string> {
  return {
    ...cfg.labels,
    'app.kubernetes.io/name': 'kbs',
    'app.kubernetes.io/instance': cfg.name,
    'app.kubernetes.io/part-of': 'broker',
    'app.kubernetes.io/managed-by': 'brokerctl',
    'app.kubernetes.io/component': component,
  };
}
