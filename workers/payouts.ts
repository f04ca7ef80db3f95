/**
 * The payout jobs live in order-confirmation.ts and payout-run.ts (one file per job); this keeps
 * the old import path of test/integration/payouts.test.ts working.
 */
export { confirmOrders } from './order-confirmation.js';
export { payOut } from './payout-run.js';
