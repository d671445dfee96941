import { sql, type Kysely } from 'kysely';

// Integrity lives in the schema as well as in the validators: NOT NULL, length checks, and
// e-mail uniqueness ignoring case (docs/api-guide.md#users), which is what makes concurrent creates safe.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table users (
      id            bigint generated always as identity primary key,
      name          text not null constraint users_name_check check (char_length(name) between 2 and 100 and name ~ '\\S'),
      email         text not null constraint users_email_check check (char_length(email) between 3 and 320 and position('@' in email) > 1),
      password_hash text not null,
      created_at    timestamptz not null default now(),
      updated_at    timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index users_email_key on users (lower(email))`.execute(db);
  // One index per list sort (docs/api-guide.md#users), each ending in id, the tie-breaker.
  await sql`create index users_name_id_idx on users (name, id)`.execute(db);
  await sql`create index users_email_id_idx on users (email, id)`.execute(db);
  await sql`create index users_created_at_id_idx on users (created_at, id)`.execute(db);
}
