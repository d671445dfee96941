import { describe, expect, it } from 'vitest';
import { Batcher } from './batcher.js';

/** A send that records each batch and answers when told to. */
function recorder() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const send = (inputs: number[]) => {
    batches.push(inputs);
    return new Promise<number[]>((resolve) => pending.push(() => resolve(inputs.map((n) => n * 10))));
  };
  const answerAll = () => {
    for (const answer of pending.splice(0)) answer();
  };
  return { batches, send, answerAll };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
/** Two turns: a batch's end, then the flush it schedules. */
const settle = async () => {
  await turn();
  await turn();
};

describe('Batcher', () => {
  it('sends the calls of one turn together, and each gets its own answer', async () => {
    const { batches, send, answerAll } = recorder();
    const batcher = new Batcher(send, { maxSize: 10, maxInFlight: 1 });
    const answers = Promise.all([1, 2, 3].map((n) => batcher.call(n)));
    await turn();
    answerAll();
    expect(await answers).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('gathers calls while the batches in flight run, at most maxSize a batch, oldest first', async () => {
    const { batches, send, answerAll } = recorder();
    const batcher = new Batcher(send, { maxSize: 3, maxInFlight: 1 });
    const first = batcher.call(1);
    await turn();
    expect(batches).toEqual([[1]]);
    const later = [2, 3, 4, 5, 6, 7, 8].map((n) => batcher.call(n));
    await turn();
    expect(batches).toHaveLength(1); // one in flight: the rest wait
    answerAll();
    await first;
    await settle();
    expect(batches).toEqual([[1], [2, 3, 4]]);
    answerAll();
    await later[2];
    await settle();
    answerAll();
    await later[5];
    await settle();
    answerAll();
    expect(await Promise.all(later)).toEqual([20, 30, 40, 50, 60, 70, 80]);
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6, 7], [8]]);
  });

  it('with immediate, alone() goes at once while there is room, and calls gather only while batches are out', async () => {
    const { batches, send, answerAll } = recorder();
    const batcher = new Batcher(send, { maxSize: 10, maxInFlight: 2, immediate: true });
    const ran: number[] = [];
    const own = (n: number) => () => (ran.push(n), Promise.resolve(n * 100));
    // Room for two: each runs in the caller's own turn (no timer, no setImmediate).
    const first = batcher.alone(own(1));
    const second = batcher.alone(own(2));
    expect(ran).toEqual([1, 2]);
    // Two out: the next is declined, and calls wait for one to come back.
    expect(batcher.alone(own(3))).toBeUndefined();
    const later = [3, 4, 5].map((n) => batcher.call(n));
    expect(await Promise.all([first, second])).toEqual([100, 200]);
    await settle();
    expect(batches).toEqual([[3, 4, 5]]);
    // One batch out, room for another: alone() goes.
    let finish: (value: number) => void = () => {};
    const sixth = batcher.alone(() => (ran.push(6), new Promise<number>((resolve) => (finish = resolve))));
    expect(ran).toEqual([1, 2, 6]);
    // Both out again: a call waits, and alone() declines while it does (it would pass it).
    const waiting = batcher.call(9);
    expect(batcher.alone(own(10))).toBeUndefined();
    finish(600);
    expect(await sixth).toBe(600);
    await settle();
    expect(batches).toEqual([[3, 4, 5], [9]]);
    answerAll();
    expect(await Promise.all([...later, waiting])).toEqual([30, 40, 50, 90]);
    await settle();
    // Idle again: the next goes at once.
    expect(await batcher.alone(own(7))).toBe(700);
    expect(ran).toEqual([1, 2, 6, 7]);
    // call() always gathers, a turn later, even when idle.
    const gathered = batcher.call(8);
    expect(batches).toHaveLength(2);
    await turn();
    expect(batches.at(-1)).toEqual([8]);
    answerAll();
    expect(await gathered).toBe(80);
  });

  it("with immediate, alone() runs the caller's own statement while there is room, and calls gather behind it", async () => {
    const { batches, send, answerAll } = recorder();
    const batcher = new Batcher(send, { maxSize: 10, maxInFlight: 1, immediate: true });
    let finish: (value: string) => void = () => {};
    const own = batcher.alone(() => new Promise<string>((resolve) => (finish = resolve)));
    expect(own).toBeDefined();
    // Its room is taken: the next one is not run alone, and calls wait for it to come back.
    expect(batcher.alone(() => Promise.resolve('second'))).toBeUndefined();
    const later = [1, 2].map((n) => batcher.call(n));
    await turn();
    expect(batches).toEqual([]);
    finish('mine');
    expect(await own).toBe('mine');
    await settle();
    expect(batches).toEqual([[1, 2]]);
    answerAll();
    expect(await Promise.all(later)).toEqual([10, 20]);
    // Without immediate, never alone.
    expect(new Batcher(send, { maxSize: 10, maxInFlight: 1 }).alone(() => Promise.resolve(0))).toBeUndefined();
  });

  it('sends up to maxInFlight batches at once', async () => {
    const { batches, send, answerAll } = recorder();
    const batcher = new Batcher(send, { maxSize: 2, maxInFlight: 2 });
    const answers = [1, 2, 3, 4, 5].map((n) => batcher.call(n));
    await turn();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    answerAll();
    await answers[3];
    await settle();
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
    answerAll();
    expect(await Promise.all(answers)).toEqual([10, 20, 30, 40, 50]);
  });

  it('keeps one input’s failure to it, and fails every input when the batch fails', async () => {
    const one = new Batcher(
      async (inputs: number[]) => inputs.map((n) => (n === 2 ? Promise.reject(new Error('two')) : n)),
      { maxSize: 10, maxInFlight: 1 },
    );
    const settled = await Promise.allSettled([1, 2, 3].map((n) => one.call(n)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);

    let down = true;
    const all = new Batcher(
      async (inputs: number[]) => {
        if (down) throw new Error('down');
        return inputs;
      },
      { maxSize: 10, maxInFlight: 1 },
    );
    const failed = await Promise.allSettled([1, 2].map((n) => all.call(n)));
    expect(failed.map((s) => s.status)).toEqual(['rejected', 'rejected']);
    // And it goes on: the failed batch no longer counts as in flight.
    down = false;
    await expect(all.call(7)).resolves.toBe(7);
  });

  it('fails a batch answered with the wrong number of answers', async () => {
    const batcher = new Batcher(async () => [1], { maxSize: 10, maxInFlight: 1 });
    await expect(Promise.all([batcher.call(1), batcher.call(2)])).rejects.toThrow('a batch of 2 got 1 answers');
  });

  it('with minSpacingMs, sends the next batch no sooner than that after the last, gathering meanwhile', async () => {
    const sentAt: number[] = [];
    const batches: number[][] = [];
    const batcher = new Batcher(
      async (inputs: number[]) => {
        sentAt.push(performance.now());
        batches.push(inputs);
        return inputs;
      },
      { maxSize: 100, maxInFlight: 1, minSpacingMs: 40 },
    );
    await batcher.call(1); // the first leaves a turn later
    const later = [2, 3, 4].map((n) => batcher.call(n));
    await turn();
    const fifth = batcher.call(5);
    await Promise.all([...later, fifth]);

    expect(batches).toEqual([[1], [2, 3, 4, 5]]);
    expect(sentAt[1]! - sentAt[0]!).toBeGreaterThanOrEqual(39);
  });

  it('with maxWaitMs, fails a call that waited longer for its batch, and sends none whose caller has gone', async () => {
    const batches: number[][] = [];
    let release: () => void = () => {};
    const batcher = new Batcher(
      async (inputs: number[]) => {
        batches.push(inputs);
        if (batches.length === 1) await new Promise<void>((resolve) => (release = resolve));
        return inputs;
      },
      { maxSize: 100, maxInFlight: 1, maxWaitMs: 50, expired: () => new Error('waited too long') },
    );
    const first = batcher.call(1);
    await turn();
    // Two wait behind the first batch: one for longer than maxWaitMs, one whose caller leaves.
    const stale = batcher.call(2).then(
      () => 'answered',
      (error: unknown) => (error as Error).message,
    );
    await new Promise((resolve) => setTimeout(resolve, 80));
    let gone = false;
    const left = batcher.call(3, () => gone);
    const fresh = batcher.call(4);
    gone = true;
    release();
    expect(await first).toBe(1);
    expect(await stale).toBe('waited too long');
    await expect(left).rejects.toThrow('waited too long');
    expect(await fresh).toBe(4);
    expect(batches).toEqual([[1], [4]]);
  });

  // docs/operations.md#overload: queue time, not queue length, whatever holds the batch out.
  it('fails a waiting call once it has waited maxWaitMs, while the batch ahead of it is still out', async () => {
    let release: () => void = () => {};
    const batcher = new Batcher(
      async (inputs: number[]) => {
        if (inputs[0] === 1) await new Promise<void>((resolve) => (release = resolve));
        return inputs;
      },
      { maxSize: 100, maxInFlight: 1, maxWaitMs: 50, expired: () => new Error('waited too long') },
    );
    const first = batcher.call(1);
    await turn();
    const started = performance.now();
    const waiting = batcher.call(2).then(
      () => 'answered',
      (error: unknown) => (error as Error).message,
    );
    expect(await waiting).toBe('waited too long');
    expect(performance.now() - started).toBeLessThan(250);
    expect(batcher.waiting).toBe(0);
    release();
    expect(await first).toBe(1);
  });

  it('refuses a call at once beyond maxWaiting, and answers one that waited too long with late() when given', async () => {
    let release: () => void = () => {};
    let refused = 0;
    const batcher = new Batcher(
      async (inputs: number[]) => {
        if (inputs[0] === 1) await new Promise<void>((resolve) => (release = resolve));
        return inputs;
      },
      {
        maxSize: 100,
        maxInFlight: 1,
        maxWaitMs: 50,
        maxWaiting: 2,
        late: async (input) => -input,
        onRefused: () => refused++,
      },
    );
    const first = batcher.call(1);
    await turn();
    const waiting = [batcher.call(2), batcher.call(3)];
    expect(await batcher.call(4)).toBe(-4);
    expect(batcher.waiting).toBe(2);
    expect(await Promise.all(waiting)).toEqual([-2, -3]);
    expect(refused).toBe(3);
    release();
    expect(await first).toBe(1);
  });
});
