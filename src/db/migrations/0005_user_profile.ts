import { sql, type Kysely } from 'kysely';

// v2 users (docs/api-guide.md#versions): age and address. Null for users created
// through v1, which has no such fields.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table users
      add column age integer constraint users_age_check check (age between 18 and 120),
      add column address_street text constraint users_address_street_check check (char_length(address_street) <= 200),
      add column address_postal_code text constraint users_address_postal_code_check check (address_postal_code ~ '^[0-9]{5}$'),
      add constraint users_address_check check ((address_street is null) = (address_postal_code is null))`.execute(db);
}
