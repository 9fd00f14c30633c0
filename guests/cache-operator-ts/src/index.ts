// The component's entry: the WIT exports of the Cache operator.
import { exportOperator } from "../../sdk-ts/src/index.ts";
import { CacheOperator } from "./cache.ts";

export const operator = exportOperator(CacheOperator);
