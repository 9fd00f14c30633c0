"""The component's entry: the WIT exports of the {{name}} guest."""

from guest import Guest
from wasmop_sdk import export_operator

Operator = export_operator(Guest())
