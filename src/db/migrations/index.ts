import type { Migration } from 'kysely';
import * as m0001 from './0001_users.js';
import * as m0002 from './0002_password_resets.js';
import * as m0003 from './0003_products_stock.js';
import * as m0004 from './0004_orders.js';
import * as m0005 from './0005_user_profile.js';
import * as m0006 from './0006_versions.js';
import * as m0007 from './0007_idempotency_keys.js';
import * as m0008 from './0008_lists_at_scale.js';
import * as m0009 from './0009_events.js';
import * as m0010 from './0010_webhook_subscriptions.js';
import * as m0011 from './0011_webhook_deliveries.js';
import * as m0012 from './0012_event_stream.js';
import * as m0013 from './0013_webhook_notify_after_commit.js';
import * as m0014 from './0014_row_count_shards.js';
import * as m0015 from './0015_row_counts_plpgsql.js';
import * as m0016 from './0016_webhook_claim_functions.js';
import * as m0017 from './0017_deliveries_event_key.js';
import * as m0018 from './0018_record_delivered_plan.js';
import * as m0019 from './0019_events_by_owner.js';
import * as m0020 from './0020_delivery_fencing.js';
import * as m0021 from './0021_encryption_passes.js';
import * as m0022 from './0022_delivery_attempts_total.js';

/** Forward-only, applied in key order. Never edit a migration that has shipped; add one. */
export const migrations: Record<string, Migration> = {
  '0001_users': m0001,
  '0002_password_resets': m0002,
  '0003_products_stock': m0003,
  '0004_orders': m0004,
  '0005_user_profile': m0005,
  '0006_versions': m0006,
  '0007_idempotency_keys': m0007,
  '0008_lists_at_scale': m0008,
  '0009_events': m0009,
  '0010_webhook_subscriptions': m0010,
  '0011_webhook_deliveries': m0011,
  '0012_event_stream': m0012,
  '0013_webhook_notify_after_commit': m0013,
  '0014_row_count_shards': m0014,
  '0015_row_counts_plpgsql': m0015,
  '0016_webhook_claim_functions': m0016,
  '0017_deliveries_event_key': m0017,
  '0018_record_delivered_plan': m0018,
  '0019_events_by_owner': m0019,
  '0020_delivery_fencing': m0020,
  '0021_encryption_passes': m0021,
  '0022_delivery_attempts_total': m0022,
};
