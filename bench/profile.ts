// Where a request's CPU goes, from a V8 CPU profile (`node --cpu-prof`): each sample is given to
// the innermost frame that belongs to a part of the stack we can name (a library, a layer of
// ours), so that time in Node's own stream and socket code counts for the caller it serves (a
// socket write from postgres.js is the driver's; one from a reply is the HTTP exchange's).
// Used by `npm run bench -- --profile`.
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The parts of the table, in the order they are printed when tied. */
export const PARTS = [
  'HTTP and socket I/O (node:http)',
  'driver (postgres.js or PGlite, our pool, Kysely)',
  'garbage collection',
  'logging (pino)',
  'our hooks (request id, CORS, auth, quotas, time-out, negotiation)',
  'Fastify (hook runner, reply)',
  'metrics',
  'tracing (OpenTelemetry)',
  'routing (find-my-way, version rewrite)',
  'handlers, services, mapping',
  'validation (ajv)',
  'serialization (fast-json-stringify)',
  'other (V8, timers, microtasks, Node internals)',
] as const;
export type Part = (typeof PARTS)[number];

const [
  HTTP,
  DRIVER,
  GC,
  LOGGING,
  HOOKS,
  FASTIFY,
  METRICS,
  TRACING,
  ROUTING,
  HANDLERS,
  VALIDATION,
  SERIALIZATION,
  OTHER,
] = PARTS;

/** Code that runs for whoever called it: its samples go to the next frame out. */
const PASS_THROUGH =
  /^node:(net|fs|stream|events|buffer|internal\/(fs\/|stream_base_commons|streams\/|process\/task_queues|async_hooks|timers|util|errors|validators|event_target|abort_controller|url|querystring))/;

/** The part a frame belongs to; undefined when its samples belong to the caller. */
function partOf(frame: ProfileNode['callFrame']): Part | undefined {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return GC;
    if (functionName === '(program)') return OTHER;
    return undefined; // builtins (JSON.stringify, Array methods…): the caller's
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (pkg !== undefined) {
    if (['postgres', 'kysely', '@electric-sql/pglite'].includes(pkg)) return DRIVER;
    if (['pino', 'sonic-boom', 'thread-stream', 'pino-std-serializers', 'quick-format-unescaped'].includes(pkg))
      return LOGGING;
    if (pkg === 'find-my-way') return ROUTING;
    if (pkg === 'fast-json-stringify' || pkg === 'fast-uri') return SERIALIZATION;
    if (pkg === 'ajv' || pkg === 'ajv-formats') return VALIDATION;
    if (pkg === 'prom-client') return METRICS;
    if (pkg.startsWith('@opentelemetry/') || pkg.startsWith('@protobufjs/') || pkg === 'protobufjs') return TRACING;
    if (pkg === 'jose') return HOOKS;
    if (pkg.startsWith('@fastify/') || pkg === 'fastify' || pkg === 'avvio' || pkg === 'fastify-plugin') {
      if (pkg === '@fastify/cors') return HOOKS;
      return FASTIFY;
    }
    return OTHER;
  }
  if (url.startsWith('node:')) {
    if (PASS_THROUGH.test(url)) return undefined;
    if (/^node:(_http_|http|internal\/http)/.test(url)) return HTTP;
    return OTHER;
  }
  const ours = /\/(?:dist\/)?src\/(.+)$/.exec(url)?.[1];
  if (ours !== undefined) {
    if (ours.startsWith('db/')) return DRIVER;
    if (ours.startsWith('log-destination')) return LOGGING;
    if (ours.startsWith('tracing/')) return TRACING;
    if (/^http\/metrics/.test(ours)) return METRICS;
    if (/^http\/(versioning|route-table|request-url)/.test(ours)) return ROUTING;
    if (/^http\/validation/.test(ours)) return VALIDATION;
    if (/^http\//.test(ours) || ours.startsWith('app.')) return HOOKS;
    return HANDLERS;
  }
  return OTHER;
}

/**
 * CPU shares of a profile's samples taken between `from` and `to` milliseconds before the
 * profile ended (so that start-up, seeding and shutdown are left out), idle time excluded.
 */
export function profileShares(
  file: string,
  window: { fromMsBeforeEnd: number; toMsBeforeEnd: number },
): { shares: Map<Part, number>; busySamples: number; leaves: Map<Part, [string, number][]> } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const partOfNode = new Map<number, Part | null>();
  const attribute = (id: number): Part | null => {
    const known = partOfNode.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    if (node === undefined || node.callFrame.functionName === '(idle)') return null;
    const own = partOf(node.callFrame);
    const up = parent.get(id);
    const part = own ?? (up === undefined ? OTHER : (attribute(up) ?? OTHER));
    partOfNode.set(id, part);
    return part;
  };
  // Sample times: startTime plus the running sum of the deltas (µs).
  const times: number[] = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) times.push((t += d));
  const from = profile.endTime - window.fromMsBeforeEnd * 1000;
  const to = profile.endTime - window.toMsBeforeEnd * 1000;
  const counts = new Map<Part, number>();
  const leafCounts = new Map<Part, Map<string, number>>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const at = times[i] ?? 0;
    if (at < from || at > to) return;
    const part = attribute(id);
    if (part === null) return;
    busy++;
    counts.set(part, (counts.get(part) ?? 0) + 1);
    const frame = byId.get(id)?.callFrame;
    const leaf = `${frame?.functionName || '(anonymous)'} ${frame?.url.replace(/^.*\/(node_modules|dist)\//, '') ?? ''}`;
    const ofPart = leafCounts.get(part) ?? new Map<string, number>();
    ofPart.set(leaf, (ofPart.get(leaf) ?? 0) + 1);
    leafCounts.set(part, ofPart);
  });
  // The functions each part's samples were taken in, largest first (where to look next).
  const leaves = new Map(
    [...leafCounts].map(([part, m]) => [
      part,
      [...m].sort((a, b) => b[1] - a[1]).map(([leaf, c]): [string, number] => [leaf, c / busy]),
    ]),
  );
  return { shares: new Map([...counts].map(([p, c]) => [p, c / busy])), busySamples: busy, leaves };
}
