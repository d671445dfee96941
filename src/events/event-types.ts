// DESIGN §12: the eleven event types, one per kind of change of a user or an order.
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
