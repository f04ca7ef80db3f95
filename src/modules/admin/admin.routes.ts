import type { AppDeps } from '../../deps.js';
import { opsAdminRoutes } from '../../ops/ops.admin-routes.js';
import { attributionAdminRoutes } from '../attribution/attribution.admin-routes.js';
import { brandAdminRoutes } from '../brands/brands.admin-routes.js';
import { payoutAdminRoutes } from '../payouts/payouts.admin-routes.js';
import { programAdminRoutes } from '../programs/programs.admin-routes.js';
import { programPreviewRoutes } from '../programs/programs.preview-routes.js';
import { recalculationAdminRoutes } from '../recalculations/recalculations.admin-routes.js';

/** The ops surface of admin-api.md, guarded by ADMIN_TOKEN where it is mounted. */
export function adminRoutes(deps: AppDeps) {
  return [
    ...brandAdminRoutes(deps),
    ...attributionAdminRoutes(deps),
    ...payoutAdminRoutes(deps),
    ...programAdminRoutes(deps),
    ...programPreviewRoutes(deps),
    ...recalculationAdminRoutes(deps),
    ...opsAdminRoutes(deps),
  ];
}
