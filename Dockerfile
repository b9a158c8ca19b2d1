# The official image a user pulls; NODE_IMAGE names another (scripts/containers.sh sets its local build).
ARG NODE_IMAGE=node:24-bookworm-slim

# The build: every dependency, the TypeScript compiled into dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --no-audit --no-fund
COPY contracts ./contracts
COPY src ./src
COPY examples ./examples
RUN npm run build

# The MCP host of docker-compose.yml (`target: mcp-host`): the build, whose dependencies include the
# reference MCP servers it runs (@modelcontextprotocol/server-filesystem, a devDependency), as the
# node user, with /srv/shared for the volume the filesystem server serves.
FROM build AS mcp-host
RUN mkdir -p /srv/shared && chown node:node /srv/shared
USER node
CMD ["node", "dist/src/cli/main.js", "mcp-host"]

# The service: the production dependencies and the compiled code, nothing the build needed.
FROM ${NODE_IMAGE}
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY contracts ./contracts
COPY examples ./examples
COPY --from=build /app/dist ./dist
USER node
CMD ["node", "dist/src/main.js"]
