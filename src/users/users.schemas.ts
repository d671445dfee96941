import { Type, type Static } from 'typebox';
import { NotBlank, NotBlankEmail, Page, PostalCode } from '../http/schemas.js';

export const UserV1Schema = Type.Object(
  {
    id: Type.Integer({ description: '64-bit identifier, server-generated' }),
    name: Type.String(),
    email: Type.String(),
    createdAt: Type.String({
      description: 'Local date-time without zone (UTC wall clock), e.g. 2026-11-21T22:34:23.123',
      examples: ['2026-11-21T22:34:23.123'],
    }),
  },
  { title: 'UserResponse' },
);
export type UserV1 = Static<typeof UserV1Schema>;

const Name = () => NotBlank({ minLength: 2, maxLength: 100 });
const Password = () => NotBlank({ minLength: 8, maxLength: 72, writeOnly: true });

export const CreateUserV1Schema = Type.Object(
  { name: Name(), email: NotBlankEmail(), password: Password() },
  { title: 'CreateUserRequest', description: 'Unknown members are ignored (spec 9.3).' },
);
export type CreateUserV1 = Static<typeof CreateUserV1Schema>;

export const UpdateUserV1Schema = Type.Object(
  { name: Name(), email: NotBlankEmail() },
  { title: 'UpdateUserRequest', description: 'Full replace: every field is required (spec 4.1 rule 2).' },
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
  { currentPassword: NotBlank({ writeOnly: true }), newPassword: Password() },
  { title: 'PasswordChangeRequest' },
);
export type PasswordChange = Static<typeof PasswordChangeSchema>;

export const USER_SORT_FIELDS = ['id', 'name', 'email', 'createdAt'] as const;
export type UserSortField = (typeof USER_SORT_FIELDS)[number];

export const UserListQuerySchema = Type.Object({
  page: Type.Integer({ minimum: 0, maximum: 10_000_000, default: 0, description: 'zero-based page index' }),
  size: Type.Integer({ minimum: 1, default: 20, description: 'page size; values above 100 are treated as 100' }),
  sort: Type.String({
    default: 'id',
    pattern: `^(${USER_SORT_FIELDS.join('|')})(,(asc|desc|ASC|DESC))?$`,
    'x-message': `must be one of ${USER_SORT_FIELDS.join(', ')}, optionally followed by ,asc or ,desc`,
    description: 'field[,asc|desc]; ties are broken by id',
  }),
});
export type UserListQuery = Static<typeof UserListQuerySchema>;

export const UserPageV1Schema = Page(UserV1Schema);

// v2 (spec 2.1 extended create, DESIGN §6): age and address, validated recursively.
const Age = () => Type.Integer({ minimum: 18, maximum: 120 });
const AddressRequestSchema = Type.Object(
  { street: NotBlank({ maxLength: 200 }), postalCode: PostalCode() },
  { title: 'AddressRequest' },
);

export const UserV2Schema = Type.Object(
  {
    id: Type.Integer({ description: '64-bit identifier, server-generated' }),
    name: Type.String(),
    email: Type.String(),
    age: Type.Union([Type.Integer(), Type.Null()], { description: 'null for users created through v1' }),
    address: Type.Union([
      Type.Object({ street: Type.String(), postalCode: Type.String() }, { title: 'Address' }),
      Type.Null(),
    ]),
    createdAt: Type.String({
      description: 'Local date-time without zone (UTC wall clock)',
      examples: ['2026-11-21T22:34:23.123'],
    }),
  },
  { title: 'UserResponseV2' },
);

export const CreateUserV2Schema = Type.Object(
  { name: Name(), email: NotBlankEmail(), password: Password(), age: Age(), address: AddressRequestSchema },
  { title: 'CreateUserRequestV2', description: 'Unknown members are ignored (spec 9.3).' },
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

export const UserPageV2Schema = Page(UserV2Schema);
