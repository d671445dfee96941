// The layering rules of docs/architecture.md, as lint rules (no-restricted-imports), so that a
// change that breaks them fails `npm run lint`. test/docs/boundaries.test.ts proves each one fires.
//
//   routes (Fastify, TypeBox) → service (rules) → repository (Kysely) → table
//
// - A service imports neither Fastify nor Kysely's `sql`: no HTTP and no SQL in the rules.
// - Routes, schemas and HTTP plugins never import Kysely, a repository or a table.
// - A repository or table does not import the wire schemas (its types are the database's).
// - A resource folder (users, orders, products, events, webhooks) reaches into another only
//   through that folder's index.ts, its named entry point for other resources.
// - The framework (http/) imports no resource folder: app.ts, the composition root, hands it
//   what it needs. A feature room of http/ (idempotency/, paging/) keeps its SQL in its own
//   *.repository.ts and *.table.ts, which its plugin may import; no other framework file may.
// - The database drivers (postgres, @electric-sql/pglite) are imported in db/ only.
import tseslint from 'typescript-eslint';

const RESOURCES = ['users', 'orders', 'products', 'events', 'webhooks'];

const FASTIFY = {
  group: ['fastify', 'fastify-plugin', '@fastify/*'],
  message: 'A service holds the rules, not HTTP: take plain arguments and throw domain errors (errors.ts).',
};
const KYSELY_SQL = {
  name: 'kysely',
  importNames: ['sql'],
  message: 'A service holds no SQL: add a function to the repository.',
};
const KYSELY = {
  group: ['kysely'],
  message: 'Routes and HTTP plugins never touch the database: call a service (or a db/ function).',
};
const DATA_LAYER = {
  group: ['**/*.repository.js', '**/*.table.js'],
  message: 'Routes call services; repositories and tables are the service layer’s business.',
};
const WIRE_SCHEMAS = {
  group: ['**/*.schemas.js', '**/http/**'],
  message: 'The data layer speaks in rows: define the type in the table or repository, not the wire schema.',
};

const DRIVERS = {
  group: ['postgres', '@electric-sql/pglite', '@electric-sql/pglite/*'],
  message: 'Only db/ talks to the database driver: add a function there (or use the Kysely handle).',
};
const RESOURCE_FOLDERS = {
  group: RESOURCES.map((r) => `**/${r}/**`),
  message: 'The framework imports no resource: take it as a plugin option and let app.ts pass it.',
};
/** A feature room's own repository and table, which its plugin may use. */
const OTHER_DATA_LAYER = {
  group: ['**/*.repository.js', '**/*.table.js', '!./*.repository.js', '!./*.table.js'],
  message: 'A feature room reaches only its own repository and table.',
};

/** Another resource, except through its index.ts. */
function otherResources(self) {
  return RESOURCES.filter((r) => r !== self).map((other) => ({
    group: [`**/${other}/**`, `!**/${other}/index.js`],
    message: `Reach ${other}/ through ../${other}/index.js, its entry point for other resources.`,
  }));
}

function restrict(files, patterns, paths = []) {
  return { files, rules: { 'no-restricted-imports': ['error', { paths, patterns }] } };
}

/** A query built on a `db` or `trx` handed to the service: SQL without an `sql` import. */
const QUERY_BUILDING = {
  selector:
    'MemberExpression[property.name=/^(selectFrom|insertInto|updateTable|deleteFrom|mergeInto|replaceInto|with|selectNoFrom)$/]',
  message: 'A service holds no SQL: add a function to the repository and pass it the db or trx.',
};

// ESLint keeps one value per rule, the last that matches a file: each file's whole list of
// restrictions is therefore spelled out once, per layer and resource.
const layers = RESOURCES.flatMap((resource) => {
  const dir = `src/${resource}`;
  const others = otherResources(resource);
  return [
    restrict([`${dir}/**/*.ts`], [DRIVERS, ...others]),
    {
      ...restrict([`${dir}/**/*.service.ts`], [FASTIFY, ...others], [KYSELY_SQL]),
      rules: {
        ...restrict([], [FASTIFY, ...others], [KYSELY_SQL]).rules,
        'no-restricted-syntax': ['error', QUERY_BUILDING],
      },
    },
    restrict([`${dir}/**/*.routes.ts`, `${dir}/**/*.schemas.ts`], [KYSELY, DATA_LAYER, DRIVERS, ...others]),
    restrict([`${dir}/**/*.repository.ts`, `${dir}/**/*.table.ts`], [WIRE_SCHEMAS, FASTIFY, DRIVERS, ...others]),
  ];
});

/** Flat-config entries; parse TypeScript without type information, so tests can lint text. */
export const boundaries = [
  { files: ['src/**/*.ts'], languageOptions: { parser: tseslint.parser } },
  // Everything outside db/ and the resources: no driver.
  restrict(['src/*.ts', 'src/*/**/*.ts'], [DRIVERS]),
  restrict(['src/public/**/*.ts', 'src/versions/**/*.ts'], [KYSELY, DATA_LAYER, DRIVERS]),
  restrict(['src/http/**/*.ts'], [KYSELY, DATA_LAYER, DRIVERS, RESOURCE_FOLDERS]),
  // A feature room of http/: SQL in its repository and table, which its other files may import.
  restrict(['src/http/*/**/*.ts'], [KYSELY, OTHER_DATA_LAYER, DRIVERS, RESOURCE_FOLDERS]),
  restrict(
    ['src/http/*/**/*.repository.ts', 'src/http/*/**/*.table.ts'],
    [WIRE_SCHEMAS, FASTIFY, DRIVERS, RESOURCE_FOLDERS],
  ),
  restrict(['src/db/**/*.ts'], []),
  ...layers,
  // Tests reach into anything they need.
  { files: ['src/**/*.test.ts'], rules: { 'no-restricted-imports': 'off' } },
];
