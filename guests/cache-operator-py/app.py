"""The component's entry: the WIT exports of the Cache operator."""

from cache import CacheOperator
from wasmop_sdk import export_operator

Operator = export_operator(CacheOperator())
