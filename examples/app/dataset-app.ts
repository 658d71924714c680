// The sample workload of the spec's flow B. With DECRYPTION_KEY_PATH set it downloads an encrypted
// dataset from DATASET_URL, decrypts it with the key (AES-256-GCM) that the init container fetched
// from the confidential data hub, and evaluates it; without it, it evaluates the dataset bundled with
// the image. The evaluation is per-column statistics of a CSV file.
//
//   node dataset-app.ts                               evaluate (env below), print the report as JSON
//   node dataset-app.ts encrypt --key KEY --in CSV --out FILE     encrypt a dataset for the demo
//
// Env: DECRYPTION_KEY_PATH (32-byte raw key file), DATASET_URL (http/https), BUNDLED_DATASET (default
// data/sample.csv next to this file), REPORT_PORT (serve the report on 0.0.0.0:PORT after evaluating,
// so the pod stays Running; without it the program exits).
//
// Node 24 runs this file directly (type stripping): it uses only erasable TypeScript and Node built-ins.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** Encrypted dataset: MAGIC ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte GCM tag; MAGIC is the AAD. */
export const MAGIC = Buffer.from('DSE1', 'latin1');
export const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Largest dataset downloaded or read. */
export const MAX_DATASET_BYTES = 64 * 1024 * 1024;
const MAX_ROWS = 1_000_000;
const MAX_COLUMNS = 256;

export class DatasetError extends Error {
  override readonly name = 'DatasetError';
}

export function encryptDataset(
  key: Uint8Array,
  plaintext: Uint8Array,
  nonce: Uint8Array = randomBytes(NONCE_BYTES),
): Buffer {
  checkKey(key);
  if (nonce.length !== NONCE_BYTES) throw new DatasetError(`the nonce must be ${NONCE_BYTES} bytes`);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(MAGIC);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([MAGIC, nonce, body, cipher.getAuthTag()]);
}

export function decryptDataset(key: Uint8Array, sealed: Uint8Array): Buffer {
  checkKey(key);
  const data = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if (data.length < MAGIC.length + NONCE_BYTES + TAG_BYTES || !data.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new DatasetError('the download is not an encrypted dataset (DSE1)');
  }
  const nonce = data.subarray(MAGIC.length, MAGIC.length + NONCE_BYTES);
  const body = data.subarray(MAGIC.length + NONCE_BYTES, data.length - TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key, nonce);
  decipher.setAAD(MAGIC);
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    throw new DatasetError('the dataset does not decrypt with this key (wrong key, or the data was changed)');
  }
}

function checkKey(key: Uint8Array): void {
  if (key.length !== KEY_BYTES)
    throw new DatasetError(`the key must be ${KEY_BYTES} bytes, got ${key.length}`);
}

export interface ColumnStats {
  readonly count: number;
  readonly mean: number;
  readonly stddev: number;
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

export interface Report {
  readonly source: string;
  readonly sha256: string;
  readonly rows: number;
  readonly columns: Readonly<Record<string, ColumnStats>>;
  /** Rows per value of the first column, when it is not numeric (e.g. per station). */
  readonly groups?: Readonly<Record<string, number>>;
}

const round = (x: number) => Math.round(x * 1000) / 1000;

function stats(values: number[]): ColumnStats {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = sorted.reduce((a, b) => a + b, 0) / n;
  const variance = n > 1 ? sorted.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1) : 0;
  const mid = Math.floor(n / 2);
  const median =
    n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return {
    count: n,
    mean: round(mean),
    stddev: round(Math.sqrt(variance)),
    min: sorted[0] as number,
    median: round(median),
    max: sorted[n - 1] as number,
  };
}

/** Evaluates a CSV dataset: a header line, then rows of the same width; numeric columns get statistics. */
export function evaluateCsv(bytes: Uint8Array, source: string): Report {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new DatasetError('the dataset is not UTF-8 text');
  }
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = lines
    .shift()
    ?.split(',')
    .map((h) => h.trim());
  if (header === undefined || header.length === 0 || header.some((h) => h === '')) {
    throw new DatasetError('the dataset has no header line');
  }
  if (header.length > MAX_COLUMNS) throw new DatasetError(`the dataset has more than ${MAX_COLUMNS} columns`);
  if (lines.length === 0) throw new DatasetError('the dataset has no rows');
  if (lines.length > MAX_ROWS) throw new DatasetError(`the dataset has more than ${MAX_ROWS} rows`);
  const cells = lines.map((line, i) => {
    const row = line.split(',').map((c) => c.trim());
    if (row.length !== header.length) {
      throw new DatasetError(`row ${i + 2} has ${row.length} fields, the header ${header.length}`);
    }
    return row;
  });
  const columns: Record<string, ColumnStats> = {};
  let firstIsNumeric: boolean = true;
  header.forEach((name, c) => {
    const raw = cells.map((row) => row[c] as string);
    const numbers = raw.map(Number);
    if (raw.every((v, i) => v !== '' && Number.isFinite(numbers[i]))) columns[name] = stats(numbers);
    else if (c === 0) firstIsNumeric = false;
  });
  if (Object.keys(columns).length === 0) throw new DatasetError('the dataset has no numeric column');
  const groups: Record<string, number> = {};
  if (!firstIsNumeric)
    for (const row of cells) groups[row[0] as string] = (groups[row[0] as string] ?? 0) + 1;
  return {
    source,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    rows: cells.length,
    columns,
    ...(firstIsNumeric ? {} : { groups }),
  };
}

