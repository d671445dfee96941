// Every instance, at start-up, re-encrypts in the background what is stored under another key
// than the current ENCRYPTION_KEY (the previous one, after a rotation) or not encrypted at all
// (rows written before secrets were encrypted): webhook secrets, then the stored answers of
// Idempotency-Keys, a batch at a time. Each row is rewritten only if it still holds the value
// read, so instances doing this at once, or a rotation of the secret meanwhile, lose nothing.
// Once it logs that nothing is left, ENCRYPTION_KEY_PREVIOUS can go.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  rewriteAnswerBodies,
  rewriteSubscriptionSecrets,
  storedAnswersToReencrypt,
  subscriptionSecretsToReencrypt,
} from './reencrypt.repository.js';

const BATCH = 500;

declare module 'fastify' {
  interface FastifyInstance {
    /** The start-up pass of reencrypt.ts: how many values it rewrote (tests wait for it). */
    secretsReencrypted: Promise<{ subscriptions: number; answers: number }>;
  }
}

async function reencryption(app: FastifyInstance): Promise<void> {
  const { encryption, db } = app;
  const prefix = `enc1.${encryption.currentKeyId}.`;
  type Counts = { subscriptions: number; answers: number };
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
    let subscriptions = 0;
    for (const row of await subscriptionSecretsToReencrypt(db, prefix)) {
      if (stopped) break;
      const again = (value: string) =>
        encryption.encrypt(encryption.decrypt(value, 'webhook-secret'), 'webhook-secret');
      subscriptions += await rewriteSubscriptionSecrets(db, row, {
        secret: again(row.secret),
        previous_secret: row.previous_secret === null ? null : again(row.previous_secret),
      });
    }
    let answers = 0;
    for (let after = { subject: '', key: '' }; !stopped;) {
      const rows = await storedAnswersToReencrypt(db, prefix, after, BATCH);
      if (rows.length === 0) break;
      answers += await rewriteAnswerBodies(
        db,
        rows.map((r) => ({
          ...r,
          next: encryption.encrypt(encryption.decrypt(r.body, 'idempotency-answer'), 'idempotency-answer'),
        })),
      );
      after = rows.at(-1) as (typeof rows)[number];
    }
    return { subscriptions, answers };
  }

  app.addHook('onReady', (ready) => {
    pass().then(
      (counts) => {
        if (counts.subscriptions + counts.answers > 0)
          app.log.info(counts, 'secrets at rest re-encrypted under the current ENCRYPTION_KEY');
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
