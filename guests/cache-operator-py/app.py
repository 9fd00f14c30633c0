"""The component's entry: the WIT exports of the Cache operator (reconcile,
admission and conversion: the world ``webhook-guest``)."""

from cache import CacheOperator
from wasmop_sdk import export_admission, export_conversion, export_operator

Operator = export_operator(CacheOperator())
Admission = export_admission(CacheOperator())
Conversion = export_conversion(CacheOperator())
