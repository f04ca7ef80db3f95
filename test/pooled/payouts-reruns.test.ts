// test/integration/payouts-reruns.test.ts again, with the service behind a real transaction pooler.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(() => import('../integration/payouts-reruns.test.js'));
