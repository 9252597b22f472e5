// store/postgres/webhookCycle.ts and webhookOutbox.ts import from here until they name the three modules.
export * from './webhookEndpoints.js';
export * from './webhookDeliveries.js';
export * from './eventOutbox.js';
