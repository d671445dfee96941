// docs/webhooks.md: the eleven event types, one per kind of change of a user or an order.
export const EVENT_TYPES = [
  'user.created',
  'user.updated',
  'user.password_changed',
  'user.deleted',
  'order.created',
  'order.updated',
  'order.confirmed',
  'order.shipped',
  'order.delivered',
  'order.cancelled',
  'order.deleted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** What a subscription or a stream asks for: an exact type, `user.*`, `order.*`, or `*`. */
export const EVENT_PATTERNS = [...EVENT_TYPES, 'user.*', 'order.*', '*'] as const;
export type EventPattern = (typeof EVENT_PATTERNS)[number];

/** True when `type` is one `pattern` asks for. */
export function matchesPattern(type: EventType, pattern: EventPattern): boolean {
  return pattern === type || pattern === '*' || (pattern.endsWith('.*') && type.startsWith(pattern.slice(0, -1)));
}
