// buildApp() assembles the service and never listens (STYLE principle 7). Read top to bottom,
// it is the table of contents: plumbing, then public paths, then each version's resources.
import { createServer } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from './config/config.js';
import { Encryption, parseEncryptionKey } from './crypto/encryption.js';
import reencryption from './crypto/reencrypt.js';
import type { Database } from './db/database.js';
import auth, { type AuthOptions } from './http/auth/auth.js';
import contentNegotiation from './http/versioning/content-negotiation.js';
import cors, { CorsRules } from './http/cors.js';
import idempotency from './http/idempotency/idempotency.js';
import requestDatabase from './http/database/request-db.js';
import readReplicas from './http/database/read-replicas.js';
import poolMetrics from './http/database/pool-metrics.js';
import type { ReplicaSet } from './db/replicas.js';
import eventRetention from './events/retention.js';
import { eventHub, type EventStreamOptions } from './events/events.routes.js';
import webhookDelivery from './webhooks/delivery/plugin.js';
import { resolveWithDns, type ResolveHost } from './webhooks/address-guard.js';
import metrics from './http/metrics.js';
import { Admission } from './http/overload/admission.js';
import overload, { ShedLog } from './http/overload/overload.js';
import openapi from './http/openapi/openapi.js';
import { addWebhooks } from './webhooks/webhooks.openapi.js';
import { clientErrorHandler, safePath } from './http/client-errors.js';
import problems, { sendProblem } from './http/problems/error-handler.js';
import rateLimit from './http/rate-limit/rate-limit.js';
import { plain } from './http/problems/to-problem.js';
import timeouts from './http/timeouts.js';
import requestContext, { genReqId, REQUEST_ID_LOG_LABEL } from './http/request-context.js';
import { RouteTable } from './http/route-table.js';
import httpSpans from './tracing/http-spans.js';
import { createMailer, developmentMailFile, type Mailer, type MailerOptions } from './mail/mailer.js';
import { createValidatorCompiler } from './http/validation.js';
import versioning, { versionRewriter } from './http/versioning/versioning.js';
import productRoutes from './products/products.routes.js';
import stockRoutes from './products/stock.routes.js';
import publicRoutes from './public/index.js';
import v1 from './versions/v1.js';
import v2 from './versions/v2.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    db: Kysely<Database>;
    /** Outgoing mail (the password reset's link). */
    mailer: Mailer;
    /** A host's addresses, for the webhook URL checks (docs/webhooks.md). */
    resolveHost: ResolveHost;
    /** Secrets at rest: ENCRYPTION_KEY (crypto/encryption.ts). */
    encryption: Encryption;
  }
}

export interface BuildAppOptions {
  config: Config;
  db: Kysely<Database>;
  logger?: FastifyBaseLogger;
  auth?: AuthOptions;
  /** More routes, registered after the service's own (tests; an application embedding it). */
  plugins?: FastifyPluginAsync[];
  /**
   * Plugins (wrapped with fastify-plugin) registered after the cross-cutting ones and before any
   * route, so their hooks see every answer: the tests check each one against the OpenAPI document.
   */
  observers?: FastifyPluginAsync[];
  /** How webhook hosts are resolved: DNS, unless a test answers without asking a server. */
  resolveHost?: ResolveHost;
  /** The event stream's poll and heartbeat periods (tests shorten them). */
  eventStream?: EventStreamOptions;
  /** Read replicas (DATABASE_REPLICA_URLS): GETs read there, with read-your-writes. */
  replicas?: ReplicaSet | undefined;
  /** How many log lines stdout did not take (log_lines_dropped_total); none when not given. */
  logLinesDropped?: () => number;
  /** The mailer's retry waits and time-out (tests shorten them). */
  mail?: Pick<MailerOptions, 'retryDelaysMs' | 'timeoutMs'>;
  /**
   * How busy the event loop was since the last reading (0–1), which widens the admission queue's
   * bound on refusals while it has room: its utilization, unless a test stands in a busy loop.
   */
  loopBusy?: () => number;
}

export const BODY_LIMIT = 1024 * 1024; // docs/api-guide.md#errors: 413 above 1 MiB

