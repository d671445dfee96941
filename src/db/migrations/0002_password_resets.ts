import { sql, type Kysely } from 'kysely';

// A reset request keeps only a hash of its token (the token itself goes out of band, docs/api-guide.md#users),
// and dies with its user.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table password_resets (
      id          bigint generated always as identity primary key,
      user_id     bigint not null references users (id) on delete cascade,
      token_hash  text not null unique,
      expires_at  timestamptz not null,
      created_at  timestamptz not null default now()
    )`.execute(db);
  await sql`create index password_resets_user_id_idx on password_resets (user_id)`.execute(db);
}
