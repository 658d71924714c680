export { type PostgresServer, startPostgresServer } from './postgres-server.js';
export { freeLoopbackPort, type RedisServer, startRedisServer } from './redis-server.js';
