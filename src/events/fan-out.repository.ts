// The fan-out of an event into webhook deliveries, as SQL that the statement writing the event
// carries (events/events.repository.ts): one delivery for every enabled subscription that wants
// it, in the same statement as the event, so both commit with the change or neither does; and
// what the statement hands back to this process's dispatcher (handoff.ts).
import { sql, type RawBuilder } from 'kysely';
import type { EventType } from './event-types.js';

/** How an event's deliveries are inserted: leased at insert to this process for `leaseMs`, or not (null). */
export interface FanOut {
  readonly leaseMs: number | null;
}

/** A fan-out as one bound value of a prepared statement, and back. */
export const fanOutArgument = (fan: FanOut): number | null => fan.leaseMs;
export const fanOutFromArgument = (argument: number | null): FanOut => ({ leaseMs: argument });

/**
 * A delivery handed to the dispatcher of the process that wrote it, already leased to it: what
 * sending it needs, as a claim returns it (deliveries.repository.ts).
 */
export interface LeasedDelivery {
  id: number;
  subscription_id: number;
  attempts: number;
  /** The lease's fencing token (migration 0020): the outcome is recorded under it. */
  fencing_token: number;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  event_id: string;
  event_type: EventType;
  subject: string;
  time: Date;
  data: string;
  /** The `traceparent` of the request that wrote the event (tracing on and sampled), else null. */
  trace_context: string | null;
}

/** A new event's deliveries: the ids of those to claim, and those leased to this process at insert. */
export interface NewDeliveries {
  ids: number[];
  leased: LeasedDelivery[];
}

/**
 * The outbox's fan-out, as a statement for a WITH item: one webhook delivery for every enabled
 * subscription that wants the type of the event in `events` (a WITH item returning `sequence`,
 * `type`, `subject`): exactly, by `user.*` / `order.*`, or `*` (docs/webhooks.md).
 *
 * With a `leaseMs` (given for the event that creates its subject: nothing earlier of that subject
 * can be waiting, so the order rule holds without a look), each delivery is inserted already
 * claimed by the writing process for that long, as the dispatcher's claim would (`attempts` 1,
 * leased), so that its dispatcher sends it after the commit without a claim statement; a killed
 * instance's lease lapses like a claimed one's. (A look for earlier deliveries of the subject in
 * this statement, so as to lease later events too, was left out: its plan, made while the table
 * was small, stayed costly once the table grew (docs/benchmark-log.md, the webhooks runs).)
 */
export function fanOut(events: string, { leaseMs }: FanOut): RawBuilder<unknown> {
  return sql`
    insert into webhook_deliveries (subscription_id, event_sequence, subject, attempts, fencing_token, leased_until,
                                    last_attempt_at)
    select s.id, e.sequence, e.subject, (${leaseMs}::integer is not null)::int, (${leaseMs}::integer is not null)::int,
           now() + ${leaseMs}::integer * interval '1 millisecond',
           case when ${leaseMs}::integer is not null then now() end
      from ${sql.table(events)} e join webhook_subscriptions s
        on s.enabled and s.events && array[e.type, split_part(e.type, '.', 1) || '.*', '*']
    returning id, subscription_id, event_sequence, leased_until is not null as leased`;
}

/**
 * The deliveries of the WITH items `deliveries` (a fan-out) and `event` as one JSON text (null
 * when there are none): the id of each, or the whole of those leased at insert.
 */
export function handedOver(deliveries: string, event: string): RawBuilder<string | null> {
  return sql<string | null>`(
    select json_agg(case when d.leased then json_build_object(
             'id', d.id, 'subscription_id', d.subscription_id, 'url', s.url, 'secret', s.secret,
             'previous_secret', s.previous_secret, 'previous_secret_expires_at', s.previous_secret_expires_at,
             'event_id', e.id, 'event_type', e.type, 'subject', e.subject, 'time', e.time, 'data', e.data,
             'trace_context', e.trace_context)
           else to_json(d.id) end)::text
      from ${sql.table(deliveries)} d
      join ${sql.table(event)} e on e.sequence = d.event_sequence
      join webhook_subscriptions s on s.id = d.subscription_id)`;
}

type HandedOver =
  | number
  | (Omit<LeasedDelivery, 'attempts' | 'fencing_token' | 'time' | 'previous_secret_expires_at'> & {
      time: string;
      previous_secret_expires_at: string | null;
    });

/** Reads `handedOver`'s JSON text. */
export function newDeliveries(text: string | null): NewDeliveries {
  const ids: number[] = [];
  const leased: LeasedDelivery[] = [];
  for (const d of text === null ? [] : (JSON.parse(text) as HandedOver[])) {
    if (typeof d === 'number') ids.push(d);
    else
      leased.push({
        ...d,
        attempts: 1,
        fencing_token: 1,
        time: new Date(d.time),
        previous_secret_expires_at:
          d.previous_secret_expires_at === null ? null : new Date(d.previous_secret_expires_at),
      });
  }
  return { ids, leased };
}
