// Hooks that only a request able to write needs. Most requests are reads; a hook on every
// route would run for each of them to find that nothing changed.
import type { FastifyInstance, onResponseHookHandler } from 'fastify';

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Runs `hook` after the answer of every request to a route that can write (any method but GET,
 * HEAD and OPTIONS), for the routes registered after this call (register it before them).
 */
export function onWriteResponse(app: FastifyInstance, hook: onResponseHookHandler): void {
  app.addHook('onRoute', (route) => {
    if ([route.method].flat().every((method) => READS.has(method))) return;
    const hooks = route.onResponse;
    route.onResponse = hooks === undefined ? [hook] : [hooks, hook].flat();
  });
}