export async function buildApp({
  config,
  db,
  logger,
  auth: authOptions = {},
  plugins = [],
  observers = [],
  resolveHost = resolveWithDns,
  eventStream = {},
  mail = {},
  replicas,
  logLinesDropped = () => 0,
  loopBusy,
}: BuildAppOptions): Promise<FastifyInstance> {
  const shedLog = new ShedLog();
  const corsRules = new CorsRules(config.corsAllowedOrigins);
  const admission = new Admission({
    ...config.overload,
    errorTypeBase: config.errorTypeBase,
    cors: corsRules,
    onShed: shedLog.shed,
    loopBusy,
  });
  const app = Fastify({
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    // docs/operations.md#overload: requests over the adaptive limit are refused before Fastify.
    // (Fastify sets a server's time-outs only when it makes the server: they are set here.)
    serverFactory: (handler) => {
      const server = createServer(admission.wrap(handler));
      server.keepAliveTimeout = config.timeouts.keepAliveMs;
      server.requestTimeout = config.timeouts.requestMs;
      return server;
    },
    genReqId,
    requestIdHeader: false, // genReqId reads and checks X-Request-Id itself
    // request-context logs one line per request, in place of Fastify's two.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: REQUEST_ID_LOG_LABEL }),
    bodyLimit: BODY_LIMIT,
    // n proxies in front: the socket's peer and the n-1 entries of X-Forwarded-For before it are
    // proxies, so the client is the n-th entry from the right (proxy-addr's hop count).
    trustProxy:
      typeof config.trustProxy === 'number'
        ? (
            (hops: number) => (_address: string, hop: number) =>
              hop < hops
          )(config.trustProxy)
        : config.trustProxy === false
          ? false
          : [...config.trustProxy],
    routerOptions: { maxParamLength: 200 },
    return503OnClosing: true,
    // docs/api-guide.md#limits-and-time-outs: receiving a request and idling between requests are bounded by the server.
    requestTimeout: config.timeouts.requestMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Malformed URLs and requests Node cannot parse get problem documents too (docs/api-guide.md#limits-and-time-outs).
    frameworkErrors: (_error, request, reply) => {
      sendProblem(reply, plain(400, 'The request URL is not valid.', { instance: safePath(request.url) }));
    },
    clientErrorHandler,
    // /api/users/** and /api/orders/** go to the version the headers choose.
    rewriteUrl: versionRewriter(config.apiVendor),
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.server.headersTimeout = Math.min(config.timeouts.headersMs, config.timeouts.requestMs);
  app.setValidatorCompiler(createValidatorCompiler());
  app.decorate('config', config);
  app.decorate('db', db);
  app.decorate('resolveHost', resolveHost);
  const key = config.encryption.key === undefined ? undefined : parseEncryptionKey(config.encryption.key);
  if (key === undefined)
    throw new Error('ENCRYPTION_KEY is not set (outside production, withDevelopmentSecret sets it)');
  const previousKey =
    config.encryption.previousKey === undefined ? undefined : parseEncryptionKey(config.encryption.previousKey);
  app.decorate('encryption', new Encryption(key, previousKey));
  const mailer = createMailer(
    {
      smtpUrl: config.mail.smtpUrl,
      from: config.mail.from,
      fileWithoutSmtp: config.env === 'development' ? developmentMailFile(config.dataDir) : undefined,
      ...mail,
    },
    app.log,
  );
  app.decorate('mailer', mailer);
  app.addHook('onClose', () => mailer.close());

  // Cross-cutting plugins, one file each, in the order their hooks run: CORS headers are set
  // before authentication can refuse, so that browsers can read every error.
  const routes = new RouteTable();
  await app.register(httpSpans); // first, so that every hook after it runs in the request's trace
  await app.register(requestContext);
  await app.register(metrics, { admission, logLinesDropped });
  await app.register(overload, { admission, shedLog, eventLoopDelayMs: config.overload.eventLoopDelayMs });
  await app.register(cors, { routes, rules: corsRules });
  await app.register(auth, authOptions);
  await app.register(rateLimit);
  await app.register(problems, { routes });
  await app.register(timeouts);
  await app.register(versioning);
  await app.register(contentNegotiation);
  await app.register(openapi, { extend: [addWebhooks] });
  await app.register(requestDatabase);
  await app.register(idempotency);
  await app.register(poolMetrics, { replicas });
  if (replicas !== undefined) await app.register(readReplicas, { replicas });
  await app.register(eventRetention);
  await app.register(reencryption);
  await app.register(webhookDelivery);
  await app.register(eventHub, eventStream);
  for (const observer of observers) await app.register(observer);

  // Resources.
  await app.register(publicRoutes, { prefix: '/api/public' });
  await app.register(productRoutes, { prefix: '/api/products' }); // unversioned
  await app.register(stockRoutes, { prefix: '/api/stock' });
  await app.register(v1, { prefix: '/api/v1' });
  await app.register(v2, { prefix: '/api/v2' });
  for (const plugin of plugins) await app.register(plugin);

  await app.ready();
  return app;
}
