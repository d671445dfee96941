// Every instance re-encrypts in the background what is stored under another key than the current
// ENCRYPTION_KEY (the previous one, after a rotation), in an earlier form (not bound to its row),
// or not encrypted at all (rows written before secrets were encrypted): webhook secrets, then the
// stored answers of Idempotency-Keys, a batch at a time. Each row is rewritten only if it still
// holds the value read, so instances doing this at once, or a rotation of the secret meanwhile,
// lose nothing; a pass that found a row changed so leaves it to the next one, and is not finished.
//
// During a rolling upgrade, instances of the earlier version keep writing the earlier form after
// the first new instance has passed over the tables, so one pass cannot leave nothing behind. A
// pass therefore runs at start-up and again every RECHECK_EVERY_MS until the current form has
// settled: until a day (IDEMPOTENCY_TTL_HOURS) and a margin have gone by since the first finished
// pass of the current form (encryption_passes). Whatever an earlier instance wrote meanwhile is
// converted by the next pass. Once settled, a start walks the webhook secrets only (a small
// table, and a secret never expires) and reads no stored answer: an answer that an instance of an
// earlier version wrote even later (one that outlived the upgrade by a day) stays readable and is
// gone at its expiry. While a previous key is configured (a rotation under way), every pass walks
// both tables, and the passes go on: an instance still on the old key may write under it. Once a
// pass that started after the last instance on the old key stopped has logged that it finished,
// ENCRYPTION_KEY_PREVIOUS can go (docs/webhooks.md, "Rotating ENCRYPTION_KEY").
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { answerBinding, subscriptionBinding, UndecryptableError, type Purpose } from './encryption.js';
import {
  passSettled,
  recordPass,
  rewriteAnswerBodies,
  rewriteSubscriptionSecrets,
  storedAnswersToReencrypt,
  subscriptionSecretsToReencrypt,
  type SecretsRow,
} from './reencrypt.repository.js';

const BATCH = 500;

/** How often a pass runs again until the current form has settled (or while rotating). */
export const RECHECK_EVERY_MS = 15 * 60_000;

/** After the first finished pass of a form, how much longer than IDEMPOTENCY_TTL_HOURS passes go on. */
const SETTLE_MARGIN_MS = 60 * 60_000;

declare module 'fastify' {
  interface FastifyInstance {
    /** The start-up pass of reencrypt.ts: how many values it rewrote (tests wait for it). */
    secretsReencrypted: Promise<{
      subscriptions: number;
      answers: number;
      undecryptable?: number;
      changed?: number;
      settled?: true;
    }>;
  }
}

