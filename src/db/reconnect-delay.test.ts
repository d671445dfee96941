// How long a connection waits before its next attempt after failed ones (reconnect-delay.ts).
// postgres.js's own schedule grows to 20 s: after a failover, a connection slept through the new
// primary's first seconds with requests queued on it (test/processes/failover.test.ts).
import { describe, expect, it } from 'vitest';
import { reconnectDelaySeconds } from './reconnect-delay.js';

describe('the reconnection delay', () => {
  it('starts at tens of milliseconds and never passes one second, however many attempts failed', () => {
    for (let i = 0; i < 200; i++) {
      expect(reconnectDelaySeconds(1)).toBeLessThanOrEqual(0.1);
      for (const retries of [6, 10, 30, 1000]) {
        const delay = reconnectDelaySeconds(retries);
        expect(delay).toBeGreaterThanOrEqual(0.5);
        expect(delay).toBeLessThanOrEqual(1);
      }
    }
  });

  it('is jittered, so that instances do not retry in step', () => {
    const delays = new Set(Array.from({ length: 20 }, () => reconnectDelaySeconds(10)));
    expect(delays.size).toBeGreaterThan(10);
  });
});
