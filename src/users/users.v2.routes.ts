// /api/v2/users (docs/api-guide.md#versions): v1's routes with age and address, and typed problems.
import {
  CreateUserV2Schema,
  PatchUserV2Schema,
  UpdateUserV2Schema,
  UserPageV2Schema,
  UserV2Schema,
} from './users.schemas.js';
import { userRoutes } from './users.routes.js';

export default userRoutes({
  version: 2,
  problemForm: 'typed',
  schemas: {
    user: UserV2Schema,
    page: UserPageV2Schema,
    create: CreateUserV2Schema,
    replace: UpdateUserV2Schema,
    patch: PatchUserV2Schema,
  },
  create: ({ name, email, password, age, address }) => ({ name, email, password, age, address }),
  change: ({ name, email, age, address }) => ({ name, email, age, address }),
});
