// Webhooks: what other folders use. events/ writes each event's deliveries in the statement that
// writes the event (fanOut, handedOver, newDeliveries) and hands them to this process's
// dispatcher once committed (fanOutFor, handOver); app.ts registers the delivery plugin and the
// OpenAPI webhooks section; everything else stays inside.
export {
  fanOut,
  fanOutArgument,
  fanOutFromArgument,
  handedOver,
  newDeliveries,
  type FanOut,
  type LeasedDelivery,
  type NewDeliveries,
} from './delivery/fan-out.repository.js';
export { deliveryHandoff, fanOutFor, handOver, type DeliveryHandoff } from './delivery/handoff.js';
