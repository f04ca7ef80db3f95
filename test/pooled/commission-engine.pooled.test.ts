// Pricing with commission programs in the engine again, with the service behind a real
// transaction pooler: the version read with the load, the program statement (tiers, creator-month
// rows locked), the creator-months written with the group, publishing's fill of them, and 20
// concurrent orders of one creator-month (commission-engine.test.ts). The teardown fails the file
// if anything was left on a pooled server connection.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(async () => {
  await import('../integration/commission-engine.test.js');
});
