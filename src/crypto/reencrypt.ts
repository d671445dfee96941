// Every instance, at start-up, re-encrypts in the background what is stored under another key
// than the current ENCRYPTION_KEY (the previous one, after a rotation), in an earlier form (not
// bound to its row), or not encrypted at all (rows written before secrets were encrypted):
// webhook secrets, then the stored answers of Idempotency-Keys, a batch at a time. Each row is
// rewritten only if it still holds the value read, so instances doing this at once, or a
// rotation of the secret meanwhile, lose nothing.
//
// A pass that finished is recorded (encryption_passes, by the prefix of the values it left). A
// start with no previous key configured and such a record reads that one row and nothing else:
// every instance writes in the current form under its key, so nothing can be left. While a
// previous key is configured (a rotation under way), every start walks both tables: an instance
// still on the old key may have written under it since the last pass. Once a pass that started
// after the last instance on the old key stopped has logged that it finished,
// ENCRYPTION_KEY_PREVIOUS can go (docs/operations.md, "Rotating ENCRYPTION_KEY").
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { answerBinding, subscriptionBinding, UndecryptableError, type Purpose } from './encryption.js';
import {
  passFinished,
  recordPass,
  rewriteAnswerBodies,
  rewriteSubscriptionSecrets,
  storedAnswersToReencrypt,
  subscriptionSecretsToReencrypt,
} from './reencrypt.repository.js';

const BATCH = 500;

declare module 'fastify' {
  interface FastifyInstance {
    /** The start-up pass of reencrypt.ts: how many values it rewrote (tests wait for it). */
    secretsReencrypted: Promise<{ subscriptions: number; answers: number; skipped?: true }>;
  }
}

async function reencryption(app: FastifyInstance): Promise<void> {
  const { encryption, db } = app;
  const prefix = encryption.currentPrefix;
  /** Values rewritten; values no configured key decrypts for their row (left as they are). */
  type Counts = { subscriptions: number; answers: number; undecryptable?: number; skipped?: true };
  let done: (counts: Counts) => void = () => {};
  app.decorate(
    'secretsReencrypted',
    new Promise<Counts>((resolve) => {
      done = resolve;
    }),
  );
  let stopped = false;
  app.addHook('preClose', (finish) => {
    stopped = true;
    finish();
  });

  async function pass(): Promise<Counts> {
    if (!encryption.rotating && (await passFinished(db, prefix)))
      return { subscriptions: 0, answers: 0, skipped: true };
    const startedAt = new Date();
    let undecryptable = 0;
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
    for (const row of await subscriptionSecretsToReencrypt(db, prefix)) {
      if (stopped) break;
      const binding = subscriptionBinding(row.id);
      const secret = again(row.secret, 'webhook-secret', binding);
      const previous = row.previous_secret === null ? null : again(row.previous_secret, 'webhook-secret', binding);
      if (secret === undefined || previous === undefined) continue;
      subscriptions += await rewriteSubscriptionSecrets(db, row, { secret, previous_secret: previous });
    }
    let answers = 0;
    for (let after = { subject: '', key: '' }; !stopped;) {
      const rows = await storedAnswersToReencrypt(db, prefix, after, BATCH);
      if (rows.length === 0) break;
      const next = rows.flatMap((r) => {
        const body = again(r.body, 'idempotency-answer', answerBinding(r.subject, r.key));
        return body === undefined ? [] : [{ ...r, next: body }];
      });
      answers += await rewriteAnswerBodies(db, next);
      after = rows.at(-1) as (typeof rows)[number];
    }
    // A value left undecryptable keeps the pass unfinished: the next start looks again.
    if (!stopped && undecryptable === 0) await recordPass(db, prefix, startedAt);
    return { subscriptions, answers, ...(undecryptable > 0 ? { undecryptable } : {}) };
  }

  app.addHook('onReady', (ready) => {
    pass().then(
      (counts) => {
        if (counts.undecryptable !== undefined)
          app.log.error(
            counts,
            'secrets at rest: some values decrypt under no configured key for their row (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS); they stay as they are',
          );
        else if (counts.skipped !== true)
          app.log.info(
            counts,
            'secrets at rest: every value is encrypted under the current ENCRYPTION_KEY, bound to its row',
          );
        done(counts);
      },
      (error: unknown) => {
        // A value no configured key decrypts stays as it is (its deliveries fail, saying why).
        if (!stopped) app.log.error({ err: error }, 're-encrypting secrets at rest under ENCRYPTION_KEY failed');
        done({ subscriptions: 0, answers: 0 });
      },
    );
    ready();
  });
}

export default fp(reencryption, { name: 'reencryption' });
