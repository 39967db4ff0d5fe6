# One image for every service; SERVICE picks which one runs (agents, sessions, playground, telephony, webhooks,
# gateway).
FROM node:22.13.1-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json turbo.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
RUN npm ci --no-audit --no-fund && npx turbo run build && npm prune --omit=dev

FROM node:22.13.1-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build --chown=node:node /app /app
USER node
ARG SERVICE
ENV SERVICE=${SERVICE}
# exec: the service itself receives SIGTERM and drains (main.ts owns the lifecycle). AsyncLocalStorage without a
# hook on every promise (Node 22.7+; the default from Node 24): docs/decisions/0027.
CMD ["sh", "-c", "exec node --experimental-async-context-frame services/${SERVICE}/dist/main.js"]
