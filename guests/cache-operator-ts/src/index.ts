// The component's entry: the WIT exports of the Cache operator (reconcile,
// admission and conversion: the world `webhook-guest`).
import { exportAdmission, exportConversion, exportOperator } from "../../sdk-ts/src/index.ts";
import { CacheOperator } from "./cache.ts";

export const operator = exportOperator(CacheOperator);
export const admission = exportAdmission(CacheOperator);
export const conversion = exportConversion(CacheOperator);
