// How long a connection waits before its next round of the hosts after failed ones: the pool's
// pace (postgres-pool.ts) and the LISTEN connection's (notifications.ts). postgres.js's own
// schedule grows to 20 s: after a failover, a connection slept through the new primary's first
// seconds with requests queued on it (test/processes/failover.test.ts).

/**
 * Seconds before a connection's next attempt after `retries` failed ones: 50 ms doubling, at most
 * one second, each between half and all of it (many instances do not retry in step).
 */
export function reconnectDelaySeconds(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1);
}
