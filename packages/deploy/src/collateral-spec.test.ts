// brokerctl render: the KBS asks Intel's PCS and AMD's KDS by default (as trustee), and
// spec.collateralSpec points it at a PCCS, a PCS Client Tool file or a KDS mirror instead.
import { parseKbsConfigText } from '@broker/kbs';
import { describe, expect, it } from 'vitest';
import { parseBrokerConfig } from './broker-config.js';
import { BrokerConfigError } from './errors.js';
import { renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, sourceSecrets } from './testing/fixtures.js';
import { schemaProblems } from './testing/schemas.js';

async function kbsToml(spec: Record<string, unknown> = {}) {
  const { secrets } = await sourceSecrets();
  const r = renderBrokerConfig(parseBrokerConfig(brokerConfigDoc(spec)), {
    clusterDomain: CLUSTER_DOMAIN,
    secrets,
  });
  const qcnl = r.objects.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-tdx-config'),
  ) as unknown as {
    data: Record<string, string>;
  };
  return { toml: r.kbsConfigToml, qcnl: JSON.parse(Object.values(qcnl.data)[0]!) };
}

describe('collateral services in the rendered KBS configuration', () => {
  it("defaults to Intel's PCS and AMD's KDS", async () => {
    const { toml, qcnl } = await kbsToml();
    const vc = parseKbsConfigText(toml).attestationService.verifierConfig;
    expect(vc?.dcapVerifier).toEqual({
      collateralService: 'https://api.trustedservices.intel.com/sgx/certification/v4/',
    });
    expect(vc?.snpVerifier?.vcekSources).toEqual([{ type: 'KDS' }]);
    expect(qcnl.collateral_service).toBe('https://api.trustedservices.intel.com/sgx/certification/v4/');
  });

  it('takes a PCCS, the TCB update type and a KDS mirror from spec.collateralSpec', async () => {
    const collateralSpec = {
      intelCollateralService: 'https://pccs.internal:8081/sgx/certification/v4/',
      tcbUpdateType: 'standard',
      amdKdsUrl: 'https://kds-mirror.internal',
    };
    expect(schemaProblems(brokerConfigDoc({ collateralSpec }))).toEqual([]);
    const { toml, qcnl } = await kbsToml({ collateralSpec });
    const vc = parseKbsConfigText(toml).attestationService.verifierConfig;
    expect(vc?.dcapVerifier).toEqual({
      collateralService: 'https://pccs.internal:8081/sgx/certification/v4/',
      tcbUpdateType: 'standard',
    });
    expect(vc?.snpVerifier?.vcekSources).toEqual([{ type: 'KDS', baseUrl: 'https://kds-mirror.internal' }]);
    expect(qcnl.collateral_service).toBe('https://pccs.internal:8081/sgx/certification/v4/');
    const file = await kbsToml({
      collateralSpec: { intelCollateralService: 'file:///var/cache/pcs/collateral.json' },
    });
    expect(
      parseKbsConfigText(file.toml).attestationService.verifierConfig?.dcapVerifier?.collateralService,
    ).toBe('file:///var/cache/pcs/collateral.json');
  });

  it('refuses what is not a URL, an unknown update type and unknown keys, naming the field', () => {
    const parse = (collateralSpec: unknown) => () => parseBrokerConfig(brokerConfigDoc({ collateralSpec }));
    expect(parse({ intelCollateralService: 'pccs.internal' })).toThrow(BrokerConfigError);
    expect(parse({ intelCollateralService: 'pccs.internal' })).toThrow(
      /spec\.collateralSpec\.intelCollateralService/,
    );
    expect(parse({ amdKdsUrl: 'file:///kds' })).toThrow(/amdKdsUrl/);
    expect(parse({ tcbUpdateType: 'late' })).toThrow(/tcbUpdateType/);
    expect(parse({ pccsUrl: 'https://x' })).toThrow(/pccsUrl/);
  });
});
