// /api/v1/users: id, name, email, createdAt; problems in the v1 users form.
import {
  CreateUserV1Schema,
  PatchUserV1Schema,
  UpdateUserV1Schema,
  UserPageV1Schema,
  UserV1Schema,
} from './users.schemas.js';
import { userRoutes } from './users.routes.js';

export default userRoutes({
  version: 1,
  problemForm: 'users-v1',
  schemas: {
    user: UserV1Schema,
    page: UserPageV1Schema,
    create: CreateUserV1Schema,
    replace: UpdateUserV1Schema,
    patch: PatchUserV1Schema,
  },
  create: ({ name, email, password }) => ({ name, email, password }),
  change: ({ name, email }) => ({ name, email }),
});
