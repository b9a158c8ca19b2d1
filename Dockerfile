# The official image a user pulls; NODE_IMAGE names another (scripts/containers.sh sets its local build).
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --no-audit --no-fund
COPY contracts ./contracts
COPY src ./src
COPY examples ./examples
RUN npm run build && npm prune --omit=dev
USER node
CMD ["node", "dist/src/main.js"]
