// npm run traces [-- --port 4318]: a local OTLP/HTTP receiver (JSON encoding) that prints each
// trace as a tree once it has been quiet for a second: where no trace viewer is installed, what
// the service exports can still be read. Point the service at it with
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/json npm start
// Listens on 127.0.0.1 only.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

interface Value {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: Value }[];
  status?: { code?: number };
}

const KINDS = ['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];
const { values } = parseArgs({ options: { port: { type: 'string', default: '4318' } } });

const traces = new Map<string, { spans: (Span & { service: string })[]; timer?: NodeJS.Timeout }>();

const show = (v: Value) => v.stringValue ?? String(v.intValue ?? v.boolValue ?? v.doubleValue ?? '');

/** The tree of one trace, each span with its kind, duration and attributes. */
export function render(spans: readonly (Span & { service: string })[]): string {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, (Span & { service: string })[]>();
  const roots: (Span & { service: string })[] = [];
  for (const span of [...spans].sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))) {
    const parent = span.parentSpanId;
    if (parent === undefined || parent === '' || !ids.has(parent)) roots.push(span);
    else children.set(parent, [...(children.get(parent) ?? []), span]);
  }
  const t0 = roots.length === 0 ? 0n : BigInt((roots[0] as Span).startTimeUnixNano);
  const lines: string[] = [];
  const walk = (span: Span & { service: string }, depth: number) => {
    const start = Number(BigInt(span.startTimeUnixNano) - t0) / 1e6;
    const ms = Number(BigInt(span.endTimeUnixNano) - BigInt(span.startTimeUnixNano)) / 1e6;
    const attributes = (span.attributes ?? []).map((a) => `${a.key}=${show(a.value)}`).join(' ');
    const error = span.status?.code === 2 ? ' ERROR' : '';
    lines.push(
      `${'  '.repeat(depth)}${span.name} [${KINDS[span.kind] ?? span.kind}${error}] +${start.toFixed(1)} ms, ${ms.toFixed(2)} ms (${span.service}) ${attributes}`,
    );
    for (const child of children.get(span.spanId) ?? []) walk(child, depth + 1);
  };
  for (const root of roots) walk(root, 0);
  return lines.join('\n');
}

const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(415).end('send OTLP/HTTP JSON to /v1/traces (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)');
      return;
    }
    const payload = JSON.parse(body) as {
      resourceSpans: {
        resource?: { attributes?: { key: string; value: Value }[] };
        scopeSpans: { spans: Span[] }[];
      }[];
    };
    for (const rs of payload.resourceSpans) {
      const service = show(rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value ?? {});
      for (const ss of rs.scopeSpans) {
        for (const span of ss.spans) {
          const trace = traces.get(span.traceId) ?? { spans: [] };
          trace.spans.push({ ...span, service });
          clearTimeout(trace.timer);
          trace.timer = setTimeout(() => {
            traces.delete(span.traceId);
            process.stdout.write(`trace ${span.traceId}\n${render(trace.spans)}\n\n`);
          }, 1000);
          traces.set(span.traceId, trace);
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(Number(values.port), '127.0.0.1', () => {
  process.stderr.write(`OTLP/HTTP JSON receiver on http://127.0.0.1:${values.port}/v1/traces\n`);
});
