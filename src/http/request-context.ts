// Per-request plumbing: the request id (X-Request-Id in, or a new one; echoed back), one log
// line per request, and the headers every response carries (DESIGN §7).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A health probe: its request line is logged at debug, not info. */
    probe?: boolean;
  }
}

// A caller's id is kept only if it is short and plain, so it cannot forge log lines.
const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

export function genReqId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
}

async function requestContext(app: FastifyInstance): Promise<void> {
  // Once shutdown starts, each response closes its connection, so that a request in flight at
  // SIGTERM does not leave a keep-alive socket holding the process for its idle timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  // Hooks on every request are callback-style: an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const line = {
      method: request.method,
      url: request.originalUrl,
      statusCode: reply.statusCode,
      responseTime: Math.round(reply.elapsedTime * 100) / 100,
    };
    // Health probes arrive every few seconds from every load balancer: logged at debug only.
    if (request.routeOptions.config.probe === true) request.log.debug(line, 'request completed');
    else request.log.info(line, 'request completed');
    done();
  });
}

export default fp(requestContext, { name: 'request-context' });