async function reencryption(app: FastifyInstance): Promise<void> {
  const { encryption, db } = app;
  const prefix = encryption.currentPrefix;
  const settleMs = app.config.idempotencyTtlHours * 3_600_000 + SETTLE_MARGIN_MS;
  /**
   * Values rewritten; values no configured key decrypts for their row (left as they are); rows
   * that changed between their read and their rewrite (left to the next pass).
   */
  type Counts = { subscriptions: number; answers: number; undecryptable?: number; changed?: number; settled?: true };
  let done: (counts: Counts) => void = () => {};
  app.decorate(
    'secretsReencrypted',
    new Promise<Counts>((resolve) => {
      done = resolve;
    }),
  );
  let stopped = false;
  /** Read through a call: `stopped` changes while a pass awaits. */
  const halted = (): boolean => stopped;
  let timer: NodeJS.Timeout | undefined;
  app.addHook('preClose', (finish) => {
    stopped = true;
    clearTimeout(timer);
    finish();
  });

  async function pass(): Promise<Counts> {
    const settled = !encryption.rotating && (await passSettled(db, prefix, settleMs)) === true;
    const startedAt = new Date();
    let undecryptable = 0;
    // (A row rewritten only if it still holds what was read: one that changed meanwhile, a secret
    // rotated with the old one copied into previous_secret, may hold a value under the old key.)
    let changed = 0;
    /** `value` re-encrypted, or undefined (counted) when no configured key decrypts it for its row. */
    const again = (value: string, purpose: Purpose, binding: string): string | undefined => {
      try {
        return encryption.encrypt(encryption.decrypt(value, purpose, binding), purpose, binding);
      } catch (error) {
        if (!(error instanceof UndecryptableError)) throw error;
        undecryptable++;
        return undefined;
      }
    };
    let subscriptions = 0;
    for (let afterId = 0; !halted();) {
      const rows = await subscriptionSecretsToReencrypt(db, prefix, afterId, BATCH);
      if (rows.length === 0) break;
      for (const row of rows) {
        if (halted()) break;
        const binding = subscriptionBinding(row.id);
        const secret = again(row.secret, 'webhook-secret', binding);
        const previous = row.previous_secret === null ? null : again(row.previous_secret, 'webhook-secret', binding);
        if (secret === undefined || previous === undefined) continue;
        const written = await rewriteSubscriptionSecrets(db, row, { secret, previous_secret: previous });
        subscriptions += written;
        changed += 1 - written;
      }
      afterId = (rows.at(-1) as SecretsRow).id;
    }
    /** What the pass left: values no key decrypts, rows that changed under it. */
    const left = () => ({ ...(undecryptable > 0 ? { undecryptable } : {}), ...(changed > 0 ? { changed } : {}) });
    // (Settled, but a secret changed under the pass: not settled for this pass, so that the next
    // one, in RECHECK_EVERY_MS, looks again.)
    if (settled) return { subscriptions, answers: 0, ...left(), ...(changed > 0 ? {} : { settled }) };
    let answers = 0;
    for (let after = { subject: '', key: '' }; !stopped;) {
      const rows = await storedAnswersToReencrypt(db, prefix, after, BATCH);
      if (rows.length === 0) break;
      const next = rows.flatMap((r) => {
        const body = again(r.body, 'idempotency-answer', answerBinding(r.subject, r.key));
        return body === undefined ? [] : [{ ...r, next: body }];
      });
      const written = await rewriteAnswerBodies(db, next);
      answers += written;
      changed += next.length - written;
      after = rows.at(-1) as (typeof rows)[number];
    }
    // A value left undecryptable, or a row that changed under the pass, keeps it unfinished: the
    // next one looks again.
    if (!stopped && undecryptable === 0 && changed === 0) await recordPass(db, prefix, startedAt);
    return { subscriptions, answers, ...left() };
  }

  const report = (counts: Counts): void => {
    if (counts.undecryptable !== undefined)
      app.log.error(
        counts,
        'secrets at rest: some values decrypt under no configured key for their row (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS); they stay as they are',
      );
    else if (counts.changed !== undefined)
      app.log.info(
        counts,
        'secrets at rest: some values changed while this pass re-encrypted them; the next pass converts them',
      );
    else if (counts.settled !== true || counts.subscriptions > 0)
      app.log.info(
        counts,
        'secrets at rest: every value is encrypted under the current ENCRYPTION_KEY, bound to its row',
      );
  };

  /** One pass, then the next in RECHECK_EVERY_MS unless the form has settled. */
  const run = (first: boolean): void => {
    pass().then(
      (counts) => {
        // (A pass the instance's close stopped part-way says nothing of what is left: its line
        // would tell an operator that ENCRYPTION_KEY_PREVIOUS can go. `stopped` only turns true,
        // so false now means it was false throughout the pass. What it found undecryptable is
        // told all the same.)
        if (!stopped || counts.undecryptable !== undefined) report(counts);
        if (first) done(counts);
        if (counts.settled !== true && !stopped) {
          timer = setTimeout(() => run(false), RECHECK_EVERY_MS);
          timer.unref();
        }
      },
      (error: unknown) => {
        // A value no configured key decrypts stays as it is (its deliveries fail, saying why).
        if (!stopped) app.log.error({ err: error }, 're-encrypting secrets at rest under ENCRYPTION_KEY failed');
        if (first) done({ subscriptions: 0, answers: 0 });
      },
    );
  };

  app.addHook('onReady', (ready) => {
    run(true);
    ready();
  });
}

export default fp(reencryption, { name: 'reencryption' });
