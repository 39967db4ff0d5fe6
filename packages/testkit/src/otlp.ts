import { createServer } from 'node:http';
import { listenOnLoopback } from './ports.js';

/** One span as a receiver got it, whichever encoding it came in. */
export interface ReceivedSpan {
  service: string;
  scope: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  links: { traceId: string; spanId: string }[];
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT (exports go to `<it>/v1/traces`). */
  url: string;
  spans(): ReceivedSpan[];
  /** Every export body as received, undecoded: what left the processes, byte for byte. */
  raw(): Buffer[];
  /** Content types of the exports received. */
  contentTypes(): string[];
  /** Exports and bytes received (counted with `keep: false` too). */
  totals(): { exports: number; bytes: number };
  close(): Promise<void>;
}

/**
 * An OTLP/HTTP trace receiver for tests and benchmarks: accepts `http/json` and `http/protobuf` exports at
 * `/v1/traces`, keeps the raw bodies and the decoded spans. The protobuf decoder below reads exactly the
 * fields of the OTLP trace messages the assertions use.
 */
export async function startOtlpReceiver(opts: { keep?: boolean; port?: number } = {}): Promise<OtlpReceiver> {
  const keep = opts.keep ?? true;
  const spans: ReceivedSpan[] = [];
  const bodies: Buffer[] = [];
  const types: string[] = [];
  const totals = { exports: 0, bytes: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      if (req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      totals.exports++;
      totals.bytes += body.length;
      if (keep) {
        bodies.push(body);
        types.push(type);
        try {
          spans.push(...(type.includes('json') ? fromJson(body) : fromProtobuf(body)));
        } catch {
          // kept raw: a test reading spans() will miss them and say so
        }
      }
      if (type.includes('json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  let port = opts.port ?? 0;
  if (port === 0) port = await listenOnLoopback(server);
  else await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    raw: () => [...bodies],
    contentTypes: () => [...types],
    totals: () => ({ ...totals }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
}
interface JsonKv {
  key: string;
  value: JsonValue;
}

const jsonValue = (v: JsonValue): unknown =>
  v.stringValue ??
  v.boolValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.arrayValue?.values?.map(jsonValue);

const jsonAttrs = (kvs: JsonKv[] | undefined) =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, jsonValue(kv.value)]));

function fromJson(body: Buffer): ReceivedSpan[] {
  const doc = JSON.parse(body.toString('utf8')) as {
    resourceSpans?: {
      resource?: { attributes?: JsonKv[] };
      scopeSpans?: {
        scope?: { name?: string };
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: JsonKv[];
          status?: { code?: number };
          links?: { traceId: string; spanId: string }[];
        }[];
      }[];
    }[];
  };
  const out: ReceivedSpan[] = [];
  for (const rs of doc.resourceSpans ?? []) {
    const service = String(jsonAttrs(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service,
          scope: ss.scope?.name ?? '',
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind,
          attributes: jsonAttrs(s.attributes),
          statusCode: s.status?.code ?? 0,
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
        });
      }
    }
  }
  return out;
}

/** Protobuf wire format: (field number, wire type, value) triples. */
function* fields(buf: Buffer): Generator<[number, number, Buffer | bigint]> {
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === 0) yield [field, wire, varint()];
    else if (wire === 1) {
      yield [field, wire, buf.subarray(i, i + 8)];
      i += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      yield [field, wire, buf.subarray(i, i + len)];
      i += len;
    } else if (wire === 5) {
      yield [field, wire, buf.subarray(i, i + 4)];
      i += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
}

function anyValue(buf: Buffer): unknown {
  for (const [f, , v] of fields(buf)) {
    if (f === 1) return (v as Buffer).toString('utf8');
    if (f === 2) return (v as bigint) !== 0n;
    if (f === 3) return Number(BigInt.asIntN(64, v as bigint));
    if (f === 4) return (v as Buffer).readDoubleLE(0);
    if (f === 5) {
      const values: unknown[] = [];
      for (const [af, , av] of fields(v as Buffer)) if (af === 1) values.push(anyValue(av as Buffer));
      return values;
    }
  }
  return undefined;
}

function keyValue(buf: Buffer): [string, unknown] {
  let key = '';
  let value: unknown;
  for (const [f, , v] of fields(buf)) {
    if (f === 1) key = (v as Buffer).toString('utf8');
    else if (f === 2) value = anyValue(v as Buffer);
  }
  return [key, value];
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const [f, , rsBuf] of fields(body)) {
    if (f !== 1) continue;
    let service = '';
    const scopes: Buffer[] = [];
    for (const [rf, , rv] of fields(rsBuf as Buffer)) {
      if (rf === 1) {
        for (const [af, , av] of fields(rv as Buffer)) {
          if (af !== 1) continue;
          const [k, v] = keyValue(av as Buffer);
          if (k === 'service.name') service = String(v);
        }
      } else if (rf === 2) scopes.push(rv as Buffer);
    }
    for (const ssBuf of scopes) {
      let scope = '';
      for (const [sf, , sv] of fields(ssBuf)) {
        if (sf === 1) {
          for (const [nf, , nv] of fields(sv as Buffer))
            if (nf === 1) scope = (nv as Buffer).toString('utf8');
        } else if (sf === 2) {
          const span: ReceivedSpan = {
            service,
            scope,
            traceId: '',
            spanId: '',
            parentSpanId: '',
            name: '',
            kind: 0,
            attributes: {},
            statusCode: 0,
            links: [],
          };
          for (const [pf, , pv] of fields(sv as Buffer)) {
            if (pf === 1) span.traceId = (pv as Buffer).toString('hex');
            else if (pf === 2) span.spanId = (pv as Buffer).toString('hex');
            else if (pf === 4) span.parentSpanId = (pv as Buffer).toString('hex');
            else if (pf === 5) span.name = (pv as Buffer).toString('utf8');
            else if (pf === 6) span.kind = Number(pv as bigint);
            else if (pf === 9) {
              const [k, v] = keyValue(pv as Buffer);
              span.attributes[k] = v;
            } else if (pf === 13) {
              const link = { traceId: '', spanId: '' };
              for (const [lf, , lv] of fields(pv as Buffer)) {
                if (lf === 1) link.traceId = (lv as Buffer).toString('hex');
                else if (lf === 2) link.spanId = (lv as Buffer).toString('hex');
              }
              span.links.push(link);
            } else if (pf === 15) {
              for (const [tf, , tv] of fields(pv as Buffer))
                if (tf === 3) span.statusCode = Number(tv as bigint);
            }
          }
          out.push(span);
        }
      }
    }
  }
  return out;
}
