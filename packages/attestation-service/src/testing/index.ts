// Requests as a KBS (coco_as_grpc) or a test peer builds them for the sample TEE.
import { createHash } from 'node:crypto';
import { canonicalJson } from '@broker/protocol';

/** Runtime data, the sample evidence bound to it (sha384 of its JCS form), both as the wire wants them. */
export function sampleEvidenceRequest(runtimeData: Record<string, unknown>, svn = '1') {
  const reportData = createHash('sha384').update(canonicalJson(runtimeData), 'utf8').digest();
  const evidence = { svn, report_data: reportData.toString('base64') };
  return {
    tee: 'sample',
    evidence: Buffer.from(JSON.stringify(evidence)).toString('base64url'),
    structuredRuntimeData: JSON.stringify(runtimeData),
    runtimeDataHashAlgorithm: 'sha384',
  };
}

/** A Rego policy that affirms executables only when the sample SVN is among the reference values `svn`. */
export const SVN_POLICY = `package policy
import rego.v1

default executables := 33

executables := 2 if {
  input.sample.svn in query_reference_value("svn")
}

trust_claims := {"executables": executables}
`;
