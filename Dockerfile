# syntax=docker/dockerfile:1
# The service's image (docs/deployment.md): built in one stage, run from a small one.
#
#   docker build -t resource-api .          (or podman build; behind a TLS-inspecting proxy:
#                                            --secret id=ca,src=/path/to/proxy-ca.pem)
#   docker run -p 8080:8080 -e DATABASE_URL=… -e JWT_SECRET=… -e ENCRYPTION_KEY=… resource-api
#
# The Node.js release the image runs, exactly: one line of one supported LTS (docs/deployment.md,
# "Runtime policy"). CI's main test pass and the image test read this line too, so changing it
# here moves them all. NODE_DIGEST pins the base image's content as well as its name:
# --build-arg NODE_DIGEST=@sha256:<digest of node:<NODE_VERSION>-bookworm-slim>.
ARG NODE_VERSION=24.22.3
ARG NODE_DIGEST=

# ---- build: every dependency, the TypeScript compiled, then the development ones dropped ----
FROM node:${NODE_VERSION}-bookworm-slim${NODE_DIGEST} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# The registry's TLS signed by a proxy's own CA: pass it as a build secret (never a layer).
# Without the secret, npm reaches the registry with the CAs Node.js carries.
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
    && npm ci --no-audit --no-fund --no-update-notifier
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
COPY scripts/ scripts/
# No type declaration, readme or changelog of a dependency is read at run time; prune leaves the
# scopes of the development dependencies behind, empty.
# The password reset page's files are read from beside the compiled module.
RUN npm run build \
    && cp -r src/users/reset-page dist/src/users/ \
    && npm prune --omit=dev --no-audit --no-fund --no-update-notifier \
    && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -iname '*.md' \) -delete \
    && find node_modules -type d -empty -delete

# ---- runtime: the compiled service and its production dependencies, run as `node` ----------
FROM node:${NODE_VERSION}-bookworm-slim${NODE_DIGEST}
# The service's version (package.json's: the image test holds them equal) and where its source is.
ARG SERVICE_VERSION=0.1.0
ARG SOURCE_URL=https://example.invalid/resource-api
LABEL org.opencontainers.image.title="resource-api" \
      org.opencontainers.image.description="JSON-over-HTTP service for users, products, stock and orders" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.version="${SERVICE_VERSION}" \
      org.opencontainers.image.licenses="MIT"
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data \
    NPM_CONFIG_CACHE=/tmp/.npm \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
# Owned by root and read-only to the service: only DATA_DIR (the embedded engine's, a volume) is
# the node user's.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/dist/ dist/
COPY config/ config/
COPY scripts/start.mjs scripts/run.mjs scripts/
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
# Ready: the database answers (GET /api/public/health/ready); node itself asks, no curl needed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/api/public/health/ready`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself, not npm in front: SIGTERM reaches the service, which stops gracefully.
CMD ["node", "--enable-source-maps", "dist/src/server.js"]
