// A webhook receiver: verifies each delivery's Standard Webhooks signature on the raw body,
// skips an event it has already handled (deliveries are at least once), and prints the event.
// Node's http module and the standardwebhooks package only (both installed by npm install):
//
//   RESOURCE_API_WEBHOOK_SECRET=whsec_… PORT=3000 npx tsx examples/webhook-receiver.ts
//
// and subscribe http://127.0.0.1:3000/ (development allows http: and loopback;
// docs/webhooks.md has the whole contract).
import { createServer } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

const secret = process.env.RESOURCE_API_WEBHOOK_SECRET;
if (secret === undefined || secret === '')
  throw new Error('set RESOURCE_API_WEBHOOK_SECRET to the subscription’s whsec_… secret');
const webhook = new Webhook(secret);
const seen = new Set<string>(); // a real receiver keeps this in its database, beside its own writes

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let event: { id: string; type: string; subject: string; data: unknown };
    try {
      // Throws on a bad signature, or a webhook-timestamp more than 5 minutes away.
      event = webhook.verify(body, request.headers as Record<string, string>) as typeof event;
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      response.writeHead(400).end();
      return;
    }
    if (!seen.has(event.id)) {
      seen.add(event.id);
      console.log(`${event.type} ${event.subject} ${JSON.stringify(event.data)}`);
    }
    response.writeHead(204).end(); // any 2xx within WEBHOOK_TIMEOUT_MS: delivered
  });
});
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(`listening on http://127.0.0.1:${port}/`);
});
