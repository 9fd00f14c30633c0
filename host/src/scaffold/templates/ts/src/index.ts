// The component's entry: the WIT exports of the {{name}} guest.
import { exportOperator } from "../sdk/index.ts";
import { Guest } from "./guest.ts";

export const operator = exportOperator(Guest);
