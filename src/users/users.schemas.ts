import { Type, type Static } from 'typebox';
import { Id, NotBlank, NotBlankEmail, CursorParam, Page, PageParams, PostalCode, Text } from '../http/schemas.js';

const NAME_MAX = 100;
const EMAIL_MAX = 320;
const STREET_MAX = 200;
const LocalDateTime = (description: string) =>
  Type.String({
    maxLength: 23,
    pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,3})?$',
    description,
    examples: ['2026-11-21T22:34:23.123'],
  });

export const UserV1Schema = Type.Object(
  {
    id: Id('64-bit identifier, server-generated'),
    name: Text(NAME_MAX),
    email: Text(EMAIL_MAX),
    createdAt: LocalDateTime('Local date-time without zone (UTC wall clock), e.g. 2026-11-21T22:34:23.123'),
  },
  { title: 'UserResponse' },
);
export type UserV1 = Static<typeof UserV1Schema>;

const Name = () => NotBlank({ minLength: 2, maxLength: NAME_MAX });
const Password = () => NotBlank({ minLength: 8, maxLength: 72, writeOnly: true });

export const CreateUserV1Schema = Type.Object(
  { name: Name(), email: NotBlankEmail(), password: Password() },
  { title: 'CreateUserRequest', description: 'Unknown members are ignored.' },
);
export type CreateUserV1 = Static<typeof CreateUserV1Schema>;

export const UpdateUserV1Schema = Type.Object(
  { name: Name(), email: NotBlankEmail() },
  { title: 'UpdateUserRequest', description: 'Full replace: every field is required.' },
);
export type UpdateUserV1 = Static<typeof UpdateUserV1Schema>;

export const PatchUserV1Schema = Type.Object(
  { name: Type.Optional(Name()), email: Type.Optional(NotBlankEmail()) },
  {
    title: 'PatchUserRequest',
    description: 'Only the members sent change (application/json or application/merge-patch+json).',
  },
);
export type PatchUserV1 = Static<typeof PatchUserV1Schema>;

export const PasswordChangeSchema = Type.Object(
  { currentPassword: NotBlank({ maxLength: 1024, writeOnly: true }), newPassword: Password() },
  { title: 'PasswordChangeRequest' },
);
export type PasswordChange = Static<typeof PasswordChangeSchema>;

export const PasswordResetCompletionSchema = Type.Object(
  {
    token: NotBlank({ maxLength: 512, writeOnly: true, description: 'The token of the reset link' }),
    newPassword: Password(),
  },
  { title: 'PasswordResetCompletionRequest' },
);
export type PasswordResetCompletion = Static<typeof PasswordResetCompletionSchema>;

export const USER_SORT_FIELDS = ['id', 'name', 'email', 'createdAt'] as const;
export type UserSortField = (typeof USER_SORT_FIELDS)[number];

export const UserListQuerySchema = Type.Object({
  ...PageParams,
  cursor: CursorParam(),
  sort: Type.String({
    default: 'id',
    maxLength: 20,
    pattern: `^(${USER_SORT_FIELDS.join('|')})(,(asc|desc|ASC|DESC))?$`,
    'x-message': `must be one of ${USER_SORT_FIELDS.join(', ')}, optionally followed by ,asc or ,desc`,
    description: 'field[,asc|desc]; ties are broken by id',
  }),
});
export type UserListQuery = Static<typeof UserListQuerySchema>;

export const UserPageV1Schema = Page(UserV1Schema, 'UserPage');

// v2 (docs/api-guide.md#versions): age and address, validated recursively.
const Age = () => Type.Integer({ minimum: 18, maximum: 120 });
const AddressRequestSchema = Type.Object(
  { street: NotBlank({ maxLength: STREET_MAX }), postalCode: PostalCode() },
  { title: 'AddressRequest' },
);

export const UserV2Schema = Type.Object(
  {
    id: Id('64-bit identifier, server-generated'),
    name: Text(NAME_MAX),
    email: Text(EMAIL_MAX),
    age: Type.Union([Type.Integer({ minimum: 18, maximum: 120 }), Type.Null()], {
      description: 'null for users created through v1',
    }),
    address: Type.Union([
      Type.Object({ street: Text(STREET_MAX), postalCode: PostalCode() }, { title: 'Address' }),
      Type.Null(),
    ]),
    createdAt: LocalDateTime('Local date-time without zone (UTC wall clock)'),
  },
  { title: 'UserResponseV2' },
);

export const CreateUserV2Schema = Type.Object(
  { name: Name(), email: NotBlankEmail(), password: Password(), age: Age(), address: AddressRequestSchema },
  { title: 'CreateUserRequestV2', description: 'Unknown members are ignored.' },
);
export type CreateUserV2 = Static<typeof CreateUserV2Schema>;

export const UpdateUserV2Schema = Type.Object(
  { name: Name(), email: NotBlankEmail(), age: Age(), address: AddressRequestSchema },
  { title: 'UpdateUserRequestV2', description: 'Full replace: every field is required.' },
);
export type UpdateUserV2 = Static<typeof UpdateUserV2Schema>;

export const PatchUserV2Schema = Type.Object(
  {
    name: Type.Optional(Name()),
    email: Type.Optional(NotBlankEmail()),
    age: Type.Optional(Age()),
    address: Type.Optional(AddressRequestSchema),
  },
  { title: 'PatchUserRequestV2', description: 'Only the members sent change.' },
);
export type PatchUserV2 = Static<typeof PatchUserV2Schema>;

export const UserPageV2Schema = Page(UserV2Schema, 'UserPageV2');