async function download(url: string): Promise<Buffer> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new DatasetError(`DATASET_URL ${JSON.stringify(url)} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new DatasetError('DATASET_URL must be http or https');
  let res: Response;
  try {
    res = await fetch(parsed, { signal: AbortSignal.timeout(120_000) });
  } catch (e) {
    throw new DatasetError(`downloading ${url}: ${(e as Error).message}`);
  }
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new DatasetError(`downloading ${url}: HTTP ${res.status}`);
  }
  if (Number(res.headers.get('content-length') ?? '0') > MAX_DATASET_BYTES) {
    await res.body?.cancel();
    throw new DatasetError(`${url} is larger than ${MAX_DATASET_BYTES} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += chunk.length;
    if (size > MAX_DATASET_BYTES) throw new DatasetError(`${url} is larger than ${MAX_DATASET_BYTES} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

function readLimited(path: string, max: number, what: string): Buffer {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (e) {
    throw new DatasetError(`${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (size > max) throw new DatasetError(`${what} ${path} is larger than ${max} bytes`);
  return readFileSync(path);
}

export const DEFAULT_BUNDLED_DATASET = join(dirname(fileURLToPath(import.meta.url)), 'data', 'sample.csv');

/** The evaluation the container runs, from its environment. */
export async function evaluateFromEnv(env: Readonly<Record<string, string | undefined>>): Promise<Report> {
  const keyPath = env.DECRYPTION_KEY_PATH;
  if (keyPath === undefined || keyPath === '') {
    const path = env.BUNDLED_DATASET ?? DEFAULT_BUNDLED_DATASET;
    return evaluateCsv(readLimited(path, MAX_DATASET_BYTES, 'bundled dataset'), `bundled:${path}`);
  }
  const url = env.DATASET_URL;
  if (url === undefined || url === '')
    throw new DatasetError('DECRYPTION_KEY_PATH is set but DATASET_URL is not');
  const key = readLimited(keyPath, 1024, 'key file');
  checkKey(key);
  const plaintext = decryptDataset(key, await download(url));
  return evaluateCsv(plaintext, url);
}

function serve(report: Report, port: number): void {
  const body = `${JSON.stringify(report, null, 2)}\n`;
  createServer((req, res) => {
    if (req.method !== 'GET') res.writeHead(405).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  }).listen(port, '0.0.0.0', () => process.stderr.write(`dataset-app: serving the report on port ${port}\n`));
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'encrypt') {
    const { values } = parseArgs({
      args: argv.slice(1),
      options: { key: { type: 'string' }, in: { type: 'string' }, out: { type: 'string' } },
      strict: true,
    });
    if (values.key === undefined || values.in === undefined || values.out === undefined) {
      process.stderr.write('usage: dataset-app.ts encrypt --key KEY(32 bytes) --in CSV --out FILE\n');
      return 2;
    }
    const key = readLimited(values.key, 1024, 'key file');
    const plaintext = readLimited(values.in, MAX_DATASET_BYTES, 'dataset');
    evaluateCsv(plaintext, values.in); // refuse to encrypt what the app could not evaluate
    writeFileSync(values.out, encryptDataset(key, plaintext));
    process.stderr.write(
      `dataset-app: encrypted ${values.in} (${plaintext.length} bytes) to ${values.out}\n`,
    );
    return 0;
  }
  if (argv.length > 0) {
    process.stderr.write('usage: dataset-app.ts [encrypt --key KEY --in CSV --out FILE]\n');
    return 2;
  }
  const report = await evaluateFromEnv(process.env);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  const port = process.env.REPORT_PORT;
  if (port !== undefined && port !== '') {
    if (!/^\d{1,5}$/.test(port) || Number(port) > 65535)
      throw new DatasetError('REPORT_PORT must be a port number');
    serve(report, Number(port));
  }
  return 0;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`dataset-app: ${(e as Error).message}\n`);
      process.exitCode = 1;
    },
  );
}
