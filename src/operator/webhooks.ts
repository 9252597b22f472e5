// console/handlers.ts and console/server.ts import the webhook operations from here until they name the two modules.
export * from './webhookEndpoints.js';
export * from './webhookDeliveries.js';
