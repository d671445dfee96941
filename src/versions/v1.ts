// Table of contents of /api/v1 (STYLE principle 8).
import type { FastifyPluginAsync } from 'fastify';
import usersV1 from '../users/users.v1.routes.js';

const v1: FastifyPluginAsync = async (app) => {
  await app.register(usersV1, { prefix: '/users' });
};

export default v1;
